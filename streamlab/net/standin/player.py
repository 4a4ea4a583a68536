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

__all__ = ["Player", "Playing", "DONE", "GONE", "STOPPING", "CUT", "ENDED"]

DONE, GONE, STOPPING, CUT, ENDED = "done", "gone", "stopping", "cut", "ended"
"""How a play ended: every action carried out; the client left; the server is stopping; a scripted cut (the
connection does the cutting); stopped early because the server stops or the stream was cancelled (the connection
reads which)."""

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class Client(Protocol):
    """What the player needs of a connection: its socket, the buffer for what the client sends next, and
    whether the client has ended its input."""

    sock: socket.socket
    buf: bytearray
    eof: bool


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
    )

    def __init__(self, client: Client, stream: Stream, rec: OpenRecord, since: float, read_cap: int) -> None:
        self.client = client
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
    ) -> None:
        self._book = book
        self._stopping = stopping
        self._wakeup = wakeup
        self._cancelled = cancelled
        self._send_timeout = send_timeout
        self._incoming: list[Playing] = []
        self._lock = threading.Lock()
        self._bell = socket.socketpair()  # rung when `_incoming` goes from empty to not, and to close
        for end in self._bell:
            end.setblocking(False)
        self._closing = False
        self._selector = selectors.DefaultSelector()
        self._heap: list[tuple[float, int, Playing]] = []
        self._seq = itertools.count()
        self._playing: set[Playing] = set()
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
        with self._lock:
            if self._closing:
                job.outcome = STOPPING
                return job
            first = not self._incoming
            self._incoming.append(job)
        if first:
            self._ring()
        job.finished.wait()
        return job

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
                if self._take_new():
                    return
                self._due()
                heap = self._heap
                timeout = max(0.0, heap[0][0] - time.perf_counter()) if heap else None
                for key, mask in selector.select(timeout):
                    job = key.data
                    if job is not None and job.outcome is None:
                        self._event(job, mask)
        finally:
            for job in list(self._playing):
                self._finish(job, STOPPING)
            with self._lock:
                self._closing = True
                left, self._incoming = self._incoming, []
            for job in left:
                job.outcome = STOPPING
                job.finished.set()

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
                job.outcome = STOPPING
                job.finished.set()
            return True
        now = time.perf_counter()
        for job in new:
            self._playing.add(job)
            self._watch(job, _READ)
            self._advance(job, now)
        return False

    def _due(self) -> None:
        """Carry on every stream whose time has come (pause over, or a write's time for room over)."""
        heap = self._heap
        now = time.perf_counter()
        while heap and heap[0][0] <= now:
            at, _, job = heapq.heappop(heap)
            if job.outcome is not None or job.wake_at != at:
                continue  # ended meanwhile, or rescheduled
            job.wake_at = None
            if job.pending is not None:
                self._finish(job, GONE, TimeoutError(f"the client took nothing for {self._send_timeout:g} s"))
            else:
                self._advance(job, now)

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
        while True:
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
                at = time.perf_counter()  # before the bytes leave (see `Connection._play`)
                if not stream.timeline:
                    job.clock = at
                data = action.data
                framed = b"%x\r\n%s\r\n" % (len(data), data)
                try:
                    sent = client.sock.send(framed)
                except BlockingIOError:
                    sent = 0
                except (OSError, ValueError) as exc:
                    self._finish(job, GONE, exc)
                    return
                book.wrote(rec, data, action.frame, at)
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

    def _watch(self, job: Playing, events: int) -> None:
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
        job.finished.set()
