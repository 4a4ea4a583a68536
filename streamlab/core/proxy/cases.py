"""Lab 13's measured cases: a hop, its options, the stream it carries, and the facts one read gives (sans-IO core).

Lab 13 puts one hop at a time between the stand-in and a reader and measures what the reader gets: the headers,
the first byte, the first event, the first text and the last event, each in seconds since the request was sent.
A `Case` says which hop (`direct`, `nginx`, `caddy`, or `asgi`: an app behind Starlette's GZipMiddleware), its
options, the stand-in model it reads and how the reader reads it (HTTP/2, a total deadline). `CASES` is the lab's
list, in the order it teaches them; `lab_script()` is the stand-in script they read: a paced answer (`GAP` seconds
between events) three ways (plain, with `X-Accel-Buffering: no`, with `Cache-Control: no-transform`) and the room
scenarios `prefill`, `prefill-ping` and `reset`.

`facts_of(...)` turns what one read got (its timeline, as `streamlab.core.pathcheck.timeline` makes it) into facts
that come out the same on every run on any machine: booleans and counts, with margins far wider than a loaded
machine's jitter (a stream that flows spreads its events over about 2 s; one held back delivers them within a few
milliseconds). The lab prints the facts and plots the timings; tests compare a live run's facts with the recording's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamlab.core import shapes
from streamlab.core.pathcheck.timeline import Timeline
from streamlab.core.proxy.caddy import CaddyOptions
from streamlab.core.proxy.nginx import NginxOptions
from streamlab.core.standin.scenarios import scenario
from streamlab.core.standin.script import Episode, ErrorEpisode, paced

__all__ = [
    "GAP",
    "WORDS",
    "READ_TIMEOUT",
    "TOTAL_DEADLINE",
    "HOPS",
    "Case",
    "CASES",
    "CASE_KEYS",
    "case",
    "lab_script",
    "facts_of",
    "timings_of",
    "error_kind",
    "H2_ERROR_CODES",
]

GAP = 0.4
"""Seconds between two events of the paced answer (and before its first)."""
WORDS = ("one ", "two ", "three ", "four")
"""The paced answer's tokens: with the role chunk, the finish chunk, the usage chunk and [DONE], eight events."""
READ_TIMEOUT = 2.0
"""The idle timeouts lab 13 puts in front of the 3 s prefill (nginx's proxy_read_timeout, Caddy's read_timeout):
60 s and 100 s in production, scaled down to seconds."""
TOTAL_DEADLINE = 2.5
"""The total deadline of the case that shows what a keep-alive cannot save (a platform's limit on a response)."""
HOPS = ("direct", "nginx", "caddy", "asgi")

_FLOW_SPAN = 1.0  # seconds: events spread over more than this came as they were sent (they were sent 2.8 s apart)
_HELD_SPAN = 0.05  # seconds: every event within this of the last one came at once
_TOGETHER = 0.05  # seconds: the headers "came with" the first byte when this close


@dataclass(frozen=True)
class Case:
    """One measurement: read `model` from the stand-in through `hop` configured by `nginx`, `caddy` or `compress`
    (the ASGI app's `compress_event_stream`); `http2` reads with HTTP/2 (prior knowledge, to Caddy's h2c);
    `deadline` is the reader's total deadline; `again` makes a second request on the same client afterwards (to see
    whether the connection survived). `title` says it in a line, `lesson` in the lab's words."""

    key: str
    title: str
    hop: str
    model: str = "paced"
    nginx: NginxOptions | None = None
    caddy: CaddyOptions | None = None
    compress: bool | None = None
    http2: bool = False
    deadline: float = 20.0
    again: bool = False

    def describe(self) -> str:
        """The hop and its configuration, in the proxy's own words."""
        if self.nginx is not None:
            return f"nginx: {self.nginx.describe()}"
        if self.caddy is not None:
            return f"Caddy: {self.caddy.describe()}"
        if self.compress is not None:
            listed = "text/event-stream compressed too" if self.compress else "its default exclusions"
            return f"Starlette app with GZipMiddleware ({listed})"
        return "the stand-in, no hop"


