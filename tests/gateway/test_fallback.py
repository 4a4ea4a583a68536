"""The fallback rule, pure: fail over only before the first event; after it resume or end marked, never move."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlab.core.endings import TRANSPORT_FAILURES, Ending
from streamlab.core.gateway.fallback import MOVES, Move, Situation, decide, remaining, worth_another

ENDINGS = [e for e in Ending if e not in (Ending.IN_PROGRESS,)]


SITUATIONS = st.builds(
    lambda ending, status, **rest: Situation(
        ending=ending, status=status if ending is Ending.HTTP_ERROR else None, **rest
    ),
    ending=st.sampled_from(ENDINGS),
    status=st.sampled_from([400, 401, 404, 408, 409, 422, 429, 500, 502, 503, 504]),
    events_sent=st.integers(min_value=0, max_value=50),
    in_stream_error=st.booleans(),
    upstreams_left=st.integers(min_value=0, max_value=3),
    resumable=st.booleans(),
    at_event_boundary=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(SITUATIONS)
def test_never_fail_over_after_the_first_event(s):
    verdict = decide(s)
    if s.events_sent > 0:
        assert verdict.move in (Move.RESUME, Move.MARKED_END)
    else:
        assert verdict.move in (Move.FAIL_OVER, Move.PASS_ERROR)


@settings(max_examples=300, deadline=None)
@given(SITUATIONS)
def test_fail_over_exactly_when_nothing_was_sent_another_upstream_is_left_and_it_could_help(s):
    could_help = worth_another(s.ending, status=s.status, in_stream_error=s.in_stream_error)
    expected = s.events_sent == 0 and s.upstreams_left > 0 and could_help
    assert (decide(s).move is Move.FAIL_OVER) == expected


@settings(max_examples=300, deadline=None)
@given(SITUATIONS)
def test_resume_only_the_same_response_between_events_after_a_transport_failure(s):
    if decide(s).move is Move.RESUME:
        assert s.events_sent > 0 and s.resumable and s.at_event_boundary and not s.in_stream_error
        assert s.ending in TRANSPORT_FAILURES or s.ending is Ending.COMPLETE


@pytest.mark.parametrize(
    ("status", "worth"),
    [
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (429, True),
        (408, True),
        (409, True),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (422, False),
    ],
)
def test_statuses_another_upstream_could_fix(status, worth):
    assert worth_another(Ending.HTTP_ERROR, status=status) is worth
    move = decide(Situation(0, Ending.HTTP_ERROR, status, upstreams_left=1)).move
    assert move is (Move.FAIL_OVER if worth else Move.PASS_ERROR)


@pytest.mark.parametrize(
    "ending", [Ending.CONNECT_ERROR, Ending.BROKEN, Ending.READ_TIMEOUT, Ending.INCOMPLETE_EVENT, Ending.COMPLETE]
)
def test_transport_failures_before_the_first_event_fail_over(ending):
    assert decide(Situation(0, ending, upstreams_left=2)).move is Move.FAIL_OVER
    assert decide(Situation(0, ending, upstreams_left=0)).move is Move.PASS_ERROR


@pytest.mark.parametrize(
    "ending", [Ending.CLIENT_GONE, Ending.CANCELLED, Ending.INVALID_REQUEST, Ending.NOT_EVENT_STREAM]
)
def test_nothing_moves_for_what_no_upstream_can_fix(ending):
    assert decide(Situation(0, ending, upstreams_left=2)).move is Move.PASS_ERROR


def test_after_the_first_event_the_reasons_say_why():
    cut = decide(Situation(12, Ending.BROKEN, upstreams_left=3))
    assert cut.move is Move.MARKED_END and "spliced" in cut.reason and "12 event(s)" in cut.reason
    resumed = decide(Situation(12, Ending.BROKEN, resumable=True))
    assert resumed.move is Move.RESUME
    inside = decide(Situation(12, Ending.BROKEN, resumable=True, at_event_boundary=False))
    assert inside.move is Move.MARKED_END and "inside an event" in inside.reason
    error = decide(Situation(12, Ending.COMPLETE, in_stream_error=True, resumable=True))
    assert error.move is Move.MARKED_END and "reported an error" in error.reason
    assert str(resumed).startswith("resume: ")


def test_an_error_object_as_the_first_event_fails_over():
    assert decide(Situation(0, Ending.COMPLETE, in_stream_error=True, upstreams_left=1)).move is Move.FAIL_OVER


def test_remaining_keeps_the_order_of_preference():
    assert remaining(["a", "b", "c"], {"b"}) == ["a", "c"]
    assert remaining(["a", "b"], ["a", "b"]) == []
    with pytest.raises(ValueError, match="unique"):
        remaining(["a", "a"], [])


def test_situations_refuse_nonsense():
    with pytest.raises(ValueError, match="needs its status"):
        Situation(0, Ending.HTTP_ERROR)
    with pytest.raises(ValueError, match=">= 0"):
        Situation(-1, Ending.BROKEN)
    with pytest.raises(ValueError):
        Situation(0, "no such ending")
    assert MOVES == ("fail_over", "pass_error", "resume", "marked_end")
