"""Checkpoint quizzes for the labs (tools layer): load `data/quiz/NN.json`, check it, grade an answer.

One quiz per lab, kept as data. The file format is jupyterquiz's (a JSON list of questions, each with
`question`, `type` and `answers`), so the same files also render with `jupyterquiz.display_quiz` and in
Jupyter Book. streamlab adds three fields of its own, which jupyterquiz ignores:

* `id`: a stable name for the question ("03-4"), used in error messages and tests;
* `explain`: why the right answer is right, in a few sentences;
* `section`: `{"lab": "03", "title": "..."}`, the heading of the lab section that teaches it;

and, for "which bytes" questions, `wire`: the raw bytes (as a JSON string with escapes) and the events a
conforming parser must report, so a test can prove the expected answer with `streamlab.core.sse`.

Question types: `multiple_choice` (exactly one answer has `"correct": true`) and `numeric` (answers of type
`value` or `range` as in jupyterquiz, first match wins, plus an optional `default` feedback; exactly one
`value` is correct, and a correct `range` around it is the tolerance). jupyterquiz's `many_choice` is
refused: every checkpoint question has exactly one right answer.

What a learner sees of a quiz (the question list as text and HTML, the interactive widget, the answers on
request) is in `streamlab.tools.quizview`; this module is the quiz itself: the data model, loading and checking
the files, and grading an answer, with no widgets.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamlab.core.harness.fixtures import data_dir

__all__ = [
    "Choice",
    "NumericAnswer",
    "Question",
    "Quiz",
    "Section",
    "Verdict",
    "Wire",
    "available_quizzes",
    "check_wire",
    "lab_name",
    "load_quiz",
    "parse_number",
    "parse_quiz",
]

KINDS = ("multiple_choice", "numeric")
NUMERIC_KINDS = ("value", "range", "default")
LETTERS = "abcdefghij"

# =====================================================================================================
# The model: what a question is, and how an answer is graded (pure; no widgets)
# =====================================================================================================


@dataclass(frozen=True)
class Section:
    """The lab section that teaches a question: lab number ("03") and the heading's text as written."""

    lab: str
    title: str

    def cite(self) -> str:
        return f'Lab {self.lab}, section "{self.title}"'


@dataclass(frozen=True)
class Choice:
    """One answer of a multiple-choice question."""

    text: str
    correct: bool
    feedback: str
    code: str = ""


@dataclass(frozen=True)
class NumericAnswer:
    """One entry of a numeric question, with jupyterquiz's meaning.

    `value` matches one number; `range` matches low <= x < high (half-open, as jupyterquiz checks it);
    `default` matches nothing and only supplies the feedback for a number no other entry matched.
    """

    kind: str
    correct: bool
    feedback: str
    value: float | None = None
    low: float | None = None
    high: float | None = None

    def matches(self, number: float) -> bool:
        if self.kind == "value":
            assert self.value is not None
            return math.isclose(number, self.value, rel_tol=1e-9, abs_tol=1e-12)
        if self.kind == "range":
            assert self.low is not None and self.high is not None
            return self.low <= number < self.high
        return False


@dataclass(frozen=True)
class Wire:
    """The bytes of a "which bytes" question and what a conforming parser reports for them."""

    raw: bytes
    events: tuple[tuple[str, str], ...]
    mid_event: bool
    last_event_id: str | None = None


@dataclass(frozen=True)
class Verdict:
    """The result of one attempt: right or not, and the text to show for it."""

    correct: bool
    feedback: str


