"""Checkpoint quizzes: the data is sound, every answer key grades right, the widget reacts, no answer shows unasked.

The quiz files are data written by hand; these tests are what keeps them honest: exactly one right answer,
an explanation and a section for every question, numbers that parse, "which bytes" answers proven by the
parser, section titles that exist in the lab, and the jupyterquiz format kept. The labs save the quiz's
output without its answers (strict nbval compares that output), so the answer keys are proven here instead:
each one through the quiz's own grading code and through the widget a learner clicks.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from streamlab.core.harness.fixtures import data_dir
from streamlab.core.harness.fuzz import visible_bytes
from streamlab.tools.quiz import available_quizzes, check_wire, load_quiz, parse_quiz
from streamlab.tools.quizview import (
    answers_html,
    build_quiz,
    giveaways,
    html_of,
    quiz_answers,
    quiz_html,
    quiz_text,
    seal,
    shows,
    site_quiz,
    text_of,
    unseal,
)

ROOT = Path(__file__).resolve().parents[2]
QUIZ_DIR = data_dir() / "quiz"
LABS = available_quizzes()
QUESTIONS = [(lab, q) for lab in LABS for q in load_quiz(lab).questions]


def _raw(lab: str) -> list[dict]:
    return json.loads((QUIZ_DIR / f"{lab}.json").read_text(encoding="utf-8"))


def _headings(notebook: Path) -> set[str]:
    """Markdown headings of a notebook, as written (without the leading #s)."""
    found = set()
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            found.update(m.group(1).strip() for m in re.finditer(r"^#{1,6} +(.+)$", source, re.M))
    return found


# --- the data --------------------------------------------------------------------------------------


def test_every_lab_from_01_to_13_has_a_quiz() -> None:
    assert LABS == [f"{n:02d}" for n in range(1, 14)]


@pytest.mark.parametrize("lab", LABS)
def test_a_quiz_loads_and_has_5_to_8_questions(lab: str) -> None:
    quiz = load_quiz(lab)
    assert quiz.lab == lab
    assert 5 <= len(quiz.questions) <= 8


@pytest.mark.parametrize("lab", LABS)
def test_every_multiple_choice_question_has_exactly_one_right_answer_in_the_file(lab: str) -> None:
    for item in _raw(lab):
        if item["type"] == "multiple_choice":
            assert sum(a["correct"] is True for a in item["answers"]) == 1, item["id"]
        else:
            assert item["type"] == "numeric", item["id"]
            right = [a for a in item["answers"] if a.get("type") == "value" and a.get("correct") is True]
            assert len(right) == 1, item["id"]


@pytest.mark.parametrize("lab", LABS)
def test_every_question_and_answer_explains_itself_and_names_its_section(lab: str) -> None:
    for item in _raw(lab):
        assert item["explain"].strip() and item["question"].strip(), item["id"]
        assert item["section"]["lab"] == lab, f"{item['id']}: asked in the lab that teaches it"
        assert item["section"]["title"].strip(), item["id"]
        assert all(a["feedback"].strip() for a in item["answers"]), item["id"]


@pytest.mark.parametrize("lab", LABS)
def test_the_right_answer_is_not_always_in_the_same_place(lab: str) -> None:
    places = [q.right_choice for q in load_quiz(lab).questions if q.kind == "multiple_choice"]
    assert len(set(places)) >= 2, places


def _length_giveaways(questions: list) -> list[str]:
    """How option lengths give a quiz's right answers away, if they do (the length a learner sees: an option's text
    or code): the right option strictly the longest in more than a third of the multiple-choice questions; picking
    the longest option (a tie split evenly) scoring more than a third where chance is a quarter; or one length rank
    (second longest, shortest...) holding more than half of the right answers."""
    problems = []
    ranks: dict[int, list[str]] = {}
    strictly_longest, score, asked = [], 0.0, 0
    for question in questions:
        if question.kind != "multiple_choice":
            continue
        asked += 1
        sizes = [len(choice.text or choice.code) for choice in question.choices]
        right = sizes[question.right_choice]
        longest = [i for i, size in enumerate(sizes) if size == max(sizes)]
        score += (question.right_choice in longest) / len(longest)
        if longest == [question.right_choice]:
            strictly_longest.append(question.id)
        ranks.setdefault(sum(size > right for size in sizes), []).append(question.id)
    if 3 * len(strictly_longest) > asked:
        problems.append(f"the right option is strictly the longest in {strictly_longest} of {asked}")
    if score > asked / 3:
        problems.append(f"always picking the longest option scores {score:.1f} of {asked}")
    problems += [
        f"the right option has {rank} longer options in {held} of {asked}"
        for rank, held in sorted(ranks.items())
        if 2 * len(held) > asked
    ]
    return problems


@pytest.mark.parametrize("lab", LABS)
def test_the_right_answer_is_not_given_away_by_its_length(lab: str) -> None:
    assert _length_giveaways(load_quiz(lab).questions) == []


def test_the_length_check_sees_a_quiz_that_gives_its_answers_away() -> None:
    """The check above is not blind: right options that are always the longest, or always the shortest, fail it."""

    def quiz(right: str, wrong: str) -> list:
        answers = [
            {"answer": wrong, "correct": False, "feedback": "no"},
            {"answer": right, "correct": True, "feedback": "yes"},
            {"answer": wrong + "!", "correct": False, "feedback": "no"},
        ]
        return parse_quiz([_question(id=f"99-{k}", answers=answers) for k in range(1, 4)], lab="99").questions

    longest = _length_giveaways(quiz("the right one, said at length", "short"))
    assert any("strictly the longest" in p for p in longest) and any("scores 3.0 of 3" in p for p in longest)
    assert _length_giveaways(quiz("yes", "a longer wrong option")) == [
        "the right option has 2 longer options in ['99-1', '99-2', '99-3'] of 3"
    ]


SDK_STRICTER = [  # (question, what it must say): the quiz once repeated wrong claims about the SDK
    ("05-2", "LengthFinishReasonError"),  # the `.stream()` helper raises for `length`: not every SDK loop is quiet
    ("06-2", "LengthFinishReasonError"),
    ("06-2", "ContentFilterFinishReasonError"),
    ("03-5", "replaces `index` and `type`"),  # the SDK joins id and name like the arguments, but not these
]


@pytest.mark.parametrize(("qid", "said"), SDK_STRICTER, ids=[f"{q}-{s[:12]}" for q, s in SDK_STRICTER])
def test_the_quiz_says_what_the_sdk_really_does(qid: str, said: str) -> None:
    question = next(q for _, q in QUESTIONS if q.id == qid)
    texts = [question.text, question.explain] + [c.text + c.feedback for c in question.choices]
    assert any(said in text for text in texts), f"{qid} must say {said!r}"


def test_question_ids_are_unique_across_all_quizzes() -> None:
    ids = [q.id for _, q in QUESTIONS]
    assert len(ids) == len(set(ids))
    assert all(q.id.startswith(f"{lab}-") for lab, q in QUESTIONS)


@pytest.mark.parametrize("lab", LABS)
def test_files_keep_the_jupyterquiz_format(lab: str) -> None:
    """jupyterquiz reads question/type/answers (answer or code, correct, feedback; numeric value/range/default)
    and puts text into innerHTML under MathJax, so no text may open an HTML tag, a $ formula or a link."""
    for item in _raw(lab):
        assert item["type"] in ("multiple_choice", "numeric")
        for answer in item["answers"]:
            if item["type"] == "multiple_choice":
                assert ("answer" in answer or "code" in answer) and isinstance(answer["correct"], bool)
            else:
                assert answer["type"] in ("value", "range", "default")
                if answer["type"] == "range":
                    assert answer["range"][0] < answer["range"][1]
        texts = [item["question"], item.get("code", ""), item["explain"]]
        texts += [a.get("answer", "") + a.get("code", "") + a["feedback"] for a in item["answers"]]
        for text in texts:  # and jaxify() turns `[text](url)` into a link
            assert "<" not in text and "$" not in text and "](" not in text, f"{item['id']}: {text[:60]!r}"


# --- numbers and bytes -----------------------------------------------------------------------------


NUMERIC = [(lab, q) for lab, q in QUESTIONS if q.kind == "numeric"]


@pytest.mark.parametrize(("lab", "question"), NUMERIC, ids=[q.id for _, q in NUMERIC])
def test_numeric_answers_grade_as_written(lab: str, question) -> None:
    right = question.right_value.value
    assert question.grade_number(repr(right)).correct
    assert question.grade_number(f"  {right} ").correct
    if question.tolerance:
        low, high = question.tolerance
        assert question.grade_number(repr(low)).correct
        assert not question.grade_number(repr(high)).correct  # half-open, as jupyterquiz checks a range
    for wrong in (a for a in question.numeric if a.kind == "value" and not a.correct):
        verdict = question.grade_number(repr(wrong.value))
        assert not verdict.correct and verdict.feedback == wrong.feedback
    nonsense = question.grade_number("twelve")
    assert not nonsense.correct and "not a number" in nonsense.feedback


def test_a_fraction_is_a_number() -> None:
    quiz = load_quiz("10")
    question = next(q for q in quiz.questions if q.kind == "numeric")
    assert question.grade_number("50/10").correct
    assert not question.grade_number("1/0").correct


WIRED = [(lab, q) for lab, q in QUESTIONS if q.wire is not None]


def test_some_questions_show_raw_bytes() -> None:
    assert len(WIRED) >= 8


@pytest.mark.parametrize(("lab", "question"), WIRED, ids=[q.id for _, q in WIRED])
def test_which_bytes_answers_agree_with_the_parser(lab: str, question) -> None:
    assert check_wire(question) is None
    if question.code:
        assert question.code == visible_bytes(question.wire.raw)


# --- sections exist in the labs --------------------------------------------------------------------


@pytest.mark.parametrize("lab", LABS)
def test_section_titles_are_headings_of_the_lab(lab: str) -> None:
    notebooks = sorted((ROOT / "notebooks").glob(f"{lab}-*.ipynb"))
    if not notebooks:
        pytest.skip(f"lab {lab} has no notebook yet; its quiz names the sections it is expected to have")
    headings = _headings(notebooks[0])
    missing = sorted({q.section.title for q in load_quiz(lab).questions} - headings)
    assert not missing, (
        f"data/quiz/{lab}.json names sections that {notebooks[0].name} does not have: "
        f"{missing}; align the quiz's section titles with the lab's headings"
    )


REQUIRED = [  # the list: each topic is asked in the lab that teaches it
    ("01", r"decode each network chunk"),
    ("03", r"Where is the token usage"),
    ("03", r"usage is None"),
    ("03", r"output_text\.delta.*output_text\.done"),
    ("03", r"name of a tool call"),
    ("05", r"ends without any exception"),
    ("06", r"without `data: \[DONE\]`"),
]


@pytest.mark.parametrize(("lab", "pattern"), REQUIRED)
def test_the_required_topics_are_asked_where_they_are_taught(lab: str, pattern: str) -> None:
    assert any(re.search(pattern, q.text) for q in load_quiz(lab).questions), pattern


# --- loading refuses bad data, and says where --------------------------------------------------------


def _question(**changes: object) -> dict:
    base = {
        "id": "99-1",
        "type": "multiple_choice",
        "question": "Which?",
        "answers": [
            {"answer": "this", "correct": True, "feedback": "yes"},
            {"answer": "that", "correct": False, "feedback": "no"},
        ],
        "explain": "Because.",
        "section": {"lab": "99", "title": "1. Somewhere"},
    }
    base.update(changes)
    return base


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"type": "many_choice"}, "exactly one right answer"),
        (
            {
                "answers": [
                    {"answer": "a", "correct": True, "feedback": "x"},
                    {"answer": "b", "correct": True, "feedback": "y"},
                ]
            },
            "2 marked correct",
        ),
        ({"explain": ""}, "'explain'"),
        ({"section": "lab 1"}, "'section'"),
        (
            {
                "answers": [
                    {"answer": "a", "correct": True, "feedback": ""},
                    {"answer": "b", "correct": False, "feedback": "y"},
                ]
            },
            "'feedback'",
        ),
        (
            {
                "type": "numeric",
                "answers": [
                    {"type": "value", "value": 3, "correct": True, "feedback": "y"},
                    {"type": "range", "range": [2, 4], "correct": True, "feedback": "y"},
                    {"type": "value", "value": 2.5, "correct": False, "feedback": "n"},
                ],
            },
            "inside the accepted range",
        ),
        (
            {"type": "numeric", "answers": [{"type": "value", "value": "3", "correct": True, "feedback": "y"}]},
            "must be a number",
        ),
        ({"wire": {"bytes": "data: a\n\n", "events": [["message"]], "mid_event": False}}, "[event type, data]"),
    ],
)
def test_bad_questions_are_refused_with_the_question_named(changes: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_quiz([_question(**changes)], lab="99", source="test.json")
    assert message in str(info.value) and "99-1" in str(info.value)


def test_duplicate_ids_and_unknown_labs_are_refused() -> None:
    with pytest.raises(ValueError, match="used twice"):
        parse_quiz([_question(), _question()], lab="99")
    with pytest.raises(ValueError, match="no quiz for lab 42"):
        load_quiz("42")
    with pytest.raises(ValueError, match="by its number"):
        load_quiz("one")


def test_a_wrong_which_bytes_expectation_is_caught() -> None:
    quiz = parse_quiz([_question(wire={"bytes": "data: a\r\n\r", "events": [], "mid_event": False})], lab="99")
    problem = check_wire(quiz.questions[0])
    assert problem is not None and "99-1" in problem and "('message', 'a')" in problem


# --- the text twin ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lab", LABS)
def test_the_text_twin_is_deterministic_and_complete(lab: str) -> None:
    text = quiz_text(lab, answers=True)
    assert text == quiz_text(int(lab), answers=True) == quiz_text(lab, answers=True)
    quiz = load_quiz(lab)
    flat = " ".join(text.split())
    for question in quiz.questions:
        assert " ".join(question.text.split()) in flat
    assert text.count("\n   Answer: ") == len(quiz.questions)
    assert text.count("\n   Taught in: ") == len(quiz.questions)
    assert all(len(line) <= 110 or line.startswith("       ") for line in text.splitlines())


def test_the_text_twin_hides_the_answers_unless_asked() -> None:
    text = quiz_text("01")
    assert "Answer:" not in text and "Why:" not in text
    assert "data: a\\r\\n\\r" in text  # the raw bytes are shown, CR and LF spelled out
    assert quiz_text("01", answers=False) == text


def test_the_text_twin_shows_numeric_answers_and_tolerance() -> None:
    text = quiz_text("04", answers=True)
    assert "Answer: 10.8 (accepted: 10.79 up to 10.81)" in text
    assert "Answer: 7.4 (accepted: 7.35 up to 7.45)" in text


def test_quiz_answers_prints_the_answer_key(capsys: pytest.CaptureFixture[str]) -> None:
    quiz_answers("03")
    assert capsys.readouterr().out == quiz_text("03", answers=True) + "\n"


# --- every answer key, graded by the quiz's own code --------------------------------------------------


@pytest.mark.parametrize("lab", LABS)
def test_every_answer_key_grades_right_and_every_other_answer_wrong(lab: str) -> None:
    for question in load_quiz(lab).questions:
        if question.kind == "multiple_choice":
            verdicts = [question.grade_choice(i) for i in range(len(question.choices))]
            assert [v.correct for v in verdicts] == [i == question.right_choice for i in range(len(verdicts))]
            assert question.answer_line().startswith("abcdefghij"[question.right_choice] + ") ")
        else:
            typed = question.answer_line().split(" ")[0]  # the number the answer key prints
            assert question.grade_number(typed).correct, question.id


@pytest.mark.parametrize("lab", LABS)
def test_the_answer_key_clicked_into_the_widget_scores_every_question(lab: str) -> None:
    view = build_quiz(lab)
    for k, question in enumerate(view.quiz.questions):
        if question.kind == "multiple_choice":
            view.buttons[k][question.right_choice].click()
        else:
            view.entries[k].value = question.answer_line().split(" ")[0]
            view.checks[k].click()
        assert view.feedback[k].value.startswith("<b>Right.</b>"), question.id
    assert f"Answered right so far: {len(view.quiz.questions)} of {len(view.quiz.questions)}" in view.score.value


# --- no answer before the learner asks --------------------------------------------------------------


def _answers_in(lab: str, shown: str) -> list[str]:
    return giveaways(load_quiz(lab), shown)


@pytest.mark.parametrize("lab", LABS)
def test_the_quiz_output_shows_questions_and_no_answer(lab: str) -> None:
    view = build_quiz(lab)
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "application/vnd.jupyter.widget-view+json"}
    assert bundle["text/html"] == quiz_html(lab) == html_of(view.quiz)
    assert bundle["text/plain"].startswith(text_of(view.quiz) + "\n\n")
    assert "VBox(" not in bundle["text/plain"]
    for form in ("text/plain", "text/html"):
        assert _answers_in(lab, bundle[form]) == [], form
        assert all(shows(bundle[form], q.text) for q in view.quiz.questions), form
        assert f'quiz_answers("{lab}")' in html.unescape(bundle[form]), form
    assert all(f.value == "" for f in view.feedback) and view.answers.value == ""


