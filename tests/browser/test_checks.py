"""The browser checks fail when they must (browser suite): labs broken on purpose, run through the same UI.

A check that never fails proves nothing, so each is run here against a notebook that breaks it, in the same
JupyterLab and browser as the labs:

* a real lab whose widget cell prints the widget instead of displaying it (its text form,
  `VBox(children=(...))`): the render check must name that lab and that cell;
* a small control notebook with one good and one broken Mermaid diagram, a cell that raises, a slider that
  drives nothing, a real quiz, and a cell that prints the quiz's answers unasked: each check must report exactly
  its broken part, and still pass the good diagram and the quiz (which no lab may exercise yet).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from .conftest import LABS
from .labcheck import (
    WIDGET_MIME,
    Expectations,
    check_cells_ran,
    check_mermaid,
    check_quiz_answers_hidden,
    check_quizzes,
    check_widgets_render,
    check_widgets_respond,
    run_lab,
    strip_outputs,
)


def _print_last_expression(source: str) -> str:
    """The cell's source with its last expression printed (the widget's text form) instead of displayed."""
    tree = ast.parse(source)
    last = tree.body[-1]
    assert isinstance(last, ast.Expr), "the widget cell should end with the widget as its last expression"
    lines = source.splitlines()
    expression = ast.get_source_segment(source, last)
    return "\n".join([*lines[: last.lineno - 1], f"print({expression})", *lines[last.end_lineno :]])


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _cheapest_widget(labs: dict[str, dict]) -> tuple[str, int] | None:
    """The lab and cell of the widget (quizzes aside: `quiz()` displays itself) with the fewest code cells to
    run before it."""
    found = []
    for name in sorted(n for n in labs if n in {p.name for p in LABS}):
        expect = Expectations.from_notebook(labs[name], name=name)
        for index in sorted(set(expect.widgets) - set(expect.quizzes)):
            found.append((sum(i < index for i in expect.code), name, index))
    return min(found)[1:] if found else None


def test_a_widget_shown_as_its_text_form_fails_naming_the_lab_and_the_cell(
    browser_context, jupyterlab, committed_labs: dict[str, dict], lab_root: Path, artifacts: Path
) -> None:
    found = _cheapest_widget(committed_labs)
    if found is None:
        pytest.skip("no lab displays a widget (other than a quiz)")
    lab, index = Path(found[0]), found[1]
    nb = json.loads(json.dumps(committed_labs[lab.name]))
    nb["cells"] = nb["cells"][: index + 1]  # the lab up to its first widget: enough, and quicker
    broken = json.loads(json.dumps(nb))
    broken["cells"][index]["source"] = _print_last_expression(_source(nb["cells"][index]))
    name = f"{lab.stem}.widget-as-text.ipynb"
    (lab_root / name).write_text(json.dumps(strip_outputs(broken)), encoding="utf-8")

    page = browser_context.new_page()
    try:
        run = run_lab(
            page, jupyterlab.url, name, Expectations.from_notebook(nb, name=lab.stem), shots=artifacts / "checks"
        )
        problems = check_widgets_render(run)
        run.notebook.screenshot(artifacts / "checks" / f"{lab.stem}-cell-{index}-as-text.png", index=index)
    finally:
        page.close()
        jupyterlab.shutdown_kernels()
    (artifacts / "checks" / f"{lab.stem}-widget-as-text.txt").write_text("\n".join(problems) + "\n")
    where = f"lab {lab.stem}, cell {index} ("
    assert any(p.startswith(where) and "shows the text form of a widget" in p for p in problems), problems
    assert any(p.startswith(where) and "shows 0 rendered widget(s)" in p for p in problems), problems


GOOD_DIAGRAM = "```mermaid\nflowchart LR\n  A[client] --> B[stand-in]\n```"
BROKEN_DIAGRAM = "```mermaid\nflowchart LR\n  A[client] -->\n```"
DEAD_SLIDER = "import ipywidgets as w\nw.VBox([w.IntSlider(description='dead'), w.HTML('nothing moves me')])"


def _cell(kind: str, source: str, *, widget: bool = False) -> dict:
    if kind == "markdown":
        return {"cell_type": "markdown", "metadata": {}, "source": source}
    outputs = (
        [
            {
                "output_type": "display_data",
                "metadata": {},
                "data": {
                    WIDGET_MIME: {"model_id": "", "version_major": 2, "version_minor": 0},
                    "text/plain": "VBox(...)",
                },
            }
        ]
        if widget
        else []
    )
    return {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": outputs, "source": source}


def _control_notebook() -> dict:
    cells = [
        _cell("markdown", "# Controls for the browser checks\n\n" + GOOD_DIAGRAM),  # 0: draws
        _cell("markdown", "A broken diagram:\n\n" + BROKEN_DIAGRAM),  # 1: JupyterLab's error box
        _cell("code", "from streamlab.tools.quizview import quiz\nquiz('01')", widget=True),  # 2: a real quiz
        _cell("code", DEAD_SLIDER, widget=True),  # 3: a slider that drives nothing
        _cell("code", "from streamlab.tools.quizview import quiz_answers\nquiz_answers('01')"),  # 4: answers, unasked
        _cell("code", "raise ValueError('broken on purpose')"),  # 5: an error
        _cell("code", "print('never runs')"),  # 6: not run
    ]
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_each_check_reports_exactly_what_is_broken(
    browser_context, jupyterlab, lab_root: Path, artifacts: Path
) -> None:
    nb = _control_notebook()
    name = "00-browser-controls.ipynb"
    (lab_root / name).write_text(json.dumps(strip_outputs(nb)), encoding="utf-8")
    page = browser_context.new_page()
    try:
        run = run_lab(
            page, jupyterlab.url, name, Expectations.from_notebook(nb, name="00-controls"), shots=artifacts / "checks"
        )
        ran, render = check_cells_ran(run), check_widgets_render(run)
        respond, diagrams = check_widgets_respond(run, timeout=5), check_mermaid(run)
        hidden = check_quiz_answers_hidden(run)  # before any click: what the run itself shows
        quizzes = check_quizzes(run)
    finally:
        page.close()
        jupyterlab.shutdown_kernels()

    assert [p.split(":")[0] for p in ran] == [
        "lab 00-controls, cell 5 (raise ValueError('broken on purpose'))",
        "lab 00-controls, cell 6 (print('never runs'))",
    ], ran
    assert "ValueError: broken on purpose" in ran[0] and "did not run" in ran[1], ran
    assert render == [], render
    assert len(respond) == 1 and respond[0].startswith("lab 00-controls, cell 3 ("), respond
    assert "moving the slider 'dead' changed nothing" in respond[0], respond
    assert len(diagrams) == 1 and diagrams[0].startswith("lab 00-controls, cell 1 (A broken diagram:)"), diagrams
    assert "Mermaid diagram 1 did not render" in diagrams[0], diagrams
    assert run.counts["diagrams"] == 1  # the good one draws
    assert quizzes == [] and run.counts["quiz questions answered"] >= 1, quizzes
    assert len(hidden) == 1 and hidden[0].startswith("lab 00-controls, cell 4 (from streamlab.tools.quizview"), hidden
    assert "shows lab 01's quiz answers before the learner asked" in hidden[0], hidden
