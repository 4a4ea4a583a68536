"""Resuming streams: the sequence cursor (pure), background-mode resume and Last-Event-ID, against the stand-in.

The property tests cut the stand-in's connection at seeded random byte offsets, deliberately including
offsets inside a multi-byte UTF-8 character and between the CR and the LF of a CRLF, and prove that the
resumed stream hands every event to the caller exactly once, in order, and rebuilds the uncut text.
"""

from __future__ import annotations

import json
import random

import httpx
import pytest

from streamlab.core.accumulate import ResponsesAccumulator
from streamlab.core.endings import Ending, Outcome
from streamlab.core.errors import EventTooLarge, IdleTimeout, ResumeError, SequenceError
from streamlab.core.resume import SequenceCursor, is_content_event, is_keepalive, sequence_verdict
from streamlab.core.shapes import (
    chat_text_stream,
    responses_frames,
    responses_text_events,
    responses_text_stream,
    sse_comment,
    sse_frame,
)
from streamlab.core.sse import SSEEvent, SSEParser, parse
from streamlab.core.standin.script import Cut, Episode, KeepAlive, Send, StoredResponse, Wait
from streamlab.net.client import stream_responses
from streamlab.net.resume import LastEventIdStream, ResumableResponseStream
from streamlab.net.standin.server import StandIn

PIECES = ["Grüße ", "aus ", "Köln ", "— ", "日本語 ", "🙂 ", "ça ", "va"]
TEXT = "".join(PIECES)
RID = "resp_cut"


@pytest.fixture(scope="module")
def server():
    # The client is under test here, not the stand-in's checks: requests name only the model, and every
    # scripted byte is played (the stand-in's defaults are the real API's: messages required, usage on request).
    with StandIn({"unused": Episode([])}, usage="scripted", require_input=False) as s:
        yield s


@pytest.fixture(scope="module")
def http():
    """One httpx client for the many short connections (making one costs tens of milliseconds)."""
    with httpx.Client(trust_env=False) as client:
        yield client


# -- the cursor, pure -----------------------------------------------------------------------------------


def test_cursor_counts_from_zero_and_moves_one_at_a_time() -> None:
    c = SequenceCursor()
    assert c.value is None and c.expected == 0
    for n in range(5):
        assert c.admit({"type": "x", "sequence_number": n})
    assert c.value == 4 and c.expected == 5


def test_keepalives_never_move_the_cursor() -> None:
    c = SequenceCursor(3)
    assert not c.admit({"type": "keepalive"})
    assert not c.admit({"type": "response.output_text.delta"})  # no number: nothing to check or move
    assert c.value == 3 and c.expected == 4


def test_numbered_keepalives_are_followed_but_do_not_move_the_cursor() -> None:
    """The live API numbers keep-alives: the next event follows them, yet resuming starts after content."""
    c = SequenceCursor(3)
    assert not c.admit({"type": "keepalive", "sequence_number": 4})
    assert c.value == 3 and c.expected == 5  # starting_after stays 3; the next event must be 5
    assert c.admit({"type": "response.output_text.delta", "sequence_number": 5})
    assert c.value == 5
    assert not c.admit({"type": "keepalive", "sequence_number": 4})  # repeated after a reconnect: ignored
    with pytest.raises(SequenceError) as info:  # a keep-alive that jumps ahead reveals lost events
        c.admit({"type": "keepalive", "sequence_number": 9})
    assert info.value.kind == "skipped" and info.value.expected == 6
    assert is_keepalive({"type": "keepalive"}) and not is_keepalive({"type": "a", "sequence_number": 0})


@pytest.mark.parametrize(("got", "kind"), [(2, "replayed"), (1, "replayed"), (4, "skipped"), (10, "skipped")])
def test_replay_and_skip_are_errors_that_say_what_happened(got: int, kind: str) -> None:
    c = SequenceCursor(2)
    with pytest.raises(SequenceError) as info:
        c.admit({"type": "response.output_text.delta", "sequence_number": got})
    err = info.value
    assert err.kind == kind and err.expected == 3 and err.got == got
    assert f"sequence_number {got}" in str(err) and "expected 3" in str(err)
    assert c.value == 2  # the cursor did not move


