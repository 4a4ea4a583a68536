"""Make INSTRUCTORS.md's table of check cells from the code: every registered exercise, what an untouched notebook
prints, what a right answer prints, and what a typical wrong answer prints (a development tool outside the package).

    .venv/bin/python tools/instructors_table.py               print the table (Markdown)
    .venv/bin/python tools/instructors_table.py --write       put it in INSTRUCTORS.md, between its markers
    .venv/bin/python tools/instructors_table.py --labs 01 04  only these labs

Where each column comes from, so that the room can be polled on what it really prints:

* the exercises: the registry of `streamlab.exercises`, after importing every `labNN` module there is;
* untouched: the committed output of the notebook's check cell, which `python3 dev.py execute` printed with the
  stubs in place and which strict nbval holds every run to;
* right: the checker's line for a pass (`Exercise NN.K: passed`); tests/labs/test_solutions.py runs every hidden
  solution through its checker and asserts exactly that line;
* wrong: one typical wrong answer per exercise (`WRONG` says what each is), run now through the same checker.
  For lab 07, a stage's typical wrong answer is the previous stage's hidden solution, unchanged.

The wrong answers of labs 06 and 07 start servers (the SDK against a stand-in, a relay through the chaos proxy):
the whole table takes one to two minutes. tests/project/test_instructors.py checks INSTRUCTORS.md against it.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import importlib
import inspect
import io
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
INSTRUCTORS = ROOT / "INSTRUCTORS.md"
BEGIN = "<!-- BEGIN check-cell table: made by tools/instructors_table.py --write; do not edit by hand -->"
END = "<!-- END check-cell table -->"
SOLUTION = re.compile(r"<summary>\s*Solution\s+(\d\d\.\d+)\s*</summary>.*?```python\n(.*?)```", re.S)
VERDICT = re.compile(r"^Exercise (\d\d\.\d+): (.*)$", re.M)
SERVER_LABS = frozenset({"06", "07"})
"""Labs whose checks start servers: their wrong answers take seconds each, and a verdict may quote a timing."""


# -- the notebooks --------------------------------------------------------------------------------------------


def notebook(lab: str) -> Path | None:
    """notebooks/NN-*.ipynb, or None while the lab has no notebook."""
    found = sorted(NOTEBOOKS.glob(f"{lab}-*.ipynb"))
    return found[0] if found else None


def _cells(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict[str, Any]) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def committed_verdicts(path: Path) -> dict[str, str]:
    """Exercise id -> the verdict its check cell shows in the committed notebook (what an untouched one prints)."""
    found: dict[str, str] = {}
    for cell in _cells(path):
        if cell["cell_type"] != "code" or "check(" not in _source(cell):
            continue
        text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        found.update(VERDICT.findall(text))
    return found


def _run(code: str, ns: dict[str, Any]) -> None:
    """Run notebook code (top-level await allowed, IPython magics and shell escapes dropped), quietly."""
    code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
    with contextlib.redirect_stdout(io.StringIO()):
        result = eval(compile(code, "<notebook>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), ns)
        if inspect.iscoroutine(result):
            asyncio.run(result)


def lab_namespace(lab: str) -> dict[str, Any]:
    """The namespace a lab's code runs in: its setup cell (the first code cell) run."""
    path = notebook(lab)
    if path is None:
        raise LookupError(f"lab {lab} has no notebook yet")
    ns: dict[str, Any] = {"__name__": "__instructors__"}
    _run(next(_source(c) for c in _cells(path) if c["cell_type"] == "code"), ns)
    return ns


def solution(ex_id: str) -> Any:
    """What the hidden solution of `ex_id` defines under the exercise's name, run after the lab's setup cell."""
    from streamlab.exercises import load_lab

    lab = ex_id[:2]
    code = next(
        (
            c
            for cell in _cells(notebook(lab) or Path("-"))
            if cell["cell_type"] == "markdown"
            for i, c in SOLUTION.findall(_source(cell))
            if i == ex_id
        ),
        None,
    )
    if code is None:
        raise LookupError(f"no hidden solution for {ex_id}")
    ns = lab_namespace(lab)
    _run(code, ns)
    return ns[load_lab(ex_id).name]


