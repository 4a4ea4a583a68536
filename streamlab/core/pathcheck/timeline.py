"""When each event of one read arrived: a read's bytes and arrival times in, its timeline out (sans-IO core).

A read keeps its body and, for every network read, how many bytes had come and when (`PathRead.arrivals`, after
the Content-Encoding was undone; `PathRead.wire`, as they came off the wire). `timeline_of` scans the body
(`streamlab.core.scan`: every event pinned to its bytes) and gives each event the time of the network read that
completed it, so what a reader saw, and when, is a value the grader can compare: the first event against the
direct route's, the spread of the events, the silence before a cut, the end after [DONE].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamlab.core.conformance.base import carries, is_done
from streamlab.core.decompress import codings_of
from streamlab.core.pathcheck.checks import PathRead, PathTiming
from streamlab.core.scan import Block, Scan, scan

__all__ = ["Timeline", "timeline_of", "timing_of", "arrival"]


def arrival(arrivals: Sequence[tuple[int, float]], offset: int) -> float | None:
    """The time of the first network read after which at least `offset` bytes had arrived (None: never)."""
    for received, at in arrivals:
        if received >= offset:
            return at
    return None


@dataclass(frozen=True)
class Timeline:
    """One read's events in time (seconds since its request; None where a moment never came): `headers`,
    `first_byte` (the body's first byte off the wire), `events` (each event's block with its arrival), `done`
    ([DONE]), `end` (the body ended or broke), `wire` (the time of every network read), `keepalives` (the arrival
    of each comment-only block), and the `scan` itself for quoting evidence."""

    headers: float | None
    first_byte: float | None
    events: tuple[tuple[Block, float], ...]
    done: float | None
    end: float | None
    wire: tuple[float, ...]
    keepalives: tuple[float, ...]
    scan: Scan

    @property
    def first_event(self) -> float | None:
        return self.events[0][1] if self.events else None

    @property
    def last_event(self) -> float | None:
        return self.events[-1][1] if self.events else None

    @property
    def span(self) -> float:
        """Seconds from the first event to the last (0 for fewer than two)."""
        return self.events[-1][1] - self.events[0][1] if len(self.events) > 1 else 0.0

    @property
    def first_content(self) -> float | None:
        """When the first event carrying text (a delta with content) arrived."""
        for block, at in self.events:
            obj = block.obj
            if isinstance(obj, dict) and any(
                isinstance(c, dict) and carries(c.get("delta")) for c in obj.get("choices") or []
            ):
                return at
        return None

    def together_at_end(self, within: float) -> int:
        """How many events arrived within `within` seconds of the last one."""
        last = self.last_event
        return 0 if last is None else sum(1 for _, at in self.events if last - at <= within)

    def longest_silence(self, *, to_end: bool = False) -> float:
        """The longest time the reader got nothing: from the request to the headers (a path may hold them), between
        two network reads, and with `to_end` to the end of the body too (before a cut: about the path's idle
        timeout)."""
        times = [0.0] + [t for t in (self.headers,) if t is not None] + list(self.wire)
        if to_end and self.end is not None:
            times.append(self.end)
        times.sort()
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)


def timeline_of(read: PathRead) -> Timeline:
    """The timeline of `read` (its body scanned, each event given the time of the read that completed it)."""
    sc = scan(read.body)
    events = tuple((b, at) for b in sc.events if (at := arrival(read.arrivals, b.end)) is not None)
    done = next((at for b, at in events if is_done(b)), None)
    pings = tuple(at for b in sc.blocks if b.comment_only and (at := arrival(read.arrivals, b.end)) is not None)
    return Timeline(
        headers=read.headers_at,
        first_byte=read.wire[0][1] if read.wire else None,
        events=events,
        done=done,
        end=read.ended_at,
        wire=tuple(at for _, at in read.wire),
        keepalives=pings,
        scan=sc,
    )


def timing_of(read: PathRead) -> PathTiming:
    """The timing facts of `read`, as the report prints them."""
    t = timeline_of(read)
    return PathTiming(
        read=read.name,
        http_version=read.http_version,
        encoding=", ".join(codings_of(read.header("content-encoding"))),
        headers=t.headers,
        first_byte=t.first_byte,
        first_event=t.first_event,
        first_content=t.first_content,
        last_event=t.last_event,
        done=t.done,
        end=t.end,
        events=len(t.events),
        keepalives=len(t.keepalives),
        wire_bytes=read.wire[-1][0] if read.wire else 0,
        bytes=len(read.body),
        ending=read.ending.value,
    )
