"""Every behaviour of the official `openai` SDK that lab 06 prints, asserted against the version pinned in
constraints.txt, plus the library's view of an SDK stream (`streamlab.net.sdk`) and the lab's checks.

No mocks: the real SDK talks HTTP to the real stand-in on 127.0.0.1. If a new SDK release changes one of these
behaviours, the test named for it fails, instead of the lab's prose silently becoming wrong.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseTextDeltaEvent
from support import ASK as ONE_MESSAGE

from streamlab.core import shapes
from streamlab.core.accumulate import ChatAccumulator
from streamlab.core.endings import Ending, Outcome
from streamlab.core.errors import IdleTimeout
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
from streamlab.exercises import lab06, verdict
from streamlab.net.client import stream_chat
from streamlab.net.sdk import AsyncSDKStreamView, SDKStreamView, aread_sdk_stream, read_sdk_stream
from streamlab.net.standin.server import StandIn

pytestmark = [pytest.mark.net, pytest.mark.usefixtures("no_leaked_threads")]

WORDS = ["The ", "answer ", "is ", "forty-", "two."]
FULL = shapes.chat_text_stream(WORDS)  # role, 5 pieces, finish, usage, [DONE]
HI = shapes.chat_text_stream(["Hi"], include_usage=False)
ASK: dict[str, Any] = {
    "messages": [{"role": "user", "content": "?"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}
PLAIN: dict[str, Any] = {"messages": [{"role": "user", "content": "?"}], "stream": True}
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("get_weather", "get_time")
]


def sends(frames: list[bytes]) -> list[Send]:
    return [Send(frame) for frame in frames]


@contextmanager
def sdk(
    scripts: dict[str, Any], *, stored: dict[str, StoredResponse] | None = None, **options: Any
) -> Iterator[tuple[StandIn, openai.OpenAI]]:
    options.setdefault("max_retries", 0)
    options.setdefault("timeout", 10)
    with (
        StandIn(scripts, stored=stored) as server,
        openai.OpenAI(base_url=server.base_url, api_key="test", **options) as client,
    ):
        yield server, client


def retry_waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits the SDK chose, from its own log line "Retrying request in X seconds"."""
    return [
        round(r.args[0], 3)
        for r in caplog.records
        if r.name == "openai._base_client" and r.getMessage().startswith("Retrying request in")
    ]


def retry_counts(server: StandIn, model: str) -> list[str]:
    server.wait_idle()
    return [r.headers["x-stainless-retry-count"] for r in server.records(model)]


def typical_loop(client: openai.OpenAI, model: str, stop_after: int | None = None) -> tuple[str, Any, bool]:
    """The lab's 'typical SDK loop': how it ended, the last finish_reason, whether usage came."""
    finish, usage, chunks = None, None, 0
    try:
        with client.chat.completions.create(model=model, **ASK) as stream:
            for chunk in stream:
                chunks += 1
                usage = chunk.usage or usage
                if chunk.choices:
                    finish = chunk.choices[0].finish_reason or finish
                if chunks == stop_after:
                    break
        how = "closed" if stop_after else "quiet"
    except openai.APIError as exc:
        how = type(exc).__name__
    return how, finish, usage is not None


# -- section 1: the same bytes, read four ways ---------------------------------------------------------------------

HELLO = shapes.chat_variant_stream(["Hel", "lo ", "w\u00f6rld"], "ping-comments")
ANSWER = shapes.responses_text_stream(["alpha ", "beta ", "gamma ", "delta"])


def test_sdk_sync_async_and_helper_read_the_same_text_as_the_library() -> None:
    chat = {
        "model": "hello",
        "messages": [{"role": "user", "content": "hi"}],
        "stream_options": {"include_usage": True},
    }
    with sdk({"hello": Episode(sends(HELLO))}) as (server, client):
        acc = ChatAccumulator()
        with stream_chat(server.base_url, chat) as raw:
            for timed in raw:
                acc.feed(timed.event)
        chunks = list(client.chat.completions.create(stream=True, **chat))
        by_sdk = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

        async def read_async() -> str:
            async with openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0) as aclient:
                stream = await aclient.chat.completions.create(stream=True, **chat)
                return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        by_async = asyncio.run(read_async())
        with client.chat.completions.stream(**chat) as helper:
            kinds = [event.type for event in helper]
            by_helper = helper.get_final_completion().choices[0].message.content
    assert acc.text[0] == by_sdk == by_async == by_helper == "Hello w\u00f6rld"
    # one object per event; none for the 7 comments or for [DONE]
    assert raw.raw.count(b": ping") == 7 and len(raw.events) == 7 and len(chunks) == 6
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    assert [(k, kinds.count(k)) for k in dict.fromkeys(kinds)] == [
        ("chunk", 6),
        ("content.delta", 4),
        ("content.done", 1),
    ]