def notebook_function(lab: str, name: str) -> Callable[..., Any]:
    """A function the lab's notebook defines in a code cell of its own (e.g. lab 09's buggy loop)."""
    path = notebook(lab)
    cell = (
        next((c for c in _cells(path) if c["cell_type"] == "code" and f"def {name}(" in _source(c)), None)
        if path
        else None
    )
    if cell is None:
        raise LookupError(f"lab {lab} defines no {name}()")
    ns = lab_namespace(lab)
    source = _source(cell)
    _run(source[: source.find("\n\n\n")] if "\n\n\n" in source else source, ns)  # the def, not the demo after it
    return ns[name]


# -- typical wrong answers ------------------------------------------------------------------------------------


def _field_strip(line: str) -> tuple[str, str]:
    name, _, value = line.partition(":")
    return name, value.strip()


def _split_per_chunk(chunks: Any) -> Any:
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        yield from lines


def _find_the_bugs_snippet(chunks: Any) -> Any:
    pending = ""
    for piece in chunks:
        pending += piece.decode("utf-8")
        for frame in pending.split("\n\n"):
            if frame.startswith("data: "):
                yield frame[len("data: ") :]


def _tool_calls_by_arrival(chunks: Any) -> dict[int, dict[str, str]]:
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            for frag in (choice.get("delta") or {}).get("tool_calls") or []:
                if frag.get("id"):
                    calls[len(calls)] = {"id": frag["id"], "name": "", "arguments": ""}
                call = calls[len(calls) - 1]
                function = frag.get("function") or {}
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
    return calls


def _reasoning_both_fields_joined(chunks: Any) -> tuple[str, str]:
    reasoning, answer = "", ""
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            reasoning += (delta.get("reasoning_content") or "") + (delta.get("reasoning") or "")
            answer += delta.get("content") or ""
    return reasoning, answer


def _structured_json_loads(stream: Any) -> tuple[str, Any]:
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    return "complete", json.loads(text)


def _retry_whatever_was_shown(status: int | None, events_delivered: int) -> bool:
    return status is None or status in (408, 409, 429) or status >= 500


def _story_of_every_record(records: Any) -> tuple[int, str]:
    return len(records), "succeeded" if records[-1].status == 200 else "out of retries"


def _resume_without_checks(payloads: Any) -> int | None:
    numbers = [p["sequence_number"] for p in payloads if isinstance(p.get("sequence_number"), int)]
    return numbers[-1] if numbers else None


def _sdk_quiet_end_is_complete(stream: Any, stop_after: int | None = None) -> str:
    import openai

    try:
        for n, _ in enumerate(stream, 1):
            if stop_after is not None and n >= stop_after:
                stream.close()
                return "cancelled"
    except openai.APIError:
        return "failed"
    return "complete"


def _sdk_unguarded(stream: Any, idle_timeout: float) -> tuple[str, Any, str]:
    text, usage = "", None
    for chunk in stream:
        usage = chunk.usage or usage
        text += chunk.choices[0].delta.content or ""
    return text, usage, "complete"


async def _buffered_body(upstream: Any, stream: Any) -> Any:
    yield await upstream.aread()


def _tutorial_reader(chunks: Any) -> dict[str, Any]:
    text = ""
    for frame in b"".join(chunks).split(b"\n\n"):
        if frame.startswith(b"data: ") and frame != b"data: [DONE]":
            text += json.loads(frame[6:])["choices"][0]["delta"].get("content") or ""
    return {"text": text, "tool_calls": [], "usage": None, "complete": True}


def _last_finish_reason(body: bytes) -> str:
    reason = "truncated"
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            for choice in json.loads(line[6:]).get("choices") or []:
                reason = choice.get("finish_reason") or reason
    return reason


def _held_when_headers_late(timings: dict[str, Any], done: bool) -> str:
    if not done:
        return "cut"
    return "held" if timings["headers"] > 1.0 else "flows"


def _longest_idle_totals_only(hops: list[dict[str, Any]], answer_seconds: float) -> tuple[Any, list[str]]:
    idles = [hop["idle"] for hop in hops if hop["idle"] is not None]
    short = [hop["name"] for hop in hops if hop["total"] is not None and hop["total"] < answer_seconds]
    return (max(idles) / 2 if idles else None), short


def _with(ex_id: str, **changes: str) -> Callable[[], Any]:
    """The hidden solution of `ex_id` (a dict), with some answers changed."""
    return lambda: {**solution(ex_id), **changes}


def _breaker_any_failure_opens() -> dict[tuple[str, str], str]:
    return {**solution("10.1"), ("closed", "failure"): "open"}


def _previous_stage(ex_id: str) -> Callable[[], Any]:
    return lambda: solution(f"07.{int(ex_id[3:]) - 1}")


