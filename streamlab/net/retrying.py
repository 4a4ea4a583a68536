"""Retrying a streamed request, but only while nothing has reached the caller.

The rule this module enforces: a retry is an ordinary, safe thing *before the first event*, and a
dangerous one after it. Before the first event nothing was shown, so a connection error, a 408 (the
server timed out waiting for us), a 409 (a lock conflict), a 429 (slow down) or a 5xx may be retried
with a fresh request. After the first event a new request produces a *new* answer (sampling is random),
so gluing it onto the half-shown old one duplicates or garbles text; the caller must choose between
"discard and restart" and a resumable mechanism (`streamlab.resume`). 400, 401, 403, 404 and 422 say
"your request is wrong" and are never retried: sending the same bytes again gives the same answer.

Two layers, as everywhere in streamlab:

* `RetryPolicy.decide(...)` is pure (sans-IO): given one attempt's result it answers "retry after X s"
  or "give up, because ...". No clock, no sleep, no socket; a seeded `random.Random` makes the jitter
  reproducible.
* `RetryingStream(...)` / `AsyncRetryingStream(...)` run that policy against `streamlab.client`,
  with an injectable `sleep` and `clock`, and record every attempt. When they give up they raise
  `RetryError`, whose message lists each attempt: when it started, what came back, how long it waited.

`plot_attempts(...)` draws the attempt timeline with matplotlib.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import math
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import RetryError

__all__ = [
    "RETRYABLE_STATUSES",
    "NEVER_RETRY_STATUSES",
    "AttemptResult",
    "Decision",
    "Attempt",
    "RetryPolicy",
    "RetryError",
    "RetryingStream",
    "AsyncRetryingStream",
    "parse_retry_after",
    "is_retryable_status",
    "plot_attempts",
    "VirtualClock",
]

#: Statuses the official openai-python SDK retries by default (>= 500 is added by `is_retryable_status`).
RETRYABLE_STATUSES = frozenset({408, 409, 429})
#: "Your request is wrong": the same bytes sent again get the same answer.
NEVER_RETRY_STATUSES = frozenset({400, 401, 403, 404, 422})


def is_retryable_status(status: int) -> bool:
    """True for 408, 409, 429 and every 5xx; False for everything else (including 400/401/403/404/422)."""
    return status in RETRYABLE_STATUSES or 500 <= status <= 599


_DELAY_SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?")  # not float(): it would take "1e2", "1_000", "inf"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup that works for plain dicts and httpx.Headers alike."""
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> tuple[float | None, str]:
    """What the server asked us to wait, in seconds, and which header said so.

    `retry-after-ms` (milliseconds, a number; an OpenAI extension) wins over the standard `Retry-After`
    (RFC 9110 section 10.2.3: either a non-negative number of seconds or an HTTP date). An HTTP date is
    turned into a delay against `now` (wall-clock epoch seconds; pass it for determinism, default
    `time.time()`). A date in the past means "now": 0 s. Unparseable or negative values are ignored, as
    if the header were absent. Returns (None, "") when no usable header is present.
    """
    raw_ms = _header(headers, "retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms.strip())
        except ValueError:
            ms = math.nan
        if math.isfinite(ms) and ms >= 0:
            return ms / 1000.0, "retry-after-ms"
    raw = _header(headers, "retry-after")
    if raw is None:
        return None, ""
    raw = raw.strip()
    if _DELAY_SECONDS.fullmatch(raw):  # delay-seconds = 1*DIGIT; a decimal fraction is accepted, as SDKs do
        return float(raw), "Retry-After"
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None, ""
    if when is None:
        return None, ""
    if when.tzinfo is None:  # asctime dates carry no zone (and "-0000" parses naive): HTTP dates are all GMT
        when = when.replace(tzinfo=datetime.timezone.utc)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current), "Retry-After (HTTP date)"


