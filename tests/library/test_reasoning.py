"""Reasoning streams (issue 33, item 2): the stand-in plays them, the accumulators keep the thinking apart from the
answer, the metrics time first reasoning and first answer text apart, the checker notes Chat reasoning fields and
grades the Responses reasoning events."""

from __future__ import annotations

import json

import openai
import pytest

from streamlab.core import shapes
from streamlab.core.accumulate import ChatAccumulator, ResponsesAccumulator, replay
from streamlab.core.conformance.chat import REASONING_NOTE
from streamlab.core.conformance.checks import Status
from streamlab.core.endings import Outcome
from streamlab.core.metrics import first_outputs, reasoning_timelines
from streamlab.core.sse import SSEEvent, parse
from streamlab.core.standin.scenarios import REASONING_PIECES, SCENARIOS, scenario
from streamlab.net.check import check_endpoint
from streamlab.net.client import stream_chat, stream_responses
from streamlab.net.standin.server import StandIn

THINKING = "".join(REASONING_PIECES)
ANSWER = "One, two, three, four, five."
CHAT = ("reasoning", "reasoning-field", "reasoning-both")
RESPONSES = ("responses-reasoning", "responses-reasoning-text", "queued")


@pytest.fixture(scope="module")
def server():
    scripts: dict = {}
    for name in (*CHAT, *RESPONSES):
        scripts.update(scenario(name))
    with StandIn(scripts) as running:
        yield running


