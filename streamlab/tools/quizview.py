"""The checkpoint quiz as a learner sees it (tools layer): questions as text and HTML, the widget, answers on request.

Every view here keeps one rule: **no answer shows before the learner asks for it.** (The quiz itself, its
model, files and grading, is `streamlab.tools.quiz`.)

* `quiz("03")` displays the quiz as one output in three forms. A live JupyterLab draws the ipywidgets view: a
  button per answer, or a box for a number, each answered with "Right." or "Not quite.", the answer's
  feedback and, once right, the explanation; under the questions, a "Show all answers" button. A notebook
  opened before it runs has no kernel behind its widgets and, fresh from a clone, is not trusted: JupyterLab
  then shows the output's HTML form (`quiz_html`), the questions and their choices, and so do GitHub and
  static pages. The plain-text form is `quiz_text`. nbval compares the HTML and the text (it skips widget
  views), so the saved output is checked by strict nbval, and holds no answer.
* `quiz_text("03")` is the question list as deterministic text; `quiz_text("03", answers=True)` adds each
  answer, why, and the section that teaches it: the instructor's copy (`streamlab quiz 03 --answers`).
* `quiz_answers("03")` prints the answers: the learner's explicit request, typed in a cell of their own.

Why ipywidgets rather than jupyterquiz for the labs: ipywidgets is already a dependency; a click can be
simulated in a plain test (`Button.click()`), so the quiz's behaviour is tested without a browser; and
jupyterquiz renders through `application/javascript` output with a random container id, which JupyterLab
runs only in a trusted notebook and nbval cannot compare. The quiz files keep jupyterquiz's format, so a
static site can still render them with it.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import textwrap
from pathlib import Path
from typing import Any

from streamlab.tools.quiz import LETTERS, Question, Quiz, Verdict, load_quiz

__all__ = [
    "QuizView",
    "answers_html",
    "asking",
    "build_quiz",
    "giveaways",
    "html_of",
    "quiz",
    "quiz_answers",
    "quiz_html",
    "quiz_text",
    "seal",
    "shows",
    "site_quiz",
    "unseal",
    "text_of",
]

WIDTH = 110


def asking(lab: str) -> str:
    """The one sentence every answer-free view ends with: how to see the answers, on purpose."""
    return (
        f'The answers stay hidden until you ask: click "Show all answers" under the quiz once its cell has '
        f'run, or run quiz_answers("{lab}") in a cell of your own.'
    )


# =====================================================================================================
# Text: deterministic, the plain form of the quiz's output, and the instructor's answer key
# =====================================================================================================


def _fill(text: str, indent: str, width: int, first: str = "") -> str:
    return textwrap.fill(
        text,
        width,
        initial_indent=indent + first,
        subsequent_indent=indent + " " * len(first),
        break_long_words=False,
        break_on_hyphens=False,
    )


def _code_block(code: str, indent: str) -> list[str]:
    return [indent + "    " + line for line in code.splitlines()]


def text_of(q: Quiz, *, answers: bool = False, width: int = WIDTH) -> str:
    """A loaded quiz as plain text: each question and its choices, and with `answers=True` the answer, why,
    and the section that teaches it. The same quiz always gives the same text."""
    head = f"Checkpoint quiz, lab {q.lab}: {len(q.questions)} questions."
    head += ' Each answer follows its question, on the "Answer:" line.' if answers else ""
    lines = [head]
    for number, question in enumerate(q.questions, 1):
        lines.append("")
        lines.append(_fill(question.text, "", width, f"{number}. "))
        if question.code:
            lines.extend(_code_block(question.code, "   "))
        if question.kind == "multiple_choice":
            for i, choice in enumerate(question.choices):
                lines.append(
                    _fill(choice.text, "   ", width, f"{LETTERS[i]}) ") if choice.text else f"   {LETTERS[i]})"
                )
                if choice.code:
                    lines.extend(_code_block(choice.code, "      "))
        else:
            lines.append("   (answer with a number)")
        if answers:
            lines.append(_fill(question.answer_line(), "   ", width, "Answer: "))
            lines.append(_fill(question.explain, "   ", width, "Why: "))
            lines.append(_fill(question.section.cite(), "   ", width, "Taught in: "))
    return "\n".join(lines)


def quiz_text(lab: str | int, *, answers: bool = False, width: int = WIDTH, folder: Path | None = None) -> str:
    """The lab's quiz as plain text: the questions and their choices; with `answers=True` also each answer, why,
    and the section that teaches it (the instructor's copy)."""
    return text_of(load_quiz(lab, folder), answers=answers, width=width)


def quiz_answers(lab: str | int, *, folder: Path | None = None) -> None:
    """Print the lab's quiz with every answer, why, and the section that teaches it. The labs never call it:
    a learner does, in a cell of their own, once they have tried the questions."""
    print(quiz_text(lab, answers=True, folder=folder))


# =====================================================================================================
# HTML: the quiz as a notebook shows it before it runs (and as static pages show it)
# =====================================================================================================


def _html(text: str) -> str:
    """Escape text for HTML, showing `inline code` in a code font."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _pre(code: str) -> str:
    return f"<pre>{html.escape(code)}</pre>" if code else ""


def html_of(q: Quiz) -> str:
    """A loaded quiz as HTML: the title, each question with its choices (a, b, c...) or a note that it takes a
    number, and how to see the answers. No answer, feedback or explanation is in it."""
    parts = [
        '<div class="streamlab-quiz">',
        f"<h4>Checkpoint quiz, lab {q.lab}: {len(q.questions)} questions</h4>",
        "<ol>",
    ]
    for question in q.questions:
        parts.append(f"<li><p><b>{_html(question.text)}</b></p>{_pre(question.code)}")
        if question.kind == "multiple_choice":
            choices = "".join(f"<li>{_html(c.text)}{_pre(c.code)}</li>" for c in question.choices)
            parts.append(f'<ol type="a">{choices}</ol></li>')
        else:
            parts.append("<p><i>(answer with a number)</i></p></li>")
    parts += ["</ol>", f"<p><i>{_html(asking(q.lab))}</i></p>", "</div>"]
    return "\n".join(parts)


def quiz_html(lab: str | int, folder: Path | None = None) -> str:
    """The lab's quiz as HTML, answer-free: what a notebook shows in the quiz's place before the cell runs."""
    return html_of(load_quiz(lab, folder))


def answers_html(q: Quiz) -> str:
    """Every answer of a loaded quiz as HTML, with why and the section that teaches it (shown on request)."""
    rows = []
    for number, question in enumerate(q.questions, 1):
        rows.append(
            f"<p><b>{number}. Answer: {_html(question.answer_line())}</b><br>{_html(question.explain)}"
            f"<br><i>Taught in {_html(question.section.cite())}.</i></p>"
        )
    return "".join(rows)


def _letters(text: str) -> str:
    """Only the letters and digits of a text (HTML tags dropped, entities undone), lower case: the same words
    compare equal whether they come from the file (`code` marks), the HTML, or the page a browser shows."""
    return re.sub(r"[\W_]+", "", html.unescape(re.sub(r"<[^>]+>", "", text))).lower()


def shows(shown: str, text: str) -> bool:
    """Whether `shown` (text or HTML a learner sees) contains `text`, as a reader would read both: markup, code
    marks, punctuation and spacing aside."""
    return _letters(text) in _letters(shown)


def giveaways(q: Quiz, shown: str) -> list[str]:
    """What of a quiz's answers `shown` (text or HTML a learner sees) gives away: an explanation, an answer's
    feedback (both long enough to be unmistakable), or an "Answer:" line. Empty when it gives nothing away:
    how the tests and the browser suite hold every view to "no answer before the learner asks"."""
    flat = _letters(shown)
    found = []
    for question in q.questions:
        secrets = [question.explain, *(c.feedback for c in question.choices), *(a.feedback for a in question.numeric)]
        found += [
            f"{question.id}: {secret[:50]!r}" for secret in secrets if len(secret) > 25 and _letters(secret) in flat
        ]
    if re.search(r"\bAnswer:", re.sub(r"<[^>]+>", " ", shown)):
        found.append('an "Answer:" line')
    return found


# =====================================================================================================
# The interactive quiz (ipywidgets): a button per answer, feedback on every click
# =====================================================================================================


def _feedback_html(question: Question, verdict: Verdict) -> str:
    if verdict.correct:
        # feedback written for jupyterquiz, which shows it alone, often starts "Right: "; say it once
        said = re.sub(r"^Right[.:,!]?\s+", "", verdict.feedback)
        said = said[:1].upper() + said[1:]
        return (
            f"<b>Right.</b> {_html(said)}<br>{_html(question.explain)}"
            f"<br><i>Taught in {_html(question.section.cite())}.</i>"
        )
    return f"<b>Not quite.</b> {_html(verdict.feedback)}<br><i>Try again, or read {_html(question.section.cite())}.</i>"


class QuizView:
    """The widgets of one quiz, kept so a test (or a curious learner) can reach every part.

    `widget` is the `ipywidgets.VBox` to display: a title, one box per question, the running `score`, and the
    `answers_box` (class `streamlab-quiz-answers`) holding the `reveal` button and the `answers` HTML, empty
    until the button is clicked. `buttons[k]` are question k's answer buttons (empty for a numeric question),
    `entries[k]` its number box and `checks[k]` its Check button (None for multiple choice), `feedback[k]` the
    HTML widget that shows the verdict. Displaying the view shows the widget where a kernel runs, and
    `html_of` / `text_of` of the quiz (answer-free) where none does.
    """

    def __init__(self, quiz: Quiz) -> None:
        import ipywidgets as w

        self.quiz = quiz
        self.right: set[int] = set()
        self.buttons: list[list[Any]] = []
        self.entries: list[Any] = []
        self.checks: list[Any] = []
        self.feedback: list[Any] = []
        self.score = w.HTML()
        title = w.HTML(f"<h4>Checkpoint quiz, lab {quiz.lab}: {len(quiz.questions)} questions</h4>")
        parts = [title]
        for k, question in enumerate(quiz.questions):
            parts.append(self._question_box(k, question))
        self.reveal = w.Button(
            description="Show all answers", tooltip="show every answer, with why", layout=w.Layout(width="12em")
        )
        self.reveal.on_click(self._on_reveal)
        self.answers = w.HTML(value="")
        self.answers_box = w.VBox([self.reveal, self.answers])
        self.answers_box.add_class("streamlab-quiz-answers")
        parts += [self.score, self.answers_box]
        self._update_score()
        self.widget = w.VBox(parts)

    def _question_box(self, k: int, question: Question) -> Any:
        import ipywidgets as w

        parts = [w.HTML(f"<b>{k + 1}. {_html(question.text)}</b>")]
        if question.code:
            parts.append(w.HTML(_pre(question.code)))
        feedback = w.HTML(value="")
        self.feedback.append(feedback)
        buttons: list[Any] = []
        if question.kind == "multiple_choice":
            for i, choice in enumerate(question.choices):
                button = w.Button(
                    description=LETTERS[i],
                    tooltip=f"answer {LETTERS[i]}",
                    layout=w.Layout(width="3em", min_width="3em"),
                )
                button.on_click(self._on_choice(k, i))
                buttons.append(button)
                label = w.HTML(_html(choice.text) + _pre(choice.code), layout=w.Layout(width="auto"))
                parts.append(w.HBox([button, label]))
            self.entries.append(None)
            self.checks.append(None)
        else:
            entry = w.Text(placeholder="a number", continuous_update=False, layout=w.Layout(width="12em"))
            check = w.Button(description="Check", layout=w.Layout(width="6em"))
            check.on_click(self._on_number(k))
            entry.observe(self._on_number(k), names="value")
            self.entries.append(entry)
            self.checks.append(check)
            parts.append(w.HBox([entry, check]))
        self.buttons.append(buttons)
        parts.append(feedback)
        return w.VBox(parts, layout=w.Layout(margin="0 0 1em 0"))

    def _on_choice(self, k: int, i: int) -> Any:
        def clicked(button: Any) -> None:
            verdict = self.quiz.questions[k].grade_choice(i)
            button.button_style = "success" if verdict.correct else "danger"
            self._show(k, verdict)

        return clicked

    def _on_number(self, k: int) -> Any:
        def checked(_source: object) -> None:
            entry = self.entries[k]
            if not entry.value.strip():
                return
            verdict = self.quiz.questions[k].grade_number(entry.value)
            self.checks[k].button_style = "success" if verdict.correct else "danger"
            self._show(k, verdict)

        return checked

    def _on_reveal(self, _button: object) -> None:
        """Show every answer (the learner asked), or hide them again."""
        shown = bool(self.answers.value)
        self.answers.value = "" if shown else answers_html(self.quiz)
        self.reveal.description = "Show all answers" if shown else "Hide the answers"

    def _show(self, k: int, verdict: Verdict) -> None:
        self.feedback[k].value = _feedback_html(self.quiz.questions[k], verdict)
        if verdict.correct:
            self.right.add(k)
        self._update_score()

    def _update_score(self) -> None:
        self.score.value = f"<i>Answered right so far: {len(self.right)} of {len(self.quiz.questions)}.</i>"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widget's view, with the quiz as HTML and as text (answer-free) for where no widget can draw."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs))
        bundle["text/html"] = html_of(self.quiz)
        bundle["text/plain"] = text_of(self.quiz) + "\n\n" + _fill(asking(self.quiz.lab), "", WIDTH)
        return bundle


# =====================================================================================================
# The static site's quiz: the same texts, graded by a small script in the reader's browser
# =====================================================================================================


def _keystream(key: str, size: int) -> bytes:
    """`size` bytes drawn from `key`: FNV-1a of its UTF-8 bytes seeds mulberry32, whose 32-bit words give four
    bytes each, least significant first (quiz.js's `keystream` draws the same bytes in a few lines)."""
    mask = 0xFFFFFFFF
    state = 0x811C9DC5
    for byte in key.encode("utf-8"):
        state = ((state ^ byte) * 0x01000193) & mask
    out = bytearray()
    while len(out) < size:
        state = (state + 0x6D2B79F5) & mask
        word = ((state ^ (state >> 15)) * (state | 1)) & mask
        word = ((word + (((word ^ (word >> 7)) * (word | 61)) & mask)) & mask) ^ word
        out += ((word ^ (word >> 14)) & mask).to_bytes(4, "little")
    return bytes(out[:size])


def seal(value: Any, key: str) -> str:
    """`value` as JSON kept out of plain sight in a static page: its UTF-8 bytes XORed with `_keystream(key)`, in
    base64. A reader of the page's source sees no answer; a reader who runs the page's script can, as with any
    quiz graded in the browser: it hides answers from a glance, not from a determined reader."""
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, _keystream(key, len(data)), strict=True))).decode()


