"""An event stream over one httpx request, sync and async: SSE events the moment their bytes arrive (I/O).

`EventStream` / `AsyncEventStream` do three things and nothing else: send the request, feed every network
chunk *as received* (its raw bytes decoded here, never httpx's line iteration) into the reading state
(`streamlab.core.reading.Reading`, which wraps `streamlab.core.sse.SSEParser`), and tell you precisely
how the stream ended. Higher layers (retry, resume, the relay, the conformance checker) build on them and
they make no decision for them. Callers usually start from the shortcuts in `streamlab.net.client`; the
exceptions are `streamlab.core.errors`'.

    from streamlab.net.client import stream_chat

    ask = {"model": "demo", "messages": [{"role": "user", "content": "Hi?"}]}
    with stream_chat(server.base_url, ask) as stream:
        for timed in stream:                    # TimedEvent(event=SSEEvent(...), at=perf_counter value)
            print(timed.elapsed, timed.data)
    print(stream.end_reason)                    # Ending.COMPLETE, which == "complete"

How a stream ends is always explicit, twice: `stream.end_reason` names it with an `Ending` (a str enum),
and every ending other than COMPLETE and CANCELLED raises out of the `for` loop the exception of
`streamlab.core.errors` whose `.ending` it is (`ENDING_ERRORS`); `stream.error` holds it too:

| end_reason         | raised              | meaning                                                            |
|--------------------|---------------------|--------------------------------------------------------------------|
| "complete"         | nothing             | the body ended cleanly, on an event boundary                       |
| "cancelled"        | nothing             | you called `close()` / left the `with` block before the end        |
| "http_error"       | `BadStatus`         | a status other than 2xx; `.status`, `.headers`, `.body`, `.error`  |
| "not_event_stream" | `NotAnEventStream`  | 2xx that is not text/event-stream (JSON, an HTML page; BadStatus)  |
| "connect_error"    | `ConnectFailed`     | no response at all: refused, reset or closed before the headers    |
| "invalid_request"  | `RequestNotSent`    | the request cannot be sent (bad URL scheme, invalid header): final |
| "broken"           | `ConnectionBroken`  | the connection died before the body's proper end                   |
| "read_timeout"     | `ReadStalled`       | no byte arrived for `read_timeout` seconds                         |
| "idle_timeout"     | `IdleTimeout`       | bytes arrived but no content event for `idle_timeout` seconds      |
| "deadline"         | `DeadlineExceeded`  | the whole request took longer than `deadline` seconds              |
| "incomplete_event" | `IncompleteEvent`   | the body ended cleanly but in the middle of an event               |
| "limit_exceeded"   | `EventTooLarge`     | a line or event outgrew the parser's bounds; the connection closes |

httpx's own exceptions are translated into that tree at one seam, through one table, `TRANSLATE` (httpx
exception class -> the streamlab class before the response headers, and while reading the body), the way
httpx maps httpcore's exceptions. An `EventTooLarge` carries the parser's `SSELimitError` as `__cause__`
and `.limit_error`.

`stream.mid_event` tells whether the stream stopped inside an unfinished event (the parser's `close()`);
the unfinished event is never yielded. Events already yielded stay yielded and, with the default
`keep="all"`, `stream.events` and `stream.raw` keep everything received, so nothing is lost when an error
is raised. With `keep="none"` the stream keeps only counts and times and reads any length in constant
memory (see `streamlab.core.reading`). A compressed body (`Content-Encoding: gzip`, `deflate`, any stack of
them) is decoded a bounded piece at a time (`streamlab.core.decompress`): a decompression bomb costs no
more memory than any other body, and an error body is capped at `MAX_ERROR_BODY_BYTES` after decoding.

Closing cancels: `close()` closes the HTTP connection, which is how a server learns that nobody is
reading (the stand-in records it as `client_gone`).

Keyword parameters, the same for `EventStream`, `AsyncEventStream` and every shortcut in
`streamlab.net.client` (`stream_chat`, `stream_responses`, `resume_response` and their async twins):

* `client`: an `httpx.Client` (`httpx.AsyncClient` for the async ones) to reuse; it is not closed. Without
  it the stream makes its own (proxies from the environment ignored) and closes it with the stream.
* `headers`: extra request headers. `last_event_id`: sent as `Last-Event-ID` (UTF-8) and used as the
  parser's starting last event ID, as on a reconnect.
* `read_timeout` (30 s): longest gap between two reads of bytes, including the wait for the headers.
  `connect_timeout` (5 s). `deadline` (None): longest time for the whole request, from sending it to the
  last byte, the wait for the headers included (the sync stream shuts down the socket it connected when
  time is up, so a server that drips header bytes cannot outlast it either). `idle_timeout` (None):
  longest time without a *content* event while bytes still arrive;
  `is_content(event)` decides what counts (default: every dispatched event; comments never do).
* `parser`: the `SSEParser` to feed (e.g. with smaller limits). `keep`: "all" (default) or "none".
* `EventStream` / `AsyncEventStream` only: `method` ("POST") and `json` (the body, sent as JSON unless None).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar, cast

import httpx

from streamlab.core.decompress import BoundedDecoder
from streamlab.core.endings import Ending
from streamlab.core.errors import (
    ENDING_ERRORS,
    BadStatus,
    ConnectFailed,
    ConnectionBroken,
    EncodingError,
    NotAnEventStream,
    ReadStalled,
    RequestNotSent,
    StreamEndError,
)
from streamlab.core.reading import Keep, Reading, TimedEvent
from streamlab.core.retry import RETRYABLE_ENDINGS
from streamlab.core.safejson import read_json
from streamlab.core.sse import SSEEvent, SSEParser, is_event_stream

__all__ = [
    "TRANSLATE",
    "RETRYABLE_TRANSPORT_ERRORS",
    "EventStream",
    "AsyncEventStream",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "MAX_ERROR_BODY_BYTES",
    "connect_trace",
    "SocketDeadline",
    "transport_ending",
    "describe_transport_error",
    "iter_decoded",
    "aiter_decoded",
]

DEFAULT_READ_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 5.0
MAX_ERROR_BODY_BYTES = 1024 * 1024

RETRYABLE_TRANSPORT_ERRORS: tuple[type[StreamEndError], ...] = tuple(
    ENDING_ERRORS[e] for e in sorted(RETRYABLE_ENDINGS)
)
"""Transport failures a retry or a reconnect may fix (`streamlab.core.retry.RETRYABLE_ENDINGS`)."""


# --- the one seam where httpx's exceptions become streamlab's ---------------------------------------

_OPENING, _READING = 0, 1  # the two columns of TRANSLATE and _MESSAGES

TRANSLATE: dict[type[Exception], tuple[type[StreamEndError], type[StreamEndError]]] = {
    # httpx exception          before the response headers   while reading the body
    httpx.UnsupportedProtocol: (RequestNotSent, RequestNotSent),
    httpx.LocalProtocolError: (RequestNotSent, ConnectionBroken),
    httpx.DecodingError: (RequestNotSent, ConnectionBroken),
    httpx.TooManyRedirects: (RequestNotSent, RequestNotSent),
    httpx.ReadTimeout: (ReadStalled, ReadStalled),
    httpx.TimeoutException: (ConnectFailed, ReadStalled),  # connect, write, pool
    httpx.HTTPError: (ConnectFailed, ConnectionBroken),  # refused, reset, cut
}
"""httpx exception class -> the streamlab class it becomes (before the headers, while reading the body).

