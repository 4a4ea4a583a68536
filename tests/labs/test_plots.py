"""The labs' figures: they draw, and what they draw is the data they were given (Agg backend, no display)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from streamlab.core.metrics import Schedule, Timing, illustrative_blank_share, illustrative_timing  # noqa: E402
from streamlab.tools.plots import DEFAULT_LENGTHS, plot_blank_share, plot_visible_chars, step_xy  # noqa: E402
from streamlab.tools.widgets import ttft_explorer, ttft_explorer_text, ttft_figure  # noqa: E402


def _by_gid(fig: Figure) -> dict[str, object]:
    found = {}
    for ax in fig.axes:
        for artist in list(ax.lines) + list(ax.collections):
            gid = artist.get_gid()
            if gid:
                assert gid not in found, f"two artists share gid {gid!r}"
                found[gid] = artist
    return found


STREAMING = Timing("streaming", ((0.3, 3), (0.34, 5), (0.38, 9)), 0.4)
BUFFERED = Timing("buffered", ((0.41, 9),), 0.41)


def test_step_xy_is_a_staircase_from_zero_to_total() -> None:
    xs, ys = step_xy(STREAMING)
    assert (xs[0], ys[0]) == (0.0, 0)
    assert xs == sorted(xs)
    assert xs[-1] == pytest.approx(STREAMING.total)
    assert ys[-1] == STREAMING.chars
    # every vertical step happens exactly at a point's time, and only there
    rises = [(xs[i], ys[i]) for i in range(1, len(xs)) if ys[i] != ys[i - 1]]
    assert rises == list(STREAMING.points)


def test_visible_chars_figure_draws_each_client_with_ttft_and_total() -> None:
    sched = Schedule(0.3, 0.04, ("abc", "de", "fghi"))
    fig = plot_visible_chars([STREAMING, BUFFERED], schedule=sched)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    arts = _by_gid(fig)
    for tm in (STREAMING, BUFFERED):
        xs, ys = arts[f"chars:{tm.label}"].get_data()
        assert (list(xs), list(ys)) == step_xy(tm)
        assert list(arts[f"ttft:{tm.label}"].get_xdata()) == [tm.ttft]
        assert list(arts[f"ttft:{tm.label}"].get_ydata()) == [tm.points[0][1]]
        assert list(arts[f"total:{tm.label}"].get_xdata()) == [tm.total]
    assert list(arts["schedule:ttft"].get_xdata()) == [0.3, 0.3]
    assert list(arts["schedule:total"].get_xdata()) == [pytest.approx(0.38)] * 2
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "streaming" in legend and "buffered" in legend and "scheduled TTFT 0.30 s" in legend
    fig.canvas.draw()  # renders without error on Agg


def test_visible_chars_accepts_a_mapping_and_an_existing_axes() -> None:
    fig = Figure()
    ax = fig.add_subplot()
    out = plot_visible_chars({"a": STREAMING}, ax=ax)
    assert out is fig and "chars:streaming" in _by_gid(fig)
    with pytest.raises(ValueError, match="at least one"):
        plot_visible_chars([])


def test_client_that_saw_nothing_has_no_ttft_marker() -> None:
    fig = plot_visible_chars([Timing("cut before any text", (), 0.2)])
    arts = _by_gid(fig)
    assert "ttft:cut before any text" not in arts and "total:cut before any text" in arts


def test_blank_share_figure_plots_the_illustrative_arithmetic() -> None:
    fig = plot_blank_share(0.4, 0.02)
    ax = fig.axes[0]
    assert "ILLUSTRATIVE" in ax.get_title()
    assert ax.get_xscale() == "log"
    arts = _by_gid(fig)
    xs, ys = arts["blank:streaming"].get_data()
    assert list(xs) == list(DEFAULT_LENGTHS)
    assert list(ys) == pytest.approx([100 * illustrative_blank_share(0.4, 0.02, n) for n in DEFAULT_LENGTHS])
    assert list(arts["blank:buffered"].get_ydata()) == [100.0] * len(DEFAULT_LENGTHS)
    # the streaming share falls as answers grow, and only a one-token answer is all blank
    assert all(a > b for a, b in zip(ys, ys[1:]))
    notes = sorted(t.get_text() for t in ax.texts)
    assert notes == sorted(f"{100 * illustrative_blank_share(0.4, 0.02, n):.1f}%" for n in (50, 500, 5000))


def test_explorer_twin_text_and_figure_agree_with_the_arithmetic() -> None:
    text = ttft_explorer_text(0.5, 1 / 30, 600)
    assert text.startswith("ILLUSTRATIVE")
    assert "total 20.47 s" in text and "0.50 s (2.4% of the wait)" in text
    fig = ttft_figure(0.5, 1 / 30, 600)
    assert len(fig.axes) == 2
    arts = _by_gid(fig)
    stream = illustrative_timing(0.5, 1 / 30, 600)
    assert list(arts[f"ttft:{stream.label}"].get_xdata()) == [0.5]
    xs, _ = arts["blank:streaming"].get_data()
    assert 600 in list(xs)


def test_explorer_widget_redraws_on_slider_change(capsys: pytest.CaptureFixture[str]) -> None:
    box = ttft_explorer(0.4, 0.02, 50)
    s_ttft, s_gap, s_n, text, out = box.children
    assert text.value == "<pre>" + ttft_explorer_text(0.4, 0.02, 50) + "</pre>"
    s_n.value = 5000
    assert text.value == "<pre>" + ttft_explorer_text(0.4, 0.02, 5000) + "</pre>"
    s_ttft.value = 2.0
    assert "TTFT 2.00 s" in text.value
    assert type(out).__name__ == "Output"  # (outside a kernel an Output widget captures nothing to inspect)


def test_plot_attempts_makes_its_own_figure_outside_pyplot() -> None:
    """Like every figure here, the retry timeline is a plain Figure: nothing leaks into pyplot's figure list."""
    import matplotlib.pyplot as plt

    from streamlab.core.retry import AttemptResult, Decision
    from streamlab.net.retry import Attempt
    from streamlab.tools.plots import plot_attempts

    before = plt.get_fignums()
    attempts = [
        Attempt(1, 0.0, 0.1, AttemptResult(status=503), Decision(True, 0.5, "x", "backoff")),
        Attempt(2, 0.6, 0.9, AttemptResult(ok=True, events_delivered=3), Decision(False, 0.0, "ok")),
    ]
    fig = plot_attempts(attempts, title="t")
    assert isinstance(fig, Figure) and plt.get_fignums() == before
    assert fig.axes[0].get_title() == "t" and len(fig.axes[0].patches) == 3  # two attempts, one wait


