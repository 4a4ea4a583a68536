"""Grade an endpoint from the raw bytes it sent: probe results in, one finding per check out (sans-IO core).

`grade(results, dialect=...)` is the whole conformance verdict: it reads each `ProbeResult` (status, headers,
body bytes) with `streamlab.core.scan` (the library's `SSEParser`, with every event pinned to its bytes) and
runs every check of `streamlab.core.conformance.checks.CHECKS` that applies to the dialect: the error checks here,
the Chat ones in `streamlab.core.conformance.chat`, the Responses ones in `streamlab.core.conformance.responses`. Each
check looks at every stream it concerns and reports its worst verdict, with the evidence for it: the probe,
the event number, the byte offset and the bytes. Nothing here touches a socket or a clock, so every check is
tested on bytes alone, and the same functions grade the stand-in's profiles and a real server.

Garbage in is a finding out, never an exception: a body that is not SSE, an HTML page with a 200, a line over
the parser's limit, a response that never came, each ends up as a failed check that says what arrived.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Sequence

from streamlab.core.conformance.base import (
    Stream,
    Worst,
    body_evidence,
    carries,
    is_done,
    pick,
    status_line,
    streams_of,
)
from streamlab.core.conformance.chat import chat_findings
from streamlab.core.conformance.checks import CHECK_IDS, CHECKS, Evidence, Finding, ProbeResult, Status, TimingFact
from streamlab.core.conformance.responses import responses_findings
from streamlab.core.safejson import json_or_none
from streamlab.core.scan import Block, quote

__all__ = ["grade", "timing_facts", "bounded", "MAX_GRADED_BLOCKS"]

_GROUPS = {
    "chat": ("chat", "usage", "tools", "errors"),
    "responses": ("errors", "responses"),
    "both": ("chat", "usage", "tools", "errors", "responses"),
}


# -- errors ----------------------------------------------------------------------------------------------------


_TRACE = re.compile(rb'Traceback \(most recent call last\)|File \\?"[^"\n]{1,300}?\.py\\?", line \d+')
"""A Python traceback, or a source file and line as one quotes them (`File "/x/app.py", line 3`, raw or escaped
inside a JSON string, the path perhaps redacted)."""


def _carries_error(st: Stream) -> bool:
    """Whether a 200 stream carries an error in some form (an error event, an error object, an `error:` line)."""
    for block in st.scan.blocks:
        if any(not line.is_comment and line.field == "error" for line in block.lines):
            return True
        obj = block.obj
        if block.event is not None and (
            block.event.event == "error"
            or isinstance(obj, dict)
            and ("error" in obj or obj.get("type") in ("error", "response.failed"))
        ):
            return True
    return False


def _status_problem(r: ProbeResult) -> tuple[str, Evidence] | None:
    """What is wrong with the status a refusal came with (None: a 4xx), and the evidence."""
    if r.status is not None and 400 <= r.status < 500:
        return None
    if r.status == 200:
        if r.is_event_stream and _carries_error(Stream.of(r)):
            return "the refusal arrives inside a stream", body_evidence(r)
        if not r.body:
            return "accepted, with an empty body: no event, no error, nothing to tell the client why", body_evidence(r)
        return "accepted: the server answered it as if it were valid", body_evidence(r)
    trace = _TRACE.search(r.body) if r.status is not None else None
    if trace:
        return (
            "not a client error, and the body carries a Python traceback with the server's file paths",
            body_evidence(r, trace.group()),
        )
    return "not a client error", body_evidence(r)


def _shape_problem(r: ProbeResult) -> tuple[Status, str] | None:
    """What is wrong with an error body's shape (None: {"error": {"message": ...}})."""
    body = json_or_none(r.body)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return None
    if isinstance(error, str):
        return Status.WARN, '"error" is a string, not an object with a message'
    if body is None:
        return Status.FAIL, f"the body is not JSON ({r.media_type or 'no Content-Type'}), so there is no error.message"
    return Status.FAIL, 'the body is not {"error": {"message": ...}}'


def _errors(refusals: Sequence[ProbeResult]) -> list[Finding]:
    refusals = [r for r in refusals if not (r.status is None and r.cut)]
    if not refusals:
        return [
            Finding(c, Status.SKIP, "no request to refuse was sent to a served route")
            for c in ("error.status", "error.shape")
        ]
    status_w, shape_w = Worst("error.status"), Worst("error.shape")
    shaped = 0
    for r in refusals:
        problem = _status_problem(r)
        if problem is not None:
            status_w.add(Status.FAIL, f"{r.name}: {status_line(r)}: {problem[0]}", problem[1])
        if r.status is None or r.status < 400:
            continue
        shaped += 1
        shape = _shape_problem(r)
        if shape is not None:
            shape_w.add(shape[0], f"{r.name}: {shape[1]}", body_evidence(r))
    codes = ", ".join(str(r.status) for r in refusals)
    verdict = shape_w.result(f'{shaped} error bod{"y" if shaped == 1 else "ies"} shaped {{"error": {{"message"}}}}')
    if not shaped:
        verdict = Finding("error.shape", Status.SKIP, "no error status came, so no error body to judge")
    return [status_w.result(f"refused with {codes}"), verdict]


