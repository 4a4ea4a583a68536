"""A scripted local stand-in for an OpenAI-compatible streaming endpoint: the socket side (I/O layer, stdlib only).

Nothing here is a model, and nothing here decides anything. A *script* (`streamlab.core.standin.script`) maps a
request's `model` to episodes; the planner (`streamlab.core.standin.plan`) turns each request and the learner's
state into actions; this module reads HTTP off the socket, asks the planner under a lock, and carries the
actions out: it writes, pauses, cuts. That split is h11's: deciding is pure and testable without a socket,
doing is a thin loop.

    from streamlab.net.standin.server import StandIn, Episode, paced

    script = {"demo": [Episode(paced([b'data: {"x": 1}\\n\\n', b"data: [DONE]\\n\\n"], first=0.3, gap=0.05))]}
    with StandIn(script) as server:
        print(server.base_url)          # http://127.0.0.1:PORT/v1

On the wire, and why:

* It listens on 127.0.0.1, port 0 (the OS picks a free one), speaks HTTP/1.1 with chunked transfer coding
  like real streaming endpoints, disables Nagle's algorithm so small frames leave at once, and never logs.
* Each scripted `Send` becomes one HTTP chunk; chunk framing has nothing to do with SSE framing.
* While it pauses, it watches the socket, so a client that hangs up is noticed at once, not at the next write
  (a FIN is a departure, as at the model servers it stands in for; `streamlab.net.standin.wire` says why).
* A burst (a room of learners pressing "run" in the same instant) does not push first tokens back: scripted
  waits count from the moment each request arrived (on Linux the kernel's time stamp on its bytes, so the time a
  handler thread waits for its turn under the GIL is inside the wait, not added to it; `streamlab.net.standin.wire`).
* It defends itself as a server in a room must: the request head must arrive within `header_timeout`, the
  body within `body_timeout`, an idle kept-alive connection is closed after `idle_timeout`, at most
  `max_connections` connections are served at once (the next gets a 503), bodies over `max_body_bytes` get
  a 413 before any `100 Continue`. Every refusal is an OpenAI-shaped JSON error.
* Each API key is a learner with their own episode counts, stored responses and cancels (`streamlab.core.standin.room`).
  `POST /v1/reset` starts the caller over; `StandIn.reset()` starts everyone over.
* With a `join_code` it serves a room (`streamlab.core.standin.door`): a learner joins with the code and a name
  (`POST /v1/join`) and gets the API key that names them; a request without such a key gets a 401 that says how
  to join. Without one (the default, a learner's own notebook) any key names a learner, as before.
* It serves its room dashboard at `/dashboard` (`streamlab.net.standin.dashboard`): one live row per learner,
  updated over SSE. Dashboard requests are nobody's API call: they leave no request record.
* It serves a chat page at `/chat` (`streamlab.net.standin.chatpage`) that reads an answer in the browser, with
  `fetch`, or `EventSource` on `GET /v1/chat/stream` (same origin: no CORS). The page's files leave no record.

Every request leaves a `RequestRecord` (`streamlab.net.standin.records`): a ring of the last `max_records`, totals,
and `subscribe()` for a feed of finished requests. In a notebook use `serve(scripts)`: it stops the server
the previous call started, so re-running the cell never leaks one.
"""

from __future__ import annotations

import atexit
import dataclasses
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from streamlab.core.standin.actions import Decision, Stream
from streamlab.core.standin.board import text_write_index
from streamlab.core.standin.door import Door, DoorLimits
from streamlab.core.standin.eventsource import EVENTS_PATH
from streamlab.core.standin.plan import plan, stream_cancelled
from streamlab.core.standin.profiles import Profile, get_profile
from streamlab.core.standin.request import Request, RequestHead
from streamlab.core.standin.room import DEFAULT_MAX_LEARNERS, DEFAULT_OPTIONS, Options, Room, UsagePolicy, learner_key
from streamlab.core.standin.script import (
    ScriptValue,
    StoredResponse,
)
from streamlab.net.slot import interrupts_held
from streamlab.net.standin.chatpage import CHAT_PATH, chat_page
from streamlab.net.standin.dashboard import DASHBOARD_PATH, DEFAULT_KEEPALIVE, DEFAULT_MAX_FEEDS, RoomFeed
from streamlab.net.standin.player import Client, Parkable, Parked, Player, Playing, Step
from streamlab.net.standin.records import (
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_MAX_RECORDS,
    DEFAULT_MAX_TOTAL_BYTES,
    OpenRecord,
    RecordBook,
    RequestRecord,
    RequestTotals,
)
from streamlab.net.standin.wire import Connection, Limits, PageHandler, refuse_connection, stamp_arrivals