# -- lab 02's harness figures and lab 05's retry timeline: readable without telling hues apart -------------


@pytest.fixture(scope="module")
def harness():
    from streamlab.core.harness.broken import gallery_contender
    from streamlab.core.harness.fixtures import load_fixtures
    from streamlab.core.harness.fuzz import run_harness, streamlab_contender

    fixtures = [f for f in load_fixtures() if f.name in ("spec-stock-ticker", "multibyte-utf8", "crlf-endings")]
    contenders = [streamlab_contender(), gallery_contender("chunk-ends-line"), gallery_contender("blank-line-is-LFLF")]
    return run_harness(contenders, fixtures, random_runs=10)


def test_share_heatmap_prints_each_share_that_is_not_full_on_a_colour_blind_safe_map(harness) -> None:
    from streamlab.tools.plots import plot_share_heatmap

    fig = plot_share_heatmap(harness)
    ax = fig.axes[0]
    assert ax.images[0].get_cmap().name == "cividis"  # colour-blind safe, and darkens steadily: reads in grey
    printed = {t.get_gid(): t.get_text() for t in ax.texts}
    for contender in harness.contenders:
        for fixture in harness.fixtures:
            share = harness.share(contender, fixture)
            gid = f"share:{contender}:{fixture}"
            if share == 1.0:
                assert gid not in printed  # blank: every run right
            else:
                assert printed[gid] == str(int(share * 100))  # rounded down: 99.9% is never "100"
    assert printed["share:blank-line-is-LFLF:crlf-endings"] == "0"
    assert 0 < int(printed["share:chunk-ends-line:spec-stock-ticker"]) < 100
    assert "blank: every run correct" in ax.get_title()