@dataclass(frozen=True)
class Question:
    """One checkpoint question (multiple choice or numeric)."""

    id: str
    kind: str
    text: str
    explain: str
    section: Section
    code: str = ""
    choices: tuple[Choice, ...] = ()
    numeric: tuple[NumericAnswer, ...] = ()
    wire: Wire | None = None

    @property
    def right_choice(self) -> int:
        """Index of the one right choice (multiple choice only)."""
        return next(i for i, c in enumerate(self.choices) if c.correct)

    @property
    def right_value(self) -> NumericAnswer:
        """The one right `value` entry (numeric only)."""
        return next(a for a in self.numeric if a.kind == "value" and a.correct)

    @property
    def tolerance(self) -> tuple[float, float] | None:
        """The accepted interval [low, high) around the right value, if the question gives one."""
        for a in self.numeric:
            if a.kind == "range" and a.correct:
                assert a.low is not None and a.high is not None
                return (a.low, a.high)
        return None

    def grade_choice(self, index: int) -> Verdict:
        """Grade a click on choice `index` (0-based)."""
        if self.kind != "multiple_choice":
            raise ValueError(f"question {self.id} is {self.kind}, not multiple_choice")
        choice = self.choices[index]
        return Verdict(choice.correct, choice.feedback)

    def grade_number(self, typed: str) -> Verdict:
        """Grade a typed answer: a number such as "0.25", "-3" or "1/30"; the first matching entry decides."""
        if self.kind != "numeric":
            raise ValueError(f"question {self.id} is {self.kind}, not numeric")
        number = parse_number(typed)
        if number is None:
            return Verdict(False, f"{typed.strip()!r} is not a number: type digits, such as 0.25 or 1/30.")
        default = "Not this number."
        for answer in self.numeric:
            if answer.kind == "default":
                default = answer.feedback
            elif answer.matches(number):
                return Verdict(answer.correct, answer.feedback)
        return Verdict(False, default)

    def answer_line(self) -> str:
        """The right answer in words: "b) ..." or "0.25 (accepted: 0.24 up to 0.26)"."""
        if self.kind == "multiple_choice":
            i = self.right_choice
            choice = self.choices[i]
            return f"{LETTERS[i]}) {choice.text or choice.code}"
        line = _number(self.right_value.value)
        if self.tolerance is not None:
            low, high = self.tolerance
            line += f" (accepted: {_number(low)} up to {_number(high)})"
        return line


@dataclass(frozen=True)
class Quiz:
    """A lab's checkpoint quiz: its lab number and its questions, in order."""

    lab: str
    questions: tuple[Question, ...]
    source: str = ""


def parse_number(typed: str) -> float | None:
    """A learner's number: a decimal ("0.25", "1e-3") or a fraction ("1/30"); None if it is neither."""
    text = typed.strip().replace(" ", "")
    try:
        if "/" in text:
            top, bottom = text.split("/", 1)
            return float(top) / float(bottom)
        return float(text)
    except (ValueError, ZeroDivisionError):
        return None


def _number(x: float | None) -> str:
    """A number as a person writes it: 3 rather than 3.0, 0.25 as 0.25."""
    assert x is not None
    return str(int(x)) if float(x).is_integer() else repr(float(x))


# =====================================================================================================
# Loading and checking the data: every problem names the file, the question and the field
# =====================================================================================================


def lab_name(lab: str | int) -> str:
    text = str(lab).strip()
    if not text.isdigit():
        raise ValueError(f"a lab is named by its number, such as '03' or 3, not {lab!r}")
    return f"{int(text):02d}"


def available_quizzes(folder: Path | None = None) -> list[str]:
    """The labs that have a quiz, as two-digit strings, in order."""
    folder = folder or data_dir() / "quiz"
    return sorted(p.stem for p in folder.glob("[0-9][0-9].json"))


