"""The retry policy (pure) and the retrying runner (against the stand-in)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import random

import httpx
import pytest

from streamlab.core.endings import Ending
from streamlab.core.errors import ConnectionBroken, EventTooLarge, RetryError, SSELimitError
from streamlab.core.retry import (
    NOT_RETRIED,
    RETRYABLE_ENDINGS,
    AttemptResult,
    Decision,
    RetryPolicy,
    VirtualClock,
    is_retryable_status,
    parse_retry_after,
)
from streamlab.core.shapes import chat_text_stream
from streamlab.core.sse import SSEParser
from streamlab.core.standin.script import Cut, Episode, Send, error_episode
from streamlab.net.client import astream_chat, stream_chat
from streamlab.net.retry import AsyncRetryingStream, Attempt, RetryingStream
from streamlab.net.standin.server import StandIn
from streamlab.tools.plots import plot_attempts

# -- classification ------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 599])
def test_retryable_statuses_are_retried_before_any_event(status: int) -> None:
    assert is_retryable_status(status)
    d = RetryPolicy(seed=1).decide(1, AttemptResult(status=status))
    assert d.retry and d.delay > 0 and d.source == "backoff"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 405, 413, 418])
def test_client_errors_are_never_retried(status: int) -> None:
    assert not is_retryable_status(status)
    d = RetryPolicy(seed=1, max_attempts=10).decide(1, AttemptResult(status=status))
    assert not d.retry
    assert str(status) in d.reason


def test_connection_error_is_retried() -> None:
    d = RetryPolicy(seed=1).decide(1, AttemptResult(error="ConnectFailed: refused"))
    assert d.retry


@pytest.mark.parametrize(
    "result",
    [
        AttemptResult(error="RemoteProtocolError: cut", events_delivered=1),
        AttemptResult(status=503, events_delivered=3),
    ],
)
def test_never_retry_after_the_first_event(result: AttemptResult) -> None:
    d = RetryPolicy(seed=1, max_attempts=10).decide(1, result)
    assert not d.retry
    assert "already reached the caller" in d.reason


def test_success_is_not_retried() -> None:
    assert not RetryPolicy().decide(1, AttemptResult(ok=True, events_delivered=5)).retry


# -- backoff, jitter, cap, attempts --------------------------------------------------------------------


def test_backoff_doubles_and_is_capped() -> None:
    p = RetryPolicy(initial_delay=0.5, multiplier=2, max_delay=3.0)
    assert [p.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_stays_within_its_band_and_is_seeded() -> None:
    def delays(seed: int) -> list[float]:
        p = RetryPolicy(max_attempts=50, initial_delay=0.1, max_delay=1.0, jitter=0.25, seed=seed)
        return [p.decide(n, AttemptResult(status=503)).delay for n in range(1, 40)]

    a, b, c = delays(7), delays(7), delays(8)
    assert a == b and a != c
    p = RetryPolicy(initial_delay=0.1, max_delay=1.0)
    for n, d in enumerate(a, 1):
        assert 0.75 * p.backoff(n) <= d <= p.backoff(n) <= 1.0
    assert len(set(a)) > 30  # jitter really varies


def test_full_jitter_can_go_to_zero_and_no_jitter_is_exact() -> None:
    full = RetryPolicy(jitter=1.0, max_attempts=200, rng=random.Random(3))
    ds = [full.decide(1, AttemptResult(status=500)).delay for _ in range(200)]
    assert min(ds) < 0.05 and max(ds) <= 0.5
    exact = RetryPolicy(jitter=0.0, max_attempts=5)
    assert [exact.decide(n, AttemptResult(status=500)).delay for n in (1, 2, 3)] == [0.5, 1.0, 2.0]


def test_max_attempts_is_respected() -> None:
    p = RetryPolicy(max_attempts=3, seed=0)
    assert p.decide(2, AttemptResult(status=503)).retry
    d = p.decide(3, AttemptResult(status=503))
    assert not d.retry and "max_attempts=3" in d.reason


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"jitter": 1.5}, {"multiplier": 0.5}, {"initial_delay": -1}])
def test_bad_policy_is_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)


# -- Retry-After ---------------------------------------------------------------------------------------


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert parse_retry_after({"Retry-After": "7", "retry-after-ms": "250"}) == (0.25, "retry-after-ms")
    d = RetryPolicy(seed=0).decide(1, AttemptResult(status=429, headers={"Retry-After": "7", "retry-after-ms": "250"}))
    assert d.retry and d.delay == 0.25 and d.source == "retry-after-ms"


def test_retry_after_seconds_and_http_date() -> None:
    now = 1_800_000_000.0
    assert parse_retry_after({"retry-after": "3"}) == (3.0, "Retry-After")
    date = email.utils.formatdate(now + 12, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == (12.0, "Retry-After (HTTP date)")
    past = email.utils.formatdate(now - 100, usegmt=True)
    assert parse_retry_after({"Retry-After": past}, now=now) == (0.0, "Retry-After (HTTP date)")
    d = RetryPolicy().decide(1, AttemptResult(status=503, headers={"Retry-After": date}), now=now)
    assert d.retry and d.delay == 12.0


@pytest.mark.parametrize(
    "form", ["Sun, 06 Nov 1994 08:49:47 GMT", "Sunday, 06-Nov-94 08:49:47 GMT", "Sun Nov  6 08:49:47 1994"]
)
def test_all_three_http_date_formats_are_accepted(form: str) -> None:
    """RFC 9110 5.6.7: a recipient must accept IMF-fixdate, RFC 850 and asctime dates (all in GMT)."""
    now = email.utils.parsedate_to_datetime("Sun, 06 Nov 1994 08:49:37 GMT").timestamp()
    assert parse_retry_after({"Retry-After": form}, now=now) == (10.0, "Retry-After (HTTP date)")


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Retry-After": "soon"},
        {"Retry-After": "-3"},
        {"retry-after-ms": "nan"},
        {"Retry-After": "Mon, 99 Foo 2026"},
        {"Retry-After": "1e2"},
        {"Retry-After": "1_000"},
        {"Retry-After": "inf"},
    ],
)
def test_unusable_retry_after_falls_back_to_backoff(headers: dict) -> None:
    value, _ = parse_retry_after(headers)
    assert value is None
    d = RetryPolicy(seed=0).decide(1, AttemptResult(status=503, headers=headers))
    assert d.retry and d.source == "backoff"


def test_bad_retry_after_ms_falls_through_to_retry_after() -> None:
    assert parse_retry_after({"retry-after-ms": "x", "Retry-After": "2"}) == (2.0, "Retry-After")


def test_retry_after_longer_than_allowed_gives_up_and_says_why() -> None:
    d = RetryPolicy(max_retry_after=30).decide(1, AttemptResult(status=429, headers={"Retry-After": "120"}))
    assert not d.retry and "120" in d.reason and "max_retry_after=30" in d.reason


# -- the final error -----------------------------------------------------------------------------------


def test_retry_error_lists_every_attempt() -> None:
    attempts = [
        Attempt(1, 0.0, 0.01, AttemptResult(status=503), Decision(True, 0.5, "x", "backoff")),
        Attempt(2, 0.51, 0.52, AttemptResult(error="ConnectFailed: refused"), Decision(True, 1.0, "x", "backoff")),
        Attempt(3, 1.52, 1.53, AttemptResult(status=429), Decision(False, 0.0, "gave up after 3 attempt(s)")),
    ]
    err = RetryError(attempts)
    text = str(err)
    assert "3 attempt(s)" in text
    for needle in (
        "attempt 1: started at +0.000 s, HTTP 503",
        "waited 0.500 s (backoff)",
        "attempt 2: started at +0.510 s, connection error: ConnectFailed: refused",
        "attempt 3: started at +1.520 s, HTTP 429",
        "gave up: gave up after 3 attempt(s)",
    ):
        assert needle in text, needle
    assert err.status == 429


# -- the runner, against the stand-in ------------------------------------------------------------------

HELLO = chat_text_stream(["Hel", "lo ", "wörld"])


def _text(events) -> str:
    out = ""
    for t in events:
        if t.data != "[DONE]":
            for ch in json.loads(t.data)["choices"]:
                out += ch["delta"].get("content") or ""
    return out


@pytest.fixture(scope="module")
def server():
    # The client is under test here, not the stand-in's checks: requests name only the model, and every
    # scripted byte is played (the stand-in's defaults are the real API's: messages required, usage on request).
    with StandIn({"unused": Episode([])}, usage="scripted", require_input=False) as s:
        yield s


def _run(server: StandIn, script: dict, policy: RetryPolicy, fake: VirtualClock, model: str = "m"):
    server.set_scripts(script)
    server.reset()
    rs = RetryingStream(
        lambda: stream_chat(server.base_url, {"model": model}),
        policy,
        sleep=fake.sleep,
        clock=fake.now,
        wall_clock=lambda: 1_800_000_000.0,
    )
    return rs


def test_retries_503_then_429_then_streams(server: StandIn) -> None:
    fake = VirtualClock()
    script = {
        "m": [
            error_episode(503, "overloaded"),
            error_episode(429, "slow down", retry_after_ms=120),
            Episode([Send(f) for f in HELLO]),
        ]
    }
    rs = _run(server, script, RetryPolicy(seed=5), fake)
    with rs:
        events = list(rs)
    assert _text(events) == "Hello wörld"
    assert [a.result.describe() for a in rs.attempts] == ["HTTP 503", "HTTP 429", "completed, 7 event(s)"]
    assert fake.sleeps[1] == 0.12 and rs.attempts[1].decision.source == "retry-after-ms"
    assert 0.375 <= fake.sleeps[0] <= 0.5 and rs.attempts[0].decision.source == "backoff"
    assert server.requests_for("m") == 3
    again = VirtualClock()
    with _run(server, script, RetryPolicy(seed=5), again) as rs2:
        list(rs2)
    assert again.sleeps == fake.sleeps  # seeded: the same run, the same waits


def test_a_400_is_not_retried_and_the_error_says_so(server: StandIn) -> None:
    fake = VirtualClock()
    rs = _run(server, {"m": [error_episode(400, "bad request", type="invalid_request_error")]}, RetryPolicy(), fake)
    with pytest.raises(RetryError) as info:
        list(rs)
    assert fake.sleeps == [] and server.requests_for("m") == 1
    assert info.value.status == 400 and "attempt 1: started at +0.000 s, HTTP 400" in str(info.value)
    assert "the request itself is wrong" in str(info.value)
    assert info.value.last_error.status == 400  # the client's error, with its body, is kept


def test_gives_up_after_max_attempts_listing_each(server: StandIn) -> None:
    fake = VirtualClock()
    rs = _run(server, {"m": [error_episode(503, "down")]}, RetryPolicy(max_attempts=4, seed=1), fake)
    with pytest.raises(RetryError) as info:
        list(rs)
    text = str(info.value)
    assert server.requests_for("m") == 4 and len(fake.sleeps) == 3
    assert text.count("HTTP 503") == 4 and "max_attempts=4" in text
    starts = [a.started for a in info.value.attempts]
    assert starts == pytest.approx([0.0, fake.sleeps[0], sum(fake.sleeps[:2]), sum(fake.sleeps)])


def test_retry_after_http_date(server: StandIn) -> None:
    fake = VirtualClock()
    date = email.utils.formatdate(1_800_000_000.0 + 3, usegmt=True)
    script = {"m": [error_episode(503, "maintenance", retry_after=date), Episode([Send(f) for f in HELLO])]}
    with _run(server, script, RetryPolicy(), fake) as rs:
        list(rs)
    assert fake.sleeps == [3.0] and rs.attempts[0].decision.source == "Retry-After (HTTP date)"


@pytest.mark.net  # starts (and stops) its own stand-in to get a port nobody listens on
def test_connection_refused_is_retried() -> None:
    with StandIn({"m": Episode([])}) as dead:
        url = dead.base_url
    fake = VirtualClock()
    rs = RetryingStream(
        lambda: stream_chat(url, {"model": "m"}, connect_timeout=2),
        RetryPolicy(max_attempts=3),
        sleep=fake.sleep,
        clock=fake.now,
    )
    with pytest.raises(RetryError) as info:
        list(rs)
    assert len(info.value.attempts) == 3 and len(fake.sleeps) == 2
    assert all("connection error: ConnectFailed" in a.result.describe() for a in info.value.attempts)


def test_a_cut_before_the_first_event_is_retried(server: StandIn) -> None:
    fake = VirtualClock()
    script = {"m": [Episode([Send(HELLO[0][:10]), Cut()]), Episode([Send(f) for f in HELLO])]}
    with _run(server, script, RetryPolicy(seed=2), fake) as rs:
        events = list(rs)
    assert _text(events) == "Hello wörld" and len(rs.attempts) == 2
    assert "ConnectionBroken" in rs.attempts[0].result.describe()


def test_a_clean_end_inside_the_first_event_is_retried(server: StandIn) -> None:
    """The body ends properly but mid-event (IncompleteEvent) before any event reached us: still safe."""
    fake = VirtualClock()
    script = {"m": [Episode([Send(HELLO[0][:10])]), Episode([Send(f) for f in HELLO])]}
    with _run(server, script, RetryPolicy(seed=2), fake) as rs:
        events = list(rs)
    assert _text(events) == "Hello wörld" and len(rs.attempts) == 2
    assert "IncompleteEvent" in rs.attempts[0].result.describe()


HUGE = b"data: " + b"x" * 5000 + b"\n\n"  # one line past a 1000-byte parser limit


@pytest.mark.parametrize("before", [[], HELLO[:2]], ids=["before the first event", "after two events"])
def test_an_event_too_large_is_recorded_and_never_retried(server: StandIn, before: list[bytes]) -> None:
    """The same server would send the same bytes again, so a retry cannot help, before the first event too."""
    server.set_scripts({"m": [Episode([Send(f) for f in before] + [Send(HUGE)]), Episode([Send(f) for f in HELLO])]})
    server.reset()
    fake = VirtualClock()
    rs = RetryingStream(
        lambda: stream_chat(server.base_url, {"model": "m"}, parser=SSEParser(max_line_bytes=1000)),
        RetryPolicy(max_attempts=5),
        sleep=fake.sleep,
        clock=fake.now,
    )
    got = []
    with pytest.raises(EventTooLarge) as info:
        for t in rs:
            got.append(t)
    assert len(got) == len(before) and fake.sleeps == [] and server.requests_for("m") == 1
    (attempt,) = rs.attempts
    assert attempt.result.ending is Ending.LIMIT_EXCEEDED and attempt.result.events_delivered == len(before)
    assert not attempt.decision.retry and "same bytes" in attempt.decision.reason
    assert isinstance(info.value.__cause__, SSELimitError) and rs.stream.end_reason is Ending.LIMIT_EXCEEDED


def test_the_policy_decides_from_the_ending() -> None:
    policy = RetryPolicy(seed=0)
    for ending in RETRYABLE_ENDINGS:
        assert policy.decide(1, AttemptResult(error="x", ending=ending)).retry, ending
        assert not policy.decide(1, AttemptResult(error="x", ending=ending, events_delivered=1)).retry, ending
    for ending, reason in NOT_RETRIED.items():
        d = policy.decide(1, AttemptResult(error="x", ending=ending))
        assert not d.retry and d.reason == reason
    assert AttemptResult(ending="broken").ending is Ending.BROKEN  # a plain string is read as its Ending


def test_a_cancelled_attempt_is_recorded_as_cancelled(server: StandIn) -> None:
    server.set_scripts({"m": [Episode([Send(f) for f in HELLO] * 50)]})
    server.reset()
    with RetryingStream(lambda: stream_chat(server.base_url, {"model": "m"})) as rs:
        for _ in rs:
            rs.close()
    (attempt,) = rs.attempts
    assert attempt.result.ending is Ending.CANCELLED and not attempt.result.ok and not attempt.decision.retry


def test_never_retried_after_the_first_event(server: StandIn) -> None:
    fake = VirtualClock()
    cut_inside_char = HELLO[3][: HELLO[3].index("ö".encode()) + 1]
    script = {
        "m": [Episode([Send(f) for f in HELLO[:3]] + [Send(cut_inside_char), Cut()]), Episode([Send(f) for f in HELLO])]
    }
    rs = _run(server, script, RetryPolicy(max_attempts=5), fake)
    got = []
    with pytest.raises(ConnectionBroken):
        for t in rs:
            got.append(t)
    assert _text(got) == "Hello " and fake.sleeps == [] and server.requests_for("m") == 1
    assert rs.stream.mid_event  # the cut fell inside an event, which was dropped, not half-delivered
    assert not rs.attempts[-1].decision.retry and "already reached the caller" in rs.attempts[-1].decision.reason


def test_async_twin(server: StandIn) -> None:
    fake = VirtualClock()
    server.set_scripts({"m": [error_episode(429, "slow", retry_after=1), Episode([Send(f) for f in HELLO])]})
    server.reset()

    async def main() -> list:
        rs = AsyncRetryingStream(
            lambda: astream_chat(server.base_url, {"model": "m"}), RetryPolicy(), sleep=fake.asleep, clock=fake.now
        )
        async with rs:
            return [t async for t in rs]

    assert _text(asyncio.run(main())) == "Hello wörld" and fake.sleeps == [1.0]


def test_closing_cancels_the_current_attempt(server: StandIn) -> None:
    server.set_scripts({"m": [Episode([Send(f) for f in HELLO] * 50)]})
    server.reset()
    with httpx.Client(trust_env=False) as http:
        with RetryingStream(lambda: stream_chat(server.base_url, {"model": "m"}, client=http)) as rs:
            for _ in rs:
                break
    assert rs.stream.end_reason == "cancelled"


def test_plot_attempts_draws_each_attempt_and_wait() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    attempts = [
        Attempt(1, 0.0, 0.05, AttemptResult(status=503), Decision(True, 0.5, "x", "backoff")),
        Attempt(2, 0.55, 0.6, AttemptResult(status=429), Decision(True, 1.0, "x", "retry-after-ms")),
        Attempt(3, 1.6, 1.9, AttemptResult(ok=True, events_delivered=5), Decision(False, 0.0, "ok")),
    ]
    fig = plot_attempts(attempts)
    ax = fig.axes[0]
    assert len(ax.patches) == 5  # three attempts, two waits
    labels = [t.get_text() for t in ax.texts]
    assert "HTTP 503" in labels and "wait 1.00 s (retry-after-ms)" in labels
    plt.close(fig)
