"""Checks for lab 13 (between the server and the screen): its three exercises, on the recorded measurements.

* 13.1 `fixes`: for each change in `FIXES`, whether it alone lets nginx (gzip on, `text/event-stream` in
  `gzip_types`, the rest its defaults) stream the answer event by event. The expected answers are the recording's
  facts (`streamlab.net.proxy.measure.load_recorded()`), so they say what was measured, not what folklore says.
* 13.2 `diagnose(timings, done)`: from the moments a reader got a stream (a case's `timings`: headers, first_byte,
  first_event, first_text, last_event, end, in seconds or None) and whether `[DONE]` arrived, say "cut", "held"
  or "flows". Checked on every recorded case and on made-up timings that defeat the usual shortcuts.
* 13.3 `keepalive_plan(hops, answer_seconds)`: for a path of hops (server side first), the keep-alive interval
  and the hops a keep-alive cannot save the stream from (a total deadline shorter than the answer; an idle timeout
  behind a hop that buffers). Compared with `reference_keepalive_plan` on seven paths.

Nothing here opens a socket: the recording is package data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from streamlab.exercises import NotAttempted, exercise, function_answer
from streamlab.net.proxy.measure import load_recorded

__all__ = [
    "FIXES",
    "HELD_WITHIN",
    "expected_fixes",
    "expected_diagnosis",
    "reference_keepalive_plan",
    "PATHS",
]

FIXES: dict[str, str] = {
    "proxy_buffering off": "fix-buffering",
    "X-Accel-Buffering: no": "fix-accel",
    "Cache-Control: no-transform": "fix-no-transform",
    "Cache-Control: no-cache": "nginx-gzip",
    "text/event-stream out of gzip_types": "fix-gzip-types",
}
"""Each change 13.1 asks about -> the recorded case that measured it (the stand-in sends `Cache-Control: no-cache`
on every stream, so the case without a fix measured that one)."""

HELD_WITHIN = 0.1
"""13.2: a stream whose first event came within this many seconds of its last was held back."""


def expected_fixes() -> dict[str, bool]:
    """What the recording measured: change -> whether the answer then streamed."""
    cases = load_recorded()["cases"]
    return {change: bool(cases[key]["facts"]["streamed"]) for change, key in FIXES.items()}


@exercise("13.1", "fixes")
def check_fixes(answer: Any) -> None:
    if not isinstance(answer, Mapping):
        raise AssertionError(f"fixes should be a dict from each change to True or False, got {type(answer).__name__}")
    if any(v is Ellipsis for v in answer.values()):
        raise NotAttempted
    want = expected_fixes()
    missing = sorted(set(want) - set(answer))
    if missing:
        raise AssertionError(f"keep the five keys: {missing} is missing")
    for change, streamed in want.items():
        got = answer[change]
        if not isinstance(got, bool):
            raise AssertionError(f"{change!r}: answer True or False, got {got!r}")
        if got != streamed:
            case = load_recorded()["cases"][FIXES[change]]
            if streamed:
                raise AssertionError(f"{change!r}: it was measured: with it, the answer streamed ({case['title']})")
            raise AssertionError(
                f"{change!r}: it was measured: the whole answer still came at once at the end ({case['title']})"
            )


# -- 13.2 diagnose a reader's timings ---------------------------------------------------------------------------


def expected_diagnosis(timings: Mapping[str, float | None], done: bool) -> str:
    """The reference answer to 13.2."""
    if not done:
        return "cut"
    first, last = timings.get("first_event"), timings.get("last_event")
    if first is not None and last is not None and last - first <= HELD_WITHIN:
        return "held"
    return "flows"


def _diagnosis_cases() -> list[tuple[str, dict[str, float | None], bool]]:
    cases = [
        (f"recorded case {key!r} ({record['title']})", dict(record["timings"]), bool(record["facts"]["done"]))
        for key, record in load_recorded()["cases"].items()
        if record["facts"]["events"] >= 2 or not record["facts"]["done"]
    ]

    def t(headers: float, first_byte: float | None, first: float | None, last: float | None) -> dict[str, Any]:
        return {
            "headers": headers,
            "first_byte": first_byte,
            "first_event": first,
            "first_text": first,
            "last_event": last,
            "end": last,
        }

    cases += [
        ("headers late, events spread over 2 s", t(1.5, 1.5, 1.5, 3.5), True),
        ("the first byte at once (a keep-alive), then every event at 4 s", t(0.0, 0.0, 4.0, 4.02), True),
        ("a slow start, then every event within 80 ms", t(0.0, 2.0, 2.0, 2.08), True),
        ("events spread over 3 s, but no [DONE]: cut", t(0.0, 0.3, 0.3, 3.3), False),
        ("everything at once at the end, but no [DONE]", t(3.0, 3.0, 3.0, 3.0), False),
    ]
    return cases


@exercise("13.2", "diagnose")
def check_diagnose(answer: Any) -> None:
    fn = function_answer(answer, "diagnose")
    for label, timings, done in _diagnosis_cases():
        got = fn(dict(timings), done)
        want = expected_diagnosis(timings, done)
        if got not in ("cut", "held", "flows"):
            raise AssertionError(f"{label}: return 'cut', 'held' or 'flows', got {got!r}")
        if got != want:
            why = {
                "cut": "no [DONE] arrived: whatever came before, the answer is not whole",
                "held": f"the first event came within {HELD_WITHIN} s of the last: a hop held them back",
                "flows": "the events came spread out; the headers and the first byte do not tell (nginx holds the "
                "headers, a keep-alive is a first byte)",
            }[want]
            raise AssertionError(f"{label}: expected {want!r}, got {got!r}: {why}")


# -- 13.3 plan keep-alives along a path -------------------------------------------------------------------------


def reference_keepalive_plan(
    hops: Sequence[Mapping[str, Any]], answer_seconds: float
) -> tuple[float | None, list[str]]:
    """The reference answer to 13.3: (half the shortest idle timeout on the path, or None when no hop has one;
    the names, in path order, of the hops a keep-alive cannot save the stream from)."""
    idles = [h["idle"] for h in hops if h.get("idle") is not None]
    every = min(idles) / 2 if idles else None
    not_saved: list[str] = []
    behind_buffer = False
    for hop in hops:
        total = hop.get("total")
        if (total is not None and total < answer_seconds) or (behind_buffer and hop.get("idle") is not None):
            not_saved.append(hop["name"])
        behind_buffer = behind_buffer or bool(hop.get("buffers"))
    return every, not_saved


def _hop(name: str, idle: float | None = None, total: float | None = None, buffers: bool = False) -> dict[str, Any]:
    return {"name": name, "idle": idle, "total": total, "buffers": buffers}


PATHS: list[tuple[str, list[dict[str, Any]], float]] = [
    ("nginx alone", [_hop("nginx", idle=60)], 90),
    ("nginx, then a CDN", [_hop("nginx", idle=60), _hop("cdn", idle=100)], 300),
    ("a serverless function limited to 60 s", [_hop("function", total=60), _hop("cdn", idle=100)], 90),
    ("the same function, a short answer", [_hop("function", total=60), _hop("cdn", idle=100)], 30),
    ("nginx with gzip, then a load balancer", [_hop("nginx", idle=60, buffers=True), _hop("lb", idle=30)], 45),
    ("a buffering hop with no timeout of its own", [_hop("app", buffers=True), _hop("nginx", idle=60)], 120),
    ("no idle timeout anywhere", [_hop("gateway", total=600)], 120),
]
"""The paths 13.3 is checked on: (label, hops from the server to the reader, the answer's length in seconds)."""


@exercise("13.3", "keepalive_plan")
def check_keepalive_plan(answer: Any) -> None:
    fn = function_answer(answer, "keepalive_plan")
    for label, hops, seconds in PATHS:
        got = fn([dict(h) for h in hops], seconds)
        want_every, want_names = reference_keepalive_plan(hops, seconds)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise AssertionError(f"{label}: return a pair (every, not_saved), got {got!r}")
        every, names = got
        if want_every is None:
            if every is not None:
                raise AssertionError(f"{label}: no hop has an idle timeout: every is None, got {every!r}")
        elif not isinstance(every, (int, float)) or not math.isclose(every, want_every):
            raise AssertionError(
                f"{label}: every should be half the shortest idle timeout, {want_every:g} s; got {every!r}"
            )
        if list(names) != want_names:
            raise AssertionError(
                f"{label}: a keep-alive cannot save the stream from {want_names}, got {list(names)}"
                " (a total deadline shorter than the answer; an idle timeout behind a hop that "
                "buffers, which never sees the keep-alives)"
            )
