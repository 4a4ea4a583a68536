"""The chaos proxy's connection records, shared between its event loop and other threads (I/O layer).

The proxy's event loop writes (`ChaosBook.open`, `wrote`, `dropped`, ...); a test, a notebook or the command
line reads snapshots (`ConnectionRecord`, from `streamlab.core.chaos`) or blocks until the records reach a
state (`wait_until`), from any thread. A proxy that runs for a whole workshop must not grow without bound,
so the book keeps the last `max_records` connections (a ring; numbers keep counting) and, per direction,
the first `KEEP_SIZES` write and slice sizes (the byte counts stay exact).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from streamlab.core.chaos import ConnectionEnd, ConnectionRecord, Direction, Fired, SlicePlan

__all__ = ["ChaosBook", "Tally", "KEEP_SIZES", "DEFAULT_MAX_RECORDS"]

UP, DOWN = Direction.UP, Direction.DOWN
KEEP_SIZES = 256
DEFAULT_MAX_RECORDS = 1000


@dataclass
class Tally:
    """The live, mutable record of one connection (changed only through the book, under its lock)."""

    number: int
    client: tuple[str, int]
    started: float
    passed: dict[Direction, int] = field(default_factory=lambda: {UP: 0, DOWN: 0})
    dropped: dict[Direction, int] = field(default_factory=lambda: {UP: 0, DOWN: 0})
    writes: dict[Direction, list[int]] = field(default_factory=lambda: {UP: [], DOWN: []})
    plans: dict[Direction, SlicePlan | None] = field(default_factory=dict)
    fired: list[Fired] = field(default_factory=list)
    sender_closed: dict[Direction, bool] = field(default_factory=lambda: {UP: False, DOWN: False})
    end: ConnectionEnd = ConnectionEnd.OPEN
    closed: bool = False
    duration: float | None = None

    def snapshot(self) -> ConnectionRecord:
        def planned(way: Direction) -> tuple[int, ...]:
            plan = self.plans.get(way)
            return tuple(plan.planned[:KEEP_SIZES]) if plan is not None else ()

        return ConnectionRecord(
            self.number,
            self.client,
            self.passed[UP],
            self.passed[DOWN],
            self.dropped[UP],
            self.dropped[DOWN],
            tuple(self.writes[UP]),
            tuple(self.writes[DOWN]),
            planned(UP),
            planned(DOWN),
            tuple(self.fired),
            self.sender_closed[UP],
            self.sender_closed[DOWN],
            self.end,
            self.closed,
            self.duration,
        )


class ChaosBook:
    """Every connection's `Tally`, behind one lock and one condition (so waiting never polls)."""

    def __init__(self, *, max_records: int = DEFAULT_MAX_RECORDS) -> None:
        self._cond = threading.Condition()
        self._tallies: deque[Tally] = deque(maxlen=max_records)
        self._count = 0

    def open(self, client: tuple[str, int], started: float) -> Tally:
        """A new connection, numbered from 0 in accept order."""
        with self._cond:
            tally = Tally(self._count, client, started)
            self._count += 1
            self._tallies.append(tally)
            self._cond.notify_all()
            return tally

    def _change(self, apply: Callable[[], object]) -> None:
        with self._cond:
            apply()
            self._cond.notify_all()

    def plans(self, tally: Tally, plans: dict[Direction, SlicePlan | None]) -> None:
        self._change(lambda: tally.plans.update(plans))

    def wrote(self, tally: Tally, way: Direction, size: int) -> None:
        def apply() -> None:
            tally.passed[way] += size
            if len(tally.writes[way]) < KEEP_SIZES:
                tally.writes[way].append(size)

        self._change(apply)

    def dropped(self, tally: Tally, way: Direction, size: int) -> None:
        def apply() -> None:
            tally.dropped[way] += size

        self._change(apply)

    def sender_closed(self, tally: Tally, way: Direction) -> None:
        self._change(lambda: tally.sender_closed.__setitem__(way, True))

    def fired(self, tally: Tally, fired: Fired) -> None:
        self._change(lambda: tally.fired.append(fired))

    def ended(self, tally: Tally, end: ConnectionEnd) -> None:
        self._change(lambda: setattr(tally, "end", end))

    def closed(self, tally: Tally, duration: float) -> None:
        def apply() -> None:
            tally.closed, tally.duration = True, duration

        self._change(apply)

    def snapshot(self) -> list[ConnectionRecord]:
        with self._cond:
            return [t.snapshot() for t in self._tallies]

    def wait_until(self, predicate: Callable[[list[ConnectionRecord]], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate([t.snapshot() for t in self._tallies]), timeout)
