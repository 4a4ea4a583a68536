"""The stand-in's sans-IO core: request heads, routing, validation, per-learner state, resume points, actions.

No socket here: every decision the stand-in takes is checked on plain values (`streamlab.core.standin.plan`), the way
h11 tests its state machine without a network.
"""

from __future__ import annotations

import pytest
from support import ASK
from support import planned_request as request

from streamlab.core import shapes
from streamlab.core.endings import Ending
from streamlab.core.standin.actions import Close, Pause, Reply, Stream, Write, reply_ending, stream_ending
from streamlab.core.standin.plan import ROUTES, derive_body, plan, steps_to_actions, stream_cancelled, strip_usage
from streamlab.core.standin.request import ReadBody, admit, head_end, parse_head, request_line_reply
from streamlab.core.standin.room import Options, Room, learner_of
from streamlab.core.standin.scenarios import SCENARIOS, scenario
from streamlab.core.standin.script import (
    Cut,
    End,
    Episode,
    KeepAlive,
    Send,
    Stall,
    StoredResponse,
    Wait,
    error_episode,
    paced,
)

CHAT = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"], model="m")
RESP = shapes.responses_text_stream(["alpha ", "beta ", "gamma ", "delta"], model="r")
HI = [{"role": "user", "content": "hi"}]
"""The planner checks requests as the real API does (`messages` / `input` required), so requests here carry them."""


def chat(room: Room, body: object, **kw) -> object:
    return plan(room, request("POST", "/v1/chat/completions", body, **kw)).action


def written(stream: object) -> bytes:
    assert isinstance(stream, Stream), stream
    return b"".join(a.data for a in stream.actions if isinstance(a, Write))


# -- request heads ---------------------------------------------------------------------------------


def test_parse_head_reads_the_request_line_and_lower_cases_header_names():
    head = parse_head(b"POST /v1/x?stream=true HTTP/1.1\r\nHost: a\r\nX-Thing:  v \r\nx-thing: w\r\n\r\n")
    assert not isinstance(head, Reply)
    assert (head.method, head.target, head.version) == ("POST", "/v1/x?stream=true", "HTTP/1.1")
    assert head.get("X-THING") == "v" and head.get_all("x-thing") == ["v", "w"]
    assert head.path == "/v1/x" and head.query == {"stream": ["true"]} and head.keep_alive


@pytest.mark.parametrize(
    ("line", "status", "fragment"),
    [
        (b"GET /", 400, "HTTP/0.9"),
        (b"this is not http", 400, "malformed request line"),
        (b"GET / HTTP/2.0", 505, "not supported"),
        (b"GET / HTTQ/1.1", 400, "HTTP version"),
        (b"G(T / HTTP/1.1", 400, "method"),
    ],
)
def test_a_wrong_request_line_is_refused_as_soon_as_it_arrives(line, status, fragment):
    reply = request_line_reply(line + b"\r\n")
    assert isinstance(reply, Reply) and reply.status == status and reply.close
    assert fragment in reply.body["error"]["message"]
    assert request_line_reply(b"POST /v1/chat/completions HTTP/1.1\r\n") is None


def test_malformed_header_lines_are_refused():
    for raw in (
        b"GET / HTTP/1.1\r\nno colon\r\n\r\n",
        b"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
    ):
        reply = parse_head(raw)
        assert isinstance(reply, Reply) and reply.status == 400, raw


def test_head_end_accepts_crlf_and_lf_and_can_resume_a_search():
    assert head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nrest") == len(b"GET / HTTP/1.1\r\nA: b\r\n\r\n")
    assert head_end(b"GET / HTTP/1.1\nA: b\n\nrest") == len(b"GET / HTTP/1.1\nA: b\n\n")
    assert head_end(b"GET / HTTP/1.1\r\nA: b\r\n") is None
    buf = b"GET / HTTP/1.1\r\nA: b\r\n\r\n"
    assert head_end(buf, len(buf) - 4 - 3) == len(buf)


def _head(*headers: str, version: str = "HTTP/1.1"):
    head = parse_head(("\r\n".join([f"POST /v1/chat/completions {version}", *headers]) + "\r\n\r\n").encode())
    assert not isinstance(head, Reply)
    return head


def test_admit_checks_the_size_before_100_continue():
    too_big = admit(_head("Content-Length: 2000", "Expect: 100-continue"), max_body_bytes=1000)
    assert isinstance(too_big, Reply) and too_big.status == 413 and too_big.close and too_big.drain
    assert admit(_head("Content-Length: 20", "Expect: 100-continue"), max_body_bytes=1000) == ReadBody(20, True)
    assert admit(_head("Content-Length: 20"), max_body_bytes=1000) == ReadBody(20, False)
    assert admit(_head(), max_body_bytes=1000) == ReadBody(0, False)