__all__ = [
    "StandIn",
    "serve",
    "stop_serving",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_RECORD_TOTAL_BYTES",
    "JSON_GROWTH",
]

DEFAULT_MAX_BODY_BYTES = Limits.max_body_bytes
JSON_GROWTH = 32
"""How much larger a parsed JSON body can be in Python than its text: `{}` is 3 bytes of text and 72 of a
dict and its slot in a list, `{"":{}}` 8 bytes and about 250 (a measured worst case, rounded up)."""
DEFAULT_MAX_RECORD_TOTAL_BYTES = DEFAULT_MAX_TOTAL_BYTES // JSON_GROWTH
"""The records' budget as `RecordBook` counts it (2 MiB), so that what they really hold stays within its
64 MiB: 1 MB bodies of empty JSON objects had grown a library `StandIn()` to 855 MB (the command line, which
keeps 1 KB of each request, held)."""


_peer = threading.local()  # the address of the client each handler thread serves (one connection per thread)


class _Host:
    """The small interface a connection handler gets from its server: limits, the stopping flag, the
    records, the planner (called under the room's lock), the server's own pages and the connection count."""

    def __init__(self, room: Room, limits: Limits, book: RecordBook) -> None:
        self.limits = limits
        self.book = book
        self.stopping = threading.Event()
        self._room = room
        self._room_lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._pending = 0  # admitted by the accepting thread, not yet counted open (`opened`)
        self._conns_cond = threading.Condition()
        self.pages: Callable[[RequestHead], PageHandler | None] | None = None
        self._signal: tuple[socket.socket, socket.socket] | None = None  # the stop signal, while started
        self._player: Player | None = None  # plays every stream, while started

    @property
    def wakeup(self) -> socket.socket:
        """Readable once the server is stopping: pauses wait on it and on their client, with no polling."""
        if self._signal is None:
            raise RuntimeError("the stand-in is not started")
        return self._signal[0]

    def arm(self) -> None:
        """A fresh stop signal and stream player for a (re)started server."""
        self._signal = socket.socketpair()
        self._player = Player(
            book=self.book,
            stopping=self.stopping,
            wakeup=self._signal[0],
            cancelled=self.cancelled,
            send_timeout=self.limits.send_timeout,
            idle_timeout=self.limits.idle_timeout,
            request_timeout=self.limits.body_timeout,
        ).start()

    def wake(self) -> None:
        """Set `stopping` and make `wakeup` readable: every pause returns at once."""
        self.stopping.set()
        if self._signal is not None:
            try:
                self._signal[1].send(b"x")
            except OSError:
                pass

    def disarm(self) -> None:
        """End the player and close the stop signal (after every handler has been joined)."""
        player, self._player = self._player, None
        if player is not None:
            player.close()
        signal, self._signal = self._signal, None
        for end in signal or ():
            end.close()

    def decide(self, request: Request) -> Decision:
        request = dataclasses.replace(request, peer=request.peer or getattr(_peer, "address", ""), now=time.monotonic())
        with self._room_lock:
            return plan(self._room, request)

    def cancelled(self, stream: Stream) -> bool:
        if stream.cancel_key is None:
            return False
        with self._room_lock:
            return stream_cancelled(self._room, stream)

    def page(self, head: RequestHead) -> PageHandler | None:
        return None if self.pages is None else self.pages(head)

    def play(self, client: Client, stream: Stream, rec: OpenRecord, *, since: float, read_cap: int) -> Playing:
        player = self._player
        if player is None:
            raise RuntimeError("the stand-in is not started")
        return player.play(client, stream, rec, since=since, read_cap=read_cap)

    def park(self, client: Parkable, *, idle: float, read_cap: int) -> Parked:
        player = self._player
        if player is None:
            raise RuntimeError("the stand-in is not started")
        return player.park(client, idle=idle, read_cap=read_cap)

    def adopt(self, conn: Connection, *, then: Callable[[Parked], None]) -> None:
        """Park a connection just accepted, before any thread serves it (`Player.adopt`)."""
        player = self._player
        if player is None:
            parked = Parked(conn, 0.0, conn.read_cap)
            parked.outcome = Step.CLOSE
            then(parked)
            return
        player.adopt(conn, idle=self.limits.header_timeout, read_cap=conn.read_cap, then=then)

    def with_room(self, job: Callable[[Room], Any]) -> Any:
        """Run `job(room)` under the room's lock (configuration and queries from `StandIn`)."""
        with self._room_lock:
            return job(self._room)

    def admit_connection(self) -> bool:
        """Count one more open connection, unless the cap is reached."""
        with self._conns_cond:
            if len(self._conns) + self._pending >= self.limits.max_connections:
                return False
            self._pending += 1
            return True

    def opened(self, sock: socket.socket) -> None:
        with self._conns_cond:
            self._pending -= 1
            self._conns.add(sock)
        if self.stopping.is_set():  # accepted while stop() ran: do not start a blocking read
            _shutdown(sock)

    def closed(self, sock: socket.socket | None) -> None:
        with self._conns_cond:
            if sock is None:
                self._pending -= 1
            else:
                self._conns.discard(sock)
            self._conns_cond.notify_all()

    def open_connections(self) -> int:
        with self._conns_cond:
            return len(self._conns) + self._pending

    def wait_connections(self, at_most: int, timeout: float) -> bool:
        with self._conns_cond:
            return self._conns_cond.wait_for(lambda: len(self._conns) + self._pending <= at_most, timeout)

    def shut_all(self) -> None:
        with self._conns_cond:
            conns = list(self._conns)
        for conn in conns:  # wake handlers blocked reading the next request on a kept-alive connection
            _shutdown(conn)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _HandlerThreads(list[threading.Thread]):
    """The handler threads `server_close` joins, with socketserver's interface (`append`, `join`), but the ended
    ones reaped only when the list has doubled: socketserver's own list checks every thread on each accept, and a
    room connecting at once (1,000 learners) cost 500,000 checks in the accepting thread, so the last connections
    waited seconds to be served."""

    def __init__(self) -> None:
        super().__init__()
        self.reap_at = 64

    def append(self, thread: threading.Thread) -> None:
        if len(self) >= self.reap_at:
            self.reap()
            self.reap_at = max(64, 2 * len(self))
        super().append(thread)

    def pop_all(self) -> list[threading.Thread]:
        self[:], result = [], self[:]
        return result

    def join(self) -> None:
        for thread in self.pop_all():
            thread.join()

    def reap(self) -> None:
        self[:] = [thread for thread in self if thread.is_alive()]


