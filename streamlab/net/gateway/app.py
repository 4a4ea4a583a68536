"""The gateway: the reference relay grown to several upstreams, a breaker each, fallback, logs and metrics (I/O layer).

The reference relay (`streamlab.net.relay.app`) forwards one client's stream from one upstream. A gateway does
the same in front of several upstreams given in order of preference, and adds what production needs:

* **A circuit breaker per upstream** (`streamlab.core.gateway.breaker.Breaker`). Before sending a request to an
  upstream the gateway asks its breaker; an open breaker means "skip it". Every attempt's result goes back
  to the breaker: 5xx, 429, 408 and transport failures count against the upstream, the request's own
  errors (400, 404...) and a departed client do not. The breakers read `clock` (any monotonic clock;
  tests and the lab pass one they move by hand, so a cool-down takes no real time).
* **Fallback** (`streamlab.core.gateway.fallback.decide`). The gateway holds each answer's bytes until its first
  event is complete, and sends nothing of it before. A failure in that window (an error status, no
  connection, a reset, a stall, a body that ends early, an error object as the first event) moves the
  request to the next upstream whose breaker allows it; the client never sees the failed attempt. Once the
  first event is sent the answer is committed: the rest is forwarded byte by byte as it arrives, exactly
  like the relay (keep-alives at line boundaries, a client that leaves closes the upstream). If the upstream
  then dies, a Responses background stream is resumed on the same upstream with `starting_after` when the
  cut fell between events; otherwise the stream ends with the relay's marked final event, and the SDK
  raises. A failover after the first event would splice two different answers, so it never happens.
* **A structured log line per request** (`streamlab.core.gateway.log.LOG_FIELDS`): the relay's summary plus
  request id, upstream chosen, attempts and what each said, ending, TTFT, total, tokens. It goes to
  `on_log`, to `Gateway.logs`, and to the `streamlab.gateway` logger at INFO level as one JSON line (the
  library configures no handler).
* **`GET /metrics`**, the Prometheus text format (`streamlab.net.gateway.metrics`): TTFT and total-time
  histograms, endings by kind and upstream, attempts by result, tokens, each breaker's state.

* **Credentials go only to the upstream they were configured for** (`CREDENTIALS`). An upstream can have
  its own API key (`Upstream(name, url, key=...)`, or `NAME=URL#ENV_VAR` read from the environment): it gets
  that key, never the client's. The client's own Authorization, OpenAI-Organization and OpenAI-Project go to
  the first upstream only (when it has no key of its own); a backup without a key gets no credentials at
  all, so failing over never hands the primary provider's key to another one.

Stored responses: `GET /v1/responses/{id}` and `POST /v1/responses/{id}/cancel` name a response that lives on
the upstream that created it, so the gateway remembers which upstream that was (for the last `HOMES` responses)
and sends those requests there only; an id it does not know goes to the upstreams in order.

Keep-alives before the first event: the response head is held too, so that an error status from an
upstream can still reach the client as that status. If the first event takes longer than `keepalive`, the
head goes out with a keep-alive comment (so proxies in front do not give up), and failover stays allowed
(the client holds no event yet); only a final failure can then no longer be a status: it becomes the
marked final event.

    with Gateway(["http://127.0.0.1:8000/v1", "backup=http://127.0.0.1:8001/v1"]) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="...")
        ...
        gw.logs              # one dict per finished request
        gw.metrics_text()    # the /metrics page
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from streamlab.core.gateway.breaker import Breaker, Health, Permit, history_text
from streamlab.core.gateway.log import log_line, log_record
from streamlab.core.relay.exchange import Failure
from streamlab.core.relay.stream import RelayedStream, capture_name, capture_record, dialect_of
from streamlab.core.retry import parse_retry_after
from streamlab.net.console import Outlet
from streamlab.net.gateway.exchange import GatewayCalls, exchange
from streamlab.net.gateway.metrics import CONTENT_TYPE, GatewayMetrics
from streamlab.net.relay.app import DEFAULT_KEEPALIVE, DEFAULT_READ_TIMEOUT
from streamlab.net.relay.serving import MAX_RECORDS, ServedApp
from streamlab.net.relay.upstream import (
    MAX_REQUEST_BYTES,
    forwarded_request_headers,
    forwarded_response_headers,
    read_request_body,
    refuse_path,
)
from streamlab.net.relay.wire import ExchangeWire
from streamlab.net.slot import Slot

__all__ = [
    "Upstream",
    "upstreams_from",
    "GatewayConfig",
    "Gateway",
    "build_gateway_app",
    "serve_gateway",
    "stop_gateway",
    "ManualClock",
    "DEFAULT_NAMES",
    "LOGGER",
    "HOMES",
    "CREDENTIALS",
    "MAX_BREAKER_WAIT",
]

LOGGER = logging.getLogger("streamlab.gateway")
"""Where the log lines go (INFO, one JSON object per message); streamlab adds no handler. The gateway hands
each line to a writer thread (`streamlab.net.console.Outlet`), so a handler that blocks (a stderr nobody reads)
never blocks the event loop; lines past its bounded queue are dropped, and a WARNING says how many."""


def _dropped_lines(count: int) -> str:
    return f"{count} gateway log line(s) dropped: the log handler did not keep up"


DEFAULT_NAMES = ("primary", "secondary", "tertiary")
"""Names given to upstreams listed without one (then upstream4, upstream5...)."""

HOMES = 10_000

MAX_BREAKER_WAIT = 300.0
"""The longest an upstream's `Retry-After` can keep its breaker open (seconds): it asked for ten years once."""
"""How many response ids the gateway remembers the upstream of (retrieve and cancel go there)."""

