"""The circuit breaker, pure: its table, its classification of endings, and its rules under any sequence of events.

The property tests drive a breaker with random sequences of requests, results and clock steps, and compare it
with a reference model written here in the plainest way (counters and ifs, no table), so a mistake in the
table, the permit generations or the cool-down shows up as a difference on a concrete sequence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlab.core.endings import Ending, Outcome
from streamlab.core.gateway.breaker import (
    ENDING_HEALTH,
    STATE_CODES,
    TRANSITIONS,
    Breaker,
    Health,
    Permit,
    Signal,
    State,
    health_of,
    history_text,
    next_state,
)

# -- the table ----------------------------------------------------------------------------------------


def test_the_table_is_the_six_documented_transitions():
    assert TRANSITIONS == {
        ("closed", "success"): "closed",
        ("closed", "failure"): "closed",
        ("closed", "trip"): "open",
        ("open", "cooled"): "half_open",
        ("half_open", "success"): "closed",
        ("half_open", "failure"): "open",
    }


@pytest.mark.parametrize("state", list(State))
@pytest.mark.parametrize("signal", list(Signal))
def test_a_pair_not_in_the_table_leaves_the_state_alone(state, signal):
    assert next_state(state, signal) == TRANSITIONS.get((state, signal), state)
    assert next_state(state.value, signal.value) is next_state(state, signal)


def test_states_have_gauge_codes_and_print_as_their_value():
    assert STATE_CODES == {"closed": 0, "half_open": 1, "open": 2}
    assert str(State.HALF_OPEN) == "half_open" and "open" in {State.OPEN}


# -- what counts against an upstream ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "health"),
    [
        (500, "fault"),
        (502, "fault"),
        (503, "fault"),
        (504, "fault"),
        (429, "fault"),
        (408, "fault"),
        (400, "neutral"),
        (401, "neutral"),
        (403, "neutral"),
        (404, "neutral"),
        (409, "neutral"),
        (422, "neutral"),
    ],
)
def test_statuses_count_against_the_upstream_only_when_it_is_the_upstreams_doing(status, health):
    assert health_of(Ending.HTTP_ERROR, status=status) == health


def test_a_clean_end_is_judged_by_the_content():
    assert health_of("complete", content=Outcome.COMPLETE) is Health.OK
    assert health_of("complete", content="incomplete") is Health.OK  # finish_reason "length" is an answer
    assert health_of("complete", content="failed") is Health.FAULT  # an error object inside the stream
    assert health_of("complete", content="truncated") is Health.FAULT  # ended before its terminal marker
    assert health_of("complete", content=None) is Health.FAULT
    assert health_of("complete", content="cancelled") is Health.NEUTRAL


def test_a_client_that_leaves_says_nothing_unless_the_answer_had_reached_its_end():
    assert health_of("client_gone") is Health.NEUTRAL
    assert health_of("client_gone", content="truncated") is Health.NEUTRAL
    assert health_of("client_gone", content="complete") is Health.OK


def test_every_ending_has_a_health():
    for ending in Ending:
        if ending is Ending.HTTP_ERROR:
            with pytest.raises(ValueError, match="needs the status"):
                health_of(ending)
        else:
            assert isinstance(health_of(ending), Health)
    assert {e for e, h in ENDING_HEALTH.items() if h is Health.FAULT} >= {
        Ending.CONNECT_ERROR,
        Ending.BROKEN,
        Ending.READ_TIMEOUT,
        Ending.INCOMPLETE_EVENT,
    }


# -- one breaker, by hand -----------------------------------------------------------------------------


def trip(b: Breaker, start: float = 0.0) -> float:
    t = start
    for _ in range(b.failure_threshold):
        permit = b.allow(t)
        assert permit is not None
        b.record(permit, Ending.HTTP_ERROR, t, status=503, detail="HTTP 503")
        t += 1
    return t - 1


def test_threshold_failures_in_a_row_open_it_and_a_success_between_resets_the_count():
    b = Breaker(failure_threshold=3, cooldown=10)
    p = b.allow(0)
    b.record(p, Health.FAULT, 0)
    b.record(b.allow(1), Health.FAULT, 1)
    b.record(b.allow(2), Health.OK, 2)
    assert (b.state, b.failures) == ("closed", 0)
    assert trip(b, 3) == 5 and b.state is State.OPEN
    assert b.allow(5) is None and b.allow(14.999) is None and b.retry_in(10) == pytest.approx(5)


def test_after_the_cooldown_exactly_one_probe_goes_and_its_result_decides():
    b = Breaker(failure_threshold=2, cooldown=10)
    opened = trip(b)
    probe = b.allow(opened + 10)
    assert probe == Permit(b.generation, probe=True) and b.state is State.HALF_OPEN
    assert b.allow(opened + 11) is None  # a probe is already out
    b.record(probe, Health.FAULT, opened + 12, detail="reset")
    assert b.state is State.OPEN and b.allow(opened + 21) is None  # a fresh cool-down from the failed probe
    probe = b.allow(opened + 22)
    b.record(probe, Ending.COMPLETE, opened + 23, content="complete")
    assert (b.state, b.failures) == ("closed", 0)
    assert [(t.before, t.after, t.signal) for t in b.transitions] == [
        ("closed", "open", "trip"),
        ("open", "half_open", "cooled"),
        ("half_open", "open", "failure"),
        ("open", "half_open", "cooled"),
        ("half_open", "closed", "success"),
    ]


def test_a_neutral_probe_frees_the_slot_for_another():
    b = Breaker(failure_threshold=1, cooldown=1)
    trip(b)
    probe = b.allow(5)
    b.record(probe, Ending.CLIENT_GONE, 5)
    assert b.state is State.HALF_OPEN and b.allow(5) is not None


def test_late_results_from_before_a_change_of_state_move_nothing():
    b = Breaker(failure_threshold=2, cooldown=10)
    slow = b.allow(0)  # a long stream admitted while closed
    trip(b, 1)
    probe = b.allow(20)
    b.record(slow, Health.OK, 21)  # it finishes now: it must not close the breaker in the probe's place
    assert b.state is State.HALF_OPEN
    assert b.observations[-1].kind == "late"
    b.record(probe, Health.FAULT, 22)
    assert b.state is State.OPEN


def test_retry_after_lengthens_the_cooldown_it_opens():
    b = Breaker(failure_threshold=1, cooldown=5)
    b.record(b.allow(0), Ending.HTTP_ERROR, 0, status=429, retry_after=60)
    assert b.retry_in(0) == 60 and b.allow(59) is None and b.allow(60) is not None


def test_bad_input_is_refused_with_what_and_where():
    with pytest.raises(ValueError, match="failure_threshold"):
        Breaker(failure_threshold=0)
    with pytest.raises(ValueError, match="cooldown"):
        Breaker(cooldown=-1)
    b = Breaker()
    b.allow(10)
    with pytest.raises(ValueError, match="clock went backwards: 9 after 10"):
        b.allow(9)
    with pytest.raises(ValueError, match="finite"):
        b.allow(float("nan"))


def test_history_text_merges_breakers_in_time_order():
    a, b = Breaker(failure_threshold=1, cooldown=3), Breaker(failure_threshold=1, cooldown=3)
    a.record(a.allow(0), Ending.HTTP_ERROR, 0, status=503, detail="HTTP 503")
    b.record(b.allow(0), Health.OK, 0, detail="complete")
    a.allow(1)
    assert history_text({"primary": a, "backup": b}).splitlines() == [
        "t=   0.0 primary  fault    closed    1/1   HTTP 503",
        "t=   0.0 primary  ==> open (trip): 1 failures in a row (HTTP 503)",
        "t=   0.0 backup   ok       closed    0/1   complete",
        "t=   1.0 primary  refused  open      1/1   open for 2 s more",
    ]


# -- properties against a plain reference model --------------------------------------------------------


@dataclass
class Model:
    """The rules, written plainly."""

    threshold: int
    cooldown: float
    state: str = "closed"
    failures: int = 0
    until: float = 0.0
    probe_out: bool = False
    era: int = 0  # bumped at each change of state
    log: list[tuple[str, str]] = field(default_factory=list)

    def go(self, to: str) -> None:
        self.log.append((self.state, to))
        self.state, self.era, self.probe_out = to, self.era + 1, False

    def allow(self, now: float) -> tuple[int, bool] | None:
        if self.state == "open" and now >= self.until:
            self.go("half_open")
        if self.state == "closed":
            return (self.era, False)
        if self.state == "half_open" and not self.probe_out:
            self.probe_out = True
            return (self.era, True)
        return None

    def record(self, ticket: tuple[int, bool], health: str, now: float) -> None:
        era, probe = ticket
        if era != self.era:
            return
        if probe:
            self.probe_out = False
        if health == "neutral":
            return
        if health == "ok":
            self.failures = 0
            if self.state == "half_open":
                self.go("closed")
            return
        if self.state == "closed":
            self.failures += 1
            if self.failures >= self.threshold:
                self.go("open")
                self.until = now + self.cooldown
        elif self.state == "half_open":
            self.go("open")
            self.until = now + self.cooldown


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("ask"), st.floats(min_value=0, max_value=4)),
        st.tuples(
            st.just("answer"),
            st.integers(min_value=0, max_value=20),
            st.sampled_from(["ok", "fault", "neutral"]),
            st.floats(min_value=0, max_value=4),
        ),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=4), st.sampled_from([0.0, 1.0, 5.0]), STEPS)
def test_the_breaker_matches_the_plain_model_on_any_sequence(threshold, cooldown, steps):
    b, m = Breaker(failure_threshold=threshold, cooldown=cooldown), Model(threshold, cooldown)
    now = 0.0
    out: list[tuple[Permit, tuple[int, bool]]] = []  # permits not yet answered
    for step in steps:
        now += step[-1]
        if step[0] == "ask":
            permit, ticket = b.allow(now), m.allow(now)
            assert (permit is None) == (ticket is None), (b, m)
            if permit is not None:
                assert permit.probe == ticket[1]
                out.append((permit, ticket))
        elif out:
            permit, ticket = out.pop(step[1] % len(out))
            b.record(permit, Health(step[2]), now)
            m.record(ticket, step[2], now)
        assert b.state == m.state and b.failures == m.failures, (b, m)
    assert [(t.before, t.after) for t in b.transitions] == m.log


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=1, max_value=4), st.floats(min_value=0.5, max_value=10), STEPS)
def test_invariants_on_any_sequence(threshold, cooldown, steps):
    b = Breaker(failure_threshold=threshold, cooldown=cooldown)
    now, out = 0.0, []
    for step in steps:
        now += step[-1]
        if step[0] == "ask":
            was_open_until = b.open_until if b.state is State.OPEN else None
            probes_out = sum(p.probe and p.generation == b.generation for p in out)
            permit = b.allow(now)
            if was_open_until is not None and now < was_open_until:
                assert permit is None  # open means nothing goes before the cool-down is over
            if permit is not None:
                if permit.probe:
                    assert probes_out == 0  # at most one probe at a time
                out.append(permit)
        elif out:
            b.record(out.pop(step[1] % len(out)), Health(step[2]), now)
        assert b.failures <= threshold
        assert (b.state is State.OPEN) == (b.open_until is not None)
    for tr in b.transitions:  # every change of state is a row of the table
        assert TRANSITIONS[(tr.before, tr.signal)] is tr.after
