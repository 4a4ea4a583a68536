"""One thread plays every stand-in stream: the pauses, chunk writes and cuts of all connections at once (I/O layer).

A room of a thousand learners is a thousand streams of twenty frames each within a second or two. Played by the
connections' own handler threads, every frame woke its thread (a poll returning), which then queued for the GIL
behind the others: at 1,000 streams the hand-offs cost about half the CPU, and the first tokens came up to 1.5 s late.
So a handler thread that has a stream to play hands it to the server's `Player` and sleeps on an event (no GIL
held, no wake-up) until the stream is over; then it goes back to the connection (the terminating chunk, the next
request). The player keeps a heap of due times and one selector over every playing client and the stop signal:

* a pause is an entry in the heap (none for a pause for ever), and due entries are played in time order, so a
  thousand first tokens due at once leave in one pass;
* while a stream pauses, its client is watched: bytes it sends are kept for its next request, a FIN or a reset
  ends the stream as "gone" at once (`streamlab.net.standin.wire` says why a FIN is a departure);
* a write the socket does not take whole waits for room (a writable event) at most `send_timeout` seconds; the
  stream's later actions wait behind it, other streams do not;
* the server stopping ends every stream as "stopping" at once.

It also waits for each kept-alive connection's next request (`park`): a thousand learners pressing "run" at once
had woken a thousand handler threads, each reading and planning its request in its turn under the GIL, and the
last requests were read 300 to 450 ms after they were sent. Parked, a connection's handler thread sleeps, and the
player reads what arrives and asks the connection (`Parkable.arrived`) what to do: wait for the rest, play the stream
the planner decided on (here, at once), or hand the connection back to its thread for anything that could block (a
page, a `100 Continue`, a reply that waits or is large, a request that came in pieces for too long, a
pipelined one). So the common exchange, a whole request answered by a stream, never wakes its thread. A
connection just accepted is parked before any thread exists (`adopt`): its thread starts only if it comes back,
so a relay's thousand upstream connections opened at once start no thousand threads.

The schedule is the one `Connection` had: the first pause counts from the request's arrival, each later one from
the write before it (from the write's schedule for a `timeline` stream). Nothing is decided here either: the
actions come from the planner, the endings are computed by the connection from what this module reports.
"""

from __future__ import annotations

import heapq
import itertools
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Protocol

from streamlab.core.standin.actions import Close, Pause, Stream, Write
from streamlab.net.standin.records import OpenRecord, RecordBook

__all__ = ["Player", "Playing", "Parked", "Parkable", "Step", "DONE", "GONE", "STOPPING", "CUT", "ENDED"]

DONE, GONE, STOPPING, CUT, ENDED = "done", "gone", "stopping", "cut", "ended"
"""How a play ended: every action carried out; the client left; the server is stopping; a scripted cut (the
connection does the cutting); stopped early because the server stops or the stream was cancelled (the connection
reads which)."""

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
_BURST = 64
"""Writes one stream makes in a row before the player turns to the others (a script with no pauses)."""


class Client(Protocol):
    """What the player needs of a connection: its socket, the buffer for what the client sends next, and
    whether the client has ended its input."""

    sock: socket.socket
    buf: bytearray
    eof: bool


class Step:
    """What a parked connection says to do after bytes arrived or a stream it started ended (`Parkable`).

    `kind` is WAIT (keep it parked: the request is not whole yet, or it was answered and the connection is kept
    alive), CLOSE (the connection is over), BACK (hand it back to its thread, with `pending` for the thread to
    carry on, or None for the thread to read what is in the buffer), or PLAY (play `stream` for the request whose
    record is `rec`, counting from `since`)."""

    WAIT, CLOSE, BACK, PLAY = "wait", "close", "back", "play"
    __slots__ = ("kind", "pending", "stream", "rec", "since")

    def __init__(
        self,
        kind: str,
        *,
        pending: object = None,
        stream: Stream | None = None,
        rec: OpenRecord | None = None,
        since: float = 0.0,
    ) -> None:
        self.kind, self.pending, self.stream, self.rec, self.since = kind, pending, stream, rec, since