def test_sdk_responses_events_and_helper_read_the_same_text() -> None:
    with sdk({"answer": Episode(sends(ANSWER))}) as (_, client):
        events = list(client.responses.create(model="answer", input="x", stream=True))
        with client.responses.stream(model="answer", input="x") as helper:
            for _ in helper:
                pass
            final = helper.get_final_response()
    by_sdk = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert by_sdk == final.output_text == "alpha beta gamma delta"
    assert type(events[0]).__name__ == "ResponseCreatedEvent" and type(events[-1]).__name__ == "ResponseCompletedEvent"
    assert [e.sequence_number for e in events] == list(range(len(ANSWER)))


# -- section 2: retries and timeouts, from the stand-in's records --------------------------------------------------


def test_sdk_numbers_its_attempts_and_prefers_retry_after_ms(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="openai._base_client")
    script = {
        "flaky": [
            error_episode(503, "busy"),
            error_episode(429, "slow", retry_after_ms=40, retry_after=1),
            Episode(sends(HI)),
        ]
    }
    with sdk(script, max_retries=2) as (server, client):
        text = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(model="flaky", **PLAIN)
            if c.choices
        )
        assert retry_counts(server, "flaky") == ["0", "1", "2"]
        records = server.records("flaky")
    assert text == "Hi" and [r.status for r in records] == [503, 429, 200]
    backoff, asked = retry_waits(caplog)
    assert 0.375 <= backoff <= 0.5  # 0.5 s minus up to 25% jitter
    assert asked == 0.04  # retry-after-ms, not the Retry-After: 1 beside it
    assert records[1].started_at - records[0].started_at >= backoff
    assert records[2].started_at - records[1].started_at >= asked


def test_sdk_honours_retry_after_in_seconds(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="openai._base_client")
    with sdk({"s": [error_episode(429, "slow", retry_after=1), Episode(sends(HI))]}, max_retries=2) as (server, client):
        list(client.chat.completions.create(model="s", **PLAIN))
        assert retry_counts(server, "s") == ["0", "1"]
        records = server.records("s")
    assert retry_waits(caplog) == [1.0]
    assert records[1].started_at - records[0].started_at >= 1.0


def test_sdk_does_not_retry_when_retry_after_exceeds_two_minutes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="openai._base_client")
    with sdk({"p": error_episode(429, "later", retry_after=300)}, max_retries=2) as (server, client):
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="p", **PLAIN)
        assert retry_counts(server, "p") == ["0"]
    assert retry_waits(caplog) == []


@pytest.mark.parametrize(("max_retries", "requests"), [(3, 4), (0, 1)])
def test_max_retries_bounds_the_retries_not_the_requests(
    max_retries: int, requests: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openai._base_client")
    with sdk({"down": error_episode(503, "down", retry_after_ms=20)}, max_retries=max_retries) as (server, client):
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="down", **PLAIN)
        assert retry_counts(server, "down") == [str(n) for n in range(requests)]
    assert retry_waits(caplog) == [0.02] * max_retries


def test_sdk_never_retries_a_400() -> None:
    with sdk({"bad": error_episode(400, "bad", type="invalid_request_error")}, max_retries=2) as (server, client):
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="bad", **PLAIN)
        assert retry_counts(server, "bad") == ["0"]


def test_sdk_never_retries_a_stream_broken_after_the_200() -> None:
    with sdk({"broken": Episode(sends(HI[:2]) + [Cut()])}, max_retries=2) as (server, client):
        stream = client.chat.completions.create(model="broken", **PLAIN)
        with pytest.raises(openai.APIConnectionError):
            list(stream)
        assert retry_counts(server, "broken") == ["0"]
        assert server.records("broken")[0].status == 200


