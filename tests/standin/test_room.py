"""Serving a room: every lab's scenario through real clients, the --list table, and URLs a learner can use.

The scenarios are read with the official openai SDK (through `streamlab.net.sdk.read_sdk_stream`, which
names the outcome the SDK's loop hides) and with httpx, from a stand-in on 127.0.0.1. The banner that
`streamlab standin --host 0.0.0.0` prints is checked as text, with the addresses given: tests never bind
anything but loopback.
"""

from __future__ import annotations

import subprocess
import sys

import httpx
import openai
import pytest

from streamlab.core.endings import Outcome
from streamlab.core.standin.scenarios import LABS, ROOM_SCENARIOS, SCENARIOS, scenario, scenario_of
from streamlab.net.sdk import read_sdk_stream
from streamlab.net.standin.hostaddr import room_addresses, usable
from streamlab.net.standin.server import StandIn
from streamlab.tools.cli.standin import banner, room_urls

pytestmark = [pytest.mark.usefixtures("no_leaked_threads"), pytest.mark.net]

HI = [{"role": "user", "content": "hi"}]
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("get_weather", "get_time")
]


# -- the table --------------------------------------------------------------------------------------------


def test_every_scenario_has_one_model_a_route_and_labs_that_exist():
    assert [s.name for s in ROOM_SCENARIOS] == list(SCENARIOS)
    assert len({s.model for s in ROOM_SCENARIOS}) == len(ROOM_SCENARIOS)
    for s in ROOM_SCENARIOS:
        assert list(scenario(s.name)) == [s.model] and scenario_of(s.model) is s
        assert s.route in ("chat/completions", "responses") and s.labs and set(s.labs) <= set(LABS)
    assert set(scenario("all")) == {s.model for s in ROOM_SCENARIOS}
    covered = {lab for s in ROOM_SCENARIOS for lab in s.labs}
    assert covered == set(LABS), f"labs without a room scenario: {sorted(set(LABS) - covered)}"
    assert scenario_of("nobody's model") is None and scenario_of(None) is None


