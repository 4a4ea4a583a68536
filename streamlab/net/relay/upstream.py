"""The one upstream engine under the relay and the gateway: read a body, race the client and the stop (I/O layer).

Both servers do the same thing between an upstream's response and their client: take the next chunk as soon
as it arrives, notice at once when the client has gone or the server is stopping, wake up when a keep-alive
or the read timeout is due, and say how the body ended as an `Ending`. That machinery lives here, once:

* `UpstreamReader(response, watch=..., stop=...)` reads the body on one long-lived task per stream (not a
  new task and an `asyncio.wait` per chunk, which cost 44 us a chunk and a third of the relay's
  throughput) and hands out `Read` items: `CHUNK` with the bytes, `END` with the `Ending` and a detail,
  `GONE` (the client left), `STOP` (the server is stopping) or `IDLE` (the wait the caller asked for passed;
  one timer per stream, moved only when a wait must end sooner than it would fire).
  It holds at most `max_queued` chunks ahead of the caller, so a slow client slows the upstream read
  (backpressure) instead of growing memory.
* `ending_of(exc)` and `describe_break(exc)`: an httpx error while reading a body, as an `Ending` and a few
  words (a reset is an RST, a close mid-body a FIN). Before the headers, `connect_failure` says the same.
* `disconnected(receive)`, `cancel_all(*tasks)`, `request_facts(...)` and the header lists both servers
  forward: the small plumbing they shared by copying.

The keep-alive and timeout arithmetic is pure (`streamlab.core.relay.pacing.Pacing`); whether a response is
an event stream is `streamlab.core.sse.is_event_stream`, the same rule the client applies.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive

from streamlab.core.decompress import BoundedDecoder
from streamlab.core.endings import Ending
from streamlab.core.errors import EncodingError, InternalError
from streamlab.core.safejson import read_json
from streamlab.core.untrusted import clip, json_text
from streamlab.core.words import Word

__all__ = [
    "Read",
    "Item",
    "UpstreamReader",
    "ending_of",
    "describe_break",
    "connect_failure",
    "disconnected",
    "cancel_all",
    "probe",
    "request_facts",
    "FORWARD_REQUEST",
    "FORWARD_RESPONSE",
    "STREAM_HEADERS",
    "forwarded_response_headers",
    "forwarded_request_headers",
    "internal_error",
    "MAX_QUEUED",
    "COALESCE_BYTES",
    "MAX_REPLY_BYTES",
    "UpstreamReply",
    "read_reply",
    "json_reply",
    "MAX_REQUEST_BYTES",
    "BODY_TIMEOUT",
    "read_request_body",
    "too_large",
    "refuse_path",
]

FORWARD_REQUEST = (
    "authorization",
    "content-type",
    "accept",
    "last-event-id",
    "openai-organization",
    "openai-project",
    "openai-beta",
    "idempotency-key",
    "user-agent",
)
"""Request headers that go upstream unchanged (everything else, cookies and hop-by-hop headers among them, stays)."""
FORWARD_RESPONSE = ("retry-after", "retry-after-ms", "x-request-id", "openai-processing-ms", "openai-version")
"""Upstream response headers passed back (with every `x-ratelimit-*`): what a client's retry logic reads."""
STREAM_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
"""The head of every relayed stream: no caching, and no buffering by an nginx in front."""
MAX_QUEUED = 64
"""Chunks read ahead of a slow client before the upstream read pauses."""
COALESCE_BYTES = 64 * 1024
"""At most this much of what queued up behind a chunk goes out with it in one write (`UpstreamReader.coalesce`)."""
MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""The largest request body the relay and the gateway take (a 413 past it): they hold a body whole to send it
upstream (and to the next upstream on failover), so a 300 MiB upload had peaked at 1 GB."""
MAX_REPLY_BYTES = 8 * 1024 * 1024
"""Decoded bytes read of an upstream reply that is not a stream (an error body, a JSON answer), counted after
every layer of Content-Encoding: past it the client gets a 502 saying so, never a body held whole (a 300 MB
error body had cost the gateway 1.5 GB, an 1.8 KB `gzip, gzip` bomb the relay 2.3 GB)."""


@dataclass(frozen=True)
class UpstreamReply:
    """An upstream reply that is not a stream, read: the bytes to pass on and its JSON (None if it is not JSON).

    `payload` is the upstream's body as it came when it is JSON (never re-encoded: its bytes are the
    upstream's), else a JSON error that says what came. `problem` is set when the body could not be passed on
    (unreadable, too large, not JSON) and `status` is then the one to send instead of the upstream's, or None.
    """

    payload: bytes
    obj: Any
    problem: str = ""
    status: int | None = None


async def read_reply(response: httpx.Response, *, timeout: float, limit: int = MAX_REPLY_BYTES) -> UpstreamReply:
    """Read a reply that is not a stream, decoded under `limit` bytes (`streamlab.core.decompress`) within
    `timeout` seconds, and close it."""
    status = response.status_code
    body = bytearray()
    problem, replace = "", None
    try:
        decoder = BoundedDecoder(response.headers.get("content-encoding"), limit)

        async def read() -> None:
            async for raw in response.aiter_raw():
                for piece in decoder.feed(raw):
                    body.extend(piece)
                if decoder.exceeded:
                    return

        await asyncio.wait_for(read(), timeout)
        if decoder.exceeded:
            problem, replace = f"the upstream's {status} body is over {limit} bytes: not passed on", 502
    except (httpx.HTTPError, asyncio.TimeoutError, EncodingError) as exc:
        problem = f"the upstream's {status} body could not be read: {type(exc).__name__}: {clip(str(exc), 200)}"
        replace = 502 if status < 300 else None
    finally:
        await response.aclose()
    if not problem:
        try:
            return UpstreamReply(bytes(body), read_json(body))
        except ValueError:  # not JSON (an HTML error page), or nested past Python's stack (`read_json`)
            problem = bytes(body[:2000]).decode("utf-8", "replace")
    error = {"error": {"message": problem, "type": "upstream_error", "param": None, "code": None}}
    return UpstreamReply(json.dumps(error).encode("ascii"), error, problem, replace)


BODY_TIMEOUT = 30.0
"""Seconds a client has, from its request head, to send the whole body (a 408 past it)."""


async def read_request_body(
    request: Request, limit: int = MAX_REQUEST_BYTES, timeout: float = BODY_TIMEOUT
) -> bytes | Response:
    """The request's body, or the refusal to send instead: a 413 when it is over `limit` bytes (said by its
    Content-Length before any byte is read, or found while reading: a chunked upload says nothing in advance),
    a 408 when it has not all arrived within `timeout` seconds (a body dripped a byte at a time)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and (len(length) > 18 or int(length) > limit):
        return too_large(limit)
    body = bytearray()

    async def read() -> bool:
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > limit:
                return False
        return True

    try:
        whole = await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        message = f"the request body did not arrive within {timeout:g} s ({len(body)} bytes came)"
        error = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": "timeout"}}
        return json_reply(error, 408, {"connection": "close"})
    return bytes(body) if whole else too_large(limit)