def test_a_timeout_before_the_headers_is_retried_and_sent_as_a_header() -> None:
    with sdk({"late": error_episode(503, "late", wait=2.0)}, max_retries=1, timeout=0.25) as (server, client):
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="late", **PLAIN)
        assert retry_counts(server, "late") == ["0", "1"]
        # the SDK raises as soon as it gives up; the stand-in sees the hang-up a moment later, on its own thread
        assert server.wait_until(lambda rs: len(rs) == 2 and all(r.finished for r in rs))
        records = server.records("late")
    assert [(r.status, r.ending) for r in records] == [(None, "client_gone")] * 2
    assert {r.headers["x-stainless-read-timeout"] for r in records} == {"0.25"}


def test_a_timeout_inside_the_stream_is_raised_from_the_loop_and_not_retried() -> None:
    with sdk({"stalled": Episode([Send(HI[0]), Stall()])}, max_retries=1, timeout=0.25) as (server, client):
        stream = client.chat.completions.create(model="stalled", **PLAIN)
        with pytest.raises(openai.APITimeoutError):
            list(stream)
        assert retry_counts(server, "stalled") == ["0"]


# -- section 3: the endings table ----------------------------------------------------------------------------------

ENDINGS = {
    # name: (steps, stop_after, typical loop: (how, finish, usage), stand-in record, view (outcome, ending))
    "complete": (sends(FULL), None, ("quiet", "stop", True), "complete", ("complete", "complete")),
    "length": (
        sends(shapes.chat_text_stream(WORDS[:3], finish_reason="length")),
        None,
        ("quiet", "length", True),
        "complete",
        ("incomplete", "complete"),
    ),
    "error-in-200": (
        sends(shapes.chat_error_stream(WORDS[:3])),
        None,
        ("APIError", None, False),
        "complete",
        ("failed", "complete"),
    ),
    "reset": (
        sends(FULL[:4]) + [Cut(reset=True)],
        None,
        ("APIConnectionError", None, False),
        "cut",
        ("truncated", "broken"),
    ),
    "clean-end": (sends(FULL[:4]) + [End()], None, ("quiet", None, False), "complete", ("truncated", "complete")),
    "no-done": (sends(FULL[:-1]) + [End()], None, ("quiet", "stop", True), "complete", ("truncated", "complete")),
    "cancelled": (
        paced(shapes.chat_text_stream([f"t{i:03d} " for i in range(200)]), gap=0.01),
        3,
        ("closed", None, False),
        "client_gone",
        ("cancelled", "cancelled"),
    ),
}


@pytest.mark.parametrize("name", list(ENDINGS))
def test_endings_table_row(name: str) -> None:
    steps, stop_after, loop, record, view = ENDINGS[name]
    with sdk({name: Episode(steps)}) as (server, client):
        assert typical_loop(client, name, stop_after) == loop
        server.wait_idle()
        assert server.records(name)[0].ending == record
        result = read_sdk_stream(client.chat.completions.create(model=name, **ASK), stop_after=stop_after)
    assert (result.outcome, result.ending) == view


def test_stream_close_is_seen_by_the_server_as_client_gone() -> None:
    steps = paced(shapes.chat_text_stream([f"t{i:03d} " for i in range(200)]), gap=0.01)
    with sdk({"long": Episode(steps)}) as (server, client):
        stream = client.chat.completions.create(model="long", **ASK)
        next(stream)
        stream.close()
        server.wait_idle()
        assert server.records("long")[0].ending == "client_gone"


R_ENDINGS = {
    "completed": (shapes.responses_text_stream(["alpha ", "beta"]), "response.completed", "complete"),
    "incomplete": (
        shapes.responses_text_stream(["alpha ", "beta"], terminal="response.incomplete"),
        "response.incomplete",
        "incomplete",
    ),
    "failed": (
        shapes.responses_text_stream(["alpha ", "beta"], terminal="response.failed"),
        "response.failed",
        "failed",
    ),
    "error-event": (shapes.responses_error_stream(["alpha ", "beta"]), "error", "failed"),
    "no-terminal": (shapes.responses_text_stream(["alpha ", "beta"])[:6], "response.output_text.delta", "truncated"),
}


@pytest.mark.parametrize("name", list(R_ENDINGS))
def test_responses_verdicts_end_the_sdk_loop_quietly(name: str) -> None:
    frames, last_type, outcome = R_ENDINGS[name]
    with sdk({name: Episode(sends(frames))}) as (_, client):
        events = list(client.responses.create(model=name, input="x", stream=True))  # no exception
        result = read_sdk_stream(client.responses.create(model=name, input="x", stream=True))
        with client.responses.stream(model=name, input="x") as helper:
            helper.until_done()
            if name == "completed":
                helper.get_final_response()
            else:
                with pytest.raises(RuntimeError, match="response.completed"):
                    helper.get_final_response()
    assert events[-1].type == last_type
    assert (result.outcome, result.ending) == (outcome, Ending.COMPLETE)


