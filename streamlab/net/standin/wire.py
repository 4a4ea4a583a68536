"""One stand-in connection on the wire: read requests, carry out the planner's actions (I/O layer).

`Connection.serve()` is the whole life of one TCP connection: read a request head (with a deadline),
let `streamlab.core.standin.request` parse and admit it, read the body (with a deadline), ask the server's
planner what to do, and do it: write a JSON reply, or play a stream of pauses, chunk writes and cuts.
Then, if both sides allow it, wait for the next request on the same connection. Nothing is decided here:
routing, validation, resume points and endings come from the sans-IO core; this module only reads,
writes, waits and closes, and records what it did.

Timing: a stream's first pause counts from the moment the request's last byte arrived (on Linux, the time the
kernel stamped on it, `stamp_arrivals`; elsewhere, when the read returned), and each later pause from the moment
the chunk before it was handed to the operating system. So the work of reading, planning and recording (and, in
a burst, waiting for the other connections' turns under the GIL) is spent inside the scripted wait instead of
being added to it. An `Episode(timeline=True)` (a replayed capture) counts each later pause from the moment the
script's schedule gave the chunk before it instead, so a busy machine's delays do not add up over a replay.

While it pauses, it watches the socket and the server's stop signal (no polling), so a client that hangs up is
noticed at once. A client's FIN is its departure, as for the model servers it stands in for (llama-cpp-python and
every Starlette app under uvicorn close the connection on it): a relay that closes its upstream must see the
stream end at once, in the middle of a long pause too, and a FIN and a half-close (`shutdown(SHUT_WR)`) are the
same segment. The stand-in cannot probe as the relay does (`streamlab.net.relay.serving`): its bytes are the
script's, and a keep-alive comment the script did not ask for would change what a lab shows. Reads have
deadlines (`Limits`) so a client that sends half a request cannot hold a thread for ever.

A room of a thousand streams would be a thousand handler threads, each waking for each frame and waiting its turn
under the GIL behind the others. So streams are played by the server's one `Player` thread
(`streamlab.net.standin.player`), which also waits for each kept-alive connection's next request and serves it
there when it can: a handler thread sleeps while its connection is parked or its stream plays. A frame costs one
send on a socket that is non-blocking for good (a socket with a timeout polls before every send and recv), and
its record takes no lock but its own (`streamlab.net.standin.records`). The waits left to a handler thread use
`poll`, which watches descriptors past 1024, where `select.select` raises.

A few paths are not the API: the server's own pages (the room dashboard). For those the host hands back a
`PageHandler`, which serves the request with the connection's public methods (`send`, `send_reply`,
`peer_closed`); such requests leave no request record, since they are nobody's API call.
"""

from __future__ import annotations

import json
import math
import platform
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from typing import Protocol

from streamlab.core.endings import Ending
from streamlab.core.shapes import error_body
from streamlab.core.standin.actions import (
    EVENT_STREAM_HEADERS,
    Decision,
    Reply,
    Stream,
    reply_ending,
    stream_ending,
)
from streamlab.core.standin.request import (
    MAX_HEAD_BYTES,
    Request,
    RequestHead,
    admit,
    head_end,
    parse_head,
    refusal,
    request_line_reply,
)
from streamlab.core.standin.room import learner_of
from streamlab.net.standin.player import CUT, GONE, Client, Parkable, Parked, Playing, Step
from streamlab.net.standin.records import OpenRecord, RecordBook

__all__ = [
    "Limits",
    "Host",
    "Connection",
    "PageHandler",
    "refuse_connection",
    "stamp_arrivals",
    "default_max_connections",
    "DEFAULT_MAX_CONNECTIONS",
    "SERVER_NAME",
]

SERVER_NAME = "streamlab-standin"
_DRAIN_LIMIT = 16 * 1024 * 1024
_SMALL_REPLY = 64 * 1024  # a reply the player sends itself: a socket always has room for it (larger go back)
_CHUNKED = (*EVENT_STREAM_HEADERS, ("Transfer-Encoding", "chunked"))
_DONE, _GONE, _STOPPING = "done", "gone", "stopping"

