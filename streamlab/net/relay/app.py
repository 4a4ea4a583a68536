"""The reference streaming relay: a Starlette app under uvicorn that forwards SSE with httpx (I/O layer).

A relay is the backend most people end up writing in front of a model API: the browser or the SDK talks to
it, it talks to the upstream. This one keeps the five rules of `streamlab.core.relay.stream.REQUIREMENTS`:

1. It forwards each upstream chunk the moment it arrives (never a whole event held back) while the pure
   `RelayedStream` parses it for the running summary.
2. While it streams it watches the client's side of the connection (ASGI `http.disconnect`); when the client
   leaves it cancels the upstream read and closes the upstream response at once, so the upstream sees its
   client go away (the stand-in records "client_gone").
3. After `keepalive` seconds with nothing sent it writes a keep-alive comment, where `RelayedStream.keepalive`
   says one cannot change the events (never inside a line; no blank line inside an event).
4. When the upstream dies (cut, reset, an error inside the 200 stream, `read_timeout` seconds without a
   byte) it ends the downstream body cleanly after a marked final event the official SDK raises on.
5. It writes one JSON summary line per stream (`on_summary`, `.summaries`; `streamlab relay` prints them).

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
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from streamlab.core.endings import Ending
from streamlab.core.relay.stream import RelayedStream, capture_name, capture_record, dialect_of, summary_line

__all__ = ["Relay", "AppServer", "RelayConfig", "build_app", "serve_relay", "stop_relay", "DEFAULT_KEEPALIVE",
           "DEFAULT_READ_TIMEOUT"]

DEFAULT_KEEPALIVE = 15.0
"""Seconds of silence before a keep-alive comment (proxies commonly drop connections idle for 30-60 s)."""
DEFAULT_READ_TIMEOUT = 60.0
"""Seconds without a byte from the upstream after which the relay gives up on it."""

_FORWARD_REQUEST = ("authorization", "content-type", "accept", "last-event-id", "openai-organization",
                    "openai-project", "openai-beta", "idempotency-key", "user-agent")
_FORWARD_RESPONSE = ("retry-after", "retry-after-ms", "x-request-id", "openai-processing-ms", "openai-version")
_STREAM_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                   (b"x-accel-buffering", b"no")]


@dataclass(frozen=True)
class RelayConfig:
    """What a relay needs to know: where the upstream is and how patient to be.

    `upstream` is the base URL the requests go to (e.g. `http://127.0.0.1:8000/v1`; the relay's `/v1/...` paths
    are appended after it). `keepalive` is the silence, in seconds, after which a keep-alive comment goes
    out (None: never). `read_timeout` is how long the upstream may send nothing before the relay gives up
    (for the status line too). `capture` is a folder for raw captures (None: none). `on_summary` is called
    with each summary dict, on the server's thread.
    """

    upstream: str
    keepalive: float | None = DEFAULT_KEEPALIVE
    read_timeout: float = DEFAULT_READ_TIMEOUT
    capture: Path | None = None
    on_summary: Callable[[dict[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        if not self.upstream.startswith(("http://", "https://")):
            raise ValueError(f"upstream must be an http:// or https:// base URL, got {self.upstream!r}")
        if self.keepalive is not None and self.keepalive <= 0:
            raise ValueError(f"keepalive must be a positive number of seconds or None, got {self.keepalive!r}")
        if self.read_timeout <= 0:
            raise ValueError(f"read_timeout must be a positive number of seconds, got {self.read_timeout!r}")


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": f"relay: {message}", "type": "relay_error", "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


async def _disconnected(receive: Receive) -> None:
    """Return when the client has gone away (the request body has already been read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _cancel(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel tasks and wait until they have finished, whatever they raise (results are consumed, so a task
    that finished with an exception nobody needs, such as the upstream's StopAsyncIteration, is not logged)."""
    real = [t for t in tasks if t is not None]
    for t in real:
        t.cancel()
    for t in real:
        with contextlib.suppress(BaseException):
            await t


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
        self.client = httpx.AsyncClient(timeout=timeout, trust_env=False,
                                        limits=httpx.Limits(max_connections=None, max_keepalive_connections=20))
        self.stopping = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        try:
            yield
        finally:
            await self.client.aclose()

    def upstream_url(self, request: Request) -> str:
        rest = request.url.path[len("/v1"):] if request.url.path.startswith("/v1") else request.url.path
        query = f"?{request.url.query}" if request.url.query else ""
        return self.config.upstream.rstrip("/") + rest + query

    async def handle(self, request: Request) -> Response:
        """Every route: forward the request, then stream, pass an error through, or explain what failed."""
        started = self.clock()
        body = await request.body()
        model, wants_stream = _request_facts(request, body)
        rs = RelayedStream(dialect=dialect_of(request.url.path), model=model, started=started,
                           stream_id=next(self.ids), route=f"{request.method} {request.url.path}")
        headers = {k: v for k, v in request.headers.items() if k in _FORWARD_REQUEST}
        headers["accept-encoding"] = "identity"  # bytes are forwarded as they come: no compression to undo
        assert self.client is not None
        upstream_request = self.client.build_request(request.method, self.upstream_url(request),
                                                     content=body, headers=headers)
        watch = asyncio.ensure_future(_disconnected(request.receive))
        sending = asyncio.ensure_future(self.client.send(upstream_request, stream=True))
        done, _ = await asyncio.wait({sending, watch}, timeout=self.config.read_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if sending not in done:
            await _cancel(sending, watch)
            if watch in done:
                rs.client_gone(self.clock(), "before the upstream answered")
                return self._done(rs, wants_stream, Response(status_code=499))
            rs.failed(Ending.READ_TIMEOUT, self.clock(), detail=f"no status within {self.config.read_timeout:g} s")
            return self._done(rs, wants_stream, _error(504, "upstream_timeout", rs.detail))
        try:
            upstream = sending.result()
        except httpx.HTTPError as exc:
            await _cancel(watch)
            rs.failed(Ending.CONNECT_ERROR, self.clock(), detail=f"{type(exc).__name__}: {exc}")
            return self._done(rs, wants_stream,
                              _error(502, "upstream_unreachable", f"cannot reach {self.config.upstream}: {rs.detail}"))
        rs.status = upstream.status_code
        is_stream = upstream.headers.get("content-type", "").startswith("text/event-stream")
        if upstream.status_code < 300 and is_stream:
            return _StreamOut(self, upstream, rs, watch)
        await _cancel(watch)
        return await self._pass_through(upstream, rs, wants_stream)

    async def _pass_through(self, upstream: httpx.Response, rs: RelayedStream, wants_stream: bool) -> Response:
        """A reply that is not a stream (an error status, or a JSON answer): its status, JSON body and the
        headers a client's retry logic reads, as they came."""
        try:
            raw = await asyncio.wait_for(upstream.aread(), self.config.read_timeout)
        except (httpx.HTTPError, asyncio.TimeoutError) as exc:
            raw = f"the upstream's {upstream.status_code} body could not be read: {type(exc).__name__}".encode()
        finally:
            await upstream.aclose()
        keep = {k: v for k, v in upstream.headers.items() if k in _FORWARD_RESPONSE or k.startswith("x-ratelimit-")}
        try:
            obj = json.loads(raw)
        except ValueError:
            text = raw.decode("utf-8", "replace")[:2000]
            obj = {"error": {"message": text, "type": "upstream_error", "param": None, "code": None}}
        if upstream.status_code >= 300:
            rs.failed(Ending.HTTP_ERROR, self.clock(), status=upstream.status_code,
                      detail=f"HTTP {upstream.status_code} passed through")
        else:
            rs.failed(Ending.NOT_EVENT_STREAM, self.clock(), status=upstream.status_code, detail="not a stream")
        return self._done(rs, wants_stream, JSONResponse(obj, status_code=upstream.status_code, headers=keep))

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


def _request_facts(request: Request, body: bytes) -> tuple[str | None, bool]:
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


class _StreamOut(Response):
    """The downstream half of one stream: an ASGI response that pumps upstream chunks through `RelayedStream`."""

    def __init__(self, app: _App, upstream: httpx.Response, rs: RelayedStream, watch: asyncio.Future[None]) -> None:
        self.app = app
        self.upstream = upstream
        self.rs = rs
        self.watch = watch
        self.status_code = 200
        self.background = None
        extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in upstream.headers.items()
                 if k in _FORWARD_RESPONSE or k.startswith("x-ratelimit-")]
        self.raw_headers = _STREAM_HEADERS + extra
        rs.keep_raw = app.config.capture is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app.stopping is not None
        stop = asyncio.ensure_future(self.app.stopping.wait())
        chunks = self.upstream.aiter_raw()
        nxt: list[asyncio.Future[bytes] | None] = [None]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            if await self._pump(send, chunks, stop, nxt):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if not self.rs.done:  # cancelled from outside (the server shutting down hard)
                self.rs.upstream_ended(Ending.STOPPED, self.app.clock(), "the relay task was cancelled")
            await _cancel(nxt[0], self.watch, stop)  # the pending upstream read first, then close the upstream
            await self.upstream.aclose()
            self.app.finished(self.rs)

    async def _pump(self, send: Send, chunks: AsyncIterator[bytes], stop: asyncio.Future[bool],
                    nxt: list[asyncio.Future[bytes] | None]) -> bool:
        """Move bytes until the stream ends. Returns False when the client left (nothing more may be sent)."""
        rs, clock, config = self.rs, self.app.clock, self.app.config
        last_up = last_down = clock()
        final = b""
        while True:
            if nxt[0] is None:
                nxt[0] = asyncio.ensure_future(anext(chunks))
            now = clock()
            wait = last_up + config.read_timeout - now
            if config.keepalive is not None:
                wait = min(wait, last_down + config.keepalive - now)
            done, _ = await asyncio.wait({nxt[0], self.watch, stop}, timeout=max(wait, 0.0),
                                         return_when=asyncio.FIRST_COMPLETED)
            now = clock()
            if self.watch in done:
                rs.client_gone(now, "the client closed the connection")
                return False
            if nxt[0] in done:
                task, nxt[0] = nxt[0], None
                try:
                    chunk = task.result()
                except StopAsyncIteration:
                    final = rs.upstream_ended(Ending.COMPLETE, now)
                    break
                except httpx.HTTPError as exc:
                    final = rs.upstream_ended(Ending.BROKEN, now, _broken(exc))
                    break
                out = rs.upstream(chunk, now)
                last_up = last_down = now
                if out:
                    await send({"type": "http.response.body", "body": out, "more_body": True})
                continue
            if stop in done:
                final = rs.upstream_ended(Ending.STOPPED, now)
                break
            if now - last_up >= config.read_timeout:
                final = rs.upstream_ended(Ending.READ_TIMEOUT, now, f"nothing for {config.read_timeout:g} s")
                break
            if config.keepalive is not None and now - last_down >= config.keepalive:
                last_down = now  # if a keep-alive is not safe now (mid-line), try again after another interval
                beat = rs.keepalive(now)
                if beat:
                    await send({"type": "http.response.body", "body": beat, "more_body": True})
        if final:
            await send({"type": "http.response.body", "body": final, "more_body": True})
        return True


def _broken(exc: httpx.HTTPError) -> str:
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


class AppServer:
    """Any ASGI app under uvicorn on a background thread, as a context manager (the reference relay runs on
    one; so do the checker's tests' deliberately broken relays).

    It binds in `start()`, in the caller's thread, so a busy port fails there; `port` and `url` say where it
    listens. `stop()` asks uvicorn to exit (streams still running get `graceful` seconds, then are
    cancelled), joins the thread and closes the socket.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0, graceful: float = 2.0,
                 name: str = "asgi") -> None:
        self.app = app
        self.host = host
        self._requested_port = port
        self._graceful = graceful
        self._name = name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    def start(self) -> AppServer:
        if self._server is not None:
            raise RuntimeError("this server is already started")
        # IPPROTO_TCP, not 0: accepted sockets inherit the protocol, and asyncio turns Nagle's algorithm off
        # (TCP_NODELAY) only on sockets whose proto says TCP. With proto 0 a head and a chunk written back to back
        # waited for the client's delayed ACK: tens of milliseconds added to the time to first token.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._requested_port))
            sock.listen(256)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        config = uvicorn.Config(self.app, log_config=None, log_level="critical", access_log=False, lifespan="on",
                                timeout_graceful_shutdown=int(self._graceful) or 1, http="h11")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name=f"{self._name}:{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the {self._name} server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving and join the thread. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def __enter__(self) -> AppServer:
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("the server is not running; call start() or use it as a context manager")
        return int(self._sock.getsockname()[1])

    @property
    def url(self) -> str:
        """`http://HOST:PORT` (a wildcard host is given as 127.0.0.1)."""
        host = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}"


_Served = TypeVar("_Served", bound="ServedApp")


class ServedApp:
    """What the relay and the gateway share: an ASGI app served by `AppServer` on a background thread, as a
    context manager, and the finished streams' records (summaries, log lines) kept in order for callers.

    A subclass builds its app, then calls `_serve(app, state, ...)`, where `state` carries the app's event loop
    and `stopping` event once it runs; `_record` is what the app calls with each finished stream's record.
    """

    def _serve(self, app: Any, state: Any, *, host: str, port: int, name: str,
               on_record: Callable[[dict[str, Any]], None] | None) -> None:
        self._app = app
        self._state = state
        self._on_record = on_record
        self._records: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._server = AppServer(app, host=host, port=port, name=name)

    def _record(self, record: dict[str, Any]) -> None:
        with self._cond:
            self._records.append(record)
            self._cond.notify_all()
        if self._on_record is not None:
            self._on_record(record)

    def _recorded(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._records)

    def _wait_for_records(self, count: int, timeout: float) -> bool:
        end = time.monotonic() + timeout
        with self._cond:
            while len(self._records) < count:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def start(self: _Served) -> _Served:
        """Bind (a busy port fails here, in the caller's thread) and serve on a background thread."""
        self._server.start()
        return self

    def stop(self) -> None:
        """End running streams (each gets its marked final event), stop serving, join the thread. Idempotent."""
        if not self._server.running:
            return
        state = self._state
        if state.loop is not None and state.stopping is not None and not state.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop may close between the check and the call
                state.loop.call_soon_threadsafe(state.stopping.set)
        self._server.stop()

    def __enter__(self: _Served) -> _Served:
        if not self._server.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def base_url(self) -> str:
        """What a client uses as its base URL: `http://HOST:PORT/v1`."""
        return f"{self._server.url}/v1"


class Relay(ServedApp):
    """The reference relay on a background thread (uvicorn), as a context manager.

    `upstream` is the base URL to forward to; `keepalive`, `read_timeout`, `capture` as in `RelayConfig`;
    `on_summary` is called with each summary dict (on the server's thread). `base_url` is what a client
    uses (`http://127.0.0.1:PORT/v1`); `summaries` holds every finished stream's summary, in order.
    Stopping ends streams still running (with the marked final event), closes every connection and joins
    the thread.
    """

    def __init__(self, upstream: str, *, keepalive: float | None = DEFAULT_KEEPALIVE,
                 read_timeout: float = DEFAULT_READ_TIMEOUT, capture: str | Path | None = None,
                 host: str = "127.0.0.1", port: int = 0,
                 on_summary: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.config = RelayConfig(upstream, keepalive=keepalive, read_timeout=read_timeout,
                                  capture=None if capture is None else Path(capture), on_summary=self._record)
        app = build_app(self.config)
        self._serve(app, app.state.relay, host=host, port=port, name="relay", on_record=on_summary)

    @property
    def summaries(self) -> list[dict[str, Any]]:
        """Every finished stream's summary so far, in the order they finished."""
        return self._recorded()

    def wait_for_summaries(self, count: int, timeout: float = 5.0) -> bool:
        """Block until at least `count` summaries are written; False on timeout."""
        return self._wait_for_records(count, timeout)

    @staticmethod
    def summary_line(summary: dict[str, Any]) -> str:
        """A summary as the one JSON line `streamlab relay` prints."""
        return summary_line(summary)


_current: Relay | None = None
_current_lock = threading.Lock()


def serve_relay(upstream: str, *, keepalive: float | None = DEFAULT_KEEPALIVE,
                read_timeout: float = DEFAULT_READ_TIMEOUT, capture: str | Path | None = None) -> Relay:
    """Start a relay for a notebook, first stopping the one a previous call started (re-running the cell
    never leaks a server; at most one per process, also stopped when the interpreter exits)."""
    global _current
    with _current_lock:
        if _current is not None:
            _current.stop()
            _current = None
        _current = Relay(upstream, keepalive=keepalive, read_timeout=read_timeout, capture=capture).start()
        return _current


def stop_relay() -> None:
    """Stop the relay `serve_relay()` started, if any."""
    global _current
    with _current_lock:
        if _current is not None:
            _current.stop()
            _current = None


atexit.register(stop_relay)
