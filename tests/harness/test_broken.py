"""The gallery of broken parsers: each fails for its documented reason, and only for it.

For every parser the tests name a fixture and the kind of cut that exposes its bug (or "whole stream" for
a gap that shows without any cut), search the smallest failing split with the harness, and check that the
wrong output is the one the bug predicts. The correct parsers pass everything.
"""

from __future__ import annotations

import pytest

from streamlab.core.harness import broken
from streamlab.core.harness.broken import FindTheBugsSnippet, TextLineParser, run_parser
from streamlab.core.harness.fixtures import load_fixtures
from streamlab.core.harness.fuzz import (
    ALL_FIELDS,
    Contender,
    check,
    cut_kind,
    run_harness,
    smallest_failing_split,
    split_explorer_text,
    split_kinds,
    streamlab_contender,
)
from streamlab.core.sse import MAX_RETRY_MS, SSEEvent, SSEParser
from streamlab.exercises import verdict
from streamlab.exercises.lab02 import REPAIR_FIXTURES, check_repair
from streamlab.net.harness import broken_http
from streamlab.net.harness.broken_http import SHOWCASE, gallery, gallery_contender
from streamlab.tools.plots import plot_share_heatmap, plot_strategy_bars
from streamlab.tools.widgets import split_explorer

FIXTURES = {f.name: f for f in load_fixtures()}


@pytest.fixture(scope="module")
def harness():
    contenders = [streamlab_contender(), Contender("text-base", run_parser(TextLineParser), ALL_FIELDS), *gallery()]
    return run_harness(contenders, list(FIXTURES.values()), random_runs=25)


def test_correct_parsers_pass_everything(harness) -> None:
    for name in ("streamlab", "text-base"):
        ok, total = harness.totals(name)
        assert ok == total > 40 * 44, (name, harness.failing_fixtures(name))


def test_gallery_has_every_listed_bug() -> None:
    names = [c.name for c in gallery()]
    assert len(names) == len(set(names)) >= 10
    assert set(SHOWCASE) == set(names)
    for c in gallery():
        assert c.description and "Found in" not in c.description


def test_every_broken_parser_fails_somewhere(harness) -> None:
    for c in gallery():
        assert harness.failing_fixtures(c.name), c.name


# parser -> [(fixture, kind of the smallest failing split)]; "whole stream" = fails with no cut at all
EXPOSED_BY = {
    "decode-each-chunk": [("multibyte-utf8", "inside a UTF-8 character"), ("bom-first", "inside the BOM")],
    "decoder+splitlines": [
        ("crlf-two-data-lines", "between CR and LF"),
        ("crlf-endings", "between CR and LF"),
        ("unicode-line-separators", "whole stream"),
    ],
    "blank-line-is-LFLF": [("crlf-endings", "whole stream"), ("cr-only-endings", "whole stream")],
    "data-needs-space": [("spec-space-optional", "whole stream"), ("spec-empty-data", "whole stream")],
    "dispatch-at-end": [("unfinished-final-event", "whole stream"), ("id-in-unfinished-block", "whole stream")],
    "keeps-bom": [("bom-first", "whole stream")],
    "phantom-events": [("id-without-data", "whole stream"), ("comments-and-keepalives", "whole stream")],
    "retry-with-int": [("retry-invalid-values", "whole stream")],
    "strips-values": [("space-removed-once", "whole stream")],
    "chunk-ends-line": [("spec-stock-ticker", "inside a line")],
    "httpx-iter-lines": [("unicode-line-separators", "whole stream"), ("other-controls-not-eol", "whole stream")],
    "find-the-bugs-snippet": [
        ("multibyte-utf8", "inside a line"),
        ("chat-completions-lf", "inside a line"),
        ("crlf-endings", "whole stream"),
    ],
    "requests-lines-sample": [("spec-stock-ticker", "whole stream"), ("unfinished-final-event", "whole stream")],
    "httpx-lines-sample": [("spec-three-messages", "whole stream")],
}


