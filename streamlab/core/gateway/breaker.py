"""A circuit breaker for one upstream: closed, open, half-open, driven by endings and a clock passed in (sans-IO core).

Theory of operation
-------------------
A gateway in front of several providers keeps one breaker per provider. While the breaker is *closed*,
requests go through and each result is reported back. A run of failures in a row (5xx, 429, a connection
that could not be made, a stream that broke or stalled) *trips* it: the breaker *opens*, and for a cool-down
the gateway sends that provider nothing at all. It answers at once from another provider instead of making
the user wait on one that is struggling, and it stops hammering a provider that asked it to slow down. When
the cool-down is over the breaker is *half-open*: exactly one request, the probe, goes through. The probe's
result decides: a success closes the breaker, a failure opens it again for a fresh cool-down.

The states move only through one table, `TRANSITIONS` ((state, signal) -> next state). Any pair that is not
in the table leaves the state as it is (a late result while open, a success while closed):

    state       signal    next state   why
    closed      success   closed       a healthy answer: the count of failures in a row goes back to 0
    closed      failure   closed       one more failure in a row, still under the threshold
    closed      trip      open         the failure that reaches the threshold: stop sending
    open        cooled    half_open    the cool-down has passed: let one probe through
    half_open   success   closed       the probe succeeded: the upstream is back
    half_open   failure   open         the probe failed: refuse again, for a fresh cool-down

Signals come from two places. `allow(now)` produces `cooled` when an open breaker is asked after its
cool-down. `record(permit, result, now)` turns a result into `success`, `failure` or `trip`: a result is a
`Health` (`ok`, `fault`, `neutral`), or an `Ending` plus the HTTP status and the content's outcome, which
`health_of` classifies through two tables (`STATUS_FAULTS`, `ENDING_HEALTH`). A `neutral` result (the client
left, the request itself was wrong) says nothing about the provider and sends no signal.

Permits. `allow` returns a `Permit` (or None: refused). Each permit remembers the breaker's *generation*,
which goes up at every change of state, so a result that comes back after the state has changed (a slow
stream admitted while closed, finishing after the breaker opened) is recorded as late and moves nothing:
only the probe decides a half-open breaker, and at most one probe is out at a time.

Nothing here reads a clock: every call takes `now`, in seconds, from one monotonic clock chosen by the
caller (the gateway's, or a test's hand-moved one). `history` keeps what happened, for the lab's timeline
figure (`streamlab.tools.plots.plot_breaker_timeline`) and its text twin (`history_text`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from streamlab.core.endings import Ending, Outcome
from streamlab.core.words import Word

__all__ = [
    "State",
    "Signal",
    "Health",
    "TRANSITIONS",
    "next_state",
    "STATE_CODES",
    "STATUS_FAULTS",
    "ENDING_HEALTH",
    "health_of",
    "Permit",
    "Transition",
    "Observation",
    "Breaker",
    "history_text",
]


class State(Word):
    """Where a breaker is."""

    CLOSED = "closed"  # requests flow; failures in a row are counted
    OPEN = "open"  # requests are refused until the cool-down is over
    HALF_OPEN = "half_open"  # one probe may go; its result decides


class Signal(Word):
    """What happened, as the transition table sees it."""

    SUCCESS = "success"  # a healthy result
    FAILURE = "failure"  # an unhealthy result (in closed: still under the threshold)
    TRIP = "trip"  # the unhealthy result that reaches the threshold of failures in a row
    COOLED = "cooled"  # the cool-down is over (seen when an open breaker is asked)


class Health(Word):
    """What one result says about the upstream that produced it."""

    OK = "ok"  # it answered properly
    FAULT = "fault"  # it failed: counts towards opening the breaker
    NEUTRAL = "neutral"  # says nothing about the upstream (the client left, the request was wrong)


TRANSITIONS: dict[tuple[State, Signal], State] = {
    (State.CLOSED, Signal.SUCCESS): State.CLOSED,
    (State.CLOSED, Signal.FAILURE): State.CLOSED,
    (State.CLOSED, Signal.TRIP): State.OPEN,
    (State.OPEN, Signal.COOLED): State.HALF_OPEN,
    (State.HALF_OPEN, Signal.SUCCESS): State.CLOSED,
    (State.HALF_OPEN, Signal.FAILURE): State.OPEN,
}
"""Every transition of the breaker; a (state, signal) pair that is not here leaves the state unchanged."""


def next_state(state: State | str, signal: Signal | str) -> State:
    """The state after `signal` in `state`, from `TRANSITIONS` (unchanged when the pair is not there)."""
    state, signal = State(state), Signal(signal)
    return TRANSITIONS.get((state, signal), state)


STATE_CODES: dict[State, int] = {State.CLOSED: 0, State.HALF_OPEN: 1, State.OPEN: 2}
"""The number a metrics gauge shows for each state (0 closed, 1 half-open, 2 open)."""

STATUS_FAULTS = frozenset({408, 429})
"""HTTP statuses below 500 that count against the upstream (it timed out, or asked us to slow down). Every 5xx
counts too; other 4xx statuses (400, 401, 404, 409, 422...) are the request's fault: neutral."""

