"""What every conformance check stands on: scanned streams, the worst verdict, status and framing (sans-IO core).

`streamlab.core.conformance.grade` grades an endpoint; the checks of each dialect live in
`streamlab.core.conformance.chat` and `streamlab.core.conformance.responses`. They share what is here: `Stream` (one
probe's body, scanned by `streamlab.core.scan`, with its Chat chunks picked out), `Worst` (a check looks at every
stream it concerns and keeps its worst verdict, first seen among equals), the evidence helpers, and the two checks every
dialect has: the status line and the SSE framing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamlab.core.conformance.checks import Evidence, Finding, ProbeResult, Status
from streamlab.core.scan import KNOWN_FIELDS, Block, Scan, quote, scan

__all__ = [
    "RESPONSES_TERMINALS",
    "UNSERVED",
    "Worst",
    "Stream",
    "body_evidence",
    "unserved",
    "status_line",
    "is_done",
    "carries",
    "by_index",
    "count_problem",
    "grade_http",
    "grade_framing",
    "pick",
    "streams_of",
]

RESPONSES_TERMINALS = ("response.completed", "response.incomplete", "response.failed")


class Worst:
    """The worst verdict seen so far for one check (the first one seen wins among equals)."""

    def __init__(self, check: str) -> None:
        self.check = check
        self.found: Finding | None = None

    def add(self, status: Status, detail: str, evidence: Evidence | None = None) -> None:
        if self.found is None or status.rank > self.found.status.rank:
            self.found = Finding(self.check, status, detail, evidence)

    def result(self, passed: str) -> Finding:
        return self.found if self.found is not None else Finding(self.check, Status.PASS, passed)


@dataclass
class Stream:
    """One probe that answered 200 text/event-stream, scanned; `chunks` are its JSON-object events that are
    neither errors nor named events (what a Chat client treats as chunks)."""

    result: ProbeResult
    scan: Scan
    chunks: list[Block] = field(default_factory=list)

    @classmethod
    def of(cls, result: ProbeResult) -> Stream:
        sc = scan(result.body)
        chunks = [
            b
            for b in sc.events
            if isinstance(b.obj, dict) and "error" not in b.obj and b.event is not None and b.event.event == "message"
        ]
        return cls(result, sc, chunks)

    @property
    def name(self) -> str:
        return self.result.name

    @property
    def cut(self) -> bool:
        """The checker stopped reading this stream itself (its deadline or size cap): its end is not graded."""
        return self.result.cut is not None

    def at(self, block: Block, needle: bytes | None = None) -> Evidence:
        offset, shown = quote(self.scan.body, block.start, block.end, needle=needle)
        return Evidence(self.name, block.number, offset, shown)

    def choices(self) -> list[tuple[Block, dict[str, Any]]]:
        """(chunk, choice) for every well-formed choice (an object with an integer index), in order."""
        out = []
        for block in self.chunks:
            for choice in block.obj.get("choices") or []:
                if isinstance(choice, dict) and isinstance(choice.get("index"), int):
                    out.append((block, choice))
        return out


def body_evidence(result: ProbeResult, needle: bytes | None = None) -> Evidence:
    offset, shown = quote(result.body, 0, len(result.body), needle=needle)
    return Evidence(result.name, None, offset if result.body else None, shown if result.body else "")


UNSERVED = (404, 405)
"""Statuses that say a route is not served at all."""


def unserved(results: Sequence[ProbeResult]) -> ProbeResult | None:
    """The first result when every one of `results` says its route is not served (404 or 405), else None."""
    return results[0] if results and all(r.status in UNSERVED for r in results) else None


def status_line(result: ProbeResult) -> str:
    if result.status is None:
        return f"no HTTP response ({result.problem or 'nothing arrived'})"
    return f"HTTP {result.status} {result.media_type or 'no Content-Type'}"


def is_done(block: Block) -> bool:
    return block.event is not None and block.event.data.strip() == "[DONE]"


# -- transport and framing ------------------------------------------------------------------------------------


def grade_http(check: str, results: Sequence[ProbeResult]) -> Finding:
    if not results:
        return Finding(check, Status.SKIP, "no probe of this dialect was sent")
    late = [r for r in results if r.status is None and r.cut is not None]  # the checker gave up waiting
    results = [r for r in results if r not in late]
    if not results:
        return Finding(check, Status.SKIP, f"no probe answered before the checker's deadline ({late[0].cut})")
    bad = [r for r in results if not r.is_event_stream]
    if not bad:
        waited = f"; {len(late)} not answered before the checker's deadline" if late else ""
        return Finding(check, Status.PASS, f"{len(results)} of {len(results)} probes: 200 text/event-stream{waited}")
    first = bad[0]
    hint = "; is the base URL right? it usually ends in /v1" if check == "chat.http" and first.status == 404 else ""
    return Finding(
        check,
        Status.FAIL,
        f"{first.name}: {status_line(first)} ({len(bad)} of {len(results)} probes){hint}",
        body_evidence(first),
    )


def grade_framing(check: str, streams: Sequence[Stream], *, chat: bool) -> Finding:
    worst = Worst(check)
    if not streams:
        return Finding(check, Status.SKIP, "no stream to read")
    for st in streams:
        sc = st.scan
        if sc.limit is not None:
            offset, message = sc.limit
            at, shown = quote(sc.body, offset, len(sc.body))
            worst.add(Status.FAIL, f"{st.name}: {message}", Evidence(st.name, None, at, shown))
        for block in sc.blocks:
            for line in block.lines:
                if not line.is_comment and line.field not in KNOWN_FIELDS and line.field != "error":
                    at, shown = quote(sc.body, line.offset, line.offset + len(line.text))
                    worst.add(
                        Status.FAIL,
                        f"{st.name}: a line with the field name {line.field[:30]!r}, which the "
                        "standard ignores (its bytes never reach a client)",
                        Evidence(st.name, None, at, shown),
                    )
            if chat and block.event is not None and block.event.event not in ("message", "error"):
                worst.add(
                    Status.WARN,
                    f"{st.name}: an event named {block.event.event!r} in a Chat stream: the SDK "
                    "hands it to your loop as an object of another shape",
                    st.at(block, b"event:"),
                )
        tail = sc.tail
        if tail is not None and not tail.comment_only and not st.cut:
            worst.add(
                Status.FAIL,
                f"{st.name}: the body ends inside an event: {tail.end - tail.start} byte(s) after "
                "the last blank line are discarded by every parser",
                st.at(tail),
            )
    events = sum(len(st.scan.events) for st in streams)
    comments = sum(1 for st in streams for b in st.scan.blocks for line in b.lines if line.is_comment)
    endings = sorted({st.scan.line_endings() for st in streams})
    return worst.result(
        f"{events} events in {len(streams)} streams; line endings {', '.join(endings)}; "
        f"{comments} comment line(s), tolerated"
    )


def by_index(st: Stream) -> dict[int, list[tuple[Block, dict[str, Any]]]]:
    out: dict[int, list[tuple[Block, dict[str, Any]]]] = {}
    for block, choice in st.choices():
        out.setdefault(choice["index"], []).append((block, choice))
    return out


def carries(delta: Any) -> bool:
    """Whether a delta carries content (text, refusal or a tool-call fragment)."""
    return isinstance(delta, dict) and any(delta.get(k) for k in ("content", "refusal", "tool_calls"))


def count_problem(usage: dict[str, Any], names: tuple[str, str, str], produced: bool) -> str | None:
    """What is wrong with a usage object's (input, output, total) counts, or None."""
    values = [usage.get(n) for n in names]
    missing = [n for n, v in zip(names, values) if not isinstance(v, int) or isinstance(v, bool)]
    if missing:
        return f"usage lacks integer {', '.join(missing)}: {json.dumps(usage)[:80]}"
    given, made, total = (v for v in values if isinstance(v, int))  # all three: none is missing
    if given == 0:
        return f"{names[0]} is 0: every request has a prompt"
    if made == 0 and produced:
        return f"{names[1]} is 0 although the stream carried output"
    if total != given + made:
        return f"{names[2]} is {total}, but {given} + {made} = {given + made}"
    return None


def pick(results: Iterable[ProbeResult], dialect: str, kind: str | None = None) -> list[ProbeResult]:
    return [r for r in results if r.request.dialect == dialect and (kind is None or r.request.kind == kind)]


def streams_of(results: Iterable[ProbeResult]) -> list[Stream]:
    return [Stream.of(r) for r in results if r.is_event_stream]