def test_strategy_bars_differ_by_hatch_as_well_as_colour(harness) -> None:
    from streamlab.tools.plots import plot_strategy_bars

    ax = plot_strategy_bars(harness).axes[0]
    styles = {}
    for patch in ax.patches:
        styles.setdefault(patch.get_gid(), set()).add((patch.get_hatch() or "", patch.get_facecolor()))
    assert sorted(styles) == sorted(f"bars:{s}" for s in harness.strategies)
    assert all(len(style) == 1 for style in styles.values())  # one look per strategy...
    hatches = [next(iter(style))[0] for style in styles.values()]
    assert len(set(hatches)) == len(hatches)  # ...and no two strategies share a hatch
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == list(harness.strategies)
    assert len({h.get_hatch() or "" for h in legend.legend_handles}) == len(harness.strategies)


def test_retry_timeline_says_in_a_legend_what_its_markers_and_bars_are() -> None:
    from streamlab.core.retry import AttemptResult, Decision
    from streamlab.net.retry import Attempt
    from streamlab.tools.plots import plot_attempts

    attempts = [
        Attempt(1, 0.0, 0.0, AttemptResult(status=503), Decision(True, 0.5, "x", "backoff")),
        Attempt(2, 0.5, 0.5, AttemptResult(ok=True, events_delivered=3), Decision(False, 0.0, "ok")),
    ]
    ax = plot_attempts(attempts).axes[0]
    markers = [line.get_marker() for line in ax.lines]
    assert markers == ["X", "o"]  # failed, then streamed: told apart by shape, not only by colour
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["attempt: streamed", "attempt: failed", "wait before retrying"]


def test_reasoning_timeline_marks_both_firsts_and_shades_the_thinking() -> None:
    """Lab 04: the figure draws the points `reasoning_timelines` gave, first reasoning and first answer marked."""
    from streamlab.core.metrics import first_outputs, reasoning_timelines
    from streamlab.core.shapes import chat_reasoning_stream
    from streamlab.core.sse import SSEParser
    from streamlab.tools.plots import plot_reasoning_timeline

    frames = chat_reasoning_stream(["Let me ", "think."], ["Hi", "!"])  # role, 2 thinking, 2 answer, end, usage, DONE
    times = [0.1, 0.2, 0.25, 0.7, 0.75, 0.8, 0.8, 0.8]
    parser = SSEParser()
    arrivals = [(t, event) for frame, t in zip(frames, times, strict=True) for event in parser.feed(frame)]
    first = first_outputs(arrivals)
    assert (first.reasoning, first.answer) == (0.2, 0.7)
    thinking, answer = reasoning_timelines(arrivals, 0.0)
    fig = plot_reasoning_timeline(thinking, answer)
    arts = _by_gid(fig)
    assert list(arts["first:reasoning"].get_xdata()) == [0.2] and list(arts["first:answer"].get_xdata()) == [0.7]
    assert max(arts["chars:reasoning"].get_ydata()) == len("Let me think.")
    assert max(arts["chars:answer"].get_ydata()) == len("Hi!")
    assert "thinking" in {p.get_gid() for p in fig.axes[0].patches}
    fig = plot_reasoning_timeline([], answer)  # a model that streamed no thinking: no shaded wait
    assert "thinking" not in {p.get_gid() for p in fig.axes[0].patches} and "first:answer" in _by_gid(fig)
    with pytest.raises(ValueError):
        plot_reasoning_timeline([], [])
