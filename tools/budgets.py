"""Each lab's time budget, measured from the lab itself (a development tool outside the package).

    .venv/bin/python tools/budgets.py               the estimate per lab, what it is made of, and the method
    .venv/bin/python tools/budgets.py --labs 07 09  only these labs, with their sittings and sections
    .venv/bin/python tools/budgets.py --check       exit 1 if a lab's header, README.md or notebooks/README.md
                                                    gives another budget, or a long lab has a sitting too long
    .venv/bin/python tools/budgets.py --write       put the measurements in the labs' headers, their stopping
                                                    points and both tables (then review the diff)

The budget is what a learner who works the lab as written needs: read the prose, read and run the code and its
output, look at the figures, do every exercise, take the quiz. It is counted from the committed notebook and its
quiz file, at stated rates, never guessed:

* prose: the words of the markdown cells at READING_WPM (180 words a minute, a careful pace for technical
  prose; fast readers of light text reach 250). Hidden blocks (`<details>`: solutions, asides) are not counted
  here, since a learner opens them only when stuck: the exercise time pays for them;
* code: the non-blank lines of the code cells and of the code blocks shown in the prose, at CODE_LINES_PER_MIN
  (read it, run it, see what it did);
* output: the lines the cells print (text, tables, verdicts), at OUTPUT_LINES_PER_MIN, plus FIGURE_MIN for
  each figure and Mermaid diagram and WIDGET_MIN for each interactive explorer (the quiz aside);
* exercises: EXERCISE_MIN each (read the task, run the check, read the verdict, usually more than once), plus
  SOLUTION_LINE_MIN for each line of its hidden solution that no earlier solution of the lab already has (a lab
  whose stages grow one function pays only for what each stage adds);
* quiz: per question, its words (question, code, choices, and the explanation shown once it is right) at
  READING_WPM, plus QUIZ_THINK_MIN to think and click.

The parts are added up and rounded up to the next 5 minutes. A lab over SITTING_MIN is cut into sittings by
"A good place to stop" cells (`STOP_MARK`); each sitting is measured the same way, and `--check` fails a lab
over SITTING_MIN without a stopping point, a sitting longer than SITTING_MAX_MIN, or a stopping point whose
"Next, about N minutes" is not the next sitting's measurement to the nearest 5 minutes. tests/labs/test_budgets.py
holds the labs' headers, the two README tables and INSTRUCTORS.md's agendas to these numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
QUIZZES = ROOT / "streamlab" / "data" / "quiz"

READING_WPM = 180
CODE_LINES_PER_MIN = 10
OUTPUT_LINES_PER_MIN = 30
FIGURE_MIN = 1.0
WIDGET_MIN = 2.0
EXERCISE_MIN = 3.0
SOLUTION_LINE_MIN = 1.0
QUIZ_THINK_MIN = 0.5
ROUND_TO = 5
SITTING_MIN = 60
SITTING_MAX_MIN = 75

STOP_MARK = "> **A good place to stop.**"
NEXT = re.compile(r"Next, about (\d+) minutes")
BUDGET = re.compile(r"\*\*Time budget:\*\* about (\d+) minutes")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
HIDDEN = re.compile(r"<details>.*?</details>", re.S)
SOLUTION = re.compile(r"<summary>\s*Solution\s+(\d\d\.\d+)\s*</summary>.*?```python\n(.*?)```", re.S)
FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M)
CHECK = re.compile(r"""\bcheck\(\s*["'](\d\d\.\d+)["']""")
QUIZ_CALL = re.compile(r"(?<![\w.])quiz\(")
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'._/-]*")


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def prose_words(markdown: str) -> int:
    """Words a reader reads in a markdown cell: hidden blocks, code blocks, link targets and HTML tags left out."""
    text = HIDDEN.sub(" ", markdown)
    text = FENCE.sub(" ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"<[^>]+>", " ", text)
    return len(WORD.findall(text))


def shown_code_lines(markdown: str) -> tuple[int, int]:
    """(code lines shown in the prose, Mermaid diagrams) of a markdown cell, hidden blocks left out."""
    lines = diagrams = 0
    for match in FENCE.finditer(HIDDEN.sub(" ", markdown)):
        if match.group(2) == "mermaid":
            diagrams += 1
        else:
            lines += sum(1 for line in match.group(3).splitlines() if line.strip())
    return lines, diagrams


@dataclass
class Part:
    """What a stretch of a lab holds, and the minutes it takes at the module's rates."""

    words: int = 0
    code: int = 0
    output: int = 0
    figures: int = 0
    widgets: int = 0
    exercises: list[str] = field(default_factory=list)
    solution_lines: int = 0
    quiz_questions: int = 0
    quiz_words: int = 0

    @property
    def reading(self) -> float:
        return (
            self.words / READING_WPM
            + self.code / CODE_LINES_PER_MIN
            + self.output / OUTPUT_LINES_PER_MIN
            + self.figures * FIGURE_MIN
            + self.widgets * WIDGET_MIN
        )

    @property
    def exercising(self) -> float:
        return len(self.exercises) * EXERCISE_MIN + self.solution_lines * SOLUTION_LINE_MIN

    @property
    def quizzing(self) -> float:
        return self.quiz_words / READING_WPM + self.quiz_questions * QUIZ_THINK_MIN

    @property
    def minutes(self) -> float:
        return self.reading + self.exercising + self.quizzing


def _outputs(cell: dict[str, Any], part: Part) -> None:
    quiz = bool(QUIZ_CALL.search(_source(cell)))
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if out.get("output_type") == "stream":
            part.output += len(_text(out.get("text", "")).splitlines())
        elif "image/png" in data or "image/svg+xml" in data:
            part.figures += 1
        elif WIDGET_MIME in data:
            part.widgets += 0 if quiz else 1
        elif "text/plain" in data and not quiz:
            part.output += len(_text(data["text/plain"]).splitlines())


def _solution_lines(cells: list[dict[str, Any]]) -> dict[str, int]:
    """Exercise id -> lines of its hidden solution that no earlier solution of the lab has."""
    seen: set[str] = set()
    new: dict[str, int] = {}
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        for ex_id, code in SOLUTION.findall(_source(cell)):
            lines = [line.strip() for line in code.splitlines() if line.strip()]
            new[ex_id] = sum(1 for line in lines if line not in seen)
            seen.update(lines)
    return new


def _quiz(lab: str) -> tuple[int, int]:
    """(questions, words a learner reads) of data/quiz/NN.json."""
    path = QUIZZES / f"{lab}.json"
    if not path.exists():
        return 0, 0
    words = 0
    questions = json.loads(path.read_text(encoding="utf-8"))
    for q in questions:
        texts = [q["question"], q.get("code", ""), q["explain"]]
        texts += [a.get("answer", "") + " " + a.get("code", "") for a in q["answers"] if "answer" in a or "code" in a]
        words += sum(len(WORD.findall(t)) for t in texts)
    return len(questions), words


@dataclass
class Lab:
    """One lab measured: its number, file, the sittings between its stopping points, its section starts, what
    its header says, and what each stopping point says the next sitting takes."""

    lab: str
    path: Path
    sittings: list[Part]
    sections: list[tuple[str, float]]  # (heading, minutes from the lab's start)
    header: int | None  # the budget its header gives
    said_next: list[int | None] = field(default_factory=list)  # "Next, about N minutes" of each stopping point

    @property
    def total(self) -> Part:
        whole = Part()
        for part in self.sittings:
            for name in (
                "words",
                "code",
                "output",
                "figures",
                "widgets",
                "solution_lines",
                "quiz_questions",
                "quiz_words",
            ):
                setattr(whole, name, getattr(whole, name) + getattr(part, name))
            whole.exercises += part.exercises
        return whole

    @property
    def budget(self) -> int:
        return rounded(self.total.minutes)


def rounded(minutes: float) -> int:
    """Minutes rounded up to the next ROUND_TO."""
    return int(math.ceil(minutes / ROUND_TO - 1e-9) * ROUND_TO)


def about(minutes: float) -> int:
    """Minutes to the nearest ROUND_TO (at least ROUND_TO): what a stopping point says the next sitting takes."""
    return max(ROUND_TO, int(math.floor(minutes / ROUND_TO + 0.5)) * ROUND_TO)


def measure(path: Path) -> Lab:
    """Measure one lab notebook (and its quiz) at the module's rates."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    lab = path.name[:2]
    cells = nb["cells"]
    solutions = _solution_lines(cells)
    sittings: list[Part] = [Part()]
    sections: list[tuple[str, float]] = []
    said_next: list[int | None] = []
    part, elapsed = sittings[0], 0.0
    for cell in cells:
        source = _source(cell)
        before = part.minutes
        if cell["cell_type"] == "markdown":
            if source.lstrip().startswith(STOP_MARK):
                part = Part()
                sittings.append(part)
                before = 0.0
                said = NEXT.search(" ".join(re.sub(r"^>\s?", "", line) for line in source.splitlines()))
                said_next.append(int(said.group(1)) if said else None)
            sections += [(title.strip(), elapsed) for title in re.findall(r"^##\s+(.+)$", source, re.M)]
            part.words += prose_words(source)
            code, diagrams = shown_code_lines(source)
            part.code += code
            part.figures += diagrams
        elif cell["cell_type"] == "code":
            part.code += sum(1 for line in source.splitlines() if line.strip() and not line.startswith("# NBVAL"))
            _outputs(cell, part)
            for ex_id in CHECK.findall(source):
                part.exercises.append(ex_id)
                part.solution_lines += solutions.get(ex_id, 0)
            if QUIZ_CALL.search(source):
                part.quiz_questions, part.quiz_words = _quiz(lab)
        elapsed += part.minutes - before
    header = BUDGET.search(_source(cells[0]))
    return Lab(lab, path, sittings, sections, int(header.group(1)) if header else None, said_next)


def labs(numbers: list[str] | None = None) -> list[Lab]:
    """Every lab notebook measured (or only `numbers`), in order."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))
    return [measure(p) for p in paths if not numbers or p.name[:2] in numbers]


def header_parts(lab: Lab) -> tuple[int, int, int]:
    """(reading and running, exercises, quiz) in minutes for the header, adding up to the budget: the exercises
    and the quiz rounded to the nearest minute, the reading taking the rest of the rounding."""
    total = lab.total
    exercises, quiz = round(total.exercising), round(total.quizzing)
    return lab.budget - exercises - quiz, exercises, quiz


def method() -> str:
    return (
        f"prose {READING_WPM} words/min; code {CODE_LINES_PER_MIN} lines/min; output "
        f"{OUTPUT_LINES_PER_MIN} lines/min; {FIGURE_MIN:g} min a figure or diagram, {WIDGET_MIN:g} an "
        f"explorer; {EXERCISE_MIN:g} min an exercise + {SOLUTION_LINE_MIN:g} a new solution line; quiz "
        f"{READING_WPM} words/min + {QUIZ_THINK_MIN:g} min a question; total rounded up to {ROUND_TO} min"
    )


def report(found: list[Lab], *, detail: bool) -> str:
    lines = [
        f"Method: {method()}.",
        "",
        "lab  budget  header  reading  exercises  quiz   words  code  output  figs  exercises (new sol. lines)",
    ]
    for lab in found:
        t = lab.total
        reading, exercises, quiz = header_parts(lab)
        lines.append(
            f"{lab.lab}   {lab.budget:>4} min {lab.header or '-':>5}   {reading:>5}   {exercises:>7}   "
            f"{quiz:>5}   {t.words:>5}  {t.code:>4}  {t.output:>6}  {t.figures + t.widgets:>4}  "
            f"{len(t.exercises)} ({t.solution_lines})"
        )
        if detail:
            for n, part in enumerate(lab.sittings, 1):
                lines.append(
                    f"     sitting {n}: {part.minutes:.1f} min, about {about(part.minutes)} (exercises "
                    f"{', '.join(part.exercises) or '-'})"
                )
            lines += [f"     {at:6.1f} min  {title}" for title, at in lab.sections]
    total = sum(lab.budget for lab in found)
    lines += ["", f"all {len(found)} labs: {total} min ({total // 60} h {total % 60:02d} min)"]
    return "\n".join(lines)


def problems(found: list[Lab]) -> list[str]:
    """Where a header, a README table or a sitting disagrees with the measurement."""
    out = []
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    index = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    for lab in found:
        if lab.header != lab.budget:
            out.append(f"lab {lab.lab}: the header says {lab.header} min, the measurement {lab.budget}")
        for name, text in (("README.md", readme), ("notebooks/README.md", index)):
            row = next((ln for ln in text.splitlines() if ln.startswith("|") and f"{lab.path.name})" in ln), None)
            said = re.search(r"(\d+) min\b[^|]*\|?\s*$", row or "")
            if row is None or said is None or int(said.group(1)) != lab.budget:
                out.append(
                    f"lab {lab.lab}: {name}'s table says {said.group(1) if said else 'nothing'} min, the "
                    f"measurement {lab.budget}"
                )
        if lab.budget > SITTING_MIN and len(lab.sittings) < 2:
            out.append(f"lab {lab.lab}: {lab.budget} min and no stopping point ({STOP_MARK!r} cell)")
        for n, part in enumerate(lab.sittings, 1):
            if part.minutes > SITTING_MAX_MIN:
                out.append(f"lab {lab.lab}: sitting {n} takes {part.minutes:.0f} min (at most {SITTING_MAX_MIN})")
        for n, (said, part) in enumerate(zip(lab.said_next, lab.sittings[1:]), 1):
            if said != about(part.minutes):
                out.append(
                    f"lab {lab.lab}: stopping point {n} says the rest takes {said} min, the measurement "
                    f'{about(part.minutes)} ("Next, about N minutes")'
                )
    return out


WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
HEADER = re.compile(r"\*\*Time budget:\*\*.*?(?=\n\n|\n\*\*Previous|\Z)", re.S)


def header_sentence(lab: Lab) -> str:
    """The header's budget, as the lab states it: the total, its three parts, and the sittings."""
    reading, exercises, quiz = header_parts(lab)
    count = len(lab.total.exercises)
    what = "the exercise" if count == 1 else f"the {WORDS.get(count, count)} exercises"
    parts = [f"{reading} reading and running", f"{exercises} for {what}"] + ([f"{quiz} for the quiz"] if quiz else [])
    sittings = len(lab.sittings)
    tail = f", in {WORDS.get(sittings, sittings)} sittings: the lab marks where to stop" if sittings > 1 else ""
    return f"**Time budget:** about {lab.budget} minutes ({', '.join(parts)}){tail}."


def _quoted(text: str) -> str:
    """A stopping point's text as the labs write it: one quoted paragraph, wrapped."""
    body = textwrap.fill(" ".join(text.split()), 112, break_long_words=False, break_on_hyphens=False)
    return "\n".join("> " + line for line in body.splitlines())


def write_lab(lab: Lab) -> bool:
    """Put the measurements in the lab: the header's budget sentence and each stopping point's "Next, about N
    minutes". True when the file changed. Only markdown changes, so the committed outputs stay valid."""
    raw = lab.path.read_text(encoding="utf-8")
    nb = json.loads(raw)
    cells = nb["cells"]
    head = _source(cells[0])
    cells[0]["source"] = HEADER.sub(
        lambda m: textwrap.fill(header_sentence(lab), 116, break_long_words=False, break_on_hyphens=False),
        head,
        count=1,
    )
    cells[0]["source"] = cells[0]["source"].splitlines(keepends=True)
    stops = iter(lab.sittings[1:])
    for cell in cells:
        text = _source(cell)
        if cell["cell_type"] == "markdown" and text.lstrip().startswith(STOP_MARK):
            flat = " ".join(re.sub(r"^>\s?", "", line) for line in text.splitlines())
            flat = NEXT.sub(f"Next, about {about(next(stops).minutes)} minutes", flat, count=1)
            cell["source"] = _quoted(flat).splitlines(keepends=True)
    out = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    if out != raw:
        lab.path.write_text(out, encoding="utf-8")
    return out != raw


def write_tables(found: list[Lab]) -> list[str]:
    """Put each lab's budget in the last column ("N min") of its row in README.md and notebooks/README.md."""
    changed = []
    for path in (ROOT / "README.md", NOTEBOOKS / "README.md"):
        text = path.read_text(encoding="utf-8")
        new = text
        for lab in found:
            new = re.sub(
                rf"^(\|[^\n]*{re.escape(lab.path.name)}\)[^\n]*\| )\d+ min( \|)$",
                rf"\g<1>{lab.budget} min\g<2>",
                new,
                flags=re.M,
            )
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(str(path.relative_to(ROOT)))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labs", nargs="*", help="only these labs (two digits each)")
    parser.add_argument("--check", action="store_true", help="exit 1 listing every disagreement")
    parser.add_argument("--write", action="store_true", help="write the measurements into the labs and the tables")
    args = parser.parse_args(argv)
    found = labs(args.labs)
    if args.write:
        written = [str(lab.path.relative_to(ROOT)) for lab in found if write_lab(lab)] + write_tables(found)
        print("written: " + (", ".join(written) or "nothing (already up to date)"))
        found = labs(args.labs)
    print(report(found, detail=bool(args.labs)))
    if args.check:
        wrong = problems(found)
        print("\n".join(["", *wrong]) if wrong else "\nevery header, table and sitting agrees")
        return 1 if wrong else 0
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `tools/budgets.py | head`: the reader left; stop quietly
        sys.stdout = None  # type: ignore[assignment]  # nothing left to flush at exit
        sys.exit(141)
