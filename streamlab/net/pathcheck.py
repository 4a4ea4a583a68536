"""`streamlab check-path`'s reads: a path read as a browser reads it, every network read timed (I/O layer).

`check_path(url, direct=..., model=...)` makes the reads of `streamlab.core.pathcheck.checks.READS` with httpx, one
after the other, and hands them to `streamlab.core.pathcheck.grade.grade_path`, which decides everything. This
module only sends, reads, times and stops reading:

* every request carries a browser's `Accept` and `Accept-Encoding` (`REQUEST_HEADERS`), so a path compresses as it
  would for a browser; the body is read raw, each network read timed as it came off the wire, and its
  Content-Encoding undone a piece at a time under a size cap (`streamlab.core.decompress`), so the events' times are
  when a browser could have shown them, and a decompression bomb stops at the cap;
* the `path` read and the `again` read share one connection pool: whether the second request reused the first's
  connection is seen by httpx's connection trace (a request that opens no connection reused one);
* the checker's own timers are kept apart from the path's doing: each read has a deadline (a guard shuts its socket
  down then, what ends a path that drips bytes or never ends), and the keep-alive read is closed on purpose after its
  window. A read the deadline stopped is `Ending.DEADLINE` (never a finding: the report says the path could not be
  checked, exit 2), a read closed on purpose `Ending.CANCELLED`, and anything else that ends a body early is the
  path's (`Ending.BROKEN`). The whole run is bounded by `budget` seconds as well;
* the path "could not be checked" when the first request cannot connect at all (or the direct route cannot).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from streamlab.core.conformance.checks import MAX_TOKENS
from streamlab.core.decompress import BoundedDecoder
from streamlab.core.endings import Ending
from streamlab.core.errors import ConnectFailed, EncodingError
from streamlab.core.pathcheck.checks import REQUEST_HEADERS, PathRead, PathReads, PathReport, chat_request, chat_url
from streamlab.core.pathcheck.grade import grade_path
from streamlab.core.pathcheck.timeline import timing_of
from streamlab.net.eventstream import describe_transport_error

__all__ = [
    "check_path",
    "read_route",
    "DEFAULT_MODEL",
    "DEFAULT_KEEPALIVE_MODEL",
    "DEFAULT_WINDOW",
    "DEFAULT_DEADLINE",
    "DEFAULT_SILENT_DEADLINE",
    "DEFAULT_BUDGET",
    "MAX_BODY_BYTES",
    "USER_AGENT",
]

DEFAULT_MODEL = "scheduled"
"""The stand-in's `ttft` scenario: the first token after 0.30 s, then one every 0.05 s."""
DEFAULT_KEEPALIVE_MODEL = "stall"
"""The stand-in's `stall` scenario: two tokens, then only `: ping` keep-alive comments every second, for ever."""
DEFAULT_WINDOW = 5.0
"""Seconds the keep-alive read is held open before the checker closes it itself."""
DEFAULT_DEADLINE = 20.0
"""Seconds allowed for each of the path, direct and second reads, from the request to the end of the body."""
DEFAULT_SILENT_DEADLINE = 30.0
"""Seconds allowed for the read of a stream that falls silent."""
DEFAULT_BUDGET = 55.0
"""Seconds allowed for the whole run; a read gets what is left when less than its own deadline is."""
MAX_BODY_BYTES = 4 * 1024 * 1024
USER_AGENT = "streamlab-check-path/1"
_MIN_READ = 1.0  # seconds: a read with less time left than this is not made
_HTTP2 = importlib.util.find_spec("h2") is not None  # httpx speaks HTTP/2 (over TLS, as browsers do) with h2 only


class _Watch:
    """The checker's own timers on one read's socket: the `deadline` guard and, for a read held open on purpose,
    its `hold` window. Armed when the request connects (the trace), or from the response for a reused connection;
    `fired` says which went off first ("deadline" or "hold"), `new_connection` whether the request connected."""

    def __init__(self, deadline: float, hold: float | None) -> None:
        self.start = time.perf_counter()
        self.deadline, self.hold = deadline, hold
        self.new_connection = False
        self.fired: str | None = None
        self._armed = False
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()

    def trace(self, name: str, info: dict[str, Any]) -> None:
        if name == "connection.connect_tcp.complete":
            self.new_connection = True
            stream = info.get("return_value")
            self._arm(stream.get_extra_info("socket") if stream is not None else None)

    def arm_from(self, response: httpx.Response) -> None:
        stream = response.extensions.get("network_stream")
        with contextlib.suppress(Exception):  # a transport without a socket: the read timeout still bounds it
            self._arm(stream.get_extra_info("socket") if stream is not None else None)

    def _arm(self, sock: socket.socket | None) -> None:
        with self._lock:
            if self._armed or sock is None:
                return
            self._armed = True
            for kind, after in (("hold", self.hold), ("deadline", self.deadline)):
                if after is not None:
                    left = max(0.0, self.start + after - time.perf_counter())
                    timer = threading.Timer(left, self._fire, (kind, sock))
                    timer.daemon = True
                    self._timers.append(timer)
                    timer.start()

    def _fire(self, kind: str, sock: socket.socket) -> None:
        with self._lock:
            if self.fired is not None:
                return
            self.fired = kind
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # a blocked read returns at once

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def cancel(self) -> None:
        with self._lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()
            if timer is not threading.current_thread():
                timer.join()


