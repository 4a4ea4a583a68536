"""A scripted local stand-in for an OpenAI-compatible streaming endpoint (standard library only).

Nothing here is a model. A *script* maps a request's `model` name to a list of *episodes*; request n for
that model plays episode n, and the last episode repeats. An episode is either a list of steps played on
a 200 event stream (wait, send bytes, send a keep-alive comment, stall, cut the connection, end), or an
HTTP error returned before any stream starts. The bytes are whatever you script: the server never builds
SSE frames itself, so it can send broken streams as easily as good ones.

    from streamlab.standin import StandIn, Episode, Wait, Send, paced

    script = {"demo": [Episode(paced([b'data: {"x": 1}\\n\\n', b"data: [DONE]\\n\\n"], first=0.3, gap=0.05))]}
    with StandIn(script) as server:
        print(server.base_url)          # http://127.0.0.1:PORT/v1

How it behaves on the wire, and why:

* It listens on 127.0.0.1, port 0 (the OS picks a free one), speaks HTTP/1.1 with chunked transfer encoding like
  real streaming endpoints, disables Nagle's algorithm (TCP_NODELAY) so small frames leave at once, and
  never logs a line (notebook output stays deterministic).
* Each scripted `Send` becomes one HTTP chunk. HTTP chunk framing has nothing to do with SSE framing: a
  chunk may hold half an event or three of them, exactly as on the real network.
* A non-streaming request (no `"stream": true`) gets one JSON body after the same total waiting time: the
  episode's `body`, or one derived from its frames.
* Every request leaves a `RequestRecord` (what arrived, what was written and when, whether the client
  went away) so labs and tests can assert on the server's side of the story. While it waits, the server
  watches the socket, so a client that hangs up is noticed at once, not at the next write.

Routes: `POST /v1/chat/completions`, `POST /v1/responses`, `GET /v1/responses/{id}` (JSON, or a stream with
`stream=true` and optional `starting_after=N`), `POST /v1/responses/{id}/cancel`. The GET route replays a
`StoredResponse` (background mode): whole, or after sequence number N, and it can be told to cut each
reconnection somewhere, to test a client that has to resume more than once. It replays what is stored at
once; it does not follow an answer that is still being generated. A streamed request that carries
`Last-Event-ID` resumes after the frame whose `id:` field set that ID, as the WHATWG standard intends for
reconnecting clients. Malformed requests get an OpenAI-shaped 4xx error and the server keeps serving.

In a notebook, use `serve(scripts)`: it stops the server the previous call started, so re-running the
cell never leaks one. `scenario(name)` returns the named scripts `streamlab standin` serves.
"""

from __future__ import annotations

import atexit
import json
import re
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..core.sse import SSEParser, parse

__all__ = [
    "Wait", "Send", "KeepAlive", "Stall", "Cut", "End", "Step",
    "Episode", "ErrorEpisode", "error_episode", "paced", "split_frames",
    "StoredResponse", "RequestRecord", "StandIn", "serve", "stop_serving", "derive_body",
    "DEFAULT_MAX_BODY_BYTES", "SCENARIOS", "scenario",
]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
_POLL = 0.05  # seconds: how often a long wait checks for a stopping server


# --- script steps ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wait:
    """Pause before the next step (the model "thinking"). The pause ends early if the client hangs up."""

    seconds: float


@dataclass(frozen=True)
class Send:
    """Write these bytes as one HTTP chunk. Empty data writes nothing (an empty chunk would end the body)."""

    data: bytes


@dataclass(frozen=True)
class KeepAlive:
    """Write an SSE comment frame, `: {comment}` and a blank line, as servers do to keep idle proxies open."""

    comment: str = "ping"

    @property
    def data(self) -> bytes:
        return b": " + self.comment.encode("utf-8") + b"\n\n"


@dataclass(frozen=True)
class Stall:
    """Send nothing for `seconds`, or (None) until the client gives up or the server stops.

    Unlike `Wait` it does not count towards the time a non-streaming request waits: it models a stream
    that hangs, not a model that thinks.
    """

    seconds: float | None = None


@dataclass(frozen=True)
class Cut:
    """Close the connection without the terminating zero-length chunk: the client sees a broken body.

    By default the server closes politely (FIN: the client reads end-of-file mid-body). With `reset=True`
    it aborts the connection (RST: the client gets "connection reset by peer"), as a crashed process or
    a load balancer that gave up would.
    """

    reset: bool = False


@dataclass(frozen=True)
class End:
    """End the body cleanly now (terminating chunk), ignoring any later steps. Implied after the last step."""


Step = Wait | Send | KeepAlive | Stall | Cut | End


