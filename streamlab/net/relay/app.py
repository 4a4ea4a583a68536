"""The reference streaming relay: a Starlette app under uvicorn that forwards SSE with httpx (I/O layer).

A relay is the backend most people end up writing in front of a model API: the browser or the SDK talks to
it, it talks to the upstream. This one keeps the five rules of `streamlab.core.relay.stream.REQUIREMENTS`:

1. It forwards each upstream chunk the moment it arrives (never a whole event held back), and the pure
   `RelayedStream` parses it for the running summary: each chunk until the first token (its arrival is the
   TTFT), then whenever something reads the summary (a keep-alive, the end) or a bound is reached, so the
   bytes never wait for the parse. A Chat answer's body ends at its `[DONE]`, its summary is caught up after.
   Every request is decided by `streamlab.core.relay.exchange.Exchange` (one upstream, no hold, no breaker)
   and carried out by `streamlab.net.relay.wire.ExchangeWire`, as the gateway's are.
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
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from streamlab.core.endings import Ending
from streamlab.core.relay.exchange import Exchange
from streamlab.core.relay.stream import (
    RelayedStream,
    capture_name,
    capture_record,
    dialect_of,
    summary_line,
)
from streamlab.net.relay.serving import MAX_RECORDS, ServedApp
from streamlab.net.relay.upstream import (
    MAX_REQUEST_BYTES,
    forwarded_request_headers,
    internal_error,
    json_reply,
    read_request_body,
    refuse_path,
    request_facts,
)
from streamlab.net.relay.wire import ExchangeWire, Hooks
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


def _error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> Response:
    body = {"error": {"message": f"relay: {message}", "type": "relay_error", "param": None, "code": code}}
    return json_reply(body, status, dict(headers) if headers else None)


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
            return self._exchange(request, body, rs, wants_stream)
        except Exception as exc:
            detail = str(internal_error(exc, "the relay"))
            if not rs.done:
                rs.failed(Ending.BROKEN, self.clock(), status=502, detail=detail)
            if wants_stream:
                self.finished(rs)
            return _error(502, "relay_error", detail)

    def _exchange(self, request: Request, body: bytes, rs: RelayedStream, wants_stream: bool) -> ExchangeWire:
        """The request's machine (one upstream, no hold, no breaker) and the hooks that carry it out."""
        assert self.client is not None and self.stopping is not None
        client, url = self.client, self.upstream_url(request)
        headers = cast("dict[str, str]", forwarded_request_headers(request))  # bytes values: httpx takes them
        rs.keep_raw = self.config.capture is not None
        machine = Exchange(
            upstreams=(self.config.upstream,),
            stream=rs,
            new_stream=lambda: rs,
            keepalive=self.config.keepalive,
            read_timeout=self.config.read_timeout,
            hold=False,
            label="relay",
        )

        def finished(wire: ExchangeWire) -> None:
            if wants_stream:
                self.finished(wire.machine.rs)

        hooks = Hooks(
            client=client,
            request=lambda name: client.build_request(request.method, url, content=body, headers=headers),
            clock=self.clock,
            stopping=self.stopping,
            read_timeout=self.config.read_timeout,
            error=_error,
            finished=finished,
            label="relay",
        )
        return ExchangeWire(machine, hooks)

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
