"""Exercise checks for lab 02 (fuzz a gallery of broken parsers).

02.1 "Find the bugs": the learner repairs Module 03's Practice 2 snippet into `repaired(chunks)`, a function
that yields the data string of every event (what the snippet hands to `json.loads`), whatever the cuts.
The check runs the split harness on the repair: every strategy, over the fixtures that expose the
snippet's bugs, comparing the data strings only (the snippet never looked at event types or ids).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..fixtures import Fixture, load_fixtures
from ..fuzz import Contender, ParseResult, run_harness, show_split
from ..sse import SSEEvent
from . import exercise

__all__ = ["PRACTICE2_FIXTURES", "data_only", "repair_contender", "check_repair", "RANDOM_RUNS"]

PRACTICE2_FIXTURES: tuple[str, ...] = (
    "bom-first",
    "chat-completions-crlf-keepalive",
    "chat-completions-lf",
    "comments-and-keepalives",
    "cr-only-endings",
    "crlf-two-data-lines",
    "mixed-endings",
    "multibyte-utf8",
    "responses-typed-events",
    "space-removed-once",
    "spec-empty-data",
    "spec-space-optional",
    "spec-stock-ticker",
    "unfinished-final-event",
    "unicode-line-separators",
)
"""The fixtures a repair of the Practice 2 snippet must get right under every split."""

RANDOM_RUNS = 40


def data_only(fixture: Fixture) -> Fixture:
    """The fixture with its expectation reduced to the data strings (type "message", no id)."""
    events = tuple(SSEEvent("message", e.data, "") for e in fixture.expected.events)
    return dataclasses.replace(fixture, expected=dataclasses.replace(fixture.expected, events=events))


def repair_contender(repaired: Callable[[Iterable[bytes]], Iterable[str]], name: str = "your repair") -> Contender:
    """Wrap a `repaired(chunks) -> iterable of data strings` function as a contender that reports events."""

    def run(chunks: Sequence[bytes]) -> ParseResult:
        return ParseResult(tuple(SSEEvent("message", data, "") for data in repaired(iter(chunks))))

    return Contender(name, run, frozenset({"events"}), "a repair of the Practice 2 snippet")


def check_repair(repaired: Callable[[Iterable[bytes]], Iterable[str]], *, random_runs: int = RANDOM_RUNS) -> None:
    """Raise AssertionError naming the first fixture, strategy and cut the repair gets wrong."""
    fixtures = [data_only(f) for f in load_fixtures() if f.name in PRACTICE2_FIXTURES]
    result = run_harness([repair_contender(repaired)], fixtures, random_runs=random_runs)
    failing = result.failing_fixtures("your repair")
    if not failing:
        return
    trial = result.first_failure("your repair", failing[0])
    assert trial is not None
    raw = next(f.raw for f in fixtures if f.name == trial.fixture)
    ok, total = result.totals("your repair")
    raise AssertionError(
        f"{ok} of {total} runs right; wrong on {len(failing)} fixture(s) {failing}. First: {trial.fixture}, "
        f"{trial.strategy}, cuts {list(trial.cuts)[:6]}{'...' if len(trial.cuts) > 6 else ''}: {trial.problem}"
        + (f"\n{show_split(raw, trial.cuts[:3])}" if trial.cuts and len(trial.cuts) <= 3 else "")
    )


@exercise("02.1", "repaired")
def _check_repaired(repaired: Any) -> None:
    if not callable(repaired):
        raise AssertionError(f"`repaired` should be a function taking an iterable of bytes chunks, got {repaired!r}")
    first = list(repaired(iter([b"data: hi\n\n"])))  # a stub raises NotImplementedError here: not attempted
    assert first == ["hi"], f'repaired([b"data: hi\\n\\n"]) should yield "hi" once, got {first!r}'
    check_repair(repaired)