@dataclass(frozen=True)
class AttemptResult:
    """What one attempt produced, as far as the retry decision cares.

    Exactly one of these describes it: `status` (an HTTP error status before the stream started),
    `error` (a connection-level failure: refused, reset, timed out, cut), or `ok=True` (the request
    succeeded). `events_delivered` counts events already handed to the caller by this attempt; once it
    is positive no retry is ever safe.
    """

    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    ok: bool = False
    events_delivered: int = 0

    def describe(self) -> str:
        """A short human description: "HTTP 429", "connection error: ...", "completed, 3 event(s)"."""
        if self.ok:
            return f"completed, {self.events_delivered} event(s)"
        if self.status is not None:
            return f"HTTP {self.status}"
        if self.error is not None:
            tail = f" after {self.events_delivered} event(s)" if self.events_delivered else ""
            return f"connection error{tail}: {self.error}"
        return "no result"


@dataclass(frozen=True)
class Decision:
    """The policy's answer for one attempt: retry after `delay` seconds, or stop (with the reason)."""

    retry: bool
    delay: float
    reason: str
    source: str = ""
    """Where the delay came from: "backoff", "retry-after-ms", "Retry-After", ... ("" when giving up)."""


@dataclass
class RetryPolicy:
    """Exponential backoff with jitter and a cap, honouring the server's Retry-After, bounded attempts.

    The n-th retry (n = 1, 2, ...) waits `min(max_delay, initial_delay * multiplier ** (n - 1))`, then
    shrinks that by a random fraction of up to `jitter` (0.25: wait between 75 % and 100 % of the
    backoff; 1.0: "full jitter", anywhere between 0 and the backoff). Jitter spreads out clients that
    failed together, so they do not all come back in the same millisecond. A server-supplied delay
    (`retry-after-ms`, then `Retry-After`) is used as given, without jitter; if it is longer than
    `max_retry_after` the policy gives up rather than wait that long, and says so.

    `seed` makes the jitter reproducible; pass `rng` to share a generator instead.
    """

    max_attempts: int = 3
    initial_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 8.0
    jitter: float = 0.25
    max_retry_after: float = 60.0
    seed: int | None = None
    rng: random.Random | None = None

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.initial_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ValueError("initial_delay, max_delay and max_retry_after must not be negative")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be at least 1, got {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter}")
        if self.rng is None:
            self.rng = random.Random(self.seed)

    def backoff(self, retry_number: int) -> float:
        """The un-jittered wait before retry number `retry_number` (1-based), capped at `max_delay`."""
        if retry_number < 1:
            raise ValueError(f"retry_number is 1-based, got {retry_number}")
        return min(self.max_delay, self.initial_delay * self.multiplier ** (retry_number - 1))

    def decide(self, attempt: int, result: AttemptResult, *, now: float | None = None) -> Decision:
        """Pure decision for attempt number `attempt` (1-based) that produced `result`.

        `now` (wall-clock epoch seconds) is only used to turn an HTTP-date `Retry-After` into a delay.
        Draws one random number from the policy's generator when it backs off with jitter.
        """
        if result.ok:
            return Decision(False, 0.0, "the request succeeded")
        if result.events_delivered:
            return Decision(
                False, 0.0,
                f"{result.events_delivered} event(s) already reached the caller: a new request would produce a "
                "new answer, so discard the partial output and restart deliberately, or resume with a cursor",
            )
        if result.status is not None:
            if result.status in NEVER_RETRY_STATUSES:
                return Decision(False, 0.0, f"HTTP {result.status} means the request itself is wrong; "
                                            "sending it again cannot help")
            if not is_retryable_status(result.status):
                return Decision(False, 0.0, f"HTTP {result.status} is not a retryable status")
        elif result.error is None:
            return Decision(False, 0.0, "the attempt produced neither a status nor an error")
        if attempt >= self.max_attempts:
            return Decision(False, 0.0, f"gave up after {attempt} attempt(s) (max_attempts={self.max_attempts})")
        asked, source = parse_retry_after(result.headers, now=now) if result.status is not None else (None, "")
        if asked is not None:
            if asked > self.max_retry_after:
                return Decision(False, 0.0, f"the server asked to wait {asked:g} s ({source}), longer than "
                                            f"max_retry_after={self.max_retry_after:g} s")
            return Decision(True, asked, f"{result.describe()}: waiting as the server asked", source)
        base = self.backoff(attempt)
        assert self.rng is not None
        delay = base * (1.0 - self.jitter * self.rng.random())
        return Decision(True, delay, f"{result.describe()}: exponential backoff with jitter", "backoff")


