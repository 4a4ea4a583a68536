"""The stand-in's EventSource route, its pure half (sans-IO core): numbered events, the `retry:` hint, the key.

A browser's `EventSource` can only GET, and sends no header a page chooses (whatwg/html#2177): no
`Authorization`, no JSON body. What it does send on its own, on every reconnect, is `Last-Event-ID`: the last
`id:` it saw. So the stand-in's `GET /v1/chat/stream?model=M&key=K` (the planner's route,
`streamlab.core.standin.plan`) plays the learner's chat episode with every event numbered and a `retry:` hint in
front, and reads the learner's key from the query string or a `streamlab_key` cookie. Keys in URLs end up in
access logs, proxies and browser history; a session cookie, or a short-lived ticket minted by a POST that can
carry `Authorization`, is the production answer. The lab shows the trade-off; the stand-in accepts both.

What lives here is bytes in, values out:

* `number_events(steps)`: the same steps (same timing, same chunking) with `id: 1`, `id: 2`, ... in front of
  each event; comments and keep-alives stay as they are. Frames that span several `Send` steps (a stream
  written a few bytes at a time) are numbered where they start.
* `retry_frame(ms)`: the block that sets a reconnection delay, `retry: 300` and a blank line.
* `final_event_id(payload)`: the id a client holds after the whole answer, as the standard's parser keeps it.
* `key_of(head)`: the learner's key from `?key=` or the `streamlab_key` cookie (None: neither).
* `read_options(query)`: the route's query parameters checked (`retry`, `after_end`), or the problem's text.

Why a finished answer needs `after_end`: an `EventSource` reconnects after a *clean* end too (WHATWG HTML
9.2.3, "reestablish the connection"), and sends `Last-Event-ID`. A naive server (`after_end=replay`) plays the
generation again, and the browser shows (and the provider bills) the answer twice, then again. The fix
(`after_end=stop`, the default) answers a Last-Event-ID equal to the final event's id with 204 No Content: any
status other than 200 fails the connection for good, and the `EventSource` stays CLOSED.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from streamlab.core.sse import SSEParser, parse
from streamlab.core.standin.request import RequestHead
from streamlab.core.standin.room import learner_key
from streamlab.core.standin.script import KeepAlive, Send, Step, split_frames

__all__ = [
    "EVENTS_PATH",
    "KEY_COOKIE",
    "AFTER_END",
    "DEFAULT_RETRY_MS",
    "MAX_RETRY_MS",
    "EventsOptions",
    "number_events",
    "retry_frame",
    "final_event_id",
    "payload_of",
    "cookie_value",
    "key_of",
    "read_options",
]

EVENTS_PATH = "/v1/chat/stream"
"""The GET route an `EventSource` opens: `?model=M&key=K`, optionally `&retry=MS&after_end=stop|replay`."""
KEY_COOKIE = "streamlab_key"
"""The cookie that may carry the learner's key instead of the query string (same origin: the browser sends it)."""
AFTER_END = ("stop", "replay")
"""What a reconnect after the final event gets: "stop" (204, the fix) or "replay" (the naive server: it all again)."""
DEFAULT_RETRY_MS = 3000
"""The `retry:` hint when the query sets none (3 s, the reconnection delay Chromium uses without one)."""
MAX_RETRY_MS = 3_600_000
"""The longest `retry` the query may ask for: an hour."""


@dataclass(frozen=True)
class EventsOptions:
    """The route's query options: the `retry:` hint in milliseconds, and what a reconnect after the end gets."""

    retry_ms: int = DEFAULT_RETRY_MS
    after_end: str = "stop"


def _event_starts(payload: bytes) -> list[int]:
    """The offsets in `payload` where a frame that dispatches an event starts (comments and empty blocks do not)."""
    starts: list[int] = []
    at = 0
    for frame in split_frames(payload):
        events, _ = parse(frame)
        if events:
            starts.append(at)
        at += len(frame)
    return starts


def number_events(steps: Sequence[Step], first: int = 1) -> tuple[Step, ...]:
    """`steps` with an `id: N` line (N from `first`) inserted before each event: the same pauses, the same
    chunks (each `Send` keeps its place and grows by the id lines of the events that start in it). A
    frame that is a comment or a keep-alive dispatches no event and gets no id."""
    starts = iter(_event_starts(payload_of(steps)))
    nxt = next(starts, None)
    number = first
    out: list[Step] = []
    at = 0
    for step in steps:
        if not isinstance(step, (Send, KeepAlive)):
            out.append(step)
            continue
        data, end, pieces, cursor = step.data, at + len(step.data), [], at
        while nxt is not None and nxt < end:
            pieces += [data[cursor - at : nxt - at], b"id: %d\n" % number]
            cursor, number, nxt = nxt, number + 1, next(starts, None)
        pieces.append(data[cursor - at :])
        joined = b"".join(pieces)
        out.append(Send(joined) if isinstance(step, Send) or joined != data else step)
        at = end
    return tuple(out)


def retry_frame(retry_ms: int) -> bytes:
    """The block that sets a client's reconnection delay: a `retry:` field alone dispatches no event."""
    return b"retry: %d\n\n" % retry_ms


def final_event_id(payload: bytes) -> str:
    """The last event ID a client holds after reading all of `payload` ("" when no event set one)."""
    parser = SSEParser()
    parser.feed(payload)
    parser.close()
    return parser.last_event_id


def cookie_value(header: str | None, name: str) -> str | None:
    """The value of cookie `name` in a `Cookie` request header (`a=1; b=2`), or None. Quotes around a value are
    dropped, as RFC 6265 allows them."""
    for pair in (header or "").split(";"):
        key, eq, value = pair.strip().partition("=")
        if eq and key.strip() == name:
            value = value.strip()
            return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    return None


def key_of(head: RequestHead) -> str | None:
    """The learner's key an `EventSource` request carries: `?key=` first, then the `streamlab_key` cookie,
    bounded like a bearer token (`learner_key`); None when it carries neither."""
    keys = head.query.get("key")
    if keys:
        return learner_key(keys[-1])
    cookie = cookie_value("; ".join(head.get_all("cookie")), KEY_COOKIE)
    return None if cookie is None else learner_key(cookie)


def _last(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def read_options(query: dict[str, list[str]]) -> EventsOptions | tuple[str, str]:
    """The route's options from its query, or `(param, message)` for the first one that is wrong."""
    retry_text = _last(query, "retry")
    retry_ms = DEFAULT_RETRY_MS
    if retry_text is not None:
        if not (retry_text.isascii() and retry_text.isdigit() and len(retry_text) <= 10):
            return "retry", f"retry must be a whole number of milliseconds, got {retry_text[:40]!r}"
        retry_ms = int(retry_text)
        if retry_ms > MAX_RETRY_MS:
            return "retry", f"retry must be at most {MAX_RETRY_MS} ms (an hour), got {retry_ms}"
    after_end = _last(query, "after_end") or "stop"
    if after_end not in AFTER_END:
        return "after_end", f"after_end must be one of {', '.join(AFTER_END)}, got {after_end[:40]!r}"
    return EventsOptions(retry_ms, after_end)


def payload_of(steps: Iterable[Step]) -> bytes:
    """Every byte `steps` send, concatenated."""
    return b"".join(step.data for step in steps if isinstance(step, (Send, KeepAlive)))