_RESPONSE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}")


def refuse_path(request: Request) -> Response | None:
    """A 404 for a response id that is not one (None for a fine request): `GET /v1/responses/..` had been
    forwarded as `UPSTREAM/responses/..`, which every HTTP client resolves to the upstream's `/v1` itself."""
    rid = request.path_params.get("response_id")
    if rid is None or (_RESPONSE_ID.fullmatch(rid) and rid.strip(".")):
        return None
    error = {
        "error": {
            "message": "no such response id",
            "type": "invalid_request_error",
            "param": "response_id",
            "code": "unknown_url",
        }
    }
    return json_reply(error, 404)


def too_large(limit: int) -> Response:
    """The 413 for a request body over `limit` bytes, in the OpenAI error shape."""
    return json_reply(
        {
            "error": {
                "message": f"the request body is over {limit} bytes",
                "type": "invalid_request_error",
                "param": None,
                "code": "request_too_large",
            }
        },
        413,
        {"connection": "close"},
    )


def json_reply(obj: Any, status: int, headers: dict[str, str] | None = None) -> Response:
    """A JSON response that always encodes (`json_text`: what a client chose, a lone surrogate included,
    cannot turn it into a 500)."""
    return Response(
        json_text(obj, separators=(",", ":")).encode("utf-8"),
        status_code=status,
        headers=headers,
        media_type="application/json",
    )