_NAMED = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]{0,39})=(.+)$")


@dataclass(frozen=True)
class Upstream:
    """One upstream: a short name (a metrics label and a log field), its base URL (e.g. `http://h:p/v1`), and
    the API key the gateway sends it (None: see `CREDENTIALS` for whose key, if any, it gets). The key is
    never shown in a repr."""

    name: str
    url: str
    key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"upstream {self.name!r}: the URL must start with http:// or https://, got {self.url!r}")
        if self.key is not None and (not self.key or not self.key.isascii() or not self.key.isprintable()):
            raise ValueError(f"upstream {self.name!r}: its API key must be printable ASCII and not empty")


CREDENTIALS = ("authorization", "openai-organization", "openai-project")
"""The request headers that say who pays, and the rule for where they go: credentials go only to the upstream
they were configured for. An upstream with its own key (`Upstream.key`; `NAME=URL#ENV_VAR` reads it from that
environment variable) gets `Authorization: Bearer KEY` and none of the client's credentials. The first upstream
(the primary), when it has no key of its own, gets the client's Authorization, OpenAI-Organization and
OpenAI-Project as they came: the client's key is for the primary provider. Every other upstream without a key
gets none of them: on failover the client's key for the primary must not reach the backup (it had)."""


def _key_from_env(name: str, variable: str) -> str:
    value = os.environ.get(variable)
    if not value:
        raise ValueError(f"upstream {name!r}: its API key's environment variable {variable} is not set")
    return value.strip()


def upstreams_from(specs: Sequence[str | Upstream]) -> tuple[Upstream, ...]:
    """Upstreams from `URL`, `NAME=URL` or either with `#ENV_VAR` (the upstream's API key is read from that
    environment variable; see `CREDENTIALS`) strings, or `Upstream`s, in order of preference; unnamed ones are
    called primary, secondary, tertiary, upstream4... Names must be unique."""
    out: list[Upstream] = []
    for i, spec in enumerate(specs):
        if isinstance(spec, Upstream):
            out.append(spec)
            continue
        spec, _, variable = spec.partition("#")
        m = _NAMED.match(spec)
        if m and not spec.startswith(("http://", "https://")):
            name, url = m.group(1), m.group(2)
        else:
            name, url = DEFAULT_NAMES[i] if i < len(DEFAULT_NAMES) else f"upstream{i + 1}", spec
        out.append(Upstream(name, url, _key_from_env(name, variable) if variable else None))
    if not out:
        raise ValueError("a gateway needs at least one upstream")
    names = [u.name for u in out]
    if len(set(names)) != len(names):
        raise ValueError(f"upstream names must be unique, got {names}")
    return tuple(out)