class Parkable(Client, Protocol):
    """A connection the player can wait on for its next request (`streamlab.net.standin.wire.Connection`)."""

    def take(self) -> bool | None:
        """Read what the socket has (without blocking): True (bytes added to `buf`), False (the client ended or
        the connection failed), None (nothing was there)."""

    def arrived(self) -> Step:
        """What to do now that `buf` holds more (called in the player's thread; never blocks)."""

    def played(self, job: Playing) -> Step:
        """The stream a `Step.PLAY` started has ended (`job.outcome`): finish the exchange; what next."""


class Parked:
    """A connection waiting, in the player, for its next request; `outcome` (CLOSE or BACK, with `pending`, or
    `expired` when the request's body did not come in time) once `finished` is set."""

    __slots__ = (
        "client",
        "watching",
        "wake_at",
        "deadline",
        "idle_until",
        "outcome",
        "pending",
        "finished",
        "expired",
        "then",
        "read_cap",
    )

    def __init__(
        self, client: Parkable, idle: float, read_cap: int, then: Callable[[Parked], None] | None = None
    ) -> None:
        self.client = client
        self.read_cap = read_cap  # the stream it starts stops reading the client past this many buffered bytes
        self.then = then  # called (in the player's thread) when it ends, for a connection no thread waits on
        self.watching = 0
        self.wake_at: float | None = None
        self.idle_until = time.perf_counter() + idle  # no request began by then: close quietly
        self.deadline: float | None = None  # a request began: it must be whole by then, or go back to its thread
        self.expired = False  # it went back because that deadline passed
        self.outcome: str | None = None
        self.pending: object = None
        self.finished = threading.Event()

    def end(self) -> None:
        """Tell whoever waits (a thread on `finished`, or `then`) that the wait is over; `outcome` is set."""
        self.finished.set()
        if self.then is not None:
            try:
                self.then(self)
            except Exception:  # the server's bug: the connection is its to close; the player goes on
                pass


class Playing:
    """One stream being played: where it stands, and how it ended (`outcome`, `error`) once `finished` is set."""

    __slots__ = (
        "client",
        "stream",
        "rec",
        "actions",
        "index",
        "clock",
        "wake_at",
        "pending",
        "watching",
        "read_cap",
        "outcome",
        "error",
        "reset",
        "finished",
        "pause_end",
        "park",
    )

    def __init__(
        self, client: Client, stream: Stream, rec: OpenRecord, since: float, read_cap: int, park: Parked | None = None
    ) -> None:
        self.client = client
        self.park = park  # the parked connection that started it (its end is `Parkable.played`), or None
        self.stream = stream
        self.rec = rec
        self.actions = stream.actions
        self.index = 0
        self.clock = since  # the first pause counts from the request's arrival
        self.wake_at: float | None = None  # the heap entry that is this stream's (others are stale)
        self.pause_end: float | None = None  # set while a pause is under way (None for a pause for ever)
        self.pending: memoryview | None = None  # bytes of a write the socket has not taken yet
        self.watching = 0  # the selector events registered for the client's socket
        self.read_cap = read_cap  # past this many buffered bytes the client is not read (a pipelining flood)
        self.outcome: str | None = None
        self.error: BaseException | None = None
        self.reset = False  # a scripted cut with a reset rather than a FIN
        self.finished = threading.Event()