def test_admit_data_treats_non_json_as_not_content() -> None:
    c = SequenceCursor()
    assert c.admit_data("[DONE]") == (False, None)
    assert c.admit_data('{"type": "a", "sequence_number": 0}') == (True, {"type": "a", "sequence_number": 0})


def _repeating_keepalive_stream() -> list[dict]:
    """A stream whose numbered keep-alive comes again with the same number, as a resumed stream may send it."""
    events = responses_text_events(PIECES)
    events[3:3] = [{"type": "keepalive"}]
    numbered = [{**e, "sequence_number": n} for n, e in enumerate(events)]
    numbered.insert(5, dict(numbered[3]))  # keep-alive number 3 again, after content 4
    return numbered


def test_one_sequence_rule_for_the_cursor_and_the_accumulator() -> None:
    """Issue 35: the accumulator rejected a keep-alive that repeats a number, which the cursor accepts; inside the
    relay and the gateway the accumulator then stopped following the content. One rule now: both accept it."""
    events = _repeating_keepalive_stream()
    cursor, acc = SequenceCursor(), ResponsesAccumulator()
    for payload in events:
        cursor.admit(payload)
        acc.feed(SSEEvent(data=json.dumps(payload)))
    assert acc.text == {(0, 0): TEXT} and acc.outcome() is Outcome.COMPLETE
    assert cursor.value == acc.last_sequence_number == events[-1]["sequence_number"]
    wrong = {"type": "response.output_text.delta", "sequence_number": 5, "delta": "x"}  # content 5 again
    errors = []
    acc = ResponsesAccumulator()
    for feed in (SequenceCursor().admit, lambda p, acc=acc: acc.feed(SSEEvent(data=json.dumps(p)))):
        for payload in events[:7]:  # up to number 5, the repeated keep-alive included
            feed(payload)
        with pytest.raises(SequenceError) as info:  # content: both readers refuse a replay, in the same terms
            feed(wrong)
        errors.append((info.value.kind, info.value.expected, info.value.got))
    assert errors[0] == errors[1] == ("replayed", 6, 5)


@pytest.mark.parametrize(
    ("last", "got", "keepalive", "contiguous", "verdict"),
    [
        (None, 0, False, False, "new"),
        (4, 5, False, True, "new"),
        (4, 9, False, False, "new"),  # an accumulator fed without keep-alives sees gaps: not a loss to it
        (4, 9, False, True, "skipped"),  # the cursor sees every event: 5-8 were lost
        (4, 9, True, True, "skipped"),  # a keep-alive that jumps ahead reveals the loss too
        (4, 4, True, False, "repeat"),
        (4, 2, True, True, "repeat"),
        (4, 4, False, False, "replayed"),
        (4, 2, False, True, "replayed"),  # every number up to 4 was handled: 2 is a replay
        (4, 2, False, False, "went backwards"),
    ],
)
def test_the_sequence_rule(last: int | None, got: int, keepalive: bool, contiguous: bool, verdict: str) -> None:
    assert sequence_verdict(last, got, keepalive=keepalive, contiguous=contiguous) == verdict


def test_is_content_event() -> None:
    assert is_content_event(SSEEvent("message", '{"type": "response.output_text.delta"}'))
    assert not is_content_event(SSEEvent("message", '{"type": "keepalive"}'))
    assert not is_content_event(SSEEvent("keepalive", "{}"))
    assert is_content_event(SSEEvent("message", "[DONE]"))


# -- background mode against the stand-in ---------------------------------------------------------------


def _crlf(frames: list[bytes]) -> list[bytes]:
    return [f.replace(b"\n", b"\r\n") for f in frames]


def _events_completed(prefix: bytes) -> int:
    """How many events a client has fully received after these bytes (only used to place later cuts)."""
    p = SSEParser()
    return len(p.feed(prefix))