def test_the_answer_check_sees_answers_when_they_are_there() -> None:
    """The check above is not blind: the instructor's text and the revealed answers do give them away."""
    assert len(_answers_in("03", quiz_text("03", answers=True))) >= 8
    assert len(_answers_in("03", answers_html(load_quiz("03")))) >= 8


def test_show_all_answers_shows_them_and_hides_them_again() -> None:
    view = build_quiz("05")
    assert view.answers.value == "" and view.reveal.description == "Show all answers"
    view.reveal.click()
    assert view.answers.value == answers_html(view.quiz) and view.reveal.description == "Hide the answers"
    assert view.answers.value.count("Answer: ") == len(view.quiz.questions)
    view.reveal.click()
    assert view.answers.value == "" and view.reveal.description == "Show all answers"


NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _outputs_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        for mime in ("text/plain", "text/html"):
            value = out.get("data", {}).get(mime, "")
            parts.append("".join(value) if isinstance(value, list) else value)
    return "\n".join(parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_committed_lab_shows_a_quiz_answer(path: Path) -> None:
    lab = path.name[:2]
    cells = _cells(path)
    shown = "\n".join(_outputs_text(c) for c in cells if c["cell_type"] == "code")
    assert _answers_in(lab, shown) == []
    calls = [_src(c) for c in cells if c["cell_type"] == "code"]
    assert not any("quiz_answers(" in s or "answers=True" in s for s in calls), "a lab must not print its answers"
    quiz_cells = [c for c in cells if c["cell_type"] == "code" and re.search(r"(?<![\w.])quiz\(", _src(c))]
    assert len(quiz_cells) == 1, "one quiz cell per lab"
    cell = quiz_cells[0]
    assert "NBVAL_IGNORE_OUTPUT" not in _src(cell), "nbval compares the quiz's answer-free output"
    saved = [o for o in cell["outputs"] if "text/html" in o.get("data", {})]
    assert len(saved) == 1 and "".join(saved[0]["data"]["text/html"]) == quiz_html(lab)


# --- the widget ------------------------------------------------------------------------------------


def test_clicking_an_answer_shows_the_verdict_and_the_explanation() -> None:
    view = build_quiz("01")
    question = view.quiz.questions[0]
    right, wrong = question.right_choice, (question.right_choice + 1) % len(question.choices)
    assert view.feedback[0].value == ""

    view.buttons[0][wrong].click()
    assert view.feedback[0].value.startswith("<b>Not quite.</b>")
    assert view.buttons[0][wrong].button_style == "danger"
    assert "Answered right so far: 0 of 7" in view.score.value

    view.buttons[0][right].click()
    assert view.feedback[0].value.startswith("<b>Right.</b> TCP cuts")  # "Right:" of the feedback said once
    assert "multi-byte" in view.feedback[0].value  # the explanation is shown once the answer is right
    assert "Lab 01, section" in view.feedback[0].value
    assert view.buttons[0][right].button_style == "success"
    assert "Answered right so far: 1 of 7" in view.score.value


def test_a_numeric_question_is_checked_from_its_box() -> None:
    view = build_quiz("04")
    k = next(i for i, q in enumerate(view.quiz.questions) if q.kind == "numeric")
    assert view.buttons[k] == [] and view.entries[k] is not None
    view.entries[k].value = "10.85"
    view.checks[k].click()
    assert "201 gaps" in view.feedback[k].value and view.checks[k].button_style == "danger"
    view.entries[k].value = "10.8"
    view.checks[k].click()
    assert view.feedback[k].value.startswith("<b>Right.</b>")


def test_the_widget_has_a_part_for_every_question_and_shows_code() -> None:
    view = build_quiz("07")
    assert len(view.feedback) == len(view.quiz.questions) == len(view.buttons)
    assert view.widget.children[-1] is view.answers_box and view.widget.children[-2] is view.score
    html = " ".join(
        child.value
        for box in view.widget.children[1:-2]
        for child in box.children
        if hasattr(child, "value") and isinstance(child.value, str)
    )
    assert "data: x\\r: ka\\n\\ndata: y\\n\\n" in html
    assert type(view.widget).__name__ == "VBox"


# --- the command line ------------------------------------------------------------------------------


def test_the_cli_prints_a_quiz_and_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    from streamlab.tools.cli.main import main

    assert main(["quiz", "3"]) == 0
    assert capsys.readouterr().out == quiz_text("03") + "\n\n(the answers: streamlab quiz 3 --answers)\n"
    assert main(["quiz", "03", "--answers"]) == 0
    assert capsys.readouterr().out == quiz_text("03", answers=True) + "\n"
    assert main(["quiz", "03", "--no-answers"]) == 0
    assert "Answer:" not in capsys.readouterr().out
    assert main(["quiz", "--list"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"lab 01: {len(load_quiz('01').questions)} questions"
    assert main(["quiz", "42"]) == 2
    assert "no quiz for lab 42" in capsys.readouterr().err


def test_the_cli_stops_quietly_when_its_reader_goes_away() -> None:
    """`streamlab quiz 03 --answers | head`: the reader closes the pipe; no BrokenPipeError traceback. The read end
    is closed before the command starts, so its very first write meets a closed pipe, every run."""
    import os
    import subprocess
    import sys

    from streamlab.tools.cli.main import READER_GONE

    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "streamlab", "quiz", "03", "--answers"],
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert done.stderr == b"", done.stderr.decode()
    assert done.returncode == READER_GONE


@pytest.mark.parametrize("lab", LABS)
def test_the_sites_quiz_says_what_the_widget_says_for_every_answer(lab: str) -> None:
    """The course site's quiz (docs/site/_static/quiz.js) shows the texts `site_quiz` made, unsealed when the reader
    clicks: each one must be what the notebook's widget shows for the same click or number (the browser suite
    clicks the page itself, through quiz.js's own unsealing: tests/browser/test_site.py)."""
    view = build_quiz(lab)
    data = site_quiz(view.quiz)
    salt = data["salt"]
    assert unseal(data["answers_seal"], f"{salt}:answers") == answers_html(view.quiz)
    for k, (question, item) in enumerate(zip(view.quiz.questions, data["questions"], strict=True)):
        assert (item["id"], item["kind"]) == (question.id, question.kind)
        if question.kind == "multiple_choice":
            for i, choice in enumerate(item["choices"]):
                view.buttons[k][i].click()
                opened = unseal(choice["seal"], f"{salt}:{question.id}:{choice['letter']}")
                assert opened["verdict"] == view.feedback[k].value
                assert opened["correct"] is question.choices[i].correct
        else:
            graded = unseal(item["seal"], f"{salt}:{question.id}:numeric")
            view.entries[k].value = repr(question.right_value.value)
            right = next(e for e in graded["numeric"] if e["kind"] == "value" and e["correct"])
            assert right["verdict"] == view.feedback[k].value
            view.entries[k].value = "1e300"  # matches no entry: the default
            assert graded["default"] == view.feedback[k].value


@pytest.mark.parametrize("lab", LABS)
def test_the_sites_quiz_holds_no_answer_in_plain_text(lab: str) -> None:
    """The page's source (the quiz-NN.js that docs/site/conf.py writes from `site_quiz`) shows the questions and
    their choices, and nothing that tells the right one: no `correct` flag, no verdict, no explanation, no answer
    line, no number a numeric question accepts."""
    quiz = load_quiz(lab)
    source = json.dumps(site_quiz(quiz), ensure_ascii=False)
    assert '"correct"' not in source and "Right." not in source and "Not quite." not in source
    assert giveaways(quiz, source) == [] and giveaways(quiz, html.unescape(source)) == []
    for question in quiz.questions:
        assert " ".join(question.explain.split()[:8]) not in html.unescape(source), question.id
        for choice in question.choices:
            assert choice.feedback[:40] not in html.unescape(source), question.id
    assert all(shows(source, q.text) or shows(html.unescape(source), q.text) for q in quiz.questions)


def test_sealing_round_trips_and_depends_on_the_key() -> None:
    value = {"correct": True, "verdict": "<b>Right.</b> é, 日本 and 🎉"}
    sealed = seal(value, "salt:01-1:b")
    assert unseal(sealed, "salt:01-1:b") == value
    assert "Right" not in sealed and seal(value, "salt:01-1:b") == sealed  # deterministic: the same site every build
    with pytest.raises(ValueError):  # another key gives bytes that are not this JSON (nor, here, UTF-8 at all)
        unseal(sealed, "salt:01-1:c")
