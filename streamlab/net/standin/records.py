"""The stand-in's request records: a bounded ring, running totals and a feed of finished requests (I/O layer).

Every request the stand-in serves leaves a `RequestRecord` (what arrived, what was written and when, how it
ended) so labs and tests can assert on the server's side of the story. A server that runs for a whole
workshop must not grow without bound, so `RecordBook` keeps only the last `max_records` records (a ring),
and at most `max_record_bytes` of each request body and of what was written (the counts stay exact). All the
records together hold at most `max_total_bytes` (64 MiB) of bodies, parsed bodies and written bytes: past it the
oldest records give theirs up (`body`, `written` empty, `json` None; their counts stay). 400 requests with 1 MB
model names had held 1.2 GB: each kept its body, its parsed body and the 404 that quoted the name. Totals
(requests, how many ended which way) count everything ever served.

Whoever wants to follow the requests as they finish (the command line's one line per request, a dashboard)
subscribes a callback instead of rescanning the records: `subscribe(callback)` calls it once per finished
request, in the thread that finished it, with the record's final snapshot; with `started=True` also once when the
planner has decided (the record then knows the learner and the model, and is not finished yet). A callback that
raises is ignored: an observer's bug must not end the request it observed (nor the server's stream player).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamlab.core.endings import Ending
from streamlab.core.standin.actions import Note
from streamlab.core.untrusted import MAX_FIELD_CHARS, clip

__all__ = [
    "RequestRecord",
    "RequestTotals",
    "RecordBook",
    "OpenRecord",
    "DEFAULT_MAX_RECORDS",
    "DEFAULT_MAX_RECORD_BYTES",
    "DEFAULT_MAX_TOTAL_BYTES",
]

DEFAULT_MAX_RECORDS = 1000
DEFAULT_MAX_RECORD_BYTES = 1024 * 1024
DEFAULT_MAX_TOTAL_BYTES = 64 * 1024 * 1024
"""What all the records together keep of bodies, parsed bodies and written bytes; the oldest give theirs up."""
MAX_HEADERS = 64
"""Request headers a record keeps (the first ones, each value clipped to `MAX_FIELD_CHARS`): a 64 KiB head of
thousands of tiny headers would otherwise cost a record far more than its byte budget."""


def kept_headers(headers: dict[str, str]) -> dict[str, str]:
    """What a record keeps of a request's headers: the first `MAX_HEADERS`, names and values clipped."""
    kept: dict[str, str] = {}
    for name, value in headers.items():
        if len(kept) >= MAX_HEADERS:
            break
        kept[clip(name, 64)] = clip(value, MAX_FIELD_CHARS)
    return kept


