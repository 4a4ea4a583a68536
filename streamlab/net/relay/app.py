"""The reference streaming relay: a Starlette app under uvicorn that forwards SSE with httpx (I/O layer).

A relay is the backend most people end up writing in front of a model API: the browser or the SDK talks to
it, it talks to the upstream. This one keeps the five rules of `streamlab.core.relay.stream.REQUIREMENTS`:

1. It forwards each upstream chunk the moment it arrives (never a whole event held back), and then the pure
   `RelayedStream` parses it for the running summary (a burst of chunks in one go).
2. While it streams it watches the client's side of the connection (ASGI `http.disconnect`); when the client
   leaves it cancels the upstream read and closes the upstream response at once, so the upstream sees its
   client go away (the stand-in records "client_gone").
3. After `keepalive` seconds with nothing sent it writes a keep-alive comment, where `RelayedStream.keepalive`
   says one cannot change the events (never inside a line; no blank line inside an event).
4. When the upstream dies (cut, reset, an error inside the 200 stream, `read_timeout` seconds without a
   byte) it ends the downstream body cleanly after a marked final event the official SDK raises on.
5. It writes one JSON summary line per stream (`on_summary`, `.summaries`; `streamlab relay` prints them), and
   one per request whose body it cannot read (not a JSON object, or nested too deeply to tell).

Routes, all under `/v1` and forwarded to the upstream base URL plus the rest of the path and the query:
`POST /v1/chat/completions`, `POST /v1/responses`, `GET /v1/responses/{id}` (a background response's stream)
and `POST /v1/responses/{id}/cancel`. The request body and the headers that matter (Authorization,
Content-Type, Last-Event-ID, OpenAI-*) go upstream unchanged. A non-2xx upstream status comes back as is, with
its JSON body and its Retry-After headers (the SDK's retry logic reads them). Streams go out with
`Cache-Control: no-cache` and `X-Accel-Buffering: no`, so proxies in front (nginx) do not buffer them. If the
upstream cannot be reached, the client gets a 502; if it sends no status within `read_timeout`, a 504; both
in the OpenAI error shape.

From Python, `Relay(upstream=..., keepalive=..., capture=...)` runs it on a background thread (in a notebook,
`serve_relay(...)` does the same and stops the relay a previous call started):

    with Relay(upstream=standin.base_url, keepalive=0.5) as relay:
        client = openai.OpenAI(base_url=relay.base_url, api_key="...")
        ...
        relay.summaries          # one dict per finished stream

`capture=DIR` writes each stream's raw upstream bytes as `NAME.sse` plus `NAME.json` in the fixture format,
so a real stream can become a test fixture (`streamlab.core.harness.fixtures.load_fixture(NAME, DIR)`).

What a hostile client or upstream can make it hold is bounded (issue 25): a request body of `max_body_bytes`
(16 MiB; a 413 past it, a 408 past 30 s), a request head within 10 s and at most `max_connections` open
connections (`streamlab.net.relay.serving.GuardedH11`), a reply that is not a stream of `MAX_REPLY_BYTES`
decoded bytes (a 502 past it), the model name in a summary of 256 characters, the last `max_records`
summaries. An exception nothing expected is an `InternalError`: a 502, or the marked final event, and its
summary line, never a bare 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from streamlab.core.endings import Ending
from streamlab.core.relay.pacing import Due, Pacing
from streamlab.core.relay.stream import (
    MAX_UNPARSED,
    RelayedStream,
    capture_name,
    capture_record,
    dialect_of,
    summary_line,
)
from streamlab.core.sse import is_event_stream
from streamlab.net.relay.serving import MAX_RECORDS, PROBE_GAP, ServedApp, half_closed
from streamlab.net.relay.upstream import (
    MAX_REQUEST_BYTES,
    STREAM_HEADERS,
    Read,
    UpstreamReader,
    cancel_all,
    connect_failure,
    disconnected,
    forwarded_request_headers,
    forwarded_response_headers,
    internal_error,
    json_reply,
    probe,
    read_reply,
    read_request_body,
    refuse_path,
    request_facts,
)
from streamlab.net.slot import Slot

__all__ = [
    "Relay",
    "RelayConfig",
    "build_app",
    "serve_relay",
    "stop_relay",
    "DEFAULT_KEEPALIVE",
    "DEFAULT_READ_TIMEOUT",
]

DEFAULT_KEEPALIVE = 15.0
"""Seconds of silence before a keep-alive comment (proxies commonly drop connections idle for 30-60 s)."""
DEFAULT_READ_TIMEOUT = 60.0
"""Seconds without a byte from the upstream after which the relay gives up on it."""


@dataclass(frozen=True)
class RelayConfig:
    """What a relay needs to know: where the upstream is and how patient to be.

    `upstream` is the base URL the requests go to (e.g. `http://127.0.0.1:8000/v1`; the relay's `/v1/...` paths
    are appended after it). `keepalive` is the silence, in seconds, after which a keep-alive comment goes
    out (None: never). `read_timeout` is how long the upstream may send nothing before the relay gives up
    (for the status line too). `capture` is a folder for raw captures (None: none). `on_summary` is called
    with each summary dict, on the server's thread. `max_body_bytes` bounds a request body (a 413 past it).
    """

    upstream: str
    keepalive: float | None = DEFAULT_KEEPALIVE
    read_timeout: float = DEFAULT_READ_TIMEOUT
    capture: Path | None = None
    on_summary: Callable[[dict[str, Any]], None] | None = None
    max_body_bytes: int = MAX_REQUEST_BYTES

    def __post_init__(self) -> None:
        if not self.upstream.startswith(("http://", "https://")):
            raise ValueError(f"upstream must be an http:// or https:// base URL, got {self.upstream!r}")
        if self.keepalive is not None and self.keepalive <= 0:
            raise ValueError(f"keepalive must be a positive number of seconds or None, got {self.keepalive!r}")
        if self.read_timeout <= 0:
            raise ValueError(f"read_timeout must be a positive number of seconds, got {self.read_timeout!r}")


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {"error": {"message": f"relay: {message}", "type": "relay_error", "param": None, "code": code}}
    return json_reply(body, status, headers)


class _App:
    """The relay's request handling: one instance per running app, shared by all requests."""

    def __init__(self, config: RelayConfig) -> None:
        self.config = config
        self.client: httpx.AsyncClient | None = None
        self.stopping: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ids = itertools.count(1)
        self.clock = time.perf_counter

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        # No environment proxies (the upstream is whatever the user named); no read timeout of httpx's own:
        # the relay watches upstream silence itself, so it can send keep-alives meanwhile.
        timeout = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=30.0)
        self.client = httpx.AsyncClient(
            timeout=timeout, trust_env=False, limits=httpx.Limits(max_connections=None, max_keepalive_connections=20)
        )
        self.stopping = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        try:
            yield
        finally:
            await self.client.aclose()

    def upstream_url(self, request: Request) -> str:
        rest = request.url.path[len("/v1") :] if request.url.path.startswith("/v1") else request.url.path
        query = f"?{request.url.query}" if request.url.query else ""
        return self.config.upstream.rstrip("/") + rest + query

    async def handle(self, request: Request) -> Response:
        """Every route: forward the request, then stream, pass an error through, or explain what failed. An
        exception nothing expected becomes an `InternalError`: a 502 in the OpenAI shape and its summary line
        (it had been a bare-text 500 with no line at all)."""
        refused = refuse_path(request)
        if refused is not None:
            return refused
        started = self.clock()
        body = await read_request_body(request, self.config.max_body_bytes)
        if isinstance(body, Response):  # refused: too large, or too slow
            return body
        model, asked = request_facts(request, body)
        wants_stream = asked is not False  # a body nobody can read gets its line too (it had got none)
        rs = RelayedStream(
            dialect=dialect_of(request.url.path),
            model=model,
            started=started,
            stream_id=next(self.ids),
            route=f"{request.method} {request.url.path}",
        )
        try:
            return await self._forward(request, body, rs, wants_stream)
        except Exception as exc:
            detail = str(internal_error(exc, "the relay"))
            if not rs.done:
                rs.failed(Ending.BROKEN, self.clock(), status=502, detail=detail)
            return self._done(rs, wants_stream, _error(502, "relay_error", detail))

    async def _forward(self, request: Request, body: bytes, rs: RelayedStream, wants_stream: bool) -> Response:
        """Send the request upstream; a stream to pump, or the reply to pass on."""
        headers = forwarded_request_headers(request)
        assert self.client is not None
        upstream_request = self.client.build_request(
            request.method, self.upstream_url(request), content=body, headers=headers
        )
        watch = asyncio.ensure_future(disconnected(request.receive))
        sending = asyncio.ensure_future(self.client.send(upstream_request, stream=True))
        done, _ = await asyncio.wait(
            {sending, watch}, timeout=self.config.read_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if sending not in done:
            await cancel_all(sending, watch)
            if watch in done:
                rs.client_gone(self.clock(), "before the upstream answered")
                return self._done(rs, wants_stream, Response(status_code=499))
            rs.failed(Ending.READ_TIMEOUT, self.clock(), detail=f"no status within {self.config.read_timeout:g} s")
            return self._done(rs, wants_stream, _error(504, "upstream_timeout", rs.detail))
        try:
            upstream = sending.result()
        except Exception as exc:
            await cancel_all(watch)
            if not isinstance(exc, httpx.HTTPError):
                raise
            ending, detail = connect_failure(exc)
            rs.failed(ending, self.clock(), detail=detail)
            return self._done(
                rs,
                wants_stream,
                _error(502, "upstream_unreachable", f"cannot reach {self.config.upstream}: {rs.detail}"),
            )
        rs.status = upstream.status_code
        if upstream.status_code < 300 and is_event_stream(upstream.headers.get("content-type")):
            return _StreamOut(self, upstream, rs, watch)
        await cancel_all(watch)
        return await self._pass_through(upstream, rs, wants_stream)

    async def _pass_through(self, upstream: httpx.Response, rs: RelayedStream, wants_stream: bool) -> Response:
        """A reply that is not a stream (an error status, or a JSON answer): its status, JSON body and the
        headers a client's retry logic reads, as they came; read under `MAX_REPLY_BYTES` decoded bytes (past
        them, or unreadable, a 502 says so)."""
        reply = await read_reply(upstream, timeout=self.config.read_timeout)
        keep = forwarded_response_headers(upstream.headers)
        status = reply.status or upstream.status_code
        if status >= 300:
            why = f": {reply.problem[:200]}" if reply.status else ""
            rs.failed(
                Ending.HTTP_ERROR,
                self.clock(),
                status=status,
                detail=f"HTTP {upstream.status_code} passed through{why}",
            )
        else:
            rs.failed(Ending.NOT_EVENT_STREAM, self.clock(), status=status, detail="not a stream")
        return self._done(
            rs, wants_stream, Response(reply.payload, status_code=status, headers=keep, media_type="application/json")
        )

    def _done(self, rs: RelayedStream, wants_stream: bool, response: Response) -> Response:
        if wants_stream:
            self.finished(rs)
        return response

    def finished(self, rs: RelayedStream) -> None:
        """Write a finished stream's summary (and its capture)."""
        summary = rs.summary()
        if self.config.capture is not None and rs.keep_raw:
            name = capture_name(rs.stream_id, rs.model)
            folder = self.config.capture
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.sse").write_bytes(bytes(rs.raw))
            record = json.dumps(capture_record(bytes(rs.raw), summary), ensure_ascii=False, indent=2)
            (folder / f"{name}.json").write_text(record + "\n", encoding="utf-8")
        if self.config.on_summary is not None:
            self.config.on_summary(summary)


_CHUNK = Read.CHUNK  # read once: an enum member looked up through its class costs 0.2 us, per chunk here


class _StreamOut(Response):
    """The downstream half of one stream: an ASGI response that pumps upstream chunks through `RelayedStream`."""

    def __init__(self, app: _App, upstream: httpx.Response, rs: RelayedStream, watch: asyncio.Future[None]) -> None:
        self.app = app
        self.upstream = upstream
        self.rs = rs
        self.watch = watch
        self.status_code = 200
        self.background = None
        extra = [
            (k.encode("latin-1"), v.encode("latin-1")) for k, v in forwarded_response_headers(upstream.headers).items()
        ]
        self.raw_headers = STREAM_HEADERS + extra
        rs.keep_raw = app.config.capture is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app.stopping is not None
        stop = asyncio.ensure_future(self.app.stopping.wait())
        reader = UpstreamReader(
            self.upstream, watch=self.watch, stop=stop, clock=self.app.clock, probe=half_closed(scope)
        )
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            if await self._pump(send, reader):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception as exc:  # nothing expected it: the client still gets the marked final event
            await self._broken(send, str(internal_error(exc, "the relay's stream")))
        finally:
            if not self.rs.done:  # cancelled from outside (the server shutting down hard): nothing more is sent
                self.rs.upstream_ended(Ending.STOPPED, self.app.clock(), "the relay task was cancelled")
                self.rs.marked = False  # so the summary does not claim a final event the client never got
            await reader.close()  # the upstream read first, then the upstream response
            await cancel_all(self.watch, stop)
            self.app.finished(self.rs)

    async def _broken(self, send: Send, detail: str) -> None:
        """End the body after an internal error: the marked final event, then the end (the summary says
        `marked` only if it could be sent)."""
        final = self.rs.upstream_ended(Ending.BROKEN, self.app.clock(), detail)
        try:
            if final:
                await send({"type": "http.response.body", "body": final, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception:
            self.rs.marked = False

    async def _pump(self, send: Send, reader: UpstreamReader) -> bool:
        """Move bytes until the stream ends. Returns False when the client left (nothing more may be sent)."""
        rs, config = self.rs, self.app.config
        pacing = Pacing(keepalive=config.keepalive, read_timeout=config.read_timeout, now=self.app.clock())
        clock = self.app.clock
        while True:  # (a chunk already queued needs no wait worked out)
            item = await reader.next(None if reader.queued else pacing.wait(clock()))
            if item.kind is _CHUNK:  # the bytes first; the parse when no chunk waits (a burst in one go)
                out = rs.forward(item.data, item.at)
                pacing.upstream(item.at)
                if out:
                    await send({"type": "http.response.body", "body": out, "more_body": True})
                if not reader.queued or rs.unparsed >= MAX_UNPARSED:
                    rs.catch_up()
                continue
            if item.kind is Read.GONE:
                rs.client_gone(item.at, "the client closed the connection")
                return False
            if item.kind is Read.PROBE:  # a FIN after the request: gone, or only half-closed? Two writes tell
                # where a keep-alive would change the events (mid-line) nothing goes: the next bytes will tell
                await probe(
                    lambda: rs.keepalive(clock()),
                    lambda data: send({"type": "http.response.body", "body": data, "more_body": True}),
                    PROBE_GAP,
                )
                continue
            if item.kind is Read.END:
                assert item.ending is not None
                final = rs.upstream_ended(item.ending, item.at, item.detail)
                break
            if item.kind is Read.STOP:
                final = rs.upstream_ended(Ending.STOPPED, item.at)
                break
            due = pacing.due(item.at)
            if due is Due.READ_TIMEOUT:
                final = rs.upstream_ended(Ending.READ_TIMEOUT, item.at, f"nothing for {config.read_timeout:g} s")
                break
            if due is Due.KEEPALIVE:  # if a keep-alive is not safe now (mid-line), try again after another interval
                beat = rs.keepalive(item.at)
                if beat:
                    await send({"type": "http.response.body", "body": beat, "more_body": True})
        if final:
            await send({"type": "http.response.body", "body": final, "more_body": True})
        return True


def build_app(config: RelayConfig) -> Starlette:
    """The relay as an ASGI app (serve it with any ASGI server; `Relay` runs it under uvicorn)."""
    app = _App(config)
    routes = [
        Route("/v1/chat/completions", app.handle, methods=["POST"]),
        Route("/v1/responses", app.handle, methods=["POST"]),
        Route("/v1/responses/{response_id}", app.handle, methods=["GET"]),
        Route("/v1/responses/{response_id}/cancel", app.handle, methods=["POST"]),
    ]
    starlette = Starlette(routes=routes, lifespan=app.lifespan)
    starlette.state.relay = app
    return starlette


class Relay(ServedApp):
    """The reference relay on a background thread (uvicorn), as a context manager.

    `upstream` is the base URL to forward to; `keepalive`, `read_timeout`, `capture`, `max_body_bytes` as in
    `RelayConfig`; `on_summary` is called with each summary dict (on the server's thread). `base_url` is what a
    client uses (`http://127.0.0.1:PORT/v1`); `summaries` holds the last `max_records` finished streams'
    summaries, in order. `max_connections` caps open connections (default: half the file descriptors).
    Stopping ends streams still running (with the marked final event), closes every connection and joins
    the thread.
    """

    def __init__(
        self,
        upstream: str,
        *,
        keepalive: float | None = DEFAULT_KEEPALIVE,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        capture: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        on_summary: Callable[[dict[str, Any]], None] | None = None,
        max_body_bytes: int = MAX_REQUEST_BYTES,
        max_records: int = MAX_RECORDS,
        max_connections: int | None = None,
    ) -> None:
        self.config = RelayConfig(
            upstream,
            keepalive=keepalive,
            read_timeout=read_timeout,
            capture=None if capture is None else Path(capture),
            on_summary=self._record,
            max_body_bytes=max_body_bytes,
        )
        app = build_app(self.config)
        self._serve(
            app,
            app.state.relay,
            host=host,
            port=port,
            name="relay",
            on_record=on_summary,
            max_records=max_records,
            max_connections=max_connections,
        )

    @property
    def summaries(self) -> list[dict[str, Any]]:
        """The last `max_records` finished streams' summaries, in the order they finished."""
        return self._recorded()

    def wait_for_summaries(self, count: int, timeout: float = 5.0) -> bool:
        """Block until at least `count` summaries are written; False on timeout."""
        return self._wait_for_records(count, timeout)

    @staticmethod
    def summary_line(summary: dict[str, Any]) -> str:
        """A summary as the one JSON line `streamlab relay` prints."""
        return summary_line(summary)


_SLOT: Slot[Relay] = Slot()


def serve_relay(
    upstream: str,
    *,
    keepalive: float | None = DEFAULT_KEEPALIVE,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    capture: str | Path | None = None,
) -> Relay:
    """Start a relay for a notebook, first stopping the one a previous call started (re-running the cell
    never leaks a server; at most one per process, also stopped when the interpreter exits)."""
    return _SLOT.put(lambda: Relay(upstream, keepalive=keepalive, read_timeout=read_timeout, capture=capture).start())


def stop_relay() -> None:
    """Stop the relay `serve_relay()` started, if any."""
    _SLOT.clear()
