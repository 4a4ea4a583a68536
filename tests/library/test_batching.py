"""Render batching, pure: nothing lost, first words at once, repaints at least an interval apart, no piece late
by more than an interval; and the lab's numbers on a fast and a slow schedule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlab.core.batching import EPSILON, Batcher, Flush, batch, render_stats
from streamlab.core.metrics import Schedule

GAPS = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=0.3, allow_nan=False), st.text(alphabet="ab\u00e9\U0001f600 ", max_size=4)
    ),
    max_size=60,
)


def schedule(gaps: list[tuple[float, str]], start: float = 0.25) -> list[tuple[float, str]]:
    t, out = start, []
    for gap, text in gaps:
        t += gap
        out.append((t, text))
    return out


@settings(max_examples=150, deadline=None)
@given(GAPS, st.sampled_from([0.0, 0.016, 0.05, 0.1]))
def test_batching_keeps_every_character_in_order_and_keeps_its_promises(gaps, interval):
    deltas = schedule(gaps)
    flushes = batch(deltas, interval)
    assert "".join(f.text for f in flushes) == "".join(text for _, text in deltas)
    assert sum(f.pieces for f in flushes) == sum(1 for _, text in deltas if text)
    shown = [(t, text) for t, text in deltas if text]
    if shown:
        assert flushes[0].at == shown[0][0]  # the first words paint at once: perceived TTFT unchanged
    for a, b in zip(flushes, flushes[1:]):
        assert b.at - a.at >= interval - EPSILON  # at most one repaint per interval
    assert all(0 <= f.waited <= interval + EPSILON for f in flushes)  # nobody waits more than an interval
    arrived = iter(shown)
    for f in flushes:  # each flush paints only what had arrived by then
        for _ in range(f.pieces):
            t, _text = next(arrived)
            assert t <= f.at + EPSILON


@settings(max_examples=100, deadline=None)
@given(GAPS)
def test_interval_zero_paints_every_delta_as_it_comes(gaps):
    deltas = [(t, text) for t, text in schedule(gaps) if text]
    assert [(f.at, f.text) for f in batch(deltas, 0)] == deltas


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=0.051, max_value=1.0), max_size=30))
def test_a_slow_stream_is_painted_exactly_as_it_arrives(gaps):
    deltas = schedule([(g, "x") for g in gaps])
    assert [f.at for f in batch(deltas, 0.05)] == [t for t, _ in deltas]


def test_a_burst_is_coalesced_into_interval_ticks():
    deltas = [(0.3 + i * 0.01, f"{i} ") for i in range(11)]  # one delta every 10 ms for 100 ms
    flushes = batch(deltas, 0.05)
    assert [(round(f.at, 3), f.pieces) for f in flushes] == [(0.3, 1), (0.35, 5), (0.4, 5)]
    assert flushes[1] == Flush(at=deltas[5][0], text="1 2 3 4 5 ", pieces=5, oldest=deltas[1][0])


def test_the_last_held_text_is_painted_when_due_after_the_stream_ends():
    flushes = batch([(1.0, "a"), (1.01, "b")], 0.05)
    assert [(f.at, f.text) for f in flushes] == [(1.0, "a"), (1.05, "b")]


def test_the_batcher_drives_a_live_renderer():
    b = Batcher(0.05)
    assert b.feed("", 0.1) is None and b.next_due is None  # a role chunk paints nothing
    assert b.feed("Hel", 0.2).text == "Hel"
    assert b.feed("lo", 0.21) is None and b.held == "lo" and b.next_due == pytest.approx(0.25)
    assert b.tick(0.24) is None
    assert b.tick(0.25).text == "lo"
    assert b.feed(" w", 0.26) is None
    late = b.feed("orld", 0.4)  # the timer never fired (a busy loop): both pieces now
    assert (late.text, late.at, late.pieces) == (" world", 0.4, 2)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="interval"):
        Batcher(-0.01)
    b = Batcher()
    b.feed("a", 1.0)
    with pytest.raises(ValueError, match="backwards"):
        b.feed("b", 0.5)
    with pytest.raises(ValueError, match="finite"):
        b.tick(float("inf"))


@pytest.mark.parametrize(
    ("gap", "interval", "repaints", "per_second", "chars"),
    [
        (0.008, 0.0, 200, 125.0, 5.0),  # fast, every delta
        (0.008, 0.05, 33, 20.0, 30.3),  # fast, 50 ms batching
        (0.12, 0.0, 200, 8.3, 5.0),  # slow, every delta
        (0.12, 0.05, 200, 8.3, 5.0),  # slow, 50 ms batching: nothing to coalesce, nothing delayed
    ],
)
def test_the_labs_side_by_side_numbers(gap, interval, repaints, per_second, chars):
    sched = Schedule(0.3, gap, tuple(f"w{i:03d} " for i in range(200)))
    stats = render_stats(batch(zip(sched.piece_times(), sched.pieces), interval))
    assert (stats.repaints, round(stats.per_second, 1), round(stats.chars_per_repaint, 1)) == (
        repaints,
        per_second,
        chars,
    )
    assert stats.first_paint == 0.3  # perceived TTFT unchanged
    assert stats.max_wait <= interval + EPSILON


def test_stats_of_nothing_and_of_one_paint():
    assert render_stats([]).repaints == 0 and render_stats([]).first_paint is None
    one = render_stats(batch([(0.5, "hi")], 0.05))
    assert (one.repaints, one.per_second, one.first_paint) == (1, 0.0, 0.5)
    assert "1 repaints" in one.line() and "first words at 500 ms" in one.line()
