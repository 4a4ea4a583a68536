"""An httpx streaming client that hands out SSE events the moment their bytes arrive.

The client does three things and nothing else: send the request, feed every network chunk *as received*
(`Response.iter_bytes()`, never httpx's line iteration) into `streamlab.sse.SSEParser`, and tell you
precisely how the stream ended. Higher layers (retry, resume, the relay, the conformance checker) build
on it; it makes no decision for them.

    from streamlab.client import stream_chat

    with stream_chat(server.base_url, {"model": "demo", "messages": []}) as stream:
        for timed in stream:                    # TimedEvent(event=SSEEvent(...), at=perf_counter value)
            print(timed.elapsed, timed.data)
    print(stream.end_reason)                    # "complete"

How a stream ends is always explicit, twice: `stream.end_reason` says it in one word, and every ending
other than "complete" and "cancelled" raises out of the `for` loop (a `StreamEndError` subclass, or the
parser's own `SSELimitError`, a `ValueError`, when the server sends an absurdly long line):

| end_reason         | raised              | meaning                                                            |
|--------------------|---------------------|--------------------------------------------------------------------|
| "complete"         | nothing             | the body ended cleanly, on an event boundary                       |
| "cancelled"        | nothing             | you called `close()` / left the `with` block before the end        |
| "http_error"       | `BadStatus`   | a status other than 2xx; `.status`, `.headers`, `.body`, `.error` |
| "not_event_stream" | `NotAnEventStream`  | 2xx that is not text/event-stream (JSON, an HTML page; BadStatus) |
| "connect_error"    | `ConnectFailed`      | no response at all: refused, reset or closed before the headers    |
| "invalid_request"  | `RequestNotSent`    | the request cannot be sent (bad URL scheme, invalid header): final |
| "broken"           | `ConnectionBroken`  | the connection died before the body's proper end                   |
| "read_timeout"     | `ReadStalled`       | no byte arrived for `read_timeout` seconds                         |
| "idle_timeout"     | `IdleTimeout`       | bytes arrived but no content event for `idle_timeout` seconds      |
| "deadline"         | `DeadlineExceeded`  | the whole request took longer than `deadline` seconds              |
| "incomplete_event" | `IncompleteEvent`   | the body ended cleanly but in the middle of an event               |
| "limit_exceeded"   | `sse.SSELimitError` | a line or event outgrew the parser's bounds; the connection closes |

`stream.mid_event` tells whether the stream stopped inside an unfinished event (the parser's `close()`);
the unfinished event is never yielded. Events already yielded stay yielded, and `stream.events` and
`stream.raw` keep everything received, so nothing is lost when an error is raised.

Closing cancels: `close()` closes the HTTP connection, which is how a server learns that nobody is
reading (the stand-in records it as `client_gone`).
"""

from __future__ import annotations

import asyncio
import json as _json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from ..core.errors import (
    BadStatus,
    ConnectFailed,
    ConnectionBroken,
    DeadlineExceeded,
    IdleTimeout,
    IncompleteEvent,
    NotAnEventStream,
    ReadStalled,
    RequestNotSent,
    StreamEndError,
)
from ..core.sse import SSEEvent, SSELimitError, SSEParser

__all__ = [
    "TimedEvent",
    "StreamEndError",
    "BadStatus",
    "NotAnEventStream",
    "ConnectFailed",
    "RequestNotSent",
    "ConnectionBroken",
    "ReadStalled",
    "IdleTimeout",
    "DeadlineExceeded",
    "IncompleteEvent",
    "RETRYABLE_TRANSPORT_ERRORS",
    "EventStream",
    "AsyncEventStream",
    "stream_chat",
    "stream_responses",
    "resume_response",
    "astream_chat",
    "astream_responses",
    "aresume_response",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "MAX_ERROR_BODY_BYTES",
]

DEFAULT_READ_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 5.0
MAX_ERROR_BODY_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class TimedEvent:
    """One SSE event and when it arrived.

    `at` is the `time.perf_counter()` value when the network chunk that completed the event was
    received (events completed by the same chunk share it); `elapsed` is `at` minus the moment the
    request was sent, i.e. the time a user would have waited for this event.
    """

    event: SSEEvent
    at: float
    elapsed: float

    @property
    def type(self) -> str:
        """The SSE event type ("message" when the frame had no `event:` line)."""
        return self.event.event

    @property
    def data(self) -> str:
        return self.event.data

    @property
    def id(self) -> str:
        """The stream's last event ID when this event was dispatched."""
        return self.event.last_event_id

    def json(self) -> Any:
        """The data parsed as JSON (raises ValueError for non-JSON data such as `[DONE]`)."""
        return _json.loads(self.event.data)


