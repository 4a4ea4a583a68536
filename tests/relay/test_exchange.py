"""The exchange machine on a fake clock: fail-over, commit, the end of the answer, resume (no sockets).

`streamlab.core.relay.exchange.Exchange` decides each request of the relay and the gateway; here it is fed events
by hand and its actions are read, so a read timeout of 60 s passes in no time and nothing waits.
"""

from __future__ import annotations

import json

import pytest

from streamlab.core import shapes
from streamlab.core.endings import Ending
from streamlab.core.gateway.breaker import Health
from streamlab.core.relay import exchange as ex
from streamlab.core.relay.exchange import Exchange, Failure
from streamlab.core.relay.stream import RelayedStream
from streamlab.core.sse import parse

CHAT = shapes.chat_text_stream(["Hel", "lo"])


def machine(dialect: str = "chat", *, upstreams=("a", "b"), hold=True, **kw) -> Exchange:
    def new() -> RelayedStream:
        return RelayedStream(dialect=dialect, model="m", started=0.0)

    kw.setdefault("keepalive", 15.0)
    kw.setdefault("read_timeout", 60.0)
    return Exchange(upstreams=upstreams, stream=new(), new_stream=new, hold=hold, **kw)


def kinds(actions) -> list[str]:
    return [type(a).__name__ for a in actions]


def body_of(actions) -> bytes:
    return b"".join(a.data for a in actions if isinstance(a, ex.Send))


def test_a_failure_before_the_first_event_fails_over_and_the_client_sees_only_the_backup():
    m = machine()
    assert m.start(0.0) == [ex.Connect("a")]
    assert m.stream_head(200, {}, 0.1) == []  # held: nothing goes out
    assert m.chunk(CHAT[0][:10], 0.2) == []  # half a first event: still held
    actions = m.upstream_end(Ending.BROKEN, "reset by the upstream", 0.3)
    assert kinds(actions) == ["Close", "Record", "Connect"] and actions[-1] == ex.Connect("b")
    assert actions[1].result.ending is Ending.BROKEN  # the breaker of "a" hears the break
    assert m.stream_head(200, {"x-request-id": "r1"}, 0.4) == []
    actions = m.chunk(b"".join(CHAT[:2]), 0.5)  # the first event is complete: commit
    assert kinds(actions) == ["Commit", "Head", "Send"] and actions[0] == ex.Commit("b")
    assert actions[1] == ex.Head({"x-request-id": "r1"}, "b")
    assert body_of(actions) == b"".join(CHAT[:2])
    rest = m.chunk(b"".join(CHAT[2:]), 0.6)
    assert kinds(rest) == ["Send", "Record", "Send", "Drain"]  # the answer is whole: the body ends at once
    assert rest[1] == ex.Record("b", Health.OK, "complete") and rest[2] == ex.Send(b"", more=False)
    assert m.done and m.answered_by == "b" and m.rs.summary()["outcome"] == "complete"
    assert [(n.upstream, n.result.value, n.move) for n in m.tried] == [
        ("a", "fault", "fail_over"),
        ("b", "ok", None),
    ]


def test_no_first_event_within_the_read_timeout_fails_over_with_keepalives_meanwhile():
    m = machine(keepalive=15.0, read_timeout=60.0)
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    assert m.wait(0.0) == 15.0
    actions = m.tick(15.0)  # nothing came: the head goes out with a keep-alive, fail-over stays allowed
    assert actions == [ex.Head({}), ex.Send(ex.KEEPALIVE)]
    assert m.tick(30.0) == [ex.Send(ex.KEEPALIVE)]
    actions = m.tick(60.0)
    assert kinds(actions) == ["Close", "Record", "Connect"]
    assert m.tried[0].ending is Ending.READ_TIMEOUT and "no first event within 60 s" in m.tried[0].detail
    m.stream_head(200, {}, 60.0)
    actions = m.chunk(b"\xef\xbb\xbf" + CHAT[0], 61.0)  # a BOM after our keep-alive would end in a field name
    assert kinds(actions) == ["Commit", "Send"]  # the head is out already
    assert body_of(actions) == CHAT[0]


