"""Resuming a stream after the connection drops, without replaying or skipping a single event.

Two mechanisms, both reconnect transparently (the caller just iterates events):

* Responses background mode (the documented OpenAI route). Every Responses event carries a
  `sequence_number` counting up from 0. `SequenceCursor` keeps the number of the last event that was
  handled; when the connection drops, `ResumableResponseStream` asks for the rest with
  `GET /v1/responses/{id}?stream=true&starting_after=<cursor>`. Keep-alive events (JSON `type`
  "keepalive", or anything without a `sequence_number`) never move the cursor. A number that goes
  backwards (a replay) or jumps forward (a skip) is an error, because either one silently corrupts the
  text the user sees.
* The standard SSE mechanism (WHATWG HTML 9.2): a stream whose events carry `id:` fields lets the client
  reconnect with a `Last-Event-ID` header holding the parser's last event ID, after waiting the
  reconnection time the stream set with `retry:`. `LastEventIdStream` does that. (OpenAI documents
  `starting_after`, not `Last-Event-ID`, for its own streams; the stand-in honours both.)

Timeouts: the client (`streamlab.client`) already enforces all three kinds: `read_timeout` (the gap
between bytes), `deadline` (the whole request) and `idle_timeout` (bytes keep arriving, keep-alive
comments say, but no content event does). `is_content_event` is the content test to give it for
Responses streams, whose keep-alive events must not count as content.

`SequenceCursor` is pure (sans-IO); the stream classes drive `streamlab.client`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..core.errors import ResumeError, SequenceError
from ..core.sse import SSEEvent, SSEParser

__all__ = [
    "SequenceError",
    "SequenceCursor",
    "is_keepalive",
    "is_content_event",
    "RESPONSES_TERMINAL_TYPES",
    "ResumeError",
    "Connection",
    "ResumableResponseStream",
    "LastEventIdStream",
]


def is_keepalive(payload: Mapping[str, Any]) -> bool:
    """A keep-alive carries no content and must not move a cursor: JSON type "keepalive" or no number."""
    return payload.get("type") == "keepalive" or not isinstance(payload.get("sequence_number"), int)


@dataclass
class SequenceCursor:
    """The last handled `sequence_number` of a Responses stream (None: nothing handled yet).

    `admit(payload)` says whether an event is new content to handle (True, and the cursor moves to its
    number), a keep-alive to skip over (False, the cursor stays), or a replay / skip (`SequenceError`).
    A fresh cursor expects 0 next: the stream starts with `response.created` at number 0.

    Keep-alives never move the cursor, the number to resume after (`value`). The live API numbers them
    all the same (`{"type": "keepalive", "sequence_number": 466}`), so the cursor also remembers the
    highest number it has seen (`seen`): the next event must follow that one. A resumed stream may send
    such a keep-alive again; one numbered below what is expected is a harmless repeat and is ignored.
    """

    value: int | None = None
    seen: int | None = None

    @property
    def expected(self) -> int:
        """The sequence number that must come next."""
        last = max((n for n in (self.value, self.seen) if n is not None), default=None)
        return 0 if last is None else last + 1

    def admit(self, payload: Mapping[str, Any]) -> bool:
        """Check one event's JSON payload against the cursor and advance it. See the class docstring."""
        got = payload.get("sequence_number")
        if not isinstance(got, int):
            return False  # nothing to check and nothing to move (an unnumbered keep-alive, say)
        expected = self.expected
        keepalive = payload.get("type") == "keepalive"
        if keepalive and got < expected:
            return False  # a keep-alive sent again after a reconnect: nothing was lost
        if got != expected:
            kind = "replayed" if got < expected else "skipped"
            raise SequenceError(kind, expected=expected, got=got, event_type=str(payload.get("type", "?")))
        self.seen = got
        if keepalive:
            return False
        self.value = got
        return True

    def admit_data(self, data: str) -> tuple[bool, dict[str, Any] | None]:
        """`admit` for an event's raw `data` text; non-JSON data is treated as a keep-alive (not counted)."""
        try:
            payload = json.loads(data)
        except ValueError:
            return False, None
        if not isinstance(payload, dict):
            return False, None
        return self.admit(payload), payload


