"""Every lab in JupyterLab, in headless Chromium: it runs clean, its widgets draw and respond, its Mermaid diagrams
draw legibly, its quizzes answer a click and show no answer before the learner asks, also in a lab opened before
it runs (browser suite: `python3 dev.py browser`).

For each notebooks/NN-*.ipynb the `lab_run` fixture opens the lab in a private JupyterLab (tests/browser/
conftest.py), restarts the kernel and runs all cells through the Kernel menu, waits for the kernel to go idle,
and saves a screenshot to the folder the run prints. The tests then check what a learner would see, against
what the committed .ipynb says is there (tests/browser/labcheck.py), so a lab without widgets, quizzes or
diagrams has zero of them to check and a lab that gains one is checked with no edit here.

Why Playwright, and not the raw Chrome DevTools Protocol:

* Waiting is the whole difficulty of this suite (a prompt going from [*] to [12], a figure redrawn after a
  slider moved, a diagram decoded). Playwright's locators and `expect` re-evaluate a condition in the page
  until it holds; over raw CDP we would write that polling, and the event bookkeeping behind it, ourselves.
* Input that a widget believes: a key press on a slider handle or an option picked in a `<select>` is one call,
  with the element scrolled into view and checked for visibility first; over CDP each is several
  Input/DOM commands with coordinates we would compute.
* It owns the browser's life: launch with a fresh temporary profile, one pipe (no debugging port to find or
  leak), close and clean up, also when a test fails.
* It installs from PyPI as an ordinary pinned dependency (the `browser` extra) and drives the operating
  system's Chromium through `executable_path`, so no browser is downloaded. Its one risk, a system Chromium
  newer than the Playwright release, touches only stable protocol domains used here (pages, DOM, input,
  screenshots): Playwright 1.65 drives Debian's Chromium 156.

Widgets are moved with the keyboard and dropdowns with the select element (what a person does); nothing
reaches into JupyterLab's JavaScript objects, so the tests see only what the page shows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import LABS
from .labcheck import (
    Expectations,
    LabRun,
    check_cells_ran,
    check_mermaid,
    check_quiz_answers_hidden,
    check_quizzes,
    check_saved_quizzes,
    check_widgets_render,
    check_widgets_respond,
    open_saved,
    run_lab,
)

README_SCREENSHOT_ENV = "STREAMLAB_README_SCREENSHOT"
README_LAB = "04"  # its explorer (sliders, a figure) shows what the labs look like


def save_readme_screenshot(run: LabRun, path: Path) -> None:
    """The README's picture: the lab's first widget at the top of the view, saved as a small palette PNG."""
    from PIL import Image

    first = min(run.expect.widgets or run.expect.mermaid or {0: 0})
    page = run.notebook.page
    page.keyboard.press("Control+b")  # more room for the lab: hide the file browser (View > Appearance)
    page.locator("#jp-left-stack").wait_for(state="hidden")
    run.notebook.wait_idle()  # whatever the last control moved has been redrawn
    raw = path.with_suffix(".raw.png")
    run.notebook.screenshot(raw, index=first)
    with Image.open(raw) as image:
        image.convert("RGB").quantize(colors=64).save(path, optimize=True)
    raw.unlink()


@pytest.fixture(scope="module", params=LABS, ids=[p.stem for p in LABS])
def lab_run(
    request: pytest.FixtureRequest, browser_context, jupyterlab, committed_labs: dict[str, dict], artifacts: Path
) -> Iterator[LabRun]:
    """One lab, run once through the UI; every test below reads the same run."""
    path: Path = request.param
    expect = Expectations.from_notebook(committed_labs[path.name], name=path.stem)
    page = browser_context.new_page()
    try:
        run = run_lab(page, jupyterlab.url, path.name, expect, shots=artifacts)
        yield run
        target = os.environ.get(README_SCREENSHOT_ENV)
        if target and path.stem.startswith(README_LAB):
            save_readme_screenshot(run, Path(target))
        with (artifacts / "summary.txt").open("a", encoding="utf-8") as out:
            timings = " ".join(f"{k} {v:.1f} s" for k, v in run.notebook.timings.items())
            counts = ", ".join(f"{k} {v}" for k, v in sorted(run.counts.items()))
            out.write(f"{path.stem}: {timings}; {counts}\n")
    finally:
        page.close()
        jupyterlab.shutdown_kernels()  # the next lab starts on a quiet machine


def _report(problems: list[str]) -> str:
    return "\n".join(problems)


def test_every_code_cell_runs_without_an_error(lab_run: LabRun) -> None:
    problems = check_cells_ran(lab_run)
    assert not problems, _report(problems) + f"\nscreenshot: {lab_run.screenshot}"


def test_every_widget_renders_as_a_widget(lab_run: LabRun) -> None:
    problems = check_widgets_render(lab_run)
    assert not problems, _report(problems)
    assert lab_run.counts["widgets"] >= sum(lab_run.expect.widgets.values())


def test_every_widget_responds_to_its_controls(lab_run: LabRun) -> None:
    problems = check_widgets_respond(lab_run)
    assert not problems, _report(problems)


def test_every_mermaid_diagram_is_a_drawing(lab_run: LabRun) -> None:
    problems = check_mermaid(lab_run)
    assert not problems, _report(problems)
    assert lab_run.counts["diagrams"] == sum(lab_run.expect.mermaid.values())


def test_no_quiz_shows_its_answers_before_the_learner_asks(lab_run: LabRun) -> None:
    """After Run All, before any click: the questions show, no answer does (no explanation, no feedback, no
    "Answer:" line) anywhere in the lab."""
    problems = check_quiz_answers_hidden(lab_run)
    assert not problems, _report(problems)
    assert lab_run.counts["quizzes checked for answers"] == len(lab_run.expect.quizzes)


@pytest.mark.parametrize("path", LABS, ids=[p.stem for p in LABS])
def test_a_lab_opened_before_it_runs_shows_its_quiz_as_a_quiz(
    path: Path, browser_context, jupyterlab, committed_labs: dict[str, dict], lab_root: Path
) -> None:
    """Opened as committed (as a fresh clone is: not trusted, no widget state), each quiz shows its questions
    as HTML, not the widget's text form, and no answer."""
    nb = committed_labs[path.name]
    name = f"{path.stem}.as-committed.ipynb"
    (lab_root / name).write_text(json.dumps(nb, indent=1), encoding="utf-8")
    page = browser_context.new_page()
    try:
        run = open_saved(page, jupyterlab.url, name, Expectations.from_notebook(nb, name=path.stem))
    finally:
        page.close()
        jupyterlab.shutdown_kernels()
    problems = check_saved_quizzes(run)
    assert not problems, _report(problems)
    assert len(run.expect.quizzes) == 1, "every lab ends with one quiz"


def test_every_quiz_answers_a_click(lab_run: LabRun) -> None:
    problems = check_quizzes(lab_run)
    assert not problems, _report(problems)
    if not lab_run.expect.html_quizzes:  # the TypeScript lab's quiz is HTML: check_quizzes checked its questions
        assert lab_run.counts["quiz questions answered"] >= len(lab_run.expect.quizzes)