The most specific class in an exception's MRO wins. A request our side cannot send is final (sending it
again cannot help); a timeout before the headers other than a read timeout is a failure to connect. A
passed `deadline` overrides the table: whatever httpx raised, the stream ended DEADLINE."""

_MESSAGES: dict[type[StreamEndError], tuple[str, str]] = {
    RequestNotSent: (
        "the request to {url} cannot be sent: {kind}: {exc}",
        "the request to {url} cannot be sent: {kind}: {exc}",
    ),
    ConnectFailed: (
        "could not get a response from {url}: {kind}: {exc}",
        "could not get a response from {url}: {kind}: {exc}",
    ),
    ReadStalled: ("no response headers within {read_timeout} s: {exc}", "no byte for {read_timeout} s {where}"),
    ConnectionBroken: (
        "the connection to {url} broke before the response: {kind}: {exc}",
        "connection broken {where}, {state}: {exc}",
    ),
}


def _translation(exc: BaseException) -> tuple[type[StreamEndError], type[StreamEndError]]:
    for cls in type(exc).__mro__:
        if cls in TRANSLATE:
            return TRANSLATE[cls]
    raise TypeError(f"no translation for {type(exc).__name__}: {exc}")  # only httpx.HTTPError reaches here


def transport_ending(exc: httpx.HTTPError, *, reading: bool) -> Ending:
    """The `Ending` httpx's `exc` stands for, by `TRANSLATE`: raised before the response headers, or while
    `reading` the body. The one mapping for every reader of httpx (the client, the checkers, the relay and the
    gateway), so a write timeout, say, cannot be a read timeout to one and a broken stream to another."""
    return _translation(exc)[_READING if reading else _OPENING].ending


def describe_transport_error(exc: BaseException, *, reading: bool, peer: str = "the server") -> str:
    """What broke, in a few words, for a report or a log line (at most 200 characters): a reset (an RST surfaces
    as httpx's ReadError caused by ConnectionResetError), a close before the end of the body (a FIN mid-body is
    a RemoteProtocolError; before the headers it may also be a reply that is not HTTP/1.1), a timeout, or
    httpx's own words. `peer` names the other side ("the server", "the upstream")."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionResetError):
            return f"reset by {peer}"
        cause = cause.__cause__ or cause.__context__
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    if isinstance(exc, httpx.RemoteProtocolError):
        if reading:  # httpx's words kept: they say which (HTTP/1.1's incomplete chunked read, HTTP/2's StreamReset)
            return f"closed by {peer} before the end of the body: {text}"[:200]
        return f"the reply is not valid HTTP/1.1, or {peer} closed the connection: {text}"[:200]
    return f"{type(exc).__name__}: {text}"[:200]