# -- the I/O layer: reconnecting streams over streamlab.client -------------------------------------------

RESPONSES_TERMINAL_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
"""Event types after which a Responses stream is over: no reconnect follows them."""


@dataclass
class Connection:
    """One connection of a resumable stream: how it was opened and how it ended."""

    number: int
    request: str  # e.g. "POST /v1/responses" or "GET /v1/responses/resp_1?stream=true&starting_after=6"
    resumed_after: str | None  # the cursor or Last-Event-ID sent, None on a fresh start
    events: int = 0  # new events handled on this connection (replays and keep-alives not counted)
    keepalives: int = 0
    end_reason: str | None = None  # the client's end_reason ("complete", "broken", ...)
    error: str | None = None

    def line(self) -> str:
        """One line for reports and error messages."""
        ended = self.end_reason or "open"
        if self.error:
            ended += f" ({self.error})"
        return f"connection {self.number}: {self.request}: {self.events} new event(s), ended {ended}"


def is_content_event(event: SSEEvent) -> bool:
    """For the client's `idle_timeout`: an event is content unless it is a Responses keep-alive.

    SSE comments (`: ping`) never become events at all, so a stream that only sends those looks idle too.
    """
    if event.event == "keepalive":
        return False
    if '"keepalive"' not in event.data:  # cheap test first: most events are not keep-alives
        return True
    try:
        payload = json.loads(event.data)
    except ValueError:
        return True
    return not (isinstance(payload, dict) and payload.get("type") == "keepalive")


def _reconnectable(exc: BaseException) -> bool:
    from .client import ConnectFailed, ConnectionBroken, IncompleteEvent, ReadStalled

    return isinstance(exc, (ConnectFailed, ConnectionBroken, IncompleteEvent, ReadStalled))


def _record_drop(conn: Connection, exc: Exception, connections: list[Connection]) -> None:
    """Write down why a connection ended; re-raise unless reconnecting can help (an HTTP error cannot)."""
    from .client import BadStatus

    if isinstance(exc, BadStatus):
        conn.end_reason, conn.error = exc.end_reason, str(exc)
        what = "the request" if len(connections) <= 1 else "reconnecting"
        raise ResumeError(f"{what} failed with HTTP {exc.status}", connections) from exc
    conn.end_reason = getattr(exc, "end_reason", type(exc).__name__)
    conn.error = str(exc).split(":")[0]
    if not _reconnectable(exc):
        raise exc