ENDING_HEALTH: dict[Ending, Health] = {
    Ending.CONNECT_ERROR: Health.FAULT,
    Ending.BROKEN: Health.FAULT,
    Ending.CUT: Health.FAULT,
    Ending.READ_TIMEOUT: Health.FAULT,
    Ending.IDLE_TIMEOUT: Health.FAULT,
    Ending.DEADLINE: Health.FAULT,
    Ending.INCOMPLETE_EVENT: Health.FAULT,
    Ending.LIMIT_EXCEEDED: Health.FAULT,
    Ending.CANCELLED: Health.NEUTRAL,
    Ending.CLIENT_GONE: Health.NEUTRAL,
    Ending.STOPPED: Health.NEUTRAL,  # our own side shut down: not the upstream's doing
    Ending.INVALID_REQUEST: Health.NEUTRAL,
    Ending.NOT_EVENT_STREAM: Health.NEUTRAL,  # a JSON answer is an answer; the request decides its shape
    Ending.IN_PROGRESS: Health.NEUTRAL,
}
"""How each ending counts, except COMPLETE (the content decides) and HTTP_ERROR (the status decides)."""


def health_of(ending: Ending | str, *, status: int | None = None, content: Outcome | str | None = None) -> Health:
    """What an attempt that ended with `ending` says about its upstream.

    `HTTP_ERROR` is judged by `status` (5xx and `STATUS_FAULTS` are faults). When the content's outcome
    says the answer reached its end (complete, or incomplete for `length` / `content_filter`), the upstream
    did its job: ok, whatever the connection did afterwards (a client that hung up right after `[DONE]`). A
    clean end of body (`COMPLETE`) with any other content is a fault (failed: an error object inside the
    stream; truncated: the body ended before the terminal marker), or neutral when cancelled. Every other
    ending is looked up in `ENDING_HEALTH`.
    """
    ending = Ending(ending)
    content = None if content is None else Outcome(content)
    if ending is Ending.HTTP_ERROR:
        if status is None:
            raise ValueError("health_of(HTTP_ERROR) needs the status")
        return Health.FAULT if status >= 500 or status in STATUS_FAULTS else Health.NEUTRAL
    if content in (Outcome.COMPLETE, Outcome.INCOMPLETE):
        return Health.OK  # the answer reached its end: whatever the connection did afterwards, the upstream delivered
    if ending is Ending.COMPLETE:
        return Health.NEUTRAL if content is Outcome.CANCELLED else Health.FAULT
    return ENDING_HEALTH[ending]