@dataclass(frozen=True)
class RequestRecord:
    """What the server saw and did for one request (a snapshot; fetch again for newer state).

    `ending` is an `Ending` (a `str` enum, so it compares equal to its value): in_progress, complete (the
    body ended cleanly), http_error (an error status was sent), cut (a scripted `Cut`), client_gone (the
    client closed or reset the connection before the end), cancelled (a cancel request stopped the stream)
    or stopped (the server shut down mid-stream). `learner` is the request's API key ("" without one).
    `written` holds the response payload (stream bytes or JSON body, not HTTP chunk framing) handed to the
    operating system, at most the book's `max_record_bytes` of it; `bytes_written` counts all of it. `body`
    likewise keeps at most `max_record_bytes` of the request body, and `json` (the parsed body) is None
    when the body was longer than that.
    What else a client chose is capped too, so a record's size does not depend on the client: `path` and
    `model` keep `MAX_FIELD_CHARS` characters, `headers` the first `MAX_HEADERS` (values clipped), `learner`
    is `streamlab.core.standin.room.learner_of`'s bounded name for the key, and `write_times` keeps the first
    `max_record_bytes // 8 + 1` times.
    Past the book's `max_total_bytes` over all records, the oldest give up `body`, `written` and `json`.
    `frames_written` counts `Send`/`KeepAlive` steps written whole. `write_times` holds the
    `time.perf_counter()` value taken just before each stream chunk was handed to the operating system (same
    clock as the client's arrival times when both run on one machine: a client cannot have a chunk earlier),
    `started_at` when the request head was read, `arrived_at` when the request's last byte arrived (the kernel's
    stamp where it gives one): the moment a stream's first scripted pause counts from (None before the body).
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
    ending: Ending
    started_at: float
    finished_at: float | None
    resumed_after: str | None = None
    write_times: tuple[float, ...] = ()
    learner: str = ""
    bytes_written: int = 0
    arrived_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def last_event_id(self) -> str | None:
        """The `Last-Event-ID` header the request carried (None without one): what a reconnecting `EventSource`
        sends on its own, and what `resumed_after` and a 204 after the final event are decided from."""
        return self.headers.get("last-event-id")


@dataclass(frozen=True)
class RequestTotals:
    """Counts over every request served since the last full reset (the ring forgets; these do not)."""

    requests: int
    endings: dict[Ending, int]
    refused_connections: int


@dataclass
class OpenRecord:
    """A request being served: what the wire loop fills in while it runs (the ring keeps it; `close` freezes it).

    Its own `lock` guards its fields: the handler that serves the request is its only writer, so taking it costs
    no wait but while a reader copies the record (`snapshot`) or an older record's bytes are given up."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    started_at: float
    learner: str = ""
    body: bytes = b""
    body_bytes: int = 0
    json: Any = None
    model: str | None = None
    episode: int | None = None
    stream: bool = False
    status: int | None = None
    written: bytearray = field(default_factory=bytearray)
    bytes_written: int = 0
    frames_written: int = 0
    client_gone: bool = False
    ending: Ending = Ending.IN_PROGRESS
    finished_at: float | None = None
    resumed_after: str | None = None
    write_times: list[float] = field(default_factory=list)
    arrived_at: float | None = None
    kept: int = 0  # bytes counted against the book's max_total_bytes for this record (`spare` included)
    spare: int = 0  # of those, counted ahead for the written bytes still to come (`RecordBook.wrote`)
    trimmed: bool = False  # gave its bytes up for newer records: keeps no more (so `written` stays a prefix)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def snapshot(self) -> RequestRecord:
        """A frozen copy of the record as it is now, taken under its lock (so it is never half-updated)."""
        with self.lock:
            return self.frozen()

    def frozen(self) -> RequestRecord:
        """The frozen copy, for a caller that already holds `lock`."""
        return RequestRecord(
            self.index,
            self.method,
            self.path,
            dict(self.headers),
            self.body,
            self.json,
            self.model,
            self.episode,
            self.stream,
            self.status,
            bytes(self.written),
            self.frames_written,
            self.client_gone,
            self.ending,
            self.started_at,
            self.finished_at,
            self.resumed_after,
            tuple(self.write_times),
            self.learner,
            self.bytes_written,
            self.arrived_at,
        )


LEASE_MIN = 4 * 1024
"""Bytes of written output a record counts ahead against the total budget when it needs more: a stream's frames
are then kept under the record's own lock, and the book's lock is taken once per lease, not once per frame."""
LEASE_MAX = 64 * 1024
"""A record's lease doubles with what it has kept, up to this (a long stream takes the book's lock rarely)."""
POLL = 0.05
"""Seconds between two looks at the records by `wait_until` when nothing it is woken for has happened: frames
written wake nobody, so a condition on them (`frames_written`, `written`) is seen within this."""