_GZIP = NginxOptions(gzip=True)
_SHORT = NginxOptions(read_timeout=READ_TIMEOUT)
_H2C = CaddyOptions(http2="h2c")

CASES: tuple[Case, ...] = (
    Case("direct", "the stand-in, read directly", "direct"),
    Case("nginx", "nginx with its defaults", "nginx", nginx=NginxOptions()),
    Case("nginx-gzip", "nginx, gzip on, text/event-stream in gzip_types", "nginx", nginx=_GZIP),
    Case("fix-buffering", "+ proxy_buffering off", "nginx", nginx=NginxOptions(gzip=True, buffering=False)),
    Case("fix-accel", "+ X-Accel-Buffering: no from the app", "nginx", "paced-xab", nginx=_GZIP),
    Case("fix-no-transform", "+ Cache-Control: no-transform from the app", "nginx", "paced-nt", nginx=_GZIP),
    Case(
        "fix-gzip-types",
        "+ text/event-stream left out of gzip_types",
        "nginx",
        nginx=NginxOptions(gzip=True, gzip_event_stream=False),
    ),
    Case("asgi", "Starlette GZipMiddleware, as it comes", "asgi", compress=False),
    Case("asgi-compress", "Starlette GZipMiddleware told to compress the stream", "asgi", compress=True),
    Case("idle-cut", "nginx proxy_read_timeout 2 s, a 3 s prefill", "nginx", "prefill", nginx=_SHORT),
    Case("idle-ping", "the same, keep-alives every second", "nginx", "prefill-ping", nginx=_SHORT),
    Case(
        "ping-buffered",
        "keep-alives behind nginx gzip",
        "nginx",
        "prefill-ping",
        nginx=NginxOptions(gzip=True, read_timeout=READ_TIMEOUT),
    ),
    Case(
        "ping-deadline",
        "keep-alives against a 2.5 s total deadline",
        "nginx",
        "prefill-ping",
        nginx=_SHORT,
        deadline=TOTAL_DEADLINE,
    ),
    Case(
        "caddy-idle-cut",
        "Caddy read_timeout 2 s, a 3 s prefill",
        "caddy",
        "prefill",
        caddy=CaddyOptions(read_timeout=READ_TIMEOUT),
    ),
    Case("caddy", "Caddy with its defaults", "caddy", caddy=CaddyOptions()),
    Case("caddy-gzip", "Caddy with encode gzip", "caddy", caddy=CaddyOptions(encode_gzip=True)),
    Case("caddy-h2", "Caddy over HTTP/2 (h2c)", "caddy", caddy=_H2C, http2=True),
    Case("reset-h1", "a reset upstream, Caddy, HTTP/1.1", "caddy", "reset", caddy=CaddyOptions(), again=True),
    Case("reset-h2", "a reset upstream, Caddy, HTTP/2", "caddy", "reset", caddy=_H2C, http2=True, again=True),
)
"""Every case lab 13 measures, in the order it teaches them."""

CASE_KEYS = tuple(c.key for c in CASES)
_BY_KEY = {c.key: c for c in CASES}