def _seconds(value: float | None) -> str:
    return "unbounded" if value is None else f"{value:g}"


# --- shared machinery -----------------------------------------------------------------------------


class _Base(Reading):
    """The request side shared by the sync and async streams: options, the request, the error seam."""

    def __init__(
        self,
        url: str,
        json: Any,
        *,
        method: str,
        headers: Mapping[str, str] | None,
        last_event_id: str | None,
        read_timeout: float | None,
        connect_timeout: float | None,
        deadline: float | None,
        idle_timeout: float | None,
        is_content: Callable[[SSEEvent], bool] | None,
        parser: SSEParser | None,
        keep: Keep,
    ) -> None:
        for name, value in (
            ("read_timeout", read_timeout),
            ("deadline", deadline),
            ("idle_timeout", idle_timeout),
            ("connect_timeout", connect_timeout),
        ):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None, got {value!r}")
        # On a reconnect the standard keeps the last event ID until the stream sets a new one.
        super().__init__(
            parser=parser or SSEParser(last_event_id=last_event_id or ""),
            keep=keep,
            deadline=deadline,
            idle_timeout=idle_timeout,
            is_content=is_content,
        )
        self.url = url
        self.method = method.upper()
        self.body = json
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        req_headers: dict[str, str | bytes] = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        req_headers.update(headers or {})
        if last_event_id is not None:  # the standard sends it UTF-8 encoded; httpx would insist on ASCII for str
            req_headers["Last-Event-ID"] = last_event_id.encode("utf-8")
        self.request_headers = req_headers
        self.status: int | None = None
        self.headers: httpx.Headers | None = None
        self._iterating = False
        self._deadline_hit = False

    def _timeout(self) -> httpx.Timeout:
        read = self.read_timeout
        connect = self.connect_timeout
        if self.deadline is not None:  # httpx's own timeouts never outlast the deadline
            read = self.deadline if read is None else min(read, self.deadline)
            connect = self.deadline if connect is None else min(connect, self.deadline)
        return httpx.Timeout(connect=connect, read=read, write=read, pool=connect)

    def _build_request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        return client.build_request(
            self.method, self.url, headers=_as_headers(self.request_headers), timeout=self._timeout(), json=self.body
        )

    def _opened(self, response: httpx.Response) -> bool:
        """Record the status line and headers; True when the answer is an event stream to read."""
        self.headers_at = time.perf_counter()
        self.status, self.headers = response.status_code, response.headers
        return 200 <= response.status_code < 300 and is_event_stream(response.headers.get("content-type"))

    def _http_error(self, response: httpx.Response, content: bytes) -> BadStatus:
        """The error for an answer that is not a stream: BadStatus, or NotAnEventStream for a 2xx."""
        status, headers = response.status_code, response.headers
        try:
            body: Any = read_json(content)
        except ValueError:
            body = content.decode("utf-8", "replace")
        elapsed = self.elapsed(time.perf_counter())
        if not 200 <= status < 300:
            return self.record_error(BadStatus(status, headers, body, elapsed=elapsed))
        exc = NotAnEventStream(status, headers, body, elapsed=elapsed)
        media = headers.get("content-type") or "no Content-Type"
        hint = ' (was "stream": true sent?)' if media.startswith("application/json") else ""
        exc.args = (f"HTTP {status} with {media}, not text/event-stream: not an event stream{hint}",)
        return self.record_error(exc)

    def _check_deadline(self) -> None:
        now = time.perf_counter()
        if self.deadline_passed(now):
            self._deadline_hit = True
            raise self.deadline_error(now)

    def _translate(self, exc: Exception, phase: int) -> StreamEndError:
        """The seam: an exception from httpx (or the async deadline) becomes the stream's ending and error."""
        now = time.perf_counter()
        if phase == _READING:
            self.close_parser()
        if self._deadline_hit or self.deadline_passed(now):
            return self.deadline_error(now, before_response=phase == _OPENING)
        cls = _translation(exc)[phase]
        state = "inside an unfinished event" if self.mid_event else "on an event boundary"
        message = _MESSAGES[cls][phase].format(
            url=self.url,
            kind=type(exc).__name__,
            exc=exc,
            where=self.where(),
            read_timeout=_seconds(self.read_timeout),
            state=state,
        )
        return self.fail(cls, message, now)

    def __repr__(self) -> str:
        state = self.end_reason or ("open" if self.status is not None else "not opened")
        return (
            f"<{type(self).__name__} {self.method} {self.url} status={self.status} {state} "
            f"events={self.events_received} bytes={self.bytes_received}>"
        )


