"""Exercise checks for lab 02 (fuzz a gallery of broken parsers).

02.1 "Find the bugs": the learner repairs the find-the-bugs snippet (a typical first-attempt loop) into
`repaired(chunks)`, a function that yields the data string of every event (what the snippet hands to
`json.loads`), whatever the cuts. The check runs the split harness on the repair: every strategy, over the
fixtures that expose the snippet's bugs, comparing the data strings only (the snippet never looked at event
types or ids). The verdict names the most important fixture the repair gets wrong and the smallest cut that
breaks it, on one line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from streamlab.core.harness.fixtures import Fixture, load_fixtures
from streamlab.core.harness.fuzz import Contender, ParseResult, check, run_harness, show_split, smallest_failing_split
from streamlab.core.sse import SSEEvent
from streamlab.exercises import exercise

__all__ = ["REPAIR_FIXTURES", "data_only", "repair_contender", "check_repair", "RANDOM_RUNS"]

REPAIR_FIXTURES: tuple[str, ...] = (
    "chat-completions-lf",
    "multibyte-utf8",
    "crlf-two-data-lines",
    "chat-completions-crlf-keepalive",
    "responses-typed-events",
    "spec-stock-ticker",
    "spec-space-optional",
    "unfinished-final-event",
    "cr-only-endings",
    "mixed-endings",
    "comments-and-keepalives",
    "spec-empty-data",
    "space-removed-once",
    "unicode-line-separators",
    "bom-first",
)
"""The fixtures a repair of the find-the-bugs snippet must get right under every split, in teaching order:
the plain chat stream first, the leading byte-order mark last. The verdict reports the first one that fails."""

RANDOM_RUNS = 40


def data_only(fixture: Fixture) -> Fixture:
    """The fixture with its expectation reduced to the data strings (type "message", no id)."""
    events = tuple(SSEEvent("message", e.data, "") for e in fixture.expected.events)
    return dataclasses.replace(fixture, expected=dataclasses.replace(fixture.expected, events=events))


def repair_contender(repaired: Callable[[Iterable[bytes]], Iterable[str]], name: str = "your repair") -> Contender:
    """Wrap a `repaired(chunks) -> iterable of data strings` function as a contender that reports events."""

    def run(chunks: Sequence[bytes]) -> ParseResult:
        return ParseResult(tuple(SSEEvent("message", data, "") for data in repaired(iter(chunks))))

    return Contender(name, run, frozenset({"events"}), "a repair of the find-the-bugs snippet")


def check_repair(repaired: Callable[[Iterable[bytes]], Iterable[str]], *, random_runs: int = RANDOM_RUNS) -> None:
    """Raise AssertionError, in one line, naming the most important fixture the repair gets wrong and its
    smallest failing cut (found by `fuzz.smallest_failing_split`), with the bytes either side of each cut."""
    by_name = {f.name: data_only(f) for f in load_fixtures() if f.name in REPAIR_FIXTURES}
    fixtures = [by_name[name] for name in REPAIR_FIXTURES]  # teaching order
    contender = repair_contender(repaired)
    result = run_harness([contender], fixtures, random_runs=random_runs)
    failing = [name for name in REPAIR_FIXTURES if result.share(contender.name, name) < 1.0]
    if not failing:
        return
    fixture = by_name[failing[0]]
    first = result.first_failure(contender.name, fixture.name)
    assert first is not None
    cuts = smallest_failing_split(contender, fixture, exhaustive_pairs_up_to=200, hint=first.cuts)
    trial = first if cuts is None else check(contender, fixture, cuts)  # None: the repair is not deterministic
    if trial.cuts:  # the bytes either side of every cut, on the same line as the rest
        where = f"with {len(trial.cuts)} cut(s) ({'; '.join(show_split(fixture.raw, trial.cuts).splitlines())})"
    else:
        where = "on the whole stream"
    ok, total = result.totals(contender.name)
    raise AssertionError(
        f"{ok} of {total} runs right; wrong on {len(failing)} fixture(s) {failing}. "
        f"First: {fixture.name} {where}: {' '.join(trial.problem.splitlines())}"
    )


@exercise("02.1", "repaired")
def _check_repaired(repaired: Any) -> None:
    if not callable(repaired):
        raise AssertionError(f"`repaired` should be a function taking an iterable of bytes chunks, got {repaired!r}")
    first = list(repaired(iter([b"data: hi\n\n"])))  # a stub raises NotImplementedError here: not attempted
    assert first == ["hi"], f'repaired([b"data: hi\\n\\n"]) should yield "hi" once, got {first!r}'
    check_repair(repaired)
