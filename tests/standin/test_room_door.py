"""A room with a door (issue 34): only who joined has a place, a key or a row; floods take nothing from anyone.

Every test runs a real stand-in on loopback and speaks real HTTP to it through httpx. Two client addresses
(127.0.0.1 and 127.0.0.2, both loopback on Linux) stand for two learners' laptops.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from streamlab.core.standin.board import Board, Visit
from streamlab.core.standin.door import DoorLimits
from streamlab.core.standin.script import Episode, ErrorEpisode, Send
from streamlab.net.progress import RoomLink
from streamlab.net.standin.dashboard import FEEDS_PER_ADDRESS, RESERVED_FEEDS
from streamlab.net.standin.server import StandIn

pytestmark = pytest.mark.net

CODE = "xk7-m2q"
CHAT = {"model": "twice", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
SCRIPT = {
    "twice": [
        ErrorEpisode(429, {"error": {"message": "slow down", "type": "requests"}}),
        Episode([Send(b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'), Send(b"data: [DONE]\n\n")]),
    ]
}


def _client(address: str = "127.0.0.1") -> httpx.Client:
    return httpx.Client(timeout=10, transport=httpx.HTTPTransport(local_address=address))


def _join(client: httpx.Client, server: StandIn, name: str, code: str = CODE) -> httpx.Response:
    return client.post(server.url("join"), json={"name": name, "code": code})


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _verdict(client: httpx.Client, server: StandIn, key: str, exercise: str = "01.1", verdict: str = "passed"):
    return client.post(server.url("progress"), json={"exercise": exercise, "verdict": verdict}, headers=_bearer(key))


def _snapshot(server: StandIn) -> dict:
    """The dashboard's state as a page that connects now gets it: the feed's first event, over HTTP."""
    with (
        _client() as client,
        client.stream("GET", server.projector_url.replace("/dashboard?", "/dashboard/events?")) as r,
    ):
        lines = r.iter_lines()
        for line in lines:
            if line.startswith("data: "):
                return json.loads(line[6:])
    raise AssertionError("no snapshot")


def test_a_request_without_a_key_the_room_issued_gets_a_401_that_says_how_to_join():
    with StandIn(SCRIPT, join_code=CODE) as server, _client() as client:
        for headers in ({}, _bearer("ada"), _bearer("ada.0123456789abcdef01234567")):
            reply = client.post(server.url("chat/completions"), json=CHAT, headers=headers)
            assert reply.status_code == 401, reply.text
            error = reply.json()["error"]
            assert error["code"] == "not_joined"
            assert "join_room(" in error["message"] and "/v1/join" in error["message"]
        assert server.wait_idle() and server.requests_for("twice") == 0


def test_one_learner_cannot_post_verdicts_for_or_reset_another():  # N4: the name was the key
    with StandIn(SCRIPT, join_code=CODE) as server, _client() as ada, _client("127.0.0.2") as mallory:
        key = _join(ada, server, "ada").json()["api_key"]
        assert key.startswith("ada.") and key != "ada"
        assert ada.post(server.url("chat/completions"), json=CHAT, headers=_bearer(key)).status_code == 429
        assert _verdict(ada, server, key).status_code == 200
        # mallory knows the code, and ada's name: she can neither become ada nor act as her
        taken = _join(mallory, server, "ada")
        assert taken.status_code == 409 and taken.json()["error"]["code"] == "name_taken"
        assert _verdict(mallory, server, "ada", verdict="not yet").status_code == 401
        assert mallory.post(server.url("reset"), headers=_bearer("ada")).status_code == 401
        # ada's next request plays her second episode: nobody reset her
        assert ada.post(server.url("chat/completions"), json=CHAT, headers=_bearer(key)).status_code == 200
        assert server.wait_idle()
        rows = _snapshot(server)["rows"]
        assert [(r["learner"], r["verdicts"]) for r in rows] == [("ada", {"01.1": "passed"})]
        # ada again from her own laptop (a restarted kernel) gets her key back
        assert _join(ada, server, "ada").json()["api_key"] == key


def test_a_flood_of_made_up_keys_takes_no_place_and_erases_no_row():  # N1, N2
    with StandIn(SCRIPT, join_code=CODE, max_learners=3) as server, _client() as client:
        keys = [_join(client, server, name).json()["api_key"] for name in ("ada", "grace")]
        for key in keys:
            assert _verdict(client, server, key).status_code == 200
        for n in range(200):
            made_up = f"learner-{n}"
            for _ in range(2):  # twice: once made a "returning learner" that held its place for good
                assert client.get(server.url("responses/resp_x"), headers=_bearer(made_up)).status_code == 401
            assert _verdict(client, server, made_up).status_code == 401
        assert _join(client, server, "linus").status_code == 200  # the one place left is still there
        assert server.wait_idle()
        assert sorted(r["learner"] for r in _snapshot(server)["rows"]) == ["ada", "grace", "linus"]


def test_a_recently_active_learner_is_never_dropped_for_a_newcomer():
    limits = DoorLimits(recent=0.5)
    with StandIn(SCRIPT, join_code=CODE, max_learners=2, door_limits=limits) as server, _client() as client:
        ada = _join(client, server, "ada").json()["api_key"]
        grace = _join(client, server, "grace").json()["api_key"]
        full = _join(client, server, "linus")
        assert full.status_code == 429 and full.json()["error"]["code"] == "room_full"
        time.sleep(0.6)  # both idle past `recent`, then ada is active again
        assert _verdict(client, server, ada).status_code == 200
        assert _join(client, server, "linus").status_code == 200  # takes grace's place: she was idle
        assert _verdict(client, server, ada).status_code == 200
        assert _verdict(client, server, grace).status_code == 401  # her key left with her place


def test_per_address_limits_on_names_join_attempts_and_verdicts():
    limits = DoorLimits(names_per_address=2, join_burst=6, verdict_burst=3, verdict_rate=0.01)
    with (
        StandIn(SCRIPT, join_code=CODE, door_limits=limits) as server,
        _client() as one,
        _client("127.0.0.2") as other,
    ):
        assert _join(one, server, "a").status_code == _join(one, server, "b").status_code == 200
        too_many = _join(one, server, "c")
        assert too_many.status_code == 429 and too_many.json()["error"]["code"] == "too_many_names"
        key = _join(other, server, "c").json()["api_key"]  # another laptop still joins
        codes = [_join(other, server, "d", code="aaa-aaa").status_code for _ in range(5)]
        assert codes == [403] * 5  # a wrong code is refused, and counts
        limited = _join(other, server, "d")
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1  # guessing stops here
        assert [_verdict(other, server, key).status_code for _ in range(4)] == [200, 200, 200, 429]


def test_verdicts_on_made_up_exercises_are_refused_and_never_fill_the_grid():  # N3
    with StandIn(SCRIPT, max_learners=10) as server, _client() as client:
        for n in range(250):
            reply = _verdict(client, server, "ada", exercise=f"{50 + n % 50:02d}.{n // 50}")
            assert reply.status_code == 400 and reply.json()["error"]["code"] == "unknown_exercise"
        assert _verdict(client, server, "ada", exercise="13.3").status_code == 200
        assert server.wait_idle()
        rows = _snapshot(server)["rows"]
        assert [r["verdicts"] for r in rows if r["verdicts"]] == [{"13.3": "passed"}]


def test_an_open_room_refuses_a_verdict_from_a_new_key_once_full():  # N2 where any key names a learner
    with StandIn(SCRIPT, max_learners=2) as server, _client() as client:
        for key in ("ada", "grace"):
            for _ in range(2):
                client.post(server.url("chat/completions"), json=CHAT, headers=_bearer(key))
        refused = _verdict(client, server, "mallory")
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "room_full"


def _hold_feed(client: httpx.Client, url: str) -> httpx.Response:
    reply = client.send(client.build_request("GET", url), stream=True)
    return reply


def test_the_projector_always_gets_its_feed_and_one_address_cannot_take_them_all():  # N8
    with (
        StandIn(SCRIPT, join_code=CODE, dashboard_max_feeds=3) as server,
        _client() as one,
        _client("127.0.0.2") as other,
        _client("127.0.0.3") as third,
    ):
        events = server.dashboard_url + "/events"
        held = [_hold_feed(one, events) for _ in range(FEEDS_PER_ADDRESS + 1)]
        try:
            assert [r.status_code for r in held] == [200] * FEEDS_PER_ADDRESS + [503]
            held.append(_hold_feed(other, events))  # the last unkeyed place
            held.append(_hold_feed(third, events))
            assert [r.status_code for r in held[-2:]] == [200, 503]
            projector = server.projector_url.replace("/dashboard?", "/dashboard/events?")
            keyed = [_hold_feed(third, projector) for _ in range(RESERVED_FEEDS)]
            held += keyed
            assert [r.status_code for r in keyed] == [200] * RESERVED_FEEDS
        finally:
            for reply in held:
                reply.close()


def test_control_and_bidi_characters_are_shown_escaped_on_the_dashboard():  # N21
    rlo = "\u202e"
    with StandIn({f"evil{rlo}gpj.exe": SCRIPT["twice"]}) as server, _client() as client:
        body = {**CHAT, "model": f"evil{rlo}gpj.exe"}
        assert client.post(server.url("chat/completions"), json=body, headers=_bearer("\x1b\x1bxy")).status_code
        assert server.wait_idle()
        (row,) = _snapshot(server)["rows"]
        assert rlo not in row["model"] and row["model"] == "evil\\u202egpj.exe"
        assert "\x1b" not in row["learner"] and row["learner"].startswith("\\x1b\\x1b\u2026#")  # an ESC, escaped


def test_a_snapshot_is_made_once_for_every_page_that_asks_before_the_next_event():  # N11
    board = Board(salt=b"s" * 16, epoch="e", max_learners=20_000)
    for n in range(2_000):
        board.observe(Visit(key=f"k{n}", request=n, finished=True, model="m", status=200))
    first = board.since(None)[0]
    assert all(board.since(None)[0] is first for _ in range(32))  # 32 reconnecting viewers, one snapshot
    assert len(json.loads(first.data)["rows"]) == 2_000
    board.observe(Visit(key="k0", request=5_000, finished=True, model="m", status=200))
    assert board.since(None)[0] is not first


def test_join_room_with_the_code_joins_and_its_key_is_the_learners_api_key():
    with StandIn(SCRIPT, join_code=CODE) as server:
        root = server.base_url.removesuffix("/v1")
        link = RoomLink(root, "ada", code=CODE.upper())
        wrong = RoomLink(root, "bob", code="nope-no", timeout=1)
        try:
            key = link.api_key
            assert key.startswith("ada.")
            assert link.send("01.2", "passed") and link.flush(10) and link.sent == 1, link
            with _client() as client:
                assert client.post(server.url("chat/completions"), json=CHAT, headers=_bearer(key)).status_code == 429
            with pytest.raises(RuntimeError, match="join code"):
                wrong.api_key  # noqa: B018 - the property is the thing under test
            assert server.wait_idle()
            rows = _snapshot(server)["rows"]
            assert [(r["learner"], r["requests"], r["verdicts"]) for r in rows] == [("ada", 1, {"01.2": "passed"})]
        finally:
            link.close()
            wrong.close()


def test_the_eventsource_route_takes_the_issued_key_and_an_open_room_has_nothing_to_join():
    with StandIn(SCRIPT, join_code=CODE) as server, _client() as client:
        key = _join(client, server, "ada").json()["api_key"]
        assert client.get(server.url("chat/stream"), params={"model": "twice", "key": "ada"}).status_code == 401
        assert client.get(server.url("chat/stream"), params={"model": "twice", "key": key}).status_code == 429
        assert server.wait_idle() and server.requests_for("twice", learner="ada") == 1
    with StandIn(SCRIPT) as server, _client() as client:
        reply = _join(client, server, "ada")
        assert reply.status_code == 404 and reply.json()["error"]["code"] == "no_join_code"


def test_a_link_joins_again_when_the_room_was_restarted():
    """A restarted stand-in has a new secret: the learner's old key gets a 401, and the link joins again."""
    first = StandIn(SCRIPT, join_code=CODE).start()
    port = first.port
    link = RoomLink(f"http://127.0.0.1:{port}", "ada", code=CODE)
    try:
        old = link.api_key
        first.stop()
        with StandIn(SCRIPT, join_code=CODE, port=port) as second:
            assert link.send("01.1", "passed") and link.flush(10) and link.sent == 1, link
            assert link.api_key != old and second.wait_idle()
            assert [(r.learner, r.status) for r in second.records()] == [("", 401), ("ada", 200), ("ada", 200)]
    finally:
        first.stop()
        link.close()


