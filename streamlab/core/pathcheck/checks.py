"""What `streamlab check-path` sends, what it keeps of each read, and the report it prints (sans-IO core: data, text).

`streamlab check` asks whether a *server* streams as the API promises; `streamlab check-path` asks whether the
*path* between a server and a reader lets the stream through: a reverse proxy, a compression middleware, a load
balancer, a CDN. It reads the path as a browser does (`REQUEST_HEADERS`: `Accept: text/event-stream` and
`Accept-Encoding: gzip, deflate, br`), a few times (`READS`), and grades what each read got (`PathRead`: status,
HTTP version, headers, the bytes as they came off the wire and decoded, the time of every network read, how the read
ended) against the checks of `PATH_CHECKS`, each with an id, the promise and why a reader cares. The verdicts come
from `streamlab.core.pathcheck.grade`; the reads are made by `streamlab.net.pathcheck`.

The rules are `streamlab check`'s: fail, a reader loses the stream or sees it late (the whole answer at once, a cut);
warn, it works here but hangs by a thread (a compressed event stream that happens to be flushed); skip, the check
could not be run (no direct route to compare with, a server that does not play the scenario an idle check needs).
What the checker did itself (its deadline, its size cap, closing a read it held open on purpose) is never a finding:
when its own deadline stopped a read, the report says the path could not be checked (exit 2). Evidence is located
and quoted as in `streamlab check` (`Evidence`: the read, the event number, the byte offset, the bytes), and the
`--json` document keeps that tool's conventions (`PathReport.as_dict`). Exit codes: 0 nothing failed (warnings
allowed), 1 a check failed, 2 the path could not be checked.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamlab.core.conformance.checks import (
    MAX_TOKENS,
    TEXT_PROMPT,
    GradedFinding,
    GradedReport,
    Status,
)
from streamlab.core.endings import Ending
from streamlab.core.sse import is_event_stream

__all__ = [
    "PathCheck",
    "PATH_CHECKS",
    "PATH_CHECK_IDS",
    "REQUEST_HEADERS",
    "READS",
    "JSON_VERSION",
    "chat_request",
    "chat_url",
    "PathRead",
    "PathReads",
    "PathFinding",
    "PathTiming",
    "PathReport",
]

JSON_VERSION = 1
"""The version of `check-path --json` (bumped when a field changes meaning or disappears)."""

REQUEST_HEADERS: dict[str, str] = {
    "Accept": "text/event-stream",
    "Accept-Encoding": "gzip, deflate, br",
    "Content-Type": "application/json",
}
"""The headers a browser's `fetch` of a streamed chat completion sends that a path acts on: the media type it
accepts and the compressions it can undo (a proxy compresses only for a reader that says it can decompress)."""

READS: dict[str, str] = {
    "path": "the chat completion, read through the path",
    "direct": "the same request, read from the server directly (--direct)",
    "again": "the same request again, on the path's connection, after the first stream ended",
    "silent": "a stream that falls silent for a while, no byte and no keep-alive (--silent-model)",
    "keepalive": "a stream kept alive by comments, held open for a while (--keepalive-model)",
}
"""Every read the checker may make, by name (the `probe` of the evidence), in the order it makes them."""


def chat_request(model: str, *, max_tokens: int = MAX_TOKENS) -> dict[str, Any]:
    """The body every read sends: a short streamed Chat Completion for `model`, bounded by `max_tokens`."""
    return {
        "model": model,
        "stream": True,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": TEXT_PROMPT}],
    }


def chat_url(url: str) -> str:
    """The Chat Completions URL of `url`: a base URL (`http://127.0.0.1:8080/v1`) gets `/chat/completions` added; a
    URL that already ends with it is used as it is."""
    url = url.strip()
    return url if url.rstrip("/").endswith("/chat/completions") else url.rstrip("/") + "/chat/completions"


@dataclass(frozen=True)
class PathCheck:
    """One graded promise of the path: `id`, its `group` ("delivery", "end", "idle"), what it `promises`, `why`."""

    id: str
    group: str
    promises: str
    why: str


PATH_CHECKS: dict[str, PathCheck] = {
    c.id: c
    for c in (
        PathCheck(
            "path.http",
            "delivery",
            "status 200 and text/event-stream through the path",
            "anything else is not a stream: a proxy's error page (502, 504) or a changed media type",
        ),
        PathCheck(
            "path.version",
            "delivery",
            "the HTTP version the path speaks to a reader",
            "over HTTP/1.1 a browser keeps at most 6 connections per host, each open stream holding one; HTTP/1.0 "
            "ends a body by closing, so only [DONE] tells a clean end from a cut",
        ),
        PathCheck(
            "path.buffering",
            "delivery",
            "each event reaches the reader as the server sends it: the first one is not held back",
            "a hop that buffers shows the whole answer at once at the end: the stream is no faster than a "
            "non-streamed request (reverse-proxy buffering, compression that waits for a full buffer)",
        ),
        PathCheck(
            "path.compression",
            "delivery",
            "no Content-Encoding on the event stream (or one flushed after every event)",
            "a compressor emits bytes when its buffer fills, unless each hop flushes it per event: nginx's gzip "
            "with proxy_buffering on holds the whole answer, and Cache-Control: no-transform does not stop it",
        ),
        PathCheck(
            "path.headers",
            "delivery",
            "the server's response headers arrive as it sent them (compared with --direct)",
            "a path that drops or rewrites headers takes away what clients and relays read (ids, rate limits, "
            "cache rules); X-Accel-Buffering is nginx's own and is meant to stop there",
        ),
        PathCheck(
            "path.complete",
            "end",
            "the whole stream arrives: every event and [DONE], then a clean end",
            "a cut stream is an answer missing its end; a client that does not check [DONE] shows it as whole",
        ),
        PathCheck(
            "path.after_close",
            "end",
            "after a clean end the response ends at once, and the connection is reused or closed cleanly",
            "a response held open after [DONE] keeps a reader waiting; a kept-alive connection the path has "
            "dropped fails the next request",
        ),
        PathCheck(
            "path.idle_silent",
            "idle",
            "a stream silent for a while (a long prefill, no keep-alive) is not cut",
            "idle timeouts (nginx proxy_read_timeout 60 s, Cloudflare about 100 s) cut a model that thinks longer",
        ),
        PathCheck(
            "path.idle_keepalive",
            "idle",
            "a stream kept alive by comments stays open, and its keep-alives reach the reader",
            "keep-alive comments reset an idle timer only where they arrive: a hop that holds them back, or "
            "that limits a response's whole duration, cuts the stream anyway",
        ),
    )
}
"""Every check, in report order."""

PATH_CHECK_IDS: tuple[str, ...] = tuple(PATH_CHECKS)


@dataclass(frozen=True)
class PathRead:
    """What one read got: its `name` (`READS`), the `url` and `model`, the `status` (None: no HTTP response), the
    `http_version` ("HTTP/1.1"), response `headers` (lower-case names), the `body` with its Content-Encoding undone,
    `arrivals` (decoded bytes so far, seconds since the request) and `wire` (raw bytes so far, seconds) per network
    read, `headers_at`, `ended_at` (when the body ended or broke), the `ending` (`Ending`: COMPLETE a clean end,
    BROKEN the path or server broke it, CANCELLED the checker closed it on purpose, DEADLINE the checker's own
    deadline stopped it, LIMIT_EXCEEDED its size cap), `problem` (what broke, in words) and `new_connection`
    (whether the request opened a connection; None when unknown)."""

    name: str
    url: str
    model: str
    status: int | None
    http_version: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    arrivals: tuple[tuple[int, float], ...] = ()
    wire: tuple[tuple[int, float], ...] = ()
    headers_at: float | None = None
    ended_at: float | None = None
    ending: Ending = Ending.COMPLETE
    problem: str | None = None
    new_connection: bool | None = None

    def header(self, name: str) -> str | None:
        """Every value of header `name` (case-insensitive), joined with ", ", or None."""
        want = name.lower()
        values = [v for k, v in self.headers if k.lower() == want]
        return ", ".join(values) if values else None

    @property
    def media_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    @property
    def is_event_stream(self) -> bool:
        """A 200 whose Content-Type is an event stream, by the library's one rule (`streamlab.core.sse`)."""
        return self.status == 200 and is_event_stream(self.header("content-type"))

    def status_line(self) -> str:
        """The status as one line: "HTTP/1.1 200 text/event-stream", or "no HTTP response (why)"."""
        if self.status is None:
            return f"no HTTP response ({self.problem or self.ending.value})"
        return f"{self.http_version or 'HTTP'} {self.status} {self.media_type or 'no Content-Type'}"


