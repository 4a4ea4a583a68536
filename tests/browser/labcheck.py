"""What a lab must show in JupyterLab, and the checks that compare it with what the browser shows (test tooling).

`Expectations.read` takes them from the committed .ipynb, so nothing here names a lab, a widget or a
diagram: a widget is an output the canonical run saved as `application/vnd.jupyter.widget-view+json`, a quiz
a code cell that calls `quiz(...)`, a diagram a ```mermaid fence in a markdown cell. A lab without any simply
has nothing of that kind to check, and a lab that gains one is checked without editing this file.

`run_lab` opens a lab in JupyterLab, restarts its kernel and runs every cell through the Kernel menu, and
returns a `LabRun`: what each cell shows afterwards. Each `check_*` function returns a list of problems, every
one starting with `lab NN-name, cell K (its first line)` where K is the cell's index in the .ipynb, so a
failure says where to look; the tests assert that the list is empty, and the meta-tests assert that a lab
broken on purpose yields the problem it must.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ipywidgets
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from streamlab.tools.quiz import Quiz, load_quiz
from streamlab.tools.quizview import giveaways, shows
from tools.browser import DRIVEN_JS, IDLE_JS, CellView, NotebookPage, driven_content, move_slider, pick_other_option

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STDERR_MIME = "application/vnd.jupyter.stderr"
MERMAID_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*mermaid\b", re.MULTILINE)
QUIZ_CALL = re.compile(r"(?<![\w.])(?:quiz\.)?quiz\(\s*[\"']?(\d+)")

WIDGET_CLASSES = sorted(
    name for name, obj in vars(ipywidgets).items() if isinstance(obj, type) and issubclass(obj, ipywidgets.DOMWidget)
)
WIDGET_TEXT_FORM = re.compile(r"\b(?:" + "|".join(WIDGET_CLASSES) + r")\((?:\w+=|\))")
"""A widget's text form (`VBox(children=(IntSlider(value=0),))`): what a cell shows when the widget is
printed, or displayed where no widget manager runs."""

WIDGET_PLACEHOLDERS = ("Loading widget...", "Error displaying widget")
RIGHT, NOT_QUITE = re.compile(r"^\s*Right\."), re.compile(r"^\s*Not quite\.")  # how quiz feedback starts

RUN_TIMEOUT = 300.0  # one lab, restart to idle; the slowest lab takes well under a minute
RENDER_TIMEOUT = 90.0  # widgets and diagrams appear after the kernel is idle
RESPONSE_TIMEOUT = 60.0  # a control's change reaches the kernel, which redraws what it drives
MIN_DIAGRAM_TEXT_PX = 12.0  # a diagram's text on the page, at a 1280-pixel-wide window: readable on a projector
MAX_DIAGRAM_HEIGHT = 600.0  # fits whole in a 1280x720 window's notebook area (JupyterLab's bars take ~120 px)


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


@dataclass(frozen=True)
class Expectations:
    """What the committed lab shows: cell count, and where its widgets, quizzes and diagrams are."""

    name: str
    cells: int
    first_lines: dict[int, str]
    code: tuple[int, ...]
    widgets: dict[int, int]  # cell index -> number of widget outputs
    quizzes: tuple[int, ...]
    mermaid: dict[int, int]  # markdown cell index -> number of diagrams
    stderr: frozenset[int]  # cells whose committed outputs include stderr
    quiz_of: dict[int, str] = field(default_factory=dict)  # quiz cell index -> the lab whose quiz it shows
    # A lab on another kernel than Python (lab 12, TypeScript on Deno) shows its quiz as HTML, with no widget to
    # click: its answers come from `quizAnswers("NN")` in a cell of the learner's own
    html_quizzes: bool = False

    @classmethod
    def read(cls, path: Path, *, name: str | None = None) -> Expectations:
        return cls.from_notebook(json.loads(path.read_text(encoding="utf-8")), name=name or path.stem)

    @classmethod
    def from_notebook(cls, nb: dict[str, Any], *, name: str) -> Expectations:
        cells = nb["cells"]
        first_lines, widgets, mermaid, quizzes, code, stderr, quiz_of = {}, {}, {}, [], [], set(), {}
        for i, cell in enumerate(cells):
            text = _source(cell)
            lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("# NBVAL")]
            first_lines[i] = (lines[0] if lines else "")[:70]
            if cell["cell_type"] == "markdown" and MERMAID_FENCE.search(text):
                mermaid[i] = len(MERMAID_FENCE.findall(text))
            if cell["cell_type"] != "code":
                continue
            code.append(i)
            outputs = cell.get("outputs", [])
            count = sum(WIDGET_MIME in out.get("data", {}) for out in outputs)
            if count:
                widgets[i] = count
            if (call := QUIZ_CALL.search(text)) is not None:
                quizzes.append(i)
                quiz_of[i] = f"{int(call.group(1)):02d}"
            if any(out.get("name") == "stderr" or out.get("output_type") == "error" for out in outputs):
                stderr.add(i)
        return cls(
            name=name,
            cells=len(cells),
            first_lines=first_lines,
            code=tuple(code),
            widgets=widgets,
            quizzes=tuple(quizzes),
            mermaid=mermaid,
            stderr=frozenset(stderr),
            quiz_of=quiz_of,
            html_quizzes=nb["metadata"].get("kernelspec", {}).get("name", "python3") != "python3",
        )

    def where(self, index: int) -> str:
        line = self.first_lines.get(index, "")
        return f"lab {self.name}, cell {index}" + (f" ({line})" if line else "")


@dataclass
class LabRun:
    """A lab after restart-and-run-all in JupyterLab: the page, what each cell shows, the screenshot taken."""

    expect: Expectations
    notebook: NotebookPage
    cells: list[CellView]
    screenshot: Path | None = None
    counts: dict[str, int] = field(default_factory=dict)  # what the checks actually exercised
    quiz_views: dict[int, str] = field(default_factory=dict)  # quiz cell index -> the text its outputs show

    def cell(self, index: int) -> CellView:
        return next(c for c in self.cells if c.index == index)


# =====================================================================================================
# Running a lab
# =====================================================================================================


def strip_outputs(nb: dict[str, Any]) -> dict[str, Any]:
    """The notebook as a learner's fresh copy would run it: no outputs, no execution counts."""
    out = json.loads(json.dumps(nb))
    for cell in out["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    out.get("metadata", {}).pop("widgets", None)
    return out


SETTLED_JS = """
([widgets, mermaid]) => {
  // Widget cells: every top-level output is a finished renderer (a view, or plain output such as text),
  // none still "Loading widget...". Diagram cells: as many diagrams as fences, each an image that finished
  // loading or an error box.
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  const cell = (i) => nb.querySelector(`.jp-Cell[data-windowed-list-index="${i}"]`);
  const outputs = (c) => [...c.querySelectorAll('.jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output')];
  const done = (o) => !!o.dataset.mimeType || !!o.querySelector(':scope > .jupyter-widgets')
    || (o.textContent || '').startsWith('Error displaying widget');
  const drawn = (m) => m.classList.contains('jp-mod-warning') || (m.querySelector('img')?.complete ?? false);
  return Object.keys(widgets).every((i) => cell(i) && outputs(cell(i)).every(done))
    && Object.entries(mermaid).every(([i, n]) => {
      const ms = cell(i) ? [...cell(i).querySelectorAll('.jp-RenderedMermaid')] : [];
      return ms.length >= n && ms.every(drawn);
    });
}
"""


def run_lab(page: Page, base_url: str, path: str, expect_: Expectations, *, shots: Path) -> LabRun:
    """Open `path` in JupyterLab, restart and run all through the menu, wait until the kernel is idle and the
    expected widgets and diagrams have appeared (or RENDER_TIMEOUT passed: the checks then say what is
    missing), and screenshot it (scrolled to its first widget or diagram, if it has one)."""
    notebook = NotebookPage(page, base_url, path)
    notebook.open(cells=expect_.cells)
    try:
        notebook.restart_and_run_all(timeout=RUN_TIMEOUT)
    except PlaywrightTimeout:
        shot = notebook.screenshot(shots / f"{expect_.name}-timeout.png")
        raise AssertionError(
            f"lab {expect_.name}: the run did not finish within {RUN_TIMEOUT:.0f} s "
            f"(state {notebook.run_state()}); screenshot: {shot}"
        ) from None
    for index in expect_.mermaid:  # a person scrolling through the lab would bring each into view
        notebook.reveal(index)
    try:
        page.wait_for_function(
            SETTLED_JS, arg=[expect_.widgets, expect_.mermaid], timeout=RENDER_TIMEOUT * 1000, polling=200
        )
    except PlaywrightTimeout:
        pass  # the checks report exactly which widget or diagram is missing
    run = LabRun(expect=expect_, notebook=notebook, cells=notebook.cells(), quiz_views=quiz_views(notebook, expect_))
    focus = sorted([*expect_.widgets, *expect_.mermaid])
    run.screenshot = notebook.screenshot(shots / f"{expect_.name}.png", index=focus[0] if focus else None)
    return run


def quiz_views(notebook: NotebookPage, expect_: Expectations) -> dict[int, str]:
    """The whole text of each quiz cell's outputs, as it is now (a cell's summary keeps only 4000 characters; a
    quiz is longer, and an answer could hide at its end). Each quiz is scrolled into view first, since JupyterLab
    lays out off-screen cells lazily; the text is the DOM's, so nothing the quiz holds escapes the checks."""
    views = {}
    for index in expect_.quizzes:
        notebook.reveal(index)
        area = notebook.cell(index).locator(".jp-Cell-outputArea")
        views[index] = (area.text_content() or "") if area.count() else ""
    return views


def open_saved(page: Page, base_url: str, path: str, expect_: Expectations) -> LabRun:
    """Open `path` as committed, outputs and all, without running anything: what a learner sees first, in a fresh
    clone (JupyterLab does not trust the notebook, and no kernel holds its widgets)."""
    notebook = NotebookPage(page, base_url, path)
    notebook.open(cells=expect_.cells)
    for index in expect_.quizzes:
        notebook.reveal(index)
    return LabRun(expect=expect_, notebook=notebook, cells=notebook.cells(), quiz_views=quiz_views(notebook, expect_))


# =====================================================================================================
# The checks: each returns its problems, each naming the lab and the cell
# =====================================================================================================


def _tail(text: str, lines: int = 4) -> str:
    return " | ".join(ln.rstrip() for ln in text.strip().splitlines()[-lines:])


def check_cells_ran(run: LabRun) -> list[str]:
    """Every code cell ran (a number in its prompt) and none shows an error or stderr output that the
    committed lab does not show."""
    problems = []
    for cell in run.cells:
        where = run.expect.where(cell.index)
        if cell.index in run.expect.stderr:
            continue
        for text in cell.stderr:
            problems.append(f"{where}: shows an error output: {_tail(text)}")
    not_run = [c.index for c in run.cells if c.kind == "code" and not c.ran]
    if not_run:
        problems.append(
            f"{run.expect.where(not_run[0])}: did not run ({len(not_run)} code cell(s) from here on "
            f"have no execution count: the run stopped before them)"
        )
    if len(run.cells) != run.expect.cells:
        problems.append(
            f"lab {run.expect.name}: JupyterLab shows {len(run.cells)} cells, the .ipynb has {run.expect.cells}"
        )
    return problems


def check_widgets_render(run: LabRun) -> list[str]:
    """Every widget the lab displays renders as a widget: never as its text form, a placeholder or an error."""
    problems = []
    for cell in run.cells:
        where = run.expect.where(cell.index)
        shown = sum(o.mime == "widget" for o in cell.outputs)
        wanted = run.expect.widgets.get(cell.index, 0)
        for out in cell.outputs:
            if out.mime != "widget" and (m := WIDGET_TEXT_FORM.search(out.text)):
                problems.append(
                    f"{where}: shows the text form of a widget instead of the widget: "
                    f"{out.text[m.start() : m.start() + 120]!r}"
                )
            elif any(out.text.startswith(p) for p in WIDGET_PLACEHOLDERS) and out.mime != "widget":
                problems.append(f"{where}: a widget did not render: {out.text[:120]!r}")
        if shown < wanted:
            problems.append(f"{where}: shows {shown} rendered widget(s); the committed lab displays {wanted}")
    run.counts["widgets"] = sum(o.mime == "widget" for c in run.cells for o in c.outputs)
    return problems


def check_widgets_respond(run: LabRun, *, timeout: float = RESPONSE_TIMEOUT) -> list[str]:
    """Every slider and dropdown of every widget (quizzes aside) changes the text or figure it drives."""
    problems: list[str] = []
    moved = 0
    for index in sorted(set(run.expect.widgets) - set(run.expect.quizzes)):
        views = run.notebook.widget_outputs(index)
        for k in range(views.count()):
            view = views.nth(k)
            controls = [("slider", s) for s in view.locator(".widget-slider").all()]
            controls += [("dropdown", d) for d in view.locator(".widget-dropdown").all()]
            for kind, control in controls:
                moved += 1
                problem = _respond(run.notebook, view, kind, control, timeout)
                if problem:
                    problems.append(f"{run.expect.where(index)}: {problem}")
    run.counts["controls moved"] = moved
    return problems


def _respond(notebook: NotebookPage, view: Locator, kind: str, control: Locator, timeout: float) -> str | None:
    """Move one control; wait until what the widget drives has changed and the kernel is idle again (so the
    callback's every update, the figure included, has arrived). None when it did, else the problem."""
    label = (control.locator(".widget-label").first.text_content() or "").strip() or "(no label)"
    control.scroll_into_view_if_needed()
    notebook.wait_idle()  # the previous control's callback has finished: a settled "before"
    before = driven_content(view)
    if kind == "slider":
        move_slider(control)
        what = f"moving the slider {label!r}"
    else:
        what = f"picking {pick_other_option(control)!r} in the dropdown {label!r}"
    try:
        view.wait_for_function(
            f"(v, before) => ({DRIVEN_JS.strip()})(v) !== before && ({IDLE_JS.strip()})()",
            arg=before,
            timeout=timeout * 1000,
        )
    except PlaywrightTimeout:
        return f"{what} changed nothing the widget shows (text or figure) within {timeout:.0f} s"
    return None


def check_mermaid(run: LabRun) -> list[str]:
    """Every ```mermaid block renders as a drawing: an image with a size and shapes, no error box."""
    problems = []
    drawn = 0
    for index, wanted in sorted(run.expect.mermaid.items()):
        where = run.expect.where(index)
        diagrams = run.cell(index).mermaid
        if len(diagrams) != wanted:
            problems.append(f"{where}: {len(diagrams)} rendered Mermaid diagram(s), the cell has {wanted}")
        for n, d in enumerate(diagrams, 1):
            if d.warning:
                problems.append(f"{where}: Mermaid diagram {n} did not render: {_tail(d.text, 3)}")
            elif not d.drawn or d.shapes == 0:
                problems.append(
                    f"{where}: Mermaid diagram {n} is not a drawing (image shown: {d.drawn}, shapes: {d.shapes})"
                )
            else:
                drawn += 1
                problems += _legible(where, n, d)
    extra = [c.index for c in run.cells if c.mermaid and c.index not in run.expect.mermaid]
    if extra:
        problems.append(f"{run.expect.where(extra[0])}: renders a Mermaid diagram the .ipynb has no fence for")
    run.counts["diagrams"] = drawn
    return problems


def _legible(where: str, n: int, d: Any) -> list[str]:
    """A drawn diagram is readable on a projector: text at least MIN_DIAGRAM_TEXT_PX high, whole within
    MAX_DIAGRAM_HEIGHT (the page is 1280 pixels wide, as a 1280x720 projector shows it)."""
    problems = []
    size = f"{d.width:.0f} x {d.height:.0f} px"
    if d.text_px < MIN_DIAGRAM_TEXT_PX:
        problems.append(
            f"{where}: Mermaid diagram {n} draws its text {d.text_px:.1f} px high ({size}; at least "
            f"{MIN_DIAGRAM_TEXT_PX:g}): too many nodes side by side, or a layout that is too wide"
        )
    if d.height > MAX_DIAGRAM_HEIGHT:
        problems.append(
            f"{where}: Mermaid diagram {n} is {d.height:.0f} px tall ({size}; at most "
            f"{MAX_DIAGRAM_HEIGHT:g}, so it fits a 1280x720 screen whole)"
        )
    return problems


def check_quiz_answers_hidden(run: LabRun) -> list[str]:
    """No cell shows a quiz answer before the learner asks for one (a click, "Show all answers",
    `quiz_answers(...)`), and every quiz shows its questions. Reads what the cells showed right after the run
    (or the opening), before any click."""
    problems = []
    quizzes: dict[str, Quiz] = {lab: load_quiz(lab) for lab in sorted(set(run.expect.quiz_of.values()))}
    for cell in run.cells:
        where = run.expect.where(cell.index)
        shown = [run.quiz_views.get(cell.index, "")] + [o.text for o in cell.outputs]
        for lab, quiz in quizzes.items():
            found = sorted({g for text in shown for g in giveaways(quiz, text)})
            if found:
                problems.append(
                    f"{where}: shows lab {lab}'s quiz answers before the learner asked: {'; '.join(found[:2])}"
                )
    for index, lab in sorted(run.expect.quiz_of.items()):
        text = run.quiz_views.get(index, "")
        missing = [q.id for q in quizzes[lab].questions if not shows(text, q.text)]
        if missing:
            problems.append(f"{run.expect.where(index)}: the quiz does not show question(s) {', '.join(missing)}")
    run.counts["quizzes checked for answers"] = len(run.expect.quiz_of)
    return problems


def check_saved_quizzes(run: LabRun) -> list[str]:
    """A lab opened as committed, before it runs: each quiz shows as a quiz (its HTML: the questions and their
    choices), never as the widget's text form, a placeholder or an error."""
    problems = []
    for index in run.expect.quizzes:
        where = run.expect.where(index)
        outputs = run.cell(index).outputs
        if not any(o.mime == "text/html" for o in outputs):
            problems.append(
                f"{where}: before it runs the quiz shows as {[o.mime or o.text[:40] for o in outputs]}, not as HTML"
            )
        text = run.quiz_views.get(index, "")
        if (m := WIDGET_TEXT_FORM.search(text)) or any(p in text for p in WIDGET_PLACEHOLDERS):
            at = m.start() if m else 0
            problems.append(f"{where}: before it runs the quiz shows widget text: {text[at : at + 80]!r}")
    return problems + check_quiz_answers_hidden(run)


def check_quizzes(run: LabRun) -> list[str]:
    """Every quiz answers clicks: a wrong answer gets "Not quite.", the right one "Right." and the score."""
    problems = []
    answered = 0
    if run.expect.html_quizzes:  # nothing to click: the quiz must show as a quiz, its questions all there
        for index in run.expect.quizzes:
            quiz = load_quiz(run.expect.quiz_of[index])
            text = run.quiz_views.get(index, "")
            if f"Checkpoint quiz, lab {quiz.lab}" not in text or not all(shows(text, q.text) for q in quiz.questions):
                problems.append(f"{run.expect.where(index)}: the HTML quiz does not show all its questions")
        run.counts["quiz questions answered"] = 0
        return problems
    for index in run.expect.quizzes:
        where = run.expect.where(index)
        views = run.notebook.widget_outputs(index)
        if views.count() == 0:
            problems.append(f"{where}: the quiz is not shown as a widget")
            continue
        for k in range(views.count()):
            try:
                answered += _answer_quiz(views.nth(k))
            except (AssertionError, PlaywrightError) as exc:
                problems.append(f"{where}: the quiz does not answer a click as it should: {_first_line(exc)}")
    run.counts["quiz questions answered"] = answered
    return problems


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def _answer_quiz(view: Locator) -> int:
    """Click a wrong and then the right answer of the first multiple-choice question, and type the right
    number into the first numeric one; assert the feedback and the score after each. Returns how many
    questions were answered."""
    title = view.locator(".widget-html-content").first.text_content() or ""
    m = re.search(r"Checkpoint quiz, lab (\d+)", title)
    assert m, f"no 'Checkpoint quiz, lab NN' title, found {title[:80]!r}"
    quiz = load_quiz(m.group(1))
    boxes = view.locator(":scope > .widget-vbox:not(.streamlab-quiz-answers)")
    assert boxes.count() == len(quiz.questions), (
        f"{boxes.count()} question boxes shown, quiz {quiz.lab} has {len(quiz.questions)} questions"
    )
    score = view.locator(":scope > .widget-html").last
    answered = 0
    mc = next((k for k, q in enumerate(quiz.questions) if q.kind == "multiple_choice"), None)
    if mc is not None:
        question, box = quiz.questions[mc], boxes.nth(mc)
        feedback, buttons = box.locator(":scope > .widget-html").last, box.locator("button")
        assert buttons.count() == len(question.choices), (
            f"question {question.id}: {buttons.count()} buttons for {len(question.choices)} answers"
        )
        wrong = next(i for i in range(len(question.choices)) if i != question.right_choice)
        buttons.nth(wrong).click()
        expect(feedback).to_have_text(NOT_QUITE, timeout=RESPONSE_TIMEOUT * 1000)
        buttons.nth(question.right_choice).click()
        expect(feedback).to_have_text(RIGHT, timeout=RESPONSE_TIMEOUT * 1000)
        expect(score).to_contain_text(f"1 of {len(quiz.questions)}", timeout=RESPONSE_TIMEOUT * 1000)
        answered += 1
    num = next((k for k, q in enumerate(quiz.questions) if q.kind == "numeric"), None)
    if num is not None:
        question, box = quiz.questions[num], boxes.nth(num)
        feedback = box.locator(":scope > .widget-html").last
        entry = box.locator("input").first
        entry.fill(repr(question.right_value.value))
        entry.press("Enter")
        expect(feedback).to_have_text(RIGHT, timeout=RESPONSE_TIMEOUT * 1000)
        answered += 1
    _reveal_answers(view, quiz)
    return answered


def _reveal_answers(view: Locator, quiz: Quiz) -> None:
    """Asked for, the answers appear: "Show all answers" shows the last question's explanation, and hides it again."""
    box = view.locator(":scope > .streamlab-quiz-answers")
    assert box.count() == 1, 'no "Show all answers" under the quiz'
    button = box.locator("button", has_text="Show all answers")
    explain = quiz.questions[-1].explain
    last = " ".join(max(explain.split("`")[::2], key=len).split()[:8])  # words the page shows as they are written
    assert not shows(box.inner_text(), last), 'an answer shows before "Show all answers" was clicked'
    button.click()
    expect(box).to_contain_text(last, timeout=RESPONSE_TIMEOUT * 1000)
    box.locator("button", has_text="Hide the answers").click()
    expect(box).not_to_contain_text(last, timeout=RESPONSE_TIMEOUT * 1000)
