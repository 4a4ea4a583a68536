"""The interview questions: at least 15, each with a hidden model answer and links that resolve in JupyterLab."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PAGE = NOTEBOOKS / "interview-questions.md"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#([^)\s]*))?\)")


def _questions() -> list[tuple[str, str]]:
    """(heading, body) for every `### N. ...` question of the page."""
    text = PAGE.read_text(encoding="utf-8")
    parts = re.split(r"^### (\d+\. .+)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def jupyterlab_anchor(heading: str) -> str:
    """The id JupyterLab 4 gives a markdown heading: its text (inline code unwrapped), spaces made dashes."""
    return re.sub(r"`([^`]*)`", r"\1", heading).strip().replace(" ", "-")


def _anchors(notebook: Path) -> set[str]:
    found = set()
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            found.update(jupyterlab_anchor(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+)$", source, re.M))
    return found


def test_there_are_at_least_15_questions_numbered_in_order() -> None:
    questions = _questions()
    assert len(questions) >= 15
    assert [int(h.split(".")[0]) for h, _ in questions] == list(range(1, len(questions) + 1))


def test_the_questions_go_from_junior_to_senior() -> None:
    text = PAGE.read_text(encoding="utf-8")
    levels = re.findall(r"^## (Junior|Mid-level|Senior)$", text, flags=re.M)
    assert levels == ["Junior", "Mid-level", "Senior"]


@pytest.mark.parametrize(("heading", "body"), _questions(), ids=lambda x: x[:40] if isinstance(x, str) else "")
def test_each_question_hides_a_model_answer_and_links_a_lab_section(heading: str, body: str) -> None:
    assert body.count("<details><summary>Model answer</summary>") == 1 and body.count("</details>") == 1
    answer = body.split("<details><summary>Model answer</summary>", 1)[1].split("</details>", 1)[0]
    assert len(answer.split()) >= 40, "a model answer says why, not just what"
    links = [(target, anchor) for target, anchor in LINK.findall(body.split("<details>", 1)[0])]
    assert links, "each question links the lab section that teaches it"
    for target, anchor in links:
        path = NOTEBOOKS / target
        assert path.exists(), f"{heading}: link target {target} does not exist"
        assert anchor, f"{heading}: link to {target} names no section"
        assert anchor in _anchors(path), f"{heading}: {target} has no heading with the JupyterLab id {anchor!r}"


def test_the_anchor_rule_matches_jupyterlab() -> None:
    """JupyterLab 4 (`createHeaderId`) takes the heading's textContent and replaces each space with '-'."""
    assert jupyterlab_anchor("4. Resume: background mode and the `sequence_number` cursor") == (
        "4.-Resume:-background-mode-and-the-sequence_number-cursor"
    )
