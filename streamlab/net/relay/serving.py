"""Any ASGI app under uvicorn on a background thread, and what the relay and the gateway share (I/O layer).

`AppServer` serves one ASGI app on a socket bound in the caller's thread; `ServedApp` is the base of `Relay` and
`Gateway` (start, stop running streams with their marked final event, keep the last `MAX_RECORDS` finished
records in order for callers: a ring, since a server that runs all day must not keep every summary).
The notebook helpers around them (`serve_relay`, `serve_gateway`) hold their server in a
`streamlab.net.slot.Slot`.

uvicorn gives a connection that never finishes its request head all the time it wants, and counts no
connection until a request arrives: 1,100 idle connections against a 1,024-descriptor limit had locked every
client out of the relay and the gateway. `AppServer` therefore serves with `GuardedH11`, uvicorn's own h11
protocol plus two defences: a request head must be complete within `head_timeout` seconds of the
connection (or of the next request's first byte), and at most `max_connections` connections are open at
once (the next one gets a 503 and is closed at once, so its descriptor comes back). The body's deadline is
the app's (`streamlab.net.relay.upstream.read_request_body`); an idle kept-alive connection is closed after
uvicorn's `timeout_keep_alive` (5 s).

A client's FIN after its request means one of two things that look the same on the wire: it half-closed
(`shutdown(SHUT_WR)`, "I have said all I will say", and reads on) or it left (`close()`). Plain uvicorn takes
every FIN for a departure, which cuts a half-closing client's stream. With `half_close=True` the connection
stays open and the app is told (`half_closed(scope)`, a future in the ASGI scope's extensions); a streaming app
then probes: two keep-alive comments a moment apart (`PROBE_GAP`). A client that left answers the first with a
reset, and the second write fails, which ends the stream as a departure within milliseconds; a client that
only half-closed reads two comments that change no event, then the rest of its stream.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from streamlab.core.shapes import error_body

__all__ = [
    "AppServer",
    "ServedApp",
    "GuardedH11",
    "MAX_RECORDS",
    "HEAD_TIMEOUT",
    "HALF_CLOSE",
    "PROBE_GAP",
    "default_max_connections",
    "half_closed",
    "UNSENT",
    "FLUSH_WAIT",
    "flushed",
    "HEAP_SLACK",
    "keep_freed_heap",
]

HEAD_TIMEOUT = 10.0
"""Seconds a client has to send a whole request head, from the connection or the next request's first byte."""


HALF_CLOSE = "streamlab.half_close"
"""The ASGI scope extension `GuardedH11` sets when it serves half-closes: a future, done once the client has shut
its sending side after its request (before that the client is simply there)."""

PROBE_GAP = 0.02
"""Seconds between the two keep-alives that probe a half-closed client: the first write draws a departed
client's reset (on loopback within microseconds, on a network within a round trip), the second one meets it."""


def half_closed(scope: Any) -> Any:
    """The half-close future of a request's scope (`HALF_CLOSE`), or None when its server takes a FIN for a
    departure (then `http.disconnect` comes instead)."""
    return scope.get("extensions", {}).get(HALF_CLOSE)


UNSENT = "streamlab.unsent"
"""The ASGI scope extension `GuardedH11` sets on every request: a function that says how many bytes of the reply
wait in the process, written by the app but not yet taken by the socket (the transport's write buffer)."""

FLUSH_WAIT = 0.05
"""The longest `flushed` waits for a reply's last bytes to leave (a client reading slowly is not waited for)."""

_FLUSH_POLL = 0.0005


async def flushed(scope: Any, timeout: float = FLUSH_WAIT) -> None:
    """Return once the bytes of the reply written so far have left the process for the socket, or after `timeout`
    seconds; after one turn of the event loop on a server that cannot say (no `UNSENT`).

    Why: the relay ends a fast stream's body first and parses its summary after, a part at a time
    (`streamlab.net.relay.wire`). Bytes still in the transport's buffer go out only when the loop comes round
    between two parts, so the client's last bytes had waited for the parse."""
    unsent = scope.get("extensions", {}).get(UNSENT)
    if unsent is None:
        await asyncio.sleep(0)
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while unsent() and loop.time() < deadline:
        await asyncio.sleep(_FLUSH_POLL)


HEAP_SLACK = 32 << 20
"""Bytes of freed heap a relay or gateway process keeps for its next streams instead of handing them back to
the system (`keep_freed_heap`): eight of its largest unparsed bursts (`MAX_UNPARSED_BYTES`)."""

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter number (malloc.h)