def _plan_cuts(rng: random.Random, frames: list[bytes], category: str, n_cuts: int, start: int = 0) -> list[int]:
    """Absolute byte offsets of `n_cuts` cuts after `start`, each inside the part the next connection sends."""
    full = b"".join(frames)
    ends = [sum(len(f) for f in frames[: i + 1]) for i in range(len(frames))]
    if category == "utf8":  # the cut leaves the lead byte(s) of a character on one side, the rest on the other
        wanted = [p for p in range(1, len(full)) if 0x80 <= full[p] <= 0xBF]
    elif category == "crlf":
        wanted = [p for p in range(1, len(full)) if full[p - 1] == 0x0D and full[p] == 0x0A]
    else:
        wanted = list(range(1, len(full)))
    cuts: list[int] = []
    for _ in range(n_cuts):
        options = [p for p in wanted if start < p < len(full)]
        if not options:
            break
        cut = rng.choice(options)
        cuts.append(cut)
        done = _events_completed(full[:cut])
        start = ends[done - 1] if done else 0
    return cuts


def _background(frames: list[bytes], cuts: list[int]) -> tuple[dict, dict]:
    """Script: the POST stream is cut at cuts[0]; GET connection k is cut cuts[k] bytes after its resume point."""
    full = b"".join(frames)
    ends = [0] + [sum(len(f) for f in frames[: i + 1]) for i in range(len(frames))]
    relative: list[int | None] = []
    for prev, cut in zip(cuts, cuts[1:]):
        done = _events_completed(full[:prev])
        relative.append(cut - ends[done])
    steps = [Send(full[: cuts[0]]), Cut()] if cuts else [Send(full)]
    stored = StoredResponse.from_frames(frames, cuts=tuple(relative))
    return {"bg": [Episode(steps)]}, {RID: stored}


def test_resume_survives_100_seeded_random_cuts(server: StandIn, http: httpx.Client) -> None:
    clean = responses_text_stream(PIECES, response_id=RID)
    seen = {"utf8": 0, "crlf": 0, "random": 0}
    for trial in range(100):
        rng = random.Random(trial)
        crlf = trial % 2 == 1
        frames = _crlf(clean) if crlf else clean
        # CRLF trials cycle through the three kinds of cut; LF trials have no CR to cut after
        category = ("utf8", "crlf", "random")[(trial // 2) % 3] if crlf else ("utf8", "random")[(trial // 2) % 2]
        # resuming needs the response id, which arrives in the first event: cut after it
        cuts = _plan_cuts(rng, frames, category, n_cuts=rng.randint(1, 3), start=len(frames[0]) - 1)
        seen[category] += len(cuts)
        scripts, stored = _background(frames, cuts)
        server.set_scripts(scripts, stored=stored)
        server.reset()

        acc = ResponsesAccumulator()
        handled: list[int] = []
        with ResumableResponseStream(
            server.base_url, {"model": "bg", "background": True}, max_reconnects=10, read_timeout=5, client=http
        ) as stream:
            for timed in stream:
                handled.append(json.loads(timed.data)["sequence_number"])
                acc.feed(timed.event)

        want_events, _ = parse(b"".join(clean))
        where = f"trial {trial}: cuts {cuts} ({category}, {'CRLF' if crlf else 'LF'})"
        assert handled == list(range(len(want_events))), where  # every event once, in order
        assert acc.text[(0, 0)] == TEXT, where
        assert acc.outcome() is Outcome.COMPLETE and acc.disagreements() == [], where
        assert stream.terminal == "response.completed", where
        assert server.wait_idle(), where
        records = server.records()
        assert records[0].ending == "cut" and records[0].method == "POST", where
        gets = [r for r in records if r.method == "GET"]
        assert [r.resumed_after for r in gets] == [c.resumed_after for c in stream.connections[1:]], where
        # every connection but the last was cut; the last ended cleanly, or was cut after the terminal event
        # was already complete (say between its final CR and LF), in which case there is nothing to resume
        assert all(r.ending == "cut" for r in records[:-1]), where
        last_events, _ = parse(records[-1].written)
        assert json.loads(last_events[-1].data)["type"] == "response.completed", where
        assert len(records) == len(stream.connections), where
    assert min(seen.values()) >= 25, seen  # every kind of cut really happened, many times
    print(f"cuts made: {seen}")


def test_keepalives_during_resume_are_skipped_and_do_not_move_the_cursor(server: StandIn) -> None:
    clean = responses_text_stream(["one ", "two"], response_id=RID)
    ka = sse_frame(json.dumps({"type": "keepalive"}), event="keepalive")
    frames = [clean[0], ka, sse_comment(), clean[1], ka] + clean[2:5] + [ka] + clean[5:]
    full = b"".join(frames)
    cut = len(b"".join(frames[:3])) + 5  # after a keep-alive, inside event 1
    stored = StoredResponse.from_frames(frames, cuts=())
    server.set_scripts({"bg": [Episode([Send(full[:cut]), Cut()])]}, stored={RID: stored})
    server.reset()
    with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}) as stream:
        seqs = [json.loads(t.data)["sequence_number"] for t in stream]
    assert seqs == list(range(len(clean)))
    assert stream.connections[1].resumed_after == "0"  # the keep-alive did not move the cursor
    assert sum(c.keepalives for c in stream.connections) >= 2


