"""The retry policy: when a failed streamed request may be sent again, and after how long (sans-IO core).

Theory of operation. A retry is an ordinary, safe thing *before the first event* and a dangerous one after
it. Before the first event nothing was shown, so a connection error, a 408 (the server timed out waiting
for us), a 409 (a lock conflict), a 429 (slow down) or a 5xx may be retried with a fresh request. After the
first event a new request produces a *new* answer (sampling is random), so gluing it onto the half-shown
old one duplicates or garbles text; the caller must choose between "discard and restart" and a resumable
mechanism (`streamlab.net.resume`). 400, 401, 403, 404 and 422 say "your request is wrong" and are never
retried: sending the same bytes again gives the same answer.

How each client ending (`streamlab.core.endings.Ending`) is treated, from two tables:

    RETRYABLE_ENDINGS (retried before the first event)   NOT_RETRIED (never retried, with the reason)
    -------------------------------------------------   --------------------------------------------
    CONNECT_ERROR, BROKEN, READ_TIMEOUT,                 CANCELLED, INVALID_REQUEST, NOT_EVENT_STREAM,
    INCOMPLETE_EVENT                                     DEADLINE, IDLE_TIMEOUT, LIMIT_EXCEEDED
    HTTP_ERROR: decided by the status (RETRYABLE_STATUSES, 5xx; never NEVER_RETRY_STATUSES), unless the server's
    `x-should-retry` header says "true" (retry, whatever the status) or "false" (never), as the official SDK obeys it

`RetryPolicy.decide(attempt, result, now=...)` is pure: one attempt's `AttemptResult` in, a `Decision` out
("retry after X s, because ..." or "give up, because ..."). It reads no clock: `now` (epoch seconds) is
passed in to turn an HTTP-date `Retry-After` into a delay, and a seeded `random.Random` makes the jitter
reproducible. `VirtualClock` is a clock that only moves when something sleeps on it, for deterministic
timelines. The runners that execute decisions against the client live in `streamlab.net.retry`; the
timeline figure is `streamlab.tools.plots.plot_attempts`.
"""

from __future__ import annotations

import datetime
import email.utils
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from streamlab.core.endings import Ending

__all__ = [
    "RETRYABLE_STATUSES",
    "NEVER_RETRY_STATUSES",
    "RETRYABLE_ENDINGS",
    "NOT_RETRIED",
    "AttemptResult",
    "Decision",
    "RetryPolicy",
    "parse_retry_after",
    "MAX_RETRY_AFTER",
    "is_retryable_status",
    "VirtualClock",
    "should_retry_header",
    "without_stream_options",
]

#: Statuses the official openai-python SDK retries by default (>= 500 is added by `is_retryable_status`).
RETRYABLE_STATUSES = frozenset({408, 409, 429})
#: "Your request is wrong": the same bytes sent again get the same answer.
NEVER_RETRY_STATUSES = frozenset({400, 401, 403, 404, 422})

RETRYABLE_ENDINGS = frozenset({Ending.CONNECT_ERROR, Ending.BROKEN, Ending.READ_TIMEOUT, Ending.INCOMPLETE_EVENT})
"""Transport endings a retry may fix, as long as no event has reached the caller yet."""

NOT_RETRIED: dict[Ending, str] = {
    Ending.CANCELLED: "the caller cancelled the stream",
    Ending.INVALID_REQUEST: "the request cannot be sent as built; sending it again cannot help",
    Ending.NOT_EVENT_STREAM: "the server answered with something that is not an event stream; "
    "the same request gets the same kind of answer",
    Ending.DEADLINE: "the deadline bounds the caller's whole wait; a new attempt would only outlast it",
    Ending.IDLE_TIMEOUT: "the server kept the connection alive without sending content; "
    "a new request would wait the same way",
    Ending.LIMIT_EXCEEDED: "the server sent a line or an event larger than the parser's limits; "
    "the same server sends the same bytes again",
}
"""Endings that are never retried, each with the reason a retry cannot help."""