# -- section 4: the keep-alive trap --------------------------------------------------------------------------------

STALL = shapes.chat_text_stream(["still ", "here"], include_usage=False)[:3]
STALL_STEPS = sends(STALL) + [Wait(0.1), KeepAlive()] * 20 + [Cut()]


def test_keepalives_keep_a_read_timeout_from_firing() -> None:
    with sdk({"stall": Episode(STALL_STEPS)}, timeout=0.5) as (server, client):
        text = ""
        with pytest.raises(openai.APIConnectionError) as info:
            for chunk in client.chat.completions.create(model="stall", **PLAIN):
                text += chunk.choices[0].delta.content or ""
        server.wait_idle()
        record = server.records("stall")[0]
    assert not isinstance(info.value, openai.APITimeoutError)
    assert text == "still here"
    assert record.ending == "cut" and record.frames_written == len(STALL) + 20  # the server gave up first


def test_an_idle_content_deadline_ends_a_keepalive_stall() -> None:
    with sdk({"stall": Episode(STALL_STEPS)}, timeout=0.5) as (server, client):
        view = SDKStreamView(client.chat.completions.create(model="stall", **PLAIN), idle_timeout=0.5)
        text = ""
        with pytest.raises(IdleTimeout) as info, view:
            for chunk in view:
                text += chunk.choices[0].delta.content or ""
        server.wait_idle()
        record = server.records("stall")[0]
    assert info.value.ending is Ending.IDLE_TIMEOUT and text == "still here"
    assert (view.outcome, view.ending) == (Outcome.TRUNCATED, Ending.IDLE_TIMEOUT)
    assert record.ending == "client_gone" and record.frames_written < len(STALL) + 20


def test_the_async_view_has_the_same_idle_deadline() -> None:
    with StandIn({"stall": Episode(STALL_STEPS)}) as server:

        async def run() -> tuple[str, AsyncSDKStreamView]:
            async with openai.AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0, timeout=0.5) as c:
                view = AsyncSDKStreamView(await c.chat.completions.create(model="stall", **PLAIN), idle_timeout=0.5)
                text = ""
                try:
                    async with view:
                        async for chunk in view:
                            text += chunk.choices[0].delta.content or ""
                except IdleTimeout:
                    pass
                return text, view

        text, view = asyncio.run(run())
        server.wait_idle()
        assert server.records("stall")[0].ending == "client_gone"
    assert text == "still here" and view.ending is Ending.IDLE_TIMEOUT


# -- section 5: the usage chunk ------------------------------------------------------------------------------------


def test_the_usage_chunk_has_empty_choices_and_breaks_an_unguarded_loop() -> None:
    usage = shapes.chat_text_stream(["Hel", "lo"])
    with sdk({"usage": Episode(sends(usage))}) as (_, client):
        chunks = list(client.chat.completions.create(model="usage", **ASK))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 2
    assert all(c.usage is None for c in chunks[:-1])
    with pytest.raises(IndexError):
        _ = chunks[-1].choices[0]


def test_a_stream_cut_before_the_usage_chunk_has_no_usage() -> None:
    usage = shapes.chat_text_stream(["Hel", "lo"])
    with sdk({"cut": Episode(sends(usage[:3]) + [Cut()])}) as (_, client):
        result = read_sdk_stream(client.chat.completions.create(model="cut", **ASK))
    assert (result.text, result.outcome, result.usage) == ("Hello", Outcome.TRUNCATED, None)


# -- section 6: tool calls -----------------------------------------------------------------------------------------

CALLS = shapes.chat_tool_call_stream(interleave=False)


def helper_tool_calls(client: openai.OpenAI, model: str) -> tuple[list[tuple[int, str, str]], Any]:
    with client.chat.completions.stream(model=model, messages=ONE_MESSAGE, tools=TOOLS) as helper:
        done = [(e.index, e.name, e.arguments) for e in helper if e.type == "tool_calls.function.arguments.done"]
        return done, helper.get_final_completion()