@dataclass(frozen=True)
class PathReads:
    """Every read of one run: the `path` read (always), and those that were made: `direct`, `again`, `silent`,
    `keepalive` (held open `window` seconds); `not_run` says, per read name, why one was not made."""

    path: PathRead
    direct: PathRead | None = None
    again: PathRead | None = None
    silent: PathRead | None = None
    keepalive: PathRead | None = None
    window: float = 0.0
    not_run: Mapping[str, str] = field(default_factory=dict)

    def all(self) -> list[PathRead]:
        """The reads made, in `READS` order."""
        found = [self.path, self.direct, self.again, self.silent, self.keepalive]
        return [r for r in found if r is not None]


@dataclass(frozen=True)
class PathFinding(GradedFinding):
    """One check's verdict on the path: `status`, what was seen (`detail`) and the `evidence`."""

    @classmethod
    def catalogue(cls) -> Mapping[str, Any]:
        return PATH_CHECKS


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}s"


@dataclass(frozen=True)
class PathTiming:
    """When things arrived in one read, in seconds since its request was sent (None: it never came): the headers,
    the first byte of the body off the wire, the first event, the first event carrying text, the last event,
    [DONE], the end of the body; with the counts. Reported, never graded on its own."""

    read: str
    http_version: str
    encoding: str
    headers: float | None
    first_byte: float | None
    first_event: float | None
    first_content: float | None
    last_event: float | None
    done: float | None
    end: float | None
    events: int
    keepalives: int
    wire_bytes: int
    bytes: int
    ending: str

    def line(self) -> str:
        return (
            f"  {self.read:<10} {self.http_version or '-':<9} {self.encoding or 'identity':<9} "
            f"headers {_s(self.headers)}  first byte {_s(self.first_byte)}  first event {_s(self.first_event)}  "
            f"last event {_s(self.last_event)}  end {_s(self.end)}  {self.events} events  "
            f"{self.keepalives} keep-alive(s)  {self.ending}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "http_version": self.http_version,
            "content_encoding": self.encoding or None,
            "headers_s": self.headers,
            "first_byte_s": self.first_byte,
            "first_event_s": self.first_event,
            "first_content_s": self.first_content,
            "last_event_s": self.last_event,
            "done_s": self.done,
            "end_s": self.end,
            "events": self.events,
            "keepalives": self.keepalives,
            "wire_bytes": self.wire_bytes,
            "bytes": self.bytes,
            "ending": self.ending,
        }