@pytest.mark.parametrize(
    ("headers", "status", "fragment"),
    [
        (("Content-Length: 5", "Content-Length: 7"), 400, "conflicting Content-Length"),
        (("Content-Length: 5, 7",), 400, "conflicting Content-Length"),
        (("Content-Length: -3",), 400, "invalid Content-Length"),
        (("Content-Length: \u0663",), 400, "invalid Content-Length"),
        (("Transfer-Encoding: chunked",), 411, "chunked"),
        (("Content-Length: 5", "Expect: magic"), 417, "Expect"),
    ],
)
def test_admit_refuses_ambiguous_bodies(headers, status, fragment):
    reply = admit(_head(*headers), max_body_bytes=1000)
    assert isinstance(reply, Reply) and reply.status == status and fragment in reply.body["error"]["message"]


def test_identical_repeated_content_length_is_one_length():
    assert admit(_head("Content-Length: 5", "Content-Length: 5"), max_body_bytes=1000) == ReadBody(5)


# -- routing -----------------------------------------------------------------------------------------


def test_routes_come_from_one_table_with_one_405_and_one_404():
    room = Room({"m": Episode([Send(f) for f in CHAT])})
    assert {(r.method, r.path) for r in ROUTES} >= {("POST", "/v1/chat/completions"), ("GET", "/v1/responses/{id}")}
    reply = plan(room, request("DELETE", "/v1/responses/resp_x")).action
    assert reply.status == 405 and ("Allow", "GET") in reply.headers and "use GET" in reply.body["error"]["message"]
    reply = plan(room, request("GET", "/v1/responses")).action
    assert reply.status == 405 and "use POST" in reply.body["error"]["message"]
    reply = plan(room, request("GET", "/v1/models")).action
    assert reply.status == 404 and reply.body["error"]["code"] == "unknown_url"
    trailing = request("POST", "/v1/chat/completions/", {"model": "m", "messages": HI, "stream": True})
    assert isinstance(plan(room, trailing).action, Stream)  # a trailing slash is the same path


# -- validation like the real API ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "headers", "fragment", "param"),
    [
        (b"{", {}, "not valid JSON", None),
        (b"[" * 100_000, {}, "nested too deeply", None),
        (b"1" * 5000, {}, "not valid JSON", None),
        (b"[1]", {}, "must be a JSON object", None),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', {}, "model", "model"),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}',
            {"Content-Type": "text/plain"},
            "Content-Type",
            None,
        ),
    ],
)
def test_bad_bodies_get_a_400_not_an_exception(body, headers, fragment, param):
    reply = chat(Room({"m": Episode()}), body, headers=headers)
    assert isinstance(reply, Reply) and reply.status == 400
    assert fragment in reply.body["error"]["message"] and reply.body["error"]["param"] == param