def test_a_request_refused_by_every_breaker_gets_a_503_with_retry_after():
    m = machine()
    m.start(0.0)
    assert m.refused(0.0, retry_in=12.5) == [ex.Connect("b")]
    (reject,) = m.refused(0.0, retry_in=12.5)
    assert reject.status == 503 and reject.code == "upstreams_unavailable" and reject.headers["retry-after"] == "13"
    assert m.done and [n.result.value for n in m.tried] == ["refused", "refused"]


@pytest.mark.parametrize(("status", "move"), [(400, "pass_error"), (503, "fail_over")])
def test_an_error_status_is_the_requests_fault_or_worth_another_upstream(status, move):
    m = machine()
    m.start(0.0)
    failure = Failure("a", Ending.HTTP_ERROR, f"HTTP {status}", status=status, body=b'{"error": {}}')
    actions = m.failed(failure, 0.1)
    assert m.tried[0].move.value == move
    if move == "pass_error":
        assert kinds(actions) == ["Record", "Respond"] and actions[1].status == status
    else:
        assert kinds(actions) == ["Record", "Connect"]


def test_an_error_object_as_the_first_event_fails_over_while_another_upstream_is_left():
    error = shapes.sse_frame(json.dumps({"error": {"message": "overloaded", "code": "server_error"}}))
    m = machine()
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    actions = m.chunk(error, 0.1)
    assert kinds(actions) == ["Close", "Record", "Connect"]
    m.stream_head(200, {}, 0.2)
    actions = m.chunk(error, 0.3)  # the last upstream: its error is the answer, passed on as it came
    assert kinds(actions)[:3] == ["Commit", "Head", "Send"] and body_of(actions) == error


def test_the_answer_ends_promptly_after_done_however_long_the_upstream_stays_open():
    """The end-of-answer drift: the relay (one upstream, no hold) ends the body at [DONE] as the gateway does."""
    m = machine(upstreams=("relay",), hold=False, label="relay")
    m.start(0.0)
    actions = m.stream_head(200, {"x-request-id": "r"}, 0.0)
    assert kinds(actions) == ["Commit", "Head"] and actions[1].upstream is None  # no hold, no upstream label
    m.chunk(b"".join(CHAT[:-1]), 0.1)
    actions = m.chunk(CHAT[-1], 0.2)
    # no wait for the upstream's end, and no parse before the body's end: the summary catches up after it
    assert kinds(actions) == ["Send", "Send", "Settle"] and actions[1] == ex.Send(b"", more=False) and m.done
    assert m.rs.unparsed > 0
    assert kinds(m.settle(0.3)) == ["Record", "Drain"]
    summary = m.rs.summary()
    assert (summary["outcome"], summary["total_s"], summary["text_chars"], summary["marked"]) == (
        "complete",
        0.2,
        5,
        False,
    )


def test_the_summary_waits_for_its_reader_after_the_first_token_but_not_past_its_bound():
    m = machine(upstreams=("relay",), hold=False, label="relay")
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    m.chunk(CHAT[0], 0.1)
    m.chunk(CHAT[1], 0.2)  # the first token: parsed at once (its arrival is the TTFT)
    assert m.rs.unparsed == 0 and m.rs.ttft == 0.2
    m.chunk(CHAT[2], 0.3)
    assert m.rs.unparsed == 1  # after it, the bytes go out and the parse waits
    big = shapes.sse_frame(json.dumps({"choices": [{"index": 0, "delta": {"content": "x" * (5 << 20)}}]}))
    m.chunk(big, 0.4)
    assert m.rs.unparsed == 0  # past `MAX_UNPARSED_BYTES` it waits no longer


def test_the_whole_answer_held_before_the_commit_ends_at_the_commit():
    m = machine()
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    actions = m.chunk(b"".join(CHAT), 0.1)
    assert kinds(actions) == ["Commit", "Head", "Send", "Record", "Send", "Drain"] and m.done