RETRYABLE_TRANSPORT_ERRORS: tuple[type[StreamEndError], ...] = (ConnectFailed, ConnectionBroken, ReadStalled,
                                                               IncompleteEvent)
"""Transport failures a retry policy may retry (only while nothing has reached the caller yet)."""


# --- shared machinery -----------------------------------------------------------------------------


class _Base:
    """State and bookkeeping shared by the sync and async streams (no I/O here)."""

    def __init__(
        self,
        url: str,
        json: Any = None,
        *,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
        last_event_id: str | None = None,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        deadline: float | None = None,
        idle_timeout: float | None = None,
        is_content: Callable[[SSEEvent], bool] | None = None,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        parser: SSEParser | None = None,
    ) -> None:
        for name, value in (("read_timeout", read_timeout), ("deadline", deadline),
                            ("idle_timeout", idle_timeout), ("connect_timeout", connect_timeout)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None, got {value!r}")
        self.url = url
        self.method = method.upper()
        self.body = json
        self.read_timeout = read_timeout
        self.deadline = deadline
        self.idle_timeout = idle_timeout
        self.is_content = is_content
        self.connect_timeout = connect_timeout
        req_headers: dict[str, str | bytes] = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        req_headers.update(headers or {})
        if last_event_id is not None:  # the standard sends it UTF-8 encoded; httpx would insist on ASCII for str
            req_headers["Last-Event-ID"] = last_event_id.encode("utf-8")
        self.request_headers = req_headers
        # On a reconnect the standard keeps the last event ID until the stream sets a new one.
        self.parser = parser or SSEParser(last_event_id=last_event_id or "")
        self.status: int | None = None
        self.headers: httpx.Headers | None = None
        self.started_at: float | None = None
        self.headers_at: float | None = None
        self.first_byte_at: float | None = None
        self.last_byte_at: float | None = None
        self.last_content_at: float | None = None
        self.events: list[TimedEvent] = []
        self.chunks: list[tuple[float, int]] = []
        self._raw = bytearray()
        self.end_reason: str | None = None
        self.mid_event = False
        self.error: StreamEndError | None = None
        self._iterating = False
        self._deadline_hit = False
        self._pending: Exception | None = None  # raised after the events of the current chunk are yielded
        self._parser_closed = False

    # -- what was received --

    @property
    def raw(self) -> bytes:
        """Every body byte received so far, exactly as it arrived."""
        return bytes(self._raw)

    @property
    def bytes_received(self) -> int:
        return len(self._raw)

    @property
    def last_event_id(self) -> str:
        """The stream's last event ID: what to send as `Last-Event-ID` when reconnecting."""
        return self.parser.last_event_id

    @property
    def retry_ms(self) -> int | None:
        """The server's last valid `retry:` field, if any."""
        return self.parser.retry_ms

    @property
    def ended(self) -> bool:
        return self.end_reason is not None

    def _elapsed(self) -> float:
        return 0.0 if self.started_at is None else time.perf_counter() - self.started_at

    def _timeout(self) -> httpx.Timeout:
        read = self.read_timeout
        connect = self.connect_timeout
        if self.deadline is not None:  # httpx's own timeouts never outlast the deadline
            read = self.deadline if read is None else min(read, self.deadline)
            connect = self.deadline if connect is None else min(connect, self.deadline)
        return httpx.Timeout(connect=connect, read=read, write=read, pool=connect)

    def _build_request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        kwargs: dict[str, Any] = {"headers": self.request_headers, "timeout": self._timeout()}
        if self.body is not None:
            kwargs["json"] = self.body
        return client.build_request(self.method, self.url, **kwargs)

    def _fail(self, cls: type[StreamEndError], message: str) -> StreamEndError:
        exc = cls(message, events_received=len(self.events), bytes_received=len(self._raw),
                  mid_event=self.mid_event, elapsed=self._elapsed())
        self.end_reason = cls.ending.value
        self.error = exc
        return exc

    def _http_error(self, status: int, headers: httpx.Headers, content: bytes) -> BadStatus:
        try:
            body: Any = _json.loads(content)
        except ValueError:
            body = content.decode("utf-8", "replace")
        exc = BadStatus(status, headers, body, elapsed=self._elapsed())
        if 200 <= status < 300:
            exc = NotAnEventStream(status, headers, body, elapsed=self._elapsed())
            media = headers.get("content-type") or "no Content-Type"
            hint = ' (was "stream": true sent?)' if media.startswith("application/json") else ""
            exc.args = (f"HTTP {status} with {media}, not text/event-stream: not an event stream{hint}",)
        self.end_reason = exc.end_reason
        self.error = exc
        return exc

    def _check_deadline(self) -> None:
        if self.deadline is not None and self._elapsed() >= self.deadline:
            self._deadline_hit = True
            raise self._fail(DeadlineExceeded, f"deadline of {self.deadline:g} s exceeded "
                             f"after {len(self.events)} event(s) and {len(self._raw)} byte(s)")

    def _take(self, chunk: bytes) -> list[TimedEvent]:
        """Record one network chunk and parse it; return its events stamped with the arrival time."""
        if self.end_reason == "cancelled":  # close() from another thread or task won the race: stop quietly
            return []
        now = time.perf_counter()
        if self.first_byte_at is None:
            self.first_byte_at = now
        self.last_byte_at = now
        self.chunks.append((now, len(chunk)))
        self._raw += chunk
        elapsed = now - (self.started_at or now)
        try:
            parsed = self.parser.feed(chunk)
        except SSELimitError as exc:  # hand out the events completed before the oversized line, then raise
            parsed = exc.events
            self._parser_closed = True
            self.end_reason = "limit_exceeded"
            self._pending = exc
        except RuntimeError:  # the parser was closed by a concurrent close() between the check and the feed
            if self.end_reason == "cancelled":
                return []
            raise
        out = [TimedEvent(ev, now, elapsed) for ev in parsed]
        self.events.extend(out)
        if self._pending is not None:
            return out
        if self.last_content_at is None:
            self.last_content_at = self.headers_at or now
        if any(self.is_content is None or self.is_content(t.event) for t in out):
            self.last_content_at = now
        elif self.idle_timeout is not None and now - self.last_content_at > self.idle_timeout:
            self._pending = self._fail(IdleTimeout, f"no content event for {now - self.last_content_at:.3f} s "
                             f"(idle_timeout={self.idle_timeout:g} s) although bytes kept arriving")
        return out

    def _close_parser(self) -> None:
        """Tell the parser the stream ended (once); remember whether it stopped inside an event."""
        if not self._parser_closed:
            self._parser_closed = True
            self.mid_event = self.parser.close()

    def _finish_clean(self) -> None:
        """The body ended with its proper terminator: complete, unless it stopped inside an event."""
        self._close_parser()
        if self.mid_event:
            raise self._fail(IncompleteEvent, "the body ended inside an unfinished event "
                             f"after {len(self.events)} complete event(s); the unfinished event was discarded")
        self.end_reason = "complete"

    def _transport_failure(self, exc: Exception) -> StreamEndError:
        """Classify an httpx exception raised while reading the body."""
        self._close_parser()
        where = f"after {len(self.events)} event(s) and {len(self._raw)} byte(s)"
        if self._deadline_hit or (self.deadline is not None and self._elapsed() >= self.deadline):
            return self._fail(DeadlineExceeded, f"deadline of {self.deadline:g} s exceeded {where}")
        if isinstance(exc, httpx.TimeoutException):
            return self._fail(ReadStalled, f"no byte for {self.read_timeout:g} s {where}")
        state = "inside an unfinished event" if self.mid_event else "on an event boundary"
        return self._fail(ConnectionBroken, f"connection broken {where}, {state}: {exc}")

    def _open_failure(self, exc: Exception) -> StreamEndError:
        """Classify an httpx exception raised before the response headers arrived."""
        if self.deadline is not None and self._elapsed() >= self.deadline:
            return self._fail(DeadlineExceeded, f"deadline of {self.deadline:g} s exceeded before the response")
        if isinstance(exc, httpx.ReadTimeout):
            return self._fail(ReadStalled, f"no response headers within {self.read_timeout:g} s: {exc}")
        if isinstance(exc, (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.DecodingError,
                            httpx.TooManyRedirects)):  # our request is wrong: sending it again cannot help
            return self._fail(RequestNotSent, f"the request to {self.url} cannot be sent: "
                              f"{type(exc).__name__}: {exc}")
        return self._fail(ConnectFailed, f"could not get a response from {self.url}: {type(exc).__name__}: {exc}")

    def __repr__(self) -> str:
        state = self.end_reason or ("open" if self.status is not None else "not opened")
        return (f"<{type(self).__name__} {self.method} {self.url} status={self.status} {state} "
                f"events={len(self.events)} bytes={len(self._raw)}>")


def _own_client_options(url: str) -> dict[str, Any]:
    """Options for a client the stream makes for itself. Proxies from the environment are ignored (a
    stand-in on loopback must not go through one). For plain http:// no TLS context is needed, which
    saves the ~20 ms of loading the CA bundle per stream; https:// keeps full certificate checks."""
    options: dict[str, Any] = {"trust_env": False}
    if url.lower().startswith("http://"):
        options["verify"] = False  # nothing to verify without TLS; redirects are never followed
    return options


def _not_event_stream(headers: httpx.Headers) -> bool:
    """True unless the media type is text/event-stream (parameters such as charset allowed, any case).

    The WHATWG standard fails the connection on any other Content-Type; an HTML error page from a proxy or
    a JSON body (a request without "stream": true) must not be parsed as events."""
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media_type != "text/event-stream"
_HAS_TIMEOUT_CM = hasattr(asyncio, "timeout")


# --- sync -----------------------------------------------------------------------------------------


class EventStream(_Base):
    """A streamed HTTP request read with `httpx.Client` (sync).

    Nothing happens until `open()` (called by `with` or by the first iteration): it sends the request
    and raises `BadStatus` for a non-2xx answer. Iterate to get `TimedEvent`s; see the module
    docstring for how the iteration ends. Pass `client` to reuse an `httpx.Client` (it is not closed);
    otherwise the stream makes one and closes it with the stream.

    Keywords (shared with `AsyncEventStream`):

    * `method` ("POST"), `headers` (extra request headers), `json` (the body, sent as JSON when not None);
    * `last_event_id`: sent as `Last-Event-ID` and used as the parser's starting last event ID (a reconnect);
    * `read_timeout` (30 s): longest gap between two reads of bytes, including the wait for the headers;
    * `deadline` (None): longest time for the whole request, from sending it to the last byte;
    * `idle_timeout` (None): longest time without a *content* event while bytes still arrive;
      `is_content(event)` decides what counts (default: every dispatched event; comments never do);
    * `connect_timeout` (5 s); `parser`: an `SSEParser` to use (e.g. with smaller limits).

    After the stream ends: `end_reason`, `error`, `mid_event`, `events` (all `TimedEvent`s), `raw` (all
    bytes), `chunks` (arrival time and size of each network read), `status`, `headers`, `started_at`,
    `headers_at`, `first_byte_at`, `last_byte_at` (`time.perf_counter()` values), `last_event_id`, `retry_ms`.
    """

    def __init__(self, url: str, json: Any = None, *, client: httpx.Client | None = None, **kwargs: Any) -> None:
        super().__init__(url, json, **kwargs)
        self._own_client = client is None
        self._client = client
        self._response: httpx.Response | None = None
        self._watchdog: threading.Timer | None = None

    @property
    def response(self) -> httpx.Response | None:
        """The underlying httpx response once open (headers, http_version, ...)."""
        return self._response

    def open(self) -> EventStream:
        """Send the request and wait for the status line and headers. Returns self."""
        if self._response is not None or self.end_reason is not None:
            return self
        if self._client is None:
            self._client = httpx.Client(**_own_client_options(self.url))
        request = self._build_request(self._client)
        self.started_at = time.perf_counter()
        try:
            response = self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            self._close_client()
            raise self._open_failure(exc) from exc
        self.headers_at = time.perf_counter()
        self._response = response
        self.status, self.headers = response.status_code, response.headers
        if not 200 <= response.status_code < 300:
            try:
                content = _read_capped_sync(response)
            except httpx.HTTPError:
                content = b""
            self._release()
            raise self._http_error(response.status_code, response.headers, content)
        if _not_event_stream(response.headers):
            try:
                content = _read_capped_sync(response)
            except httpx.HTTPError:
                content = b""
            self._release()
            raise self._http_error(response.status_code, response.headers, content)
        if self.deadline is not None:
            self._arm_watchdog(response)
        return self

    def _arm_watchdog(self, response: httpx.Response) -> None:
        """Enforce the deadline even while a read is blocked: shut the socket down when time is up."""
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is None or self.started_at is None or self.deadline is None:
            return
        remaining = max(0.0, self.started_at + self.deadline - time.perf_counter())

        def fire() -> None:
            self._deadline_hit = True
            try:
                sock.shutdown(2)  # SHUT_RDWR: the blocked recv returns; the reader reports the deadline
            except OSError:
                pass

        self._watchdog = threading.Timer(remaining, fire)
        self._watchdog.daemon = True
        self._watchdog.start()

    def __enter__(self) -> EventStream:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[TimedEvent]:
        if self._iterating:
            raise RuntimeError("an EventStream can be iterated only once")
        self._iterating = True
        self.open()
        if self.end_reason is not None:  # closed before iterating
            return
        assert self._response is not None
        try:
            for chunk in self._response.iter_bytes():
                if not chunk:
                    continue
                if self._deadline_hit:
                    self._check_deadline()
                yield from self._take(chunk)
                if self.end_reason == "cancelled":
                    return
                if self._pending is not None:
                    raise self._pending
                self._check_deadline()
            if self._deadline_hit:
                self._check_deadline()
            self._finish_clean()
        except httpx.StreamClosed:
            return  # close() was called while iterating: end_reason is "cancelled"
        except httpx.HTTPError as exc:
            if self.end_reason == "cancelled":
                return
            raise self._transport_failure(exc) from exc
        finally:
            if self.end_reason is None:  # the loop was abandoned (break without `with`): that is a cancel
                self.close()
            elif self.end_reason != "cancelled":
                self._release()

    def read_all(self) -> list[TimedEvent]:
        """Iterate to the end and return every event (raises like iteration does)."""
        for _ in self:
            pass
        return self.events

    def close(self) -> None:
        """Cancel: close the connection now (end_reason "cancelled" unless it had already ended)."""
        if self.end_reason is None:
            self.end_reason = "cancelled"
            self._close_parser()
        self._release()

    def _release(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            if self._watchdog is not threading.current_thread():
                self._watchdog.join()
            self._watchdog = None
        if self._response is not None:
            self._response.close()
        self._close_client()

    def _close_client(self) -> None:
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None


def _read_capped_sync(response: httpx.Response) -> bytes:
    out = bytearray()
    for chunk in response.iter_bytes():
        out += chunk
        if len(out) > MAX_ERROR_BODY_BYTES:
            break
    return bytes(out[:MAX_ERROR_BODY_BYTES])


# --- async ----------------------------------------------------------------------------------------


class AsyncEventStream(_Base):
    """The same stream read with `httpx.AsyncClient`: `async with`, `async for`, `await aclose()`.

    The deadline is enforced around every read with `asyncio.wait_for`, so a stalled server cannot
    hold the caller past it.
    """

    def __init__(self, url: str, json: Any = None, *, client: httpx.AsyncClient | None = None,
                 **kwargs: Any) -> None:
        super().__init__(url, json, **kwargs)
        self._own_client = client is None
        self._client = client
        self._response: httpx.Response | None = None

    @property
    def response(self) -> httpx.Response | None:
        return self._response

    async def open(self) -> AsyncEventStream:
        """Send the request and wait for the status line and headers. Returns self."""
        if self._response is not None or self.end_reason is not None:
            return self
        if self._client is None:
            self._client = httpx.AsyncClient(**_own_client_options(self.url))
        request = self._build_request(self._client)
        self.started_at = time.perf_counter()
        try:
            response = await self._with_deadline(self._client.send(request, stream=True))
        except (httpx.HTTPError, asyncio.TimeoutError) as exc:
            await self._close_client()
            if isinstance(exc, asyncio.TimeoutError):
                self._deadline_hit = True
                raise self._fail(DeadlineExceeded, f"deadline of {self.deadline:g} s exceeded before the "
                                 "response") from exc
            raise self._open_failure(exc) from exc
        self.headers_at = time.perf_counter()
        self._response = response
        self.status, self.headers = response.status_code, response.headers
        if not 200 <= response.status_code < 300 or _not_event_stream(response.headers):
            try:
                content = await _read_capped_async(response)
            except httpx.HTTPError:
                content = b""
            await self._release()
            raise self._http_error(response.status_code, response.headers, content)
        return self

    async def _with_deadline(self, awaitable: Any) -> Any:
        """Await one step (the response headers, or the next chunk) within what is left of the deadline."""
        if self.deadline is None or self.started_at is None:
            return await awaitable
        remaining = max(self.started_at + self.deadline - time.perf_counter(), 0.0)
        if _HAS_TIMEOUT_CM:  # Python 3.11+: cancels only this await, in this task; no extra task per read
            async with asyncio.timeout(remaining):  # type: ignore[attr-defined]
                return await awaitable
        return await asyncio.wait_for(awaitable, remaining)

    async def __aenter__(self) -> AsyncEventStream:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def __aiter__(self) -> AsyncIterator[TimedEvent]:
        if self._iterating:
            raise RuntimeError("an AsyncEventStream can be iterated only once")
        self._iterating = True
        await self.open()
        if self.end_reason is not None:
            return
        assert self._response is not None
        chunks = self._response.aiter_bytes()
        try:
            while True:
                try:
                    chunk = await self._with_deadline(chunks.__anext__())
                except StopAsyncIteration:
                    break
                except asyncio.TimeoutError as exc:
                    self._deadline_hit = True
                    self._close_parser()
                    raise self._fail(DeadlineExceeded, f"deadline of {self.deadline:g} s exceeded after "
                                     f"{len(self.events)} event(s) and {len(self._raw)} byte(s)") from exc
                if not chunk:
                    continue
                for timed in self._take(chunk):
                    yield timed
                if self.end_reason == "cancelled":
                    return
                if self._pending is not None:
                    raise self._pending
                self._check_deadline()
            self._finish_clean()
        except httpx.StreamClosed:
            return
        except httpx.HTTPError as exc:
            if self.end_reason == "cancelled":
                return
            raise self._transport_failure(exc) from exc
        finally:
            try:
                await chunks.aclose()
            except (httpx.HTTPError, RuntimeError):
                pass
            if self.end_reason is None:  # the loop was abandoned (break without `async with`): a cancel
                await self.aclose()
            elif self.end_reason != "cancelled":
                await self._release()

    async def read_all(self) -> list[TimedEvent]:
        """Iterate to the end and return every event (raises like iteration does)."""
        async for _ in self:
            pass
        return self.events

    async def aclose(self) -> None:
        """Cancel: close the connection now (end_reason "cancelled" unless it had already ended)."""
        if self.end_reason is None:
            self.end_reason = "cancelled"
            self._close_parser()
        await self._release()

    async def _release(self) -> None:
        if self._response is not None:
            await self._response.aclose()
        await self._close_client()

    async def _close_client(self) -> None:
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None


async def _read_capped_async(response: httpx.Response) -> bytes:
    out = bytearray()
    async for chunk in response.aiter_bytes():
        out += chunk
        if len(out) > MAX_ERROR_BODY_BYTES:
            break
    return bytes(out[:MAX_ERROR_BODY_BYTES])


# --- shortcuts for the two OpenAI dialects ----------------------------------------------------------


def _join(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")


def _streaming(body: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(body)
    out["stream"] = True
    return out


def stream_chat(base_url: str, body: Mapping[str, Any], **kwargs: Any) -> EventStream:
    """`POST {base_url}/chat/completions` with `"stream": true` added. Keywords go to `EventStream`."""
    return EventStream(_join(base_url, "chat/completions"), _streaming(body), **kwargs)


def stream_responses(base_url: str, body: Mapping[str, Any], **kwargs: Any) -> EventStream:
    """`POST {base_url}/responses` with `"stream": true` added. Keywords go to `EventStream`."""
    return EventStream(_join(base_url, "responses"), _streaming(body), **kwargs)


def _resume_url(base_url: str, response_id: str, starting_after: int | None) -> str:
    url = _join(base_url, f"responses/{response_id}") + "?stream=true"
    return url if starting_after is None else f"{url}&starting_after={int(starting_after)}"


def resume_response(base_url: str, response_id: str, starting_after: int | None = None,
                    **kwargs: Any) -> EventStream:
    """`GET {base_url}/responses/{id}?stream=true[&starting_after=N]`: re-attach to a background response."""
    return EventStream(_resume_url(base_url, response_id, starting_after), None, method="GET", **kwargs)


def astream_chat(base_url: str, body: Mapping[str, Any], **kwargs: Any) -> AsyncEventStream:
    """Async `stream_chat`."""
    return AsyncEventStream(_join(base_url, "chat/completions"), _streaming(body), **kwargs)


def astream_responses(base_url: str, body: Mapping[str, Any], **kwargs: Any) -> AsyncEventStream:
    """Async `stream_responses`."""
    return AsyncEventStream(_join(base_url, "responses"), _streaming(body), **kwargs)


def aresume_response(base_url: str, response_id: str, starting_after: int | None = None,
                     **kwargs: Any) -> AsyncEventStream:
    """Async `resume_response`."""
    return AsyncEventStream(_resume_url(base_url, response_id, starting_after), None, method="GET", **kwargs)