def keep_freed_heap(slack: int = HEAP_SLACK) -> bool:
    """Have the C allocator keep up to `slack` bytes of freed heap instead of returning it to the system after
    every stream (glibc's `M_TRIM_THRESHOLD`). Process-wide, so only a server process of its own calls it (the
    `streamlab relay` command), never a notebook's kernel. True when the allocator took it (glibc on Linux).

    Why: a relay keeps each stream's bytes until its summary has parsed them, after the client's last byte
    (`streamlab.core.relay.stream.RelayedStream.follow`): 2.3 MB of 64 KiB chunks for a fast stream. glibc
    returns the freed top of its heap to the system once more than 128 KiB lie free there, so the next stream
    touched fresh pages again: 453 minor page faults per stream in the relay's process (the pass-through's: 1),
    1.8 ms of system time against 0.6; with it, 4 faults (tests/relay/test_relay_bursts.py counts them from
    `/proc/PID/stat`)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library to ask, or one without mallopt
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_TRIM_THRESHOLD, max(0, min(slack, 2**31 - 1))))


def _raw_reply(status: str, message: str, kind: str, extra: str = "") -> bytes:
    """A whole HTTP/1.1 reply, written before (or instead of) uvicorn's own: an OpenAI-shaped error, then close."""
    body = json.dumps(error_body(message, kind)).encode()
    head = f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}connection: close\r\n"
    return head.encode() + b"content-length: %d\r\n\r\n" % len(body) + body


_REFUSED = _raw_reply(
    "503 Service Unavailable", "too many connections at once; try again shortly", "server_error", "retry-after: 1\r\n"
)
_LATE = _raw_reply("408 Request Timeout", "the request head did not arrive in time", "invalid_request_error")


