"""The one upstream engine under the relay and the gateway: read a body, race the client and the stop (I/O layer).

Both servers do the same thing between an upstream's response and their client: take the next chunk as soon
as it arrives, notice at once when the client has gone or the server is stopping, wake up when a keep-alive
or the read timeout is due, and say how the body ended as an `Ending`. That machinery lives here, once:

* `UpstreamReader(response, watch=..., stop=...)` reads the body on one long-lived task per stream (not a
  new task and an `asyncio.wait` per chunk, which cost 44 us a chunk and a third of the relay's
  throughput) and hands out `Read` items: `CHUNK` with the bytes, `END` with the `Ending` and a detail,
  `GONE` (the client left), `STOP` (the server is stopping) or `IDLE` (the wait the caller asked for passed).
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
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.requests import Request
from starlette.types import Receive

from streamlab.core.endings import Ending
from streamlab.core.words import Word

__all__ = ["Read", "Item", "UpstreamReader", "ending_of", "describe_break", "connect_failure", "disconnected",
           "cancel_all", "request_facts", "FORWARD_REQUEST", "FORWARD_RESPONSE", "STREAM_HEADERS",
           "forwarded_response_headers", "MAX_QUEUED"]

FORWARD_REQUEST = ("authorization", "content-type", "accept", "last-event-id", "openai-organization",
                   "openai-project", "openai-beta", "idempotency-key", "user-agent")
"""Request headers that go upstream unchanged (everything else, cookies and hop-by-hop headers among them, stays)."""
FORWARD_RESPONSE = ("retry-after", "retry-after-ms", "x-request-id", "openai-processing-ms", "openai-version")
"""Upstream response headers passed back (with every `x-ratelimit-*`): what a client's retry logic reads."""
STREAM_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                  (b"x-accel-buffering", b"no")]
"""The head of every relayed stream: no caching, and no buffering by an nginx in front."""
MAX_QUEUED = 64
"""Chunks read ahead of a slow client before the upstream read pauses."""


def forwarded_response_headers(headers: httpx.Headers) -> dict[str, str]:
    """The upstream response headers a client's retry logic reads (`FORWARD_RESPONSE`, `x-ratelimit-*`)."""
    return {k: v for k, v in headers.items() if k in FORWARD_RESPONSE or k.startswith("x-ratelimit-")}


class Read(Word):
    """What `UpstreamReader.next` hands out."""

    CHUNK = "chunk"  # bytes from the upstream
    END = "end"      # the body ended: see `Item.ending` and `Item.detail`
    GONE = "gone"    # the client closed its connection
    STOP = "stop"    # the server is stopping
    IDLE = "idle"    # nothing happened within the wait asked for


@dataclass(frozen=True)
class Item:
    """One thing that happened while reading: its kind, the bytes of a chunk, how the body ended, and when."""

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


async def cancel_all(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel tasks and wait until they have finished, whatever they raise (results are consumed, so a task
    that finished with an exception nobody needs is not logged)."""
    real = [t for t in tasks if t is not None]
    for t in real:
        t.cancel()
    for t in real:
        with contextlib.suppress(BaseException):
            await t


def request_facts(request: Request, body: bytes) -> tuple[str | None, bool]:
    """The request's model (for the summary) and whether it asked for a stream."""
    if request.method == "GET":
        return None, request.query_params.get("stream", "").lower() == "true"
    try:
        obj = json.loads(body) if body else None
    except ValueError:
        return None, False
    if not isinstance(obj, dict):
        return None, False
    model = obj.get("model")
    return (model if isinstance(model, str) else None), obj.get("stream") is True


class UpstreamReader:
    """One upstream body, read by one task for the stream's whole life, raced against the client and the stop.

    `watch` finishes when the client leaves, `stop` when the server stops; `clock` stamps each item. Call
    `next(timeout)` for the next `Item`; `close()` (always, in a `finally`) cancels the read and closes the
    response, which is how the upstream learns its client has gone. `swap(response)` goes on with another
    response (a resumed stream). Priority when several things are ready: the client gone, then queued
    items in order, then the stop.
    """

    def __init__(self, response: httpx.Response, *, watch: asyncio.Future[Any], stop: asyncio.Future[Any],
                 clock: Callable[[], float] = time.perf_counter, max_queued: int = MAX_QUEUED) -> None:
        self.response = response
        self.watch, self.stop = watch, stop
        self.clock = clock
        self.max_queued = max_queued
        self._items: collections.deque[Item] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._space: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()
        watch.add_done_callback(self._wake)
        stop.add_done_callback(self._wake)
        self._task: asyncio.Task[None] | None = self._loop.create_task(self._read(response))

    async def _read(self, response: httpx.Response) -> None:
        try:
            async for chunk in response.aiter_raw():
                self._push(Item(Read.CHUNK, self.clock(), chunk))
                if len(self._items) >= self.max_queued:  # the caller is behind: wait for it (backpressure)
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

    async def next(self, timeout: float | None) -> Item:
        """The next item: wait at most `timeout` seconds (None: no limit) before an `IDLE` one."""
        if self.watch.done():
            return Item(Read.GONE, self.clock())
        if not self._items and not self.stop.done():
            waiter = self._waiter = self._loop.create_future()
            timer = None if timeout is None else self._loop.call_later(max(timeout, 0.0), self._wake)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            if self.watch.done():
                return Item(Read.GONE, self.clock())
        if self._items:
            item = self._items.popleft()
            space = self._space
            if space is not None and not space.done() and len(self._items) < self.max_queued:
                space.set_result(None)
            return item
        if self.stop.done():
            return Item(Read.STOP, self.clock())
        return Item(Read.IDLE, self.clock())

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
        await cancel_all(task)
        self._items.clear()
        await self.response.aclose()

    async def swap(self, response: httpx.Response) -> None:
        """Go on reading from another response (a resumed stream), closing this one."""
        await self.close()
        self.response = response
        self._task = self._loop.create_task(self._read(response))
