"""The synthetic stream shapes: documented framing, and accepted by the official SDK's own types.

Every builder's output is parsed back with our SSE parser and validated against the pydantic models of
the `openai` package (ChatCompletionChunk, ChatCompletion, ResponseStreamEvent, Response), so a shape
that drifts from the API reference fails here.
"""

from __future__ import annotations

import json

import pydantic
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent

from streamlab.core import shapes
from streamlab.core.sse import SSEEvent, parse

RESPONSE_EVENT = pydantic.TypeAdapter(ResponseStreamEvent)
PIECES = ["Hel", "lo", " w\u00f6rld", " \U0001f642"]


def events_of(frames: list[bytes]) -> list[SSEEvent]:
    events, cut = parse(b"".join(frames))
    assert not cut
    return events


def chunks_of(frames: list[bytes], done: bool = True) -> list[dict]:
    """The JSON chunks of a Chat stream, checking it ends with exactly one [DONE] (or none if not `done`)."""
    events = events_of(frames)
    assert [e.data for e in events].count("[DONE]") == (1 if done else 0)
    assert (events[-1].data == "[DONE]") == done
    return [json.loads(e.data) for e in events if e.event == "message" and e.data != "[DONE]"]


CHAT_STREAMS = {
    "text": lambda: shapes.chat_text_stream(PIECES),
    "text-no-usage": lambda: shapes.chat_text_stream(PIECES, include_usage=False),
    "text-length": lambda: shapes.chat_text_stream(PIECES, finish_reason="length"),
    "refusal": lambda: shapes.chat_refusal_stream(["I can't ", "help with that."]),
    "tools": lambda: shapes.chat_tool_call_stream(),
    "tools-split-header": lambda: shapes.chat_tool_call_stream(split_header=True),
    "n=3": lambda: shapes.chat_multi_choice_stream([["a", "b"], ["c"], ["d", "e", "f"]]),
    **{f"variant-{v}": (lambda v=v: shapes.chat_variant_stream(PIECES, v)) for v in shapes.CHAT_VARIANTS},
}

RESPONSES_STREAMS = {
    "text": lambda: shapes.responses_text_stream(PIECES),
    "incomplete": lambda: shapes.responses_text_stream(PIECES, terminal="response.incomplete"),
    "failed": lambda: shapes.responses_text_stream(PIECES, terminal="response.failed"),
    "function-call": lambda: shapes.responses_function_call_stream(['{"city":', ' "Oslo"}']),
    "refusal": lambda: shapes.responses_frames(shapes.responses_refusal_events(["No", "pe"])),
    "error": lambda: shapes.responses_error_stream(["Hi"]),
}


def test_sse_frame_layout() -> None:
    assert shapes.sse_frame("x") == b"data: x\n\n"
    assert shapes.sse_frame("a\nb", event="e", id="7") == b"event: e\nid: 7\ndata: a\ndata: b\n\n"
    assert parse(shapes.sse_frame("a\r\nb\rc"))[0] == [SSEEvent("message", "a\nb\nc", "")]
    assert shapes.sse_comment() == b": ping\n\n"
    assert parse(shapes.sse_comment() + shapes.sse_frame("x"))[0] == [SSEEvent("message", "x", "")]
    with pytest.raises(ValueError, match="event field"):
        shapes.sse_frame("x", event="a\nb")
    with pytest.raises(ValueError, match="comment"):
        shapes.sse_comment("a\nb")


def test_multibyte_characters_are_utf8_on_the_wire() -> None:
    raw = b"".join(shapes.chat_text_stream(PIECES))
    assert "\U0001f642".encode() in raw and b"\\u" not in raw


@pytest.mark.parametrize("name", sorted(CHAT_STREAMS))
def test_chat_chunks_validate_against_the_sdk(name: str) -> None:
    frames = CHAT_STREAMS[name]()
    assert all(f.endswith(b"\n\n") for f in frames)
    for chunk in chunks_of(frames, done="error" not in name):
        if "error" in chunk:
            assert set(chunk["error"]) == {"message", "type", "param", "code"}
            continue
        ChatCompletionChunk.model_validate(chunk)
        assert chunk["object"] == "chat.completion.chunk"


@pytest.mark.parametrize("name", sorted(RESPONSES_STREAMS))
def test_responses_events_validate_against_the_sdk(name: str) -> None:
    events = events_of(RESPONSES_STREAMS[name]())
    numbers = []
    for ev in events:
        body = json.loads(ev.data)
        assert ev.event == body["type"], "the event: line repeats the JSON type"
        RESPONSE_EVENT.validate_python(body)
        numbers.append(body["sequence_number"])
    assert numbers == list(range(len(events)))


def test_chat_text_stream_frames_in_order() -> None:
    chunks = chunks_of(shapes.chat_text_stream(PIECES, prompt_tokens=5))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"]["content"] for c in chunks[1:-2]] == PIECES
    assert chunks[-2]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}
    assert all(c["usage"] is None for c in chunks[:-1])
    assert len({c["id"] for c in chunks}) == 1 and len({c["created"] for c in chunks}) == 1


def test_usage_chunk_only_when_requested() -> None:
    chunks = chunks_of(shapes.chat_text_stream(PIECES, include_usage=False))
    assert all("usage" not in c for c in chunks)
    assert all(c["choices"] for c in chunks)