@dataclass(frozen=True)
class Episode:
    """One answer played as a 200 event stream.

    `steps` are played in order. `body` is the JSON object a non-streaming request gets (None: derive it
    from the frames, see `derive_body`). `headers` are extra response headers. `store_as` names a response
    id: the server then keeps that response, so `GET /v1/responses/{id}?stream=true` can resume it
    (background mode) and `POST /v1/responses/{id}/cancel` can stop the playing stream. What it keeps is
    `stored` when given (the whole answer, typically, while this episode is cut early), else the
    episode's own frames.
    """

    steps: tuple[Step, ...] = ()
    body: Mapping[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    store_as: str | None = None
    stored: StoredResponse | None = None

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        store_as: str | None = None,
        stored: StoredResponse | None = None,
    ) -> None:
        steps = tuple(steps)
        if stored is not None and store_as is None:
            raise ValueError("Episode(stored=...) needs store_as=<response id> to say where to keep it")
        for i, step in enumerate(steps):
            if not isinstance(step, (Wait, Send, KeepAlive, Stall, Cut, End)):
                raise TypeError(f"Episode step {i} is {step!r}; expected Wait, Send, KeepAlive, Stall, Cut or End")
            if isinstance(step, Send) and not isinstance(step.data, (bytes, bytearray)):
                raise TypeError(f"Episode step {i}: Send.data must be bytes, got {type(step.data).__name__}")
        pairs = tuple(headers.items()) if isinstance(headers, Mapping) else tuple(headers)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "headers", pairs)
        object.__setattr__(self, "store_as", store_as)
        object.__setattr__(self, "stored", stored)

    @property
    def payload(self) -> bytes:
        """All the bytes the episode sends, concatenated (what an uncut client would receive)."""
        return b"".join(s.data for s in self.steps if isinstance(s, (Send, KeepAlive)))

    @property
    def thinking_time(self) -> float:
        """Total of the `Wait` steps: how long a non-streaming request waits before its body."""
        return sum(s.seconds for s in self.steps if isinstance(s, Wait))


@dataclass(frozen=True)
class ErrorEpisode:
    """An HTTP error before any stream: `status`, a JSON `body`, extra `headers`, after `wait` seconds."""

    status: int
    body: Mapping[str, Any]
    headers: tuple[tuple[str, str], ...] = ()
    wait: float = 0.0


def error_episode(
    status: int,
    message: str,
    *,
    type: str = "server_error",
    code: str | None = None,
    param: str | None = None,
    retry_after: float | str | None = None,
    retry_after_ms: int | None = None,
    wait: float = 0.0,
) -> ErrorEpisode:
    """An OpenAI-shaped error reply: `{"error": {"message", "type", "param", "code"}}`.

    `retry_after` becomes the `Retry-After` header (seconds, or an HTTP date given as a string) and
    `retry_after_ms` the `retry-after-ms` header that the official SDKs read first.
    """
    headers: list[tuple[str, str]] = []
    if retry_after_ms is not None:
        headers.append(("retry-after-ms", str(int(retry_after_ms))))
    if retry_after is not None:
        value = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
        headers.append(("Retry-After", value))
    return ErrorEpisode(status, _error_obj(message, type, code, param), tuple(headers), wait)


def paced(frames: Iterable[bytes], *, first: float = 0.0, gap: float = 0.0) -> list[Step]:
    """Steps that send `frames` on a schedule: the first after `first` seconds, then one every `gap`."""
    steps: list[Step] = []
    for i, frame in enumerate(frames):
        delay = first if i == 0 else gap
        if delay > 0:
            steps.append(Wait(delay))
        steps.append(Send(frame))
    return steps


_LINE_END = re.compile(rb"\r\n|\r|\n")


def split_frames(raw: bytes) -> list[bytes]:
    """Cut a byte stream into SSE frames, each ending with its blank line (any of CRLF, CR, LF).

    An unfinished tail (no blank line yet) is returned as the last item. Concatenating the result gives
    back `raw` exactly.
    """
    frames: list[bytes] = []
    start = line_start = 0
    for m in _LINE_END.finditer(raw):
        if m.start() == line_start:  # an empty line ends the frame
            frames.append(raw[start:m.end()])
            start = m.end()
        line_start = m.end()
    if start < len(raw):
        frames.append(raw[start:])
    return frames


