"""Exercises of lab 10 (from relay to gateway): the checkers behind its check cells, and the lab's schedules.

* 10.1 `breaker_table`: the circuit breaker's transition table, {(state, signal): next state}.
* 10.2 `fail_over_or_not`: for each of seven situations, the gateway's move: "fail_over", "pass_error",
  "resume" or "marked_end".
* 10.3 `interval_ms`: a render batching interval that keeps both of the lab's schedules within a repaint budget
  and a wait budget, read from the lab's interval sweep figure.

The checkers compare with the library the lab runs: `streamlab.core.gateway.breaker.TRANSITIONS`,
`streamlab.core.gateway.fallback.decide` and `streamlab.core.batching.batch`.
"""

from __future__ import annotations

import math
from typing import Any

from streamlab.core.batching import batch, render_stats
from streamlab.core.endings import Ending
from streamlab.core.gateway.breaker import TRANSITIONS, Signal, State
from streamlab.core.gateway.fallback import MOVES, Situation, decide
from streamlab.core.metrics import Schedule
from streamlab.exercises import NotAttempted, exercise

__all__ = ["FAST", "SLOW", "deltas_of", "SITUATIONS", "CASES", "REPAINT_BUDGET", "WAIT_BUDGET_MS", "interval_report"]

# -- the lab's schedules (section 5 and exercise 10.3) -------------------------------------------------------

_WORDS = tuple(f"w{i:03d} " for i in range(200))  # 200 deltas of 5 characters
FAST = Schedule(ttft=0.3, gap=0.008, pieces=_WORDS)
"""A fast model: the first words after 300 ms, then a delta every 8 ms (125 a second)."""
SLOW = Schedule(ttft=0.3, gap=0.12, pieces=_WORDS)
"""A slow one: a delta every 120 ms (about 8 a second)."""

REPAINT_BUDGET = 30.0
"""Exercise 10.3: at most this many repaints per second on either schedule."""
WAIT_BUDGET_MS = 60.0
"""Exercise 10.3: no delta may wait longer than this (ms) before it is painted."""


def deltas_of(schedule: Schedule) -> list[tuple[float, str]]:
    """A schedule as (arrival time, text) pairs, the input of `streamlab.core.batching.batch`."""
    return list(zip(schedule.piece_times(), schedule.pieces))


# -- 10.1 the transition table --------------------------------------------------------------------------------

_TABLE_WHY = {
    ("closed", "success"): "a success while closed changes nothing (it only resets the count of failures)",
    ("closed", "failure"): "one failure under the threshold is not yet a reason to stop sending",
    ("closed", "trip"): "the failure that reaches the threshold is exactly what opens the breaker",
    ("open", "cooled"): "when the cool-down is over the breaker lets one probe through: half-open",
    ("half_open", "success"): "a probe that succeeds shows the upstream is back: closed",
    ("half_open", "failure"): "a probe that fails means the upstream is still unwell: open again, fresh cool-down",
}


