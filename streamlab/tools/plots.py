"""The labs' figures, drawn with matplotlib (tools layer): lab 02's harness, lab 04's timings, lab 05's retries.

Lab 04:

1. `plot_visible_chars`: visible characters against time for several clients on one axis, each client's
   TTFT marked with a dot and its end of response with a bar; optionally the schedule the server followed.
   The streaming curve climbs from the TTFT on; buffered and non-streaming curves stay flat at zero and
   jump at the end, although the same bytes arrived at the same times.
2. `plot_blank_share`: the share of the wait spent on a blank screen against answer length, with and
   without streaming, from the ILLUSTRATIVE arithmetic in `streamlab.core.metrics` (labelled as such).
3. `plot_reasoning_timeline`: a reasoning model's stream as two staircases, the thinking's characters and the
   answer's, with the first reasoning and the first answer text marked and the wait between them shaded
   (`streamlab.core.metrics.reasoning_timelines`).

Lab 05: `plot_attempts`, the retry timeline (each attempt as a marker where it started and a bar as long as it
took, each wait as a hatched bar).

Lab 08: `plot_compatibility_matrix`, checks x endpoints (or provider profiles), coloured and marked by status.

Lab 10: `plot_breaker_timeline` (each upstream's breaker state over time, and what it saw), `plot_repaints` and
`plot_interval_sweep` (render batching: what a screen shows, and repaints against the batching interval).

Lab 12: `plot_browser_run`, a recorded (or live) Chromium run of the chat page: the marks from the request to the
first visible text beside the server's own first write, and rendering per token against per animation frame.

Lab 13: `plot_path_timings`, one row per measured hop (`streamlab.net.proxy.measure`): when the reader got the
headers, the first byte, the first event, the first text and the last event, and where a read was cut.

Each takes an optional `ax` so they can be combined, and returns the Figure. Artists carry a `gid`
("chars:LABEL", "ttft:LABEL", "total:LABEL", "schedule:ttft", "schedule:total", "blank:streaming",
"blank:buffered") so tests and learners can find them without relying on draw order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from streamlab.core.batching import batch, render_stats
from streamlab.core.conformance.checks import CHECKS, Report, Status, matrix_rows
from streamlab.core.gateway.breaker import Breaker, State
from streamlab.core.harness.fuzz import HarnessResult
from streamlab.core.metrics import Schedule, Timing, illustrative_blank_share
from streamlab.net.retry import Attempt

__all__ = [
    "plot_visible_chars",
    "plot_blank_share",
    "plot_reasoning_timeline",
    "step_xy",
    "DEFAULT_LENGTHS",
    "plot_share_heatmap",
    "plot_strategy_bars",
    "plot_attempts",
    "plot_compatibility_matrix",
    "plot_breaker_timeline",
    "plot_repaints",
    "plot_interval_sweep",
    "plot_browser_run",
    "plot_path_timings",
]

DEFAULT_LENGTHS: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
"""Answer lengths (tokens) on the blank-share figure's x axis."""

_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    """Use `ax` if given, else a new Figure (not pyplot's: nothing leaks into a global figure list)."""
    if ax is not None:
        return ax.figure.figure, ax  # the root Figure (itself, or a SubFigure's parent)
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def step_xy(timing: Timing) -> tuple[list[float], list[int]]:
    """The staircase of one Timing: from (0, 0) through every point, held flat until `total`."""
    xs, ys = [0.0], [0]
    for t, c in timing.points:
        xs += [t, t]
        ys += [ys[-1], c]
    xs.append(max(timing.total, xs[-1]))
    ys.append(ys[-1])
    return xs, ys