def unseal(sealed: str, key: str) -> Any:
    """The value `seal(value, key)` sealed (what quiz.js's `unseal` does in the reader's browser)."""
    data = base64.b64decode(sealed)
    return json.loads(bytes(a ^ b for a, b in zip(data, _keystream(key, len(data)), strict=True)).decode("utf-8"))


def site_quiz(q: Quiz) -> dict[str, Any]:
    """A loaded quiz as the course site's script needs it (a JSON-ready dict): each question's HTML, and for every
    answer a learner can give the verdict HTML the widget would show, made here by the same functions, so the
    static page and the notebook say the same words. Numeric entries keep jupyterquiz's meaning (`value`: that
    number; `range`: low <= x < high; first match wins; `default` for any other number).

    Whatever tells a right answer from a wrong one (which choice is right, every verdict, the numbers, "Show all
    answers") is sealed (`seal`), keyed by the quiz's `salt`, the question and the letter, so the page's source
    holds no answer in plain text: `{"correct", "verdict"}` in each choice's `seal`, `{"numeric", "default"}` in a
    numeric question's `seal`, the answers' HTML in `answers_seal`."""
    salt = hashlib.sha256(repr((q.lab, q.questions)).encode("utf-8")).hexdigest()[:16]  # the same on every machine
    questions = []
    for question in q.questions:
        item: dict[str, Any] = {"id": question.id, "kind": question.kind, "html": _html(question.text)}
        item["code"] = _pre(question.code)
        if question.kind == "multiple_choice":
            item["choices"] = [
                {
                    "letter": LETTERS[i],
                    "html": _html(c.text) + _pre(c.code),
                    "seal": seal(
                        {"correct": c.correct, "verdict": _feedback_html(question, Verdict(c.correct, c.feedback))},
                        f"{salt}:{question.id}:{LETTERS[i]}",
                    ),
                }
                for i, c in enumerate(question.choices)
            ]
        else:
            default = next((a.feedback for a in question.numeric if a.kind == "default"), "Not this number.")
            numeric = [
                {
                    "kind": a.kind,
                    "value": a.value,
                    "low": a.low,
                    "high": a.high,
                    "correct": a.correct,
                    "verdict": _feedback_html(question, Verdict(a.correct, a.feedback)),
                }
                for a in question.numeric
                if a.kind != "default"
            ]
            graded = {"numeric": numeric, "default": _feedback_html(question, Verdict(False, default))}
            item["seal"] = seal(graded, f"{salt}:{question.id}:numeric")
        questions.append(item)
    title = f"Checkpoint quiz, lab {q.lab}: {len(q.questions)} questions"
    answers = seal(answers_html(q), f"{salt}:answers")
    return {"lab": q.lab, "title": title, "salt": salt, "questions": questions, "answers_seal": answers}


def build_quiz(lab: str | int, folder: Path | None = None) -> QuizView:
    """Build the interactive quiz for a lab without displaying it (tests use this)."""
    return QuizView(load_quiz(lab, folder))


def quiz(lab: str | int) -> None:
    """Display the lab's checkpoint quiz: the widget in a live kernel, the questions as HTML and text in the
    saved notebook (strict nbval compares those; none of them shows an answer)."""
    from IPython.display import display

    display(build_quiz(lab))