def default_max_connections() -> int:
    """Half the process's file descriptors (each relayed stream also holds one upstream), at most 1,000."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 500
    if soft == resource.RLIM_INFINITY:
        return 1000
    return max(16, min(1000, soft // 2 - 32))


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head and a cap on open connections (module
    docstring). `head_timeout` and `max_connections` are set on a subclass per server (`AppServer` does)."""

    head_timeout: float = HEAD_TIMEOUT
    max_connections: int = 500
    half_close: bool = False

    def connection_made(self, transport: Any) -> None:
        self._head_timer: Any = None
        self._got = False
        self._half_closed = False
        self._eof: Any = None  # the current request's half-close future (HALF_CLOSE), when half_close is on
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.write(_REFUSED)
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        self._got = True
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the first byte of the next request on a kept-alive connection
        cycle = self.cycle
        super().data_received(data)
        if self.cycle is not cycle:  # a whole request head arrived
            self._disarm()
            if self.cycle is not None:  # the app's task has not run yet: it sees the extensions
                extensions = self.cycle.scope.setdefault("extensions", {})
                extensions[UNSENT] = self.transport.get_write_buffer_size
                if self.half_close:
                    self._eof = self.loop.create_future()
                    extensions[HALF_CLOSE] = self._eof

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """A request h11 cannot parse (a 5,000-digit Content-Length, a bad chunk size, a stray byte in a header)
        gets an OpenAI-shaped JSON 400, as every other refusal of these servers does: uvicorn's own reply is
        plain text, which an SDK reports as an unreadable error."""
        message = f"the request is not valid HTTP/1.1 ({msg.rstrip('.')})"
        body = json.dumps(error_body(message, "invalid_request_error")).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"connection", b"close"),
        ]
        response = h11.Response(status_code=400, headers=headers, reason=b"Bad Request")
        with contextlib.suppress(h11.LocalProtocolError):  # a reply already begun: only the close is left
            for event in (response, h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event) or b"")
        self.transport.close()

    def eof_received(self) -> bool | None:  # type: ignore[override]  # True keeps the transport open (asyncio's rule)
        """The client shut its sending side. With `half_close`, after a whole request, that may be a half-close
        ("I have said all I will say") or a departure: keep the transport open, so the reply (a whole stream)
        can still go out, tell the app (its `half_closed(scope)` future), which probes with two keep-alives, and
        close once the reply is complete. Without it, or anywhere else: closed, as uvicorn does."""
        cycle = self.cycle
        if not self.half_close:
            return None
        # A whole request leaves h11's client in DONE, or in MUST_CLOSE when it asked to close after it
        # (`Connection: close`, any HTTP/1.0 request): a half-close either way.
        if cycle is not None and not cycle.response_complete and self.conn.their_state in _REQUEST_SENT:
            self._half_closed = True
            if self._eof is not None and not self._eof.done():
                self._eof.set_result(None)
            return True
        return None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._half_closed and not self.transport.is_closing():
            self.transport.close()  # nothing more can come from a client that half-closed

    def _arm(self) -> None:
        self._head_timer = self.loop.call_later(self.head_timeout, self._late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _late(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            if self._got:
                self.transport.write(_LATE)
            self.transport.close()


_REQUEST_SENT = (h11.DONE, h11.MUST_CLOSE)
"""h11's states of a client that has sent its whole request (kept alive, or to be closed after the reply)."""


_OUT_OF_DESCRIPTORS = "socket.accept() out of system resource"
"""asyncio's message when an accept fails for want of file descriptors (EMFILE, ENFILE) or memory: it stops
accepting for a second and tries again, which is the right answer to a connection flood."""


class _Server(uvicorn.Server):
    """uvicorn's server, whose event loop counts an accept that ran out of descriptors (`AppServer.accept_pauses`)
    instead of printing a traceback: a flood of connections past `ulimit -n` is expected in a room, asyncio
    already pauses accepting for a second and recovers, and a traceback on stderr said something had broken."""

    def __init__(self, config: uvicorn.Config, owner: AppServer) -> None:
        super().__init__(config)
        self._owner = owner

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        before = loop.get_exception_handler()

        def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            if context.get("message") == _OUT_OF_DESCRIPTORS:
                self._owner.accept_pauses += 1
            elif self.should_exit and "_start_serving" in str(context.get("message", "")):
                pass  # that pause's resume timer fired after the listening socket closed: nothing left to serve
            elif before is not None:
                before(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handler)
        await super().startup(sockets=sockets)


MAX_RECORDS = 10_000
"""Finished records (summaries, log lines) a relay or gateway keeps for callers; older ones are forgotten."""


class AppServer:
    """Any ASGI app under uvicorn on a background thread, as a context manager (the reference relay runs on
    one; so do the checker's tests' deliberately broken relays).

    It binds in `start()`, in the caller's thread, so a busy port fails there; `port` and `url` say where it
    listens. `stop()` asks uvicorn to exit (streams still running get `graceful` seconds, then are
    cancelled), joins the thread and closes the socket. By default a client's FIN is its departure, as plain
    uvicorn takes it (lab 07's learner relays are served so: a stage without keep-alives cannot probe).
    `half_close=True` serves a client that half-closed after its request its whole stream: the app learns of the
    FIN through `half_closed(scope)` and probes (module docstring); the reference relay and the gateway do.
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        graceful: float = 2.0,
        name: str = "asgi",
        head_timeout: float = HEAD_TIMEOUT,
        max_connections: int | None = None,
        half_close: bool = False,
    ) -> None:
        if not head_timeout > 0 or (max_connections is not None and max_connections < 1):
            raise ValueError(
                f"head_timeout must be > 0 and max_connections >= 1, got {head_timeout}, {max_connections}"
            )
        self.app = app
        self.head_timeout = head_timeout
        self.max_connections = default_max_connections() if max_connections is None else max_connections
        self.half_close = half_close
        self.host = host
        self._requested_port = port
        self._graceful = graceful
        self._name = name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.accept_pauses = 0  # accepts that found no file descriptor free (asyncio waited a second each time)

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
        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level="critical",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=int(self._graceful) or 1,
            http=type(
                "GuardedH11",
                (GuardedH11,),
                {
                    "head_timeout": self.head_timeout,
                    "max_connections": self.max_connections,
                    "half_close": self.half_close,
                },
            ),
        )
        self._server = _Server(config, self)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"{self._name}:{self.port}", daemon=True
        )
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

    def open_connections(self) -> int:
        """Connections open right now (idle ones included)."""
        server = self._server
        return 0 if server is None else len(server.server_state.connections)

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

    def _serve(
        self,
        app: Any,
        state: Any,
        *,
        host: str,
        port: int,
        name: str,
        on_record: Callable[[dict[str, Any]], None] | None,
        max_records: int = MAX_RECORDS,
        max_connections: int | None = None,
    ) -> None:
        self._app = app
        self._state = state
        self._on_record = on_record
        self._records: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_records)
        self._count = 0  # records ever written (the ring forgets, this does not)
        self._cond = threading.Condition()
        # Half-closes served: both apps probe a client whose FIN came after its request (module docstring).
        self._server = AppServer(app, host=host, port=port, name=name, max_connections=max_connections, half_close=True)

    def _record(self, record: dict[str, Any]) -> None:
        with self._cond:
            self._records.append(record)
            self._count += 1
            self._cond.notify_all()
        if self._on_record is not None:
            self._on_record(record)

    def _recorded(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._records)

    def _wait_for_records(self, count: int, timeout: float) -> bool:
        """Block until at least `count` records were ever written (forgotten ones count); False on timeout."""
        end = time.monotonic() + timeout
        with self._cond:
            while self._count < count:
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

    def open_connections(self) -> int:
        """Connections open right now (idle ones included; at most `max_connections` stay open)."""
        return self._server.open_connections()

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def base_url(self) -> str:
        """What a client uses as its base URL: `http://HOST:PORT/v1`."""
        return f"{self._server.url}/v1"
