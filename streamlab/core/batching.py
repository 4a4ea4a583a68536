"""Render batching: coalesce timed text deltas into repaints at most every N ms, first words at once (sans-IO core).

Why. A fast stream delivers a delta every few milliseconds. A UI that repaints on every delta (re-render
Markdown, re-layout the page, scroll) does that work hundreds of times a second, and the page stutters. A
reader cannot see a difference between text that appears every 8 ms and text that appears every 50 ms, so a
renderer can collect deltas and paint them together. Two rules keep that from costing anything a user notices:

1. **The first delta paints at once.** Perceived time to first token is when the first words appear; it
   must equal the network TTFT, not TTFT plus a tick. More generally, a delta that arrives after a quiet
   spell of at least one interval paints at once: a slow stream is painted exactly as it arrives.
2. **Nothing waits longer than one interval.** A delta that arrives sooner is held, and everything held is
   painted together exactly one interval after the previous paint. So paints are at least `interval` apart,
   and no piece of text is shown more than `interval` late.

This is a throttle with a leading and a trailing edge. `Batcher` is the decider: `feed(text, now)` returns
the `Flush` to paint now (or None: held), `next_due` says when held text is due, `tick(now)` paints it then.
It reads no clock; `batch(deltas, interval)` runs it over a schedule as an ideal timer would, so the lab's
side-by-side numbers are exact and repeatable, and `streamlab.tools.render` runs the same decider on a live
stream with asyncio. `render_stats` summarises a rendering: repaints, repaints per second, characters per
repaint, perceived TTFT and the longest wait.

All times are seconds on one clock (relative to the request, typically). Times closer than `EPSILON` are
treated as the same instant, so a schedule of round numbers gives round answers despite binary floats.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["EPSILON", "Flush", "Batcher", "batch", "RenderStats", "render_stats", "DEFAULT_INTERVAL"]

EPSILON = 1e-9
"""Seconds within which two times count as the same instant."""

DEFAULT_INTERVAL = 0.05
"""50 ms: about 20 repaints a second at most, well under what a reader can tell apart from every delta."""


@dataclass(frozen=True)
class Flush:
    """One repaint: when (`at`), the text it adds, how many deltas it holds, and when the oldest arrived."""

    at: float
    text: str
    pieces: int
    oldest: float

    @property
    def waited(self) -> float:
        """How long the oldest delta in this repaint waited to be shown."""
        return self.at - self.oldest


class Batcher:
    """The flush decisions for one renderer (see the module docstring). `interval` in seconds; 0 paints every
    delta as it comes."""

    def __init__(self, interval: float = DEFAULT_INTERVAL) -> None:
        if not (isinstance(interval, (int, float)) and math.isfinite(interval) and interval >= 0):
            raise ValueError(f"interval must be a number of seconds >= 0, got {interval!r}")
        self.interval = float(interval)
        self.last_paint = -math.inf
        self.last_now = -math.inf
        self._held: list[str] = []
        self._oldest = 0.0
        self._due: float | None = None

    @property
    def next_due(self) -> float | None:
        """When the held text must be painted (None: nothing is held)."""
        return self._due

    @property
    def held(self) -> str:
        """Text received but not painted yet."""
        return "".join(self._held)

    def feed(self, text: str, now: float) -> Flush | None:
        """A delta arrived at `now`: the `Flush` to paint now, or None when it is held until `next_due`.

        Empty text (a role chunk, a keep-alive) paints nothing and changes nothing. If held text was due
        before `now` and nobody called `tick`, it is painted now together with this delta.
        """
        self._clock(now)
        if not text:
            return None
        if not self._held:
            self._oldest = now
            self._due = max(now, self.last_paint + self.interval)
        self._held.append(text)
        assert self._due is not None
        if self._due <= now + EPSILON:
            return self._emit(now)
        return None

    def tick(self, now: float) -> Flush | None:
        """The timer fired at `now`: the held text if it is due, else None."""
        self._clock(now)
        if self._held and self._due is not None and self._due <= now + EPSILON:
            return self._emit(now)
        return None

    def _clock(self, now: float) -> None:
        if not (isinstance(now, (int, float)) and math.isfinite(now)):
            raise ValueError(f"now must be a finite number of seconds, got {now!r}")
        if now < self.last_now - EPSILON:
            raise ValueError(f"times must not go backwards: {now!r} after {self.last_now!r}")
        self.last_now = max(now, self.last_now)

    def _emit(self, now: float) -> Flush:
        flush = Flush(now, "".join(self._held), len(self._held), self._oldest)
        self._held, self._due, self.last_paint = [], None, now
        return flush


def batch(deltas: Iterable[tuple[float, str]], interval: float = DEFAULT_INTERVAL) -> list[Flush]:
    """The repaints a renderer batching at `interval` makes for `deltas` ((arrival time, text), in order),
    with a timer that fires exactly when held text is due. Nothing is lost: the flushes' text joined is the
    deltas' text joined."""
    batcher = Batcher(interval)
    flushes: list[Flush] = []
    for at, text in deltas:
        due = batcher.next_due
        if due is not None and at > due + EPSILON:  # the timer fired before this delta came
            flush = batcher.tick(due)
            if flush is not None:
                flushes.append(flush)
        flush = batcher.feed(text, at)
        if flush is not None:
            flushes.append(flush)
    due = batcher.next_due
    if due is not None:  # the stream ended: the held text is painted when due
        flush = batcher.tick(due)
        if flush is not None:
            flushes.append(flush)
    return flushes


@dataclass(frozen=True)
class RenderStats:
    """How a rendering went.

    `repaints`; `per_second`: the mean repaint rate between the first and the last repaint (0 with fewer
    than two); `chars_per_repaint`: the mean characters a repaint adds; `first_paint`: when the first words
    appeared (the perceived TTFT); `max_wait`: the longest any delta waited to be shown.
    """

    repaints: int
    per_second: float
    chars_per_repaint: float
    first_paint: float | None
    max_wait: float

    def line(self) -> str:
        first = "none" if self.first_paint is None else f"{self.first_paint * 1000:.0f} ms"
        return (
            f"{self.repaints} repaints, {self.per_second:.1f} per second, {self.chars_per_repaint:.1f} chars "
            f"per repaint, first words at {first}, longest wait {self.max_wait * 1000:.0f} ms"
        )


def render_stats(flushes: Sequence[Flush]) -> RenderStats:
    """Summarise a list of flushes (from `batch`, or recorded by a live renderer)."""
    if not flushes:
        return RenderStats(0, 0.0, 0.0, None, 0.0)
    span = flushes[-1].at - flushes[0].at
    rate = (len(flushes) - 1) / span if len(flushes) > 1 and span > EPSILON else 0.0
    chars = sum(len(f.text) for f in flushes)
    return RenderStats(len(flushes), rate, chars / len(flushes), flushes[0].at, max(f.waited for f in flushes))
