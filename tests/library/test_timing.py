"""Timing: TTFT at the first visible text, gaps, total, blank share; the ILLUSTRATIVE arithmetic; lab 04 checks.

The pure functions are tested on made-up arrival times, so exact equality is fine there. Live runs against
the stand-in assert only facts with wide margins (never raw timings): the machine is small and noisy.
"""

from __future__ import annotations

import math

import pytest

from streamlab.core.metrics import (
    Schedule,
    Timing,
    chat_text_timeline,
    first_visible_time,
    illustrative_blank_share,
    illustrative_table,
    illustrative_timing,
    illustrative_tokens_by,
    illustrative_total,
    reasoning_timelines,
    timing_from_arrivals,
)
from streamlab.core.shapes import chat_refusal_stream, chat_text_stream
from streamlab.core.sse import SSEEvent, SSEParser
from streamlab.exercises import verdict
from streamlab.exercises.lab04 import lab04_streams
from streamlab.net.live import scheduled_chat_episode


def timed(frames: list[bytes], times: list[float]) -> list[tuple[float, SSEEvent]]:
    parser = SSEParser()
    out = [(t, ev) for frame, t in zip(frames, times, strict=True) for ev in parser.feed(frame)]
    assert not parser.close()
    return out


# frames: role, "Hel", "lo ", "wörld", finish, usage, [DONE]
HELLO = chat_text_stream(["Hel", "lo ", "w\u00f6rld"])
HELLO_TIMES = [10.05, 10.30, 10.34, 10.38, 10.38, 10.38, 10.39]


def test_ttft_is_the_first_visible_text_not_the_role_chunk() -> None:
    arrivals = timed(HELLO, HELLO_TIMES)
    assert arrivals[0][0] == 10.05  # the role chunk did arrive first...
    points = chat_text_timeline(arrivals, start=10.0)
    assert points == [(pytest.approx(0.30), 3), (pytest.approx(0.34), 6), (pytest.approx(0.38), 11)]
    assert first_visible_time(arrivals, 10.0) == pytest.approx(0.30)  # ...but the TTFT is the first text


def test_timing_from_arrivals_derives_gaps_total_and_blank_share() -> None:
    tm = timing_from_arrivals("streaming", timed(HELLO, HELLO_TIMES), 10.0, 10.40)
    assert tm.ttft == pytest.approx(0.30)
    assert tm.gaps == (pytest.approx(0.04), pytest.approx(0.04))
    assert tm.total == pytest.approx(0.40)
    assert tm.chars == len("Hello wörld")  # characters, not bytes: ö is two bytes, one character
    assert tm.blank_share == pytest.approx(0.75)
    assert [tm.chars_at(t) for t in (0.0, 0.29, 0.31, 0.35, 1.0)] == [0, 0, 3, 6, 11]
    assert "TTFT 0.300 s" in tm.summary() and "blank screen 75%" in tm.summary()


def test_a_buffered_body_shows_everything_at_once() -> None:
    arrivals = timed(HELLO, [10.39] * len(HELLO))
    tm = timing_from_arrivals("buffered", arrivals, 10.0, 10.39)
    assert tm.points == ((pytest.approx(0.39), 11),)
    assert tm.ttft == tm.total and tm.blank_share == 1.0 and tm.gaps == ()


def test_no_text_means_no_ttft() -> None:
    empty = chat_text_stream([])
    tm = timing_from_arrivals("empty", timed(empty, [0.1] * len(empty)), 0.0, 0.2)
    assert tm.ttft is None and tm.chars == 0 and tm.blank_share == 1.0


def test_a_refusal_is_visible_text_too() -> None:
    frames = chat_refusal_stream(["I can't ", "help with that."])
    assert first_visible_time(timed(frames, [0.1, 0.5, 0.6, 0.7, 0.7, 0.7])) == 0.5


def test_timing_rejects_inconsistent_data_and_says_where() -> None:
    with pytest.raises(ValueError, match="point 1 .* before the previous"):
        Timing("x", ((0.5, 1), (0.4, 2)), 1.0)
    with pytest.raises(ValueError, match="point 1 does not add visible text"):
        Timing("x", ((0.1, 2), (0.2, 2)), 1.0)
    with pytest.raises(ValueError, match="total 0.1 s is before the last text"):
        Timing("x", ((0.2, 2),), 0.1)
    with pytest.raises(ValueError, match="arrival 1 at 1.0 comes before"):
        chat_text_timeline([(2.0, SSEEvent(data="[DONE]")), (1.0, SSEEvent(data="[DONE]"))], 0.0)
    with pytest.raises(ValueError, match="end .* before start"):
        timing_from_arrivals("x", [], 5.0, 4.0)


