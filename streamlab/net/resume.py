"""Resuming streams: reconnect after a dropped connection without replaying or skipping an event (I/O layer).

Two mechanisms, both reconnect transparently (the caller just iterates events):

* Responses background mode (the documented OpenAI route). `ResumableResponseStream` keeps a
  `SequenceCursor` (`streamlab.core.resume`: the number of the last event handled) and, when the
  connection drops, asks for the rest with `GET /v1/responses/{id}?stream=true&starting_after=<cursor>`.
  Keep-alive events never move the cursor; a replayed or skipped `sequence_number` raises `SequenceError`.
* The standard SSE mechanism (WHATWG HTML 9.2): a stream whose events carry `id:` fields lets the client
  reconnect with a `Last-Event-ID` header holding the parser's last event ID, after waiting the
  reconnection time the stream set with `retry:`. `LastEventIdStream` does that. (OpenAI documents
  `starting_after`, not `Last-Event-ID`, for its own streams; the stand-in honours both.)

Which drops are reconnected: exactly the client's `RETRYABLE_TRANSPORT_ERRORS` (refused, broken, a read
stall, a clean end inside an event), plus a clean end without a terminal event. Every connection is
recorded as a `Connection` whose `end_reason` is the client's `Ending` (never a class name), so a log of
connections reads in the same words as the client, retry and the stand-in.

Timeouts: the client (`streamlab.net.client`) already enforces all three kinds: `read_timeout` (the gap
between bytes), `deadline` (the whole request) and `idle_timeout` (bytes keep arriving, keep-alive
comments say, but no content event does). `is_content_event` is the content test to give it for
Responses streams, whose keep-alive events must not count as content.

The cursor (`SequenceCursor`) is pure and lives in `streamlab.core.resume`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict
from urllib.parse import urlsplit

import httpx

from streamlab.core.endings import Ending
from streamlab.core.errors import BadStatus, ResumeError
from streamlab.core.reading import TimedEvent
from streamlab.core.resume import (
    RESPONSES_TERMINAL_TYPES,
    SequenceCursor,
    is_terminal_event,
)
from streamlab.core.sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LINE_BYTES, SSEEvent, SSEParser
from streamlab.net.client import resume_response, stream_responses
from streamlab.net.eventstream import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    RETRYABLE_TRANSPORT_ERRORS,
    EventStream,
)

__all__ = ["Connection", "ResumableResponseStream", "LastEventIdStream"]


class _Limits(TypedDict):
    """The bounds of each connection's parser (`SSEParser`'s keyword arguments)."""

    max_line_bytes: int
    max_event_bytes: int


@dataclass
class Connection:
    """One connection of a resumable stream: how it was opened and how it ended."""

    number: int
    request: str  # e.g. "POST /v1/responses" or "GET /v1/responses/resp_1?stream=true&starting_after=6"
    resumed_after: str | None  # the cursor or Last-Event-ID sent, None on a fresh start
    events: int = 0  # new events handled on this connection (replays and keep-alives not counted)
    keepalives: int = 0
    end_reason: Ending | None = None  # the client's ending (COMPLETE, BROKEN, ...); None while open
    error: str | None = None

    def line(self) -> str:
        """One line for reports and error messages."""
        ended = self.end_reason or "open"
        if self.error:
            ended += f" ({self.error})"
        return f"connection {self.number}: {self.request}: {self.events} new event(s), ended {ended}"


def _record_drop(conn: Connection, stream: EventStream, exc: Exception, connections: list[Connection]) -> None:
    """Write down how a connection ended; re-raise unless reconnecting can help (an HTTP error cannot).

    The ending is always the client's (`stream.end_reason`): a `SequenceError` raised while reading, say,
    closed the stream, so that connection ended CANCELLED, with the error written next to it."""
    conn.end_reason = stream.end_reason
    if isinstance(exc, BadStatus):
        conn.error = str(exc)
        what = "the request" if len(connections) <= 1 else "reconnecting"
        raise ResumeError(f"{what} failed with HTTP {exc.status}", connections) from exc
    if isinstance(exc, RETRYABLE_TRANSPORT_ERRORS):
        conn.error = str(exc).split(":")[0]
        return
    conn.error = f"{type(exc).__name__}: {exc}"
    raise exc


def _client_options(
    client: httpx.Client | None,
    headers: Mapping[str, str] | None,
    read_timeout: float | None,
    connect_timeout: float | None,
    deadline: float | None,
    idle_timeout: float | None,
    is_content: Callable[[SSEEvent], bool] | None,
    keep: Literal["all", "none"],
) -> dict[str, Any]:
    """The per-connection keywords of `EventStream`, gathered once so every reconnect uses the same ones."""
    return {
        "client": client,
        "headers": headers,
        "read_timeout": read_timeout,
        "connect_timeout": connect_timeout,
        "deadline": deadline,
        "idle_timeout": idle_timeout,
        "is_content": is_content,
        "keep": keep,
    }


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
    `client`, `headers`, `read_timeout`, `connect_timeout`, `deadline`, `idle_timeout`, `is_content` and
    `keep` apply to every connection and mean what they mean for `streamlab.net.client.EventStream`;
    `max_line_bytes` and `max_event_bytes` bound each connection's parser (`SSEParser`). An event past
    them ends the stream with `EventTooLarge`, never reconnected: the server would send it again.
    `connections` records each connection; `cursor` is the `SequenceCursor`.
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
        client: httpx.Client | None = None,
        headers: Mapping[str, str] | None = None,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        deadline: float | None = None,
        idle_timeout: float | None = None,
        is_content: Callable[[SSEEvent], bool] | None = None,
        keep: Literal["all", "none"] = "all",
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
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
        self.client_options = _client_options(
            client, headers, read_timeout, connect_timeout, deadline, idle_timeout, is_content, keep
        )
        self.limits = _Limits(max_line_bytes=max_line_bytes, max_event_bytes=max_event_bytes)
        self.connections: list[Connection] = []
        self.terminal: str | None = None  # the terminal event type once it arrived
        self.stream: EventStream | None = None  # the client stream of the current connection
        self._closed = False

    @property
    def reconnects(self) -> int:
        return max(0, len(self.connections) - 1)

    def _open(self) -> EventStream:
        number = len(self.connections) + 1
        if self.response_id is None:
            assert self.body is not None
            self.stream = stream_responses(
                self.base_url, self.body, parser=SSEParser(**self.limits), **self.client_options
            )
            self.connections.append(Connection(number, "POST /v1/responses", None))
        else:
            after = self.cursor.value
            self.stream = resume_response(
                self.base_url, self.response_id, after, parser=SSEParser(**self.limits), **self.client_options
            )
            query = "stream=true" + ("" if after is None else f"&starting_after={after}")
            sent = None if after is None else str(after)
            self.connections.append(Connection(number, f"GET /v1/responses/{self.response_id}?{query}", sent))
        return self.stream

    def __iter__(self) -> Iterator[TimedEvent]:
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
                _record_drop(conn, stream, exc, self.connections)
            if self.terminal is not None or self._closed or stream.end_reason == Ending.CANCELLED:
                return
            if self.response_id is None:
                raise ResumeError(
                    "the connection dropped before response.created gave a response id: there is "
                    "nothing to resume; discard any partial output and start again",
                    self.connections,
                )
            idle = 0 if conn.events else idle + 1
            if idle > self.max_reconnects:
                raise ResumeError(
                    f"{idle} reconnect(s) in a row brought no new event (max_reconnects={self.max_reconnects})",
                    self.connections,
                )
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
    resumed after. `client`, `headers`, `read_timeout`, `connect_timeout`, `deadline`, `idle_timeout`,
    `is_content` and `keep` apply to every connection, as for `streamlab.net.client.EventStream`;
    `max_line_bytes` and `max_event_bytes` bound each connection's parser.
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
        is_terminal: Callable[[SSEEvent], bool] = is_terminal_event,
        client: httpx.Client | None = None,
        headers: Mapping[str, str] | None = None,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        deadline: float | None = None,
        idle_timeout: float | None = None,
        is_content: Callable[[SSEEvent], bool] | None = None,
        keep: Literal["all", "none"] = "all",
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
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
        self.limits = _Limits(max_line_bytes=max_line_bytes, max_event_bytes=max_event_bytes)
        self.client_options = _client_options(
            client, headers, read_timeout, connect_timeout, deadline, idle_timeout, is_content, keep
        )
        self.connections: list[Connection] = []
        self.waits: list[float] = []  # seconds slept before each reconnect
        self.finished = False
        self.stream: EventStream | None = None
        self._closed = False

    def _parser(self) -> SSEParser:
        """A parser that starts from the stream's state so far (the ID persists across connections)."""
        return SSEParser(last_event_id=self.last_event_id, **self.limits)

    def __iter__(self) -> Iterator[TimedEvent]:
        idle = 0
        while not self._closed:
            sent = self.last_event_id or None
            self.stream = stream = EventStream(
                self.url,
                self.body,
                method=self.method,
                last_event_id=sent,
                parser=self._parser(),
                **self.client_options,
            )
            path = urlsplit(self.url).path
            conn = Connection(
                len(self.connections) + 1, f"{self.method} {path}" + (f" Last-Event-ID: {sent}" if sent else ""), sent
            )
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
                _record_drop(conn, stream, exc, self.connections)
            finally:
                self.last_event_id = stream.last_event_id
                if stream.retry_ms is not None:
                    self.retry_ms = stream.retry_ms
            if self.finished or self._closed or stream.end_reason == Ending.CANCELLED:
                return
            idle = 0 if conn.events else idle + 1
            if idle > self.max_reconnects:
                raise ResumeError(
                    f"{idle} reconnect(s) in a row brought no new event (max_reconnects={self.max_reconnects})",
                    self.connections,
                )
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
