"""Interactive explorers for the labs (ipywidgets; tools layer), each with a plain-function twin that returns text.

Widgets are for exploring; the notebooks' checked outputs come from the twins, because nbval does not
compare widget views. Every explorer lives in its own section below and builds on the library modules;
none re-implements their logic.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import ipywidgets as w
from IPython.display import display
from matplotlib.figure import Figure

from streamlab.core.harness.fixtures import Fixture
from streamlab.core.harness.fuzz import Contender, split_explorer_text
from streamlab.core.metrics import illustrative_blank_share, illustrative_timing, illustrative_total
from streamlab.tools.plots import DEFAULT_LENGTHS, plot_blank_share, plot_visible_chars

# =====================================================================================================
# TTFT explorer (lab 04): sliders for TTFT, inter-token gap and answer length, ILLUSTRATIVE arithmetic.
# =====================================================================================================


def ttft_explorer_text(ttft: float, gap: float, n_tokens: int) -> str:
    """The ILLUSTRATIVE numbers behind the TTFT explorer, as text (the explorer's checkable twin)."""
    total = illustrative_total(ttft, gap, n_tokens)
    share = illustrative_blank_share(ttft, gap, n_tokens)
    return (
        f"ILLUSTRATIVE: TTFT {ttft:.2f} s, gap {gap:.3f} s, {n_tokens} tokens -> total {total:.2f} s\n"
        f"  blank screen without streaming: {total:.2f} s (100% of the wait)\n"
        f"  blank screen with streaming:    {ttft:.2f} s ({100 * share:.1f}% of the wait)"
    )


def ttft_figure(ttft: float, gap: float, n_tokens: int, *, chars_per_token: int = 4) -> Figure:
    """The explorer's figure: visible characters over time (left) and blank share by length (right)."""
    fig = Figure(figsize=(11.0, 4.0), layout="constrained")
    left, right = fig.subplots(1, 2)
    timings = [
        illustrative_timing(ttft, gap, n_tokens, chars_per_token=chars_per_token),
        illustrative_timing(ttft, gap, n_tokens, chars_per_token=chars_per_token, streaming=False),
    ]
    plot_visible_chars(timings, ax=left, title=f"ILLUSTRATIVE: {n_tokens} tokens of {chars_per_token} chars")
    lengths = sorted(set(DEFAULT_LENGTHS) | {n_tokens})
    plot_blank_share(ttft, gap, lengths, ax=right, annotate=(n_tokens,))
    return fig


def ttft_explorer(ttft: float = 0.4, gap: float = 0.02, n_tokens: int = 500) -> w.VBox:
    """Sliders for TTFT, inter-token gap and answer length, redrawing both lab 04 figures on change.

    Returns an `ipywidgets.VBox`; display it as the last expression of a cell (marked
    `# NBVAL_IGNORE_OUTPUT`, since widget views are not compared).
    """
    style = {"description_width": "9em"}
    layout = w.Layout(width="32em")
    s_ttft = w.FloatSlider(
        value=ttft,
        min=0.0,
        max=5.0,
        step=0.05,
        description="TTFT (s)",
        readout_format=".2f",
        style=style,
        layout=layout,
        continuous_update=False,
    )
    s_gap = w.FloatSlider(
        value=gap,
        min=0.001,
        max=0.2,
        step=0.001,
        description="gap (s)",
        readout_format=".3f",
        style=style,
        layout=layout,
        continuous_update=False,
    )
    s_n = w.IntSlider(
        value=n_tokens,
        min=1,
        max=5000,
        step=1,
        description="tokens",
        style=style,
        layout=layout,
        continuous_update=False,
    )
    text = w.HTML()
    out = w.Output()

    def redraw(_change: object = None) -> None:
        text.value = "<pre>" + ttft_explorer_text(s_ttft.value, s_gap.value, s_n.value) + "</pre>"
        out.clear_output(wait=True)
        with out:
            display(ttft_figure(s_ttft.value, s_gap.value, s_n.value))

    for s in (s_ttft, s_gap, s_n):
        s.observe(redraw, names="value")
    redraw()
    return w.VBox([s_ttft, s_gap, s_n, text, out])


# ===================================================================================================
# Lab 02: the split explorer: choose a fixture, slide one cut, see both chunks and every parser's events.
# ===================================================================================================


def split_explorer(fixtures: Sequence[Fixture], contenders: Sequence[Contender], fixture: str | None = None) -> w.VBox:
    """ipywidgets explorer: pick a fixture and parsers, slide the cut offset, read `split_explorer_text`.

    Returns an `ipywidgets.VBox`; show it as the last expression of a cell marked `# NBVAL_IGNORE_OUTPUT`.
    """
    by_name = {f.name: f for f in fixtures}
    names = sorted(by_name)
    pick = w.Dropdown(options=names, value=fixture if fixture in by_name else names[0], description="fixture")
    who = w.SelectMultiple(
        options=[c.name for c in contenders],
        value=tuple(c.name for c in contenders),
        rows=min(8, len(contenders)),
        description="parsers",
    )
    cut = w.IntSlider(
        value=0,
        min=0,
        max=len(by_name[pick.value].raw),
        description="cut at byte",
        continuous_update=True,
        layout=w.Layout(width="40em"),
    )
    out = w.HTML()

    def redraw(_change: object = None) -> None:
        chosen = [c for c in contenders if c.name in who.value]
        text = split_explorer_text(by_name[pick.value], chosen, cut.value)
        out.value = "<pre>" + html.escape(text) + "</pre>"

    def new_fixture(_change: object = None) -> None:
        cut.max = len(by_name[pick.value].raw)
        cut.value = min(cut.value, cut.max)
        redraw()

    pick.observe(new_fixture, names="value")
    who.observe(redraw, names="value")
    cut.observe(redraw, names="value")
    redraw()
    return w.VBox([pick, who, cut, out])