def test_content_type_with_parameters_is_json():
    reply = chat(
        Room({"m": Episode([Send(CHAT[0])])}),
        {"model": "m", "messages": HI, "stream": True},
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert isinstance(reply, Stream)


def test_require_input_refuses_chat_without_messages_and_responses_without_input():
    room = Room({"m": Episode([Send(f) for f in CHAT])})  # the default, as the real API checks
    reply = chat(room, {"model": "m"})
    assert reply.status == 400 and reply.body["error"]["param"] == "messages"
    assert reply.body["error"]["code"] == "missing_required_parameter"
    assert chat(room, {"model": "m", "messages": "hi"}).body["error"]["code"] == "invalid_type"
    reply = plan(room, request("POST", "/v1/responses", {"model": "m"})).action
    assert reply.status == 400 and reply.body["error"]["param"] == "input"
    assert isinstance(chat(room, {"model": "m", "messages": ASK, "stream": True}), Stream)
    assert room.requests_for("m") == 1  # refused requests do not use up an episode
    lenient = Room({"m": Episode([Send(f) for f in CHAT])}, options=Options(require_input=False))
    assert isinstance(chat(lenient, {"model": "m", "stream": True}), Stream)


# -- the usage chunk -----------------------------------------------------------------------------------------


def test_usage_chunk_only_when_include_usage_is_set():
    room = Room({"m": Episode([Send(f) for f in CHAT])})  # the default, as the real API sends it
    without = written(chat(room, {"model": "m", "messages": HI, "stream": True}))
    assert without == b"".join(CHAT[:5] + CHAT[6:])  # CHAT[5] is the usage-only chunk
    asked = {"model": "m", "messages": HI, "stream": True, "stream_options": {"include_usage": True}}
    assert written(chat(room, asked)) == b"".join(CHAT)
    scripted = Room({"m": Episode([Send(f) for f in CHAT])}, options=Options(usage="scripted"))
    assert written(chat(scripted, {"model": "m", "messages": HI, "stream": True})) == b"".join(CHAT)  # every byte


def test_responses_usage_stays_on_the_terminal_event():
    room = Room({"r": Episode([Send(f) for f in RESP])})
    stream = plan(room, request("POST", "/v1/responses", {"model": "r", "input": "hi", "stream": True})).action
    assert written(stream) == b"".join(RESP)


def test_strip_usage_keeps_other_frames_of_the_same_send_and_drops_empty_sends():
    steps = strip_usage([Send(b"".join(CHAT[4:])), Send(CHAT[5]), Wait(0.1), Send(CHAT[0])])
    assert steps == (Send(CHAT[4] + CHAT[6]), Wait(0.1), Send(CHAT[0]))


# -- per-learner state ---------------------------------------------------------------------------------------


def test_each_learner_gets_their_own_episodes():
    room = Room(scenario("flaky"))
    body = {"model": "flaky", "messages": HI, "stream": True}
    assert chat(room, body, key="ada").status == 429
    assert chat(room, body, key="bob").status == 429  # bob's first request, though ada already had hers
    assert isinstance(chat(room, body, key="ada"), Stream)
    assert chat(room, body).status == 429  # the anonymous learner is a learner too
    assert room.requests_for("flaky") == 4 and room.requests_for("flaky", "ada") == 2


def test_learner_of_reads_the_bearer_token():
    assert learner_of(request("GET", "/", key="ada").head) == "ada"
    assert learner_of(request("GET", "/").head) == ""
    assert learner_of(request("GET", "/", headers={"Authorization": "Basic abc"}).head) == "Basic abc"


def test_one_learners_cancel_never_touches_another():
    room = Room(scenario("background"))
    ada = plan(room, request("POST", "/v1/responses", {"model": "bg", "input": "hi", "stream": True}, key="ada")).action
    bob = plan(room, request("POST", "/v1/responses", {"model": "bg", "input": "hi", "stream": True}, key="bob")).action
    assert ada.cancel_key == ("ada", "resp_demo") and bob.cancel_key == ("bob", "resp_demo")
    reply = plan(room, request("POST", "/v1/responses/resp_demo/cancel", key="ada")).action
    assert reply.status == 200 and reply.body["status"] == "cancelled"
    assert stream_cancelled(room, ada) and not stream_cancelled(room, bob)
    ada_get = plan(room, request("GET", "/v1/responses/resp_demo", key="ada")).action
    bob_get = plan(room, request("GET", "/v1/responses/resp_demo", key="bob")).action
    assert ada_get.body["status"] == "cancelled" and bob_get.body["status"] == "completed"


def test_reset_starts_only_the_caller_over():
    room = Room(scenario("flaky"))
    body = {"model": "flaky", "messages": HI, "stream": True}
    chat(room, body, key="ada")
    chat(room, body, key="bob")
    reply = plan(room, request("POST", "/v1/reset", key="ada")).action
    assert reply.status == 200 and reply.body["learner"] == "ada"
    assert chat(room, body, key="ada").status == 429  # ada starts over
    assert isinstance(chat(room, body, key="bob"), Stream)  # bob does not
    room.reset()
    assert chat(room, body, key="bob").status == 429


def test_the_room_forgets_the_least_recent_learner_past_its_bound():
    room = Room(scenario("flaky"), max_learners=2)
    for key in ("a", "b", "c"):
        chat(room, {"model": "flaky", "messages": HI}, key=key)
    assert list(room.learners) == ["b", "c"]


def test_a_new_create_request_makes_its_stored_response_fresh():
    room = Room(scenario("background"))
    create = request("POST", "/v1/responses", {"model": "bg", "input": "hi", "stream": True}, key="ada")
    plan(room, create)
    plan(room, request("POST", "/v1/responses/resp_demo/cancel", key="ada"))
    stream = plan(room, create).action
    assert not stream_cancelled(room, stream)


# -- resume points and cuts --------------------------------------------------------------------------------------


def test_last_event_id_skips_delivered_bytes_and_their_waits_but_not_stalls():
    frames = [shapes.sse_frame(f"part {i}", id=str(i)) for i in range(1, 4)]
    payload = b"".join(frames)
    steps = [Wait(0.3), Send(payload[:7]), Stall(0.2), Send(payload[7:30]), Wait(0.3), Send(payload[30:])]
    room = Room({"m": Episode(steps)})
    decision = plan(
        room,
        request(
            "POST",
            "/v1/chat/completions",
            {"model": "m", "messages": HI, "stream": True},
            headers={"Last-Event-ID": "2"},
        ),
    )
    assert decision.note.resumed_after == "2"
    assert written(decision.action) == frames[2]
    assert [a for a in decision.action.actions if isinstance(a, Pause)] == [Pause(0.2)]


def test_stored_response_fetches_are_counted_per_learner_and_cut_where_told():
    stored = StoredResponse.from_frames(RESP, cuts=(10, None))
    room = Room({}, stored={"resp_x": stored})
    url = "/v1/responses/resp_x?stream=true"
    first = plan(room, request("GET", url, key="ada")).action
    assert written(first) == RESP[0][:10] and first.actions[-1] == Close()
    assert written(plan(room, request("GET", url, key="bob")).action) == RESP[0][:10]  # bob's first GET
    again = plan(room, request("GET", url + "&starting_after=3", key="ada"))
    assert written(again.action) == b"".join(RESP[4:]) and again.note.resumed_after == "3"
    bad = plan(room, request("GET", url + "&starting_after=x")).action
    assert bad.status == 400 and bad.body["error"]["param"] == "starting_after"


# -- steps -> actions, endings, bodies -------------------------------------------------------------------------------


def test_steps_to_actions():
    steps = [Wait(0.1), Send(b"ab"), Send(b""), KeepAlive(), Stall(), Cut(reset=True), Send(b"never")]
    assert steps_to_actions(steps) == (Pause(0.1), Write(b"ab"), Write(b": ping\n\n"), Pause(None), Close(True))
    assert steps_to_actions([Send(b"abc"), End(), Send(b"x")], skip=1) == (Write(b"bc", frame=False),)


def test_endings():
    assert reply_ending(200) is Ending.COMPLETE and reply_ending(429) is Ending.HTTP_ERROR
    assert stream_ending(cut=True, cancelled=True, stopping=True) is Ending.STOPPED
    assert stream_ending(cut=True, cancelled=True, stopping=False) is Ending.CUT
    assert stream_ending(cut=False, cancelled=True, stopping=False) is Ending.CANCELLED
    assert stream_ending(cut=False, cancelled=False, stopping=False) is Ending.COMPLETE


def test_error_episode_reply_carries_its_wait_and_headers():
    room = Room({"m": error_episode(503, "busy", retry_after=2, wait=0.25)})
    reply = chat(room, {"model": "m", "messages": HI})
    assert reply == Reply(
        503,
        {"error": {"message": "busy", "type": "server_error", "param": None, "code": None}},
        (("Retry-After", "2"),),
        wait=0.25,
    )


def test_derive_body_rebuilds_tool_calls_through_the_accumulator():
    frames = shapes.chat_tool_call_stream([("call_1", "get_weather", ['{"city"', ': "Paris"}'])])
    body = derive_body(b"".join(frames), "chat", "m")
    assert body is not None
    (call,) = body["choices"][0]["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert body["choices"][0]["finish_reason"] == "tool_calls"


def test_derive_body_of_a_stream_cut_before_its_end():
    resp = derive_body(b"".join(RESP[:3]), "responses", "r")
    assert resp is not None and resp["status"] == "in_progress"
    assert derive_body(b": nothing\n\n", "responses", "r") is None


def test_every_named_scenario_builds():
    assert set(scenario("all")) == {m for name in SCENARIOS for m in scenario(name)}
    with pytest.raises(ValueError, match="unknown scenario"):
        scenario("nope")


def test_a_scripts_episode_is_turned_into_actions_once_and_forgotten_with_the_script():
    room = Room({"m": Episode(paced(CHAT, gap=0.01))})
    ask = {"model": "m", "messages": HI, "stream": True}
    first, second = chat(room, ask, key="ada"), chat(room, ask, key="bob")
    assert first.actions is second.actions and written(first) == b"".join(CHAT[:5] + CHAT[6:])
    asked = chat(room, {**ask, "stream_options": {"include_usage": True}})
    assert written(asked) == b"".join(CHAT)  # with and without the usage chunk: two different plays
    resumed = chat(room, ask, headers={"Last-Event-ID": "x"})
    assert written(resumed) == written(first)  # an unknown id resumes nothing
    assert len(room.played) == 2  # one per (episode, usage chunk or not); the resumed play is not kept
    room.set_scripts({"m": Episode([Send(CHAT[0])])})
    assert not room.played and written(chat(room, ask)) == CHAT[0]
