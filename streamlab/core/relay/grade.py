"""Grading a relay: the verdicts on what a relay delivered, the report, the seeded fuzz plan (sans-IO core).

The relay checker (`streamlab.net.relaycheck.run`) drives a relay through scripted upstream faults and collects
evidence: the bytes the upstream wrote, the bytes the client received, what the official SDK did, the
summary lines. Everything that turns evidence into a verdict lives here, with no I/O, so it is tested on
bytes alone and the checker only gathers facts.

Each check yields a `CheckResult`: the requirement it grades (`streamlab.core.relay.stream.REQUIREMENTS`),
the outcome of the five it exercises, pass or fail, and one line of evidence. `RelayReport` gathers them; a
requirement holds when it has at least one check and every one passed, and the report is good only when all
five hold.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamlab.core.endings import Outcome
from streamlab.core.relay.stream import REQUIREMENTS, SUMMARY_FIELDS, raises_in_sdk
from streamlab.core.safejson import json_or_none
from streamlab.core.sse import SSEEvent, parse

__all__ = [
    "CheckResult",
    "RelayReport",
    "SdkResult",
    "StreamExpectation",
    "is_marker",
    "comment_lines",
    "grade_identical",
    "grade_death",
    "grade_sdk",
    "grade_summaries",
    "FuzzRun",
    "plan_fuzz",
    "raw_offset",
    "utf8_inner_offsets",
]


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict: `name`, the `requirement` number it grades, the `outcome` it exercises (None when
    it spans several), `passed`, and one line of `evidence` (what was measured or seen)."""

    name: str
    requirement: int
    outcome: Outcome | None
    passed: bool
    evidence: str

    def line(self) -> str:
        exercised = "all five" if self.outcome is None else self.outcome.value
        return f"  {'PASS' if self.passed else 'FAIL'}  {self.name:<60} [{exercised:<10}] {self.evidence}"


@dataclass
class RelayReport:
    """Every check's result for one relay, in the order they ran."""

    relay: str
    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, result: CheckResult) -> CheckResult:
        self.results.append(result)
        return result

    def holds(self, requirement: int) -> bool | None:
        """True when every check of that requirement passed, False when one failed, None when none ran."""
        mine = [r for r in self.results if r.requirement == requirement]
        return None if not mine else all(r.passed for r in mine)

    @property
    def ok(self) -> bool:
        """True only when all five requirements were checked and hold."""
        return all(self.holds(req.number) for req in REQUIREMENTS)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.passed]

    def outcomes(self) -> list[Outcome]:
        """The outcomes the checks exercised, in the enum's order."""
        seen = {r.outcome for r in self.results}
        return [o for o in Outcome if o in seen]

    def render(self, *, passes: bool = True) -> str:
        """The report as text: one block per requirement, one line per check (only the failures when `passes`
        is False, for a reader who watched the checks go by), the outcomes exercised, then the verdict."""
        lines = [f"relay check of {self.relay}", *self.notes]
        for req in REQUIREMENTS:
            verdict = {True: "holds", False: "BROKEN", None: "not checked"}[self.holds(req.number)]
            lines.append(f"({req.number}) {req.title}: {verdict}")
            lines += [r.line() for r in self.results if r.requirement == req.number and (passes or not r.passed)]
        held = sum(bool(self.holds(r.number)) for r in REQUIREMENTS)
        exercised = ", ".join(o.value for o in self.outcomes()) or "none"
        lines.append(f"outcomes exercised: {exercised}")
        lines.append(
            f"{held} of {len(REQUIREMENTS)} requirements hold: "
            + ("the relay passes" if self.ok else "the relay does not pass")
        )
        return "\n".join(lines)


# -- looking at bytes ----------------------------------------------------------------------------------------


def is_marker(event: SSEEvent) -> bool:
    """A clearly marked final event: its data is a JSON object with an `error` (Chat, or any dialect the SDK
    raises on) or whose `type` is "error" (a Responses error event)."""
    if raises_in_sdk(event):
        return True
    obj = json_or_none(event.data)  # guarded: data nested past the recursion limit is no marker either
    return isinstance(obj, dict) and obj.get("type") == "error"


def comment_lines(raw: bytes) -> int:
    """How many comment lines (starting with ":") the bytes hold."""
    lines = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    return sum(1 for line in lines if line.startswith(b":"))


def _first_difference(want: Sequence[SSEEvent], got: Sequence[SSEEvent]) -> str:
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return f"event {i + 1} differs: upstream {_short(a)}, client got {_short(b)}"
    if len(want) != len(got):
        return f"the upstream sent {len(want)} events, the client got {len(got)}"
    return "identical"


def _short(event: SSEEvent) -> str:
    data = event.data if len(event.data) <= 60 else event.data[:57] + "..."
    return f"({event.event!r}, {data!r})"