def _frame_json(frame: bytes) -> Any:
    events, _ = parse(frame)
    for ev in events:
        try:
            return json.loads(ev.data)
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class StoredResponse:
    """A background response kept by the server, replayed by `GET /v1/responses/{id}?stream=true`.

    `frames` are `(sequence_number, frame bytes)`; a frame without one (a comment, a keep-alive) has None
    and is replayed only when it comes after the resume point. GET connection n (0-based) is cut after
    `cuts[n]` payload bytes (None or past the end: sent whole), which lets tests break the resumed stream
    again, anywhere. `gap` spaces the replayed frames. `response` is the JSON object for a plain GET and
    for cancel (None: taken from the frames' terminal event, or a minimal object).
    """

    frames: tuple[tuple[int | None, bytes], ...]
    cuts: tuple[int | None, ...] = ()
    gap: float = 0.0
    response: Mapping[str, Any] | None = None

    @classmethod
    def from_frames(cls, frames: Iterable[bytes], **kwargs: Any) -> StoredResponse:
        """Build from SSE bytes (whole frames or any pieces), reading each frame's `sequence_number`."""
        pairs = []
        for frame in split_frames(b"".join(frames)):
            obj = _frame_json(frame)
            seq = obj.get("sequence_number") if isinstance(obj, dict) else None
            pairs.append((seq if isinstance(seq, int) else None, frame))
        return cls(tuple(pairs), **kwargs)

    def response_object(self, response_id: str) -> dict[str, Any]:
        """The response as `GET /v1/responses/{id}` returns it (without a stream)."""
        if self.response is not None:
            return dict(self.response)
        last: dict[str, Any] | None = None
        for _, frame in self.frames:
            obj = _frame_json(frame)
            if isinstance(obj, dict) and isinstance(obj.get("response"), dict):
                last = obj["response"]
        return dict(last) if last else {"id": response_id, "object": "response", "status": "in_progress"}


# --- records --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestRecord:
    """What the server saw and did for one request (a snapshot; fetch again for newer state).

    `outcome` is "in_progress", "complete" (body ended cleanly), "error" (an error status was sent),
    "cut" (a scripted `Cut`), "client_gone" (the client closed or reset the connection before the end),
    "cancelled" (a cancel request stopped the stream) or "stopped" (the server shut down mid-stream).
    `bytes_written` counts response payload bytes (stream bytes or JSON body) handed to the operating
    system, not HTTP chunk framing; `frames_written` counts `Send`/`KeepAlive` steps written whole.
    `write_times` holds the `time.perf_counter()` value of each stream chunk written (same clock as the
    client's arrival times when both run on one machine), `started_at` when the request line arrived.
    """

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    model: str | None
    episode: int | None
    stream: bool
    status: int | None
    written: bytes
    frames_written: int
    client_gone: bool
    outcome: str
    started_at: float
    finished_at: float | None
    resumed_after: str | None = None
    write_times: tuple[float, ...] = ()

    @property
    def bytes_written(self) -> int:
        return len(self.written)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


@dataclass
class _Rec:
    index: int
    method: str
    path: str
    headers: dict[str, str]
    started_at: float
    body: bytes = b""
    json: Any = None
    model: str | None = None
    episode: int | None = None
    stream: bool = False
    status: int | None = None
    written: bytearray = field(default_factory=bytearray)
    frames_written: int = 0
    client_gone: bool = False
    outcome: str = "in_progress"
    finished_at: float | None = None
    resumed_after: str | None = None
    write_times: list[float] = field(default_factory=list)

    def snapshot(self) -> RequestRecord:
        return RequestRecord(
            self.index, self.method, self.path, dict(self.headers), self.body, self.json, self.model, self.episode,
            self.stream, self.status, bytes(self.written), self.frames_written, self.client_gone, self.outcome,
            self.started_at, self.finished_at, self.resumed_after, tuple(self.write_times),
        )


class _ClientGone(Exception):
    """The client closed or reset the connection."""


# --- the server -----------------------------------------------------------------------------------

ScriptValue = Episode | ErrorEpisode | Sequence[Episode | ErrorEpisode]


def _normalise_script(model: str, value: ScriptValue) -> tuple[Episode | ErrorEpisode, ...]:
    episodes = (value,) if isinstance(value, (Episode, ErrorEpisode)) else tuple(value)
    if not episodes:
        raise ValueError(f"script for model {model!r} has no episodes")
    for i, ep in enumerate(episodes):
        if not isinstance(ep, (Episode, ErrorEpisode)):
            raise TypeError(f"script for model {model!r}, episode {i}: expected Episode or ErrorEpisode, got {ep!r}")
    return episodes