def load_quiz(lab: str | int, folder: Path | None = None) -> Quiz:
    """Load and check `data/quiz/NN.json`; a bad file raises ValueError naming the question and field."""
    name = lab_name(lab)
    path = (folder or data_dir() / "quiz") / f"{name}.json"
    if not path.exists():
        have = ", ".join(available_quizzes(path.parent)) or "none"
        raise ValueError(f"no quiz for lab {name}: {path} does not exist (quizzes: {have})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc
    return parse_quiz(data, lab=name, source=str(path))


def parse_quiz(data: Any, *, lab: str, source: str = "<quiz>") -> Quiz:
    """Build a `Quiz` from jupyterquiz-format data plus streamlab's fields, checking every rule."""
    if not isinstance(data, list) or not data:
        raise ValueError(f"{source}: a quiz is a non-empty JSON list of questions")
    questions = [_parse_question(item, f"{source}, question {n}") for n, item in enumerate(data, 1)]
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise ValueError(f"{source}: question id {q.id!r} is used twice")
        seen.add(q.id)
    return Quiz(lab=lab, questions=tuple(questions), source=source)


def _text(obj: dict, key: str, where: str, *, required: bool = True) -> str:
    value = obj.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(f"{where}: field {key!r} must be a non-empty string, got {value!r}")
    return value


def _parse_question(item: Any, where: str) -> Question:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: a question is a JSON object")
    qid = _text(item, "id", where)
    where = f"{where} ({qid})"
    kind = item.get("type")
    if kind == "many_choice":
        raise ValueError(
            f"{where}: many_choice is not used here: every checkpoint question has exactly one right answer"
        )
    if kind not in KINDS:
        raise ValueError(f"{where}: type must be one of {KINDS}, got {kind!r}")
    section = item.get("section")
    if not isinstance(section, dict):
        raise ValueError(f"{where}: field 'section' must be an object {{'lab': 'NN', 'title': '...'}}")
    sec = Section(lab=lab_name(_text(section, "lab", where)), title=_text(section, "title", where))
    answers = item.get("answers")
    if not isinstance(answers, list) or not answers:
        raise ValueError(f"{where}: field 'answers' must be a non-empty list")
    common = dict(
        id=qid,
        kind=kind,
        text=_text(item, "question", where),
        explain=_text(item, "explain", where),
        section=sec,
        code=_text(item, "code", where, required=False),
        wire=_parse_wire(item, where),
    )
    if kind == "multiple_choice":
        return Question(choices=_parse_choices(answers, where), **common)
    return Question(numeric=_parse_numeric(answers, where), **common)


def _parse_choices(answers: list, where: str) -> tuple[Choice, ...]:
    choices = []
    for n, a in enumerate(answers, 1):
        at = f"{where}, answer {n}"
        if not isinstance(a, dict) or not isinstance(a.get("correct"), bool):
            raise ValueError(f"{at}: an answer is an object with a boolean 'correct'")
        text, code = _text(a, "answer", at, required=False), _text(a, "code", at, required=False)
        if not (text.strip() or code.strip()):
            raise ValueError(f"{at}: an answer needs 'answer' text or 'code'")
        choices.append(Choice(text=text, correct=a["correct"], feedback=_text(a, "feedback", at), code=code))
    right = sum(c.correct for c in choices)
    if len(choices) < 2 or right != 1:
        raise ValueError(
            f"{where}: a multiple-choice question needs 2 or more answers and exactly one right "
            f"one; it has {len(choices)} answer(s), {right} marked correct"
        )
    if len(choices) > len(LETTERS):
        raise ValueError(f"{where}: at most {len(LETTERS)} answers")
    return tuple(choices)


def _parse_numeric(answers: list, where: str) -> tuple[NumericAnswer, ...]:
    out = []
    for n, a in enumerate(answers, 1):
        at = f"{where}, answer {n}"
        kind = a.get("type") if isinstance(a, dict) else None
        if kind not in NUMERIC_KINDS:
            raise ValueError(f"{at}: a numeric answer has type 'value', 'range' or 'default', got {kind!r}")
        feedback = _text(a, "feedback", at)
        if kind == "default":
            out.append(NumericAnswer(kind="default", correct=False, feedback=feedback))
            continue
        if not isinstance(a.get("correct"), bool):
            raise ValueError(f"{at}: field 'correct' must be true or false")
        if kind == "value":
            value = a.get("value")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{at}: field 'value' must be a number, got {value!r}")
            out.append(NumericAnswer(kind="value", correct=a["correct"], feedback=feedback, value=float(value)))
        else:
            bounds = a.get("range")
            if (
                not isinstance(bounds, list)
                or len(bounds) != 2
                or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
                or not bounds[0] < bounds[1]
            ):
                raise ValueError(f"{at}: field 'range' must be [low, high] with low < high, got {bounds!r}")
            out.append(
                NumericAnswer(
                    kind="range", correct=a["correct"], feedback=feedback, low=float(bounds[0]), high=float(bounds[1])
                )
            )
    _check_numeric(tuple(out), where)
    return tuple(out)


def _check_numeric(answers: tuple[NumericAnswer, ...], where: str) -> None:
    """Exactly one right value; a right range contains it; no wrong value hides inside a right range."""
    right = [a for a in answers if a.kind == "value" and a.correct]
    if len(right) != 1:
        raise ValueError(f"{where}: a numeric question needs exactly one correct 'value', it has {len(right)}")
    if sum(a.kind == "default" for a in answers) > 1:
        raise ValueError(f"{where}: at most one 'default' answer")
    value = right[0].value
    assert value is not None
    for a in answers:
        if a.kind == "range" and a.correct and not a.matches(value):
            raise ValueError(f"{where}: the correct range [{a.low}, {a.high}) does not contain the value {value}")
        if a.kind == "range" and not a.correct and a.matches(value):
            raise ValueError(f"{where}: a wrong range [{a.low}, {a.high}) contains the right value {value}")
    for wrong in (a for a in answers if a.kind == "value" and not a.correct):
        assert wrong.value is not None
        if any(a.kind == "range" and a.correct and a.matches(wrong.value) for a in answers):
            raise ValueError(f"{where}: the wrong value {wrong.value} lies inside the accepted range")


def _parse_wire(item: dict, where: str) -> Wire | None:
    wire = item.get("wire")
    if wire is None:
        return None
    at = f"{where}, field 'wire'"
    raw, events = wire.get("bytes") if isinstance(wire, dict) else None, wire.get("events", None)
    if not isinstance(raw, str) or not isinstance(events, list) or not isinstance(wire.get("mid_event"), bool):
        raise ValueError(f"{at}: needs 'bytes' (a string), 'events' (a list of [type, data]) and 'mid_event'")
    pairs = []
    for ev in events:
        if not (isinstance(ev, list) and len(ev) == 2 and all(isinstance(x, str) for x in ev)):
            raise ValueError(f"{at}: each event is [event type, data], got {ev!r}")
        pairs.append((ev[0], ev[1]))
    last_id = wire.get("last_event_id")
    if last_id is not None and not isinstance(last_id, str):
        raise ValueError(f"{at}: 'last_event_id' must be a string")
    return Wire(raw=raw.encode("utf-8"), events=tuple(pairs), mid_event=wire["mid_event"], last_event_id=last_id)


def check_wire(question: Question) -> str | None:
    """Run a "which bytes" question's bytes through streamlab's parser; None if it agrees, else the difference.

    The expectation in the file is written by hand from the standard; this is the cross-check.
    """
    from streamlab.core.sse import SSEParser

    if question.wire is None:
        return None
    parser = SSEParser()
    events = parser.feed(question.wire.raw)
    mid_event = parser.close()
    got = tuple((e.event, e.data) for e in events)
    problems = []
    if got != question.wire.events:
        problems.append(f"events {list(got)} != expected {list(question.wire.events)}")
    if mid_event != question.wire.mid_event:
        problems.append(f"stopped mid-event {mid_event} != expected {question.wire.mid_event}")
    if question.wire.last_event_id is not None and parser.last_event_id != question.wire.last_event_id:
        problems.append(f"last event ID {parser.last_event_id!r} != expected {question.wire.last_event_id!r}")
    return f"question {question.id}: " + "; ".join(problems) if problems else None