def chunk(delta: dict, logprobs: object = None) -> SSEEvent:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    body["choices"] = [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": None}]
    return SSEEvent(data=json.dumps(body))


# -- the accumulators ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "both"])
def test_chat_reasoning_is_kept_apart_from_the_answer_and_never_doubled(field: str) -> None:
    frames = shapes.chat_reasoning_stream(["Think ", "hard."], ["Yes", "."], field=field)
    acc = replay(frames, ChatAccumulator()).accumulator
    assert acc.text == {0: "Yes."} and acc.reasoning == {0: "Think hard."}
    assert acc.outcome() is Outcome.COMPLETE
    names = shapes.REASONING_FIELDS if field == "both" else (field,)
    assert acc.reasoning_fields == dict.fromkeys(names, 2)
    assert acc.reasoning_mirrored == (2 if field == "both" else 0)


def test_two_different_reasoning_texts_in_one_delta_are_both_kept_in_field_order() -> None:
    acc = ChatAccumulator()
    acc.feed(chunk({"reasoning": "B", "reasoning_content": "A"}))
    assert acc.reasoning == {0: "AB"} and acc.reasoning_mirrored == 0


def test_a_learned_text_shape_never_drops_the_next_chunks_reasoning() -> None:
    # The fast path reads a chunk that differs from the last text chunk only in its text without decoding it.
    # A chunk carrying text and reasoning must not become that shape: its twin's reasoning would be dropped.
    acc = ChatAccumulator()
    for piece in ("a", "b", "c"):
        acc.feed(chunk({"content": piece, "reasoning": "r"}))
    assert acc.text == {0: "abc"} and acc.reasoning == {0: "rrr"}


def test_logprobs_of_every_chunk_are_concatenated_even_when_two_chunks_are_alike() -> None:
    same = {"content": [{"token": "a", "logprob": -0.5, "bytes": [97], "top_logprobs": []}], "refusal": None}
    acc = ChatAccumulator()
    for _ in range(3):
        acc.feed(chunk({"content": "a"}, same))
    assert acc.text == {0: "aaa"} and [e["token"] for e in acc.logprobs[0]] == ["a", "a", "a"]


def test_the_logprobs_scenario_rebuilds_one_entry_per_token() -> None:
    (episode,) = scenario("logprobs")["logprobs"]
    acc = replay([step.data for step in episode.steps if hasattr(step, "data")], ChatAccumulator()).accumulator
    assert "".join(e["token"] for e in acc.logprobs[0]) == acc.text[0] == "The answer is forty-two."
    assert len({e["logprob"] for e in acc.logprobs[0]}) == 5


@pytest.mark.parametrize("raw", [False, True])
def test_responses_reasoning_events_are_kept_apart_and_checked_against_their_done(raw: bool) -> None:
    events = shapes.responses_reasoning_events(["Think ", "hard."], ["Yes", "."], raw=raw, background=True)
    acc = replay(shapes.responses_frames(events), ResponsesAccumulator()).accumulator
    assert acc.text == {(1, 0): "Yes."} and acc.reasoning == "Think hard."
    assert (acc.reasoning_text if raw else acc.reasoning_summary) == {(0, 0): "Think hard."}
    assert acc.queued and acc.unknown_events == 0 and acc.disagreements() == []
    assert acc.outcome() is Outcome.COMPLETE
    types = [e["type"] for e in events]
    assert types[:3] == ["response.created", "response.queued", "response.in_progress"]
    delta = "response.reasoning_text.delta" if raw else "response.reasoning_summary_text.delta"
    assert types.index(delta) < types.index("response.output_text.delta")


def test_a_reasoning_done_that_differs_from_its_deltas_is_a_disagreement() -> None:
    events = shapes.responses_reasoning_events(["Think"], ["Yes"])
    for event in events:
        if event["type"] == "response.reasoning_summary_text.done":
            event["text"] = "Think!"
    acc = replay(shapes.responses_frames(events), ResponsesAccumulator()).accumulator
    (found,) = acc.disagreements()
    assert (found.what, found.key, found.built, found.done) == ("reasoning_summary", (0, 0), "Think", "Think!")


@pytest.mark.parametrize("model", RESPONSES)
def test_the_official_sdk_stream_helper_rebuilds_the_same_reasoning(server: StandIn, model: str) -> None:
    # responses.stream() files every delta into its snapshot by output_index and summary_index / content_index:
    # a reasoning event of the wrong shape makes it raise
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    with client.responses.stream(model=model, input="count") as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    reasoning, message = final.output
    parts = reasoning.summary if model != "responses-reasoning-text" else reasoning.content
    assert "".join(p.text for p in parts) == THINKING and final.output_text == ANSWER
    assert (types[1] == "response.queued") is (model == "queued")


# -- the stand-in on loopback, the client, the metrics ------------------------------------------------------------


@pytest.mark.parametrize("model", CHAT)
def test_the_chat_scenarios_stream_thinking_first_then_the_answer(server: StandIn, model: str) -> None:
    with stream_chat(server.base_url, {"model": model, "messages": [{"role": "user", "content": "count"}]}) as stream:
        arrivals = [(t.at, t.event) for t in stream]
    acc = ChatAccumulator()
    for _, event in arrivals:
        acc.feed(event)
    assert acc.reasoning == {0: THINKING} and acc.text == {0: ANSWER} and acc.outcome() is Outcome.COMPLETE
    first = first_outputs(arrivals, stream.started_at)
    assert first.reasoning is not None and first.answer is not None and first.thinking > 0
    thinking, answer = reasoning_timelines(arrivals, stream.started_at)
    assert thinking[-1][1] == len(THINKING) and answer[-1][1] == len(ANSWER)
    assert thinking[-1][0] <= answer[0][0]  # every piece of thinking came before the first piece of the answer


@pytest.mark.parametrize("model", RESPONSES)
def test_the_responses_scenarios_stream_reasoning_events_before_output_text(server: StandIn, model: str) -> None:
    with stream_responses(server.base_url, {"model": model, "input": "count"}) as stream:
        arrivals = [(t.at, t.event) for t in stream]
    first = first_outputs(arrivals, stream.started_at, dialect="responses")
    assert first.reasoning is not None and first.answer is not None and first.reasoning < first.answer
    types = [json.loads(e.data)["type"] for _, e in arrivals]
    assert (types[1] == "response.queued") is (model == "queued")
    acc = ResponsesAccumulator()
    for _, event in arrivals:
        acc.feed(event)
    assert acc.reasoning == THINKING and acc.text == {(1, 0): ANSWER} and acc.disagreements() == []


def test_reasoning_text_alone_is_not_the_time_to_first_token() -> None:
    frames = shapes.chat_reasoning_stream(["t"], ["A"], include_usage=False)
    events = parse(b"".join(frames))[0]
    arrivals = [(float(i), ev) for i, ev in enumerate(events)]
    first = first_outputs(arrivals)
    assert (first.reasoning, first.answer, first.thinking) == (1.0, 2.0, 1.0)


def test_every_reasoning_scenario_is_listed() -> None:
    assert {*CHAT, *RESPONSES} <= set(SCENARIOS)


# -- the checker ----------------------------------------------------------------------------------------------------


def test_the_checker_notes_chat_reasoning_fields_and_fails_a_reasoning_done_that_differs() -> None:
    with StandIn({}, profile="reasoning") as running:
        report = check_endpoint(running.base_url, model="any-model", dialect="both", timeout=10)
    delta = report.finding("chat.delta")
    assert delta is not None and delta.status is Status.PASS
    assert "delta.reasoning_content" in delta.detail and "delta.reasoning " in delta.detail
    assert "(count it once)" in delta.detail and REASONING_NOTE in delta.detail
    done = report.finding("responses.done_matches")
    assert done is not None and done.status is Status.FAIL and "reasoning_summary_text.done" in done.detail
    indexes = report.finding("responses.indexes")
    assert indexes is not None and indexes.status is Status.PASS
    assert report.issues() == {"responses.done_matches": Status.FAIL}


def test_the_checker_says_nothing_of_reasoning_where_none_came() -> None:
    with StandIn({}, profile="openai") as running:
        report = check_endpoint(running.base_url, model="any-model", dialect="chat", timeout=10)
    delta = report.finding("chat.delta")
    assert delta is not None and "reasoning" not in delta.detail