def test_tool_call_fragments() -> None:
    chunks = chunks_of(shapes.chat_tool_call_stream())
    frags = [f for c in chunks for ch in c["choices"] for f in ch["delta"].get("tool_calls", [])]
    # call 0 has an opening and 3 argument fragments, call 1 an opening and 2: dealt round-robin
    assert [f["index"] for f in frags] == [0, 1, 0, 1, 0, 1, 0]
    assert all(set(f) == {"index", "function"} for f in frags[2:]), "later fragments carry only index + arguments"
    for k, (call_id, name, pieces) in enumerate(shapes.DEFAULT_TOOL_CALLS):
        mine = [f for f in frags if f["index"] == k]
        assert mine[0]["id"] == call_id and mine[0]["function"]["name"] == name
        assert "".join(f["function"].get("arguments", "") for f in mine) == "".join(pieces)
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_split_header_sends_the_id_late_and_in_pieces() -> None:
    chunks = chunks_of(shapes.chat_tool_call_stream(split_header=True, interleave=False))
    frags = [f for c in chunks for ch in c["choices"] for f in ch["delta"].get("tool_calls", [])]
    first = [f for f in frags if f["index"] == 0]
    assert "id" not in first[0]
    assert "".join(f.get("id", "") for f in first) == "call_a"
    assert "".join(f.get("function", {}).get("name", "") for f in first) == "get_weather"


def test_multi_choice_interleaves_and_finishes_each_choice() -> None:
    chunks = chunks_of(shapes.chat_multi_choice_stream([["a", "b"], ["c"]], finish_reasons=["stop", "length"]))
    indexes = [c["choices"][0]["index"] for c in chunks if c["choices"]]
    assert indexes[:4] == [0, 1, 0, 1]
    finishes = {
        c["choices"][0]["index"]: c["choices"][0]["finish_reason"]
        for c in chunks
        if c["choices"] and c["choices"][0]["finish_reason"]
    }
    assert finishes == {0: "stop", 1: "length"}
    with pytest.raises(ValueError, match="2 answers but 1 finish"):
        shapes.chat_multi_choice_stream([["a"], ["b"]], finish_reasons=["stop"])


def test_variants_each_change_what_they_say() -> None:
    vllm = chunks_of(shapes.chat_variant_stream(PIECES, "vllm-continuous-usage"))
    assert all(isinstance(c["usage"], dict) for c in vllm)
    assert [c["usage"]["completion_tokens"] for c in vllm] == [0, 1, 2, 3, 4, 4, 4]
    ollama = chunks_of(shapes.chat_variant_stream(PIECES, "ollama-role-every-chunk"))
    assert all(c["choices"][0]["delta"]["role"] == "assistant" for c in ollama if c["choices"])
    lite = chunks_of(shapes.chat_variant_stream(PIECES, "litellm-usage-in-choice"))
    assert lite[-1]["choices"] and lite[-1]["usage"]["completion_tokens"] == 4
    assert "finish_reason" not in lite[0]["choices"][0]
    norole = chunks_of(shapes.chat_variant_stream(PIECES, "no-role-chunk"))
    assert all("role" not in c["choices"][0]["delta"] for c in norole if c["choices"])
    n_frames = len(shapes.chat_text_stream(PIECES))  # one ping before each frame, none after [DONE]
    raw = b"".join(shapes.chat_variant_stream(PIECES, "ping-comments"))
    assert raw.count(b": ping\n\n") == n_frames and raw.endswith(b"data: [DONE]\n\n")
    pings = [e for e in events_of(shapes.chat_variant_stream(PIECES, "ping-events")) if e.event == "ping"]
    assert len(pings) == n_frames
    assert chunks_of(shapes.chat_variant_stream(PIECES, "error-int-code"), done=False)[-1]["error"]["code"] == 500
    with pytest.raises(ValueError, match="unknown chat variant"):
        shapes.chat_variant_stream(PIECES, "nope")


def test_error_body_shape() -> None:
    assert shapes.error_body("boom", code=500) == {
        "error": {"message": "boom", "type": "server_error", "param": None, "code": 500}
    }


def test_non_streaming_bodies_validate_and_match_the_streams() -> None:
    text = "".join(PIECES)
    body = ChatCompletion.model_validate(shapes.chat_completion_body(text))
    assert body.choices[0].message.content == text and body.object == "chat.completion"
    resp = Response.model_validate(shapes.response_body(text))
    assert resp.output_text == text and resp.status == "completed"
    final = json.loads(events_of(shapes.responses_text_stream(PIECES))[-1].data)["response"]
    assert Response.model_validate(final).output_text == text


def test_responses_text_event_order_and_terminals() -> None:
    types = [json.loads(e.data)["type"] for e in events_of(shapes.responses_text_stream(["a", "b"]))]
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    last = json.loads(events_of(shapes.responses_text_stream(["a"], terminal="response.incomplete"))[-1].data)
    assert last["response"]["status"] == "incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    last = json.loads(events_of(shapes.responses_text_stream(["a"], terminal="response.failed"))[-1].data)
    assert last["response"]["status"] == "failed" and last["response"]["error"]["code"] == "server_error"
    with pytest.raises(ValueError, match="unknown terminal"):
        shapes.responses_text_stream(["a"], terminal="response.done")


def test_responses_frames_renumbers_inserted_events() -> None:
    events = shapes.responses_text_events(["a"])
    events.insert(2, {"type": "keepalive"})
    frames = shapes.responses_frames(events, start=5, event_lines=False)
    parsed = events_of(frames)
    assert [json.loads(e.data)["sequence_number"] for e in parsed] == list(range(5, 5 + len(events)))
    assert all(e.event == "message" for e in parsed)
    with pytest.raises(ValueError, match="no 'type'"):
        shapes.responses_frames([{"delta": "x"}])