def _own_client_options(url: str) -> dict[str, Any]:
    """Options for a client the stream makes for itself. Proxies from the environment are ignored (a
    stand-in on loopback must not go through one). For plain http:// no TLS context is needed, which
    saves the ~20 ms of loading the CA bundle per stream; https:// keeps full certificate checks."""
    options: dict[str, Any] = {"trust_env": False}
    if url.lower().startswith("http://"):
        options["verify"] = False  # nothing to verify without TLS; redirects are never followed
    return options


def _as_headers(headers: dict[str, str | bytes]) -> dict[str, str]:
    """The request headers as httpx's types name them: httpx takes a bytes value (Last-Event-ID, UTF-8) at run
    time, but its `HeaderTypes` has no mapping that mixes str and bytes values."""
    return cast("dict[str, str]", headers)


_HAS_TIMEOUT_CM = hasattr(asyncio, "timeout")


# --- sync -----------------------------------------------------------------------------------------


class EventStream(_Base):
    """A streamed HTTP request read with `httpx.Client` (sync).

    Nothing happens until `open()` (called by `with` or by the first iteration): it sends the request
    and raises `BadStatus` for a non-2xx answer. Iterate to get `TimedEvent`s; see the module docstring
    for how the iteration ends and for the keyword parameters.

    After the stream ends: `end_reason`, `error`, `mid_event`, `status`, `headers`, `last_event_id`,
    `retry_ms`, the counts `events_received`, `bytes_received`, `chunks_received`, the `time.perf_counter()`
    values `started_at`, `headers_at`, `first_byte_at`, `last_byte_at`, `first_event_at`, `last_event_at`;
    with keep="all" also `events` (all `TimedEvent`s), `raw` (all bytes) and `chunks` (time and size of
    each network read).
    """

    def __init__(
        self,
        url: str,
        json: Any = None,
        *,
        client: httpx.Client | None = None,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
        last_event_id: str | None = None,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        deadline: float | None = None,
        idle_timeout: float | None = None,
        is_content: Callable[[SSEEvent], bool] | None = None,
        parser: SSEParser | None = None,
        keep: Keep = "all",
    ) -> None:
        super().__init__(
            url,
            json,
            method=method,
            headers=headers,
            last_event_id=last_event_id,
            read_timeout=read_timeout,
            connect_timeout=connect_timeout,
            deadline=deadline,
            idle_timeout=idle_timeout,
            is_content=is_content,
            parser=parser,
            keep=keep,
        )
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
        if self.deadline is not None:  # the deadline covers the wait for the headers: watch the socket at once
            _on_connect(request, self._arm_socket)
        self.started_at = time.perf_counter()
        try:
            response = self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            self._stop_watchdog()
            self._close_client()
            raise self._translate(exc, _OPENING) from exc
        except BaseException:
            self._stop_watchdog()
            self._close_client()
            raise
        self._response = response
        if not self._opened(response):
            try:
                content = _read_capped_sync(response)
            except httpx.HTTPError:
                content = b""
            self._release()
            raise self._http_error(response, content)
        if self.deadline is not None:
            self._arm_watchdog(response)
        return self

    def _arm_watchdog(self, response: httpx.Response) -> None:
        """Enforce the deadline even while a read is blocked: shut the socket down when time is up (armed when
        the socket connected, if this stream connected it; else now)."""
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            self._arm_socket(sock)

    def _arm_socket(self, sock: Any) -> None:
        if self._watchdog is not None or self.deadline is None:
            return
        start = self.started_at if self.started_at is not None else time.perf_counter()
        remaining = max(0.0, start + self.deadline - time.perf_counter())

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
            for chunk in _pieces(self._response):
                if not chunk:
                    continue
                if self._deadline_hit:
                    self._check_deadline()
                yield from self.take(chunk, time.perf_counter())
                if self.end_reason is Ending.CANCELLED:
                    return
                if self.pending is not None:
                    raise self.pending
                self._check_deadline()
            if self._deadline_hit:
                self._check_deadline()
            self.finish_clean(time.perf_counter())
        except httpx.StreamClosed:
            return  # close() was called while iterating: end_reason is CANCELLED
        except httpx.HTTPError as exc:
            if self.end_reason is Ending.CANCELLED:
                return
            raise self._translate(exc, _READING) from exc
        finally:
            if self.end_reason is None:  # the loop was abandoned (break without `with`): that is a cancel
                self.close()
            elif self.end_reason is not Ending.CANCELLED:
                self._release()

    def read_all(self) -> list[TimedEvent]:
        """Iterate to the end and return every event (raises like iteration does).

        With keep="none" the list is built here, for this call only: the stream itself keeps nothing."""
        events = list(self)
        return self.events if self.keep == "all" else events

    def close(self) -> None:
        """Cancel: close the connection now (end_reason CANCELLED unless it had already ended)."""
        self.cancel()
        self._release()

    def _release(self) -> None:
        self._stop_watchdog()
        if self._response is not None:
            self._response.close()
        self._close_client()

    def _stop_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            if self._watchdog is not threading.current_thread():
                self._watchdog.join()
            self._watchdog = None

    def _close_client(self) -> None:
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None


