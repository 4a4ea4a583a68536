"""Provider variance (issue 33, item 4): `stream_options` refused with a 400 and the client's one retry without it,
`x-should-retry` obeyed as the SDK obeys it, Ollama's tools-without-streaming, Azure's empty first chunk, a usage
count above `max_tokens`, `logprobs` per chunk rebuilt. Against the real stand-in on loopback and the real SDK."""

from __future__ import annotations

import asyncio
import logging

import openai
import pytest

from streamlab.core import shapes
from streamlab.core.accumulate import ChatAccumulator
from streamlab.core.conformance.checks import ProbeResult, Status, probes_for
from streamlab.core.conformance.grade import grade
from streamlab.core.endings import Outcome
from streamlab.core.errors import BadStatus, RetryError
from streamlab.core.retry import AttemptResult, RetryPolicy, VirtualClock, should_retry_header, without_stream_options
from streamlab.core.standin.quirks import AZURE_FILTER_CHUNK, FAULTS, STREAM_OPTIONS_REFUSAL, Context, frames_of
from streamlab.core.standin.script import Episode, ErrorEpisode, Send, error_episode, paced
from streamlab.net.check import check_endpoint
from streamlab.net.client import astream_chat, stream_chat
from streamlab.net.retry import RetryingStream
from streamlab.net.standin.server import StandIn

ASK = [{"role": "user", "content": "Count to five."}]
WITH_USAGE = {"model": "m", "messages": ASK, "stream_options": {"include_usage": True}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}


def read(stream) -> ChatAccumulator:
    acc = ChatAccumulator()
    with stream:
        for timed in stream:
            acc.feed(timed.event)
    return acc


# -- x-should-retry -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "said"), [("true", True), ("false", False), ("True", None), ("yes", None), (None, None)]
)
def test_x_should_retry_is_read_exactly_as_the_sdk_reads_it(value: str | None, said: bool | None) -> None:
    assert should_retry_header({} if value is None else {"X-Should-Retry": value}) is said


def test_x_should_retry_true_makes_a_400_retryable_and_false_forbids_retrying_a_503() -> None:
    policy = RetryPolicy(seed=1)
    assert not policy.decide(1, AttemptResult(status=400)).retry
    forced = policy.decide(1, AttemptResult(status=400, headers={"x-should-retry": "true"}))
    assert forced.retry and "x-should-retry: true" in forced.reason
    assert policy.decide(1, AttemptResult(status=503)).retry
    forbidden = policy.decide(1, AttemptResult(status=503, headers={"x-should-retry": "false"}))
    assert not forbidden.retry and "x-should-retry: false" in forbidden.reason


def test_x_should_retry_does_not_lift_the_other_limits() -> None:
    policy = RetryPolicy(max_attempts=2, seed=1)
    said = {"x-should-retry": "true", "retry-after-ms": "250"}
    assert policy.decide(1, AttemptResult(status=400, headers=said)).delay == 0.25  # the server's wait still holds
    assert not policy.decide(2, AttemptResult(status=400, headers=said)).retry  # so does the attempt limit
    assert not policy.decide(1, AttemptResult(status=400, headers=said, events_delivered=1)).retry


def scripted(first: ErrorEpisode) -> dict:
    frames = shapes.chat_text_stream(["Hel", "lo"], model="m")
    return {"m": [first, Episode(paced(frames, gap=0.001))]}


@pytest.mark.parametrize(
    ("status", "value", "retried"), [(400, "true", True), (503, "false", False), (503, None, True), (400, None, False)]
)
def test_the_policy_and_the_official_sdk_agree_on_x_should_retry(status: int, value: str | None, retried: bool) -> None:
    headers = (("retry-after-ms", "1"),) + ((("x-should-retry", value),) if value else ())
    first = ErrorEpisode(status, shapes.error_body("scripted", "server_error"), headers)
    with StandIn(scripted(first)) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=1)
        try:
            text = "".join(
                c.choices[0].delta.content or ""
                for c in client.chat.completions.create(model="m", messages=ASK, stream=True)
                if c.choices
            )
        except openai.APIStatusError as exc:
            assert exc.status_code == status
            text = None
        assert (text == "Hello") is retried, "the SDK"
        server.reset()
        clock = VirtualClock()
        runner = RetryingStream(
            lambda: stream_chat(server.base_url, {"model": "m", "messages": ASK}),
            RetryPolicy(max_attempts=2, seed=1),
            sleep=clock.sleep,
            clock=clock.now,
        )
        try:
            acc = ChatAccumulator()
            for timed in runner:
                acc.feed(timed.event)
            ours = acc.text.get(0)
        except RetryError:
            ours = None
        assert (ours == "Hello") is retried, "the library's policy"


# -- stream_options refused ----------------------------------------------------------------------------------------


def test_without_stream_options_decides_only_for_a_400_that_names_it() -> None:
    body = {"error": {"message": STREAM_OPTIONS_REFUSAL}}
    again = without_stream_options(400, body, WITH_USAGE)
    assert again == {"model": "m", "messages": ASK}
    assert without_stream_options(400, body, again) is None  # the field is gone: a second refusal is final
    assert without_stream_options(400, {"error": {"message": "messages must be a list"}}, WITH_USAGE) is None
    assert without_stream_options(422, body, WITH_USAGE) is None