def test_numbered_keepalives_as_the_live_api_sends_them(server: StandIn) -> None:
    """Keep-alives numbered in sequence (as the live API does): the stream resumes after the last content
    event, the repeated keep-alive is ignored, and no event is lost or handled twice."""
    events = responses_text_events(["one ", "two ", "three"], response_id=RID)
    events[3:3] = [{"type": "keepalive"}]  # numbered like every other event by responses_frames
    events[6:6] = [{"type": "keepalive"}, {"type": "keepalive"}]
    frames = responses_frames(events)
    full = b"".join(frames)
    cut = len(b"".join(frames[:8]))  # right after the two keep-alives, on an event boundary
    stored = StoredResponse.from_frames(frames, cuts=(5,))  # the first GET also dies inside its first event
    server.set_scripts({"bg": [Episode([Send(full[:cut]), Cut()])]}, stored={RID: stored})
    server.reset()
    acc = ResponsesAccumulator()
    with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}) as stream:
        for timed in stream:
            acc.feed(timed.event)
    content = [n for n, e in enumerate(events) if e["type"] != "keepalive"]
    assert stream.cursor.value == content[-1]
    # events 0-7 arrived (the last content event is 5; 6 and 7 are keep-alives): both GETs resume after 5
    assert [c.resumed_after for c in stream.connections[1:]] == ["5", "5"]
    assert acc.outcome() is Outcome.COMPLETE and acc.text[(0, 0)] == "one two three" and not acc.disagreements()


def test_a_server_that_replays_is_caught(server: StandIn) -> None:
    clean = responses_text_stream(["one ", "two"], response_id=RID)
    # a buggy server: its bookkeeping numbers frames 0, 1, 2, 3..., but the frame it files as 3 is event 2 again
    replaying = StoredResponse(tuple(enumerate(clean[:3] + clean[2:])))
    server.set_scripts({"bg": [Episode([Send(b"".join(clean[:3])), Cut()])]}, stored={RID: replaying})
    server.reset()
    got: list[int] = []
    with pytest.raises(SequenceError) as info:
        with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}) as stream:
            for t in stream:
                got.append(json.loads(t.data)["sequence_number"])
    assert got == [0, 1, 2] and info.value.kind == "replayed"


def test_a_connection_ended_by_a_sequence_error_records_the_ending_not_a_class_name(server: StandIn) -> None:
    clean = responses_text_stream(["one ", "two"], response_id=RID)
    server.set_scripts({"bg": [Episode([Send(b"".join(clean[:2] + clean[3:]))])]})  # event 2 never sent
    server.reset()
    with pytest.raises(SequenceError):
        with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}) as stream:
            for _ in stream:
                pass
    (conn,) = stream.connections
    assert conn.end_reason is Ending.CANCELLED and conn.error.startswith("SequenceError: ")  # we hung up


def test_an_event_too_large_ends_a_resumable_stream_without_reconnecting(server: StandIn) -> None:
    clean = responses_text_stream(["one ", "two"], response_id=RID)
    huge = b"data: " + b"x" * 5000 + b"\n\n"
    server.set_scripts(
        {"bg": [Episode([Send(b"".join(clean[:3]) + huge)])]}, stored={RID: StoredResponse.from_frames(clean)}
    )
    server.reset()
    got = []
    with pytest.raises(EventTooLarge) as info:
        with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}, max_line_bytes=1000) as s:
            for t in s:
                got.append(json.loads(t.data)["sequence_number"])
    assert got == [0, 1, 2] and info.value.limit_error.limit == "max_line_bytes"
    (conn,) = s.connections
    assert conn.end_reason is Ending.LIMIT_EXCEEDED and len(server.records()) == 1