class ManualClock:
    """A clock that moves only when told (`advance`, `set`): hand its `now` to a gateway as its breakers'
    clock, and a cool-down passes without anyone waiting. Thread-safe."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    __call__ = now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError(f"a clock only moves forward; got {seconds!r}")
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, when: float) -> float:
        with self._lock:
            if when < self._now:
                raise ValueError(f"a clock only moves forward: {when!r} is before {self._now!r}")
            self._now = float(when)
            return self._now


@dataclass(frozen=True)
class GatewayConfig:
    """What a gateway needs: its upstreams (in order of preference) and its patience.

    `keepalive`, `read_timeout` and `capture` as in `streamlab.net.relay.app.RelayConfig` (`read_timeout` also
    bounds the wait for each upstream's status line and first event). `failure_threshold` and `cooldown`
    configure every breaker; `clock` is the breakers' clock (seconds, monotonic). `max_resumes` bounds the
    resumes of one stream. `on_log` is called with each log record, on the server's thread. `max_body_bytes`
    bounds a request body (a 413 past it).
    """

    upstreams: tuple[Upstream, ...]
    keepalive: float | None = DEFAULT_KEEPALIVE
    read_timeout: float = DEFAULT_READ_TIMEOUT
    failure_threshold: int = 3
    cooldown: float = 30.0
    max_resumes: int = 2
    clock: Callable[[], float] = field(default=time.monotonic)
    capture: Path | None = None
    on_log: Callable[[dict[str, Any]], None] | None = None
    max_body_bytes: int = MAX_REQUEST_BYTES

    def __post_init__(self) -> None:
        object.__setattr__(self, "upstreams", upstreams_from(self.upstreams))
        if self.keepalive is not None and self.keepalive <= 0:
            raise ValueError(f"keepalive must be a positive number of seconds or None, got {self.keepalive!r}")
        if self.read_timeout <= 0:
            raise ValueError(f"read_timeout must be a positive number of seconds, got {self.read_timeout!r}")
        if self.max_resumes < 0:
            raise ValueError(f"max_resumes must be >= 0, got {self.max_resumes!r}")
        Breaker(failure_threshold=self.failure_threshold, cooldown=self.cooldown)  # the same checks, said once


class GatewayState:
    """What all requests of one running gateway share: config, breakers, metrics, the upstream HTTP client."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.upstreams = config.upstreams
        self.breakers = {
            u.name: Breaker(failure_threshold=config.failure_threshold, cooldown=config.cooldown)
            for u in config.upstreams
        }
        self.lock = threading.Lock()  # breakers are used on the server's thread and read from others
        self.metrics = GatewayMetrics([u.name for u in config.upstreams], self.breaker_code)
        self.client: httpx.AsyncClient | None = None
        self.stopping: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ids = itertools.count(1)
        self.perf = time.perf_counter  # stream timings (TTFT, total), as the relay measures them
        self.homes: OrderedDict[str, str] = OrderedDict()  # response id -> the upstream that created it
        first = config.upstreams[0]
        self.client_credentials_to = first if first.key is None else None  # the one upstream the client's key reaches
        self.log_outlet: Outlet | None = None  # the log lines' writer thread, while the app runs
        self._calls: GatewayCalls | None = None  # what requests need of this state (made at the first)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        timeout = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=30.0)  # silence is watched by hand
        self.client = httpx.AsyncClient(
            timeout=timeout, trust_env=False, limits=httpx.Limits(max_connections=None, max_keepalive_connections=20)
        )
        self.stopping = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self._calls = None
        self.log_outlet = Outlet(LOGGER.info, name="gateway-log", notice=_dropped_lines, notice_write=LOGGER.warning)
        try:
            yield
        finally:
            await self.client.aclose()
            outlet, self.log_outlet = self.log_outlet, None
            if outlet is not None:
                outlet.close(1.0)  # shutting down: write what is queued, waiting 1 s at most for a slow handler

    # -- the breakers (every call under the lock, with the breakers' clock) --

    def allow(self, name: str) -> Permit | None:
        with self.lock:
            return self.breakers[name].allow(self.config.clock())

    def record(self, name: str, permit: Permit, result: Failure | Health, detail: str = "") -> None:
        """Report an attempt to its upstream's breaker: a `Failure` (classified by its ending, status and
        content), or the `Health` of a stream that was sent on."""
        with self.lock:
            breaker, now = self.breakers[name], self.config.clock()
            if isinstance(result, Health):
                breaker.record(permit, result, now, detail=detail)
            else:
                breaker.record(
                    permit,
                    result.ending,
                    now,
                    status=result.status,
                    content=result.content,
                    detail=result.detail,
                    retry_after=result.retry_after,
                )

    def remember(self, response_id: str | None, upstream: str) -> None:
        """Note which upstream created a Responses response (the last `HOMES` are kept)."""
        if response_id is None:
            return
        with self.lock:
            self.homes[response_id] = upstream
            self.homes.move_to_end(response_id)
            while len(self.homes) > HOMES:
                self.homes.popitem(last=False)

    def home_of(self, response_id: str | None) -> str | None:
        """The upstream that created this response, if the gateway remembers it."""
        if response_id is None:
            return None
        with self.lock:
            return self.homes.get(response_id)

    def retry_in(self) -> float:
        """Seconds until the first breaker lets a request through again."""
        with self.lock:
            now = self.config.clock()
            return min(b.retry_in(now) for b in self.breakers.values())

    def breaker_code(self, name: str) -> int:
        with self.lock:
            return self.breakers[name].code

    # -- requests --

    async def handle(self, request: Request) -> Response:
        refused = refuse_path(request)
        if refused is not None:
            return refused
        started = self.perf()
        body = await read_request_body(request, self.config.max_body_bytes)
        if isinstance(body, Response):  # refused: too large, or too slow
            return body
        return exchange(self.calls(), request, body, started)

    def calls(self) -> GatewayCalls:
        """What one request needs of this gateway, as callables (`streamlab.net.gateway.exchange`); made once
        per running app."""
        if self._calls is not None:
            return self._calls
        assert self.client is not None and self.stopping is not None
        config = self.config
        self._calls = GatewayCalls(
            upstreams=self.upstreams,
            client=self.client,
            stopping=self.stopping,
            perf=self.perf,
            keepalive=config.keepalive,
            read_timeout=config.read_timeout,
            max_resumes=config.max_resumes,
            allow=self.allow,
            record=self.record,
            retry_in=self.retry_in,
            remember=self.remember,
            home_of=self.home_of,
            headers_for=self.headers_for,
            forward_headers=self.forward_headers,
            response_headers=self.response_headers,
            retry_after=self.retry_after,
            new_stream=self.new_stream,
            finished=self.finished,
        )
        return self._calls

    async def metrics_page(self, request: Request) -> Response:
        return Response(self.metrics.text(), media_type=CONTENT_TYPE)

    def finished(self, wire: ExchangeWire) -> None:
        """A request is over: its log line, its metrics, its capture."""
        machine = wire.machine
        rs = machine.rs
        record = log_record(
            rs.summary(),
            request_id=wire.request_id,
            upstream=machine.answered_by,
            tried=machine.tried,
            resumes=machine.resumes,
            status=machine.status_sent,
        )
        if self.config.capture is not None and rs.keep_raw and rs.raw:
            name = capture_name(rs.stream_id, rs.model)
            folder = self.config.capture
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.sse").write_bytes(bytes(rs.raw))
            text = json.dumps(capture_record(bytes(rs.raw), record), ensure_ascii=False, indent=2)
            (folder / f"{name}.json").write_text(text + "\n", encoding="utf-8")
        self.metrics.observe(record)
        if LOGGER.isEnabledFor(logging.INFO) and self.log_outlet is not None:
            self.log_outlet.put(log_line(record))  # a handler that blocks must not block the event loop
        if self.config.on_log is not None:
            self.config.on_log(record)

    def new_stream(
        self, request: Request, model: str | None, started: float, *, stream_id: int | None = None
    ) -> RelayedStream:
        """A `RelayedStream` for one answer to `request` (a new stream id unless given)."""
        rs = RelayedStream(
            dialect=dialect_of(request.url.path),
            model=model,
            started=started,
            stream_id=next(self.ids) if stream_id is None else stream_id,
            route=f"{request.method} {request.url.path}",
        )
        rs.keep_raw = self.config.capture is not None
        return rs

    def forward_headers(self, request: Request) -> dict[str, bytes]:
        return forwarded_request_headers(request)

    def headers_for(self, upstream: Upstream, headers: dict[str, bytes]) -> dict[str, bytes]:
        """The client's forwarded `headers` as `upstream` may see them: the credentials of `CREDENTIALS`' rule."""
        out = {k: v for k, v in headers.items() if k not in CREDENTIALS}
        if upstream.key is not None:
            out["authorization"] = b"Bearer " + upstream.key.encode("ascii")
        elif upstream is self.client_credentials_to:
            out.update((k, v) for k, v in headers.items() if k in CREDENTIALS)
        return out

    @staticmethod
    def response_headers(upstream: httpx.Response) -> dict[str, str]:
        return forwarded_response_headers(upstream.headers)

    @staticmethod
    def retry_after(upstream: httpx.Response) -> float | None:
        return parse_retry_after(upstream.headers, now=time.time(), cap=MAX_BREAKER_WAIT)[0]


def build_gateway_app(config: GatewayConfig) -> Starlette:
    """The gateway as an ASGI app: the relay's routes under `/v1`, plus `GET /metrics`."""
    state = GatewayState(config)
    routes = [
        Route("/v1/chat/completions", state.handle, methods=["POST"]),
        Route("/v1/responses", state.handle, methods=["POST"]),
        Route("/v1/responses/{response_id}", state.handle, methods=["GET"]),
        Route("/v1/responses/{response_id}/cancel", state.handle, methods=["POST"]),
        Route("/metrics", state.metrics_page, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=state.lifespan)
    app.state.gateway = state
    return app


class Gateway(ServedApp):
    """A gateway on a background thread (uvicorn), as a context manager.

    `upstreams`: base URLs, or `NAME=URL`, in order of preference (see `upstreams_from`). The keywords are
    `GatewayConfig`'s; `on_log` is called with each log record. `base_url` is what a client uses,
    `metrics_url` the metrics page; `logs` holds the last finished requests' records, `breakers` a snapshot of
    the breakers, `metrics_text()` the metrics page without HTTP. `max_body_bytes`, `max_records` and
    `max_connections` bound what clients can make it hold, as for the relay (`streamlab.net.relay.app`).
    Stopping ends running streams with the marked final event, closes every connection and joins the thread.
    """

    def __init__(
        self,
        upstreams: Sequence[str | Upstream],
        *,
        keepalive: float | None = DEFAULT_KEEPALIVE,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        failure_threshold: int = 3,
        cooldown: float = 30.0,
        max_resumes: int = 2,
        clock: Callable[[], float] = time.monotonic,
        capture: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        on_log: Callable[[dict[str, Any]], None] | None = None,
        max_body_bytes: int = MAX_REQUEST_BYTES,
        max_records: int = MAX_RECORDS,
        max_connections: int | None = None,
    ) -> None:
        self.config = GatewayConfig(
            upstreams_from(upstreams),
            keepalive=keepalive,
            read_timeout=read_timeout,
            failure_threshold=failure_threshold,
            cooldown=cooldown,
            max_resumes=max_resumes,
            clock=clock,
            capture=None if capture is None else Path(capture),
            on_log=self._record,
            max_body_bytes=max_body_bytes,
        )
        app = build_gateway_app(self.config)
        self._state: GatewayState = app.state.gateway
        self._serve(
            app,
            self._state,
            host=host,
            port=port,
            name="gateway",
            on_record=on_log,
            max_records=max_records,
            max_connections=max_connections,
        )

    @property
    def metrics_url(self) -> str:
        return f"{self._server.url}/metrics"

    @property
    def upstreams(self) -> tuple[Upstream, ...]:
        return self.config.upstreams

    @property
    def logs(self) -> list[dict[str, Any]]:
        """The last `max_records` finished requests' log records, in the order they finished."""
        return self._recorded()

    summaries = logs  # the relay's name for the same thing (`streamlab relay` prints either)

    def wait_for_logs(self, count: int, timeout: float = 5.0) -> bool:
        """Block until at least `count` log records are written; False on timeout."""
        return self._wait_for_records(count, timeout)

    @property
    def breakers(self) -> dict[str, Breaker]:
        """A copy of each upstream's breaker, by name (state, counts, history)."""
        with self._state.lock:
            return {name: copy.deepcopy(b) for name, b in self._state.breakers.items()}

    def history_text(self, *, since: float = 0.0) -> str:
        """What the breakers saw and did, in time order (`streamlab.core.gateway.breaker.history_text`)."""
        return history_text(self.breakers, since=since)

    def metrics_text(self) -> str:
        """The metrics page, as `GET /metrics` serves it."""
        return self._state.metrics.text().decode("utf-8")

    @staticmethod
    def log_line(record: dict[str, Any]) -> str:
        """A record as the one JSON line the gateway logs."""
        return log_line(record)


_SLOT: Slot[Gateway] = Slot()


def serve_gateway(
    upstreams: Sequence[str | Upstream],
    *,
    keepalive: float | None = DEFAULT_KEEPALIVE,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    failure_threshold: int = 3,
    cooldown: float = 30.0,
    max_resumes: int = 2,
    clock: Callable[[], float] = time.monotonic,
) -> Gateway:
    """Start a gateway for a notebook, first stopping the one a previous call started (re-running the cell
    never leaks a server; at most one per process, also stopped when the interpreter exits)."""
    return _SLOT.put(
        lambda: Gateway(
            upstreams,
            keepalive=keepalive,
            read_timeout=read_timeout,
            failure_threshold=failure_threshold,
            cooldown=cooldown,
            max_resumes=max_resumes,
            clock=clock,
        ).start()
    )


def stop_gateway() -> None:
    """Stop the gateway `serve_gateway()` started, if any."""
    _SLOT.clear()