def connect_trace(
    callback: Callable[[Any], None], previous: Callable[[str, dict[str, Any]], None] | None = None
) -> Callable[[str, dict[str, Any]], None]:
    """An httpx `trace` extension that calls `callback(socket)` the moment httpcore has connected the request's
    TCP socket (then `previous`, a trace already set), so a deadline can be enforced before any response byte:
    a server that drips its header bytes outlasted every per-read timeout. A request sent on a pooled
    connection connects nothing, and the callback is not called."""

    def trace(name: str, info: dict[str, Any]) -> None:
        if name == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                callback(sock)
        if previous is not None:
            previous(name, info)

    return trace


class SocketDeadline:
    """Shut a request's socket down `seconds` from now, once it has connected (`connect_trace`): what ends a
    server that drips its header bytes, or streams for ever, whatever the per-read timeouts say.

    Give `hook` to an httpx client as a request event hook (`event_hooks={"request": [deadline.hook]}`,
    which also reaches the clients the openai SDK is given), or `trace` as a request's `trace` extension.
    `fired` says whether it went off; `cancel()` (always, when done) stops and joins its timer.
    """

    def __init__(self, seconds: float) -> None:
        self.at = time.perf_counter() + seconds
        self.fired = False
        self.trace = connect_trace(self._arm)
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()

    def hook(self, request: httpx.Request) -> None:
        request.extensions["trace"] = connect_trace(self._arm, request.extensions.get("trace"))

    def _arm(self, sock: Any) -> None:
        def fire() -> None:
            self.fired = True
            with contextlib.suppress(OSError):
                sock.shutdown(2)  # SHUT_RDWR: a blocked read returns at once

        timer = threading.Timer(max(0.0, self.at - time.perf_counter()), fire)
        timer.daemon = True
        with self._lock:
            self._timers.append(timer)
        timer.start()

    def cancel(self) -> None:
        with self._lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()
            if timer is not threading.current_thread():
                timer.join()