@dataclass(frozen=True)
class Wrong:
    what: str
    make: Callable[[], Any]


WRONG: dict[str, Wrong] = {
    "01.1": Wrong("each data line taken for an event of its own", lambda: [("message", "a"), ("message", "b")]),
    "01.2": Wrong("the unfinished last block dispatched too", lambda: [("x", "1"), ("message", "2")]),
    "01.3": Wrong("every leading space removed", lambda: [("message", "two spaces")]),
    "01.4": Wrong("`data` without a colon taken for nothing", lambda: []),
    "01.5": Wrong("`value.strip()` instead of removing one space", lambda: _field_strip),
    "01.6": Wrong("CRLF replaced inside each chunk only", lambda: _split_per_chunk),
    "02.1": Wrong("the find-the-bugs snippet itself, as a generator", lambda: _find_the_bugs_snippet),
    "03.1": Wrong("fragments joined to the last call that had an id, not by `index`", lambda: _tool_calls_by_arrival),
    "03.2": Wrong(
        "`[DONE]` taken for complete, everything else for truncated",
        lambda: lambda datas, cancelled=False: "complete" if "[DONE]" in datas else "truncated",
    ),
    "03.3": Wrong("both reasoning fields appended, a mirrored piece twice", lambda: _reasoning_both_fields_joined),
    "04.1": Wrong("600 / 30, the time to first token left out", lambda: 600 / 30),
    "04.2": Wrong("the pair the wrong way round", lambda: (0.5 + 599 / 30, 0.5)),
    "04.3": Wrong("the server assumed to stop when the user leaves", lambda: (136, 136)),
    "04.4": Wrong("the total taken as n_tokens x gap", lambda: lambda ttft, gap, n_tokens: ttft / (n_tokens * gap)),
    "04.5": Wrong(
        "the time of the first event (the role chunk)", lambda: lambda arrivals: arrivals[0][0] if arrivals else None
    ),
    "05.1": Wrong(
        "a response.failed restarted rather than reported",
        lambda: {"a": "retry", "b": "restart", "c": "resume", "d": "report", "e": "restart"},
    ),
    "05.2": Wrong("the events already delivered ignored", lambda: _retry_whatever_was_shown),
    "05.3": Wrong("the last sequence_number, unchecked", lambda: _resume_without_checks),
    "06.1": Wrong("'complete' whenever the SDK loop ends without an exception", lambda: _sdk_quiet_end_is_complete),
    "06.2": Wrong("every record counted, not only the last call's", lambda: _story_of_every_record),
    "06.3": Wrong("`chunk.choices[0]` read without a guard", lambda: _sdk_unguarded),
    "06.4": Wrong("`json.loads` on what arrived: a cut answer a parse error", lambda: _structured_json_loads),
    "07.1": Wrong("the whole upstream body read, then sent", lambda: _buffered_body),
    "07.2": Wrong("stage 1's solution, unchanged", _previous_stage("07.2")),
    "07.3": Wrong("stage 2's solution, unchanged", _previous_stage("07.3")),
    "07.4": Wrong("stage 3's solution, unchanged", _previous_stage("07.4")),
    "07.5": Wrong("stage 4's solution, unchanged", _previous_stage("07.5")),
    "08.1": Wrong("the tutorial loop of section 10, with `complete` always True", lambda: _tutorial_reader),
    "08.2": Wrong(
        "the command's own exit code, `depends_on` ignored", lambda: lambda doc, depends_on=(): doc["exit_code"]
    ),
    "09.1": Wrong(
        "(c) and (d) swapped: a truncated answer and a length limit", _with("09.1", c="length", d="truncated")
    ),
    "09.2": Wrong("the lab's buggy loop as it stands", lambda: notebook_function("09", "buggy_read_answer")),
    "10.1": Wrong("any failure opens the breaker, not the threshold's", lambda: _breaker_any_failure_opens()),
    "10.2": Wrong("fail over after 40 events were shown", _with("10.2", c="fail_over")),
    "10.3": Wrong("100 ms: few repaints, but text waits too long", lambda: 100),
    "11.1": Wrong("every read counted as a gap", lambda: lambda times: (times[0], len(times) / (times[-1] - times[0]))),
    "11.2": Wrong("the longest prompt's TTFT over its tokens", lambda: lambda points: points[-1][1] / points[-1][0]),
    "11.3": Wrong("the last finish_reason, or 'truncated' without one", lambda: _last_finish_reason),
    "11.4": Wrong(
        "the fragments joined, as the SDK joins them",
        lambda: lambda fragments, offered: "".join(f or "" for f in fragments) or None,
    ),
    "13.1": Wrong(
        "the folklore: every header in the guides fixes it",
        lambda: {**solution("13.1"), "Cache-Control: no-transform": True, "Cache-Control: no-cache": True},
    ),
    "13.2": Wrong("'held' whenever the headers came late", lambda: _held_when_headers_late),
    "13.3": Wrong("half the longest idle timeout, and only total deadlines", lambda: _longest_idle_totals_only),
}
"""One typical wrong answer per exercise: what it is, and how to make it."""