def test_expectations_cover_the_gallery() -> None:
    assert set(EXPOSED_BY) == {c.name for c in gallery()}
    for name, cases in EXPOSED_BY.items():
        assert SHOWCASE[name] in {fixture for fixture, _ in cases}, name


@pytest.mark.parametrize(("name", "fixture", "kind"), [(n, f, k) for n, cases in EXPOSED_BY.items() for f, k in cases])
def test_smallest_failing_split_is_the_documented_one(name: str, fixture: str, kind: str) -> None:
    contender = gallery_contender(name)
    fx = FIXTURES[fixture]
    cuts = smallest_failing_split(contender, fx)
    assert cuts is not None, f"{name} passes every split of {fixture}"
    assert split_kinds(fx.raw, cuts) == kind
    assert check(streamlab_contender(), fx, cuts).ok  # the correct parser is fine on the same cut


def _events(name: str, fixture: str, cuts: tuple[int, ...] = ()) -> list[tuple[str, str, str]]:
    trial = check(gallery_contender(name), FIXTURES[fixture], cuts)
    assert trial.got is not None, trial.problem
    return [(e.event, e.data, e.last_event_id) for e in trial.got.events]


def _crlf_cut(raw: bytes) -> tuple[int]:
    return (raw.index(b"\r\n") + 1,)


def test_decode_each_chunk_garbles_a_split_character() -> None:
    raw = FIXTURES["multibyte-utf8"].raw
    cut = (raw.index("é".encode()) + 1,)
    assert _events("decode-each-chunk", "multibyte-utf8", cut) == [("message", "h\ufffd\ufffdllo 世界 🙂", "")]


def test_splitlines_cuts_json_text_and_a_split_crlf() -> None:
    assert _events("decoder+splitlines", "crlf-two-data-lines", _crlf_cut(FIXTURES["crlf-two-data-lines"].raw)) == [
        ("message", "a", ""),
        ("message", "b", ""),
    ]
    # crlf-endings: the phantom blank line ends the "ping" block before its data line
    cut = _crlf_cut(FIXTURES["crlf-endings"].raw)
    assert _events("decoder+splitlines", "crlf-endings", cut)[0] == ("message", "1", "")
    assert _events("decoder+splitlines", "crlf-endings") == _events("decoder+splitlines", "crlf-endings", (0,))
    got = _events("decoder+splitlines", "unicode-line-separators")
    assert got == [("message", '{"t": "a', "")]


def test_lflf_search_never_dispatches_crlf() -> None:
    trial = check(gallery_contender("blank-line-is-LFLF"), FIXTURES["crlf-endings"], ())
    assert trial.got is not None and trial.got.events == () and trial.got.truncated is True
    assert _events("blank-line-is-LFLF", "spec-three-messages") == [
        (e.event, e.data, e.last_event_id) for e in FIXTURES["spec-three-messages"].expected.events
    ]


def test_field_bugs_give_the_predicted_values() -> None:
    assert _events("data-needs-space", "spec-space-optional") == [("message", "test", "")]
    assert _events("dispatch-at-end", "unfinished-final-event")[-1] == ("message", "cut off", "")
    assert _events("keeps-bom", "bom-first") == []
    assert _events("phantom-events", "id-without-data") == [("message", "", "5"), ("message", "a", "5")]
    assert _events("strips-values", "space-removed-once") == [("message", "two\nthree", "")]
    trial = check(gallery_contender("retry-with-int"), FIXTURES["retry-invalid-values"], ())
    assert trial.problem.startswith("retry ") and "events" not in trial.problem  # events right, retry wrong
    assert trial.got is not None and trial.got.retry_ms == -1


def test_chunk_ends_line_is_right_whole_and_wrong_cut(harness) -> None:
    assert harness.totals("chunk-ends-line", "whole") == (len(FIXTURES), len(FIXTURES))
    raw = FIXTURES["spec-stock-ticker"].raw
    assert _events("chunk-ends-line", "spec-stock-ticker", (raw.index(b"YHOO") + 2,)) == [("message", "YH\n+2\n10", "")]


