"""An ASGI app behind Starlette's GZipMiddleware in front of a streaming server: `GzipApp` (I/O layer).

Lab 13's ASGI case: a Python app (Starlette, FastAPI) that adds `GZipMiddleware` to compress its pages compresses
its event streams too, unless the middleware leaves them out. `GzipApp` is such an app: every request is forwarded to
`upstream` (asked for identity, so the middleware is what compresses) and streamed back through
`starlette.middleware.gzip.GZipMiddleware`, under uvicorn on a background thread (`streamlab.net.relay.serving`).

`compress_event_stream=False` (the default) keeps the middleware's own list of excluded media types, which in the
Starlette releases that have one (`exclude_content_types`) names `text/event-stream`: that exclusion is the fix,
made upstream after Kludex/starlette#2753. `True` empties the list, so the event stream is compressed as older
releases always did; `excludes_event_stream` says what the installed release does. How the compressed stream then
flows (each message flushed, or held until a buffer fills) depends on the release: lab 13 measures it rather than
assume. `serve_gzip_app()` holds one per process, as the other notebook helpers do.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from streamlab.core.proxy.base import LOOPBACK, Upstream, upstream_of
from streamlab.core.shapes import error_body
from streamlab.net.relay.serving import AppServer
from streamlab.net.slot import Slot

__all__ = ["GzipApp", "gzip_app", "serve_gzip_app", "stop_gzip_app", "MAX_REQUEST_BYTES"]

MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""The largest request body the app forwards (a larger one gets a 413)."""

_SKIPPED = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length", "host", "date"}
)
"""Headers that belong to one hop, never forwarded either way (the app sets its own)."""


def _middleware_options(compress_event_stream: bool) -> dict[str, Any]:
    """GZipMiddleware's keywords: the installed release's exclusions without text/event-stream when asked."""
    parameter = inspect.signature(GZipMiddleware.__init__).parameters.get("exclude_content_types")
    if parameter is None or not compress_event_stream:
        return {}
    return {"exclude_content_types": tuple(t for t in parameter.default if t != "text/event-stream")}


async def _body(request: Request) -> bytes | None:
    """The request body, or None when it is larger than MAX_REQUEST_BYTES."""
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > MAX_REQUEST_BYTES:
            return None
    return bytes(body)


def gzip_app(upstream: Upstream, *, compress_event_stream: bool = False, minimum_size: int = 500) -> Starlette:
    """The Starlette app: forward every request to `upstream`, stream the answer back through GZipMiddleware."""
    state: dict[str, httpx.AsyncClient] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(10.0, read=None)) as client:
            state["client"] = client
            yield

    async def forward(request: Request) -> Response:
        body = await _body(request)
        if body is None:
            return JSONResponse(error_body("request body too large", "invalid_request_error"), status_code=413)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIPPED | {"accept-encoding"}}
        url = upstream.origin + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        outgoing = state["client"].build_request(
            request.method, url, headers={**headers, "accept-encoding": "identity"}, content=body
        )
        try:
            answer = await state["client"].send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            return JSONResponse(error_body(f"upstream unreachable: {exc}", "server_error"), status_code=502)
        back: dict[str, str] = {}
        for k, v in answer.headers.multi_items():
            if k.lower() not in _SKIPPED:
                back[k.lower()] = f"{back[k.lower()]}, {v}" if k.lower() in back else v
        return StreamingResponse(
            answer.aiter_raw(), status_code=answer.status_code, headers=back, background=BackgroundTask(answer.aclose)
        )

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
    return Starlette(
        routes=[Route("/{path:path}", forward, methods=methods)],
        middleware=[
            Middleware(GZipMiddleware, minimum_size=minimum_size, **_middleware_options(compress_event_stream))
        ],
        lifespan=lifespan,
    )


class GzipApp:
    """An ASGI app with Starlette's GZipMiddleware on 127.0.0.1, forwarding to `upstream` (a URL), as a context
    manager: `base_url` is what a client is given (`http://127.0.0.1:PORT` plus the upstream URL's path)."""

    def __init__(
        self, upstream: str, *, compress_event_stream: bool = False, minimum_size: int = 500, port: int = 0
    ) -> None:
        self.upstream = upstream_of(upstream)
        self.compress_event_stream = compress_event_stream
        app = gzip_app(self.upstream, compress_event_stream=compress_event_stream, minimum_size=minimum_size)
        self._server = AppServer(app, host=LOOPBACK, port=port, name="gzip-app")

    @property
    def excludes_event_stream(self) -> bool:
        """Whether this app's GZipMiddleware leaves text/event-stream uncompressed (the installed release's
        exclusion list, kept unless `compress_event_stream`)."""
        parameter = inspect.signature(GZipMiddleware.__init__).parameters.get("exclude_content_types")
        return parameter is not None and not self.compress_event_stream and "text/event-stream" in parameter.default

    def start(self) -> GzipApp:
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving and join the thread. Idempotent."""
        self._server.stop()

    @property
    def running(self) -> bool:
        return self._server.running

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def base_url(self) -> str:
        return self._server.url + self.upstream.path

    def __enter__(self) -> GzipApp:
        return self if self.running else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_SLOT: Slot[GzipApp] = Slot()


def serve_gzip_app(upstream: str, *, compress_event_stream: bool = False, port: int = 0) -> GzipApp:
    """Start a GzipApp for a notebook, first stopping the one a previous call started, and return it."""
    return _SLOT.put(lambda: GzipApp(upstream, compress_event_stream=compress_event_stream, port=port).start())


def stop_gzip_app() -> None:
    """Stop the app `serve_gzip_app()` started, if any."""
    _SLOT.clear()