@dataclass
class _Progress:
    """What one read has got so far (filled as it goes, so a read that breaks keeps what came)."""

    status: int | None = None
    version: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    headers_at: float | None = None
    body: bytearray = field(default_factory=bytearray)
    arrivals: list[tuple[int, float]] = field(default_factory=list)
    wire: list[tuple[int, float]] = field(default_factory=list)
    problem: str | None = None


def _read_body(response: httpx.Response, got: _Progress, watch: _Watch, limit: int) -> Ending:
    """Read the body to its end, timing each network read; the ending (COMPLETE, or LIMIT_EXCEEDED at the cap)."""
    try:
        decoder: BoundedDecoder | None = BoundedDecoder(response.headers.get("content-encoding"), limit)
    except EncodingError as exc:
        decoder, got.problem = None, f"the checker cannot decode it ({exc})"
    wired = 0
    for raw in response.iter_raw():
        now = watch.elapsed()
        wired += len(raw)
        got.wire.append((wired, now))
        if decoder is not None:
            for piece in decoder.feed(raw):
                got.body += piece
        got.arrivals.append((len(got.body), now))
        if (decoder is not None and decoder.exceeded) or wired > limit:
            got.problem = f"stopped reading at the checker's cap of {limit} bytes"
            return Ending.LIMIT_EXCEEDED
    return Ending.COMPLETE


def _ending_of(exc: Exception, watch: _Watch, *, reading: bool) -> tuple[Ending, str]:
    if watch.fired == "hold":
        return Ending.CANCELLED, f"closed by the checker after its {watch.hold:g} s window, as planned"
    if watch.fired == "deadline" or (isinstance(exc, httpx.TimeoutException) and watch.elapsed() >= watch.deadline):
        return Ending.DEADLINE, f"the checker's own deadline of {watch.deadline:g} s"
    if isinstance(exc, EncodingError):
        return Ending.BROKEN, f"the body could not be decoded: {exc}"
    return Ending.BROKEN, describe_transport_error(exc, reading=reading)