def test_list_says_which_lab_uses_each_scenario():
    out = subprocess.run(
        [sys.executable, "-m", "streamlab", "standin", "--list"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    for s in ROOM_SCENARIOS:
        line = next(line for line in out.splitlines() if line.startswith(s.name + " "))
        assert s.model in line and " ".join(s.labs) in line
    assert "05 cancel, retry, resume" in out and "10 a gateway" in out


# -- each scenario, through real clients ------------------------------------------------------------------------


@pytest.fixture
def room():
    with (
        StandIn(scenario("all")) as server,
        openai.OpenAI(base_url=server.base_url, api_key="ada", max_retries=0, timeout=10) as sdk,
    ):
        yield server, sdk


def chat(sdk: openai.OpenAI, model: str, **extra):
    return read_sdk_stream(sdk.chat.completions.create(model=model, messages=HI, stream=True, **extra))


@pytest.mark.parametrize(
    ("model", "outcome", "text"),
    [
        ("scheduled", Outcome.COMPLETE, "".join(f"w{i:02d} " for i in range(20))),
        ("length", Outcome.INCOMPLETE, "The answer is forty-two"),
        ("error-200", Outcome.FAILED, "Hello "),
        ("splits", Outcome.COMPLETE, "Gr\u00fc\u00dfe aus K\u00f6ln \U0001f642"),
    ],
)
def test_chat_text_scenarios_end_as_their_table_says(room, model, outcome, text):
    server, sdk = room
    result = chat(sdk, model)
    assert (result.outcome, result.text) == (outcome, text), result.explain


def test_splits_cuts_inside_characters_and_between_cr_and_lf(room):
    server, _ = room
    with (
        httpx.Client(timeout=10) as client,
        client.stream(
            "POST", server.url("chat/completions"), json={"model": "splits", "messages": HI, "stream": True}
        ) as r,
    ):
        chunks = list(r.iter_raw())
    raw = b"".join(chunks)
    assert b"\r\n\r\n" in raw and b": still there\r\n" in raw
    cuts = {len(b"".join(chunks[:i])) for i in range(1, len(chunks))}
    assert any(raw[at - 1 : at] == b"\r" and raw[at : at + 1] == b"\n" for at in cuts)  # a CR, then its LF apart
    assert any(0x80 <= raw[at] < 0xC0 for at in cuts)  # a chunk starting with a UTF-8 continuation byte


def test_tools_and_a_tool_call_cut_mid_arguments(room):
    _, sdk = room
    whole = chat(sdk, "tools", tools=TOOLS)
    assert whole.outcome is Outcome.COMPLETE and whole.finish_reason == "tool_calls"
    assert [(c.name, c.arguments, c.problem) for c in whole.tool_calls] == [
        ("get_weather", '{"location": "Paris, France"}', None),
        ("get_time", '{"city": "Oslo"}', None),
    ]
    cut = chat(sdk, "tools-cut", tools=TOOLS)
    assert cut.outcome is Outcome.TRUNCATED and "APIConnectionError" in (cut.error or "")
    assert [c.arguments for c in cut.tool_calls] == ['{"location": "Paris, France"}', '{"city":']
    assert all(c.problem for c in cut.tool_calls)  # nothing of a cut stream is safe to run


def test_flaky_and_cutoff_fail_first_for_each_learner(room):
    server, sdk = room
    for key in ("bob", "carol"):
        learner = sdk.with_options(api_key=key)  # shares the SDK's connection pool
        with pytest.raises(openai.RateLimitError):
            chat(learner, "flaky")
        assert chat(learner, "flaky").outcome is Outcome.COMPLETE
        assert chat(learner, "cutoff").outcome is Outcome.TRUNCATED
        assert chat(learner, "cutoff").text == "Hello w\u00f6rld"


def test_responses_and_a_background_stream_resumed_by_each_learner(room):
    server, sdk = room
    result = read_sdk_stream(sdk.responses.create(model="responses", input="hi", stream=True))
    assert result.outcome is Outcome.COMPLETE and result.text == "".join(f"w{i:02d} " for i in range(20))
    for key in ("dan", "erin"):  # each resumes their own copy of resp_demo
        learner = sdk.with_options(api_key=key)
        handled = []
        with pytest.raises(openai.APIConnectionError):
            for event in learner.responses.create(model="bg", input="hi", background=True, stream=True):
                handled.append(event)
        rest = list(
            learner.responses.retrieve(handled[0].response.id, stream=True, starting_after=handled[-1].sequence_number)
        )
        numbers = [e.sequence_number for e in handled + rest]
        assert numbers == list(range(len(numbers))) and rest[-1].type == "response.completed"


def test_the_stall_sends_keep_alives_and_no_content(room):
    _, sdk = room
    result = read_sdk_stream(sdk.chat.completions.create(model="stall", messages=HI, stream=True), idle_timeout=1.5)
    assert result.outcome is Outcome.TRUNCATED and result.text == "still here" and str(result.ending) == "idle_timeout"


# -- URLs a learner can use ------------------------------------------------------------------------------------


def test_a_room_banner_points_learners_at_a_reachable_address():
    text = banner("all", "0.0.0.0", 8000, scenario("all"), addresses=["192.0.2.7", "198.51.100.3"])
    assert "learners use: http://192.0.2.7:8000/v1" in text and "learners use: http://198.51.100.3:8000/v1" in text
    assert "curl -N http://192.0.2.7:8000/v1/chat/completions" in text
    assert "OpenAI(base_url='http://192.0.2.7:8000/v1'" in text
    assert "room dashboard (for the projector): http://192.0.2.7:8000/dashboard" in text
    assert "WARNING: anyone on this machine's networks can reach" in text
    assert "127.0.0.1:8000/v1" not in text  # no snippet a learner would copy points at the instructor's loopback


def test_a_local_banner_has_no_warning_and_says_so_when_no_address_is_found():
    local = banner("ttft", "127.0.0.1", 8000, scenario("ttft"), addresses=["192.0.2.7"])
    assert "WARNING" not in local and "192.0.2.7" not in local and "http://127.0.0.1:8000/dashboard" in local
    alone = banner("responses", "0.0.0.0", 8000, scenario("responses"), addresses=[])
    assert "no address of this machine that others can reach was found" in alone and "WARNING" not in alone
    assert "curl -N http://127.0.0.1:8000/v1/responses" in alone
    assert room_urls("192.0.2.7", 9000, []) == (["http://192.0.2.7:9000/v1"], True)
    assert room_urls("localhost", 9000, []) == (["http://localhost:9000/v1"], False)


def test_room_addresses_are_this_machines_reachable_ones():
    found = room_addresses()  # reads the interfaces; sends nothing
    assert all(usable(a) for a in found) and len(found) == len(set(found))
    assert not any(usable(a) for a in ("127.0.0.1", "169.254.1.2", "0.0.0.0", "::1", "224.0.0.1", "nonsense"))
    assert usable("192.0.2.7") and usable("10.1.2.3")