def test_last_event_id_stream_records_endings_and_applies_limits(server: StandIn) -> None:
    frames = [b"id: 1\ndata: a\n\n", b"data: " + b"y" * 3000 + b"\n\n"]
    server.set_scripts({"ids": Episode([Send(f) for f in frames])})
    server.reset()
    with pytest.raises(EventTooLarge):
        with LastEventIdStream(
            server.url("chat/completions"), {"model": "ids", "stream": True}, max_event_bytes=1000
        ) as stream:
            for _ in stream:
                pass
    assert [c.end_reason for c in stream.connections] == [Ending.LIMIT_EXCEEDED] and stream.last_event_id == "1"


def test_a_server_that_skips_is_caught(server: StandIn) -> None:
    clean = responses_text_stream(["one ", "two"], response_id=RID)
    skipping = StoredResponse.from_frames(clean[:3] + clean[4:])
    server.set_scripts({"bg": [Episode([Send(b"".join(clean[:3])), Cut()])]}, stored={RID: skipping})
    server.reset()
    with pytest.raises(SequenceError) as info:
        with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}) as stream:
            for _ in stream:
                pass
    assert info.value.kind == "skipped" and info.value.expected == 3 and info.value.got == 4


def test_no_response_id_means_nothing_to_resume(server: StandIn) -> None:
    clean = responses_text_stream(["one"], response_id=RID)
    server.set_scripts({"bg": [Episode([Send(clean[0][:20]), Cut()])]})
    server.reset()
    with pytest.raises(ResumeError, match="before response.created"):
        with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}) as stream:
            for _ in stream:
                pass
    assert len(server.records()) == 1  # it did not guess a GET


def test_reconnects_are_bounded(server: StandIn) -> None:
    clean = responses_text_stream(["one"], response_id=RID)
    stored = StoredResponse.from_frames(clean, cuts=(3,) * 10)  # every GET dies inside its first event
    server.set_scripts({"bg": [Episode([Send(b"".join(clean[:2])), Cut()])]}, stored={RID: stored})
    server.reset()
    got = []
    with pytest.raises(ResumeError, match="max_reconnects=3") as info:
        with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}, max_reconnects=3) as s:
            for t in s:
                got.append(json.loads(t.data)["sequence_number"])
    assert got == [0, 1]
    assert len(info.value.connections) == 5 and "connection 5" in str(info.value)
    assert len([r for r in server.records() if r.method == "GET"]) == 4


def test_an_unknown_response_on_reconnect_is_a_clear_error(server: StandIn) -> None:
    clean = responses_text_stream(["one"], response_id="resp_gone")
    server.set_scripts({"bg": [Episode([Send(b"".join(clean[:2])), Cut()])]})
    server.reset()
    with pytest.raises(ResumeError, match="HTTP 404"):
        with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}) as stream:
            for _ in stream:
                pass


def test_resume_an_existing_response_by_id(server: StandIn) -> None:
    clean = responses_text_stream(["one ", "two"], response_id=RID)
    server.set_scripts({"unused": Episode([])}, stored={RID: StoredResponse.from_frames(clean)})
    server.reset()
    with ResumableResponseStream(server.base_url, response_id=RID, starting_after=4) as stream:
        seqs = [json.loads(t.data)["sequence_number"] for t in stream]
    assert seqs == list(range(5, len(clean)))
    assert server.records()[0].resumed_after == "4"


def test_idle_timeout_counts_keepalive_events_as_no_content(server: StandIn) -> None:
    clean = responses_text_stream(["one"], response_id=RID)
    ka = sse_frame(json.dumps({"type": "keepalive"}), event="keepalive")
    steps = [Send(clean[0])] + [s for _ in range(40) for s in (Wait(0.02), Send(ka), KeepAlive())]
    server.set_scripts({"stall": [Episode(steps)]})
    server.reset()
    with pytest.raises(IdleTimeout):
        with stream_responses(
            server.base_url, {"model": "stall"}, idle_timeout=0.2, is_content=is_content_event, read_timeout=5
        ) as s:
            for _ in s:
                pass
    assert s.end_reason == "idle_timeout" and len(s.events) > 2  # bytes and keep-alive events kept arriving