def case(key: str) -> Case:
    """The case named `key` (one of `CASE_KEYS`)."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise ValueError(f"unknown case {key!r}; known: {', '.join(CASE_KEYS)}") from None


def lab_script() -> dict[str, list[Episode | ErrorEpisode]]:
    """The stand-in script every case reads: `paced`, `paced-xab` (the app sends `X-Accel-Buffering: no`),
    `paced-nt` (`Cache-Control: no-transform` as well as the stand-in's `no-cache`), the room scenarios `prefill`,
    `prefill-ping` and `reset`, and `scheduled` and `stall`, which `streamlab check-path` reads by default."""
    extra = {"paced": (), "paced-xab": (("X-Accel-Buffering", "no"),), "paced-nt": (("Cache-Control", "no-transform"),)}
    script: dict[str, list[Episode | ErrorEpisode]] = {}
    for model, headers in extra.items():
        frames = shapes.chat_text_stream(list(WORDS), model=model, include_usage=True)
        script[model] = [Episode(paced(frames, first=GAP, gap=GAP), headers=headers)]
    for name in ("prefill", "prefill-ping", "reset", "ttft", "stall"):
        script.update(scenario(name))
    return script


H2_ERROR_CODES = {
    0: "NO_ERROR",
    1: "PROTOCOL_ERROR",
    2: "INTERNAL_ERROR",
    3: "FLOW_CONTROL_ERROR",
    4: "SETTINGS_TIMEOUT",
    5: "STREAM_CLOSED",
    6: "FRAME_SIZE_ERROR",
    7: "REFUSED_STREAM",
    8: "CANCEL",
    9: "COMPRESSION_ERROR",
    10: "CONNECT_ERROR",
    11: "ENHANCE_YOUR_CALM",
    12: "INADEQUATE_SECURITY",
    13: "HTTP_1_1_REQUIRED",
}
"""HTTP/2's error codes (RFC 9113, section 7), as an RST_STREAM frame carries them."""


def error_kind(problem: str | None) -> str | None:
    """What ended a broken read, in words that do not change between runs: "incomplete chunked read" (HTTP/1.1: the
    connection closed inside the body), "stream reset: NAME" (HTTP/2: RST_STREAM with its error code, RFC 9113
    section 7), "deadline" (the reader's own total deadline), "other"; None when nothing broke it."""
    if not problem:
        return None
    if "StreamReset" in problem:
        found = re.search(r"error_code:\s*(?:ErrorCodes\.)?(\w+)", problem)
        code = found.group(1) if found else "?"
        return f"stream reset: {H2_ERROR_CODES.get(int(code), code) if code.isdigit() else code}"
    if "incomplete chunked read" in problem or "peer closed connection" in problem:
        return "incomplete chunked read"
    if "deadline" in problem:
        return "deadline"
    return "other"


def facts_of(
    t: Timeline,
    *,
    status: int | None,
    http_version: str,
    encoding: str | None,
    ending: str,
    problem: str | None = None,
    reused: bool | None = None,
) -> dict[str, Any]:
    """The facts of one read (its timeline `t` and what its response said), the same on every run: how many events
    and keep-alives came, whether they flowed or came at once, whether the headers waited for the first byte,
    whether a keep-alive reached the reader before the answer, how the read ended. `reused` says whether a second
    request afterwards went on the same connection (None: none was made)."""
    events = len(t.events)
    before_text = [k for k in t.keepalives if t.first_content is None or k < t.first_content - _TOGETHER]
    return {
        "status": status,
        "http_version": http_version or None,
        "encoding": encoding or "identity",
        "events": events,
        "text_events": sum(1 for block, _ in t.events if _carries_text(block.obj)),
        "done": t.done is not None,
        "ending": ending,
        "error": error_kind(problem) if ending != "complete" else None,
        "streamed": events >= 2 and t.span > _FLOW_SPAN,
        "all_at_once": events >= 2 and t.span < _HELD_SPAN,
        "first_byte": t.first_byte is not None,
        "headers_wait_for_first_byte": (
            t.headers is not None
            and t.first_byte is not None
            and t.first_byte - t.headers < _TOGETHER
            and t.first_byte > GAP / 2
        ),
        "keepalives": len(t.keepalives),
        "keepalive_before_text": bool(before_text),
        "reused_connection": reused,
    }


def _carries_text(obj: object) -> bool:
    if not isinstance(obj, Mapping):
        return False
    return any(
        isinstance(c, Mapping) and isinstance(c.get("delta"), Mapping) and bool(c["delta"].get("content"))
        for c in obj.get("choices") or []
    )


def timings_of(t: Timeline) -> dict[str, float | None]:
    """The moments a figure shows, in seconds since the request (None where one never came), to the millisecond."""
    moments = {
        "headers": t.headers,
        "first_byte": t.first_byte,
        "first_event": t.first_event,
        "first_text": t.first_content,
        "last_event": t.last_event,
        "end": t.end,
    }
    return {k: None if v is None else round(v, 3) for k, v in moments.items()}