class ResumableResponseStream:
    """A Responses background stream that survives dropped connections.

    It starts with `POST {base_url}/responses` (`body` must ask for `"background": true`; `"stream": true`
    is added), or, given `response_id`, re-attaches to an existing response. It reads the response id
    from `response.created`. Whenever the connection drops (broken, read timeout, cut inside an event,
    or a clean end without a terminal event) it reconnects with
    `GET {base_url}/responses/{id}?stream=true&starting_after=<cursor>` and carries on, so the caller
    sees every event exactly once, in order. Keep-alive events (`"type": "keepalive"`) are not yielded and
    do not move the cursor; an event without a `sequence_number` (or whose data is not JSON) is yielded as
    it is, for the caller's accumulator to judge, without moving the cursor; a replayed or skipped
    `sequence_number` raises `SequenceError`.

    Bounded: more than `max_reconnects` reconnects in a row that deliver no new event raise
    `ResumeError`. `delay` seconds are slept (with the injectable `sleep`) before each reconnect.
    Other keywords (`read_timeout`, `idle_timeout`, `deadline`, `client`, ...) go to every
    `streamlab.client.EventStream` it opens. `connections` records each connection; `cursor` is the
    `SequenceCursor`.
    """

    def __init__(
        self,
        base_url: str,
        body: Mapping[str, Any] | None = None,
        *,
        response_id: str | None = None,
        starting_after: int | None = None,
        max_reconnects: int = 5,
        delay: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
        **client_kwargs: Any,
    ) -> None:
        if body is None and response_id is None:
            raise ValueError("give a request `body` to start a background response, or the `response_id` of one")
        if max_reconnects < 0 or delay < 0:
            raise ValueError("max_reconnects and delay must not be negative")
        self.base_url = base_url
        self.body = body
        self.response_id = response_id
        self.cursor = SequenceCursor(starting_after)
        self.max_reconnects = max_reconnects
        self.delay = delay
        self.sleep = sleep
        self.client_kwargs = client_kwargs
        self.connections: list[Connection] = []
        self.terminal: str | None = None  # the terminal event type once it arrived
        self.stream: Any = None  # the client stream of the current connection
        self._closed = False

    @property
    def reconnects(self) -> int:
        return max(0, len(self.connections) - 1)

    def _open(self) -> Any:
        from .client import resume_response, stream_responses

        number = len(self.connections) + 1
        if self.response_id is None:
            assert self.body is not None
            self.stream = stream_responses(self.base_url, self.body, **self.client_kwargs)
            self.connections.append(Connection(number, "POST /v1/responses", None))
        else:
            after = self.cursor.value
            self.stream = resume_response(self.base_url, self.response_id, after, **self.client_kwargs)
            query = "stream=true" + ("" if after is None else f"&starting_after={after}")
            sent = None if after is None else str(after)
            self.connections.append(Connection(number, f"GET /v1/responses/{self.response_id}?{query}", sent))
        return self.stream

    def __iter__(self) -> Iterator[Any]:
        idle = 0  # reconnects in a row that brought nothing new
        while not self._closed:
            stream = self._open()
            conn = self.connections[-1]
            try:
                with stream:
                    for timed in stream:
                        new, payload = self.cursor.admit_data(timed.data)
                        if not new:
                            if payload is not None and payload.get("type") == "keepalive":
                                conn.keepalives += 1
                                continue  # a keep-alive is not part of the answer
                            yield timed  # no number (or not JSON): the caller decides; the cursor stays
                            continue
                        conn.events += 1
                        if self.response_id is None and payload is not None:
                            response = payload.get("response")
                            if isinstance(response, dict) and isinstance(response.get("id"), str):
                                self.response_id = response["id"]
                        if payload is not None and payload.get("type") in RESPONSES_TERMINAL_TYPES:
                            self.terminal = payload["type"]
                        yield timed
                conn.end_reason = stream.end_reason
            except Exception as exc:
                _record_drop(conn, exc, self.connections)
            if self.terminal is not None or self._closed or stream.end_reason == "cancelled":
                return
            if self.response_id is None:
                raise ResumeError("the connection dropped before response.created gave a response id: there is "
                                  "nothing to resume; discard any partial output and start again", self.connections)
            idle = 0 if conn.events else idle + 1
            if idle > self.max_reconnects:
                raise ResumeError(f"{idle} reconnect(s) in a row brought no new event "
                                  f"(max_reconnects={self.max_reconnects})", self.connections)
            if self.delay:
                self.sleep(self.delay)

    def close(self) -> None:
        """Stop: close the current connection and do not reconnect (the response keeps running on the
        server; `POST /v1/responses/{id}/cancel` is what stops a background response)."""
        self._closed = True
        if self.stream is not None:
            self.stream.close()

    def __enter__(self) -> ResumableResponseStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _default_is_terminal(event: SSEEvent) -> bool:
    """A Chat `[DONE]`, or a Responses terminal event."""
    if event.data == "[DONE]":
        return True
    if event.event in RESPONSES_TERMINAL_TYPES:
        return True
    try:
        payload = json.loads(event.data)
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("type") in RESPONSES_TERMINAL_TYPES