@dataclass(frozen=True)
class Permit:
    """Leave to send one request: the breaker's generation when it was given, and whether it is the probe."""

    generation: int
    probe: bool = False


@dataclass(frozen=True)
class Transition:
    """One change of state: when, from, to, the signal that caused it, and a few words on why."""

    at: float
    before: State
    after: State
    signal: Signal
    why: str = ""


@dataclass(frozen=True)
class Observation:
    """One thing the breaker saw: a result (`ok`, `fault`, `neutral`, `late`), a refusal (`refused`), or a
    probe let through (`probe`); the state and the count of failures in a row when it was seen (a transition
    it causes comes right after it in the history)."""

    at: float
    kind: str
    state: State
    failures: int
    detail: str = ""


class Breaker:
    """One upstream's circuit breaker (see the module docstring for the rules).

    `failure_threshold` failures in a row open it; `cooldown` seconds later it lets one probe through. A
    result may carry `retry_after` (seconds the upstream asked for, from `Retry-After`): if that result opens
    the breaker, the cool-down is at least that long. `history` bounds how many observations and
    transitions are kept.
    """

    def __init__(self, *, failure_threshold: int = 3, cooldown: float = 30.0, history: int = 1000) -> None:
        if not isinstance(failure_threshold, int) or failure_threshold < 1:
            raise ValueError(f"failure_threshold must be a whole number >= 1, got {failure_threshold!r}")
        if not (isinstance(cooldown, (int, float)) and math.isfinite(cooldown) and cooldown >= 0):
            raise ValueError(f"cooldown must be a number of seconds >= 0, got {cooldown!r}")
        if history < 1:
            raise ValueError(f"history must be >= 1, got {history!r}")
        self.failure_threshold = failure_threshold
        self.cooldown = float(cooldown)
        self.state = State.CLOSED
        self.failures = 0  # failures in a row
        self.generation = 0
        self.open_until: float | None = None
        self.probing = False
        self.last_now: float | None = None
        self.history: deque[Observation | Transition] = deque(maxlen=history)  # in the order things happened

    def __repr__(self) -> str:
        return (
            f"<Breaker {self.state} failures={self.failures}/{self.failure_threshold} "
            f"cooldown={self.cooldown:g}s open_until={self.open_until}>"
        )

    # -- asking ---------------------------------------------------------------------------------------

    def allow(self, now: float) -> Permit | None:
        """May a request go to this upstream now? A `Permit` to hand back to `record`, or None (refused)."""
        self._tick(now)
        if self.state is State.OPEN and self.open_until is not None and now >= self.open_until:
            self._move(Signal.COOLED, now, "the cool-down is over")
        if self.state is State.CLOSED:
            return Permit(self.generation)
        if self.state is State.HALF_OPEN and not self.probing:
            self.probing = True
            self._observe(now, "probe", "one request goes through to test the upstream")
            return Permit(self.generation, probe=True)
        why = "a probe is already out" if self.state is State.HALF_OPEN else f"open for {self.retry_in(now):.3g} s more"
        self._observe(now, "refused", why)
        return None

    def retry_in(self, now: float) -> float:
        """Seconds until this breaker lets a request through again (0 when it would now)."""
        if self.state is State.OPEN and self.open_until is not None:
            return max(0.0, self.open_until - now)
        return 0.0

    @property
    def transitions(self) -> list[Transition]:
        """The changes of state kept in `history`, oldest first."""
        return [h for h in self.history if isinstance(h, Transition)]

    @property
    def observations(self) -> list[Observation]:
        """The results, refusals and probes kept in `history`, oldest first."""
        return [h for h in self.history if isinstance(h, Observation)]

    @property
    def code(self) -> int:
        """The state as a number (`STATE_CODES`), for a gauge."""
        return STATE_CODES[self.state]

    # -- telling --------------------------------------------------------------------------------------

    def record(
        self,
        permit: Permit,
        result: Health | Ending | str,
        now: float,
        *,
        status: int | None = None,
        content: Outcome | str | None = None,
        detail: str = "",
        retry_after: float | None = None,
    ) -> State:
        """Report how a request sent under `permit` went; returns the state afterwards.

        `result` is a `Health`, or an `Ending` classified by `health_of` with `status` and `content`.
        `detail` is kept in the history ("HTTP 429", "reset by the upstream"). A result whose permit is from
        an earlier generation is kept as `late` and changes nothing.
        """
        self._tick(now)
        health = result if isinstance(result, Health) else health_of(result, status=status, content=content)
        if permit.generation != self.generation:
            self._observe(now, "late", f"{health}: admitted before the state changed; ignored" + _sep(detail))
            return self.state
        if permit.probe:
            self.probing = False
        if health is Health.NEUTRAL:
            self._observe(now, "neutral", detail)
            return self.state
        if health is Health.OK:
            self.failures = 0
            signal = Signal.SUCCESS
        elif self.state is State.CLOSED:
            self.failures += 1
            signal = Signal.TRIP if self.failures >= self.failure_threshold else Signal.FAILURE
        else:
            signal = Signal.FAILURE
        self._observe(now, str(health), detail)
        if next_state(self.state, signal) is not self.state:
            why = {
                Signal.TRIP: f"{self.failures} failures in a row",
                Signal.FAILURE: "the probe failed",
                Signal.SUCCESS: "the probe succeeded",
            }.get(signal, str(signal))
            self._move(signal, now, why + _sep(detail), retry_after=retry_after)
        return self.state

    # -- inside ---------------------------------------------------------------------------------------

    def _tick(self, now: float) -> None:
        if not (isinstance(now, (int, float)) and math.isfinite(now)):
            raise ValueError(f"now must be a finite number of seconds, got {now!r}")
        if self.last_now is not None and now < self.last_now:
            raise ValueError(
                f"the clock went backwards: {now!r} after {self.last_now!r} (pass readings of one monotonic clock)"
            )
        self.last_now = now

    def _move(self, signal: Signal, now: float, why: str, *, retry_after: float | None = None) -> None:
        before, after = self.state, next_state(self.state, signal)
        if after is before:
            return
        self.state = after
        self.generation += 1
        self.probing = False
        if after is State.OPEN:
            wait = max(self.cooldown, retry_after or 0.0)
            self.open_until = now + wait
        else:
            self.open_until = None
        if after is State.CLOSED:
            self.failures = 0
        self.history.append(Transition(now, before, after, signal, why))

    def _observe(self, now: float, kind: str, detail: str) -> None:
        self.history.append(Observation(now, kind, self.state, self.failures, detail))


def _sep(detail: str) -> str:
    return f" ({detail})" if detail else ""


def history_text(breakers: Mapping[str, Breaker], *, since: float = 0.0) -> str:
    """What several breakers saw and did, merged in time order, one line each: the text twin of the timeline.

    Results and refusals are printed as `t=  3.0 primary    fault    closed  2/3  HTTP 429`; transitions as
    `t=  4.0 primary    ==> open (trip): 3 failures in a row`. Times are shown relative to `since`.
    """
    rows: list[tuple[float, str]] = []
    width = max((len(name) for name in breakers), default=0)
    for name, breaker in breakers.items():
        for item in breaker.history:
            if isinstance(item, Transition):
                line = f"t={item.at - since:6.1f} {name:<{width}}  ==> {item.after} ({item.signal}): {item.why}"
            else:
                count = f"{item.failures}/{breaker.failure_threshold}"
                line = (
                    f"t={item.at - since:6.1f} {name:<{width}}  {item.kind:<8} {item.state!s:<9} {count:<5} "
                    f"{item.detail}"
                )
            rows.append((item.at, line.rstrip()))
    rows.sort(key=lambda row: row[0])  # a stable sort: each breaker's own order is kept at equal times
    return "\n".join(line for _, line in rows)