class RecordBook:
    """Thread-safe records of one server: the ring, the totals, the feed. Handlers write; readers snapshot.

    Two kinds of lock, always taken in this order: the book's (the ring, the totals, the byte budget, the
    waiters), then one record's (its fields). A frame written takes only its record's lock and wakes nobody: the
    book's lock is taken a few times per request (open, body, plan, close) and once per `LEASE_MIN` to
    `LEASE_MAX` bytes kept. A thousand streams at once had queued on one lock for every frame, and every frame
    woke every waiter, which then copied every record. Waiters in `wait_until` are woken when a request opens,
    changes state (`update`) or closes, and look again every `POLL` seconds for what frames change."""

    def __init__(
        self,
        *,
        max_records: int = DEFAULT_MAX_RECORDS,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    ) -> None:
        if max_records < 1 or max_record_bytes < 0 or max_total_bytes < 0:
            raise ValueError(
                f"max_records must be >= 1, max_record_bytes and max_total_bytes >= 0, got {max_records}, "
                f"{max_record_bytes}, {max_total_bytes}"
            )
        self.max_record_bytes = max_record_bytes
        self.max_total_bytes = max_total_bytes
        self._kept = 0  # bytes all the records count (the sum of their `kept`)
        self._holding: deque[OpenRecord] = deque(maxlen=max_records)  # records that hold bytes, oldest first
        self._cond = threading.Condition(threading.Lock())  # the book's lock
        self._waiting = 0  # threads inside wait_until: only then does a change take the lock to wake them
        self._version = 0  # bumped by every change a waiter is woken for
        self._ring: deque[OpenRecord] = deque(maxlen=max_records)
        self._next = 0
        self._endings: Counter[Ending] = Counter()
        self._refused = 0
        # replaced whole, never changed in place: a handler reads them without the lock
        self._subscribers: tuple[Callable[[RequestRecord], None], ...] = ()
        self._starters: tuple[Callable[[RequestRecord], None], ...] = ()

    # -- written by the handlers --

    def open(self, method: str, path: str, headers: dict[str, str], learner: str) -> OpenRecord:
        rec = OpenRecord(-1, clip(method, 32), clip(path), kept_headers(headers), time.perf_counter(), clip(learner))
        with self._cond:
            rec.index = self._next
            self._next += 1
            if len(self._ring) == self._ring.maxlen:  # the oldest leaves the ring: its bytes no longer count
                oldest = self._ring[0]
                with oldest.lock:
                    self._kept -= oldest.kept
                    oldest.kept = oldest.spare = 0
            self._ring.append(rec)
            self._changed()
        return rec

    def update(self, rec: OpenRecord, **changes: Any) -> None:
        with rec.lock:
            for name, value in changes.items():
                setattr(rec, name, value)
        self._wake()

    def note(self, rec: OpenRecord, note: Note) -> None:
        """Copy what the planner said about the request (its None fields leave the record as it is). The
        parsed body is kept only with a body kept whole: a record never holds more than its byte budget."""
        names = ("learner", "json", "model", "episode", "stream", "resumed_after")
        changes = {name: getattr(note, name) for name in names if getattr(note, name) is not None}
        if rec.body_bytes > self.max_record_bytes:
            changes.pop("json", None)
        for name in ("learner", "model"):  # client-chosen strings: kept to MAX_FIELD_CHARS
            if isinstance(changes.get(name), str):
                changes[name] = clip(changes[name])
        starters = self._starters
        with self._cond, rec.lock:
            for name, value in changes.items():
                setattr(rec, name, value)
            if "json" in changes:
                self._charge(rec, rec.body_bytes)  # a parsed body costs about what its text did
            self._changed()
            snapshot = rec.frozen() if starters else None
        if snapshot is not None:
            for callback in starters:
                try:
                    callback(snapshot)
                except Exception:  # as in `close`: an observer's bug stops nothing
                    pass

    def body(self, rec: OpenRecord, body: bytes) -> None:
        with self._cond, rec.lock:
            rec.body, rec.body_bytes = body[: self.max_record_bytes], len(body)
            self._charge(rec, len(rec.body))
            self._changed()

    def wrote(self, rec: OpenRecord, data: bytes, frame: bool, at: float | None = None) -> None:
        """Record bytes handed to the operating system (`frame`: a whole scripted frame). The hot path of a
        stream: its record's lock only, and no wake-up; the book's lock only when the record's lease is spent."""
        with rec.lock:
            keep = self._keep(rec, len(data))
            if keep <= rec.spare:
                self._append(rec, data, keep, frame, at)
                return
        with self._cond, rec.lock:  # the lease is spent: count more ahead (the book's lock, then the record's)
            keep = self._keep(rec, len(data))
            if keep > rec.spare:
                self._lease(rec, keep - rec.spare)
            self._append(rec, data, keep, frame, at)

    def _keep(self, rec: OpenRecord, size: int) -> int:
        """How many of `size` written bytes the record keeps (under its lock)."""
        return 0 if rec.trimmed else max(0, min(size, self.max_record_bytes - len(rec.written)))

    def _append(self, rec: OpenRecord, data: bytes, keep: int, frame: bool, at: float | None) -> None:
        """Add one write to the record (under its lock), its first `keep` bytes against its spare count."""
        if keep:
            rec.written += data[:keep]
            rec.spare -= keep
        rec.bytes_written += len(data)
        rec.frames_written += frame
        if at is not None and len(rec.write_times) < self.max_record_bytes // 8 + 1:
            rec.write_times.append(at)

    def _lease(self, rec: OpenRecord, need: int) -> None:
        """Count at least `need` more bytes ahead for `rec`'s writes: double what it keeps, within LEASE_MIN and
        LEASE_MAX, what it may still keep and what the budget has free (so counting ahead never makes an older
        record give its bytes up; under both locks)."""
        may = self.max_record_bytes - len(rec.written) - rec.spare
        free = self.max_total_bytes - self._kept
        size = max(need, min(max(rec.kept, LEASE_MIN), LEASE_MAX, may, free))
        self._charge(rec, size)
        rec.spare += size

    def _charge(self, rec: OpenRecord, size: int) -> None:
        """Count `size` more bytes held by `rec`; past `max_total_bytes`, the oldest other records give theirs
        up (under the book's lock and `rec`'s; each of the others' is taken in turn)."""
        if size <= 0:
            return
        if not rec.kept:
            self._holding.append(rec)
        rec.kept += size
        self._kept += size
        while self._kept > self.max_total_bytes and self._holding and self._holding[0] is not rec:
            old = self._holding.popleft()
            with old.lock:
                self._kept -= old.kept
                old.kept, old.spare, old.body, old.json, old.written, old.trimmed = 0, 0, b"", None, bytearray(), True

    def close(self, rec: OpenRecord) -> None:
        """The request is over: stamp it, give back what it counted ahead, count its ending, and feed it to the
        subscribers."""
        with self._cond, rec.lock:
            rec.finished_at = time.perf_counter()
            rec.kept -= rec.spare
            self._kept -= rec.spare
            rec.spare = 0
            self._endings[rec.ending] += 1
            snapshot = rec.frozen()
            subscribers = self._subscribers
            self._changed()
        for callback in subscribers:
            try:
                callback(snapshot)
            except Exception:  # an observer's bug: the request it observed, and the server, go on regardless
                pass

    def refused(self) -> None:
        with self._cond:
            self._refused += 1

    def _changed(self) -> None:
        """A change waiters are woken for (under the book's lock)."""
        if self._waiting:
            self._version += 1
            self._cond.notify_all()

    def _wake(self) -> None:
        """After a change made under a record's lock only: wake the waiters, if there are any. A waiter counts
        itself in before it looks at the records, so a change it did not see finds it counted."""
        if self._waiting:
            with self._cond:
                self._changed()

    # -- read by everyone --

    def snapshots(self, model: str | None = None, learner: str | None = None) -> list[RequestRecord]:
        """Each record's snapshot, oldest first (each consistent in itself, taken one after the other)."""
        with self._cond:
            ring = list(self._ring)
        return [
            r.snapshot()
            for r in ring
            if (model is None or r.model == model) and (learner is None or r.learner == learner)
        ]

    def totals(self) -> RequestTotals:
        with self._cond:
            return RequestTotals(self._next, dict(self._endings), self._refused)

    def wait_until(self, predicate: Callable[[list[RequestRecord]], bool], timeout: float) -> bool:
        """Block until `predicate(snapshots)` is true (True) or `timeout` seconds pass (False). It is tried again
        when a request opens, changes state or closes, and at least every `POLL` seconds (for frames written)."""
        end = time.monotonic() + timeout
        with self._cond:
            self._waiting += 1
        try:
            while True:
                with self._cond:
                    seen = self._version
                if predicate(self.snapshots()):
                    return True
                left = end - time.monotonic()
                if left <= 0:
                    return False
                with self._cond:
                    if self._version == seen:
                        self._cond.wait(min(left, POLL))
        finally:
            with self._cond:
                self._waiting -= 1

    def subscribe(self, callback: Callable[[RequestRecord], None], *, started: bool = False) -> Callable[[], None]:
        """Call `callback` with each finished request's snapshot (and, with `started`, with each request's
        snapshot once the planner has decided on it). Returns the function that unsubscribes."""
        with self._cond:
            self._subscribers = (*self._subscribers, callback)
            if started:
                self._starters = (*self._starters, callback)

        def unsubscribe() -> None:
            with self._cond:
                self._subscribers = _without(self._subscribers, callback)
                self._starters = _without(self._starters, callback)

        return unsubscribe

    def clear(self) -> None:
        """Forget the records and the totals (the next request is index 0 again). Requests still being served
        count their bytes afresh."""
        with self._cond:
            for rec in self._ring:
                with rec.lock:
                    rec.kept = rec.spare = 0
            self._ring.clear()
            self._holding.clear()
            self._kept = 0
            self._next = 0
            self._endings.clear()
            self._refused = 0
            self._changed()


def _without(
    callbacks: tuple[Callable[[RequestRecord], None], ...], callback: Callable[[RequestRecord], None]
) -> tuple[Callable[[RequestRecord], None], ...]:
    """`callbacks` less the first `callback` in it (a callback subscribed twice stays once)."""
    if callback not in callbacks:
        return callbacks
    i = callbacks.index(callback)
    return callbacks[:i] + callbacks[i + 1 :]