def test_the_helper_announces_sequential_tool_calls_as_done() -> None:
    with sdk({"tools": Episode(sends(CALLS))}) as (_, client):
        done, final = helper_tool_calls(client, "tools")
    assert done == [(0, "get_weather", '{"location": "Paris, France"}'), (1, "get_time", '{"city": "Oslo"}')]
    assert final.choices[0].finish_reason == "tool_calls"


def test_get_final_completion_of_a_cut_stream_hands_out_unfinished_tool_calls() -> None:
    with sdk({"cut": Episode(sends(CALLS[:7]) + [End()])}) as (_, client):
        done, final = helper_tool_calls(client, "cut")
        result = read_sdk_stream(
            client.chat.completions.create(model="cut", messages=ONE_MESSAGE, tools=TOOLS, stream=True)
        )
    assert done == [(0, "get_weather", '{"location": "Paris, France"}')]  # no done event for get_time
    assert final.choices[0].finish_reason is None
    assert [json.loads(t.function.arguments) for t in final.choices[0].message.tool_calls] == [
        {"location": "Paris, France"},
        {"city": "Oslo"},
    ]  # valid JSON, and no warning
    assert result.outcome is Outcome.TRUNCATED
    assert [c.name for c in result.tool_calls] == ["get_weather", "get_time"]
    assert all(c.problem and "never finished" in c.problem for c in result.tool_calls)


def test_the_helper_announces_an_interleaved_call_as_done_too_early() -> None:
    interleaved = shapes.chat_tool_call_stream(interleave=True)
    with sdk({"i": Episode(sends(interleaved))}) as (_, client):
        with client.chat.completions.stream(model="i", messages=ONE_MESSAGE, tools=TOOLS) as helper:
            first = next(e for e in helper if e.type == "tool_calls.function.arguments.done")
        result = read_sdk_stream(
            client.chat.completions.create(model="i", messages=ONE_MESSAGE, tools=TOOLS, stream=True)
        )
    assert (first.name, first.arguments) == ("get_weather", "")
    assert result.outcome is Outcome.COMPLETE
    assert [(c.name, json.loads(c.arguments), c.complete) for c in result.tool_calls] == [
        ("get_weather", {"location": "Paris, France"}, True),
        ("get_time", {"city": "Oslo"}, True),
    ]


# -- section 7: resume ---------------------------------------------------------------------------------------------


def test_retrieve_with_starting_after_resumes_and_the_sdk_never_reconnects_by_itself() -> None:
    frames = shapes.responses_text_stream(["alpha ", "beta ", "gamma ", "delta"], response_id="resp_sdk")
    script = {
        "bg": Episode(sends(frames[:7]) + [Cut()], store_as="resp_sdk", stored=StoredResponse.from_frames(frames))
    }
    with sdk(script, max_retries=2) as (server, client):
        handled = []
        with pytest.raises(openai.APIConnectionError):
            for event in client.responses.create(model="bg", input="x", background=True, stream=True):
                handled.append(event)
        cursor = handled[-1].sequence_number
        handled += list(client.responses.retrieve("resp_sdk", stream=True, starting_after=cursor))
        server.wait_idle()
        records = server.records()
    assert handled[0].response.id == "resp_sdk" and cursor == 6
    assert [e.sequence_number for e in handled] == list(range(len(frames)))
    assert "".join(e.delta for e in handled if e.type == "response.output_text.delta") == "alpha beta gamma delta"
    assert [(r.method, r.path, r.ending) for r in records] == [
        ("POST", "/v1/responses", "cut"),
        ("GET", "/v1/responses/resp_sdk?starting_after=6&stream=true", "complete"),
    ]


# -- section 8: fields a moderated or obfuscated stream may add ----------------------------------------------------


def test_obfuscation_and_moderation_fields_pass_through() -> None:
    assert {"moderation", "obfuscation"} <= set(ChatCompletionChunk.model_fields)
    assert "obfuscation" not in ResponseTextDeltaEvent.model_fields
    events = shapes.responses_text_events(["alpha ", "beta"])
    for event in events:
        if event["type"].endswith(".delta"):
            event["obfuscation"] = "q3Zx"
    chunk = shapes.chat_chunk([shapes.chat_choice({"content": "Hi"})])
    chunk["obfuscation"] = "k9Pw81"
    script = {
        "r": Episode(sends(shapes.responses_frames(events))),
        "c": Episode([Send(shapes.sse_frame(shapes.to_json(chunk))), Send(shapes.chat_done())]),
    }
    with sdk(script) as (_, client):
        got = list(client.chat.completions.create(model="c", messages=ONE_MESSAGE, stream=True))
        deltas = [e for e in client.responses.create(model="r", input="x", stream=True) if e.type.endswith(".delta")]
        result = read_sdk_stream(client.responses.create(model="r", input="x", stream=True))
    assert got[0].obfuscation == "k9Pw81" and got[0].choices[0].delta.content == "Hi"
    assert deltas[0].model_extra == {"obfuscation": "q3Zx"}
    assert (result.outcome, result.text) == (Outcome.COMPLETE, "alpha beta")