def plot_visible_chars(
    timings: Sequence[Timing] | Mapping[str, Timing],
    *,
    schedule: Schedule | None = None,
    ax: Axes | None = None,
    title: str = "What the user sees: visible characters over time",
    figsize: tuple[float, float] = (8.0, 4.5),
) -> Figure:
    """Cumulative visible characters against time, one staircase per client, TTFT and total marked.

    `timings` is a sequence of `Timing` (or a mapping whose values are) drawn in the order given. With a
    `schedule`, its TTFT and last-token time are drawn as vertical lines for reference.
    """
    items = list(timings.values()) if isinstance(timings, Mapping) else list(timings)
    if not items:
        raise ValueError("plot_visible_chars needs at least one Timing")
    fig, ax = _axes(ax, figsize)
    for i, tm in enumerate(items):
        colour = _COLOURS[i % len(_COLOURS)]
        xs, ys = step_xy(tm)
        (line,) = ax.plot(xs, ys, color=colour, lw=2, label=tm.label, zorder=3 + i)
        line.set_gid(f"chars:{tm.label}")
        if tm.ttft is not None:
            (dot,) = ax.plot([tm.ttft], [tm.points[0][1]], "o", color=colour, ms=7, zorder=11, label="_nolegend_")
            dot.set_gid(f"ttft:{tm.label}")
        (end,) = ax.plot(
            [tm.total], [tm.chars], "s", color=colour, mfc="none", ms=12, mew=2, zorder=10, label="_nolegend_"
        )
        end.set_gid(f"total:{tm.label}")
    # legend entries for the two markers, in grey: they apply to every client
    ax.plot([], [], "o", color="grey", ms=7, label="TTFT (first visible text)")
    ax.plot([], [], "s", color="grey", mfc="none", ms=10, mew=2, label="end of response (total)")
    if schedule is not None:
        vl = ax.axvline(schedule.ttft, color="grey", ls=":", lw=1.2, label=f"scheduled TTFT {schedule.ttft:.2f} s")
        vl.set_gid("schedule:ttft")
        vl = ax.axvline(
            schedule.total, color="grey", ls="--", lw=1.2, label=f"scheduled last token {schedule.total:.2f} s"
        )
        vl.set_gid("schedule:total")
    ax.set_xlabel("seconds since the request was sent")
    ax.set_ylabel("visible characters")
    ax.set_title(title)
    ax.set_xlim(left=0)
    ax.set_ylim(0, max(1, max(tm.chars for tm in items)) * 1.1)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    return fig


def _staircase(points: Sequence[tuple[float, int]], end: float) -> tuple[list[float], list[int]]:
    xs, ys = [0.0], [0]
    for t, c in points:
        xs += [t, t]
        ys += [ys[-1], c]
    return [*xs, max(end, xs[-1])], [*ys, ys[-1]]


def plot_reasoning_timeline(
    thinking: Sequence[tuple[float, int]],
    answer: Sequence[tuple[float, int]],
    *,
    ax: Axes | None = None,
    title: str = "A reasoning model: the thinking, then the answer",
    figsize: tuple[float, float] = (8.0, 4.5),
) -> Figure:
    """Characters of reasoning and of answer against time, from `reasoning_timelines` points (seconds, characters).

    The first reasoning and the first answer text are marked (gids "first:reasoning", "first:answer"), the two
    staircases carry gids "chars:reasoning" and "chars:answer", and the wait between the two firsts, which a UI
    that shows only the answer spends on a blank screen, is shaded (gid "thinking").
    """
    if not thinking and not answer:
        raise ValueError("plot_reasoning_timeline needs at least one point")
    fig, ax = _axes(ax, figsize)
    end = max(p[0] for p in [*thinking, *answer])
    for i, (label, points) in enumerate((("reasoning", thinking), ("answer", answer))):
        if not points:
            continue
        colour = _COLOURS[i]
        xs, ys = _staircase(points, end)
        (line,) = ax.plot(xs, ys, color=colour, lw=2, label=f"{label} characters", zorder=3)
        line.set_gid(f"chars:{label}")
        (dot,) = ax.plot([points[0][0]], [points[0][1]], "o", color=colour, ms=8, zorder=10, label="_nolegend_")
        dot.set_gid(f"first:{label}")
        ax.annotate(
            f"first {label} {points[0][0]:.2f} s",
            (points[0][0], points[0][1]),
            textcoords="offset points",
            xytext=(6, 8 + 14 * i),
            fontsize="small",
            color=colour,
        )
    if thinking and answer and answer[0][0] > thinking[0][0]:
        span = ax.axvspan(thinking[0][0], answer[0][0], color="grey", alpha=0.15, label="thinking: no answer text yet")
        span.set_gid("thinking")
    ax.set_xlabel("seconds since the request was sent")
    ax.set_ylabel("characters")
    ax.set_title(title)
    ax.set_xlim(left=0)
    ax.set_ylim(0, max(1, *(p[1] for p in [*thinking, *answer])) * 1.15)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    return fig