class StandIn:
    """A scripted OpenAI-compatible server on a background thread.

    `scripts` maps a model name to one episode or a list of them. `stored` maps response ids to
    `StoredResponse`s for the resume route (episodes with `store_as` add theirs automatically).
    Use it as a context manager (`with StandIn(scripts) as server:`), or call `start()` and `stop()`.
    Stopping ends stalled streams, closes every connection and joins every thread it started.
    """

    def __init__(
        self,
        scripts: Mapping[str, ScriptValue],
        *,
        stored: Mapping[str, StoredResponse] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.host = host
        self.max_body_bytes = max_body_bytes
        self._requested_port = port
        self._lock = threading.Condition()
        self._scripts: dict[str, tuple[Episode | ErrorEpisode, ...]] = {}
        self._stored: dict[str, StoredResponse] = {}
        self._cancelled: set[str] = set()
        self._gets: dict[str, int] = {}
        self._counts: dict[str, int] = {}
        self._records: list[_Rec] = []
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self.set_scripts(scripts, stored=stored)

    # -- configuration --

    def set_scripts(self, scripts: Mapping[str, ScriptValue], *, stored: Mapping[str, StoredResponse] | None = None,
                    reset: bool = True) -> None:
        """Replace the scripts (and add stored responses); with `reset`, also restart episode counting."""
        normal = {str(m): _normalise_script(m, v) for m, v in scripts.items()}
        new_stored = dict(stored or {})
        for episodes in normal.values():
            for ep in episodes:
                if isinstance(ep, Episode) and ep.store_as and ep.store_as not in new_stored:
                    new_stored[ep.store_as] = ep.stored or StoredResponse.from_frames([ep.payload])
        with self._lock:
            self._scripts = normal
            self._stored.update(new_stored)
            if reset:
                self._counts.clear()
                self._gets.clear()
                self._cancelled.clear()

    def reset(self) -> None:
        """Forget the records and restart episode counting (the scripts stay)."""
        with self._lock:
            self._records.clear()
            self._counts.clear()
            self._gets.clear()
            self._cancelled.clear()

    # -- lifecycle --

    def start(self) -> StandIn:
        """Bind and serve on a background thread. Returns self."""
        if self._httpd is not None:
            raise RuntimeError("this StandIn is already started")
        self._stopping.clear()
        httpd = _Server((self.host, self._requested_port), _Handler)
        httpd.standin = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"standin:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: end waits and stalls, close every connection, join every thread. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # wake handlers blocked reading the next request on a kept-alive connection
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()  # joins the handler threads (block_on_close)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> StandIn:
        if self._httpd is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the StandIn is not running; call start() or use `with StandIn(...)`")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client as `base_url`, e.g. http://127.0.0.1:PORT/v1."""
        host = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}/v1"

    def url(self, path: str) -> str:
        """`base_url` joined with a path such as "chat/completions" or "/responses"."""
        return f"{self.base_url}/{path.lstrip('/')}"

    # -- records --

    def records(self, model: str | None = None) -> list[RequestRecord]:
        """Snapshots of every request so far (in arrival order), optionally only those for `model`.

        A record is completed just after its last byte is handed to the operating system, so a client
        can hold the whole reply a moment before the record says "complete": call `wait_idle()` (or
        `wait_until`) before asserting on a request you have just read to the end.
        """
        with self._lock:
            return [r.snapshot() for r in self._records if model is None or r.model == model]

    def requests_for(self, model: str) -> int:
        """How many create requests for `model` were routed to its script so far."""
        with self._lock:
            return self._counts.get(model, 0)

    def wait_until(self, predicate: Callable[[list[RequestRecord]], bool], timeout: float = 5.0) -> bool:
        """Block until `predicate(records())` is true (re-checked on every record change); False on timeout."""
        end = time.monotonic() + timeout
        with self._lock:
            while True:
                if predicate([r.snapshot() for r in self._records]):
                    return True
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Block until every request seen so far has finished; False on timeout."""
        return self.wait_until(lambda rs: all(r.finished for r in rs), timeout)

    # -- internals used by the handler --

    def _episode(self, model: str) -> tuple[int, Episode | ErrorEpisode] | None:
        with self._lock:
            episodes = self._scripts.get(model)
            if episodes is None:
                return None
            n = self._counts[model] = self._counts.get(model, 0) + 1
            i = min(n, len(episodes)) - 1
            return i, episodes[i]

    def _new_record(self, method: str, path: str, headers: dict[str, str]) -> _Rec:
        with self._lock:
            rec = _Rec(len(self._records), method, path, headers, time.perf_counter())
            self._records.append(rec)
            self._lock.notify_all()
            return rec

    def _update(self, rec: _Rec, **changes: Any) -> None:
        with self._lock:
            for k, v in changes.items():
                setattr(rec, k, v)
            self._lock.notify_all()

    def _written(self, rec: _Rec, data: bytes, frame: bool, at: float | None = None) -> None:
        with self._lock:
            rec.written += data
            rec.frames_written += frame
            if at is not None:
                rec.write_times.append(at)
            self._lock.notify_all()


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined on server_close: a stopped StandIn leaves no thread behind
    block_on_close = True
    allow_reuse_address = True
    request_queue_size = 256  # the listen backlog; socketserver's default of 5 resets bursts of new connections
    standin: StandIn

    def handle_error(self, request: Any, client_address: Any) -> None:  # silent: no tracebacks in notebooks
        pass


def _error_obj(message: str, type: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "streamlab-standin"

    def version_string(self) -> str:  # the Server header, without the Python version http.server appends
        return self.server_version

    # -- plumbing --

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.standin = self.server.standin
        with self.standin._lock:
            self.standin._conns.add(self.connection)
            if self.standin._stopping.is_set():  # accepted while stop() ran: do not start a blocking read
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        with self.standin._lock:
            self.standin._conns.discard(self.connection)

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:  # reset by the client, or shut down by stop()
            pass

    def log_message(self, format: str, *args: Any) -> None:  # silent
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Replace http.server's HTML error pages (bad request line, unknown method...) with OpenAI JSON."""
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # an unparsable request line: still answer with HTTP/1.1 headers
            self.request_version = "HTTP/1.1"
        if code == 501:  # http.server's "Unsupported method": for an API client that is a 405
            code, message = 405, f"method {self.command!r} is not allowed here"
        try:
            self._discard_input()
            self._send_json(code, _error_obj(message or explain or "bad request", "invalid_request_error"))
        except OSError:
            pass

    def _discard_input(self, limit: int = 16 * 1024 * 1024) -> None:
        """Read and drop what the client already sent (at most `limit` bytes, waiting 50 ms at most for
        more). Closing a socket with unread input makes the kernel reset the connection, and the client
        would lose the error reply it is owed."""
        sock = self.connection
        dropped = 0
        try:
            while dropped < limit:
                readable, _, _ = select.select([sock], [], [], 0.05)
                if not readable:
                    return
                data = sock.recv(65536)
                if not data:
                    return
                dropped += len(data)
        except (OSError, ValueError):
            return

    def _send_json(self, status: int, obj: Any, headers: Iterable[tuple[str, str]] = (),
                   rec: _Rec | None = None) -> None:
        body = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        for name, value in (("Content-Type", "application/json"), ("Content-Length", str(len(body))), *headers):
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        if rec is not None:  # recorded before the bytes leave, so a client that has read them sees the record
            self.standin._written(rec, body, False)
            outcome = "complete" if status < 400 else "error"
            self.standin._update(rec, status=status, outcome=outcome)
        self.end_headers()
        self.wfile.write(body)  # if this fails, the handler rewrites the outcome to client_gone

    def _fail(self, rec: _Rec, status: int, message: str, type: str = "invalid_request_error",
              code: str | None = None, param: str | None = None) -> None:
        self._send_json(status, _error_obj(message, type, code, param), rec=rec)

    def _last_event_id(self) -> str | None:
        """The Last-Event-ID header, decoded as the UTF-8 the standard sends (http.server reads Latin-1)."""
        value = self.headers.get("Last-Event-ID")
        if value is None:
            return None
        return value.encode("latin-1", "replace").decode("utf-8", "replace")

    def _client_gone_during(self, seconds: float | None) -> bool:
        """Pause; return True as soon as the client closes its end. Ends early when the server stops."""
        end = None if seconds is None else time.perf_counter() + seconds
        sock = self.connection
        watch = True
        while True:
            if self.standin._stopping.is_set():
                return False
            left = _POLL if end is None else min(_POLL, end - time.perf_counter())
            if left <= 0:
                return False
            if not watch:
                time.sleep(left)
                continue
            try:
                readable, _, _ = select.select([sock], [], [], left)
                if readable and not sock.recv(1, socket.MSG_PEEK):
                    return not self.standin._stopping.is_set()  # EOF: the client left (or stop() shut us down)
                if readable:  # the client sent more bytes (a pipelined request): stop watching, just wait
                    watch = False
            except (OSError, ValueError):
                return not self.standin._stopping.is_set()

    # -- routing --

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_HEAD(self) -> None:
        self.close_connection = True  # the error body that follows is not expected after HEAD: do not reuse
        self._route("HEAD")

    def do_OPTIONS(self) -> None:
        self._route("OPTIONS")

    def do_TRACE(self) -> None:
        self._route("TRACE")

    def _route(self, method: str) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        rec = self.standin._new_record(method, self.path, headers)
        try:
            self._dispatch(method, rec)
        except (_ClientGone, OSError):
            self.close_connection = True
            if self.standin._stopping.is_set():
                self.standin._update(rec, outcome="stopped")
            else:
                self.standin._update(rec, client_gone=True, outcome="client_gone")
        finally:
            self.standin._update(rec, finished_at=time.perf_counter())

    def _dispatch(self, method: str, rec: _Rec) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        query = parse_qs(url.query)
        parts = path.split("/")
        if path in ("/v1/chat/completions", "/v1/responses"):
            if method != "POST":
                if self._drain(rec) is not None:
                    self._fail(rec, 405, f"{method} is not allowed on {path}; use POST")
                return
            return self._create(rec, "chat" if path.endswith("completions") else "responses")
        if len(parts) == 4 and path.startswith("/v1/responses/"):
            if method != "GET":
                if self._drain(rec) is not None:
                    self._fail(rec, 405, f"{method} is not allowed on {path}; use GET")
                return
            return self._retrieve(rec, parts[3], query)
        if len(parts) == 5 and path.startswith("/v1/responses/") and parts[4] == "cancel":
            if method != "POST":
                if self._drain(rec) is not None:
                    self._fail(rec, 405, f"{method} is not allowed on {path}; use POST")
                return
            if self._drain(rec) is None:
                return
            return self._cancel(rec, parts[3])
        if self._drain(rec) is None:
            return
        self._fail(rec, 404, f"unknown path {url.path!r}: this stand-in serves /v1/chat/completions, "
                   "/v1/responses and /v1/responses/{id}", code="unknown_url")

    def _drain(self, rec: _Rec) -> bytes | None:
        """Read the request body, or send a 4xx and return None. Oversized bodies are refused (and dropped)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self.close_connection = True
            self._discard_input()
            self._fail(rec, 411, "chunked request bodies are not supported: send Content-Length")
            return None
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            return b""
        try:
            length = int(length_text)
            if length < 0:
                raise ValueError
        except ValueError:
            self.close_connection = True
            self._fail(rec, 400, f"invalid Content-Length {length_text!r}")
            return None
        if length > self.standin.max_body_bytes:
            self.close_connection = True
            self._discard_input()
            self._fail(rec, 413, f"request body of {length} bytes exceeds the stand-in's limit of "
                       f"{self.standin.max_body_bytes} bytes")
            return None
        body = self.rfile.read(length)
        self.standin._update(rec, body=body)
        return body

    # -- POST /v1/chat/completions and /v1/responses --

    def _create(self, rec: _Rec, dialect: str) -> None:
        body = self._drain(rec)
        if body is None:
            return
        if not body:
            return self._fail(rec, 400, "missing request body: expected a JSON object with a 'model'")
        try:
            req = json.loads(body)
        except ValueError as exc:
            return self._fail(rec, 400, f"request body is not valid JSON: {exc}")
        if not isinstance(req, dict):
            return self._fail(rec, 400, f"request body must be a JSON object, got {type(req).__name__}")
        self.standin._update(rec, json=req)
        model = req.get("model")
        if not isinstance(model, str) or not model:
            return self._fail(rec, 400, "you must provide a model parameter (a non-empty string)", param="model")
        stream = req.get("stream") is True
        self.standin._update(rec, model=model, stream=stream)
        picked = self.standin._episode(model)
        if picked is None:
            known = ", ".join(sorted(self.standin._scripts)) or "none"
            return self._fail(rec, 404, f"The model `{model}` does not exist on this stand-in (scripted: {known})",
                              code="model_not_found", param="model")
        index, ep = picked
        self.standin._update(rec, episode=index)
        if isinstance(ep, ErrorEpisode):
            if ep.wait and self._client_gone_during(ep.wait):
                raise _ClientGone
            self._send_json(ep.status, ep.body, ep.headers, rec=rec)
            return
        if not stream:
            if ep.thinking_time and self._client_gone_during(ep.thinking_time):
                raise _ClientGone
            result = ep.body if ep.body is not None else derive_body(ep.payload, dialect, model)
            if result is None:
                return self._fail(rec, 500, "stand-in: this episode has no non-streaming body and none could be "
                                  "derived from its frames", type="server_error")
            self._send_json(200, result, ep.headers, rec=rec)
            return
        skip = 0
        resume_id = self._last_event_id()
        if resume_id is not None:
            skip = _skip_after_id(ep.payload, resume_id)
            self.standin._update(rec, resumed_after=resume_id if skip else None)
        self._play(rec, ep.steps, ep.headers, skip=skip, cancel_id=ep.store_as)

    # -- streaming --

    def _begin_stream(self, rec: _Rec, headers: Iterable[tuple[str, str]] = ()) -> None:
        self.send_response(200)
        # No Content-Length: the body is sent in HTTP chunks as the script plays; proxies must not cache it.
        stream_headers = (("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache"),
                          ("Transfer-Encoding", "chunked"))
        for name, value in (*stream_headers, *headers):
            self.send_header(name, value)
        self.end_headers()
        self.standin._update(rec, status=200)

    def _chunk(self, rec: _Rec, data: bytes, frame: bool) -> None:
        if not data:
            return
        # HTTP/1.1 chunk framing (size in hex, CRLF, data, CRLF): unrelated to where SSE lines end.
        self.wfile.write(b"".join((f"{len(data):x}".encode("ascii"), b"\r\n", data, b"\r\n")))
        self.standin._written(rec, data, frame, time.perf_counter())

    def _play(self, rec: _Rec, steps: Iterable[Step], headers: Iterable[tuple[str, str]] = (), *,
              skip: int = 0, cancel_id: str | None = None) -> None:
        """Play steps on a chunked 200 stream. `skip` drops that many leading payload bytes (a resume)."""
        self._begin_stream(rec, headers)
        standin = self.standin
        for step in steps:
            if standin._stopping.is_set():
                self.close_connection = True
                standin._update(rec, outcome="stopped")
                return
            if cancel_id is not None and cancel_id in standin._cancelled:
                break
            if isinstance(step, (Wait, Stall)):
                if skip and isinstance(step, Wait):
                    continue  # the skipped part of a resumed stream was already delivered: do not wait for it
                if self._client_gone_during(step.seconds):
                    raise _ClientGone
            elif isinstance(step, (Send, KeepAlive)):
                data = step.data
                if skip:
                    dropped = min(skip, len(data))
                    data, skip = data[dropped:], skip - dropped
                    self._chunk(rec, data, False)
                else:
                    self._chunk(rec, data, True)
            elif isinstance(step, Cut):
                self.close_connection = True
                standin._update(rec, outcome="cut")
                if step.reset:  # SO_LINGER with a zero timeout: close() sends RST instead of FIN
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                return
            elif isinstance(step, End):
                break
        cancelled = cancel_id is not None and cancel_id in standin._cancelled
        # Recorded before the terminating chunk leaves, so a client that has read the whole body always
        # finds the outcome written; if the write fails, the handler rewrites it to client_gone.
        standin._update(rec, outcome="cancelled" if cancelled else "complete")
        self.wfile.write(b"0\r\n\r\n")

    # -- GET /v1/responses/{id} and cancel --

    def _retrieve(self, rec: _Rec, response_id: str, query: dict[str, list[str]]) -> None:
        if self._drain(rec) is None:
            return
        stored = self.standin._stored.get(response_id)
        if stored is None:
            return self._fail(rec, 404, f"No response found with id '{response_id}'.", code="not_found")
        if query.get("stream", ["false"])[-1].lower() != "true":
            obj = stored.response_object(response_id)
            if response_id in self.standin._cancelled:
                obj["status"] = "cancelled"
            return self._send_json(200, obj, rec=rec)
        self.standin._update(rec, stream=True)
        frames = list(stored.frames)
        start = 0
        if "starting_after" in query:
            text = query["starting_after"][-1]
            try:
                after = int(text)
            except ValueError:
                return self._fail(rec, 400, f"starting_after must be an integer, got {text!r}",
                                  param="starting_after")
            for i, (seq, _) in enumerate(frames):
                if seq is not None and seq <= after:
                    start = i + 1
            self.standin._update(rec, resumed_after=str(after))
        elif self._last_event_id() is not None:
            resume_id = self._last_event_id()
            skip = _skip_after_id(b"".join(f for _, f in frames), resume_id)
            pos = 0
            for i, (_, f) in enumerate(frames):
                if pos >= skip:
                    break
                pos += len(f)
                start = i + 1
            self.standin._update(rec, resumed_after=resume_id if skip else None)
        with self.standin._lock:
            n = self.standin._gets.get(response_id, 0)
            self.standin._gets[response_id] = n + 1
        cut_at = stored.cuts[n] if n < len(stored.cuts) else None
        steps: list[Step] = []
        budget = cut_at
        for i, (_, frame) in enumerate(frames[start:]):
            if i and stored.gap:
                steps.append(Wait(stored.gap))
            if budget is not None and len(frame) >= budget:
                if budget:
                    steps.append(Send(frame[:budget]))
                steps.append(Cut())
                break
            steps.append(Send(frame))
            if budget is not None:
                budget -= len(frame)
        self._play(rec, steps)

    def _cancel(self, rec: _Rec, response_id: str) -> None:
        stored = self.standin._stored.get(response_id)
        if stored is None:
            return self._fail(rec, 404, f"No response found with id '{response_id}'.", code="not_found")
        with self.standin._lock:
            self.standin._cancelled.add(response_id)
        obj = stored.response_object(response_id)
        obj["status"] = "cancelled"
        self._send_json(200, obj, rec=rec)


def _skip_after_id(payload: bytes, last_event_id: str) -> int:
    """How many leading bytes of `payload` a client reconnecting with `Last-Event-ID: last_event_id` has
    already seen: everything up to the end of the first frame after which the stream's last event ID
    equals it. 0 (send it all) when the ID is empty or no frame sets it."""
    if not last_event_id:
        return 0
    parser = SSEParser()
    pos = 0
    for frame in split_frames(payload):
        parser.feed(frame)
        pos += len(frame)
        if parser.last_event_id == last_event_id:
            return pos
    return 0


def derive_body(payload: bytes, dialect: str, model: str) -> dict[str, Any] | None:
    """The non-streaming JSON a scripted stream stands for, or None when the frames do not say.

    Chat Completions: the content deltas of each choice joined into one message, with the last
    `finish_reason` and the usage chunk if there is one (tool calls are not rebuilt). Responses: the
    `response` object of the last event that carries one (normally `response.completed`).
    """
    events, _ = parse(payload)
    objs = []
    for ev in events:
        try:
            obj = json.loads(ev.data)
        except ValueError:
            continue
        if isinstance(obj, dict):
            objs.append(obj)
    if dialect == "responses":
        found = [o["response"] for o in objs if isinstance(o.get("response"), dict)]
        return dict(found[-1]) if found else None
    chunks = [o for o in objs if o.get("object") == "chat.completion.chunk"]
    if not chunks:
        return None
    texts: dict[int, list[str]] = {}
    finish: dict[int, Any] = {}
    usage = None
    for c in chunks:
        if c.get("usage"):
            usage = c["usage"]
        for choice in c.get("choices") or []:
            i = choice.get("index", 0)
            texts.setdefault(i, [])
            content = (choice.get("delta") or {}).get("content")
            if content:
                texts[i].append(content)
            if choice.get("finish_reason") is not None:
                finish[i] = choice["finish_reason"]
    first = chunks[0]
    return {
        "id": first.get("id", "chatcmpl-standin"),
        "object": "chat.completion",
        "created": first.get("created", 0),
        "model": first.get("model", model),
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": "".join(texts[i]), "refusal": None},
             "logprobs": None, "finish_reason": finish.get(i, "stop")}
            for i in sorted(texts)
        ],
        "usage": usage,
    }


# --- named scenarios (for `streamlab standin` and quick experiments) -----------------------------------

SCENARIOS: dict[str, str] = {
    "ttft": "model 'scheduled': a Chat Completions answer, first token after 0.30 s, then one every 0.05 s "
            "(20 tokens)",
    "responses": "model 'responses': the same schedule as a Responses stream",
    "flaky": "model 'flaky': HTTP 429 with retry-after-ms: 200 on the first request, the answer on the next",
    "cutoff": "model 'cutoff': the connection is cut inside a UTF-8 character on the first request; whole later",
    "stall": "model 'stall': two tokens, then only ': ping' keep-alive comments every second, forever",
    "background": "model 'bg': a background Responses stream cut after 7 events; resume it with "
                  "GET /v1/responses/resp_demo?stream=true&starting_after=N",
}
"""Named scripts; `scenario("all")` serves every one of them at once (each under its own model name)."""


def scenario(name: str) -> dict[str, list[Episode | ErrorEpisode]]:
    """The script of a named scenario (see `SCENARIOS`), or of all of them for "all"."""
    from ..core import shapes  # sans-IO frame builders; only the named scenarios need them

    words = [f"w{i:02d} " for i in range(20)]
    if name == "all":
        merged: dict[str, list[Episode | ErrorEpisode]] = {}
        for each in SCENARIOS:
            merged.update(scenario(each))
        return merged
    if name == "ttft":
        frames = shapes.chat_text_stream(words, model="scheduled")
        steps = paced(frames[:2], first=0.30) + paced(frames[2:len(words) + 1], first=0.05, gap=0.05)
        return {"scheduled": [Episode(steps + [Send(f) for f in frames[len(words) + 1:]])]}
    if name == "responses":
        frames = shapes.responses_text_stream(words, model="responses")
        head = 4  # created, in_progress, output_item.added, content_part.added come with the first delta
        steps = paced(frames[:head + 1], first=0.30) + paced(frames[head + 1:head + len(words)], first=0.05, gap=0.05)
        return {"responses": [Episode(steps + [Send(f) for f in frames[head + len(words):]])]}
    if name == "flaky":
        frames = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"], model="flaky")
        return {"flaky": [error_episode(429, "stand-in: slow down", type="rate_limit_exceeded",
                                        code="rate_limit_exceeded", retry_after_ms=200, retry_after=1),
                          Episode(paced(frames, gap=0.05))]}
    if name == "cutoff":
        frames = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"], model="cutoff")
        inside = frames[3][:frames[3].index(b"\xc3") + 1]  # stop after 0xC3, the lead byte of the two-byte "\u00f6"
        first = [Send(f) for f in frames[:3]] + [Send(inside), Cut()]
        return {"cutoff": [Episode(first), Episode([Send(f) for f in frames])]}
    if name == "stall":
        frames = shapes.chat_text_stream(["still ", "here"], model="stall")
        return {"stall": [Episode([Send(frames[0]), Send(frames[1]), Send(frames[2])]
                                  + [Wait(1.0), KeepAlive()] * 3600)]}
    if name == "background":
        frames = shapes.responses_text_stream(["alpha ", "beta ", "gamma ", "delta"], model="bg")
        whole = StoredResponse.from_frames(frames)
        return {"bg": [Episode([Send(f) for f in frames[:7]] + [Cut()], store_as="resp_demo", stored=whole)]}
    known = ", ".join(["all", *SCENARIOS])
    raise ValueError(f"unknown scenario {name!r}; known: {known}")


# --- the notebook helper --------------------------------------------------------------------------

_current: StandIn | None = None
_current_lock = threading.Lock()


def serve(scripts: Mapping[str, ScriptValue], *, stored: Mapping[str, StoredResponse] | None = None,
          **kwargs: Any) -> StandIn:
    """Start a stand-in for a notebook, first stopping the one a previous call started.

    Re-running a cell that calls `serve(...)` therefore never leaks a server: at most one per process.
    The server is also stopped when the interpreter exits. Keyword arguments go to `StandIn`.
    """
    global _current
    with _current_lock:
        if _current is not None:
            _current.stop()
            _current = None
        _current = StandIn(scripts, stored=stored, **kwargs).start()
        return _current


def stop_serving() -> None:
    """Stop the server `serve()` started, if any."""
    global _current
    with _current_lock:
        if _current is not None:
            _current.stop()
            _current = None


atexit.register(stop_serving)
