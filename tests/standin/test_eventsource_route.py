"""The stand-in's EventSource route and chat page: `GET /v1/chat/stream` decided on plain values, then on the wire.

The planner tests need no socket (`streamlab.core.standin.plan` and `.eventsource`, in tests/standin/test_plan.py's
style): every event numbered with `id:`, the `retry:` hint, the key from the query or a cookie, the validation
errors, and what a reconnect's `Last-Event-ID` gets: 204 after the final event (the fix), the rest of the answer
after an event inside it, the whole answer again with `after_end=replay` (the naive server). The wire tests start
a stand-in: the chat page's files, a 204 that announces no body, and the Last-Event-ID in the records and on the
command line's request line. The recorded browser run (`data/browser/lab12.json`) is checked for its shape here;
tests/browser/test_chat_page.py compares it with a live run in Chromium.
"""

from __future__ import annotations

import json

import httpx
import pytest
from support import ASK, planned_request

from streamlab.core import shapes
from streamlab.core.sse import parse
from streamlab.core.standin.actions import Pause, Reply, Stream, Write
from streamlab.core.standin.eventsource import (
    DEFAULT_RETRY_MS,
    EVENTS_PATH,
    cookie_value,
    final_event_id,
    number_events,
    read_options,
)
from streamlab.core.standin.plan import plan
from streamlab.core.standin.profiles import get_profile
from streamlab.core.standin.request import Request
from streamlab.core.standin.room import Options, Room
from streamlab.core.standin.scenarios import MARKDOWN_TOKENS, markdown_pieces, scenario
from streamlab.core.standin.script import Episode, KeepAlive, Send, Wait, paced
from streamlab.net.standin.server import StandIn

CHAT = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"], model="m")  # role, 3 deltas, finish, usage, [DONE]


def get(
    target: str,
    headers: dict[str, str] | None = None,
    *,
    key: str | None = None,
    method: str = "GET",
    body: bytes = b"",
) -> Request:
    """A parsed request (a GET unless told) as the handler would build it."""
    return planned_request(method, target, body, key=key, headers=headers)


def room(**options) -> Room:
    return Room({"m": Episode(paced(CHAT, first=0.3, gap=0.05))}, options=Options(**options))


def written(action: object) -> bytes:
    assert isinstance(action, Stream), action
    return b"".join(a.data for a in action.actions if isinstance(a, Write))


def events(action: object) -> list:
    evs, truncated = parse(written(action))
    assert not truncated
    return evs


def stream_url(**query: str) -> str:
    return EVENTS_PATH + "?" + "&".join(f"{k}={v}" for k, v in {"model": "m", **query}.items())


# -- numbering, pure -----------------------------------------------------------------------------------------


def test_number_events_numbers_each_event_and_keeps_every_pause_and_chunk():
    steps = [Wait(0.3), Send(CHAT[0] + CHAT[1]), KeepAlive(), Wait(0.05), Send(CHAT[2])]
    numbered = number_events(steps)
    assert [type(s) for s in numbered] == [Wait, Send, KeepAlive, Wait, Send]
    assert numbered[0] == Wait(0.3) and numbered[2] == KeepAlive() and numbered[3] == Wait(0.05)
    evs, _ = parse(b"".join(s.data for s in numbered if isinstance(s, (Send, KeepAlive))))
    assert [e.last_event_id for e in evs] == ["1", "2", "3"]
    assert [e.data for e in evs] == [e.data for e in parse(CHAT[0] + CHAT[1] + CHAT[2])[0]]


def test_a_frame_written_a_few_bytes_at_a_time_is_numbered_where_it_starts():
    (splits,) = scenario("splits")["splits"]
    numbered = number_events(splits.steps)
    assert len(numbered) == len(splits.steps)  # every 5-byte write and every pause is still there
    payload = b"".join(s.data for s in numbered if isinstance(s, Send))
    evs, truncated = parse(payload)
    assert not truncated and [e.last_event_id for e in evs] == [str(i) for i in range(1, len(evs) + 1)]
    assert [e.data for e in evs] == [e.data for e in parse(splits.payload)[0]]  # the comment got no id
    assert final_event_id(payload) == str(len(evs))


def test_read_options_and_the_cookie():
    assert read_options({}) == read_options({"after_end": ["stop"]})
    assert read_options({}).retry_ms == DEFAULT_RETRY_MS
    assert read_options({"retry": ["300"], "after_end": ["replay"]}).retry_ms == 300
    for bad in ("x", "-1", "1e3", "3.5", "\u0663", "99999999999"):
        assert read_options({"retry": [bad]})[0] == "retry", bad
    assert read_options({"after_end": ["again"]})[0] == "after_end"
    assert cookie_value("a=1; streamlab_key=ada; b=2", "streamlab_key") == "ada"
    assert cookie_value('streamlab_key="eve"', "streamlab_key") == "eve"
    assert cookie_value("xstreamlab_key=ada", "streamlab_key") is None and cookie_value(None, "k") is None


# -- the route, pure -----------------------------------------------------------------------------------------------