# -- the table ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    ex_id: str
    name: str
    untouched: str
    right: str
    wrong_what: str
    wrong_prints: str


def registered() -> dict[str, Any]:
    """Every exercise of every lab module there is (streamlab/exercises/labNN.py), by id."""
    from streamlab import exercises

    for module in sorted((Path(exercises.__file__).parent).glob("lab[0-9][0-9].py")):
        importlib.import_module(f"streamlab.exercises.{module.stem}")
    return dict(sorted(exercises.registry().items()))


def wrong_verdict(ex_id: str) -> str:
    """What the typical wrong answer of `ex_id` prints, without the "Exercise NN.K: " prefix."""
    from streamlab.exercises import verdict

    wrong = WRONG.get(ex_id)
    if wrong is None:
        return "(no typical wrong answer written yet: add one to WRONG in tools/instructors_table.py)"
    try:
        answer = wrong.make()
    except LookupError as exc:
        return f"(not run: {exc})"
    return verdict(ex_id, answer).split(": ", 1)[1]


def rows(labs: set[str] | None = None, *, wrong: bool = True) -> list[Row]:
    """One row per registered exercise (of `labs`, default all); `wrong=False` leaves the wrong answers unrun."""
    out = []
    committed: dict[str, dict[str, str]] = {}
    for ex_id, ex in registered().items():
        lab = ex_id[:2]
        if labs is not None and lab not in labs:
            continue
        if lab not in committed:
            path = notebook(lab)
            committed[lab] = committed_verdicts(path) if path else {}
        untouched = committed[lab].get(ex_id, "(no committed check cell yet)")
        what = WRONG[ex_id].what if ex_id in WRONG else ""
        out.append(Row(ex_id, ex.name, untouched, "passed", what, wrong_verdict(ex_id) if wrong else ""))
    return out


LONGEST = 300
"""Characters of a verdict the table shows: its beginning is what the room reads out."""


def _cell(text: str) -> str:
    text = text.replace("\n", " ")
    if len(text) > LONGEST:
        text = text[: LONGEST - 2].rstrip() + " …"
    return text.replace("\\", "\\\\").replace("|", "\\|")


def markdown(table: list[Row]) -> str:
    """The table as INSTRUCTORS.md shows it (every verdict as printed, after `Exercise NN.K: `)."""
    lines = [
        "| check cell | fills in | untouched notebook | right answer | a typical wrong answer | it prints |",
        "|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| `{r.ex_id}` | `{r.name}` | {_cell(r.untouched)} | {r.right} | {_cell(r.wrong_what)} | "
            f"{_cell(r.wrong_prints)} |"
        )
    return "\n".join(lines)


def section(text: str) -> str:
    """The generated part of INSTRUCTORS.md (between the markers)."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")


def parse_markdown(table: str) -> list[Row]:
    """The rows of a table `markdown` wrote (to compare INSTRUCTORS.md with the code)."""
    out = []
    for line in table.splitlines()[2:]:
        cells = [c.strip().replace("\\|", "|").replace("\\\\", "\\") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        ex_id, name = cells[0].strip("`"), cells[1].strip("`")
        out.append(Row(ex_id, name, cells[2], cells[3], cells[4], cells[5]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="replace the table in INSTRUCTORS.md")
    parser.add_argument("--labs", nargs="+", metavar="NN", help="only these labs (not with --write)")
    args = parser.parse_args(argv)
    if args.write and args.labs:
        parser.error("--write makes the whole table: leave out --labs")
    table = markdown(rows({lab.zfill(2) for lab in args.labs} if args.labs else None))
    if not args.write:
        print(table)
        return 0
    text = INSTRUCTORS.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    INSTRUCTORS.write_text(text[:start] + "\n" + table + "\n" + text[end:], encoding="utf-8")
    print(f"wrote {len(table.splitlines()) - 2} rows into {INSTRUCTORS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