def _on_connect(request: httpx.Request, callback: Callable[[Any], None]) -> None:
    request.extensions["trace"] = connect_trace(callback, request.extensions.get("trace"))


def _decoder(response: httpx.Response, limit: int | None) -> BoundedDecoder | None:
    """The bounded decoder of the response's Content-Encoding, or None for a coding streamlab does not decode
    (`br` or `zstd` with their packages installed): httpx then decodes it, a read at a time."""
    try:
        return BoundedDecoder(response.headers.get("content-encoding"), limit)
    except EncodingError:
        return None


def iter_decoded(response: httpx.Response, decoder: BoundedDecoder) -> Iterator[bytes]:
    """The body's raw bytes through `decoder` (`streamlab.core.decompress`), a network read at a time, until its
    limit: the one bounded-decoding loop of every reader of an httpx body (the client, `streamlab check`, the
    relay). A corrupt coding raises `EncodingError`."""
    for raw in response.iter_raw():
        yield from decoder.feed(raw)
        if decoder.exceeded:
            return


async def aiter_decoded(response: httpx.Response, decoder: BoundedDecoder) -> AsyncGenerator[bytes, None]:
    """`iter_decoded`, for an async response."""
    async for raw in response.aiter_raw():
        for piece in decoder.feed(raw):
            yield piece
        if decoder.exceeded:
            return


def _pieces(response: httpx.Response, limit: int | None = None) -> Iterator[bytes]:
    """The body, decoded a bounded piece at a time (at most `limit` bytes in all); a corrupt coding is httpx's
    `DecodingError`, as it was when httpx decoded."""
    decoder = _decoder(response, limit)
    if decoder is None:
        yield from response.iter_bytes()
        return
    try:
        yield from iter_decoded(response, decoder)
    except EncodingError as exc:
        raise httpx.DecodingError(str(exc)) from exc