def _not_json(probes: Sequence[ProbeResult]) -> Finding:
    probes = [r for r in probes if not (r.status is None and r.cut)]
    if not probes:
        return Finding("error.not_json", Status.SKIP, "no body that is not JSON was sent to a served route")
    worst = Worst("error.not_json")
    for r in probes:
        problem = _status_problem(r)
        if problem is not None:
            worst.add(Status.FAIL, f"{r.name}: {status_line(r)}: {problem[0]}", problem[1])
        elif (shape := _shape_problem(r)) is not None:
            worst.add(shape[0], f"{r.name}: HTTP {r.status}, but {shape[1]}", body_evidence(r))
    return worst.result(f"refused with {', '.join(str(r.status) for r in probes)}, an OpenAI-shaped error")


def _too_long(probes: Sequence[ProbeResult]) -> Finding:
    worst = Worst("error.too_long")
    fit: list[str] = []
    for r in probes:
        if r.status is None and r.cut:
            fit.append(f"{r.name}: no answer before the checker's deadline (the server may be reading the prompt)")
            continue
        if r.status == 200 and r.is_event_stream and r.body:
            st = Stream.of(r)
            if _carries_error(st) and not any(isinstance(b.obj, dict) for b in st.scan.events if not is_done(b)):
                worst.add(
                    Status.FAIL,
                    f"{r.name}: {status_line(r)}: the refusal is an `error:` field line, which "
                    "parsers ignore: the client sees an answer with nothing in it",
                    body_evidence(r, b"error"),
                )
            elif _carries_error(st):
                worst.add(
                    Status.WARN,
                    f"{r.name}: the refusal arrives inside a 200 stream: a client learns of it "
                    "only when it reads that event",
                    body_evidence(r, b"error"),
                )
            elif (
                r.cut
                or any(carries(c.get("delta")) for _, c in st.choices())
                or any(
                    isinstance(b.obj, dict) and str(b.obj.get("type", "")).endswith(".delta") for b in st.scan.events
                )
            ):
                fit.append(
                    f"{r.name}: the prompt ({len(r.request.content):,} bytes) fit the model's context: it was answered"
                )
            else:
                worst.add(
                    Status.FAIL,
                    f"{r.name}: {status_line(r)}: accepted, but the stream carries neither an answer nor an error",
                    body_evidence(r),
                )
            continue
        problem = _status_problem(r)
        if problem is not None:
            worst.add(Status.FAIL, f"{r.name}: {status_line(r)}: {problem[0]}", problem[1])
        elif (shape := _shape_problem(r)) is not None:
            worst.add(shape[0], f"{r.name}: HTTP {r.status}, but {shape[1]}", body_evidence(r))
    if worst.found is None and fit:
        return Finding("error.too_long", Status.SKIP, "; ".join(fit))
    if not probes:
        return Finding("error.too_long", Status.SKIP, "no over-long prompt was sent to a served route")
    return worst.result(f"refused with {', '.join(str(r.status) for r in probes)}, an OpenAI-shaped error")


def _in_stream(streams: Sequence[Stream]) -> Finding:
    worst = Worst("errors.in_stream")
    seen = 0
    for st in streams:
        for block in st.scan.blocks:
            for line in block.lines:
                if not line.is_comment and line.field == "error":
                    at, shown = quote(st.scan.body, line.offset, line.offset + len(line.text))
                    worst.add(
                        Status.FAIL,
                        f"{st.name}: an error sent as an `error:` field line, which the standard "
                        "ignores: the client sees the stream end normally",
                        Evidence(st.name, None, at, shown),
                    )
            obj = block.obj
            if block.event is None or not isinstance(obj, dict):
                continue
            if "error" in obj or obj.get("type") in ("error", "response.failed") or block.event.event == "error":
                seen += 1
            elif obj.get("object") == "error":
                worst.add(
                    Status.FAIL,
                    f'{st.name}: event #{block.number} is an error object without an "error" '
                    "key: clients read it as an empty chunk",
                    st.at(block),
                )
    what = f"{seen} error event(s), each recognisable" if seen else "no error arrived inside the streams"
    return worst.result(f"{what} ({len(streams)} streams read)")