# -- the view itself -----------------------------------------------------------------------------------------------


def test_the_view_sees_every_byte_the_sdk_reads_through_iter_bytes() -> None:
    with sdk({"m": Episode(sends(HELLO))}) as (server, client):
        result = read_sdk_stream(client.chat.completions.create(model="m", **ASK))
        server.wait_idle()
        assert result.bytes_received == server.records("m")[0].bytes_written == len(b"".join(HELLO))
    assert result.saw_done and result.objects == 6 and result.usage is not None


def test_the_view_keeps_only_what_the_caller_was_handed_when_it_cancels() -> None:
    with sdk({"m": Episode(sends(FULL))}) as (_, client):
        result = read_sdk_stream(client.chat.completions.create(model="m", **ASK), stop_after=3)
    assert (result.outcome, result.text, result.objects) == (Outcome.CANCELLED, "The answer ", 3)


def test_a_clean_end_inside_an_event_is_an_incomplete_event() -> None:
    with sdk({"m": Episode(sends(FULL[:4]) + [Send(FULL[4][:20]), End()])}) as (_, client):
        result = read_sdk_stream(client.chat.completions.create(model="m", **ASK))
    assert (result.outcome, result.ending) == (Outcome.TRUNCATED, Ending.INCOMPLETE_EVENT)
    assert result.text == "The answer is "
    assert "unfinished event" in result.explain


def test_the_view_names_the_cause_of_a_broken_connection() -> None:
    with sdk({"m": Episode(sends(FULL[:4]) + [Cut()])}) as (_, client):
        result = read_sdk_stream(client.chat.completions.create(model="m", **ASK))
    assert result.ending is Ending.BROKEN and result.error is not None
    assert result.error.startswith("APIConnectionError") and "RemoteProtocolError" in result.error


def test_the_async_view_reports_the_same_outcomes() -> None:
    scripts = {
        "complete": Episode(sends(FULL)),
        "no-done": Episode(sends(FULL[:-1])),
        "reset": Episode(sends(FULL[:4]) + [Cut(reset=True)]),
        "error": Episode(sends(shapes.chat_error_stream(WORDS[:2]))),
    }
    with StandIn(scripts) as server:

        async def run() -> dict[str, tuple[Outcome, Ending]]:
            async with openai.AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0) as client:
                out = {}
                for model in scripts:
                    result = await aread_sdk_stream(await client.chat.completions.create(model=model, **ASK))
                    out[model] = (result.outcome, result.ending)
                return out

        got = asyncio.run(run())
    assert got == {
        "complete": ("complete", "complete"),
        "no-done": ("truncated", "complete"),
        "reset": ("truncated", "broken"),
        "error": ("failed", "complete"),
    }


def test_the_view_refuses_what_it_cannot_read_from_the_first_byte() -> None:
    with sdk({"m": Episode(sends(FULL))}) as (_, client):
        stream = client.chat.completions.create(model="m", **ASK)
        next(stream)
        with pytest.raises(ValueError, match="first byte"):
            SDKStreamView(stream)
        stream.close()
        with client.chat.completions.stream(model="m", messages=ONE_MESSAGE) as helper:
            with pytest.raises(TypeError, match="stream=True"):
                SDKStreamView(helper)
    with pytest.raises(TypeError):
        SDKStreamView([b"data: {}\n\n"])  # type: ignore[arg-type]


def test_read_sdk_stream_reports_a_result_only_after_the_end() -> None:
    with sdk({"m": Episode(sends(FULL))}) as (_, client):
        view = SDKStreamView(client.chat.completions.create(model="m", **ASK))
        with pytest.raises(RuntimeError, match="not ended"):
            view.result()
        assert view.outcome is None
        view.close()
    assert view.result().outcome is Outcome.CANCELLED


# -- the lab's checks ----------------------------------------------------------------------------------------------


def _stub(*args: object) -> object:
    raise NotImplementedError