def test_illustrative_arithmetic() -> None:
    # total = ttft + (n - 1) * gap: the first token at ttft, then n - 1 gaps
    assert illustrative_total(0.4, 0.02, 1) == 0.4
    assert illustrative_total(0.5, 1 / 30, 600) == pytest.approx(0.5 + 599 / 30)
    rows = illustrative_table(0.4, 0.02, [50, 500, 5000])
    assert [round(r["total"], 2) for r in rows] == [1.38, 10.38, 100.38]
    assert [round(100 * r["blank_streaming"], 1) for r in rows] == [29.0, 3.9, 0.4]
    assert all(r["blank_buffered"] == 1.0 for r in rows)
    assert illustrative_blank_share(0.4, 0.02, 1) == 1.0  # one token: nothing to show before it
    for bad in ((-0.1, 0.02, 5), (0.4, -1, 5), (0.4, 0.02, 0), (0.4, 0.02, 2.5)):
        with pytest.raises(ValueError):
            illustrative_total(*bad)


def test_tokens_by_counts_the_token_due_exactly_then() -> None:
    assert illustrative_tokens_by(0.49, 0.5, 1 / 30) == 0
    assert illustrative_tokens_by(0.5, 0.5, 1 / 30) == 1
    assert illustrative_tokens_by(5.0, 0.5, 1 / 30) == 136  # 4.5 s x 30/s = 135 more, plus the first
    assert illustrative_tokens_by(1.0, 0.0, 0.1) == 11
    with pytest.raises(ValueError):
        illustrative_tokens_by(1.0, 0.5, 0.0)


def test_illustrative_timing_matches_the_arithmetic() -> None:
    stream = illustrative_timing(0.4, 0.02, 50, chars_per_token=4)
    flat = illustrative_timing(0.4, 0.02, 50, chars_per_token=4, streaming=False)
    assert stream.ttft == 0.4 and stream.chars == flat.chars == 200
    assert stream.total == flat.total == flat.ttft == pytest.approx(1.38)
    assert stream.blank_share == pytest.approx(illustrative_blank_share(0.4, 0.02, 50))
    assert all(g == pytest.approx(0.02) for g in stream.gaps)
    assert stream.label.endswith("(illustrative)") and flat.label.endswith("(illustrative)")


def test_schedule() -> None:
    s = Schedule(0.3, 0.04, ("a", "bc", "def"))
    assert s.text == "abcdef" and s.total == pytest.approx(0.38)
    assert s.piece_times() == [0.3, pytest.approx(0.34), pytest.approx(0.38)]
    assert s.timing().points == ((0.3, 1), (pytest.approx(0.34), 3), (pytest.approx(0.38), 6))
    with pytest.raises(ValueError, match="no empty piece"):
        Schedule(0.3, 0.04, ("a", ""))
    with pytest.raises(ValueError, match="ttft >= 0"):
        Schedule(-1, 0.04, ("a",))


def test_scheduled_episode_sends_the_role_early_and_waits_the_scheduled_total() -> None:
    from streamlab.core.standin.script import Send, Wait

    s = Schedule(0.3, 0.04, ("a", "bc", "def"))
    ep = scheduled_chat_episode(s, role_at=0.05)
    assert ep.thinking_time == pytest.approx(s.total)  # a non-streaming request waits as long
    assert ep.payload == b"".join(chat_text_stream(["a", "bc", "def"]))
    kinds = [(type(st).__name__, getattr(st, "seconds", None)) for st in ep.steps]
    assert kinds[:4] == [("Wait", 0.05), ("Send", None), ("Wait", pytest.approx(0.25)), ("Send", None)]
    assert isinstance(ep.steps[-1], Send) and not any(isinstance(st, Wait) for st in ep.steps[-4:])
    assert ep.body["choices"][0]["message"]["content"] == "abcdef"
    with pytest.raises(ValueError, match="role_at"):
        scheduled_chat_episode(s, role_at=0.5)


# -- lab 04 checkers: wrong answers get a helpful "not yet", stubs "not attempted" --------------------------