# -- Last-Event-ID -------------------------------------------------------------------------------------


def _with_ids(frames: list[bytes]) -> list[bytes]:
    return [b"id: %d\n" % i + f for i, f in enumerate(frames)]


def test_last_event_id_resume_survives_50_seeded_random_cuts(server: StandIn, http: httpx.Client) -> None:
    clean = _with_ids(chat_text_stream(PIECES))
    want, _ = parse(b"".join(clean))
    for trial in range(50):
        rng = random.Random(1000 + trial)
        crlf = trial % 2 == 1
        frames = _crlf(clean) if crlf else clean
        full = b"".join(frames)
        category = ("utf8", "crlf" if crlf else "random", "random")[trial % 3]
        cuts = _plan_cuts(rng, frames, category, n_cuts=1 + trial % 3)
        episodes = [Episode([Send(full[:c]), Cut()]) for c in cuts] + [Episode([Send(full)])]
        server.set_scripts({"ids": episodes})
        server.reset()
        waits: list[float] = []
        stream = LastEventIdStream(
            server.url("chat/completions"),
            {"model": "ids", "stream": True},
            sleep=waits.append,
            read_timeout=5,
            client=http,
        )
        with stream:
            got = [t.event for t in stream]
        where = f"trial {trial}: cuts {cuts} ({category})"
        assert [(e.data, e.last_event_id) for e in got] == [(e.data, e.last_event_id) for e in want], where
        sent = [r.headers.get("last-event-id") for r in server.records()]
        assert sent[0] is None and len(sent) == len(stream.connections) <= len(cuts) + 1, where
        assert sent[1:] == [c.resumed_after for c in stream.connections[1:]], where
        assert stream.finished and stream.waits == [0.0] * (len(sent) - 1) and waits == [], where


def test_last_event_id_honours_the_retry_field(server: StandIn) -> None:
    frames = [b"retry: 1500\n\n"] + _with_ids(chat_text_stream(["a", "b"]))
    full = b"".join(frames)
    cut = full.index(b"id: 2")
    server.set_scripts({"ids": [Episode([Send(full[:cut]), Cut()]), Episode([Send(full)])]})
    server.reset()
    waits: list[float] = []
    with LastEventIdStream(
        server.url("chat/completions"), {"model": "ids", "stream": True}, sleep=waits.append, max_retry_ms=1000
    ) as stream:
        datas = [t.data for t in stream]
    assert waits == [1.0]  # 1500 ms asked, capped at max_retry_ms
    assert stream.retry_ms == 1500 and len(datas) == len(frames) - 1
    assert server.records()[1].headers.get("last-event-id") == "1"


def test_events_without_ids_inherit_the_persisted_last_event_id(server: StandIn) -> None:
    frames = [b"id: 7\ndata: a\n\n", b"data: b\n\n", b"data: c\n\n"]
    full = b"".join(frames)
    server.set_scripts(
        {
            "ids": [
                Episode([Send(full[: len(frames[0]) + 3]), Cut()]),
                Episode([Send(frames[1]), Send(frames[2]), Send(b"data: [DONE]\n\n")]),
            ]
        }
    )
    server.reset()
    with LastEventIdStream(server.url("chat/completions"), {"model": "ids", "stream": True}) as stream:
        got = [(t.data, t.id) for t in stream]
    assert got == [("a", "7"), ("b", "7"), ("c", "7"), ("[DONE]", "7")]


def test_unnumbered_events_are_passed_on_not_dropped(server: StandIn) -> None:
    clean = responses_text_stream(["one"], response_id=RID)
    odd = [sse_frame("not json"), sse_frame(json.dumps({"type": "response.something_new"}))]
    frames = clean[:2] + odd + clean[2:]
    server.set_scripts({"bg": [Episode([Send(b"".join(frames))])]})
    server.reset()
    with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}) as stream:
        datas = [t.data for t in stream]
    assert datas[2:4] == ["not json", '{"type": "response.something_new"}']
    assert len(datas) == len(frames) and stream.cursor.value == len(clean) - 1