def grade_identical(upstream: bytes, downstream: bytes) -> tuple[bool, str]:
    """Did the client get exactly the upstream's events (comments aside)? Also counts the relay's comments."""
    want, want_cut = parse(upstream)
    got, got_cut = parse(downstream)
    added = comment_lines(downstream) - comment_lines(upstream)
    if list(want) == list(got) and want_cut == got_cut:
        return True, f"{len(got)} events identical, {added} comment line(s) added"
    return False, _first_difference(want, got) + f" ({added} comment line(s) added)"


def grade_death(
    upstream_sent: bytes, downstream: bytes, *, body_complete: bool, all_delivered: bool = True
) -> tuple[bool, str]:
    """Did the client get a clearly marked final event after the upstream died?

    `upstream_sent` are the bytes the upstream wrote before it died; `downstream` the client's bytes;
    `body_complete` whether the relay ended its body properly. Every complete event the upstream sent must
    reach the client first, unchanged (with `all_delivered=False` a prefix of them is enough: a reset may
    destroy bytes in flight); then at most the event the death left open; then a marker, last (the
    upstream's own error event counts, if it is the last thing the client got).
    """
    want, _ = parse(upstream_sent)
    got, cut = parse(downstream)
    if not got or not is_marker(got[-1]):
        last = _short(got[-1]) if got else "no event at all"
        return False, f"no marked final event: the last event the client got was {last}"
    same = 0
    while same < min(len(want), len(got)) and want[same] == got[same]:
        same += 1
    extra = len(got) - same  # after what matches: [the event the death left open], the marker
    if same < len(want) and (all_delivered or extra == 0):
        return False, "before the marker: " + _first_difference(want, got)
    if extra > 2:
        return False, f"{extra - 1} events the upstream never completed came before the marker"
    if cut or not body_complete:
        return False, "a marked final event came, but the body did not end cleanly after it"
    code = _marker_code(got[-1])
    return True, f"{min(same, len(want))} of {len(want)} upstream events, then a marker ({code}), then a clean end"


def _marker_code(event: SSEEvent) -> str:
    obj = json_or_none(event.data)
    obj = obj if isinstance(obj, dict) else {}
    inner = obj.get("error")
    error = inner if isinstance(inner, dict) else obj
    return str(error.get("code") or error.get("type") or "error")


@dataclass(frozen=True)
class SdkResult:
    """What the official SDK did with a stream: the text it yielded, and the exception it raised (its class
    name and message), or None when it returned normally."""

    text: str
    raised: str | None = None
    message: str = ""


GAVE_UP = "CheckerGaveUp"
"""`SdkResult.raised` when the checker itself closed a stream that outlived its deadline: a relay that keeps a
client waiting for ever (keep-alives after the upstream died, say) fails, it does not pass as "the SDK raised"."""


def grade_sdk(result: SdkResult, *, expected_text: str, must_raise: bool) -> tuple[bool, str]:
    """On an upstream death the SDK must raise, never return normally; otherwise it must return the whole
    text, identical."""
    if result.raised == GAVE_UP:
        return False, f"the stream never ended: {result.message}"
    if must_raise:
        if result.raised is None:
            return False, f"the SDK returned normally with {len(result.text)} of {len(expected_text)} characters"
        return True, f"the SDK raised {result.raised} after {len(result.text)} characters"
    if result.raised is not None:
        return False, f"the SDK raised {result.raised}: {result.message[:80]}"
    if result.text != expected_text:
        return False, f"the SDK returned {result.text[:40]!r}..., expected {expected_text[:40]!r}..."
    return True, f"the SDK returned the {len(expected_text)} characters, identical"


@dataclass(frozen=True)
class StreamExpectation:
    """One stream the checker asked the relay for: its model, and what its summary must say (None: any).
    `required` is False when the relay answered with an error status instead of a stream: a summary line for
    it is welcome but not demanded. A verdict names the stream by `about` (the checker's model names are its
    own), with the model for finding its summary line."""

    model: str
    outcome: Outcome | None = None
    text_chars: int | None = None
    required: bool = True
    about: str = ""  # what the stream is, in words a relay's author understands ("the stream whose client ...")

    def named(self) -> str:
        """The stream as a verdict names it: what it is, and the model its summary line carries."""
        return f"{self.about} (model {self.model})" if self.about else self.model


def grade_summaries(
    summaries: Sequence[Mapping[str, Any]] | None, streams: Sequence[StreamExpectation]
) -> tuple[bool, str]:
    """One summary line per stream, each with the SUMMARY_FIELDS, saying what happened."""
    if summaries is None:
        return False, (
            "no summary lines to read: start the relay through the checker (--relay-cmd) or give --summaries FILE"
        )
    problems = []
    required = sum(e.required for e in streams)
    if not required <= len(summaries) <= len(streams):
        want = f"{required}" if required == len(streams) else f"{required} to {len(streams)}"
        problems.append(f"{len(summaries)} summary lines for {want} streams")
    missing = sorted({k for s in summaries for k in SUMMARY_FIELDS if k not in s})
    if missing:
        problems.append(f"keys missing: {', '.join(missing)}")
    problems += _compare_by_model(summaries, streams)
    if problems:
        return False, "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
    return True, f"{len(streams)} streams, {len(summaries)} summary lines; outcomes and text lengths match"