def test_the_route_plays_the_episode_numbered_after_a_retry_hint_without_the_usage_nobody_asked_for():
    decision = plan(room(), get(stream_url(key="ada", retry="300")))
    action = decision.action
    assert isinstance(action, Stream) and isinstance(action.actions[0], Write)
    assert action.actions[0].data == b"retry: 300\n\n" and isinstance(action.actions[1], Pause)
    evs = events(action)
    assert [e.last_event_id for e in evs] == [str(i) for i in range(1, 7)]
    assert evs[-1].data == "[DONE]" and not any('"usage": {' in e.data or '"usage":{' in e.data for e in evs)
    assert (decision.note.learner, decision.note.model, decision.note.episode) == ("ada", "m", 0)
    scripted = plan(room(usage="scripted"), get(stream_url(key="ada")))
    assert len(events(scripted.action)) == 7  # the scripted usage chunk too, numbered
    assert written(scripted.action).startswith(b"retry: %d\n\n" % DEFAULT_RETRY_MS)


def test_the_key_comes_from_the_query_then_the_cookie_then_the_authorization_header():
    r = room()
    assert plan(r, get(stream_url(key="q"), {"Cookie": "streamlab_key=c"}, key="h")).note.learner == "q"
    assert plan(r, get(stream_url(), {"Cookie": "streamlab_key=c"}, key="h")).note.learner == "c"
    assert plan(r, get(stream_url(), key="h")).note.learner == "h"
    assert plan(r, get(stream_url())).note.learner == ""


@pytest.mark.parametrize(
    ("target", "status", "param", "code"),
    [
        (f"{EVENTS_PATH}?key=ada", 400, "model", None),
        (stream_url(retry="soon"), 400, "retry", "invalid_value"),
        (stream_url(after_end="twice"), 400, "after_end", "invalid_value"),
        (stream_url(model="nope"), 404, "model", "model_not_found"),
    ],
)
def test_a_wrong_query_gets_the_openai_shaped_error(target, status, param, code):
    reply = plan(room(), get(target)).action
    assert isinstance(reply, Reply) and reply.status == status
    assert set(reply.body) == {"error"} and reply.body["error"]["param"] == param
    assert reply.body["error"]["code"] == code and reply.body["error"]["type"] == "invalid_request_error"


def test_only_get_is_allowed_and_a_full_room_refuses_a_new_key_from_the_query():
    post = plan(room(), get(stream_url(key="ada"), method="POST")).action
    assert isinstance(post, Reply) and post.status == 405 and ("Allow", "GET") in post.headers
    full = Room({"m": Episode([Send(f) for f in CHAT])}, max_learners=1)
    for _ in range(2):  # ada comes back: a place no newcomer can take
        plan(full, get(stream_url(key="ada")))
    refused = plan(full, get(stream_url(key="bob"))).action
    assert isinstance(refused, Reply) and refused.status == 429 and refused.body["error"]["code"] == "room_full"


def test_a_reconnect_after_the_final_event_gets_204_and_generates_nothing():
    r = room()
    final = final_event_id(written(plan(r, get(stream_url(key="ada"))).action))
    assert final == "6"  # role, three deltas, finish, [DONE]: the usage chunk is not sent unasked
    decision = plan(r, get(stream_url(key="ada"), {"Last-Event-ID": final}))
    assert decision.action == Reply(204, b"") and decision.note.episode == 0
    assert r.requests_for("m", "ada") == 1  # a 204 plays no episode


def test_a_reconnect_inside_the_answer_gets_the_rest_of_the_same_answer():
    r = room()
    plan(r, get(stream_url(key="ada")))
    decision = plan(r, get(stream_url(key="ada"), {"Last-Event-ID": "2"}))
    evs = events(decision.action)
    assert [e.last_event_id for e in evs] == ["3", "4", "5", "6"] and decision.note.resumed_after == "2"
    assert written(decision.action).startswith(b"retry: ")  # the hint again, for a client that lost it
    assert r.requests_for("m", "ada") == 1
    unknown = plan(r, get(stream_url(key="ada"), {"Last-Event-ID": "x"}))  # not this answer's: the next one
    assert len(events(unknown.action)) == 6 and r.requests_for("m", "ada") == 2


def test_the_naive_server_replays_the_whole_answer_after_its_end():
    r = room()
    final = final_event_id(written(plan(r, get(stream_url(key="ada", after_end="replay"))).action))
    again = plan(r, get(stream_url(key="ada", after_end="replay"), {"Last-Event-ID": final}))
    assert len(events(again.action)) == 6 and again.note.resumed_after is None
    assert r.requests_for("m", "ada") == 2  # generated (and billed) twice


def test_the_route_shares_the_learners_episodes_with_post_and_answers_an_error_episode_as_is():
    r = Room(scenario("all"))
    body = json.dumps({"model": "scheduled", "stream": True, "messages": ASK}).encode()
    post = plan(r, get("/v1/chat/completions", key="ada", method="POST", body=body))
    assert isinstance(post.action, Stream)
    reconnect = plan(r, get(f"{EVENTS_PATH}?model=scheduled&key=ada", {"Last-Event-ID": "23"}))
    assert reconnect.action == Reply(204, b"")  # the answer POST gave ada, numbered: 23 events
    flaky = plan(r, get(f"{EVENTS_PATH}?model=flaky&key=ada")).action
    assert isinstance(flaky, Reply) and flaky.status == 429 and ("retry-after-ms", "200") in flaky.headers