@dataclass
class Attempt:
    """The record of one attempt, for the final error message and the timeline plot.

    Times are seconds since the first attempt started (from the injected clock).
    """

    number: int
    started: float
    ended: float
    result: AttemptResult
    decision: Decision

    @property
    def waited(self) -> float:
        """How long we slept after this attempt before the next one (0 for the last)."""
        return self.decision.delay if self.decision.retry else 0.0

    def line(self) -> str:
        """One line of the final report."""
        if self.result.ok:
            after = "done"
        elif self.decision.retry:
            after = f"waited {self.waited:.3f} s ({self.decision.source})"
        else:
            after = f"gave up: {self.decision.reason}"
        return (f"attempt {self.number}: started at +{self.started:.3f} s, {self.result.describe()}, "
                f"after {self.ended - self.started:.3f} s; {after}")


# -- running the policy against the client ---------------------------------------------------------------

def _result_from_exception(exc: BaseException, events_delivered: int) -> AttemptResult | None:
    """Map a client exception to an AttemptResult; None means "not a transport or HTTP failure: re-raise"."""
    from . import client as _client  # the I/O layer, imported late: the policy above needs no httpx

    if isinstance(exc, _client.BadStatus):
        return AttemptResult(status=exc.status, headers=exc.headers or {}, events_delivered=events_delivered)
    if isinstance(exc, _client.RETRYABLE_TRANSPORT_ERRORS):
        return AttemptResult(error=f"{type(exc).__name__}: {exc}", events_delivered=events_delivered)
    return None


class _RetryingBase:
    def __init__(self, open_stream: Callable[[], Any], policy: RetryPolicy | None, *, clock: Callable[[], float],
                 wall_clock: Callable[[], float]) -> None:
        self.open_stream = open_stream
        self.policy = policy or RetryPolicy()
        self.clock = clock
        self.wall_clock = wall_clock
        self.attempts: list[Attempt] = []
        self.stream: Any = None  # the client stream of the current (last) attempt
        self.events_delivered = 0
        self._t0: float | None = None

    def _now(self) -> float:
        if self._t0 is None:
            self._t0 = self.clock()
        return self.clock() - self._t0

    def _record(self, number: int, started: float, result: AttemptResult) -> Decision:
        decision = self.policy.decide(number, result, now=self.wall_clock())
        self.attempts.append(Attempt(number, started, self._now(), result, decision))
        return decision

    def _failed(self, exc: Exception, number: int, started: float, delivered: int) -> Decision | None:
        """Record a failed attempt; the decision when it may be retried, None when `exc` must propagate."""
        result = _result_from_exception(exc, delivered)
        if result is None:
            from .client import StreamEndError

            if isinstance(exc, StreamEndError):  # a deadline, an idle stall...: recorded, never retried
                failed = AttemptResult(error=f"{type(exc).__name__}: {exc}", events_delivered=delivered)
                why = f"{type(exc).__name__} is not a failure that a retry can fix"
                self.attempts.append(Attempt(number, started, self._now(), failed, Decision(False, 0.0, why)))
            return None
        decision = self._record(number, started, result)
        if delivered:  # never retried: the caller already has part of an answer; the error is theirs
            return None
        if not decision.retry:
            raise RetryError(self.attempts, exc) from exc
        return decision