def test_find_the_bugs_snippet_replays_and_crashes() -> None:
    expected = [(e.event, e.data, e.last_event_id) for e in FIXTURES["chat-completions-lf"].expected.events]
    raw = FIXTURES["chat-completions-lf"].raw
    assert _events("find-the-bugs-snippet", "chat-completions-lf") == expected
    assert _events("find-the-bugs-snippet", "chat-completions-lf", (len(raw),)) == expected * 2  # empty last chunk
    cut = (FIXTURES["multibyte-utf8"].raw.index("é".encode()) + 1,)
    trial = check(gallery_contender("find-the-bugs-snippet"), FIXTURES["multibyte-utf8"], cut)
    assert trial.problem.startswith("raised UnicodeDecodeError")


def test_sample_parser_adapters() -> None:
    assert _events("requests-lines-sample", "spec-stock-ticker") == [("message", "YHOO+210", "")]
    assert _events("httpx-lines-sample", "spec-three-messages") == []
    assert _events("httpx-lines-sample", "empty-stream") == []


def test_chunking_bugs_and_gaps_are_told_apart(harness) -> None:
    for name in ("decode-each-chunk", "chunk-ends-line", "find-the-bugs-snippet"):
        assert harness.whole_ok_split_wrong(name), name
    assert "crlf-two-data-lines" in harness.whole_ok_split_wrong("decoder+splitlines")
    assert "unicode-line-separators" not in harness.whole_ok_split_wrong("decoder+splitlines")
    for name in ("blank-line-is-LFLF", "data-needs-space", "keeps-bom", "retry-with-int", "httpx-lines-sample"):
        assert harness.whole_ok_split_wrong(name) == [], name


def test_cut_kind() -> None:
    raw = b"\xef\xbb\xbfdata: \xc3\xa9\r\n\n"
    assert cut_kind(raw, 0) == "empty chunk at the start"
    assert cut_kind(raw, len(raw)) == "empty chunk at the end"
    assert cut_kind(raw, 1) == "inside the BOM"
    assert cut_kind(raw, 4) == "inside a line"
    assert cut_kind(raw, raw.index(b"\xa9")) == "inside a UTF-8 character"
    assert cut_kind(raw, raw.index(b"\n")) == "between CR and LF"
    assert cut_kind(raw, len(raw) - 1) == "at the start of a line"
    assert split_kinds(raw, ()) == "whole stream"


def test_split_explorer_text_and_widget() -> None:
    fx = FIXTURES["crlf-two-data-lines"]
    cut = _crlf_cut(fx.raw)[0]
    text = split_explorer_text(fx, [streamlab_contender(), gallery_contender("decoder+splitlines")], cut)
    assert "between CR and LF" in text and "data: a\\r | \\ndata: b" in text
    lines = text.splitlines()
    assert lines[-2].startswith("streamlab") and lines[-2].endswith("right")
    assert "WRONG" in lines[-1]
    box = split_explorer(list(FIXTURES.values()), [streamlab_contender()], fixture="crlf-two-data-lines")
    pick, _who, slider, out = box.children
    assert slider.max == len(fx.raw)
    slider.value = cut
    assert "between CR and LF" in out.value
    pick.value = "bom-first"
    assert slider.max == len(FIXTURES["bom-first"].raw) and "bom-first" in out.value


def test_plots_show_the_computed_shares(harness) -> None:
    fig = plot_share_heatmap(harness, ["text-base", "chunk-ends-line"], ["spec-stock-ticker"])
    grid = fig.axes[0].images[0].get_array()
    assert grid[0][0] == 1.0 and grid[1][0] == harness.share("chunk-ends-line", "spec-stock-ticker") < 1.0
    bars = plot_strategy_bars(harness, ["text-base", "chunk-ends-line"])
    heights = [p.get_height() for p in bars.axes[0].patches]
    assert len(heights) == 8 and heights[0] == 1.0
    assert heights[1] == 1.0 and heights[3] < 1.0  # chunk-ends-line: right whole, wrong byte-at-a-time


# -- exercise 02.1 ------------------------------------------------------------------------------------


