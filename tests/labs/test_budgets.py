"""Time budgets are measured, not guessed: tools/budgets.py counts each lab, and every place that states a lab's time
agrees with the count (the lab's header, its stopping points, README.md, notebooks/README.md; INSTRUCTORS.md's
agendas are held to the headers by tests/project/test_instructors.py).

When a test here fails after a lab changed, run `.venv/bin/python tools/budgets.py --write` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import budgets

LABS = budgets.labs()
REWRITE = "run `.venv/bin/python tools/budgets.py --write` and review the diff"


def _notebook(tmp_path: Path, cells: list[dict], name: str = "99-test.ipynb") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _md(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def _code(text: str, printed: str = "") -> dict:
    outputs = [{"output_type": "stream", "name": "stdout", "text": printed}] if printed else []
    return {"cell_type": "code", "metadata": {}, "source": text, "outputs": outputs, "execution_count": 1}


def test_the_method_counts_what_it_says(tmp_path: Path) -> None:
    """180 words, 10 lines of code, 30 of output, one exercise with a 4-line solution: 1 + 1 + 1 + (3 + 4)."""
    words = " ".join(["word"] * budgets.READING_WPM)
    solution = "<details><summary>Solution 99.1</summary>\n\n```python\na = 1\nb = 2\nc = 3\nd = 4\n```\n</details>"
    cells = [
        _md(f"# Lab 99: test\n\n{words}"),
        _code(
            "\n".join(f"x{i} = {i}" for i in range(budgets.CODE_LINES_PER_MIN - 1)),
            printed="line\n" * budgets.OUTPUT_LINES_PER_MIN,
        ),
        _code('check("99.1", a)'),
        _md(solution),
    ]
    lab = budgets.measure(_notebook(tmp_path, cells))
    total = lab.total
    assert (total.code, total.output, total.exercises, total.solution_lines) == (10, 30, ["99.1"], 4)
    assert total.words == budgets.READING_WPM + 3  # the title's "Lab 99: test"
    assert total.exercising == budgets.EXERCISE_MIN + 4 * budgets.SOLUTION_LINE_MIN
    assert abs(total.reading - 3.0) < 0.02 and lab.budget == 15  # 10.0 minutes and a bit, rounded up to 15


def test_a_stage_pays_only_for_the_lines_it_adds(tmp_path: Path) -> None:
    first = "<details><summary>Solution 99.1</summary>\n\n```python\ndef f():\n    return 1\n```\n</details>"
    second = (
        "<details><summary>Solution 99.2</summary>\n\n```python\ndef f():\n    x = 2\n    return 1\n```\n</details>"
    )
    cells = [_md("# Lab 99: t"), _code('check("99.1", f)'), _md(first), _code('check("99.2", f)'), _md(second)]
    assert budgets.measure(_notebook(tmp_path, cells)).total.solution_lines == 2 + 1


def test_hidden_blocks_and_code_fences_are_not_read_as_prose() -> None:
    assert budgets.prose_words("one two <details><summary>x</summary>\n\nthree four five\n</details>") == 2
    assert budgets.prose_words("one [two](https://example.org/a/b/c)\n\n```python\nx = 1\n```\n") == 2
    assert budgets.shown_code_lines("```python\nx = 1\n\ny = 2\n```\n\n```mermaid\nflowchart LR\n```") == (2, 1)


def test_a_stopping_point_cuts_the_lab_into_sittings(tmp_path: Path) -> None:
    words = " ".join(["word"] * (budgets.READING_WPM * 10))
    cells = [_md(f"# Lab 99: t\n\n{words}"), _md(f"{budgets.STOP_MARK} Next, about 10 minutes: more."), _md(words)]
    lab = budgets.measure(_notebook(tmp_path, cells))
    assert len(lab.sittings) == 2 and lab.said_next == [10]
    assert [round(p.minutes) for p in lab.sittings] == [10, 10]


@pytest.mark.parametrize("lab", LABS, ids=[lab.lab for lab in LABS])
def test_each_lab_states_its_measured_budget_everywhere(lab: budgets.Lab) -> None:
    problems = [p for p in budgets.problems([lab]) if "sitting" not in p and "stopping point" not in p]
    assert not problems, "; ".join(problems) + f": {REWRITE}"


@pytest.mark.parametrize("lab", LABS, ids=[lab.lab for lab in LABS])
def test_a_long_lab_says_where_to_stop_and_each_sitting_fits(lab: budgets.Lab) -> None:
    problems = [p for p in budgets.problems([lab]) if "sitting" in p or "stopping point" in p]
    assert not problems, "; ".join(problems) + f": {REWRITE}"
    if lab.budget > budgets.SITTING_MIN:
        assert len(lab.sittings) >= 2


@pytest.mark.parametrize("lab", [lab for lab in LABS if len(lab.sittings) > 1], ids=lambda lab: lab.lab)
def test_every_stopping_point_says_what_to_re_run_on_return(lab: budgets.Lab) -> None:
    cells = json.loads(lab.path.read_text(encoding="utf-8"))["cells"]
    stops = [budgets._source(c) for c in cells if budgets._source(c).lstrip().startswith(budgets.STOP_MARK)]
    for text in stops:
        flat = " ".join(line.lstrip("> ") for line in text.splitlines())
        assert "Done so far:" in flat and "Next, about" in flat, flat[:120]
        assert "Run All Above Selected Cell" in flat, f"lab {lab.lab}: a stopping point must say what to re-run"


def test_the_tool_prints_the_method_with_the_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert budgets.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Method: prose {budgets.READING_WPM} words/min")
    for lab in LABS:
        assert f"\n{lab.lab}  {lab.budget:>5} min" in out