async def _apieces(response: httpx.Response, limit: int | None = None) -> AsyncGenerator[bytes, None]:
    """`_pieces`, for an async response."""
    decoder = _decoder(response, limit)
    if decoder is None:
        async for chunk in response.aiter_bytes():
            yield chunk
        return
    pieces = aiter_decoded(response, decoder)
    try:
        async for piece in pieces:
            yield piece
    except EncodingError as exc:
        raise httpx.DecodingError(str(exc)) from exc
    finally:
        await pieces.aclose()


def _read_capped_sync(response: httpx.Response) -> bytes:
    """An error body, at most `MAX_ERROR_BODY_BYTES` of it after decoding."""
    out = bytearray()
    for chunk in _pieces(response, MAX_ERROR_BODY_BYTES):
        out += chunk
    return bytes(out)


# --- async ----------------------------------------------------------------------------------------

_T = TypeVar("_T")


class AsyncEventStream(_Base):
    """The same stream read with `httpx.AsyncClient`: `async with`, `async for`, `await aclose()`.

    The deadline is enforced around every read with `asyncio.timeout` (`wait_for` before Python 3.11),
    so a stalled server cannot hold the caller past it. Keywords as for `EventStream`.
    """

    def __init__(
        self,
        url: str,
        json: Any = None,
        *,
        client: httpx.AsyncClient | None = None,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
        last_event_id: str | None = None,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        deadline: float | None = None,
        idle_timeout: float | None = None,
        is_content: Callable[[SSEEvent], bool] | None = None,
        parser: SSEParser | None = None,
        keep: Keep = "all",
    ) -> None:
        super().__init__(
            url,
            json,
            method=method,
            headers=headers,
            last_event_id=last_event_id,
            read_timeout=read_timeout,
            connect_timeout=connect_timeout,
            deadline=deadline,
            idle_timeout=idle_timeout,
            is_content=is_content,
            parser=parser,
            keep=keep,
        )
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
            self._deadline_hit = self._deadline_hit or isinstance(exc, asyncio.TimeoutError)
            raise self._translate(exc, _OPENING) from exc
        self._response = response
        if not self._opened(response):
            try:
                content = await _read_capped_async(response)
            except httpx.HTTPError:
                content = b""
            await self._release()
            raise self._http_error(response, content)
        return self

    async def _with_deadline(self, awaitable: Awaitable[_T]) -> _T:
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
        chunks = _apieces(self._response)
        try:
            while True:
                try:
                    chunk = await self._with_deadline(chunks.__anext__())
                except StopAsyncIteration:
                    break
                except asyncio.TimeoutError as exc:
                    self._deadline_hit = True
                    raise self._translate(exc, _READING) from exc
                if not chunk:
                    continue
                for timed in self.take(chunk, time.perf_counter()):
                    yield timed
                if self.end_reason is Ending.CANCELLED:
                    return
                if self.pending is not None:
                    raise self.pending
                self._check_deadline()
            self.finish_clean(time.perf_counter())
        except httpx.StreamClosed:
            return
        except httpx.HTTPError as exc:
            if self.end_reason is Ending.CANCELLED:
                return
            raise self._translate(exc, _READING) from exc
        finally:
            try:
                await chunks.aclose()
            except (httpx.HTTPError, RuntimeError):
                pass
            if self.end_reason is None:  # the loop was abandoned (break without `async with`): a cancel
                await self.aclose()
            elif self.end_reason is not Ending.CANCELLED:
                await self._release()

    async def read_all(self) -> list[TimedEvent]:
        """Iterate to the end and return every event (raises like iteration does); see `EventStream.read_all`."""
        events = [timed async for timed in self]
        return self.events if self.keep == "all" else events

    async def aclose(self) -> None:
        """Cancel: close the connection now (end_reason CANCELLED unless it had already ended)."""
        self.cancel()
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
    """`_read_capped_sync`, for an async response."""
    out = bytearray()
    async for chunk in _apieces(response, MAX_ERROR_BODY_BYTES):
        out += chunk
    return bytes(out)