def test_the_client_sends_the_request_again_without_stream_options_and_says_so(caplog) -> None:
    with StandIn({}, profile="groq") as server, caplog.at_level(logging.INFO, logger="streamlab.client"):
        stream = stream_chat(server.base_url, WITH_USAGE)
        acc = read(stream)
        records = [r for r in server.records() if r.path.endswith("/chat/completions")]
    assert acc.text == {0: "One, two, three, four, five."} and acc.outcome() is Outcome.COMPLETE
    assert acc.usage is None  # the price of the fix: no usage is streamed
    assert len(stream.notes) == 1 and "stream_options" in stream.notes[0] and "before any byte" in stream.notes[0]
    assert [r.status for r in records] == [400, 200]
    assert "stream_options" in caplog.text


def test_the_async_client_does_the_same() -> None:
    async def run() -> tuple[list[str], int]:
        stream = astream_chat(server.base_url, WITH_USAGE)
        events = 0
        async with stream:
            async for _ in stream:
                events += 1
        return stream.notes, events

    with StandIn({}, profile="groq") as server:
        notes, events = asyncio.run(run())
    assert len(notes) == 1 and events > 5


def test_the_fix_can_be_turned_off_and_is_tried_once() -> None:
    with StandIn({}, profile="groq") as server:
        with pytest.raises(BadStatus) as info:
            read(stream_chat(server.base_url, WITH_USAGE, retry_stream_options=False))
        assert info.value.status == 400
    twice = error_episode(400, STREAM_OPTIONS_REFUSAL, type="invalid_request_error")
    with StandIn({"m": [twice, twice]}) as server:
        stream = stream_chat(server.base_url, WITH_USAGE)
        with pytest.raises(BadStatus):
            read(stream)
        assert len(stream.notes) == 1  # once, then the refusal stands


def test_a_400_that_does_not_name_stream_options_is_not_sent_again() -> None:
    refusal = error_episode(400, "messages must be a list", type="invalid_request_error")
    with StandIn({"m": [refusal, Episode([Send(f) for f in shapes.chat_text_stream(["x"], model="m")])]}) as server:
        stream = stream_chat(server.base_url, WITH_USAGE)
        with pytest.raises(BadStatus):
            read(stream)
    assert stream.notes == []


# -- Ollama with tools, Azure's first chunk, usage above max_tokens, logprobs --------------------------------------


def test_ollama_with_tools_sends_the_call_whole_and_without_tools_streams() -> None:
    with StandIn({}, profile="ollama-tools") as server:
        tools = read(stream_chat(server.base_url, {"model": "m", "messages": ASK, "tools": [WEATHER]}))
        text = read(stream_chat(server.base_url, {"model": "m", "messages": ASK}))
    assert tools.tool_calls[(0, 0)].fragments == 1 and tools.tool_arguments() == {}
    assert text.chunks >= 7  # role, six pieces, the finish: streamed token by token


def test_ollama_with_tools_sends_text_whole_in_one_chunk() -> None:
    frames = frames_of([Send(f) for f in shapes.chat_text_stream(["One", ", two", "."])])
    fix = FAULTS["tools_not_streamed"].apply
    whole = fix(frames, Context("chat", {"tools": [WEATHER]}))  # type: ignore[call-arg,arg-type]
    texts = [f.obj["choices"][0]["delta"].get("content") for f in whole if f.chunk and f.obj["choices"]]
    assert [t for t in texts if t] == ["One, two."]
    assert fix(frames, Context("chat", {})) == frames  # type: ignore[call-arg,arg-type]


def test_azures_empty_first_chunk_breaks_a_choices_0_loop_not_the_accumulator() -> None:
    with StandIn({}, profile="azure") as server:
        stream = stream_chat(server.base_url, {"model": "m", "messages": ASK})
        acc = read(stream)
    first = stream.events[0].event
    assert first.data.startswith('{"choices":[]') and "prompt_filter_results" in first.data
    assert acc.text == {0: "One, two, three, four, five."} and acc.outcome() is Outcome.COMPLETE
    assert AZURE_FILTER_CHUNK["choices"] == []
    with pytest.raises(IndexError):
        __import__("json").loads(first.data)["choices"][0]


def test_usage_above_max_tokens_fails_usage_counts() -> None:
    with StandIn({}, profile="usage-over-cap") as server:
        report = check_endpoint(server.base_url, model="any-model", dialect="chat", timeout=10)
    found = report.finding("usage.counts")
    assert found is not None and found.status is Status.FAIL
    assert "completion_tokens is 50, more than the max_tokens of 40" in found.detail


def test_responses_usage_above_max_output_tokens_fails_responses_usage() -> None:
    (probe,) = [p for p in probes_for("responses", "m") if p.name == "responses.text"]
    events = shapes.responses_text_events(["a", "b"], usage=shapes.responses_usage(output_tokens=41))
    body = b"".join(shapes.responses_frames(events))
    result = ProbeResult(probe, 200, (("content-type", "text/event-stream"),), body)
    found = {f.check: f for f in grade([result], dialect="responses")}
    assert found["responses.usage"].status is Status.FAIL
    assert "output_tokens is 41, more than the max_output_tokens of 40" in found["responses.usage"].detail


def test_logprobs_come_per_chunk_when_asked_and_the_accumulator_joins_them() -> None:
    with StandIn({}, profile="openai") as server:
        asked = read(stream_chat(server.base_url, {"model": "m", "messages": ASK, "logprobs": True}))
        plain = read(stream_chat(server.base_url, {"model": "m", "messages": ASK}))
    assert "".join(e["token"] for e in asked.logprobs[0]) == asked.text[0] == plain.text[0]
    assert plain.logprobs == {}