class _Server(socketserver.ThreadingTCPServer):
    # Daemon handler threads, all kept in `_threads` and joined on server_close, so a stopped StandIn still leaves no
    # thread behind. Not daemon, they had held a script's exit: the interpreter joins non-daemon threads *before*
    # atexit runs `stop_serving`, so a client holding a stream kept a finished script alive until the stream ended
    # (issue 34, N12).
    daemon_threads = True
    block_on_close = True
    allow_reuse_address = True
    request_queue_size = 256  # the listen backlog; socketserver's default of 5 resets bursts of new connections
    host: _Host

    def server_activate(self) -> None:
        stamp_arrivals(self.socket)  # every accepted socket's reads carry the time their bytes arrived
        # a backlog of at least the connection cap: a room connecting at once (1,000 learners, or a relay's
        # upstream connections) overflowed 256, and each dropped handshake cost its request 1 to 3 s of
        # retransmission before it was even read (the system may cap it lower: net.core.somaxconn)
        self.request_queue_size = max(self.request_queue_size, self.host.limits.max_connections)
        self._threads = _HandlerThreads()  # ThreadingMixIn keeps it (setdefault) and joins it on server_close
        super().server_activate()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.host.admit_connection():  # over the cap: a 503 from the accepting thread, no new thread
            self.host.book.refused()
            refuse_connection(request, self.host.limits.max_connections)
            self.shutdown_request(request)
            return
        # No thread yet: the player waits for the first request and serves it if it can (`Player.adopt`); a
        # thread starts only when the connection comes back for what could block. A room connecting at once (a
        # relay's thousand upstream connections) had started a thousand threads in that instant.
        sock: socket.socket = request
        try:
            sock.setsockopt(socket.SOL_TCP, socket.TCP_NODELAY, True)  # small frames leave at once, no Nagle wait
            self.host.opened(sock)
        except BaseException:
            self.host.closed(None)
            self.shutdown_request(sock)
            raise
        peer = str(client_address[0]) if client_address else ""
        conn = Connection(sock, self.host, peer=peer)
        self.host.adopt(conn, then=lambda parked: self._adopted(conn, parked, peer))

    def _adopted(self, conn: Connection, parked: Parked, peer: str) -> None:
        """(in the player's thread) The first wait of an accepted connection is over: close it, or serve the
        rest of it on a thread of its own."""
        if parked.outcome != Step.BACK or self.host.stopping.is_set():  # stopping: no new thread for `stop` to miss
            self._release(conn.sock)
            return
        thread = threading.Thread(target=self._serve_rest, args=(conn, parked, peer), daemon=True)
        self._threads.append(thread)
        thread.start()

    def _serve_rest(self, conn: Connection, parked: Parked, peer: str) -> None:
        _peer.address = peer
        try:
            conn.serve(parked)
        except Exception:  # reset by the client, shut down by stop(), or a bug: the connection ends, not the server
            pass
        finally:
            self._release(conn.sock)

    def _release(self, sock: socket.socket) -> None:
        self.host.closed(sock)
        self.shutdown_request(sock)

    def handle_error(self, request: Any, client_address: Any) -> None:  # silent: no tracebacks in notebooks
        pass