def test_after_the_commit_a_death_is_the_marked_final_event_never_a_failover():
    m = machine()
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    m.chunk(b"".join(CHAT[:2]), 0.1)
    actions = m.tick(0.1 + 60.0)  # a stall past the read timeout, after the commit
    assert kinds(actions) == ["Record", "Send"] and actions[-1].more is False
    (event,) = parse(actions[-1].data)[0]
    assert json.loads(event.data)["error"]["code"] == "upstream_stalled"
    assert m.tried[-1].move.value == "marked_end" and "b" not in [n.upstream for n in m.tried]


def test_keepalives_after_the_commit_never_land_inside_a_line():
    m = machine(keepalive=1.0)
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    m.chunk(CHAT[0] + CHAT[1][:5], 0.0)  # committed, a line left open
    assert m.tick(1.0) == []  # mid-line: no keep-alive
    m.chunk(CHAT[1][5:], 1.5)
    assert m.tick(2.5) == [ex.Send(b": keep-alive\n\n")]


def test_the_client_leaving_before_and_after_the_commit_is_neutral_for_the_breaker():
    m = machine()
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    actions = m.client_gone(0.1)
    assert actions == [ex.Record("a", Health.NEUTRAL, "the client left before the first event")]
    assert m.done and m.status_sent == 499
    m = machine()
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    m.chunk(b"".join(CHAT[:2]), 0.1)
    actions = m.client_gone(0.2)
    assert kinds(actions) == ["Record"] and actions[0].result is Health.NEUTRAL
    assert m.rs.summary()["outcome"] == "cancelled"


def test_a_stopping_server_tries_no_other_upstream():
    m = machine()
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    actions = m.stop(0.1)
    assert kinds(actions) == ["Close", "Record", "Reject"] and actions[-1].code == "gateway_stopping"


def responses(pieces, **kw):
    return shapes.responses_text_stream(pieces, response_id="resp_1", **kw)


def test_a_cut_responses_stream_resumes_after_its_cursor_and_the_client_gets_one_answer():
    frames = responses(["a", "b", "c"])
    m = machine("responses", resumable=True, max_resumes=2)
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    sent = body_of(m.chunk(b"".join(frames[:6]), 0.1))  # created ... the second delta
    assert m.response_id == "resp_1"
    actions = m.upstream_end(Ending.BROKEN, "reset by the upstream", 0.2)
    assert kinds(actions) == ["Record", "Resume"] and actions[-1] == ex.Resume("a", "resp_1", 5)
    assert m.resumed(True, 0.3) == [] and m.resumes == 1
    actions = m.chunk(b"".join(frames[6:]), 0.4)
    sent += body_of(actions)
    assert m.done and sent == b"".join(frames)
    assert [(n.result.value, n.move.value) for n in m.tried] == [("fault", "resume")]  # one attempt, noted once
    assert m.rs.summary()["outcome"] == "complete" and m.rs.summary()["text_chars"] == 3


def test_a_resume_that_fails_ends_with_the_marked_final_event():
    frames = responses(["a", "b"])
    m = machine("responses", resumable=True, max_resumes=2)
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    m.chunk(b"".join(frames[:5]), 0.1)
    m.upstream_end(Ending.BROKEN, "reset", 0.2)
    actions = m.resumed(False, 0.3)
    assert kinds(actions) == ["Send"] and actions[0].more is False
    assert json.loads(parse(actions[0].data)[0][-1].data)["code"] == "upstream_broken"


def test_a_cut_inside_an_event_is_never_resumed():
    frames = responses(["a", "b"])
    m = machine("responses", resumable=True, max_resumes=2)
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    m.chunk(b"".join(frames[:4]) + frames[4][:12], 0.1)
    actions = m.upstream_end(Ending.BROKEN, "reset", 0.2)
    assert "Resume" not in kinds(actions) and m.tried[-1].move.value == "marked_end"