def internal_error(exc: Exception, where: str) -> InternalError:
    """An exception a relay or a gateway did not expect, as the tree's `InternalError` (its cause kept): the
    request it met is answered with an error and recorded, and the server goes on."""
    error = InternalError(f"internal error on {where}: {type(exc).__name__}: {clip(str(exc), 200)}")
    error.__cause__ = exc
    return error


def forwarded_request_headers(request: Request) -> dict[str, bytes]:
    """The request headers that go upstream (`FORWARD_REQUEST`), as the bytes the client sent: httpx encodes a
    `str` header as ASCII, so a key with a Latin-1 byte had made the relay answer a bare 500 (and the gateway
    blame its upstream for it)."""
    out = {}
    for raw_key, raw_value in request.headers.raw:
        key = raw_key.decode("latin-1").lower()
        if key in FORWARD_REQUEST:
            out[key] = raw_value
    out["accept-encoding"] = b"identity"  # bytes are forwarded as they come: no compression to undo
    return out


def forwarded_response_headers(headers: httpx.Headers) -> dict[str, str]:
    """The upstream response headers a client's retry logic reads (`FORWARD_RESPONSE`, `x-ratelimit-*`), their
    bytes as they came read as Latin-1: a value that is not Latin-1 text (UTF-8, say) goes back out byte for byte
    instead of failing to encode (it had made a gateway probe raise, and its breaker stay half-open)."""
    out: dict[str, str] = {}
    for raw_key, raw_value in headers.raw:
        key = raw_key.decode("latin-1").lower()
        if key in FORWARD_RESPONSE or key.startswith("x-ratelimit-"):
            out[key] = raw_value.decode("latin-1")
    return out


class Read(Word):
    """What `UpstreamReader.next` hands out."""

    CHUNK = "chunk"  # bytes from the upstream
    END = "end"  # the body ended: see `Item.ending` and `Item.detail`
    GONE = "gone"  # the client closed its connection
    STOP = "stop"  # the server is stopping
    IDLE = "idle"  # nothing happened within the wait asked for
    PROBE = "probe"  # the client shut its sending side: write a keep-alive twice to learn whether it is still there


class Item(NamedTuple):
    """One thing that happened while reading: its kind, the bytes of a chunk, how the body ended, and when.
    (A named tuple: one is made per upstream chunk, and a frozen dataclass costs several times as much.)"""

    kind: Read
    at: float
    data: bytes = b""
    ending: Ending | None = None
    detail: str = ""


def ending_of(exc: httpx.HTTPError) -> Ending:
    """How a body ended when httpx raised `exc` while reading it (after the headers)."""
    return Ending.READ_TIMEOUT if isinstance(exc, httpx.ReadTimeout) else Ending.BROKEN