def read_route(
    client: httpx.Client,
    url: str,
    body: Mapping[str, Any],
    *,
    name: str,
    deadline: float,
    hold: float | None = None,
    api_key: str | None = None,
    limit: int = MAX_BODY_BYTES,
) -> PathRead:
    """POST `body` to `url` (a Chat Completions URL) as a browser would, read the whole answer (up to `limit` bytes,
    within `deadline` seconds; a read with `hold` is closed by the checker after that many seconds) and return what
    came, when. Raises `ConnectFailed` when no connection could be made."""
    headers = {**REQUEST_HEADERS, "User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    watch = _Watch(deadline, hold)
    got = _Progress()
    ending, ended_at = Ending.BROKEN, None
    try:
        with client.stream(
            "POST",
            url,
            content=json.dumps(dict(body)).encode(),
            headers=headers,
            timeout=httpx.Timeout(min(10.0, deadline), read=deadline),
            extensions={"trace": watch.trace},
        ) as response:
            watch.arm_from(response)
            got.status, got.version, got.headers_at = response.status_code, response.http_version, watch.elapsed()
            got.headers = tuple((k.lower(), v) for k, v in response.headers.multi_items())
            ending = _read_body(response, got, watch, limit)
            ended_at = watch.elapsed()
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ConnectFailed(f"cannot connect to {url}: {describe_transport_error(exc, reading=False)}") from exc
    except (httpx.HTTPError, EncodingError) as exc:
        ended_at = watch.elapsed()
        ending, got.problem = _ending_of(exc, watch, reading=got.status is not None)
    finally:
        watch.cancel()
    return PathRead(
        name=name,
        url=url,
        model=str(body.get("model", "")),
        status=got.status,
        http_version=got.version,
        headers=got.headers,
        body=bytes(got.body),
        arrivals=tuple(got.arrivals),
        wire=tuple(got.wire),
        headers_at=got.headers_at,
        ended_at=ended_at,
        ending=ending,
        problem=got.problem,
        new_connection=watch.new_connection,
    )


class _Run:
    """One run's shared state: the time budget, the options, the reads made and the reasons others were not."""

    def __init__(self, budget: float, api_key: str | None, verify: ssl.SSLContext | bool) -> None:
        self.end = time.monotonic() + budget
        self.api_key, self.verify = api_key, verify
        self.not_run: dict[str, str] = {}

    def client(self) -> httpx.Client:
        return httpx.Client(trust_env=False, follow_redirects=False, http2=_HTTP2, verify=self.verify)

    def time_for(self, name: str, want: float) -> float | None:
        left = self.end - time.monotonic()
        if left < _MIN_READ:
            self.not_run[name] = "the checker's time budget ran out before it"
            return None
        return min(want, left)

    def read(
        self, client: httpx.Client, url: str, body: Mapping[str, Any], name: str, deadline: float, hold: float | None
    ) -> PathRead | None:
        seconds = self.time_for(name, deadline)
        if seconds is None:
            return None
        try:
            return read_route(client, url, body, name=name, deadline=seconds, hold=hold, api_key=self.api_key)
        except ConnectFailed as exc:
            return PathRead(name, url, str(body.get("model", "")), None, ending=Ending.CONNECT_ERROR, problem=str(exc))


def _read_line(read: PathRead) -> str:
    extra = f"; {read.problem}" if read.problem and read.status is not None else ""
    return f"{read.name:<10} POST {read.url}  {read.status_line()}, {len(read.body)} bytes, {read.ending.value}{extra}"


def _guard(reads: PathReads) -> str | None:
    """Why the path could not be checked after all: a read the checker's own deadline or budget stopped."""
    for read in reads.all():
        if read.ending is Ending.DEADLINE:
            return (
                f"the checker's own deadline stopped the {read.name} read ({read.problem}): "
                "give it more time (--deadline), or check that the path answers at all"
            )
    for name, why in reads.not_run.items():
        if "budget" in why:
            return f"the {name} read was not made: {why} (--budget)"
    return None


def check_path(
    url: str,
    *,
    direct: str | None = None,
    model: str = DEFAULT_MODEL,
    silent_model: str | None = None,
    keepalive_model: str | None = DEFAULT_KEEPALIVE_MODEL,
    window: float = DEFAULT_WINDOW,
    deadline: float = DEFAULT_DEADLINE,
    silent_deadline: float = DEFAULT_SILENT_DEADLINE,
    budget: float = DEFAULT_BUDGET,
    api_key: str | None = None,
    max_tokens: int = MAX_TOKENS,
    ca_file: str | None = None,
) -> PathReport:
    """Grade the path at `url` (a base URL such as `http://127.0.0.1:8080/v1`, or a Chat Completions URL) between a
    server and a reader; `direct` is the same server without the path, to compare with.

    `model` is the stream every comparison reads (the stand-in's `scheduled` by default); `silent_model` one whose
    stream falls silent for a while (none by default: the idle check without keep-alives is then not run);
    `keepalive_model` one kept alive by comments (the stand-in's `stall`), held open `window` seconds. Each read
    has `deadline` seconds (the silent one `silent_deadline`), the whole run `budget`. `ca_file` is a CA
    certificate to trust for an https URL (Caddy's local CA, say). The report's `exit_code` is 0 (nothing failed),
    1 (a check failed) or 2 (the path could not be checked: see `error`)."""
    report = PathReport(url, direct, model)
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
    run = _Run(budget, api_key, verify)
    ask = chat_request(model, max_tokens=max_tokens)
    with run.client() as client:
        try:
            path = read_route(client, chat_url(url), ask, name="path", deadline=min(deadline, budget), api_key=api_key)
        except ConnectFailed as exc:
            report.unreachable = str(exc)
            return report
        direct_read = None
        if direct is not None:
            with run.client() as other:
                direct_read = run.read(other, chat_url(direct), ask, "direct", deadline, None)
            if direct_read is not None and direct_read.ending is Ending.CONNECT_ERROR:
                report.unreachable = f"the direct route: {direct_read.problem}"
                return report
        again = None
        if path.is_event_stream and path.ending is Ending.COMPLETE:
            again = run.read(client, chat_url(url), ask, "again", deadline, None)
        else:
            run.not_run["again"] = "the first stream did not end cleanly"
    silent = keepalive = None
    if not path.is_event_stream:
        run.not_run.update(silent="the path did not stream", keepalive="the path did not stream")
    else:
        if silent_model is None:
            run.not_run["silent"] = "no --silent-model: name a model whose stream falls silent for a while"
        else:
            with run.client() as c:
                silent = run.read(c, chat_url(url), chat_request(silent_model), "silent", silent_deadline, None)
        if keepalive_model is None:
            run.not_run["keepalive"] = "no --keepalive-model"
        else:
            with run.client() as c:
                keepalive = run.read(c, chat_url(url), chat_request(keepalive_model), "keepalive", window + 10, window)
    reads = PathReads(path, direct_read, again, silent, keepalive, window, dict(run.not_run))
    report.findings = grade_path(reads)
    report.timings = [timing_of(r) for r in reads.all()]
    report.reads = [_read_line(r) for r in reads.all()]
    report.guard = _guard(reads)
    return report