@dataclass
class PathReport(GradedReport):
    """The verdict on one path: a finding per check (`PATH_CHECKS` order), timing facts, the reads' status lines.
    `unreachable` says why nothing could be checked; `guard` says which read the checker's own deadline stopped
    (then the path could not be checked either: exit 2, whatever the findings say)."""

    url: str
    direct: str | None
    model: str
    findings: list[PathFinding] = field(default_factory=list)
    timings: list[PathTiming] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    unreachable: str | None = None
    guard: str | None = None

    def finding(self, check: str) -> PathFinding | None:
        return next((f for f in self.findings if f.check == check), None)

    @property
    def error(self) -> str | None:
        """Why the path could not be checked (None when it could)."""
        return self.unreachable if self.unreachable is not None else self.guard

    def render(self, *, timings: bool = True, passes: bool = True, width: int = 120) -> str:
        """The report as text: one row per check, evidence and why under each warn and fail."""
        direct = f"  direct={self.direct}" if self.direct else ""
        lines = [f"streamlab check-path {self.url}{direct}  model={self.model}"]
        if self.unreachable is not None:
            return "\n".join([*lines, f"could not be checked: {self.unreachable}", "exit 2"])
        lines += [f"  {r}" for r in self.reads] + [""]
        for f in self.findings:
            if not passes and f.status is Status.PASS:
                continue
            lines += _wrap(f"  {f.status.value.upper():<5} {f.check:<20} ", f.detail, width)
            if f.status in (Status.WARN, Status.FAIL):
                if f.evidence is not None:
                    lines.append(_clip(f"        evidence: {f.evidence.line()}", width))
                lines += _wrap("        why: ", f.why, width)
        if timings and self.timings:
            lines += ["", "timing (seconds since each request was sent; reported, never graded on its own):"]
            lines += [_clip(t.line(), width + 60) for t in self.timings]
        if self.guard is not None:
            lines += ["", f"could not be checked: {self.guard}"]
        lines += ["", self.summary()]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """The `--json` document: `streamlab check`'s fields, with the path's own (`url`, `direct`, `reads`)."""
        return {
            "tool": "streamlab check-path",
            "version": JSON_VERSION,
            "url": self.url,
            "direct": self.direct,
            "model": self.model,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "error": self.error,
            "summary": self.counts(),
            "checks": [f.as_dict() for f in self.findings],
            "timings": [t.as_dict() for t in self.timings],
            "reads": list(self.reads),
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent, ensure_ascii=False)


def _wrap(lead: str, text: str, width: int) -> list[str]:
    """`text` after `lead`, wrapped at `width`, continuation lines indented under the text."""
    return textwrap.wrap(text, width, initial_indent=lead, subsequent_indent=" " * len(lead)) or [lead.rstrip()]


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