def describe_break(exc: BaseException) -> str:
    """How the upstream connection broke, in a few words: a reset (RST) surfaces as a ReadError caused by
    ConnectionResetError, a close (FIN) mid-body as a RemoteProtocolError."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionResetError):
            return "reset by the upstream"
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, httpx.RemoteProtocolError):
        return "closed by the upstream before the end of the body"
    return f"{type(exc).__name__}: {exc}"[:200]


def connect_failure(exc: httpx.HTTPError) -> tuple[Ending, str]:
    """An httpx error before any response head: always CONNECT_ERROR, with what httpx said."""
    return Ending.CONNECT_ERROR, f"{type(exc).__name__}: {exc}"[:200]


async def disconnected(receive: Receive) -> None:
    """Return when the client has gone away (the request body has already been read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def probe(beat: Callable[[], bytes], write: Callable[[bytes], Awaitable[None]], gap: float) -> None:
    """Probe a client that shut its sending side: write `beat()` (a keep-alive, or b"" where one would change the
    events: then nothing) twice, `gap` seconds apart. A client that left resets the first write and the second
    fails, so the next read says GONE (`streamlab.net.relay.serving`); one that only half-closed reads two comments
    that change no event."""
    for wait in (gap, 0.0):
        data = beat()
        if not data:
            return
        await write(data)
        if wait:
            await asyncio.sleep(wait)


async def cancel_all(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel tasks and wait until they have finished, whatever they raise (results are consumed, so a task
    that finished with an exception nobody needs is not logged)."""
    real = [t for t in tasks if t is not None]
    for t in real:
        t.cancel()
    for t in real:
        with contextlib.suppress(BaseException):
            await t


def request_facts(request: Request, body: bytes) -> tuple[str | None, bool | None]:
    """The request's model (for the summary, clipped to `MAX_FIELD_CHARS`: a client chooses it, and a 5 MiB
    name kept in every summary grew the relay by 247 MB in 40 requests) and whether it asked for a stream
    (None: nobody can tell, the body is not a JSON object: not JSON, or nested past the recursion limit)."""
    if request.method == "GET":
        return None, request.query_params.get("stream", "").lower() == "true"
    try:
        obj = read_json(body) if body else None
    except ValueError:  # a body nested past the recursion limit is no model name either (`read_json`)
        return None, None
    if not isinstance(obj, dict):
        return None, None if body else False
    model = obj.get("model")
    return (clip(model) if isinstance(model, str) else None), obj.get("stream") is True


class UpstreamReader:
    """One upstream body, read by one task for the stream's whole life, raced against the client and the stop.

    `watch` finishes when the client leaves, `stop` when the server stops; `clock` stamps each item. Call
    `next(timeout)` for the next `Item`; `close()` (always, in a `finally`) cancels the read and closes the
    response, which is how the upstream learns its client has gone. `swap(response)` goes on with another
    response (a resumed stream). `probe`, when given, is the server's half-close future
    (`streamlab.net.relay.serving.half_closed`): once it is done, one `PROBE` item comes. Priority when several
    things are ready: the client gone, then the probe, then queued items in order, then the stop.
    """

    def __init__(
        self,
        response: httpx.Response,
        *,
        watch: asyncio.Future[Any],
        stop: asyncio.Future[Any],
        clock: Callable[[], float] = time.perf_counter,
        max_queued: int = MAX_QUEUED,
        probe: asyncio.Future[Any] | None = None,
    ) -> None:
        self.response = response
        self.watch, self.stop = watch, stop
        self.probe = probe
        self.clock = clock
        self.max_queued = max_queued
        self._items: collections.deque[Item] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._space: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None  # one timer, moved only when a wait ends sooner
        self._deadline = math.inf  # when the current wait ends (loop time)
        watch.add_done_callback(self._wake)
        stop.add_done_callback(self._wake)
        if probe is not None:
            probe.add_done_callback(self._wake)
        self._task: asyncio.Task[None] | None = self._loop.create_task(self._read(response))

    async def _read(self, response: httpx.Response) -> None:
        items, clock, chunk_kind, make = self._items, self.clock, Read.CHUNK, tuple.__new__
        try:
            async for chunk in response.aiter_raw():
                items.append(make(Item, (chunk_kind, clock(), chunk, None, "")))  # Item(...) without its Python __new__
                waiter = self._waiter
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
                if len(items) >= self.max_queued:  # the caller is behind: wait for it (backpressure)
                    self._space = self._loop.create_future()
                    await self._space
            self._push(Item(Read.END, self.clock(), ending=Ending.COMPLETE))
        except httpx.HTTPError as exc:
            self._push(Item(Read.END, self.clock(), ending=ending_of(exc), detail=describe_break(exc)))
        except Exception as exc:  # anything httpx did not wrap still ends this stream, never the server
            self._push(Item(Read.END, self.clock(), ending=Ending.BROKEN, detail=f"{type(exc).__name__}: {exc}"))

    def _push(self, item: Item) -> None:
        self._items.append(item)
        self._wake()

    def _wake(self, _: object = None) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _arm(self, timeout: float | None) -> None:
        """End the coming wait after `timeout` seconds. The timer is moved only when the wait must end sooner
        than it would fire (a wait, as a rule, ends later than the one before: a new timer per chunk cost
        more than a chunk's parsing); a timer that fires early finds the deadline later and waits on."""
        if timeout is None:
            self._deadline = math.inf
            return
        self._deadline = when = self._loop.time() + max(timeout, 0.0)
        timer = self._timer
        if timer is None or timer.when() > when:
            if timer is not None:
                timer.cancel()
            self._timer = self._loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._waiter is None or self._deadline == math.inf:
            return  # nobody waits for it: the next wait arms a timer again
        if self._loop.time() < self._deadline:
            self._timer = self._loop.call_at(self._deadline, self._on_timer)
        else:
            self._wake()

    @property
    def queued(self) -> int:
        """Items read and waiting for `next` (the caller is behind when this is not 0)."""
        return len(self._items)

    async def next(self, timeout: float | None) -> Item:
        """The next item: wait at most `timeout` seconds (None: no limit) before an `IDLE` one."""
        if self.watch.done():
            return Item(Read.GONE, self.clock())
        if self.probe is not None and self.probe.done():
            self.probe = None
            return Item(Read.PROBE, self.clock())
        items = self._items
        if not items and not self.stop.done():
            waiter = self._waiter = self._loop.create_future()
            self._arm(timeout)
            try:
                await waiter
            finally:
                self._waiter = None
            if self.watch.done():
                return Item(Read.GONE, self.clock())
            if self.probe is not None and self.probe.done():
                self.probe = None
                return Item(Read.PROBE, self.clock())
        if items:
            item = items.popleft()
            space = self._space
            if space is not None and not space.done() and len(items) < self.max_queued:
                space.set_result(None)
            return item
        if self.stop.done():
            return Item(Read.STOP, self.clock())
        return Item(Read.IDLE, self.clock())

    def coalesce(self, data: bytes, limit: int = COALESCE_BYTES) -> tuple[bytes, float | None]:
        """`data` (a chunk just taken) joined with the chunks queued right behind it, up to about `limit` bytes,
        and the arrival time of the last one joined (None: none was). A caller that fell behind sends what came
        in one write instead of one write per chunk: the same bytes, none of them later."""
        items = self._items
        parts, size, at = [data], len(data), None
        while items and size < limit:
            item = items[0]
            if item.kind is not Read.CHUNK:
                break
            items.popleft()
            parts.append(item.data)
            size += len(item.data)
            at = item.at
        if at is None:
            return data, None
        space = self._space
        if space is not None and not space.done() and len(items) < self.max_queued:
            space.set_result(None)
        return b"".join(parts), at

    async def drain(self, timeout: float) -> None:
        """Read what the upstream still sends after its terminal event (its end of body, as a rule), so that it
        sees a clean end too; bounded by `timeout`, and whatever comes is dropped."""
        end = self.clock() + timeout
        while (left := end - self.clock()) > 0:
            item = await self.next(left)
            if item.kind is not Read.CHUNK:
                return

    async def close(self) -> None:
        """Stop reading and close the response (idempotent)."""
        task, self._task = self._task, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await cancel_all(task)
        self._items.clear()
        await self.response.aclose()

    async def swap(self, response: httpx.Response) -> None:
        """Go on reading from another response (a resumed stream), closing this one."""
        await self.close()
        self.response = response
        self._task = self._loop.create_task(self._read(response))