def is_retryable_status(status: int) -> bool:
    """True for 408, 409, 429 and every 5xx; False for everything else (including 400/401/403/404/422)."""
    return status in RETRYABLE_STATUSES or 500 <= status <= 599


# -- Retry-After -----------------------------------------------------------------------------------------

_DELAY_SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?")  # not float(): it would take "1e2", "1_000", "inf"


def _http_date(text: str) -> float | None:
    """Epoch seconds of an HTTP date (IMF-fixdate, RFC 850 or asctime; all GMT), or None if it is not one."""
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # asctime dates carry no zone (and "-0000" parses naive): HTTP dates are all GMT
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup that works for plain dicts and httpx.Headers alike."""
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


MAX_RETRY_AFTER = 3600.0
"""The longest wait `parse_retry_after` reports (seconds): `Retry-After: 315360000` had made a gateway refuse
an upstream for ten years, and 400 nines parse as infinity."""


def parse_retry_after(
    headers: Mapping[str, str], *, now: float | None = None, cap: float = MAX_RETRY_AFTER
) -> tuple[float | None, str]:
    """What the server asked us to wait, in seconds (at most `cap`: a longer wait is reported as `cap`, and
    the source says "capped"), and which header said so.

    `retry-after-ms` (milliseconds, a number; an OpenAI extension) wins over the standard `Retry-After`
    (RFC 9110 section 10.2.3: either a non-negative number of seconds or an HTTP date). An HTTP date is
    turned into a delay against `now` (wall-clock epoch seconds): this module reads no clock, so without
    `now` a date cannot be used and is ignored (the runners in `streamlab.net.retry` always pass it).
    A date in the past means "now": 0 s. Unparseable or negative values are ignored, as if the header were
    absent. Returns (None, "") when no usable header is present.
    """
    asked, source = _retry_after(headers, now)
    if asked is not None and asked > cap:
        return cap, f"{source} (capped at {cap:g} s)"
    return asked, source


def _retry_after(headers: Mapping[str, str], now: float | None) -> tuple[float | None, str]:
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
        return (float(raw) if len(raw) <= 32 else math.inf), "Retry-After"
    when = None if now is None else _http_date(raw)
    if when is None or now is None:
        return None, ""
    return max(0.0, when - now), "Retry-After (HTTP date)"


# -- the decision ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptResult:
    """What one attempt produced, as far as the retry decision cares.

    Exactly one of these describes it: `status` (an HTTP error status before the stream started),
    `error` (a transport failure: refused, reset, timed out, cut, too large...), or `ok=True` (the request
    succeeded). `ending` is the client's `Ending` when known (the runners always set it; a hand-made result
    with only `error` counts as a retryable connection error). `events_delivered` counts events already
    handed to the caller by this attempt; once it is positive no retry is ever safe.
    """

    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    ok: bool = False
    events_delivered: int = 0
    ending: Ending | None = None

    def __post_init__(self) -> None:
        if self.ending is not None and not isinstance(self.ending, Ending):  # "broken" -> Ending.BROKEN
            object.__setattr__(self, "ending", Ending(self.ending))  # (an Enum hashes by name, not by value)

    def describe(self) -> str:
        """A short human description: "HTTP 429", "connection error: ...", "completed, 3 event(s)"."""
        if self.ok:
            return f"completed, {self.events_delivered} event(s)"
        if self.status is not None:
            return f"HTTP {self.status}"
        if self.error is not None:
            tail = f" after {self.events_delivered} event(s)" if self.events_delivered else ""
            return f"connection error{tail}: {self.error}"
        if self.ending is not None:
            return f"{self.ending} after {self.events_delivered} event(s)"
        return "no result"


@dataclass(frozen=True)
class Decision:
    """The policy's answer for one attempt: retry after `delay` seconds, or stop (with the reason)."""

    retry: bool
    delay: float
    reason: str
    source: str = ""
    """Where the delay came from: "backoff", "retry-after-ms", "Retry-After", ... ("" when giving up)."""