class RetryingStream(_RetryingBase):
    """Iterate the events of a streamed request, retrying (per `policy`) until the first event arrives.

    `open_stream()` must return a fresh client stream each time it is called, for instance
    `lambda: stream_chat(server.base_url, body)`. Each attempt opens one. A failure before the first
    event (connection error, retryable status, cut or read timeout before any complete event) goes to
    the policy, which retries after its delay (`sleep` is injectable) or gives up with `RetryError`.
    After the first event every failure propagates unchanged: retrying then would glue a new answer
    onto the part the caller already has. `attempts` records every attempt; `stream` is the client
    stream of the current attempt (for `end_reason`, `mid_event`, `raw`, ...). Leaving a `with` block
    or calling `close()` cancels, exactly like closing the client stream.

    `clock` measures the attempt timeline (seconds since the first attempt); `wall_clock` (epoch seconds)
    turns an HTTP-date `Retry-After` into a delay. Inject both with `sleep` for a deterministic run.
    """

    def __init__(self, open_stream: Callable[[], Any], policy: RetryPolicy | None = None, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        super().__init__(open_stream, policy, clock=clock, wall_clock=wall_clock)
        self.sleep = sleep

    def __iter__(self) -> Iterator[Any]:
        number = 0
        while True:
            number += 1
            started = self._now()
            delivered = 0
            try:
                self.stream = self.open_stream()
                with self.stream as stream:
                    for event in stream:
                        delivered += 1
                        self.events_delivered += 1
                        yield event
            except Exception as exc:
                decision = self._failed(exc, number, started, delivered)
                if decision is None:
                    raise
                self.sleep(decision.delay)
                continue
            self._record(number, started, AttemptResult(ok=True, events_delivered=delivered))
            return

    def close(self) -> None:
        """Cancel: close the current attempt's connection."""
        if self.stream is not None:
            self.stream.close()

    def __enter__(self) -> RetryingStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRetryingStream(_RetryingBase):
    """The async twin of `RetryingStream`: `open_stream()` returns an async client stream, `sleep` is awaited."""

    def __init__(self, open_stream: Callable[[], Any], policy: RetryPolicy | None = None, *,
                 sleep: Callable[[float], Awaitable[None]] | None = None, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        super().__init__(open_stream, policy, clock=clock, wall_clock=wall_clock)
        self.sleep = sleep or asyncio.sleep

    async def __aiter__(self) -> AsyncIterator[Any]:
        number = 0
        while True:
            number += 1
            started = self._now()
            delivered = 0
            try:
                self.stream = self.open_stream()
                async with self.stream as stream:
                    async for event in stream:
                        delivered += 1
                        self.events_delivered += 1
                        yield event
            except Exception as exc:
                decision = self._failed(exc, number, started, delivered)
                if decision is None:
                    raise
                await self.sleep(decision.delay)
                continue
            self._record(number, started, AttemptResult(ok=True, events_delivered=delivered))
            return

    async def aclose(self) -> None:
        """Cancel: close the current attempt's connection."""
        if self.stream is not None:
            await self.stream.aclose()

    async def __aenter__(self) -> AsyncRetryingStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class VirtualClock:
    """A clock that moves only when something sleeps on it: deterministic retry timelines.

    Pass `clock.sleep` (or `clock.asleep` for the async runner) as `sleep` and `clock.now` as `clock`:
    the waits are recorded in `sleeps` and happen instantly, and attempt times are exact.
    """

    def __init__(self, start: float = 0.0) -> None:
        self.time = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.time += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


# -- the timeline plot -----------------------------------------------------------------------------------

def plot_attempts(attempts: list[Attempt], *, ax: Any = None, title: str = "Retry timeline") -> Any:
    """Draw each attempt as a bar (when it started, how long it took, what came back) and each wait.

    Returns the matplotlib Figure. Works on recorded attempts, so a notebook can plot a deterministic
    run (fake clock) as well as a live one.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * max(1, len(attempts))))
    else:
        fig = ax.figure
    for i, a in enumerate(attempts):
        y = len(attempts) - i
        failed = not a.result.ok
        colour = "tab:red" if failed else "tab:green"
        ax.barh(y, max(a.ended - a.started, 1e-3), left=a.started, height=0.5, color=colour)
        ax.plot([a.started], [y], marker="X" if failed else "o", color=colour, markersize=9)  # visible at 0 s too
        ax.annotate(a.result.describe().split(":")[0], (a.started, y + 0.3), fontsize=8, va="bottom")
        if a.decision.retry:
            ax.barh(y, a.waited, left=a.ended, height=0.2, color="lightgrey", hatch="//", edgecolor="grey")
            ax.annotate(f"wait {a.waited:.2f} s ({a.decision.source})", (a.ended + a.waited / 2, y - 0.35),
                        fontsize=7, ha="center", va="top", color="dimgrey")
    ax.set_yticks([len(attempts) - i for i in range(len(attempts))], [f"attempt {a.number}" for a in attempts])
    end = max([a.ended + a.waited for a in attempts], default=1.0) or 1.0
    ax.set_xlim(-0.03 * end, 1.2 * end)  # room for the last label
    ax.set_xlabel("seconds since the first attempt started")
    ax.set_ylim(0.3, len(attempts) + 0.9)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