def _crash(*args: object) -> object:
    raise KeyError("boom")


@pytest.mark.parametrize("ex_id", ["06.1", "06.2", "06.3"])
def test_lab06_stubs_are_not_attempted_and_crashes_name_the_case(ex_id: str) -> None:
    assert verdict(ex_id, ...) == f"Exercise {ex_id}: not attempted yet"
    assert verdict(ex_id, _stub) == f"Exercise {ex_id}: not attempted yet"
    text = verdict(ex_id, _crash)
    assert text.startswith(f"Exercise {ex_id}: not yet:") and "KeyError" in text and ":" in text.split("not yet:")[1]


def test_06_1_a_loop_that_trusts_a_quiet_end_is_told_about_the_cut() -> None:
    def trusting(stream: Any, stop_after: int | None = None) -> str:
        finish = None
        try:
            for n, chunk in enumerate(stream, 1):
                for choice in chunk.choices:
                    finish = choice.finish_reason or finish
                if stop_after and n >= stop_after:
                    stream.close()
                    return "cancelled"
        except openai.APIConnectionError:
            return "truncated"
        except openai.APIError:
            return "failed"
        if finish is None:
            return "truncated"
        return "incomplete" if finish != "stop" else "complete"

    text = verdict("06.1", trusting)
    assert "right after the finish chunk" in text and "'complete'" in text and "usage chunk" in text


def test_06_1_cancelling_without_closing_is_caught_by_the_server_record() -> None:
    def no_close(stream: Any, stop_after: int | None = None) -> str:
        if stop_after is not None:
            for n, _ in enumerate(stream, 1):
                if n >= stop_after:
                    return "cancelled"  # but the connection stays open
        return lab06.solution_sdk_outcome(stream)

    assert "close the stream" in verdict("06.1", no_close)


def test_06_2_counting_every_record_misses_where_the_last_call_starts() -> None:
    text = verdict("06.2", lambda records: (len(records), lab06.solution_retry_story(records)[1]))
    assert "x-stainless-retry-count" in text and "two calls" in text


def test_06_3_a_loop_without_an_idle_deadline_waits_for_the_server_to_give_up() -> None:
    def no_deadline(stream: Any, idle_timeout: float) -> tuple[str, Any, str]:
        text, usage = "", None
        try:
            for chunk in stream:
                usage = chunk.usage or usage
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
        except openai.APIError:
            return text, usage, "truncated"
        return text, usage, "complete" if usage else "truncated"

    assert "waited until the server gave up" in verdict("06.3", no_deadline)


def test_06_3_an_unguarded_loop_crashes_on_the_usage_chunk() -> None:
    def unguarded(stream: Any, idle_timeout: float) -> tuple[str, Any, str]:
        return "".join(c.choices[0].delta.content or "" for c in stream), None, "complete"

    assert "IndexError" in verdict("06.3", unguarded)


@pytest.mark.parametrize(
    ("ex_id", "solution"),
    [("06.1", lab06.solution_sdk_outcome), ("06.2", lab06.solution_retry_story), ("06.3", lab06.solution_safe_read)],
)
def test_lab06_library_solutions_pass(ex_id: str, solution: Any) -> None:
    assert verdict(ex_id, solution) == f"Exercise {ex_id}: passed"


def test_06_4_json_loads_on_a_cut_answer_is_told_it_is_incomplete_not_a_parse_error() -> None:
    def json_loads(stream: Any) -> tuple[str, Any]:
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        return "complete", json.loads(text)

    text = verdict("06.4", json_loads)
    assert text.startswith("Exercise 06.4: not yet: cut half-way by the token limit: your code raised JSONDecodeError")
    assert "it is incomplete" in text


def test_06_4_prose_taken_for_a_partial_answer_is_named() -> None:
    """Text that is not JSON is "invalid": `parse_partial` raises on it, and the verdict names the case."""
    from streamlab.core.partialjson import parse_partial

    def everything_is_json(stream: Any) -> tuple[str, Any]:
        text = ""
        try:
            for chunk in stream:
                text += "".join(c.delta.content or "" for c in chunk.choices)
        except openai.APIConnectionError:
            pass
        try:
            return ("complete", json.loads(text))
        except ValueError:
            return ("incomplete", parse_partial(text))

    text = verdict("06.4", everything_is_json)
    assert text.startswith("Exercise 06.4: not yet: the model answered in prose, not JSON: your code raised")
    assert "'invalid'" in text