def test_a_keepalive_that_repeats_a_number_neither_stops_the_summary_nor_the_cursor():
    """The sequence-number drift: a keep-alive sent again with a number already seen (as a resumed stream does)."""
    frames = responses(["a", "b", "c"])
    again = shapes.sse_frame(json.dumps({"type": "keepalive", "sequence_number": 3}), event="keepalive")
    m = machine("responses", resumable=True, max_resumes=2)
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    m.chunk(b"".join(frames[:6]) + again + frames[6], 0.1)  # deltas "a", "b", the repeat, delta "c"
    assert m.rs.cursor == 6
    assert m.rs.summary()["problem"] == "" and m.rs.text_chars == 3
    actions = m.upstream_end(Ending.BROKEN, "reset", 0.2)
    assert actions[-1] == ex.Resume("a", "resp_1", 6)


def test_a_crash_before_the_head_releases_the_permit_and_answers_502():
    m = machine(upstreams=("a",))
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    m.chunk(b"".join(CHAT[:2]), 0.1)  # committed in the machine; the head never went out (the commit broke)
    actions = m.crashed("internal error", 0.2, head_sent=False, body_ended=False)
    assert kinds(actions) == ["Record", "Reject"] and actions[0].result is Health.NEUTRAL
    assert actions[1].status == 502 and m.tried[-1].result.value == "neutral"


def test_a_crash_mid_stream_ends_with_the_marked_final_event():
    m = machine(upstreams=("relay",), hold=False, label="relay")
    m.start(0.0)
    m.stream_head(200, {}, 0.0)
    m.chunk(CHAT[0], 0.1)
    actions = m.crashed("internal error: boom", 0.2, head_sent=True, body_ended=False)
    assert actions[-1].more is False and b"upstream_broken" in actions[-1].data
    assert m.rs.summary()["marked"] is True


def test_a_large_first_chunk_is_parsed_only_up_to_its_first_token_and_the_summary_is_the_same():
    frames = shapes.chat_text_stream([f"w{i} " for i in range(2000)])
    blob = b"".join(frames)
    rs = RelayedStream(dialect="chat", model="m")
    rs.forward(blob[:65536], 1.0)
    rs.follow()
    assert rs.ttft == 1.0 and rs.unparsed == 1 and rs.events < 40  # one 4 KiB slice: the rest waits
    rs.forward(blob[65536:], 2.0)
    whole = RelayedStream(dialect="chat", model="m")
    whole.upstream(blob, 1.0)
    assert rs.summary() == {**whole.summary(), "bytes_in": len(blob), "bytes_out": len(blob)}
    assert rs.summary()["text_chars"] == sum(len(f"w{i} ") for i in range(2000))


def test_the_summary_caught_up_in_parts_is_the_summary_caught_up_at_once():
    frames = shapes.chat_text_stream([f"w{i} " for i in range(3000)])
    rs, whole = RelayedStream(dialect="chat", model="m"), RelayedStream(dialect="chat", model="m")
    for frame in frames:
        rs.forward(frame, 1.0)
        rs.follow()
        whole.upstream(frame, 1.0)
    parts = 1
    while rs.catch_up_part(1000):
        parts += 1
    assert parts > 10 and rs.unparsed == 0 and rs.summary() == whole.summary()


def test_after_a_large_first_write_the_summary_is_still_caught_up_in_parts():
    """The rest of a 64 KiB first write (parsed only up to its first token) had made the whole body's summary
    one parse at the end, every event alive at once: a part at a time now, the same summary."""
    blob = b"".join(shapes.chat_text_stream([f"w{i} " for i in range(3000)]))
    rs = RelayedStream(dialect="chat", model="m")
    for at, start in enumerate(range(0, len(blob), 65536)):
        rs.forward(blob[start : start + 65536], 1.0 + at)
        rs.follow()
    assert rs.ttft == 1.0 and rs.unparsed == 1
    parts = 1
    while rs.catch_up_part(4096):
        parts += 1
    whole = RelayedStream(dialect="chat", model="m")
    whole.upstream(blob, 1.0)
    assert parts > 10 and rs.unparsed == 0
    assert rs.summary() == {**whole.summary(), "bytes_in": len(blob), "bytes_out": len(blob)}