class StandIn:
    """A scripted OpenAI-compatible server on a background thread.

    `scripts` maps a model name to one episode or a list of them. `stored` maps response ids to
    `StoredResponse`s for the resume route (episodes with `store_as` add theirs automatically).
    `usage` and `require_input` choose how closely requests are checked like the real API
    (`streamlab.core.standin.room.Options`): by default as the real API does, `messages`/`input` required and the
    Chat usage chunk only with `stream_options.include_usage`; `usage="scripted"` plays every scripted byte.
    `profile` (a name from `streamlab.core.standin.profiles.PROFILES`, or a `Profile`) makes it answer as that server
    does, and answer any model the scripts do not name. The timeouts and caps are in the module docstring.
    `max_learners` is how many API keys the room remembers (`streamlab.core.standin.room`: keys used once are
    forgotten first, a learner who came back never; when every place is taken so, a new key gets a 429
    `room_full`); the dashboard keeps as many rows.
    `join_code` makes it serve a room with that code (`streamlab.core.standin.door`; `door_limits` its per-address
    limits): only learners who joined have a place and a key; None (the default) is an open room, any key a learner.
    `dashboard` serves the room dashboard at `dashboard_url` (on by default; its feed writes a keep-alive
    comment after `dashboard_keepalive` seconds of silence; at most `dashboard_max_feeds` feeds are open at once,
    and `projector_url`, which carries `instructor_key`, always gets one of a few places kept for it).
    `max_record_total_bytes` is what the records may hold in all, counted as `RecordBook` counts it (a parsed
    body at its text's size): `DEFAULT_MAX_RECORD_TOTAL_BYTES` keeps the process within the 64 MiB the records
    are allowed even when every kept body is the costliest JSON there is.
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
        max_body_bytes: int = Limits.max_body_bytes,
        header_timeout: float = Limits.header_timeout,
        body_timeout: float = Limits.body_timeout,
        idle_timeout: float = Limits.idle_timeout,
        send_timeout: float = Limits.send_timeout,
        max_connections: int = Limits.max_connections,
        max_records: int = DEFAULT_MAX_RECORDS,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        max_record_total_bytes: int = DEFAULT_MAX_RECORD_TOTAL_BYTES,
        max_learners: int = DEFAULT_MAX_LEARNERS,
        usage: UsagePolicy = DEFAULT_OPTIONS.usage,
        require_input: bool = DEFAULT_OPTIONS.require_input,
        profile: str | Profile | None = None,
        dashboard: bool = True,
        dashboard_keepalive: float = DEFAULT_KEEPALIVE,
        dashboard_max_feeds: int = DEFAULT_MAX_FEEDS,
        join_code: str | None = None,
        door_limits: DoorLimits | None = None,
        instructor_key: str | None = None,
    ) -> None:
        self.host = host
        self.join_code = join_code
        self.instructor_key = instructor_key or secrets.token_urlsafe(12)
        self.max_body_bytes = max_body_bytes
        self._requested_port = port
        limits = Limits(max_body_bytes, header_timeout, body_timeout, idle_timeout, send_timeout, max_connections)
        chosen = None if profile is None else get_profile(profile)
        room = Room(
            scripts,
            stored=stored,
            options=Options(usage=usage, require_input=require_input, profile=chosen),
            max_learners=max_learners,
            door=None
            if join_code is None
            else Door(join_code, secrets.token_bytes(32), places=max_learners, limits=door_limits or DoorLimits()),
        )
        self._book = RecordBook(
            max_records=max_records, max_record_bytes=max_record_bytes, max_total_bytes=max_record_total_bytes
        )
        self._host = _Host(room, limits, self._book)
        self._feed = (
            RoomFeed(
                self._book,
                self._host.stopping,
                keepalive=dashboard_keepalive,
                max_feeds=dashboard_max_feeds,
                max_learners=max_learners,
                instructor_key=self.instructor_key,
                room=join_code is not None,
                text_at=self._text_at,
                member=None if join_code is None else self._joined,
            )
            if dashboard
            else None
        )
        self._host.pages = self._page
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def _joined(self, name: str) -> bool:
        """Whether `name` is a learner who joined this room (its door's member)."""
        return bool(self._host.with_room(lambda room: room.door is not None and name in room.door.members))

    def _text_at(self, record: RequestRecord) -> int | None:
        """Which write of a finished stream first showed text (for the dashboard's TTFT), from its script."""
        if record.model is None or record.episode is None or record.resumed_after is not None:
            return None
        events = urlsplit(record.path).path.rstrip("/") == EVENTS_PATH
        model, episode = record.model, record.episode
        found = self._host.with_room(lambda room: text_write_index(room, model, episode, events=events))
        return found if isinstance(found, int) else None

    def _page(self, head: RequestHead) -> PageHandler | None:
        """The server's own pages: the chat page (`streamlab.net.standin.chatpage`), then the room dashboard."""
        handler = chat_page(head)
        if handler is None and self._feed is not None:
            handler = self._feed.page(head)
        return handler

    # -- configuration --

    def set_scripts(
        self,
        scripts: Mapping[str, ScriptValue],
        *,
        stored: Mapping[str, StoredResponse] | None = None,
        reset: bool = True,
    ) -> None:
        """Replace the scripts (and add stored responses); with `reset`, every learner starts over."""
        self._host.with_room(lambda room: room.set_scripts(scripts, stored=stored, reset=reset))

    def reset(self, *, learner: str | None = None) -> None:
        """Start over: every learner and the records (None), or only `learner`'s state (their API key)."""
        learner = None if learner is None else learner_key(learner)
        self._host.with_room(lambda room: room.reset(learner))
        if learner is None:
            self._book.clear()
            if self._feed is not None:
                self._feed.reset()

    @property
    def limits(self) -> Limits:
        return self._host.limits

    # -- lifecycle --

    def start(self) -> StandIn:
        """Bind and serve on a background thread. Returns self."""
        if self._httpd is not None:
            raise RuntimeError("this StandIn is already started")
        self._host.stopping.clear()
        httpd = _Server((self.host, self._requested_port), socketserver.BaseRequestHandler, bind_and_activate=False)
        httpd.host = self._host
        try:
            httpd.server_bind()
            self._host.arm()
            httpd.server_activate()
        except BaseException:
            httpd.server_close()
            self._host.disarm()
            raise
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"standin:{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: end waits and stalls, close every connection, join every thread. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._host.wake()  # stopping: every pause returns now
        if self._feed is not None:
            self._feed.wake()  # dashboard feeds end now rather than at their next wake-up
        self._on_stopping()
        httpd.shutdown()
        self._host.shut_all()
        httpd.server_close()  # joins the handler threads (block_on_close)
        self._host.disarm()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _on_stopping(self) -> None:
        """A seam for tests: runs after handlers can see that the server is stopping, before their
        connections are shut down (what a handler does in between must not depend on luck)."""

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

    @property
    def chat_url(self) -> str:
        """The chat page that reads a streamed answer in the browser, e.g. http://127.0.0.1:PORT/chat."""
        return self.base_url.removesuffix("/v1") + CHAT_PATH

    @property
    def dashboard_url(self) -> str:
        """The room dashboard's page, e.g. http://127.0.0.1:PORT/dashboard (when `dashboard` is on)."""
        return self.base_url.removesuffix("/v1") + DASHBOARD_PATH

    @property
    def projector_url(self) -> str:
        """The dashboard with the instructor's key, which always gets its live feed (a place kept for it)."""
        return f"{self.dashboard_url}?key={self.instructor_key}"

    def url(self, path: str) -> str:
        """`base_url` joined with a path such as "chat/completions" or "/responses"."""
        return f"{self.base_url}/{path.lstrip('/')}"

    # -- records and state --

    def records(self, model: str | None = None, *, learner: str | None = None) -> list[RequestRecord]:
        """Snapshots of the retained requests (the last `max_records`), in arrival order, optionally only
        those for `model` and/or of `learner` (an API key; "" for requests without one).

        A record is completed just after its last byte is handed to the operating system, so a client
        can hold the whole reply a moment before the record says "complete": call `wait_idle()` (or
        `wait_until`) before asserting on a request you have just read to the end.
        """
        return self._book.snapshots(model, None if learner is None else learner_key(learner))

    def totals(self) -> RequestTotals:
        """Counts over every request since the last full reset, including those the ring forgot."""
        return self._book.totals()

    def subscribe(self, callback: Callable[[RequestRecord], None]) -> Callable[[], None]:
        """Call `callback(record)` once per finished request, in the thread that finished it (often the server's
        one stream player: keep it quick; what it raises is ignored). Returns a function that unsubscribes."""
        return self._book.subscribe(callback)

    def requests_for(self, model: str, *, learner: str | None = None) -> int:
        """How many create requests for `model` were routed to its script: by `learner`, or by everyone."""
        key = None if learner is None else learner_key(learner)
        return int(self._host.with_room(lambda room: room.requests_for(model, key)))

    def open_connections(self) -> int:
        """Connections being served right now."""
        return self._host.open_connections()

    def wait_connections(self, at_most: int = 0, timeout: float = 5.0) -> bool:
        """Block until at most `at_most` connections are open; False on timeout."""
        return self._host.wait_connections(at_most, timeout)

    def wait_until(self, predicate: Callable[[list[RequestRecord]], bool], timeout: float = 5.0) -> bool:
        """Block until `predicate(records())` is true (re-checked on every record change); False on timeout."""
        return self._book.wait_until(predicate, timeout)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Block until every request seen so far has finished; False on timeout."""
        return self.wait_until(lambda rs: all(r.finished for r in rs), timeout)


# --- the notebook helper --------------------------------------------------------------------------

_current: StandIn | None = None
_current_lock = threading.Lock()


def serve(
    scripts: Mapping[str, ScriptValue],
    *,
    stored: Mapping[str, StoredResponse] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    usage: UsagePolicy = DEFAULT_OPTIONS.usage,
    require_input: bool = DEFAULT_OPTIONS.require_input,
    profile: str | Profile | None = None,
) -> StandIn:
    """Start a stand-in for a notebook, first stopping the one a previous call started.

    Re-running a cell that calls `serve(...)` therefore never leaks a server: at most one per process, even
    when Ctrl-C lands mid-way (held until the old one stopped and the new one started:
    `streamlab.net.slot.interrupts_held`). The server is also stopped when the interpreter exits. The
    keywords are `StandIn`'s.
    """
    global _current
    with interrupts_held(), _current_lock:
        if _current is not None:
            old, _current = _current, None
            old.stop()
        _current = StandIn(
            scripts, stored=stored, host=host, port=port, usage=usage, require_input=require_input, profile=profile
        ).start()
        return _current


def stop_serving() -> None:
    """Stop the server `serve()` started, if any."""
    global _current
    with interrupts_held(), _current_lock:
        if _current is not None:
            old, _current = _current, None
            old.stop()


atexit.register(stop_serving)