def test_a_profile_room_answers_the_route_in_its_own_way_numbered():
    r = Room({}, options=Options(profile=get_profile("ollama")))
    decision = plan(r, get(f"{EVENTS_PATH}?model=anything&key=ada"))
    evs = events(decision.action)
    assert evs and [e.last_event_id for e in evs] == [str(i) for i in range(1, len(evs) + 1)]
    assert plan(r, get(f"{EVENTS_PATH}?model=anything&key=ada", {"Last-Event-ID": str(len(evs))})).action.status == 204


def test_the_markdown_scenario_is_a_long_fast_answer():
    pieces = markdown_pieces()
    assert len(pieces) == MARKDOWN_TOKENS and all(p.strip() for p in pieces)
    text = "".join(pieces)
    assert text.startswith("## Step 1\n\n") and "**small pieces**" in text and "```js\n" in text
    (ep,) = scenario("markdown")["markdown"]
    waits = [s.seconds for s in ep.steps if isinstance(s, Wait)]
    assert max(waits) <= 0.05 and waits.count(0.002) == MARKDOWN_TOKENS - 1


# -- on the wire -------------------------------------------------------------------------------------------------------


def test_the_stand_in_serves_its_chat_page_beside_the_api():
    with StandIn(scenario("all")) as server, httpx.Client(timeout=10) as client:
        page = client.get(server.chat_url)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'src="chat/chat.js"' in page.text and "script-src 'self'" in page.headers["content-security-policy"]
        script = client.get(server.chat_url + "/chat.js")
        assert script.status_code == 200 and "TextDecoderStream" in script.text and "AbortController" in script.text
        assert client.head(server.chat_url + "/chat.css").headers["content-length"] != "0"
        assert client.get(server.chat_url + "/nothing").status_code == 404
        assert client.post(server.chat_url).status_code == 405
        assert server.records() == []  # the page's files are nobody's API call


def test_a_204_announces_no_body_and_the_last_event_id_reaches_the_record_and_the_console_line():
    from streamlab.tools.cli.standin import _line

    with StandIn(scenario("all")) as server, httpx.Client(timeout=10) as client:
        url = server.base_url.removesuffix("/v1") + f"{EVENTS_PATH}?model=scheduled&key=ada&retry=300"
        first = client.get(url)
        assert first.status_code == 200 and first.text.startswith("retry: 300\n\nid: 1\n")
        assert first.headers["content-type"] == "text/event-stream; charset=utf-8"
        done = client.get(url, headers={"Last-Event-ID": "23"})
        assert done.status_code == 204 and done.content == b""
        assert "content-length" not in done.headers and "content-type" not in done.headers
        assert server.wait_idle()
        records = server.records(learner="ada")
    assert [(r.status, r.last_event_id, str(r.ending)) for r in records] == [
        (200, None, "complete"),
        (204, "23", "complete"),
    ]
    assert _line(records[1]).endswith(" last-event-id=23") and "last-event-id" not in _line(records[0])
    assert "key=ada" in _line(records[0])  # a key in the URL is in every log line: the lab's point


# -- the recorded browser run ------------------------------------------------------------------------------------------


def test_the_recorded_browser_run_has_its_facts_and_timings_and_says_which_chromium():
    from streamlab.net.browser.run import SCHEMA, load_recorded
    from streamlab.net.browser.scenarios import SCENARIOS

    run = load_recorded()
    assert run["schema"] == SCHEMA and set(run) == {"schema", "about", "facts", "timings"}
    about = run["about"]
    assert about["chromium"][:1].isdigit() and about["recorded_at"][:4].isdigit() and about["headless"] is True
    assert list(run["facts"]) == list(run["timings"]) == list(SCENARIOS)
    facts = run["facts"]
    assert facts["fetch"]["shows_the_whole_answer"] and facts["fetch"]["marks_in_order"]
    naive, stop = facts["eventsource"]["naive"], facts["eventsource"]["stop"]
    assert (naive["requests"], naive["generations"], naive["last_event_id_sent"]) == (2, 2, [None, "23"])
    assert (stop["statuses"], stop["ready_state_after_204"], stop["generations"]) == ([200, 204], 2, 1)
    assert facts["eventsource"]["request_headers"]["authorization"] is None
    assert facts["hidden_tab"]["endings"] == ["client_gone", "complete"]
    assert facts["stop_button"]["abort"]["server_ending"] == "client_gone"
    assert facts["stop_button"]["naive"]["server_ending"] == "complete"
    assert all(facts["render"][k] for k in facts["render"] if k != "tokens")
    fetch = run["timings"]["fetch"]
    assert fetch["first_byte_ms"] <= fetch["first_event_ms"] <= fetch["first_visible_text_ms"] <= fetch["done_ms"]