MAX_GRADED_BLOCKS = 10_000
"""The blocks (events and comments) of one probe's body that are graded: an answer bounded by `MAX_TOKENS` has a
few hundred. Past them the stream is graded as the checker's own cut: a server sending 24-byte events at full
speed had made `check` hold 1.17 GB, every block of a 4 MiB body scanned and parsed."""

_BLANK_LINE = re.compile(rb"(?:\r\n|\r|\n)(?:\r\n|\r|\n)")


def bounded(result: ProbeResult, max_blocks: int = MAX_GRADED_BLOCKS) -> ProbeResult:
    """`result` with its body cut after its first `max_blocks` blocks (and its arrivals after the read that
    completed the last of them), as the checker's own cut; unchanged when it has no more. Found without
    scanning: a search for blank lines that holds nothing per block."""
    ends = _BLANK_LINE.finditer(result.body)
    end = next((m.end() for i, m in enumerate(ends, 1) if i == max_blocks), None)
    if end is None or end == len(result.body):
        return result
    i = bisect.bisect_left(result.arrivals, end, key=lambda arrival: arrival[0])
    return dataclasses.replace(
        result,
        body=result.body[:end],
        arrivals=result.arrivals[: i + 1],
        cut=result.cut or f"graded the first {max_blocks} events and comments only: the rest was not read",
    )


def grade(results: Sequence[ProbeResult], *, dialect: str = "both") -> list[Finding]:
    """One finding per check that applies to `dialect`, in `CHECKS` order, from the probes' results (each
    `bounded`).

    A Responses refusal probe is graded only when the Responses route answered the text probe with a 200 (a
    route that is not served refuses everything, which says nothing about its error shape)."""
    results = [bounded(r) for r in results]
    served = any(r.status == 200 for r in pick(results, "responses", "text"))

    def refused(kind: str) -> list[ProbeResult]:
        return pick(results, "chat", kind) + (pick(results, "responses", kind) if served else [])

    found = {f.check: f for f in _errors(refused("error"))}
    found["error.not_json"] = _not_json(refused("not_json"))
    found["error.too_long"] = _too_long(refused("too_long"))
    found["errors.in_stream"] = _in_stream(streams_of(results))
    if dialect in ("chat", "both"):
        found.update({f.check: f for f in chat_findings(results)})
    if dialect in ("responses", "both"):
        found.update({f.check: f for f in responses_findings(results)})
    groups = _GROUPS[dialect]
    return [found[c] for c in CHECK_IDS if CHECKS[c].group in groups and c in found]


# -- timing facts ---------------------------------------------------------------------------------------------


def _arrival(arrivals: Sequence[tuple[int, float]], offset: int) -> float | None:
    """When byte `offset` had arrived: the time of the first read whose running count reaches it (the last
    read's time past the end). A binary search over the reads (their counts only grow): scanning them from the
    start for every event had made grading quadratic, 48.6% of `check`'s time against 24-byte chunks."""
    if not arrivals:
        return None
    i = bisect.bisect_left(arrivals, offset, key=lambda arrival: arrival[0])
    return arrivals[i][1] if i < len(arrivals) else arrivals[-1][1]


def _first_content(st: Stream) -> Block | None:
    for block in st.scan.events:
        obj = block.obj
        if not isinstance(obj, dict):
            continue
        if isinstance(obj.get("type"), str) and obj["type"].endswith(".delta"):
            return block
        for choice in obj.get("choices") or []:
            if isinstance(choice, dict) and carries(choice.get("delta")):
                return block
    return None


def timing_facts(results: Sequence[ProbeResult]) -> list[TimingFact]:
    """Time to headers, to the first content event, the longest gap between events, the keep-alives and the
    total, for every probe that streamed. Facts, never grades: a model may be slow and still compatible."""
    facts = []
    for r in map(bounded, results):
        if not r.is_event_stream:
            continue
        st = Stream.of(r)
        times = [t for b in st.scan.events if (t := _arrival(r.arrivals, b.end)) is not None]
        gaps = [b - a for a, b in zip(times, times[1:])]
        pings = [t for b in st.scan.blocks if b.comment_only and (t := _arrival(r.arrivals, b.end)) is not None]
        intervals = [b - a for a, b in zip(pings, pings[1:])]
        first = _first_content(st)
        facts.append(
            TimingFact(
                r.name,
                r.headers_at,
                _arrival(r.arrivals, first.end) if first else None,
                max(gaps) if gaps else None,
                len(pings),
                max(intervals) if intervals else None,
                r.arrivals[-1][1] if r.arrivals else None,
                len(st.scan.events),
                len(r.body),
            )
        )
    return facts