def test_the_command_line_makes_a_join_code_when_others_can_reach_it():
    from streamlab.tools.cli.standin import join_code_for

    made = join_code_for("0.0.0.0", None)
    assert made is not None and len(made) == 7 and made[3] == "-" and made != join_code_for("0.0.0.0", None)
    assert join_code_for("192.168.1.23", None) is not None
    assert join_code_for("127.0.0.1", None) is None and join_code_for("localhost", None) is None
    assert join_code_for("127.0.0.1", " abc-def ") == "abc-def" and join_code_for("0.0.0.0", "None") is None


def test_requests_refused_before_the_planner_make_no_row_in_a_room():
    """A body too large (or a head refused) is answered before anyone asks who sent it: in a room it must not
    make a row under the key it carried, or a flood of them would push the learners off the dashboard."""
    with StandIn(SCRIPT, join_code=CODE, max_learners=3, max_body_bytes=1000) as server, _client() as client:
        key = _join(client, server, "ada").json()["api_key"]
        assert _verdict(client, server, key).status_code == 200
        for n in range(20):
            reply = client.post(server.url("chat/completions"), content=b"x" * 2000, headers=_bearer(f"m{n}"))
            assert reply.status_code == 413
        assert server.wait_idle()
        assert [r["learner"] for r in _snapshot(server)["rows"]] == ["ada"]
