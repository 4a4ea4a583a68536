"""The course site in a real browser: every lab's checkpoint quiz is interactive on its static page, and shows no
answer before the reader asks (browser suite).

The site is built once, as `python3 dev.py site` builds it (tools/course_site.py, into a temporary folder), and
its pages are opened from the disk (`file://`), as a reader who downloaded the site would. On each lab page the
quiz must be a live quiz: a button per answer or a box for a number, nothing of the answers shown until a click.
One lab's quiz is then answered as a reader would: a wrong answer, the right one, a number, "Show all answers"
and "Hide the answers", each checked against the texts of the quiz file. A lab's explorer (ipywidgets), which has
no saved state to draw on a static page, must say so where it would be.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from streamlab.tools.quiz import available_quizzes, load_quiz
from streamlab.tools.quizview import giveaways, shows

from .conftest import LABS, ROOT

QUIZZED = [lab for lab in LABS if lab.name[:2] in available_quizzes()]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "html"
    built = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "course_site.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert built.returncode == 0, f"the site did not build:\n{built.stdout}\n{built.stderr}"
    return out


@pytest.fixture
def page(request: pytest.FixtureRequest):
    page = request.getfixturevalue("browser_context").new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    page.close()
    assert not errors, f"the page's scripts failed: {errors}"


def _open_quiz(page, site: Path, lab: Path):
    page.goto((site / "notebooks" / f"{lab.stem}.html").as_uri())
    live = page.locator("div.streamlab-quiz-live")
    expect(live).to_have_count(1, timeout=30_000)
    return live


@pytest.mark.parametrize("lab", QUIZZED, ids=lambda p: p.name[:2])
def test_each_labs_quiz_is_interactive_on_its_page_and_hides_its_answers(site: Path, page, lab: Path) -> None:
    quiz = load_quiz(lab.name[:2])
    live = _open_quiz(page, site, lab)
    questions = live.locator(".streamlab-quiz-question")
    expect(questions).to_have_count(len(quiz.questions))
    for k, question in enumerate(quiz.questions):
        part = questions.nth(k)
        if question.kind == "multiple_choice":
            expect(part.locator("button")).to_have_count(len(question.choices))
        else:
            expect(part.locator("input")).to_have_count(1)
    shown = live.inner_text()  # the quiz, not the lab's prose (which teaches what the answers say)
    assert all(shows(shown, q.text) for q in quiz.questions)
    assert giveaways(quiz, shown) == [], f"{lab.name}: the quiz gives answers away before a click"
    expect(live.get_by_role("button", name="Show all answers")).to_be_visible()


def test_a_reader_answers_the_quiz_on_the_page(site: Path, page) -> None:
    lab = next(p for p in QUIZZED if p.name.startswith("04-"))
    quiz = load_quiz("04")
    live = _open_quiz(page, site, lab)
    first, number = quiz.questions[0], next(q for q in quiz.questions if q.kind == "numeric")
    part = live.locator(".streamlab-quiz-question").nth(0)
    wrong = next(i for i, c in enumerate(first.choices) if not c.correct)
    part.locator("button").nth(wrong).click()
    feedback = part.locator(".streamlab-quiz-feedback")
    expect(feedback).to_contain_text("Not quite.")
    assert shows(feedback.inner_text(), first.choices[wrong].feedback)
    assert not shows(feedback.inner_text(), first.explain)  # why, only once right
    part.locator("button").nth(first.right_choice).click()
    expect(feedback).to_contain_text("Right.")
    assert shows(feedback.inner_text(), first.explain)
    expect(live.locator(".streamlab-quiz-score")).to_have_text(f"Answered right so far: 1 of {len(quiz.questions)}.")

    box = live.locator(".streamlab-quiz-question").nth(quiz.questions.index(number))
    box.locator("input").fill("not a number")
    box.get_by_role("button", name="Check").click()
    expect(box.locator(".streamlab-quiz-feedback")).to_contain_text("not a number")
    box.locator("input").fill(repr(number.right_value.value))
    box.locator("input").press("Enter")
    expect(box.locator(".streamlab-quiz-feedback")).to_contain_text("Right.")
    expect(live.locator(".streamlab-quiz-score")).to_have_text(f"Answered right so far: 2 of {len(quiz.questions)}.")

    reveal = live.get_by_role("button", name="Show all answers")
    reveal.click()
    answers = live.locator(".streamlab-quiz-answers")
    assert all(shows(answers.inner_text(), q.explain) for q in quiz.questions)
    live.get_by_role("button", name="Hide the answers").click()
    expect(answers).to_have_text("")


@pytest.mark.parametrize("stem", ["02-fuzz-broken-parsers", "04-ttft-vs-total", "10-relay-to-gateway"])
def test_an_explorer_that_cannot_draw_on_a_static_page_says_so(site: Path, page, stem: str) -> None:
    """A lab's ipywidgets explorer has no saved state to draw from: the page says what would be there, once per
    explorer, instead of an unexplained blank."""
    page.goto((site / "notebooks" / f"{stem}.html").as_uri())
    views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]')
    assert views.count() >= 1
    expect(page.locator(".streamlab-widget-note")).to_have_count(views.count())
    expect(page.locator(".streamlab-widget-note").first).to_contain_text("need a running kernel")