class Player:
    """The thread that plays the streams of one stand-in (module docstring). `start()` it once the stop signal
    `wakeup` exists; `play()` from a handler thread; `close()` after every handler has returned."""

    def __init__(
        self,
        *,
        book: RecordBook,
        stopping: threading.Event,
        wakeup: socket.socket,
        cancelled: Callable[[Stream], bool],
        send_timeout: float,
        idle_timeout: float = 60.0,
        request_timeout: float = 30.0,
    ) -> None:
        self._idle = idle_timeout  # a kept-alive connection's wait for its next request
        self._request_timeout = request_timeout  # a request that began must be whole within this, or go back
        self._book = book
        self._stopping = stopping
        self._wakeup = wakeup
        self._cancelled = cancelled
        self._send_timeout = send_timeout
        self._incoming: list[Playing | Parked] = []
        self._lock = threading.Lock()
        self._bell = socket.socketpair()  # rung when `_incoming` goes from empty to not, and to close
        for end in self._bell:
            end.setblocking(False)
        self._closing = False
        self._selector = selectors.DefaultSelector()
        self._heap: list[tuple[float, int, Playing | Parked]] = []
        self._seq = itertools.count()
        self._playing: set[Playing] = set()
        self._parked: set[Parked] = set()
        self._thread = threading.Thread(target=self._run, name="standin:player", daemon=True)

    def start(self) -> Player:
        self._thread.start()
        return self

    def close(self) -> None:
        """End the thread (every stream still playing ends as "stopping") and release its descriptors."""
        with self._lock:
            self._closing = True
        self._ring()
        self._thread.join()
        self._selector.close()
        for end in self._bell:
            end.close()

    def play(self, client: Client, stream: Stream, rec: OpenRecord, *, since: float, read_cap: int) -> Playing:
        """Play `stream` on `client` and return once it is over (from a handler thread, which sleeps meanwhile)."""
        job = Playing(client, stream, rec, since, read_cap)
        self._hand_over(job, STOPPING)
        return job

    def park(self, client: Parkable, *, idle: float, read_cap: int) -> Parked:
        """Wait here for `client`'s next request, serving what `client.arrived` allows; return (to the handler
        thread, which sleeps meanwhile) when the connection is over (CLOSE) or wants its thread (BACK)."""
        job = Parked(client, idle, read_cap)
        self._hand_over(job, Step.CLOSE)
        return job

    def adopt(self, client: Parkable, *, idle: float, read_cap: int, then: Callable[[Parked], None]) -> None:
        """`park` for a connection just accepted, which no thread waits on yet: return at once, and call
        `then(parked)` in the player's thread when the wait is over (to close the connection, or to start a
        thread for it on a hand-back). A room connecting at once (a relay's thousand upstream connections) starts
        no thread for the connections whose requests the player serves itself."""
        self._hand_over(Parked(client, idle, read_cap, then), Step.CLOSE, wait=False)

    def _hand_over(self, job: Playing | Parked, closed: str, *, wait: bool = True) -> None:
        with self._lock:
            closing = self._closing
            if not closing:
                first = not self._incoming
                self._incoming.append(job)
        if closing:
            job.outcome = closed
            _end(job)
            return
        if first:
            self._ring()
        if wait:
            job.finished.wait()

    def _ring(self) -> None:
        try:
            self._bell[1].send(b"x")
        except (BlockingIOError, OSError):
            pass  # full: it rings already (or closed: the thread has ended)

    # -- the thread --

    def _run(self) -> None:
        selector = self._selector
        selector.register(self._bell[0], _READ, None)
        selector.register(self._wakeup, _READ, None)
        watching_stop = True
        try:
            while True:
                if watching_stop and self._stopping.is_set():
                    selector.unregister(self._wakeup)  # it stays readable: it would wake this loop for ever
                    watching_stop = False
                    for job in list(self._playing):
                        self._finish(job, STOPPING)
                    for park in list(self._parked):
                        self._unpark(park, Step.CLOSE)
                if self._take_new():
                    return
                self._due()
                heap = self._heap
                timeout = max(0.0, heap[0][0] - time.perf_counter()) if heap else None
                for key, mask in selector.select(timeout):
                    job = key.data
                    if job is None or job.outcome is not None:
                        continue
                    if isinstance(job, Parked):
                        self._parked_read(job)
                    else:
                        self._event(job, mask)
        finally:
            for job in list(self._playing):
                self._finish(job, STOPPING)
            for park in list(self._parked):
                self._unpark(park, Step.CLOSE)
            with self._lock:
                self._closing = True
                left, self._incoming = self._incoming, []
            for waiting in left:
                waiting.outcome = STOPPING if isinstance(waiting, Playing) else Step.CLOSE
                _end(waiting)

    def _take_new(self) -> bool:
        """Start the streams handed over since the last pass; True when the player is closing."""
        try:
            while self._bell[0].recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        with self._lock:
            new, self._incoming = self._incoming, []
            closing = self._closing
        if closing:
            for job in new:
                job.outcome = STOPPING if isinstance(job, Playing) else Step.CLOSE
                _end(job)
            return True
        now = time.perf_counter()
        for job in new:
            if isinstance(job, Parked):
                self._parked.add(job)
                if self._stopping.is_set():
                    self._unpark(job, Step.CLOSE)
                    continue
                self._watch(job, _READ)
                self._schedule(job, job.idle_until)
            else:
                self._playing.add(job)
                self._watch(job, _READ)
                self._advance(job, now)
        return False

    def _schedule(self, job: Playing | Parked, at: float) -> None:
        job.wake_at = at
        heapq.heappush(self._heap, (at, next(self._seq), job))

    def _due(self) -> None:
        """Carry on every stream whose time has come (pause over, or a write's time for room over)."""
        heap = self._heap
        now = time.perf_counter()
        while heap and heap[0][0] <= now:
            at, _, job = heapq.heappop(heap)
            if job.outcome is not None or job.wake_at != at:
                continue  # ended meanwhile, or rescheduled
            job.wake_at = None
            if isinstance(job, Parked):
                # no request began in time (close quietly, as an idle connection), or its body is late: the
                # thread answers 408 at once (`expired`)
                job.expired = job.deadline is not None
                self._unpark(job, Step.BACK if job.expired else Step.CLOSE)
            elif job.pending is not None:
                self._finish(job, GONE, TimeoutError(f"the client took nothing for {self._send_timeout:g} s"))
            else:
                self._advance(job, now)

    def _parked_read(self, park: Parked) -> None:
        """Bytes (or an end) from a parked connection: read them and do what the connection says."""
        client = park.client
        got = client.take()
        if got is None:
            return
        if got is False:
            self._unpark(park, Step.CLOSE)  # the client left between requests: close quietly
            return
        if park.deadline is None:  # the first bytes of a request: it has this long to arrive whole
            park.deadline = time.perf_counter() + self._request_timeout
            self._schedule(park, park.deadline)
        self._ask(park, client.arrived)

    def _ask(self, park: Parked, ask: Callable[[], Step]) -> None:
        """Do what the connection says; a bug in saying it closes that connection, never the player."""
        try:
            step = ask()
        except Exception:
            self._unpark(park, Step.CLOSE)
            return
        self._step(park, step)

    def _step(self, park: Parked, step: Step) -> None:
        kind = step.kind
        if kind == Step.WAIT:
            if not park.client.buf:  # answered, kept alive: the next request has the idle time again
                park.deadline = None
                park.idle_until = time.perf_counter() + self._idle
                self._schedule(park, park.idle_until)
            if not park.watching:
                self._watch(park, _READ)
        elif kind == Step.PLAY:
            assert step.stream is not None and step.rec is not None
            self._watch(park, 0)
            park.wake_at = None
            job = Playing(park.client, step.stream, step.rec, step.since, park.read_cap, park)
            self._playing.add(job)
            self._watch(job, _READ)
            self._advance(job, time.perf_counter())
        else:
            park.pending = step.pending
            self._unpark(park, kind)

    def _unpark(self, park: Parked, outcome: str) -> None:
        if park.outcome is not None:
            return
        self._watch(park, 0)
        self._parked.discard(park)
        park.outcome, park.wake_at = outcome, None
        park.end()

    def _event(self, job: Playing, mask: int) -> None:
        if mask & _READ:
            self._read(job)
            if job.outcome is not None:
                return
        if mask & _WRITE and job.pending is not None:
            self._flush(job)

    def _read(self, job: Playing) -> None:
        """The client sent something while its stream plays: bytes (kept for its next request), an end, an error."""
        client = job.client
        try:
            data = client.sock.recv(65536)
        except BlockingIOError:
            return
        except (OSError, ValueError):
            self._finish(job, GONE)
            return
        if not data:
            client.eof = True
            if job.pending is None:  # in a pause (timed or for ever): gone at once; a write under way goes on
                self._finish(job, GONE)
            return
        client.buf += data
        if len(client.buf) > job.read_cap:
            self._watch(job, job.watching & ~_READ)  # a pipelining flood: stop reading it

    def _flush(self, job: Playing) -> None:
        """Room on the socket: send more of the write that waits; once it is out, go on with the stream."""
        pending = job.pending
        assert pending is not None
        try:
            sent = job.client.sock.send(pending)
        except BlockingIOError:
            return
        except (OSError, ValueError) as exc:
            self._finish(job, GONE, exc)
            return
        if sent < len(pending):
            job.pending = pending[sent:]
            return
        job.pending = None
        job.wake_at = None  # the send deadline's entry is stale now
        self._watch(job, job.watching & ~_WRITE)
        self._advance(job, time.perf_counter())

    def _advance(self, job: Playing, now: float) -> None:  # noqa: C901 (one branch per action)
        """Carry out the stream's actions from where it stands until it must wait (a pause, a full socket) or ends."""
        actions, book, rec, stream, client = job.actions, self._book, job.rec, job.stream, job.client
        writes = 0
        while True:
            if writes >= _BURST:  # a stream without pauses: the others' due frames go first, then this goes on
                self._schedule(job, time.perf_counter())
                return
            if job.pause_end is not None:  # a pause under way has ended (its heap entry came due)
                job.clock = job.pause_end
                job.pause_end = None
                job.index += 1
            if self._stopping.is_set() or (stream.cancel_key is not None and self._cancelled(stream)):
                self._finish(job, ENDED)
                return
            if job.index >= len(actions):
                self._finish(job, DONE)
                return
            action = actions[job.index]
            if isinstance(action, Pause):
                if action.seconds is None:  # for ever: only the client or the stop signal ends it
                    if client.eof:
                        self._finish(job, GONE)
                    return
                end = job.clock + action.seconds
                now = time.perf_counter()
                if end > now:
                    if client.eof:
                        self._finish(job, GONE)
                        return
                    job.pause_end = end
                    job.wake_at = end
                    heapq.heappush(self._heap, (end, next(self._seq), job))
                    return
                job.clock = end
                job.index += 1
            elif isinstance(action, Write):
                job.index += 1
                writes += 1
                at = time.perf_counter()  # before the bytes leave (see `Connection._play`)
                if not stream.timeline:
                    job.clock = at
                data = action.data
                framed = b"%x\r\n%s\r\n" % (len(data), data)
                # recorded before the bytes leave, as a reply is (`Connection._reply`): a client that has read them
                # finds them in the record (after the send, a relay's client could see [DONE] first, and a test
                # read a record one frame short under load); a failed send makes the request client_gone
                book.wrote(rec, data, action.frame, at)
                try:
                    sent = client.sock.send(framed)
                except BlockingIOError:
                    sent = 0
                except (OSError, ValueError) as exc:
                    self._finish(job, GONE, exc)
                    return
                if sent < len(framed):
                    job.pending = memoryview(framed)[sent:]
                    deadline = time.perf_counter() + self._send_timeout
                    job.wake_at = deadline
                    heapq.heappush(self._heap, (deadline, next(self._seq), job))
                    self._watch(job, job.watching | _WRITE)
                    return
            elif isinstance(action, Close):
                job.reset = action.reset
                self._finish(job, CUT)
                return
            else:
                job.index += 1

    def _watch(self, job: Playing | Parked, events: int) -> None:
        """Watch the client's socket for `events` (0: not at all)."""
        if events == job.watching:
            return
        sock = job.client.sock
        try:
            if not job.watching:
                self._selector.register(sock, events, job)
            elif not events:
                self._selector.unregister(sock)
            else:
                self._selector.modify(sock, events, job)
        except (OSError, ValueError, KeyError):
            pass
        job.watching = events

    def _finish(self, job: Playing, outcome: str, error: BaseException | None = None) -> None:
        if job.outcome is not None:
            return
        self._watch(job, 0)
        self._playing.discard(job)
        job.outcome, job.error, job.wake_at = outcome, error, None
        park = job.park
        if park is None:
            job.finished.set()
            return
        # a stream a parked connection started: the connection finishes the exchange and says what next
        if park.outcome is None:
            self._ask(park, lambda: park.client.played(job))


def _end(job: Playing | Parked) -> None:
    if isinstance(job, Parked):
        job.end()
    else:
        job.finished.set()