@pytest.mark.parametrize(
    ("ex_id", "answer", "expected"),
    [
        ("04.1", ..., "not attempted yet"),
        ("04.1", 0.5 + 599 / 30, "passed"),
        ("04.1", 20.5, "passed"),  # one gap too many is within the tolerance (the solution says why)
        ("04.1", 20.0, "leaves out the 0.5 s"),
        ("04.1", "20.5", "should be a number"),
        ("04.1", 25.0, "not right"),
        ("04.2", (..., ...), "not attempted yet"),
        ("04.2", (0.5, 20.47), "passed"),
        ("04.2", (20.47, 0.5), "swapped"),
        ("04.2", (0.0, 20.47), "blank until the first token"),
        ("04.2", 0.5, "should be a pair"),
        ("04.2", (0.5, ...), "fill in the second value too"),
        ("04.2", (..., 20.47), "fill in the first value too"),
        ("04.3", (136, 600), "passed"),
        ("04.3", (135, 600), "passed"),
        ("04.3", (150, 600), "not right"),
        ("04.3", (136, 136), "does not know"),
        ("04.3", (135.5, 600), "whole number"),
        ("04.3", (..., ...), "not attempted yet"),
        ("04.3", (136, ...), "fill in the second value too"),
        ("04.4", lambda t, g, n: t / (t + (n - 1) * g), "passed"),
        ("04.4", lambda t, g, n: 100 * t / (t + (n - 1) * g), "not a percentage"),
        ("04.4", lambda t, g, n: t / (t + n * g), "total = ttft + (n_tokens - 1) × gap"),  # one gap too many
        ("04.4", 0.29, "should be a function"),
    ],
)
def test_lab04_checkers(ex_id: str, answer: object, expected: str) -> None:
    got = verdict(ex_id, answer)
    assert got.startswith(f"Exercise {ex_id}: ")
    assert expected in got, got
    assert ("passed" in got) == (expected == "passed")


def test_lab04_first_visible_checker() -> None:
    assert verdict("04.5", lambda arrivals: arrivals[0][0] if arrivals else None).endswith(
        "(that is the role chunk: it shows the user nothing)"
    )
    assert "your code raised" in verdict("04.5", lambda arrivals: 1 / 0)
    streams = dict(lab04_streams())
    assert first_visible_time(streams["no text at all (returns None)"]) is None
    assert all(isinstance(t, float) and math.isfinite(t) for _, arr in streams.items() for t, _ in arr)


# -- live: the three clients against one scheduled stand-in answer (facts with wide margins only) ----------


LIVE = Schedule(0.3, 0.05, tuple(f"w{i:02d} " for i in range(24)))  # last piece due at 1.45 s


@pytest.fixture(scope="module")
def live_server():
    from streamlab.net.standin.server import StandIn

    with StandIn({"sched": scheduled_chat_episode(LIVE)}) as server:
        yield server


def test_three_clients_same_bytes_different_view(live_server) -> None:
    from streamlab.net.live import CLIENT_LABELS, run_three_clients

    live_server.reset()
    res = run_three_clients(live_server.base_url, "sched")
    assert list(res) == list(CLIENT_LABELS)
    streaming, buffered, plain = res.values()
    # same answer, same stream bytes
    assert streaming.notes["text"] == buffered.notes["text"] == plain.notes["text"] == LIVE.text
    assert streaming.notes["raw"] == buffered.notes["raw"]
    written = [r.written for r in live_server.records("sched")]
    assert written[0] == written[1] == streaming.notes["raw"]
    # the server cannot send text before its schedule: these hold however slow the machine is
    assert streaming.ttft >= LIVE.ttft
    assert buffered.ttft >= LIVE.total and plain.ttft >= LIVE.total
    assert min(tm.total for tm in res.values()) >= LIVE.total
    # the role chunk arrives first but is not the TTFT
    assert streaming.notes["first_event"] < streaming.ttft
    # what the user sees differs (margins of hundreds of milliseconds)
    assert streaming.ttft < streaming.total / 2
    assert len(streaming.points) >= len(LIVE.pieces) // 2  # the text grew in many steps...
    assert len(buffered.points) == len(plain.points) == 1  # ...or all at once
    assert buffered.blank_share == plain.blank_share == 1.0 and streaming.blank_share < 0.5


async def _async_run(base_url: str) -> Timing:
    from streamlab.net.live import astream_timing

    return await astream_timing(base_url, "sched")


def test_async_client_measures_the_same_schedule(live_server) -> None:
    import asyncio

    tm = asyncio.run(_async_run(live_server.base_url))
    assert tm.notes["text"] == LIVE.text
    assert LIVE.ttft <= tm.ttft < tm.total / 2 and tm.total >= LIVE.total
    assert tm.notes["first_event"] < tm.ttft


def test_timed_events_and_pairs_give_the_same_timeline(live_server) -> None:
    from streamlab.net.live import stream_timing

    tm = stream_timing(live_server.base_url, "sched")
    events = tm.notes["arrivals"]
    start = events[0].at - events[0].elapsed
    assert chat_text_timeline(events, start) == chat_text_timeline([(e.at, e.event) for e in events], start)
    with pytest.raises(TypeError, match="arrival 0 is 'x'"):
        chat_text_timeline(["x"], 0.0)