def _compare_by_model(summaries: Sequence[Mapping[str, Any]], streams: Sequence[StreamExpectation]) -> list[str]:
    problems = []
    by_model: dict[Any, list[Mapping[str, Any]]] = {}
    for s in summaries:
        by_model.setdefault(s.get("model"), []).append(s)
    for model in sorted({e.model for e in streams}):
        expected = [e for e in streams if e.model == model]
        lines = by_model.get(model, [])
        least = sum(e.required for e in expected)
        name = expected[0].named()
        if not least <= len(lines) <= len(expected):
            problems.append(f"{name}: {len(lines)} summary line(s) for {len(expected)} stream(s)")
            continue
        missing = _missing(
            [e.outcome.value for e in expected if e.outcome is not None], [str(s.get("outcome")) for s in lines]
        )
        if missing:
            got = ", ".join(sorted(str(s.get("outcome")) for s in lines))
            problems.append(f"{name}: no summary says outcome {missing[0]} (they say {got})")
        missing = _missing(
            [e.text_chars for e in expected if e.text_chars is not None], [s.get("text_chars") for s in lines]
        )
        if missing:
            got = ", ".join(sorted(str(s.get("text_chars")) for s in lines))
            problems.append(f"{name}: no summary says text_chars {missing[0]} (they say {got})")
        for s in lines:
            ttft, total = s.get("ttft_s"), s.get("total_s")
            if isinstance(ttft, (int, float)) and isinstance(total, (int, float)) and ttft > total:
                problems.append(f"{name}: ttft_s {ttft} is after total_s {total}")
    return problems


def _missing(wanted: list[Any], got: list[Any]) -> list[Any]:
    """The wanted values (counted with repeats) that `got` does not account for."""
    left = Counter(wanted)
    left.subtract(Counter(got))
    return sorted((v for v, n in left.items() if n > 0), key=str)


# -- the seeded fuzz -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FuzzRun:
    """One fuzz run: which dialect, which way the chaos proxy faults (down, up, both), cut or reset, and after
    how many bytes; `inside_utf8` when the offset was chosen inside a multi-byte character."""

    number: int
    dialect: str
    direction: str
    action: str
    after: int
    inside_utf8: bool = False

    def describe(self) -> str:
        where = " (inside a UTF-8 character)" if self.inside_utf8 else ""
        return f"run {self.number}: {self.dialect}, {self.action} {self.direction} after {self.after} bytes{where}"


def plan_fuzz(
    seed: int,
    runs: int,
    *,
    down_total: Mapping[str, int],
    up_total: Mapping[str, int],
    utf8_offsets: Mapping[str, Sequence[int]],
) -> list[FuzzRun]:
    """A seeded list of fuzz runs cutting or resetting either direction, or both, at random offsets.

    `down_total` / `up_total` are each dialect's response and request sizes on the wire (measured once); every
    other "down" or "both" run picks an offset from `utf8_offsets` (raw offsets inside a multi-byte character).
    """
    rng = random.Random(f"streamlab.relaycheck/{seed}")
    plan = []
    for i in range(runs):
        dialect = ("chat", "responses")[i % 2]
        direction = rng.choice(("down", "down", "up", "both"))
        action = rng.choice(("cut", "reset"))
        inner = utf8_offsets.get(dialect) or ()
        if direction != "up" and inner and rng.random() < 0.5:
            plan.append(FuzzRun(i + 1, dialect, direction, action, rng.choice(list(inner)), True))
            continue
        total = up_total[dialect] if direction == "up" else down_total[dialect]
        plan.append(FuzzRun(i + 1, dialect, direction, action, rng.randrange(0, max(total, 1))))
    return plan


def raw_offset(chunks: Iterable[bytes], header_bytes: int, payload_offset: int) -> int:
    """Where payload byte `payload_offset` sits on the wire of an HTTP/1.1 chunked response: after the
    `header_bytes` of status line and headers and the framing (hex size, CRLF ... CRLF) of each chunk."""
    pos = header_bytes
    seen = 0
    for chunk in chunks:
        head = len(f"{len(chunk):x}") + 2
        if payload_offset < seen + len(chunk):
            return pos + head + (payload_offset - seen)
        pos += head + len(chunk) + 2
        seen += len(chunk)
    raise ValueError(f"payload offset {payload_offset} is past the {seen} payload bytes")


def utf8_inner_offsets(payload: bytes) -> list[int]:
    """Offsets of the continuation bytes of multi-byte UTF-8 characters: a cut there splits a character."""
    return [i for i, b in enumerate(payload) if 0x80 <= b < 0xC0]