class LastEventIdStream:
    """The standard SSE reconnection: resend the request with `Last-Event-ID` after a drop.

    As an `EventSource` does (WHATWG HTML 9.2), it keeps the stream's last event ID and reconnection
    time across connections: after a drop it waits the `retry:` time the server last set (or
    `default_retry_ms`; capped at `max_retry_ms`; `sleep` is injectable), then sends the same request
    with a `Last-Event-ID` header (when the ID is not empty). The server decides where to resume; the
    stand-in resumes after the frame that set that ID. It stops after a terminal event (`is_terminal`,
    default: `[DONE]` or a Responses terminal event) or an HTTP 204, and gives up with `ResumeError`
    after more than `max_reconnects` reconnects in a row without a new event.

    Exactly once depends on the server and on ids: only events that carry (or inherit) an ID can be
    resumed after. Keywords other than those below go to each `streamlab.client.EventStream`.
    """

    def __init__(
        self,
        url: str,
        body: Any = None,
        *,
        method: str = "POST",
        last_event_id: str = "",
        max_reconnects: int = 5,
        default_retry_ms: int = 0,
        max_retry_ms: int = 5_000,
        sleep: Callable[[float], None] = time.sleep,
        is_terminal: Callable[[SSEEvent], bool] = _default_is_terminal,
        **client_kwargs: Any,
    ) -> None:
        if max_reconnects < 0 or default_retry_ms < 0 or max_retry_ms < 0:
            raise ValueError("max_reconnects, default_retry_ms and max_retry_ms must not be negative")
        self.url = url
        self.body = body
        self.method = method
        self.last_event_id = last_event_id
        self.retry_ms: int | None = None
        self.max_reconnects = max_reconnects
        self.default_retry_ms = default_retry_ms
        self.max_retry_ms = max_retry_ms
        self.sleep = sleep
        self.is_terminal = is_terminal
        self.client_kwargs = client_kwargs
        self.connections: list[Connection] = []
        self.waits: list[float] = []  # seconds slept before each reconnect
        self.finished = False
        self.stream: Any = None
        self._closed = False

    def _parser(self) -> SSEParser:
        """A parser that starts from the stream's state so far (the ID persists across connections)."""
        return SSEParser(last_event_id=self.last_event_id)

    def __iter__(self) -> Iterator[Any]:
        from .client import EventStream

        idle = 0
        while not self._closed:
            sent = self.last_event_id or None
            self.stream = stream = EventStream(self.url, self.body, method=self.method, last_event_id=sent,
                                               parser=self._parser(), **self.client_kwargs)
            path = urlsplit(self.url).path
            conn = Connection(len(self.connections) + 1, f"{self.method} {path}"
                              + (f" Last-Event-ID: {sent}" if sent else ""), sent)
            self.connections.append(conn)
            try:
                with stream:
                    if stream.status == 204:  # "no content": the server says do not reconnect
                        self.finished = True
                        return
                    for timed in stream:
                        conn.events += 1
                        if self.is_terminal(timed.event):
                            self.finished = True
                        yield timed
                conn.end_reason = stream.end_reason
            except Exception as exc:
                _record_drop(conn, exc, self.connections)
            finally:
                self.last_event_id = stream.last_event_id
                if stream.retry_ms is not None:
                    self.retry_ms = stream.retry_ms
            if self.finished or self._closed or stream.end_reason == "cancelled":
                return
            idle = 0 if conn.events else idle + 1
            if idle > self.max_reconnects:
                raise ResumeError(f"{idle} reconnect(s) in a row brought no new event "
                                  f"(max_reconnects={self.max_reconnects})", self.connections)
            wait = min(self.retry_ms if self.retry_ms is not None else self.default_retry_ms, self.max_retry_ms)
            self.waits.append(wait / 1000)
            if wait:
                self.sleep(wait / 1000)

    def close(self) -> None:
        """Stop: close the current connection and do not reconnect."""
        self._closed = True
        if self.stream is not None:
            self.stream.close()

    def __enter__(self) -> LastEventIdStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