def _via_parser(chunks):
    parser = SSEParser()
    for chunk in chunks:
        for event in parser.feed(chunk):
            yield event.data


def _via_snippet(chunks):
    snippet = FindTheBugsSnippet()
    for chunk in chunks:
        for event in snippet.feed(chunk):
            yield event.data


def test_exercise_accepts_a_correct_repair_and_rejects_the_snippet() -> None:
    assert verdict("02.1", _via_parser) == "Exercise 02.1: passed"
    bad = verdict("02.1", _via_snippet)
    assert bad.startswith("Exercise 02.1: not yet:") and "wrong on" in bad
    with pytest.raises(AssertionError, match="multibyte-utf8"):
        check_repair(lambda chunks: [e.data for e in _decode_each_chunk_events(chunks)])


def test_exercise_verdict_is_one_line_with_the_decisive_cut() -> None:
    # decode-each-chunk fails several fixtures; the verdict names the one that matters most, with its one cut
    v = verdict("02.1", lambda chunks: [e.data for e in _decode_each_chunk_events(chunks)])
    assert "\n" not in v
    first = v.split("First: ", 1)[1]
    assert first.startswith(f"{REPAIR_FIXTURES[0]} with 1 cut(s) (cut 1 at byte")
    assert "\\xc3 | \\xa9" in first  # the cut falls inside a 2-byte character
    # a repair whose only bug is the BOM is told about bom-first, on the whole stream, and nothing else
    keeps_bom = gallery_contender("keeps-bom")
    v = verdict("02.1", lambda chunks: [e.data for e in keeps_bom.run(list(chunks)).events])
    assert REPAIR_FIXTURES[-1] == "bom-first" and "wrong on 1 fixture(s) ['bom-first']" in v
    assert "First: bom-first on the whole stream: events [] != expected" in v and "\n" not in v


def _decode_each_chunk_events(chunks) -> list[SSEEvent]:
    parser = gallery_contender("decode-each-chunk")
    return list(parser.run(list(chunks)).events)


def test_exercise_not_attempted_and_wrong_type() -> None:
    def stub(chunks):
        raise NotImplementedError

    assert verdict("02.1", stub) == "Exercise 02.1: not attempted yet"
    assert verdict("02.1", ...) == "Exercise 02.1: not attempted yet"
    assert verdict("02.1", 42).startswith("Exercise 02.1: not yet: `repaired` should be a function")
    assert set(REPAIR_FIXTURES) <= set(FIXTURES)


# -- the layering: the gallery's core half needs no HTTP library; the whole gallery is assembled on the I/O side


def test_whole_gallery_is_the_core_parsers_and_the_httpx_fed_two_in_teaching_order() -> None:
    names = [c.name for c in gallery()]
    assert names == list(broken_http.TEACHING_ORDER)  # the order lab 02 prints
    assert sorted(names) == sorted([*broken.GALLERY, *broken_http.HTTP_GALLERY]) and len(set(names)) == len(names)
    assert [c.name for c in broken.gallery()] == [n for n in names if n in broken.GALLERY]
    assert broken.SHOWCASE == {n: SHOWCASE[n] for n in broken.GALLERY}
    for name in broken.GALLERY:  # the core's own lookups agree with the whole gallery's
        assert broken.bug_of(name) == broken_http.bug_of(name) and broken.found_in(name) == broken_http.found_in(name)
        assert broken.gallery_contender(name).exposes == gallery_contender(name).exposes


def test_the_correct_base_clamps_a_huge_retry_like_the_parser() -> None:
    raw = b"retry: " + b"1" * 5000 + b"\ndata: x\n\n"
    result = run_parser(TextLineParser)([raw])
    assert result.retry_ms == MAX_RETRY_MS and result.events == (SSEEvent("message", "x", ""),)
    assert check(Contender("text-base", run_parser(TextLineParser), ALL_FIELDS), FIXTURES["retry-valid"], ()).ok
    parser = SSEParser()
    parser.feed(raw)
    assert parser.retry_ms == result.retry_ms