def test_responses_ttft_is_the_first_text_delta_not_the_lifecycle_events() -> None:
    from streamlab.core.metrics import responses_text_timeline
    from streamlab.core.shapes import responses_text_stream

    frames = responses_text_stream(["Hi ", "there"])
    events = [ev for f in frames for ev in SSEParser().feed(f)]
    kinds = [ev.event for ev in events]
    first_delta = kinds.index("response.output_text.delta")
    assert first_delta > 0  # response.created and friends come first
    times = [0.01 * i if i < first_delta else 0.5 + 0.1 * (i - first_delta) for i in range(len(events))]
    points = responses_text_timeline(list(zip(times, events)), 0.0)
    assert points[0] == (0.5, 3) and points[-1][1] == len("Hi there")
    tm = timing_from_arrivals("r", list(zip(times, events)), 0.0, times[-1], dialect="responses")
    assert tm.ttft == 0.5 and tm.chars == 8
    with pytest.raises(ValueError, match="dialect"):
        timing_from_arrivals("r", [], 0.0, 1.0, dialect="grpc")


# -- recorded runs ---------------------------------------------------------------------------------------


def test_save_and_load_timings_round_trip(tmp_path) -> None:
    from streamlab.core.metrics import load_timings
    from streamlab.net.live import save_timings

    sched = Schedule(0.3, 0.04, ("a", "bc", "d\u00e9f"))
    timings = [sched.timing("ideal"), Timing("late", ((0.5, 6),), 0.5), Timing("nothing", (), 0.2)]
    path = tmp_path / "run.json"
    save_timings(path, timings, schedule=sched, note="unit test")
    run = load_timings(path)
    assert run.note == "unit test" and run.schedule == sched
    assert list(run.timings) == ["ideal", "late", "nothing"]
    for tm in timings:
        got = run.timings[tm.label]
        assert got.total == pytest.approx(tm.total)
        assert [c for _, c in got.points] == [c for _, c in tm.points]
        assert [t for t, _ in got.points] == pytest.approx([t for t, _ in tm.points])


def test_load_timings_names_the_file_and_the_bad_entry(tmp_path) -> None:
    from streamlab.core.metrics import load_timings

    bad = tmp_path / "bad.json"
    bad.write_text(
        '{"timings": [{"label": "ok", "total": 1, "points": [[0.5, 3]]},'
        ' {"label": "x", "total": 1, "points": [[0.5, 3], [0.4, 5]]}]}',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"bad\.json: timings\[1\] is malformed: .*point 1"):
        load_timings(bad)
    bad.write_text("not json", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json: not a timings file"):
        load_timings(bad)


def test_the_committed_recording_tells_the_lab_story() -> None:
    from streamlab.core.harness.fixtures import data_dir
    from streamlab.core.metrics import load_timings
    from streamlab.net.live import CLIENT_LABELS

    run = load_timings(data_dir() / "timings" / "three-clients.json")
    assert list(run.timings) == list(CLIENT_LABELS) and run.schedule is not None
    streaming, buffered, plain = run.timings.values()
    sched = run.schedule
    assert streaming.chars == buffered.chars == plain.chars == len(sched.text)
    assert sched.ttft <= streaming.ttft < streaming.total / 2
    assert len(streaming.points) == len(sched.pieces)
    assert buffered.ttft >= sched.total and plain.ttft >= sched.total
    assert all(tm.total >= sched.total for tm in run.timings.values())


def test_the_recorded_run_is_found_through_the_data_set_and_its_text_round_trips() -> None:
    """core.metrics reads the data set's recordings (no clock, no socket) and writes the same text back."""
    from streamlab.core.harness.fixtures import data_dir
    from streamlab.core.metrics import load_timings, recorded_run, timings_json

    run = recorded_run()
    path = data_dir() / "timings" / "three-clients.json"
    assert run == load_timings(path)
    text = timings_json(run.timings.values(), schedule=run.schedule, note=run.note)
    assert text == path.read_text(encoding="utf-8")  # the committed file is exactly what the writer writes


def test_arrivals_out_of_order_are_refused_by_every_timeline() -> None:
    events = SSEParser().feed(b"".join(chat_text_stream(["Hel", "lo"])))
    arrivals = [(1.0 - 0.1 * i, event) for i, event in enumerate(events)]  # each earlier than the one before
    with pytest.raises(ValueError, match="arrival 1 at 0.9 comes before the previous arrival at 1.0"):
        chat_text_timeline(arrivals, 0.0)
    with pytest.raises(ValueError, match="comes before the previous arrival"):
        reasoning_timelines(arrivals, 0.0)
