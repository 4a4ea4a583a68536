"""The official `openai` SDK, pointed at the stand-in, streams both dialects and retries on its own.

No mocks: the real SDK talks HTTP to the real stand-in on 127.0.0.1. This is the proof that the stand-in's
wire shapes are the ones a production client expects.
"""

from __future__ import annotations

import asyncio
import time

import openai  # a declared dependency: a missing SDK must fail, not skip
import pytest
from support import ASK

from streamlab.core import shapes
from streamlab.core.standin.script import Episode, Send, error_episode, paced
from streamlab.net.standin.server import StandIn

WORDS = ["Hel", "lo ", "w\u00f6rld"]
CHAT = shapes.chat_text_stream(WORDS, model="m")
RESP = shapes.responses_text_stream(["alpha ", "beta ", "gamma ", "delta"], model="r")


pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # see conftest.py


def script() -> dict:
    return {
        "m": Episode(paced(CHAT, gap=0.01)),
        "r": Episode(paced(RESP, gap=0.01)),
        # retry-after-ms is read first by the SDK, so the retry is quick and the test stays fast
        "flaky": [
            error_episode(429, "slow down", type="rate_limit_exceeded", code="rate_limit_exceeded", retry_after_ms=30),
            Episode([Send(f) for f in CHAT]),
        ],
        "down": [error_episode(503, "overloaded", retry_after_ms=10), Episode([Send(f) for f in RESP])],
        "never": error_episode(400, "bad request", type="invalid_request_error", param="messages"),
    }


@pytest.fixture
def server():
    with StandIn(script()) as s:
        yield s


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="stand-in", max_retries=0, timeout=10) as c:
        yield c


def test_chat_completions_stream_with_usage(server, client):
    completions = client.chat.completions
    chunks = list(completions.create(model="m", messages=ASK, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello w\u00f6rld"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(WORDS)
    server.wait_idle()
    (rec,) = server.records()
    assert rec.json["stream"] is True and rec.json["stream_options"] == {"include_usage": True}
    assert rec.headers["authorization"] == "Bearer stand-in"


def test_chat_completions_non_streaming(client):
    done = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert done.choices[0].message.content == "Hello w\u00f6rld"
    assert done.usage is not None and done.usage.completion_tokens == len(WORDS)


def test_responses_stream(client):
    events = list(client.responses.create(model="r", input="hi", stream=True))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "alpha beta gamma delta"
    assert events[-1].response.output_text == deltas
    assert [e.sequence_number for e in events] == list(range(len(RESP)))


def test_responses_stream_helper_accumulates(client):
    with client.responses.stream(model="r", input="hi") as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.output_text == "alpha beta gamma delta" and final.status == "completed"


def test_sdk_retries_a_429_then_streams(server):
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=2) as client:
        t0 = time.perf_counter()
        stream = client.chat.completions.create(model="flaky", messages=ASK, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        elapsed = time.perf_counter() - t0
    assert text == "Hello w\u00f6rld"
    assert server.requests_for("flaky") == 2
    assert [r.status for r in server.records("flaky")] == [429, 200]
    assert elapsed >= 0.03  # it waited the retry-after-ms the server asked for


def test_sdk_retries_a_503_for_responses(server):
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=1) as client:
        events = list(client.responses.create(model="down", input="hi", stream=True))
    assert events[-1].type == "response.completed"
    assert [r.status for r in server.records("down")] == [503, 200]


def test_sdk_without_retries_raises_the_scripted_error(server, client):
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="flaky", messages=ASK, stream=True)
    assert info.value.status_code == 429 and info.value.code == "rate_limit_exceeded"
    assert "slow down" in str(info.value)
    assert info.value.response.headers["retry-after-ms"] == "30"


def test_sdk_never_retries_a_400(server):
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=3) as client:
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="never", messages=ASK, stream=True)
    assert info.value.param == "messages"
    assert server.requests_for("never") == 1


def test_sdk_unknown_model_is_not_found(client):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-nothing", messages=ASK, stream=True)
    assert info.value.code == "model_not_found"


def test_async_sdk_streams(server):
    async def run() -> str:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=2) as client:
            stream = await client.chat.completions.create(model="flaky", messages=ASK, stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(run()) == "Hello w\u00f6rld"
    assert server.requests_for("flaky") == 2
