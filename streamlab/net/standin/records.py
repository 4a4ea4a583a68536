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
request, in the handler's thread, with the record's final snapshot; with `started=True` also once when the
planner has decided (the record then knows the learner and the model, and is not finished yet).
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
    """A request being served: what the wire loop fills in while it runs (the ring keeps it; `close` freezes it)."""

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
    kept: int = 0  # bytes this record holds against the book's max_total_bytes
    trimmed: bool = False  # gave its bytes up for newer records: keeps no more (so `written` stays a prefix)

    def snapshot(self) -> RequestRecord:
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


class RecordBook:
    """Thread-safe records of one server: the ring, the totals, the feed. Handlers write; readers snapshot."""

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
        self._kept = 0  # bytes all the records hold (the sum of their `kept`)
        self._holding: deque[OpenRecord] = deque(maxlen=max_records)  # records that hold bytes, oldest first
        self._cond = threading.Condition()
        self._ring: deque[OpenRecord] = deque(maxlen=max_records)
        self._next = 0
        self._endings: Counter[Ending] = Counter()
        self._refused = 0
        self._subscribers: list[Callable[[RequestRecord], None]] = []
        self._starters: list[Callable[[RequestRecord], None]] = []

    # -- written by the handlers --

    def open(self, method: str, path: str, headers: dict[str, str], learner: str) -> OpenRecord:
        with self._cond:
            rec = OpenRecord(
                self._next, clip(method, 32), clip(path), kept_headers(headers), time.perf_counter(), clip(learner)
            )
            self._next += 1
            if len(self._ring) == self._ring.maxlen:  # the oldest leaves the ring: its bytes no longer count
                self._kept -= self._ring[0].kept
                self._ring[0].kept = 0
            self._ring.append(rec)
            self._cond.notify_all()
            return rec

    def update(self, rec: OpenRecord, **changes: Any) -> None:
        with self._cond:
            for name, value in changes.items():
                setattr(rec, name, value)
            self._cond.notify_all()

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
        with self._cond:
            for name, value in changes.items():
                setattr(rec, name, value)
            if "json" in changes:
                self._charge(rec, rec.body_bytes)  # a parsed body costs about what its text did
            self._cond.notify_all()
            starters = list(self._starters)
            if not starters:
                return
            snapshot = rec.snapshot()
        for callback in starters:
            callback(snapshot)

    def body(self, rec: OpenRecord, body: bytes) -> None:
        with self._cond:
            rec.body, rec.body_bytes = body[: self.max_record_bytes], len(body)
            self._charge(rec, len(rec.body))
            self._cond.notify_all()

    def _charge(self, rec: OpenRecord, size: int) -> None:
        """Count `size` more bytes held by `rec`; past `max_total_bytes`, the oldest other records give theirs
        up (under the lock)."""
        if size <= 0:
            return
        if not rec.kept:
            self._holding.append(rec)
        rec.kept += size
        self._kept += size
        while self._kept > self.max_total_bytes and self._holding and self._holding[0] is not rec:
            old = self._holding.popleft()
            self._kept -= old.kept
            old.kept, old.body, old.json, old.written, old.trimmed = 0, b"", None, bytearray(), True

    def wrote(self, rec: OpenRecord, data: bytes, frame: bool, at: float | None = None) -> None:
        with self._cond:
            room = 0 if rec.trimmed else self.max_record_bytes - len(rec.written)
            if room > 0:
                rec.written += data[:room]
                self._charge(rec, min(room, len(data)))
            rec.bytes_written += len(data)
            rec.frames_written += frame
            if at is not None and len(rec.write_times) < self.max_record_bytes // 8 + 1:
                rec.write_times.append(at)
            self._cond.notify_all()

    def close(self, rec: OpenRecord) -> None:
        """The request is over: stamp it, count its ending, and feed it to the subscribers."""
        with self._cond:
            rec.finished_at = time.perf_counter()
            self._endings[rec.ending] += 1
            snapshot = rec.snapshot()
            subscribers = list(self._subscribers)
            self._cond.notify_all()
        for callback in subscribers:
            callback(snapshot)

    def refused(self) -> None:
        with self._cond:
            self._refused += 1

    # -- read by everyone --

    def snapshots(self, model: str | None = None, learner: str | None = None) -> list[RequestRecord]:
        with self._cond:
            return [
                r.snapshot()
                for r in self._ring
                if (model is None or r.model == model) and (learner is None or r.learner == learner)
            ]

    def totals(self) -> RequestTotals:
        with self._cond:
            return RequestTotals(self._next, dict(self._endings), self._refused)

    def wait_until(self, predicate: Callable[[list[RequestRecord]], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate([r.snapshot() for r in self._ring]):
                    return True
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)

    def subscribe(self, callback: Callable[[RequestRecord], None], *, started: bool = False) -> Callable[[], None]:
        """Call `callback` with each finished request's snapshot (and, with `started`, with each request's
        snapshot once the planner has decided on it). Returns the function that unsubscribes."""
        with self._cond:
            self._subscribers.append(callback)
            if started:
                self._starters.append(callback)

        def unsubscribe() -> None:
            with self._cond:
                for kept in (self._subscribers, self._starters):
                    if callback in kept:
                        kept.remove(callback)

        return unsubscribe

    def clear(self) -> None:
        """Forget the records and the totals (the next request is index 0 again)."""
        with self._cond:
            self._ring.clear()
            self._holding.clear()
            self._kept = 0
            self._next = 0
            self._endings.clear()
            self._refused = 0
            self._cond.notify_all()
