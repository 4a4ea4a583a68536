"""Retry runners: drive a streamed request through the retry policy, with real sleeps and clocks (I/O layer).

`RetryingStream(open_stream, policy)` / `AsyncRetryingStream(...)` open one client stream per attempt
(`streamlab.net.client`), hand every event to the caller as it arrives, and when an attempt fails before
its first event ask the pure policy (`streamlab.core.retry.RetryPolicy.decide`) whether and when to try
again. Every attempt is recorded as an `Attempt` (when it started, what came back, what was decided), and
when they give up they raise `RetryError`, whose message lists each attempt. `sleep`, `clock` and
`wall_clock` are injectable, so a `VirtualClock` makes a run deterministic.

How an attempt's failure is recorded: every `StreamEndError` the client raises (its `.ending` says how
the stream ended) becomes an `AttemptResult` with that ending, and the policy decides. When the policy
gives up on a failure that retrying could in principle fix (a status, or an ending in `RETRYABLE_ENDINGS`),
the runner raises `RetryError`; on one that retrying cannot fix (a deadline, an idle stall, an event larger
than the parser's limits, a request that cannot be sent) it records the attempt and re-raises the client's
own error; after the first event it always re-raises the client's error, since the caller already has part
of an answer.

The policy itself (`RetryPolicy`, `Decision`, `parse_retry_after`) is pure and lives in `streamlab.core.retry`.
The timeline figure is
`streamlab.tools.plots.plot_attempts`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from streamlab.core.endings import Ending
from streamlab.core.errors import BadStatus, RetryError, StreamEndError
from streamlab.core.retry import (
    RETRYABLE_ENDINGS,
    AttemptResult,
    Decision,
    RetryPolicy,
)

__all__ = ["Attempt", "RetryingStream", "AsyncRetryingStream"]


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
        return (
            f"attempt {self.number}: started at +{self.started:.3f} s, {self.result.describe()}, "
            f"after {self.ended - self.started:.3f} s; {after}"
        )


def _result_of(exc: BaseException, events_delivered: int) -> AttemptResult | None:
    """The AttemptResult of a client failure; None when `exc` did not come from the stream's transport."""
    if isinstance(exc, BadStatus):
        return AttemptResult(
            status=exc.status, headers=exc.headers or {}, ending=exc.ending, events_delivered=events_delivered
        )
    if isinstance(exc, StreamEndError):
        return AttemptResult(error=f"{type(exc).__name__}: {exc}", ending=exc.ending, events_delivered=events_delivered)
    return None


def _retry_could_help(result: AttemptResult) -> bool:
    """A status or a retryable ending: when the policy refuses such a failure, the caller gets RetryError."""
    return result.status is not None or result.ending in RETRYABLE_ENDINGS


class _RetryingBase:
    def __init__(
        self,
        open_stream: Callable[[], Any],
        policy: RetryPolicy | None,
        *,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
    ) -> None:
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

    def _finished(self, number: int, started: float, delivered: int) -> None:
        """Record an attempt whose stream ended without raising: complete, or cancelled by the caller."""
        ending = self.stream.end_reason
        if ending == Ending.CANCELLED:
            self._record(number, started, AttemptResult(ending=ending, events_delivered=delivered))
        else:
            self._record(number, started, AttemptResult(ok=True, ending=ending, events_delivered=delivered))

    def _failed(self, exc: Exception, number: int, started: float, delivered: int) -> Decision | None:
        """Record a failed attempt; the decision when it may be retried, None when `exc` must propagate."""
        result = _result_of(exc, delivered)
        if result is None:  # not the stream's failure (a bug in open_stream, say): nothing to record
            return None
        decision = self._record(number, started, result)
        if decision.retry:
            return decision
        if delivered or not _retry_could_help(result):  # the client's own error says it best
            return None
        raise RetryError(self.attempts, exc) from exc


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

    def __init__(
        self,
        open_stream: Callable[[], Any],
        policy: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
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
            self._finished(number, started, delivered)
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

    def __init__(
        self,
        open_stream: Callable[[], Any],
        policy: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
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
            self._finished(number, started, delivered)
            return

    async def aclose(self) -> None:
        """Cancel: close the current attempt's connection."""
        if self.stream is not None:
            await self.stream.aclose()

    async def __aenter__(self) -> AsyncRetryingStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
