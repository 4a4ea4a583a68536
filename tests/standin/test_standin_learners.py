"""A room of learners on one stand-in: each API key has its own episodes, stored responses and cancels.

Real clients (the official SDK, httpx) against a real server on 127.0.0.1; one key per learner.
"""

from __future__ import annotations

import httpx
import openai
import pytest
from support import standin_base, streamlab_cli

from streamlab.core import shapes
from streamlab.core.endings import Ending
from streamlab.core.standin.scenarios import scenario
from streamlab.core.standin.script import Episode, paced
from streamlab.net.standin.server import StandIn

pytestmark = [pytest.mark.usefixtures("no_leaked_threads"), pytest.mark.net]

MESSAGES = [{"role": "user", "content": "hi"}]


def learner(server: StandIn, key: str) -> httpx.Client:
    return httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=10)


def test_two_learners_each_get_their_own_first_429_and_their_own_cut():
    with StandIn(scenario("all")) as server:
        for key in ("ada", "bob"):
            with openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=10) as sdk:
                with pytest.raises(openai.RateLimitError):
                    sdk.chat.completions.create(model="flaky", messages=MESSAGES, stream=True)
                text = "".join(
                    c.choices[0].delta.content or ""
                    for c in sdk.chat.completions.create(model="flaky", messages=MESSAGES, stream=True)
                    if c.choices
                )
                assert text == "Hello w\u00f6rld"
            with learner(server, key) as client:
                body = {"model": "cutoff", "messages": MESSAGES, "stream": True}
                with pytest.raises(httpx.RemoteProtocolError):
                    client.post(server.url("chat/completions"), json=body)
                assert client.post(server.url("chat/completions"), json=body).status_code == 200
        assert server.wait_idle()
        for key in ("ada", "bob"):
            outcomes = [r.ending for r in server.records(learner=key)]
            assert outcomes == [Ending.HTTP_ERROR, Ending.COMPLETE, Ending.CUT, Ending.COMPLETE], key
        assert server.requests_for("flaky", learner="ada") == 2 and server.requests_for("flaky") == 4


def test_one_learners_cancel_never_touches_another_learners_stream():
    frames = shapes.responses_text_stream([f"w{i} " for i in range(100)], model="bg", response_id="resp_long")
    with (
        StandIn({"bg": Episode(paced(frames, gap=0.01), store_as="resp_long")}) as server,
        learner(server, "ada") as ada,
        learner(server, "bob") as bob,
    ):
        body = {"model": "bg", "input": "hi", "stream": True}
        with (
            ada.stream("POST", server.url("responses"), json=body) as a,
            bob.stream("POST", server.url("responses"), json=body) as b,
        ):
            a_chunks, b_chunks = a.iter_bytes(), b.iter_bytes()
            next(a_chunks), next(b_chunks)
            cancel = ada.post(server.url("responses/resp_long/cancel"))
            assert cancel.status_code == 200 and cancel.json()["status"] == "cancelled"
            b"".join(a_chunks)
            bob_got = b"".join(b_chunks)
        assert server.wait_idle()
        by_learner = {r.learner: r for r in server.records(model="bg")}
        assert by_learner["ada"].ending is Ending.CANCELLED
        assert by_learner["bob"].ending is Ending.COMPLETE and by_learner["bob"].frames_written == len(frames)
        assert bob_got.endswith(frames[-1])
        assert ada.get(server.url("responses/resp_long")).json()["status"] == "cancelled"
        assert bob.get(server.url("responses/resp_long")).json()["status"] == "completed"


def test_post_reset_starts_only_the_caller_over_and_standin_reset_everyone():
    with StandIn(scenario("flaky")) as server, learner(server, "ada") as ada, learner(server, "bob") as bob:
        body = {"model": "flaky", "messages": MESSAGES, "stream": True}
        url = server.url("chat/completions")
        assert [ada.post(url, json=body).status_code, bob.post(url, json=body).status_code] == [429, 429]
        reset = ada.post(server.url("reset"))
        assert reset.status_code == 200 and reset.json()["learner"] == "ada"
        assert [ada.post(url, json=body).status_code, bob.post(url, json=body).status_code] == [429, 200]
        server.reset()
        assert server.records() == [] and bob.post(url, json=body).status_code == 429
        assert server.records()[0].learner == "bob"


def test_anonymous_requests_are_one_learner_apart_from_every_key():
    with StandIn(scenario("flaky")) as server, httpx.Client() as anonymous, learner(server, "ada") as ada:
        url = server.url("chat/completions")
        body = {"model": "flaky", "messages": MESSAGES, "stream": True}
        assert anonymous.post(url, json=body).status_code == 429
        assert ada.post(url, json=body).status_code == 429
        assert anonymous.post(url, json=body).status_code == 200
        assert server.records()[0].learner == ""


def test_max_learners_sets_the_rooms_places_and_a_reset_frees_one():
    # Two places: ada and bob come back, so carol is refused with the room_full 429 (not a flaky 429) and
    # neither of them is forgotten; the instructor's reset of bob gives carol his place.
    with StandIn(scenario("flaky"), max_learners=2) as server:
        body = {"model": "flaky", "messages": MESSAGES, "stream": True}
        url = server.url("chat/completions")
        with learner(server, "ada") as ada, learner(server, "bob") as bob, learner(server, "carol") as carol:
            for client in (ada, bob, ada, bob):
                client.post(url, json=body)
            refused = carol.post(url, json=body)
            assert refused.status_code == 429 and refused.json()["error"]["code"] == "room_full"
            assert "--max-learners" in refused.json()["error"]["message"]
            assert server.requests_for("flaky", learner="ada") == server.requests_for("flaky", learner="bob") == 2
            assert bob.post(server.url("reset")).status_code == 200
            first = carol.post(url, json=body)
            assert first.status_code == 429 and first.json()["error"].get("code") != "room_full"  # flaky's own
            assert server.requests_for("flaky", learner="carol") == 1


def test_max_learners_must_be_a_whole_number_of_at_least_one():
    from streamlab.tools.cli.main import build_parser

    assert build_parser().parse_args(["standin", "--max-learners", "40"]).max_learners == 40
    assert build_parser().parse_args(["standin"]).max_learners == 10_000
    for bad in ("0", "-3", "ten"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["standin", "--max-learners", bad])
    with pytest.raises(ValueError, match="max_learners must be at least 1"):
        StandIn({}, max_learners=0)


def test_the_command_lines_max_learners_reaches_the_room():
    import signal

    with streamlab_cli("standin", "--scenario", "flaky", "--port", "0", "--max-learners", "1") as proc:
        base = standin_base(proc)
        body = {"model": "flaky", "messages": MESSAGES, "stream": True}
        with httpx.Client(headers={"Authorization": "Bearer ada"}, timeout=10) as ada:
            ada.post(base + "/chat/completions", json=body)
            ada.post(base + "/chat/completions", json=body)
        with httpx.Client(headers={"Authorization": "Bearer bob"}, timeout=10) as bob:
            refused = bob.post(base + "/chat/completions", json=body)
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "room_full"
        assert "keeps 1 learner (API key) and" in refused.json()["error"]["message"]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