# Linux stamps each arriving packet on request: SO_TIMESTAMPNS, which Python 3.11's socket module does not name; it
# is 35 on the asm-generic ABI of these machines (alpha, mips, parisc and sparc number it otherwise)
_GENERIC_ABI = {"x86_64", "amd64", "i386", "i686", "aarch64", "arm64", "armv7l", "riscv64"}
_TIMESTAMPNS = 35 if sys.platform.startswith("linux") and platform.machine().lower() in _GENERIC_ABI else 0
_TIMESPEC = struct.Struct("@ll")  # the kernel's struct timespec (old ABI): seconds and nanoseconds, C longs
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if _TIMESTAMPNS else 0
_STALE = 1.0  # seconds: a kernel stamp older than this is not trusted (the wall clock may have been set)
_POLL = getattr(select, "poll", None)  # not on Windows: `_readable` uses select.select there


def stamp_arrivals(sock: socket.socket) -> bool:
    """Ask the kernel to stamp the arrival time of what `sock` receives (a listening socket passes it on to the
    sockets it accepts). True when it will: Linux on the common machines; elsewhere reads are timed as they return.
    """
    if not _TIMESTAMPNS:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def default_max_connections() -> int:
    """Connections the stand-in serves at once by default: a room of a thousand learners, their relay's
    connections and the dashboards (1,100), or fewer where the process may open fewer descriptors (each
    connection holds one; 128 are left for everything else). It had been 256: a room of 1,000 behind a relay got
    744 refusals, each a reset the relay turned into a 502."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 256
    if soft == resource.RLIM_INFINITY:
        return 1100
    return max(16, min(1100, soft - 128))


DEFAULT_MAX_CONNECTIONS = default_max_connections()


@dataclass(frozen=True)
class Limits:
    """How much a client may take from the server. Times are seconds.

    `header_timeout`: from the connection (or the first byte of a later request) to the end of the head.
    `body_timeout`: from the end of the head to the last body byte. `idle_timeout`: how long a kept-alive
    connection may wait for its next request. `send_timeout`: how long one write may block on a client that
    does not read. `max_connections`: connections served at once; the next one gets a 503 (default
    `DEFAULT_MAX_CONNECTIONS`).
    """

    max_body_bytes: int = 1024 * 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    idle_timeout: float = 60.0
    send_timeout: float = 60.0
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "idle_timeout", "send_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {getattr(self, name)!r}")
        if self.max_connections < 1 or self.max_body_bytes < 0:
            raise ValueError(
                f"max_connections must be >= 1 and max_body_bytes >= 0, got "
                f"{self.max_connections}, {self.max_body_bytes}"
            )


class Host(Protocol):
    """What a connection may use of its server, and nothing more."""

    limits: Limits
    book: RecordBook
    stopping: threading.Event

    @property
    def wakeup(self) -> socket.socket:
        """Becomes readable once `stopping` is set, so a pause can wait on it and on the client at once."""

    def decide(self, request: Request) -> Decision: ...

    def cancelled(self, stream: Stream) -> bool: ...

    def play(self, client: Client, stream: Stream, rec: OpenRecord, *, since: float, read_cap: int) -> Playing:
        """Play `stream` on `client` (the server's `Player`); returns once it is over."""

    def park(self, client: Parkable, *, idle: float, read_cap: int) -> Parked:
        """Wait in the server's `Player` for `client`'s next request (`Connection.arrived`); returns when the
        connection is over or wants its thread back."""

    def page(self, head: RequestHead) -> PageHandler | None:
        """The handler of a request for one of the server's own pages, or None for an API request."""


PageHandler = Callable[["Connection", RequestHead], bool]
"""Serves one request for a page on the connection; True when the connection may carry another request."""


class _Gone(Exception):
    """The client closed or reset the connection (or the server is stopping under it)."""


def _head_bytes(status: int, headers: tuple[tuple[str, str], ...], close: bool) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    lines = [f"HTTP/1.1 {status} {phrase}", f"Server: {SERVER_NAME}", f"Date: {formatdate(usegmt=True)}"]
    lines += [f"{name}: {value}" for name, value in headers]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")


_BODY_HEADERS = ("content-type", "content-length")


def _json_head(reply: Reply, length: int, close: bool) -> bytes:
    """The head of a whole reply: its own Content-Type when its headers give one (a replayed capture's bytes keep
    the type they came with), else application/json, or text/plain for a body of bytes. A 204 has no body and
    announces none: no Content-Type, no Content-Length (RFC 9110, 8.6)."""
    if reply.status == 204:
        return _head_bytes(204, tuple(h for h in reply.headers if h[0].lower() not in _BODY_HEADERS), close)
    kind = "text/plain; charset=utf-8" if isinstance(reply.body, bytes) else "application/json"
    own = [(name, value) for name, value in reply.headers if name.lower() == "content-type"]
    rest = tuple((name, value) for name, value in reply.headers if name.lower() != "content-type")
    headers = (("Content-Type", own[0][1] if own else kind), ("Content-Length", str(length)), *rest)
    return _head_bytes(reply.status, headers, close)


def _payload(reply: Reply) -> bytes:
    """The reply's body bytes: its JSON, or its bytes as they are (a plain-text error page)."""
    return reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode("utf-8")


def _stamps(sock: socket.socket) -> bool:
    try:
        return bool(sock.getsockopt(socket.SOL_SOCKET, _TIMESTAMPNS))
    except OSError:
        return False


def _arrival(ancillary: list[tuple[int, int, bytes]]) -> float:
    """When the bytes of one read arrived, as a `time.perf_counter()` value: the kernel's stamp on the last of
    them when it gave one (a wall-clock time, moved onto perf_counter's clock and kept within the last second),
    else now."""
    now = time.perf_counter()
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == _TIMESTAMPNS and len(raw) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(raw)
            at = seconds + nanoseconds * 1e-9 - (time.time() - now)
            return min(now, max(at, now - _STALE))
    return now


def _readable(socks: list[socket.socket], timeout: float | None) -> list[socket.socket]:
    """Those of `socks` that are readable (or closed, or in error) within `timeout` seconds (None: no limit).
    `poll` where the system has it: `select.select` cannot watch a descriptor numbered 1024 or more, and a room
    of a thousand learners numbers its sockets past that (it raised ValueError, and each stream ended as if its
    client had gone). ValueError for a closed socket, as `select.select` does."""
    if _POLL is None:
        return select.select(socks, [], [], timeout)[0]
    poller = _POLL()
    for sock in socks:
        poller.register(sock, select.POLLIN)
    ready = poller.poll(None if timeout is None else math.ceil(max(timeout, 0.0) * 1000))
    fds = {fd for fd, _ in ready}
    return [sock for sock in socks if sock.fileno() in fds]


def _writable(sock: socket.socket, timeout: float) -> bool:
    """Whether `sock` can take more bytes (or is closed, or in error: the next send says which) within `timeout`
    seconds."""
    if _POLL is None:
        return bool(select.select([], [sock], [], timeout)[1])
    poller = _POLL()
    poller.register(sock, select.POLLOUT)
    return bool(poller.poll(math.ceil(max(timeout, 0.0) * 1000)))


def refuse_connection(sock: socket.socket, cap: int) -> None:
    """Answer a connection over the cap with a 503 from the accepting thread, without blocking it."""
    message = f"the stand-in is serving its maximum of {cap} connections at once; try again shortly"
    reply = Reply(503, error_body(message, "server_error", "too_many_connections"), (("Retry-After", "1"),))
    payload = json.dumps(reply.body).encode("utf-8")
    try:
        sock.setblocking(False)
        try:
            while sock.recv(65536):  # drop what already arrived, so that closing does not reset the reply
                pass
        except BlockingIOError:
            pass
        sock.send(_json_head(reply, len(payload), close=True) + payload)
    except OSError:
        pass


@dataclass(frozen=True)
class _Begun:
    """An exchange the player began and hands to the connection's thread: the reply to send after its pause (from
    `since`), or the error to answer with a 500; its record is open."""

    head: RequestHead
    rec: OpenRecord
    what: Reply | Exception
    since: float


class Connection:
    """Serve the requests of one accepted socket until either side ends the connection."""

    def __init__(self, sock: socket.socket, host: Host, *, peer: str = "") -> None:
        self.sock = sock
        self.host = host
        self.peer = peer  # the client's address (a room's per-address limits)
        self.limits = host.limits
        self.book = host.book
        self.buf = bytearray()  # bytes received and not yet consumed (the rest of a head, a pipelined request)
        self.received_at = 0.0  # perf_counter() time by which every byte received so far had arrived
        self.eof = False  # the client has shut its sending side: its departure (module docstring)
        self.fresh = False  # `buf` was filled by the player: `received_at` is its bytes' arrival, not a pipelining
        self._head: RequestHead | None = None  # the request whose stream the player plays (`arrived`, `played`)
        self._waiting: tuple[RequestHead, int, int] | None = None  # a head whose body the player waits for
        self._late = False  # the player waited `body_timeout` for that body in vain
        # Non-blocking for good, and every wait is our own `_readable`/`_writable`: a socket with a timeout polls
        # before each send and recv, and a timeout set per call is one more system call, each a turn to wait for
        # under the GIL when a thousand streams run at once (the module docstring).
        sock.settimeout(0.0)
        self._stamped = bool(_TIMESTAMPNS) and _stamps(sock)  # the kernel stamps what arrives (`stamp_arrivals`)

    def serve(self, parked: Parked | None = None) -> None:
        """Serve requests until the connection ends. `parked` is how a wait in the player that began before this
        thread existed ended (`Player.adopt`: the connection came back to be served here)."""
        first = parked is None
        while not self.host.stopping.is_set():
            if parked is None and not self.buf and not self.eof:  # wait for the request in the player
                idle = self.limits.header_timeout if first else self.limits.idle_timeout
                parked = self.host.park(self, idle=idle, read_cap=self.read_cap)
            if parked is not None:
                done, parked = parked, None
                first, self._waiting = False, None  # a body the player waited for in vain: read here from the head,
                self._late = done.expired  # and refused at once (its time is up)
                if done.outcome != Step.BACK:
                    return
                if done.pending is not None:  # the player began the exchange; it goes on here
                    if not self._resume(done.pending):
                        return
                    continue
            got = self._read_head(first)
            first = False
            if got is None:
                return
            head = got if isinstance(got, Reply) else parse_head(got)
            if isinstance(head, Reply):  # a head too broken to record: answer and close
                self._send_bare(head)
                return
            page = self.host.page(head)
            if page is not None:
                if not self._page(page, head):
                    return
            elif not self._request(head):
                return

    # -- reading --

    def _fill(self, deadline: float) -> bool | None:
        """Receive more bytes into the buffer: True, or False at end of input, or None at the deadline."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                if not _readable([self.sock], left):
                    return None
            except (OSError, ValueError):
                return False
            got = self._receive()
            if got is not None:  # (None: woken for nothing: wait again)
                return got

    def _receive(self) -> bool | None:
        """One read of what the socket holds, without waiting: True (added to `buf`, `received_at` its arrival),
        False (the client ended its input, or the connection failed), None (nothing was there)."""
        ancillary: list[tuple[int, int, bytes]] = []
        try:
            if self._stamped:
                data, ancillary, _, _ = self.sock.recvmsg(65536, _ANCILLARY)
            else:
                data = self.sock.recv(65536)
        except BlockingIOError:
            return None
        except (OSError, ValueError):
            return False
        if not data:
            self.eof = True
            return False
        self.buf += data
        self.received_at = _arrival(ancillary)
        return True

    def _read_head(self, first: bool) -> bytes | Reply | None:
        """The next request head, a refusal to send, or None when the connection should just close."""
        limits, start = self.limits, time.monotonic()
        fresh, self.fresh = self.fresh, False
        if self._strip_blank_lines():
            if not fresh:  # a pipelined request: its exchange starts now, not on arrival
                self.received_at = time.perf_counter()
        elif not self._fill(start + (limits.header_timeout if first else limits.idle_timeout)):
            return None  # closed, or idle for too long: close quietly
        deadline = (start if first else time.monotonic()) + limits.header_timeout
        checked, scanned = False, 0
        while True:
            self._strip_blank_lines()
            if not checked and b"\n" in self.buf:
                problem = request_line_reply(bytes(self.buf[: self.buf.index(b"\n")]))
                if problem is not None:
                    return problem
                checked = True
            end = head_end(self.buf, max(0, scanned - 3)) if checked else None
            if end is not None and end <= MAX_HEAD_BYTES:
                raw = bytes(self.buf[:end])
                del self.buf[:end]
                return raw
            scanned = len(self.buf)
            if scanned > MAX_HEAD_BYTES or end is not None:
                return refusal(431, f"the request head is over {MAX_HEAD_BYTES} bytes")
            got = self._fill(deadline)
            if got is None:
                return refusal(408, f"the request head did not arrive within {limits.header_timeout:g} s")
            if not got:
                return None

    def _strip_blank_lines(self) -> bool:
        """Drop empty lines before a request line (allowed by HTTP/1.1); True when bytes remain."""
        while self.buf[:1] in (b"\r", b"\n"):
            del self.buf[:1]
        return bool(self.buf)

    def _read_body(self, length: int) -> bytes | Reply:
        late, self._late = self._late, False
        deadline = time.monotonic() + (0.0 if late else self.limits.body_timeout)
        while len(self.buf) < length:
            got = self._fill(deadline)
            if got is None:
                return refusal(
                    408,
                    f"the request body did not arrive within {self.limits.body_timeout:g} s "
                    f"({len(self.buf)} of {length} bytes came)",
                )
            if not got:
                raise _Gone
        body = bytes(self.buf[:length])
        del self.buf[:length]
        return body

    def _drain(self) -> None:
        """Read and drop what the client is still sending (waiting 50 ms at most for more): closing a socket
        with unread input resets the connection, and the client would lose the reply it is owed."""
        dropped = len(self.buf)
        self.buf.clear()
        try:
            while dropped < _DRAIN_LIMIT:
                readable = _readable([self.sock], 0.05)
                if not readable:
                    return
                data = self.sock.recv(65536)
                if not data:
                    return
                dropped += len(data)
        except BlockingIOError:
            return  # readable for nothing: nothing more came
        except (OSError, ValueError):
            return

    # -- the server's own pages --

    def _page(self, page: PageHandler, head: RequestHead) -> bool:
        """Serve a page request (no record: it is nobody's API call); True when the connection may go on."""
        admission = admit(head, max_body_bytes=self.limits.max_body_bytes)
        body = admission if isinstance(admission, Reply) else self._read_body(admission.length)
        if isinstance(body, Reply):
            self._send_bare(body)
            return False
        try:
            keep = page(self, head)
        except OSError:
            return False
        return keep and head.keep_alive and not self.host.stopping.is_set()

    def send(self, data: bytes) -> None:
        """Write `data` (blocking at most the send timeout); OSError when the client is gone."""
        self._send(data)

    def send_reply(
        self,
        status: int,
        body: bytes,
        content_type: str,
        *,
        headers: tuple[tuple[str, str], ...] = (),
        close: bool = False,
        length: int | None = None,
    ) -> None:
        """Write one whole response: status line, headers, then `body`. `length` is the Content-Length when
        it is not the body's own (a HEAD reply announces the body it leaves out)."""
        base = (("Content-Type", content_type), ("Content-Length", str(len(body) if length is None else length)))
        self._send(_head_bytes(status, (*base, *headers), close) + body)

    def send_stream_head(self, headers: tuple[tuple[str, str], ...]) -> None:
        """Start a chunked 200 event stream; write its chunks with `send_chunk`."""
        self._send(_head_bytes(200, (*EVENT_STREAM_HEADERS, ("Transfer-Encoding", "chunked"), *headers), False))

    def send_chunk(self, data: bytes) -> None:
        """Write `data` as one HTTP chunk (nothing for empty data: an empty chunk would end the body)."""
        if data:
            self._send(b"%x\r\n%s\r\n" % (len(data), data))

    def peer_closed(self, wait: float = 0.0) -> bool:
        """Whether the client has closed its end (checked for at most `wait` seconds). Bytes it sends meanwhile
        are kept as the start of its next request."""
        try:
            readable = _readable([self.sock], wait)
            if not readable:
                return False
            data = self.sock.recv(65536)
        except BlockingIOError:
            return False
        except (OSError, ValueError):
            return True
        if not data:
            return True
        if len(self.buf) <= MAX_HEAD_BYTES:
            self.buf += data
        return False

    # -- one request --

    def _request(self, head: RequestHead) -> bool:
        """Serve one request and record it; True when the connection may carry another."""
        rec = self.book.open(head.method, head.target, head.as_dict(), learner_of(head))
        keep = False
        try:
            keep = self._exchange(head, rec)
        except (_Gone, OSError):
            self._gone(rec)
        except Exception as exc:  # a bug in the stand-in: say so in a 500 rather than fall silent
            self._internal_error(exc, head, rec)
        finally:
            self.book.close(rec)
        return keep and head.keep_alive and not self.host.stopping.is_set()

    def _exchange(self, head: RequestHead, rec: OpenRecord) -> bool:
        admission = admit(head, max_body_bytes=self.limits.max_body_bytes)
        if isinstance(admission, Reply):
            return self._reply(admission, head, rec)
        if admission.send_continue:
            self._send(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = self._read_body(admission.length)
        if isinstance(body, Reply):
            return self._reply(body, head, rec)
        arrived = self.received_at  # the request's last byte: every scripted wait counts from here
        action = self._decide(head, body, rec, arrived)
        if isinstance(action, Reply):
            return self._reply(action, head, rec, since=arrived)
        return self._play(action, rec, since=arrived)

    def _decide(self, head: RequestHead, body: bytes, rec: OpenRecord, arrived: float) -> Reply | Stream:
        """Record the whole request and ask the planner what to do (from either thread)."""
        self.book.update(rec, arrived_at=arrived)
        self.book.body(rec, body)
        decision = self.host.decide(Request(head, body, peer=self.peer))
        self.book.note(rec, decision.note)
        return decision.action

    def _gone(self, rec: OpenRecord) -> None:
        stopping = self.host.stopping.is_set()
        self.book.update(rec, ending=Ending.STOPPED if stopping else Ending.CLIENT_GONE, client_gone=not stopping)

    # -- in the player's thread: a whole request served without waking this connection's thread --

    @property
    def read_cap(self) -> int:
        """The most bytes kept for requests not read yet (a head and a body at their limits)."""
        return MAX_HEAD_BYTES + self.limits.max_body_bytes

    def take(self) -> bool | None:
        """(`Parkable`) Read what the socket holds, without waiting: True, False (ended or failed), None."""
        got = self._receive()
        if got:
            self.fresh = True
        return got

    def arrived(self) -> Step:
        """(`Parkable`) What to do with the bytes in `buf`: wait for the rest of the request; or, once it is whole,
        play the planner's stream or send its reply here; or hand the connection back to its thread for whatever
        could block (a refusal of a malformed head, a page, `100 Continue`, a reply that waits, drains or is large),
        with what was decided, if anything."""
        buf, waiting = self.buf, self._waiting
        if waiting is None:  # the head, parsed once: a body that comes in many pieces costs one check a piece
            self._strip_blank_lines()
            line_end = buf.find(b"\n")
            end = None if line_end < 0 else head_end(buf)
            if end is None or end > MAX_HEAD_BYTES or request_line_reply(bytes(buf[:line_end])) is not None:
                # a head not whole in its first read (rare: clients write it at once) is read by the thread,
                # which scans each byte once (`_read_head`); a malformed one it refuses
                return Step(Step.BACK)
            head = parse_head(bytes(buf[:end]))
            if isinstance(head, Reply) or self.host.page(head) is not None:
                return Step(Step.BACK)
            admission = admit(head, max_body_bytes=self.limits.max_body_bytes)
            if isinstance(admission, Reply) or admission.send_continue:
                return Step(Step.BACK)
            waiting = self._waiting = (head, end, admission.length)
        head, end, length = waiting
        if len(buf) - end < length:
            return Step(Step.WAIT)
        self._waiting = None
        body = bytes(buf[end : end + length])
        del buf[: end + length]
        self.fresh = False
        arrived = self.received_at
        rec = self.book.open(head.method, head.target, head.as_dict(), learner_of(head))
        try:
            action = self._decide(head, body, rec, arrived)
            if isinstance(action, Stream):
                self._send(_head_bytes(200, (*_CHUNKED, *action.headers), close=False))
                self.book.update(rec, status=200)
                self._head = head  # for `played`: whether the connection may carry another request
                return Step(Step.PLAY, stream=action, rec=rec, since=arrived)
            if action.wait or action.drain or len(_payload(action)) > _SMALL_REPLY:
                return Step(Step.BACK, pending=_Begun(head, rec, action, arrived))  # the record stays open
            keep = self._reply(action, head, rec, since=arrived)
        except (_Gone, OSError):
            self._gone(rec)
            keep = False
        except Exception as exc:  # a bug: the thread says so in a 500 (`_internal_error`, which may wait)
            return Step(Step.BACK, pending=_Begun(head, rec, exc, arrived))
        self.book.close(rec)
        return self._next(keep and head.keep_alive)

    def played(self, job: Playing) -> Step:
        """(`Parkable`) The stream `arrived` started has ended: finish its exchange; what next."""
        head = self._head
        assert head is not None, "a stream ended that `arrived` did not start"
        self._head = None
        try:
            keep = self._played(job)
        except (_Gone, OSError):
            self._gone(job.rec)
            keep = False
        except Exception as exc:
            return Step(Step.BACK, pending=_Begun(head, job.rec, exc, 0.0))
        self.book.close(job.rec)
        return self._next(keep and head.keep_alive)

    def _next(self, keep: bool) -> Step:
        if not keep or self.host.stopping.is_set():
            return Step(Step.CLOSE)
        return Step(Step.BACK) if self.buf else Step(Step.WAIT)  # a pipelined request: its thread reads it

    def _resume(self, pending: object) -> bool:
        """Carry on, in this thread, an exchange the player began (`arrived`): send its reply or its 500; close
        its record. True when the connection may carry another request."""
        assert isinstance(pending, _Begun), pending
        head, rec, what, since = pending.head, pending.rec, pending.what, pending.since
        keep = False
        try:
            if isinstance(what, Exception):
                self._internal_error(what, head, rec)
            else:
                keep = self._reply(what, head, rec, since=since)
        except (_Gone, OSError):
            self._gone(rec)
        except Exception as exc:
            self._internal_error(exc, head, rec)
        finally:
            self.book.close(rec)
        return bool(keep and head.keep_alive and not self.host.stopping.is_set())

    def _internal_error(self, exc: Exception, head: RequestHead, rec: OpenRecord) -> None:
        message = f"stand-in internal error: {type(exc).__name__}: {exc}"
        try:
            self._reply(Reply(500, error_body(message, "server_error"), close=True, drain=True), head, rec)
        except OSError:
            self.book.update(rec, ending=Ending.CLIENT_GONE, client_gone=True)

    # -- doing --

    def _send(self, data: bytes) -> None:
        """Write all of `data`: at once when the socket takes it (one system call, the usual case), else waiting
        for room at most `send_timeout` seconds in all (TimeoutError, an OSError, past it)."""
        view, deadline = memoryview(data), None
        while True:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                pass
            if not view:
                return
            if deadline is None:
                deadline = time.monotonic() + self.limits.send_timeout
            left = deadline - time.monotonic()
            if left <= 0 or not _writable(self.sock, left):
                raise TimeoutError(f"the client took nothing for {self.limits.send_timeout:g} s")

    def _send_bare(self, reply: Reply) -> None:
        """A refusal before any record exists (a head that could not be parsed)."""
        payload = json.dumps(reply.body).encode("utf-8")
        try:
            self._drain()
            self._send(_json_head(reply, len(payload), close=True) + payload)
        except OSError:
            pass

    def _reply(self, reply: Reply, head: RequestHead, rec: OpenRecord, *, since: float | None = None) -> bool:
        """Write one JSON reply (after its pause, counted from `since`); True when the connection may carry
        another request."""
        if reply.wait and self._pause(reply.wait, since=since) != _DONE:
            raise _Gone
        payload = _payload(reply)
        close = reply.close or not head.keep_alive
        out = b"" if head.method == "HEAD" or reply.status == 204 else payload
        # recorded before the bytes leave, so a client that has read them finds the record written;
        # if the write fails, the request is recorded as client_gone instead
        self.book.wrote(rec, out, False)
        self.book.update(rec, status=reply.status, ending=reply_ending(reply.status))
        if reply.drain:
            self._drain()
        self._send(_json_head(reply, len(payload), close) + out)
        return not close

    def _play(self, stream: Stream, rec: OpenRecord, *, since: float) -> bool:
        """Play a stream's actions on a chunked 200; True when the body ended cleanly (the connection may
        carry another request). The server's one `Player` thread carries the actions out while this thread
        sleeps (`streamlab.net.standin.player`): the first pause counts from `since` (the request's arrival), each
        later one from the write before it, so one stream's bookkeeping never delays its own schedule; a
        `timeline` stream counts every pause from its scheduled start instead (a replayed capture)."""
        self._send(_head_bytes(200, (*_CHUNKED, *stream.headers), close=False))
        self.book.update(rec, status=200)
        return self._played(self.host.play(self, stream, rec, since=since, read_cap=self.read_cap))

    def _played(self, played: Playing) -> bool:
        """After the player played a stream: its cut, or its ending recorded and its terminating chunk; True when
        the body ended cleanly. _Gone when the client left."""
        rec, stream = played.rec, played.stream
        if played.outcome == GONE:
            raise _Gone from played.error
        if played.outcome == CUT:
            self.book.update(rec, ending=Ending.CUT)
            self._cut(played.reset)
            return False
        stopping = self.host.stopping.is_set()
        ending = stream_ending(cut=False, cancelled=self.host.cancelled(stream), stopping=stopping)
        # recorded before the terminating chunk leaves (a client that read the whole body finds it written)
        self.book.update(rec, ending=ending)
        if ending is Ending.STOPPED:
            return False  # never end a body cleanly on the way down: the client must see it broken
        self._send(b"0\r\n\r\n")
        return True

    def _cut(self, reset: bool) -> None:
        if reset:  # SO_LINGER with a zero timeout: close() sends RST instead of FIN
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()

    def _pause(self, seconds: float | None, *, since: float | None = None) -> str:
        """Wait until `seconds` after `since` (default: now; None: for ever), watching the client and the stop
        signal. "done", "gone" (the client closed its end: a FIN, a reset) or "stopping" (the server is shutting
        down)."""
        end = None if seconds is None else (time.perf_counter() if since is None else since) + seconds
        while True:
            if self.host.stopping.is_set():
                return _STOPPING
            left = None if end is None else end - time.perf_counter()
            if left is not None and left <= 0:
                return _DONE
            if self.eof:
                return _GONE
            try:
                state = self._watch(left)
            except (OSError, ValueError):
                state = _GONE
            if state is not None:
                return _STOPPING if self.host.stopping.is_set() else state

    def _watch(self, left: float | None) -> str | None:
        """Wait at most `left` seconds for the client or the stop signal: None when the time is up or the
        client sent bytes (kept for its next request) or ended its input (then `eof`); else "gone" or "stopping"."""
        wake = self.host.wakeup
        full = len(self.buf) > MAX_HEAD_BYTES + self.limits.max_body_bytes  # a pipelining flood: stop reading
        readable = _readable([wake] if full else [self.sock, wake], left)
        if wake in readable:
            return _STOPPING
        if readable:
            try:
                data = self.sock.recv(65536)  # a reset raises here: gone
            except BlockingIOError:  # woken for nothing
                return None
            if data:
                self.buf += data
            else:
                self.eof = True
        return None