def plot_blank_share(
    ttft: float,
    gap: float,
    lengths: Iterable[int] = DEFAULT_LENGTHS,
    *,
    ax: Axes | None = None,
    figsize: tuple[float, float] = (8.0, 4.0),
    annotate: Iterable[int] = (50, 500, 5000),
) -> Figure:
    """ILLUSTRATIVE: percent of the wait spent on a blank screen against answer length (log x axis).

    Without streaming the screen is blank for the whole wait (100% at every length); with streaming only
    for the TTFT, a share that shrinks as the answer grows. Lengths in `annotate` get their value written.
    """
    ns = sorted(set(int(n) for n in lengths))
    if not ns:
        raise ValueError("plot_blank_share needs at least one answer length")
    fig, ax = _axes(ax, figsize)
    streaming = np.array([100 * illustrative_blank_share(ttft, gap, n) for n in ns])
    buffered = np.array([100 * illustrative_blank_share(ttft, gap, n, streaming=False) for n in ns])
    (b,) = ax.plot(ns, buffered, "s--", color="tab:orange", label="without streaming (whole wait)")
    b.set_gid("blank:buffered")
    (s,) = ax.plot(ns, streaming, "o-", color="tab:blue", label="streaming (TTFT / total)")
    s.set_gid("blank:streaming")
    for n in annotate:
        if n in ns:
            y = streaming[ns.index(n)]
            ax.annotate(f"{y:.1f}%", (n, y), textcoords="offset points", xytext=(0, 9), ha="center", fontsize="small")
    ax.set_xscale("log")
    ax.set_ylim(0, 110)
    ax.set_xlabel("answer length (tokens, log scale)")
    ax.set_ylabel("blank screen, % of the wait")
    ax.set_title(f"ILLUSTRATIVE numbers: TTFT {ttft:.2f} s, one token every {gap:.3f} s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="center right", fontsize="small")
    return fig


# =====================================================================================================
# Lab 02: the split harness's heatmap and bar chart (Figures, not pyplot, so nothing leaks).
# =====================================================================================================


_STRATEGY_STYLES = (("#0072B2", ""), ("#E69F00", "//"), ("#009E73", ".."), ("#CC79A7", "xx"))
"""Colour and hatch for each split strategy's bars: Okabe and Ito's colour-blind-safe palette, and a hatch each,
so the bars are told apart without seeing hue at all."""


def plot_share_heatmap(
    result: HarnessResult, contenders: Sequence[str] | None = None, fixtures: Sequence[str] | None = None
) -> Figure:
    """Heatmap, contenders x fixtures, of the share of runs (all strategies) that were correct.

    Readable without colour vision: the colour map is cividis (made for colour-blind readers; it darkens
    steadily from right to wrong, so it also reads in grey), and every cell that is not always right carries
    its share as a percentage, rounded down so that 99.9% never prints as 100 (text artists with gid
    "share:CONTENDER:FIXTURE"). A blank cell is one where every run was right.
    """
    rows = list(contenders or result.contenders)
    cols = list(fixtures or result.fixtures)
    grid = np.array([[result.share(c, f) for f in cols] for c in rows])
    fig = Figure(figsize=(max(6.0, 0.28 * len(cols) + 3), max(2.5, 0.32 * len(rows) + 1.8)), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(grid, cmap="cividis", vmin=0.0, vmax=1.0, aspect="auto")
    for y, contender in enumerate(rows):
        for x, fixture in enumerate(cols):
            share = grid[y][x]
            if share < 1.0:
                ax.text(
                    x,
                    y,
                    str(int(share * 100)),
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if share < 0.5 else "black",
                    gid=f"share:{contender}:{fixture}",
                )
    ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_title("% of runs correct, all four strategies (blank: every run correct)")
    bar = fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01)
    bar.set_label("share of runs correct", fontsize=8)
    return fig


def plot_strategy_bars(result: HarnessResult, contenders: Sequence[str] | None = None) -> Figure:
    """Grouped bars: for each contender and split strategy, the share of runs correct, averaged over fixtures.

    Each fixture weighs the same (a long fixture has many more 2-way splits than a short one), so a missing
    rule, wrong under every split of its fixtures, gives bars of equal height, and a chunking bug a full
    `whole` bar next to shorter ones. Strategies differ by hatch as well as by colour (a colour-blind-safe
    palette), and the legend shows both; each strategy's bars carry the gid "bars:STRATEGY".
    """
    rows = list(contenders or result.contenders)
    x = np.arange(len(rows))
    width = 0.8 / len(result.strategies)
    fig = Figure(figsize=(max(6.0, 0.6 * len(rows) + 2), 4.0), layout="constrained")
    ax = fig.add_subplot()
    for k, strategy in enumerate(result.strategies):
        shares = [float(np.mean([result.cell(c, f, strategy).share for f in result.fixtures])) for c in rows]
        colour, hatch = _STRATEGY_STYLES[k % len(_STRATEGY_STYLES)]
        bars = ax.bar(
            x + (k - (len(result.strategies) - 1) / 2) * width,
            shares,
            width,
            label=strategy,
            color=colour,
            hatch=hatch,
            edgecolor="black",
            linewidth=0.4,
        )
        for patch in bars:
            patch.set_gid(f"bars:{strategy}")
    ax.set_xticks(x, rows, rotation=45, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of runs correct\n(mean over fixtures)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("the same parsers, four ways of cutting the same bytes")
    return fig


# =====================================================================================================
# Lab 05: the retry timeline.
# =====================================================================================================


def plot_attempts(attempts: Sequence[Attempt], *, ax: Axes | None = None, title: str = "Retry timeline") -> Figure:
    """Draw each attempt as a marker where it started (a green dot: it streamed; a red X: it failed, so the
    shape says it without colour) and a bar as long as it took, labelled with what came back; and each wait
    before the next attempt as a hatched grey bar. A legend says which is which.

    Under a `VirtualClock` an attempt takes no time (the clock moves only when the runner sleeps), so its bar
    has no length and only the marker shows. Returns the Figure. Works on recorded attempts
    (`RetryingStream.attempts`), so a notebook can plot a deterministic run (a `VirtualClock`) as well as a
    live one. With `ax`, laying out the caller's figure is left to the caller.
    """
    fig, ax = _axes(ax, (8.0, 1.2 + 0.45 * max(1, len(attempts))))
    for i, a in enumerate(attempts):
        y = len(attempts) - i
        failed = not a.result.ok
        colour = "tab:red" if failed else "tab:green"
        ax.barh(y, max(a.ended - a.started, 1e-3), left=a.started, height=0.5, color=colour)
        ax.plot([a.started], [y], marker="X" if failed else "o", color=colour, markersize=9)  # visible at 0 s too
        ax.annotate(a.result.describe().split(":")[0], (a.started, y + 0.3), fontsize=8, va="bottom")
        if a.decision.retry:
            ax.barh(y, a.waited, left=a.ended, height=0.2, color="lightgrey", hatch="//", edgecolor="grey")
            ax.annotate(
                f"wait {a.waited:.2f} s ({a.decision.source})",
                (a.ended + a.waited / 2, y - 0.35),
                fontsize=7,
                ha="center",
                va="top",
                color="dimgrey",
            )
    ax.set_yticks([len(attempts) - i for i in range(len(attempts))], [f"attempt {a.number}" for a in attempts])
    end = max([a.ended + a.waited for a in attempts], default=1.0) or 1.0
    ax.set_xlim(-0.03 * end, 1.2 * end)  # room for the last label
    ax.set_xlabel("seconds since the first attempt started")
    ax.set_ylim(0.3, len(attempts) + 0.9)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(
        handles=[
            Line2D([], [], marker="o", color="tab:green", linestyle="none", label="attempt: streamed"),
            Line2D([], [], marker="X", color="tab:red", linestyle="none", label="attempt: failed"),
            Patch(facecolor="lightgrey", hatch="//", edgecolor="grey", label="wait before retrying"),
        ],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=7,
        frameon=False,
    )
    return fig


# =====================================================================================================
# Lab 08: the compatibility matrix.
# =====================================================================================================

_STATUS_COLOURS = {Status.PASS: "#4daf4a", Status.WARN: "#ffb000", Status.FAIL: "#e41a1c", Status.SKIP: "#d9d9d9"}
_STATUS_MARKS = {Status.PASS: "", Status.WARN: "W", Status.FAIL: "F", Status.SKIP: "-"}


def plot_compatibility_matrix(
    reports: Mapping[str, Report],
    checks: Sequence[str] | None = None,
    *,
    title: str = "What each endpoint does with each promise",
) -> Figure:
    """The compatibility matrix: one row per check, one column per report (an endpoint or a profile), each
    cell coloured by its status and marked W (warn), F (fail) or - (skip), so it reads without colour too.

    Rows follow `checks` (default: every check some report graded), with a line between check groups. Each
    cell's mark is a text artist with gid "cell:CHECK:NAME". The text twin is
    `streamlab.core.conformance.checks.render_matrix` on the same reports.
    """
    rows = matrix_rows(reports, checks)
    names = list(reports)
    fig = Figure(figsize=(2.2 + 1.05 * len(names), 1.3 + 0.26 * len(rows)), layout="constrained")
    ax = fig.add_subplot()
    for y, (check, statuses) in enumerate(rows):
        for x, (name, status) in enumerate(zip(names, statuses)):
            ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=_STATUS_COLOURS[status], edgecolor="white"))
            ax.text(
                x,
                y,
                _STATUS_MARKS[status],
                ha="center",
                va="center",
                fontsize=8,
                fontweight="bold",
                gid=f"cell:{check}:{name}",
            )
    for y in range(1, len(rows)):
        if CHECKS[rows[y][0]].group != CHECKS[rows[y - 1][0]].group:
            ax.axhline(y - 0.5, color="black", linewidth=1.2)
    ax.set_xlim(-0.5, len(names) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks(range(len(names)), names, fontsize=9)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(rows)), [check for check, _ in rows], fontsize=8)
    ax.tick_params(length=0)
    handles = [
        Patch(facecolor=_STATUS_COLOURS[s], label=s.value + (f" ({_STATUS_MARKS[s]})" if _STATUS_MARKS[s] else ""))
        for s in Status
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    return fig


# -- lab 10: the gateway's breakers and render batching ------------------------------------------------------

_STATE_STYLES = {  # colour (Okabe and Ito's colour-blind-safe palette) and a hatch, so states read without hue
    State.CLOSED: ("#009E73", ""),
    State.HALF_OPEN: ("#E69F00", ".."),
    State.OPEN: ("#D55E00", "//"),
}
_SEEN = {  # what a breaker saw -> (marker, colour, legend label): each kind has a shape of its own
    "ok": ("o", "#009E73", "ok"),
    "fault": ("X", "#D55E00", "fault"),
    "neutral": ("s", "#999999", "neutral"),
    "refused": ("|", "black", "refused (skipped)"),
    "probe": ("D", "#E69F00", "probe let through"),
    "late": ("x", "#999999", "late result"),
}


def plot_breaker_timeline(
    breakers: Mapping[str, Breaker],
    *,
    since: float = 0.0,
    until: float | None = None,
    ax: Axes | None = None,
    title: str = "Circuit breakers over time",
) -> Figure:
    """One lane per upstream: its breaker's state as spans (closed plain, half-open dotted, open hatched, each in
    its colour) and what it saw as markers of different shapes (ok, fault, refused, probe), on the breakers'
    clock, relative to `since`. Spans carry the gid "state:NAME:STATE", markers "seen:NAME:KIND"."""
    names = list(breakers)
    fig, ax = _axes(ax, (9.0, 1.6 + 0.8 * max(1, len(names))))
    times = [h.at for b in breakers.values() for h in b.history]
    end = (max(times, default=since) + 1.0) if until is None else until
    for i, name in enumerate(names):
        y, b = len(names) - i, breakers[name]
        state, start = State.CLOSED, since
        for tr in [*b.transitions, None]:
            stop = end if tr is None else tr.at
            if stop > start:
                colour, hatch = _STATE_STYLES[state]
                ax.barh(
                    y,
                    stop - start,
                    left=start - since,
                    height=0.5,
                    color=colour,
                    alpha=0.3,
                    hatch=hatch,
                    edgecolor=colour,
                    linewidth=0,
                    gid=f"state:{name}:{state}",
                )
            if tr is not None:
                state, start = tr.after, tr.at
        for kind, (marker, colour, _label) in _SEEN.items():
            xs = [ob.at - since for ob in b.observations if ob.kind == kind]
            if xs:
                ax.plot(xs, [y] * len(xs), ls="", marker=marker, color=colour, markersize=8, gid=f"seen:{name}:{kind}")
    ax.set_yticks([len(names) - i for i in range(len(names))], names)
    ax.set_ylim(0.4, len(names) + 0.6)
    ax.set_xlim(0, end - since)
    ax.set_xlabel("seconds on the breakers' clock")
    handles: list[Artist] = [
        Patch(facecolor=c, edgecolor=c, alpha=0.3, hatch=h, label=str(s).replace("_", "-"))
        for s, (c, h) in _STATE_STYLES.items()
    ]
    handles += [ax.plot([], [], ls="", marker=m, color=c, label=label)[0] for m, c, label in _SEEN.values()]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return fig


def plot_repaints(
    deltas: Sequence[tuple[float, str]],
    intervals: Mapping[str, float],
    *,
    window: tuple[float, float] | None = None,
    ax: Axes | None = None,
    title: str = "What the screen shows: one stream, painted two ways",
) -> Figure:
    """Characters on screen against time for the same `deltas` ((arrival, text)), one staircase per batching
    interval in `intervals` (label -> seconds; 0 paints every delta), each repaint a dot (gid "repaints:LABEL").
    `window` limits the time axis."""
    fig, ax = _axes(ax, (8.0, 4.0))
    for i, (label, interval) in enumerate(intervals.items()):
        flushes = batch(deltas, interval)
        xs, ys, total = [0.0], [0], 0
        for f in flushes:
            total += len(f.text)
            xs += [f.at, f.at]
            ys += [ys[-1], total]
        colour = _COLOURS[i % len(_COLOURS)]
        stats = render_stats(flushes)
        ax.plot(xs, ys, color=colour, lw=1.5, label=f"{label}: {stats.repaints} repaints")
        ax.plot(
            [f.at for f in flushes],
            np.cumsum([len(f.text) for f in flushes]),
            ls="",
            marker="o",
            markersize=3,
            color=colour,
            gid=f"repaints:{label}",
        )
    if window is not None:
        ax.set_xlim(*window)
        top = sum(len(text) for t, text in deltas if t <= window[1])  # what is on screen by the window's end
        ax.set_ylim(0, 1.05 * max(top, 1))
    ax.set_xlabel("seconds after the request")
    ax.set_ylabel("characters on screen")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def plot_interval_sweep(
    schedules: Mapping[str, Sequence[tuple[float, str]]],
    intervals: Sequence[float],
    *,
    ax: Axes | None = None,
    title: str = "Repaints per second and the longest wait, by batching interval",
) -> Figure:
    """For each schedule (label -> deltas), repaints per second (solid, left axis) and the longest any delta
    waited (dashed, right axis, ms) against the batching interval (ms). Lines carry the gids "rate:LABEL" and
    "wait:LABEL"."""
    fig, ax = _axes(ax, (8.0, 4.0))
    right = ax.twinx()
    ms = [1000 * iv for iv in intervals]
    for i, (label, deltas) in enumerate(schedules.items()):
        stats = [render_stats(batch(deltas, iv)) for iv in intervals]
        colour = _COLOURS[i % len(_COLOURS)]
        ax.plot(
            ms,
            [s.per_second for s in stats],
            marker="o",
            color=colour,
            label=f"{label}: repaints per second",
            gid=f"rate:{label}",
        )
        right.plot(
            ms,
            [1000 * s.max_wait for s in stats],
            ls="--",
            marker=".",
            color=colour,
            label=f"{label}: longest wait (ms)",
            gid=f"wait:{label}",
        )
    ax.set_xlabel("batching interval (ms)")
    ax.set_ylabel("repaints per second")
    right.set_ylabel("longest wait (ms)")
    lines = ax.get_lines() + right.get_lines()
    ax.legend(lines, [str(line.get_label()) for line in lines], loc="upper center", fontsize=8)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return fig


_BROWSER_MARKS = (
    ("response_headers_ms", "response headers"),
    ("first_byte_ms", "first byte of the body"),
    ("first_event_ms", "first event parsed"),
    ("first_visible_text_ms", "first text painted"),
    ("done_ms", "answer complete"),
)


def plot_browser_run(timings: Mapping[str, object]) -> Figure:
    """Lab 12's browser figure from the `timings` of a `streamlab.net.browser` run: on the left, each mark of the
    fetch reader (milliseconds after the page sent the request) with the stand-in's scheduled first write; on the
    right, per-token rendering against per-frame batching (DOM updates, long tasks, milliseconds spent rendering)."""
    fetch = timings["fetch"]
    render = timings["render"]
    assert isinstance(fetch, Mapping) and isinstance(render, Mapping)
    fig, (left, right) = _plt_subplots(figsize=(11, 3.6), width_ratios=(1.3, 1))
    names = [label for key, label in _BROWSER_MARKS if fetch.get(key) is not None]
    values = [float(fetch[key]) for key, _ in _BROWSER_MARKS if fetch.get(key) is not None]
    bars = left.barh(names, values, color="#4C72B0")
    for bar, name in zip(bars, names):
        bar.set_gid(f"mark:{name}")
    left.axvline(float(fetch["server_first_write_ms"]), color="#C44E52", linestyle="--", gid="server:first-write")
    left.invert_yaxis()
    left.set_xlabel("ms after the request was sent (in the browser)")
    left.set_title("fetch reader: where the time goes")
    left.legend([Line2D([0], [0], color="#C44E52", linestyle="--")], ["stand-in's first write"], loc="lower right")
    kinds = (("dom_updates", "DOM updates"), ("long_tasks", "long tasks (>50 ms)"), ("render_ms", "ms rendering"))
    x = np.arange(len(kinds))
    for offset, mode, colour in ((-0.2, "token", "#DD8452"), (0.2, "frame", "#55A868")):
        stats = render[mode]
        assert isinstance(stats, Mapping)
        heights = [float(stats[key]) for key, _ in kinds]
        right.bar(x + offset, heights, width=0.4, color=colour, label=f"per {mode}", gid=f"render:{mode}")
    right.set_xticks(x, [label for _, label in kinds])
    right.set_yscale("log")
    right.set_title("800 tokens: render per token or per frame")
    right.legend()
    fig.tight_layout()
    return fig


_PATH_MARKS = (  # (timings key, label, marker, colour, row offset): Okabe-Ito colours, told apart by shape too
    ("headers", "headers", "|", "#000000", -0.24),
    ("first_byte", "first byte", "o", "#E69F00", -0.12),
    ("first_event", "first event", "^", "#56B4E9", 0.0),
    ("first_text", "first text", "*", "#009E73", 0.12),
    ("last_event", "last event", "s", "#0072B2", 0.24),
)


def plot_path_timings(
    cases: Mapping[str, Mapping[str, object]],
    *,
    title: str = "What the reader got, and when",
    ax: Axes | None = None,
) -> Figure:
    """Lab 13's figure: one row per case (`cases`: key -> a record of `streamlab.net.proxy.measure`, with its
    `title` and `timings`), top to bottom in the order given. On each row, the moments the reader got the headers,
    the first byte, the first event, the first text and the last event (seconds since the request; each mark a
    little above or below the row, so marks at the same moment stay visible), a bar from the first event to the
    last (a stream that flows has a long one; an answer held back until the end has none), and a cross where a
    read ended without its last event (cut)."""
    rows = list(cases.items())
    fig, ax = _axes(ax, (10, 1.0 + 0.55 * len(rows)))
    for y, (key, record) in enumerate(rows):
        timings = record["timings"]
        assert isinstance(timings, Mapping)
        first, last = timings.get("first_event"), timings.get("last_event")
        if isinstance(first, (int, float)) and isinstance(last, (int, float)):
            ax.plot(
                [first, last],
                [y, y],
                color="#0072B2",
                linewidth=6,
                alpha=0.25,
                solid_capstyle="butt",
                gid=f"span:{key}",
            )
        for name, _, marker, colour, offset in _PATH_MARKS:
            at = timings.get(name)
            if isinstance(at, (int, float)):
                ax.plot(
                    [at],
                    [y + offset],
                    marker=marker,
                    color=colour,
                    markersize=12 if marker == "|" else 7,
                    markeredgewidth=2 if marker == "|" else 1,
                    linestyle="none",
                    gid=f"{name}:{key}",
                )
        end = timings.get("end")
        if last is None and isinstance(end, (int, float)):
            ax.plot([end], [y], marker="X", color="#D55E00", markersize=10, linestyle="none", gid=f"cut:{key}")
    ax.set_yticks(range(len(rows)), [str(record.get("title", key)) for key, record in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(left=0)
    ax.set_xlabel("seconds since the request was sent (at the reader)")
    ax.set_title(title)
    handles = [Line2D([0], [0], marker=m, color=c, linestyle="none", markersize=8) for _, _, m, c, _ in _PATH_MARKS]
    handles.append(Line2D([0], [0], marker="X", color="#D55E00", linestyle="none", markersize=8))
    labels = [label for _, label, _, _, _ in _PATH_MARKS] + ["cut before the end"]
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return fig


def _plt_subplots(*, figsize: tuple[float, float], width_ratios: tuple[float, float]) -> tuple[Figure, Sequence[Axes]]:
    fig = Figure(figsize=figsize)
    axes = fig.subplots(1, 2, width_ratios=width_ratios)
    return fig, list(axes)
