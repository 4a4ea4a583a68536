"""Render batching on a live stream (tools/render.py) and lab 10's figures (tools/plots.py).

The live renderer is checked on promises that hold however loaded the machine is: nothing lost, the first
delta painted on its own, repaints at least an interval apart (the batcher decides from the clock readings it
is given, so that holds by construction). No assertion depends on how fast anything ran.
"""

from __future__ import annotations

import asyncio

import pytest
from matplotlib.figure import Figure

from streamlab.core import shapes
from streamlab.core.batching import EPSILON, batch
from streamlab.core.gateway.breaker import Breaker, Health
from streamlab.core.reading import TimedEvent
from streamlab.core.sse import parse
from streamlab.tools.plots import plot_breaker_timeline, plot_interval_sweep, plot_repaints
from streamlab.tools.render import SideBySide, chat_deltas, render_batched

PIECES = [f"w{i} " for i in range(12)]


async def burst(pieces: list[str], pause: float = 0.0):
    for piece in pieces:
        if pause:
            await asyncio.sleep(pause)
        yield piece


def test_a_burst_paints_the_first_delta_alone_then_the_rest_together():
    painted: list[str] = []
    flushes = asyncio.run(render_batched(burst(PIECES), painted.append, interval=0.5))
    assert [f.pieces for f in flushes] == [1, len(PIECES) - 1]
    assert painted == [PIECES[0], "".join(PIECES)]  # paint() gets the whole text shown so far
    assert flushes[1].at - flushes[0].at >= 0.5 - EPSILON


def test_a_live_stream_keeps_every_character_and_the_interval():
    painted: list[str] = []
    flushes = asyncio.run(render_batched(burst(PIECES, 0.01), painted.append, interval=0.03))
    assert painted[-1] == "".join(PIECES) and "".join(f.text for f in flushes) == "".join(PIECES)
    assert flushes[0].pieces == 1
    assert all(b.at - a.at >= 0.03 - EPSILON for a, b in zip(flushes, flushes[1:]))


def test_interval_zero_paints_every_delta():
    painted: list[str] = []
    flushes = asyncio.run(render_batched(burst(PIECES), painted.append, interval=0))
    assert len(flushes) == len(PIECES) and len(painted) == len(PIECES)


def test_chat_deltas_yields_only_text():
    events, _ = parse(b"".join(shapes.chat_text_stream(["Hel", "lo"])))

    async def source():
        for i, event in enumerate(events):
            yield TimedEvent(event, float(i), float(i))

    async def collect():
        return [d async for d in chat_deltas(source())]

    assert asyncio.run(collect()) == ["Hel", "lo"]


def test_side_by_side_paints_both_panes_from_one_stream():
    view = SideBySide(0.5)
    lines = asyncio.run(view.run(burst(PIECES)))
    every, batched = view.labels
    assert len(view.flushes[every]) == len(PIECES) and len(view.flushes[batched]) == 2
    assert "".join(PIECES) in view.panes[0].value and "".join(PIECES) in view.panes[1].value
    assert view.counters[0].value == f"{len(PIECES)} repaints" and lines[batched].startswith("2 repaints")


# -- figures ---------------------------------------------------------------------------------------------------


def test_the_breaker_timeline_draws_each_state_span_and_what_was_seen():
    b = Breaker(failure_threshold=2, cooldown=3)
    for t in (0, 1):
        b.record(b.allow(t), Health.FAULT, t, detail="HTTP 429")
    b.allow(2)
    b.record(b.allow(4), Health.OK, 5)
    backup = Breaker()
    backup.record(backup.allow(0), Health.OK, 0)
    fig = plot_breaker_timeline({"primary": b, "backup": backup})
    assert isinstance(fig, Figure)
    gids = {a.get_gid() for a in fig.axes[0].get_children() if a.get_gid()}
    assert {"state:primary:closed", "state:primary:open", "state:primary:half_open", "state:backup:closed"} <= gids
    assert {"seen:primary:fault", "seen:primary:refused", "seen:primary:probe", "seen:primary:ok"} <= gids


def test_the_batching_figures_draw_a_line_per_interval_and_schedule():
    fast = [(0.3 + i * 0.008, "abcd") for i in range(50)]
    slow = [(0.3 + i * 0.12, "abcd") for i in range(10)]
    fig = plot_repaints(fast, {"every delta": 0.0, "50 ms": 0.05}, window=(0.25, 0.8))
    lines = {line.get_gid(): line for line in fig.axes[0].get_lines() if line.get_gid()}
    assert len(lines["repaints:every delta"].get_xdata()) == 50
    assert len(lines["repaints:50 ms"].get_xdata()) == len(batch(fast, 0.05))
    sweep = plot_interval_sweep({"fast": fast, "slow": slow}, [0.0, 0.025, 0.05, 0.1])
    gids = {line.get_gid() for ax in sweep.axes for line in ax.get_lines()}
    assert {"rate:fast", "rate:slow", "wait:fast", "wait:slow"} <= gids


@pytest.mark.parametrize("interval", [-1.0, float("nan")])
def test_the_live_renderer_refuses_a_bad_interval(interval):
    with pytest.raises(ValueError, match="interval"):
        asyncio.run(render_batched(burst(PIECES), print, interval=interval))