def _give_up(reason: str) -> Decision:
    return Decision(False, 0.0, reason)


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
            return _give_up("the request succeeded")
        if result.ending in NOT_RETRIED:
            return _give_up(NOT_RETRIED[result.ending])
        if result.events_delivered:
            return _give_up(
                f"{result.events_delivered} event(s) already reached the caller: a new request would produce a "
                "new answer, so discard the partial output and restart deliberately, or resume with a cursor"
            )
        said = should_retry_header(result.headers) if result.status is not None else None
        if said is False:
            return _give_up(f"HTTP {result.status} with x-should-retry: false: the server forbids a retry")
        if result.status is not None:
            refused = None if said else _status_refusal(result.status)  # the server's "true" wins, as in the SDK
            if refused is not None:
                return _give_up(refused)
        elif result.error is None and result.ending is None:
            return _give_up("the attempt produced neither a status nor an error")
        elif result.ending is not None and result.ending not in RETRYABLE_ENDINGS:
            return _give_up(f"a stream that ended {result.ending} is not retried")
        if attempt >= self.max_attempts:
            return _give_up(f"gave up after {attempt} attempt(s) (max_attempts={self.max_attempts})")
        asked, source = parse_retry_after(result.headers, now=now) if result.status is not None else (None, "")
        if asked is not None:
            if asked > self.max_retry_after:
                return _give_up(
                    f"the server asked to wait {asked:g} s ({source}), longer than "
                    f"max_retry_after={self.max_retry_after:g} s"
                )
            return Decision(True, asked, f"{result.describe()}{_forced(said)}: waiting as the server asked", source)
        base = self.backoff(attempt)
        assert self.rng is not None
        delay = base * (1.0 - self.jitter * self.rng.random())
        return Decision(True, delay, f"{result.describe()}{_forced(said)}: exponential backoff with jitter", "backoff")


def should_retry_header(headers: Mapping[str, str]) -> bool | None:
    """What the server's `x-should-retry` header says: True for exactly "true", False for exactly "false", None
    when it is absent or says anything else. The official SDK reads it the same way (openai-python's
    `_base_client.py`, `_should_retry`: the header is obeyed before any status rule), so "true" makes even a 400
    retryable and "false" forbids retrying even a 429 or a 503. It changes only whether to retry: the attempt
    limit, the `Retry-After` wait and the no-retry-after-the-first-event rule still hold."""
    value = _header(headers, "x-should-retry")
    return True if value == "true" else False if value == "false" else None


def _status_refusal(status: int) -> str | None:
    """Why an HTTP error status alone is not retried, or None when it may be."""
    if status in NEVER_RETRY_STATUSES:
        return f"HTTP {status} means the request itself is wrong; sending it again cannot help"
    if not is_retryable_status(status):
        return f"HTTP {status} is not a retryable status"
    return None


def _forced(said: bool | None) -> str:
    return " (x-should-retry: true)" if said else ""


def without_stream_options(status: int, body: object, request: Mapping[str, object]) -> dict[str, object] | None:
    """The request to send again when a server refused it for `stream_options`, or None.

    Some OpenAI-compatible servers do not know `stream_options` and refuse the whole request with a 400 that
    names it (Groq in 2024, vercel/ai#1578; Bedrock models behind LiteLLM, BerriAI/litellm#9916). Such a refusal
    came before any byte of a stream, so sending the same request without the field is safe, and it is the only
    change that can help: the answer then streams, without usage. Decided here when the status is 400, the
    request set `stream_options`, and the error body (any JSON or text) mentions "stream_options"; a second
    refusal of the request without it is final (this returns None for it)."""
    if status != 400 or "stream_options" not in request or "stream_options" not in str(body):
        return None
    return {k: v for k, v in request.items() if k != "stream_options"}


class VirtualClock:
    """A clock that moves only when something sleeps on it: deterministic retry timelines.

    Pass `clock.sleep` (or `clock.asleep` for the async runner) as `sleep` and `clock.now` as `clock`:
    the waits are recorded in `sleeps` and happen instantly, and attempt times are exact. It reads no
    real clock, which is why it lives in the core.
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