def _effective(table: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    return {(s.value, g.value): table.get((s.value, g.value), s.value) for s in State for g in Signal}


@exercise("10.1", "breaker_table")
def check_breaker_table(answer: Any) -> None:
    if not isinstance(answer, dict):
        raise AssertionError(
            f"breaker_table should be a dict {{(state, signal): next state}}, got {type(answer).__name__}"
        )
    if not answer or all(v is Ellipsis for v in answer.values()):
        raise NotAttempted
    states, signals = {s.value for s in State}, {g.value for g in Signal}
    table: dict[tuple[str, str], str] = {}
    for key, value in answer.items():
        if not (isinstance(key, tuple) and len(key) == 2 and key[0] in states and key[1] in signals):
            raise AssertionError(
                f"{key!r} is not a (state, signal) pair; states are {sorted(states)}, signals {sorted(signals)}"
            )
        if value is Ellipsis:
            raise AssertionError(f"{key!r} is still `...`")
        if value not in states:
            raise AssertionError(f"{key!r} -> {value!r}: the next state must be one of {sorted(states)}")
        table[(str(key[0]), str(key[1]))] = str(value)
    expected = _effective({(s.value, g.value): t.value for (s, g), t in TRANSITIONS.items()})
    theirs = _effective(table)
    wrong = [pair for pair in sorted(expected) if theirs[pair] != expected[pair]]
    if wrong:
        pair = wrong[0]
        why = _TABLE_WHY.get(pair, f"{pair[1]!r} in {pair[0]!r} is not a transition: the state stays {pair[0]!r}")
        left_out = "" if pair in table else " (left out: a pair not in the table keeps its state)"
        raise AssertionError(
            f"{len(wrong)} pair(s) not right yet. First: {pair} -> {theirs[pair]!r}{left_out}, but {why}."
        )


# -- 10.2 fail over or not ------------------------------------------------------------------------------------

SITUATIONS = {
    "a": "the primary answers 503 before sending anything; the backup's breaker is closed",
    "b": "the primary answers 400: the request's 'messages' field is malformed; the backup is healthy",
    "c": "an ordinary Chat stream from the primary is reset after 40 events reached the client",
    "d": "the primary sends 200 and its headers, then nothing, past the read timeout; the backup is healthy",
    "e": "a background Responses stream drops between two events, after sequence_number 118",
    "f": "the primary answers 429 and the backup's breaker is open: no upstream left to try",
    "g": "the primary's connection is cut in the middle of its very first event; the backup is healthy",
}
"""The situations of exercise 10.2, in words."""

CASES = {
    "a": Situation(0, Ending.HTTP_ERROR, status=503, upstreams_left=1),
    "b": Situation(0, Ending.HTTP_ERROR, status=400, upstreams_left=1),
    "c": Situation(40, Ending.BROKEN, upstreams_left=1),
    "d": Situation(0, Ending.READ_TIMEOUT, upstreams_left=1),
    "e": Situation(119, Ending.BROKEN, resumable=True, at_event_boundary=True),
    "f": Situation(0, Ending.HTTP_ERROR, status=429, upstreams_left=0),
    "g": Situation(0, Ending.BROKEN, upstreams_left=1, at_event_boundary=False),
}
"""The same situations as data: `streamlab.core.gateway.fallback.decide` gives the expected move of each."""

_MOVE_WHY = {
    "fail_over": "fail_over sends the request to the next upstream, which is only safe while the client holds no event",
    "pass_error": "pass_error hands this failure to the client",
    "resume": "resume continues the same response on the same upstream from a cursor",
    "marked_end": "marked_end ends a stream the client already holds part of",
}


@exercise("10.2", "fail_over_or_not")
def check_fail_over_or_not(answer: Any) -> None:
    if not isinstance(answer, dict):
        raise AssertionError(
            f"fail_over_or_not should be a dict like {{'a': 'fail_over', ...}}, got {type(answer).__name__}"
        )
    if not answer or all(v is Ellipsis for v in answer.values()):
        raise NotAttempted
    if sorted(answer) != sorted(CASES):
        raise AssertionError(f"give one move for each of {sorted(CASES)}; you gave {sorted(answer)}")
    for key in sorted(CASES):
        if answer[key] is Ellipsis:
            raise AssertionError(f"({key}) is still `...`")
        if answer[key] not in MOVES:
            raise AssertionError(f"({key}) should be one of {MOVES}, got {answer[key]!r}")
    wrong = []
    for key in sorted(CASES):
        verdict = decide(CASES[key])
        if answer[key] != verdict.move.value:
            wrong.append(
                f"({key}) {SITUATIONS[key]}: not {answer[key]} ({_MOVE_WHY[answer[key]]}); the rule says {verdict}"
            )
    if wrong:
        raise AssertionError(f"{len(wrong)} of {len(CASES)} not right yet. First: {wrong[0]}")


# -- 10.3 a batching interval -----------------------------------------------------------------------------------


def interval_report(interval_ms: float) -> dict[str, tuple[float, float, float]]:
    """For each schedule: (repaints per second, longest wait in ms, first paint in ms) at this interval."""
    out = {}
    for name, schedule in (("fast", FAST), ("slow", SLOW)):
        stats = render_stats(batch(deltas_of(schedule), interval_ms / 1000))
        out[name] = (stats.per_second, stats.max_wait * 1000, (stats.first_paint or 0.0) * 1000)
    return out


@exercise("10.3", "interval_ms")
def check_interval_ms(answer: Any) -> None:
    if answer is Ellipsis:
        raise NotAttempted
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not math.isfinite(answer):
        raise AssertionError(f"interval_ms should be a number of milliseconds, got {answer!r}")
    if not 0 <= answer <= 1000:
        raise AssertionError(f"interval_ms={answer!r}: choose between 0 and 1000 ms")
    if 0 < answer < 1:  # no screen repaints more often than every millisecond: this is a number of seconds
        raise AssertionError(
            f"interval_ms is in milliseconds, and {answer:g} ms is shorter than any screen's "
            f"frame: it looks like seconds ({answer:g} s would be interval_ms = {answer * 1000:g})"
        )
    for name, (rate, wait, first) in interval_report(float(answer)).items():
        if rate > REPAINT_BUDGET + 1e-9:
            raise AssertionError(
                f"at {answer:g} ms the {name} stream still repaints {rate:.1f} times a second "
                f"(budget {REPAINT_BUDGET:g}): a longer interval coalesces more deltas per repaint"
            )
        if wait > WAIT_BUDGET_MS + 1e-6:
            raise AssertionError(
                f"at {answer:g} ms a delta of the {name} stream waits up to {wait:.0f} ms before "
                f"it is painted (budget {WAIT_BUDGET_MS:g} ms): a shorter interval keeps text fresher"
            )
        if abs(first - FAST.ttft * 1000) > 1e-6:  # cannot happen with the library's batching; said for clarity
            raise AssertionError(f"the first words of the {name} stream appear at {first:.0f} ms, not at the TTFT")
