"""The accumulators: every scenario and provider variant, through the real SSE parser, under many chunkings.

Expected values come from the builders' inputs (the pieces we streamed), never from running the
accumulator on the whole stream first. Each scenario runs whole, byte at a time, and under RUNS seeded
random chunkings (empty chunks included), because a delta accumulator that works on whole frames can
still break when the network cuts a multi-byte character or a frame in two.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from streamlab.core import shapes
from streamlab.core.accumulate import (
    RESPONSES_KNOWN_EVENTS,
    ChatAccumulator,
    Disagreement,
    Replay,
    ResponsesAccumulator,
    ToolCall,
    replay,
)
from streamlab.core.endings import Outcome
from streamlab.core.errors import ErrorInStream, FrameError, SequenceError, ToolCallError
from streamlab.core.harness.fuzz import chunks_at
from streamlab.core.sse import SSEEvent

RUNS = 60
PIECES = ["Hel", "lo", " w\u00f6rld", " \U0001f642", " \u2603\ufe0f"]  # 2-, 3- and 4-byte characters
TEXT = "".join(PIECES)
ARGS = ['{"loc', 'ation": "Par', "is, Fran", 'ce \u00e9t\u00e9"}']


def chunkings(raw: bytes, seed: str) -> Iterator[list[bytes]]:
    """The whole stream, byte at a time, then RUNS random multi-way cuts (seeded by `seed`)."""
    yield [raw]
    yield [raw[i : i + 1] for i in range(len(raw))]
    rng = random.Random(seed)
    for _ in range(RUNS):
        yield chunks_at(raw, [rng.randint(0, len(raw)) for _ in range(rng.randint(1, 20))])


def every_chunking(
    frames: list[bytes], make: Callable[[], ChatAccumulator | ResponsesAccumulator], seed: str, **kw: object
) -> Iterator[Replay]:
    raw = b"".join(frames)
    for chunks in chunkings(raw, seed):
        yield replay(chunks, make(), **kw)  # type: ignore[arg-type]


def prefix(frames: list[bytes], n_frames: int, extra: int = 0) -> bytes:
    """The bytes of the first n frames plus `extra` bytes of the next one (a connection that dropped)."""
    return b"".join(frames[:n_frames]) + frames[n_frames][:extra]


# -- Chat Completions ---------------------------------------------------------------------------


def test_chat_text_with_multibyte_characters() -> None:
    for r in every_chunking(shapes.chat_text_stream(PIECES, prompt_tokens=9), ChatAccumulator, "chat-text"):
        acc = r.accumulator
        assert acc.text == {0: TEXT}
        assert acc.role == {0: "assistant"} and acc.finish_reason == {0: "stop"}
        assert acc.usage == {"prompt_tokens": 9, "completion_tokens": len(PIECES), "total_tokens": 9 + len(PIECES)}
        assert acc.saw_done and r.outcome is Outcome.COMPLETE and not r.cut_mid_event


def test_chat_without_usage_requested() -> None:
    for r in every_chunking(shapes.chat_text_stream(PIECES, include_usage=False), ChatAccumulator, "no-usage"):
        assert r.accumulator.text == {0: TEXT}
        assert r.accumulator.usage is None and r.accumulator.usage_chunks == 0
        assert r.outcome is Outcome.COMPLETE


@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("split_header", [False, True])
def test_chat_parallel_tool_calls(interleave: bool, split_header: bool) -> None:
    frames = shapes.chat_tool_call_stream(interleave=interleave, split_header=split_header)
    for r in every_chunking(frames, ChatAccumulator, f"tools-{interleave}-{split_header}"):
        acc = r.accumulator
        assert r.outcome is Outcome.COMPLETE and acc.finish_reason == {0: "tool_calls"}
        assert sorted(acc.tool_calls) == [(0, 0), (0, 1)]
        for k, (call_id, name, pieces) in enumerate(shapes.DEFAULT_TOOL_CALLS):
            call = acc.tool_calls[(0, k)]
            assert (call.id, call.type, call.name) == (call_id, "function", name)
            assert call.arguments == "".join(pieces)
            assert acc.tool_arguments(0, k) == json.loads("".join(pieces))
            assert acc.tool_call_problem(0, k) is None
        assert acc.text == {}, "content null adds no text"


def test_tool_call_cut_mid_arguments_is_refused() -> None:
    frames = shapes.chat_tool_call_stream()
    cut = prefix(frames, 4, 30)  # inside the fifth frame: call 0 has only its first argument fragment
    for chunks in chunkings(cut, "tool-cut"):
        r = replay(chunks, ChatAccumulator())
        assert r.outcome is Outcome.TRUNCATED and r.cut_mid_event
        assert r.accumulator.tool_calls[(0, 0)].arguments == '{"loc'
        with pytest.raises(ToolCallError, match=r"choice 0 never finished \(outcome truncated\).*5 characters"):
            r.accumulator.tool_arguments(0, 0)


def test_tool_call_finished_by_length_or_invalid_json_is_refused() -> None:
    calls = [("call_x", "f", ['{"a": ', "1"])]  # the model ran out of tokens mid-object
    acc = replay([b"".join(shapes.chat_tool_call_stream(calls, finish_reason="length"))], ChatAccumulator()).accumulator
    assert acc.outcome() is Outcome.INCOMPLETE
    with pytest.raises(ToolCallError, match="finished with 'length'"):
        acc.tool_arguments()
    acc = replay([b"".join(shapes.chat_tool_call_stream(calls))], ChatAccumulator()).accumulator
    assert acc.outcome() is Outcome.COMPLETE
    with pytest.raises(ToolCallError, match="not valid JSON"):
        acc.tool_arguments()
    acc = replay([b"".join(shapes.chat_tool_call_stream([("c", "f", ["[1, 2]"])]))], ChatAccumulator()).accumulator
    with pytest.raises(ToolCallError, match="must be a JSON object, got list"):
        acc.tool_arguments()
    with pytest.raises(ToolCallError, match="no such call"):
        acc.tool_arguments(0, 5)


def test_chat_refusal() -> None:
    pieces = ["I can't ", "help with th\u00e4t."]
    for r in every_chunking(shapes.chat_refusal_stream(pieces), ChatAccumulator, "refusal"):
        assert r.accumulator.refusal == {0: "".join(pieces)} and r.accumulator.text == {}
        assert r.outcome is Outcome.COMPLETE


def test_chat_n_greater_than_one() -> None:
    answers = [["Bon", "jour"], ["Hal", "l\u00f6", "!"], ["\u4f60\u597d"]]
    frames = shapes.chat_multi_choice_stream(answers)
    for r in every_chunking(frames, ChatAccumulator, "n3"):
        assert r.accumulator.text == {i: "".join(a) for i, a in enumerate(answers)}
        assert r.accumulator.finish_reason == {0: "stop", 1: "stop", 2: "stop"}
        assert r.outcome is Outcome.COMPLETE
    acc = replay(
        [b"".join(shapes.chat_multi_choice_stream(answers, finish_reasons=["stop", "length", "stop"]))],
        ChatAccumulator(),
    ).accumulator
    assert acc.outcome() is Outcome.INCOMPLETE and "choice 1: 'length'" in acc.explain()


@pytest.mark.parametrize("reason", ["length", "content_filter"])
def test_chat_finish_reasons_that_mean_incomplete(reason: str) -> None:
    for r in every_chunking(shapes.chat_text_stream(PIECES, finish_reason=reason), ChatAccumulator, reason):
        assert r.outcome is Outcome.INCOMPLETE and r.accumulator.text == {0: TEXT}


def test_done_without_finish_reason_is_incomplete() -> None:
    frames = shapes.chat_text_stream(PIECES, include_usage=False)
    del frames[-2]  # drop the finish chunk, keep [DONE]
    acc = replay([b"".join(frames)], ChatAccumulator()).accumulator
    assert acc.saw_done and acc.outcome() is Outcome.INCOMPLETE
    assert "never got a finish_reason" in acc.explain()
    acc = replay([shapes.chat_done()], ChatAccumulator()).accumulator
    assert acc.outcome() is Outcome.INCOMPLETE and "no choice" in acc.explain()


def test_chat_cut_before_done() -> None:
    frames = shapes.chat_text_stream(PIECES)
    cut = prefix(frames, 3, 25)  # role chunk, two content chunks, and the start of the third
    for chunks in chunkings(cut, "chat-cut"):
        r = replay(chunks, ChatAccumulator())
        assert r.outcome is Outcome.TRUNCATED and r.cut_mid_event
        assert r.accumulator.text == {0: "".join(PIECES[:2])} and r.accumulator.usage is None
    # Cut after the finish chunk: the answer is whole, but no [DONE] and no usage arrived.
    r = replay([prefix(frames, len(frames) - 2)], ChatAccumulator())
    assert r.outcome is Outcome.TRUNCATED and not r.cut_mid_event and r.accumulator.text == {0: TEXT}
    assert r.accumulator.tool_calls == {} and r.accumulator.usage is None


@pytest.mark.parametrize("event", [None, "error"])
@pytest.mark.parametrize("code", ["server_error", 500, None])
def test_chat_error_frame(event: str | None, code: str | int | None) -> None:
    error = shapes.error_body("boom \u26a1", code=code)
    frames = shapes.chat_error_stream(["Hel", "lo"], error, event=event, then_done=True)
    for r in every_chunking(frames, ChatAccumulator, f"err-{event}-{code}"):
        assert isinstance(r.error, ErrorInStream) and r.error.error == error["error"]
        assert r.accumulator.text == {0: "Hello"}, "text received before the error is kept"
        assert r.outcome is Outcome.FAILED and not r.accumulator.saw_done
    with pytest.raises(ErrorInStream, match="boom") as info:
        acc = ChatAccumulator()
        for ev in [SSEEvent(data=json.dumps(error))]:
            acc.feed(ev)
    assert info.value.error["code"] == code
    assert acc.outcome() is Outcome.FAILED and "failed" in acc.explain()
    with pytest.raises(ToolCallError, match="no such call"):
        acc.tool_arguments()


def test_chat_error_event_with_a_plain_text_body() -> None:
    frames = shapes.chat_text_stream(["Hi"])[:2] + [shapes.sse_frame("upstream timed out", event="error")]
    r = replay([b"".join(frames)], ChatAccumulator())
    assert r.error is not None and r.error.error == {"message": "upstream timed out"}
    assert r.outcome is Outcome.FAILED and r.accumulator.text == {0: "Hi"}
    with pytest.raises(ToolCallError, match="the stream failed"):
        acc = replay([b"".join(shapes.chat_tool_call_stream()[:3] + frames[-1:])], ChatAccumulator()).accumulator
        acc.tool_arguments(0, 0)


@pytest.mark.parametrize("variant", sorted(set(shapes.CHAT_VARIANTS) - {"error-int-code"}))
def test_chat_provider_variants_rebuild_the_same_answer(variant: str) -> None:
    frames = shapes.chat_variant_stream(PIECES, variant, prompt_tokens=7)
    for r in every_chunking(frames, ChatAccumulator, variant):
        acc = r.accumulator
        assert acc.text == {0: TEXT}
        assert acc.usage == {"prompt_tokens": 7, "completion_tokens": len(PIECES), "total_tokens": 7 + len(PIECES)}
        assert acc.finish_reason == {0: "stop"} and r.outcome is Outcome.COMPLETE
        assert acc.role == ({} if variant == "no-role-chunk" else {0: "assistant"})
        assert acc.ignored_events == (len(shapes.chat_text_stream(PIECES)) if variant == "ping-events" else 0)


def test_chat_variant_error_with_integer_code() -> None:
    frames = shapes.chat_variant_stream(PIECES, "error-int-code")
    for r in every_chunking(frames, ChatAccumulator, "int-code"):
        assert r.outcome is Outcome.FAILED and r.error is not None and r.error.error["code"] == 500
        assert "server_error/500" in str(r.error)
        assert r.accumulator.text == {0: "".join(PIECES[: len(PIECES) // 2])}


def test_chat_cancel() -> None:
    frames = shapes.chat_text_stream(PIECES)
    r = replay([b"".join(frames)], ChatAccumulator(), stop_after=3)
    assert r.outcome is Outcome.CANCELLED and r.events == 3 and r.accumulator.text == {0: "Hello"}
    # Cancelled wins over truncated: the caller hung up, then the bytes stopped.
    acc = replay([prefix(frames, 3)], ChatAccumulator()).accumulator
    assert acc.outcome() is Outcome.TRUNCATED
    acc.cancel()
    assert acc.outcome() is Outcome.CANCELLED
    # ...but cancelling after [DONE] changes nothing: the answer was already complete.
    acc = replay([b"".join(frames)], ChatAccumulator()).accumulator
    acc.cancel()
    assert acc.outcome() is Outcome.COMPLETE
    assert replay([b"".join(frames)], ChatAccumulator(), stop_after=0).outcome is Outcome.CANCELLED


def test_chat_non_json_frame_names_the_event_and_keeps_the_text() -> None:
    frames = shapes.chat_text_stream(PIECES)
    frames.insert(3, shapes.sse_frame('{"choices": [ oops'))
    acc = ChatAccumulator()
    with pytest.raises(FrameError) as info:
        replay([b"".join(frames)], acc)
    msg = str(info.value)
    assert "event #4" in msg and "not JSON" in msg and "oops" in msg and info.value.text == '{"choices": [ oops'
    assert acc.text == {0: "Hello"}
    with pytest.raises(FrameError, match="not an object"):
        ChatAccumulator().feed(SSEEvent(data="[1, 2]"))
    with pytest.raises(FrameError, match="no integer 'index'"):
        ChatAccumulator().feed(SSEEvent(data='{"choices": [{"delta": {}}]}'))


def test_chat_events_after_done_are_ignored() -> None:
    frames = shapes.chat_text_stream(["a"]) + shapes.chat_text_stream(["b"])
    acc = replay([b"".join(frames)], ChatAccumulator()).accumulator
    assert acc.text == {0: "a"} and acc.late_events == len(frames) // 2


@pytest.mark.parametrize(
    "frames",
    [
        shapes.chat_text_stream(PIECES),
        shapes.chat_tool_call_stream(),
        shapes.chat_tool_call_stream(interleave=False),
        shapes.chat_multi_choice_stream([["a", "b"], ["c"]]),
        shapes.chat_refusal_stream(["no"]),
    ],
    ids=["text", "tools", "tools-in-order", "n2", "refusal"],
)
def test_chat_agrees_with_the_openai_sdk_accumulator(frames: list[bytes]) -> None:
    """The official SDK's own ChatCompletionStreamState, fed the same chunks, rebuilds the same message.

    (Not the split_header shape: openai 3.57's helper asserts that every fragment after the call's `type`
    has a `function` object, which the schema does not promise; a fragment carrying only the rest of the
    id trips that assertion.)
    """
    ours = replay([b"".join(frames)], ChatAccumulator()).accumulator
    state = ChatCompletionStreamState()
    from streamlab.core.sse import parse

    for ev in parse(b"".join(frames))[0]:
        if ev.data != "[DONE]":
            state.handle_chunk(ChatCompletionChunk.model_validate_json(ev.data))
    final = state.get_final_completion()
    for choice in final.choices:
        i = choice.index
        assert (choice.message.content or None) == (ours.text.get(i) or None)
        assert choice.message.refusal == ours.refusal.get(i)
        assert choice.finish_reason == ours.finish_reason[i]
        sdk_calls = [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
        our_calls = [(c.id, c.name, c.arguments) for k, c in sorted(ours.tool_calls.items()) if k[0] == i]
        assert sdk_calls == our_calls
    if ours.usage is not None:
        assert final.usage is not None and final.usage.total_tokens == ours.usage["total_tokens"]


# -- Responses -----------------------------------------------------------------------------------


def test_responses_text() -> None:
    for r in every_chunking(shapes.responses_text_stream(PIECES), ResponsesAccumulator, "resp-text"):
        acc = r.accumulator
        assert acc.text == {(0, 0): TEXT} and acc.disagreements() == []
        assert acc.status == "completed" and r.outcome is Outcome.COMPLETE
        assert acc.usage is not None and acc.usage["output_tokens"] == len(PIECES)
        assert acc.items[0]["status"] == "completed"
        assert acc.last_sequence_number == len(PIECES) + 7  # numbered from 0: 4 events before the deltas, 4 after
        assert acc.unknown_events == 0


def test_responses_without_event_lines() -> None:
    frames = shapes.responses_frames(shapes.responses_text_events(PIECES), event_lines=False)
    for r in every_chunking(frames, ResponsesAccumulator, "no-event-lines"):
        assert r.accumulator.text == {(0, 0): TEXT} and r.outcome is Outcome.COMPLETE


def test_responses_function_call() -> None:
    frames = shapes.responses_function_call_stream(ARGS, name="get_weather", call_id="call_9")
    for r in every_chunking(frames, ResponsesAccumulator, "resp-fc"):
        acc = r.accumulator
        assert acc.arguments == {0: "".join(ARGS)} and acc.disagreements() == []
        assert acc.function_calls()[0]["name"] == "get_weather" and acc.items[0]["call_id"] == "call_9"
        assert acc.call_arguments(0) == json.loads("".join(ARGS)) and acc.call_problem(0) is None
        assert r.outcome is Outcome.COMPLETE


def test_responses_function_call_cut_is_refused() -> None:
    frames = shapes.responses_function_call_stream(ARGS)
    cut = prefix(frames, 5, 40)  # created, in_progress, item added, two argument deltas, part of a third
    for chunks in chunkings(cut, "resp-fc-cut"):
        r = replay(chunks, ResponsesAccumulator())
        assert r.outcome is Outcome.TRUNCATED and r.accumulator.arguments == {0: "".join(ARGS[:2])}
        with pytest.raises(ToolCallError, match=r"output_item.done never arrived \(outcome truncated\)"):
            r.accumulator.call_arguments(0)
    with pytest.raises(ToolCallError, match="no such call"):
        replay([cut], ResponsesAccumulator()).accumulator.call_arguments(3)


def test_responses_lost_delta_is_a_disagreement() -> None:
    events = shapes.responses_function_call_events(ARGS)
    del events[4]  # the second argument delta goes missing; numbering stays increasing
    acc = replay([b"".join(shapes.responses_frames(events))], ResponsesAccumulator()).accumulator
    lost = ARGS[0] + "".join(ARGS[2:])
    assert Disagreement("arguments", 0, lost, "".join(ARGS)) in acc.disagreements()
    with pytest.raises(ToolCallError, match="disagree"):
        acc.call_arguments(0)
    events = shapes.responses_text_events(PIECES)
    del events[5]
    acc = replay([b"".join(shapes.responses_frames(events))], ResponsesAccumulator()).accumulator
    # the .done event, the done content part and the done item each disagree with the deltas
    assert [d.what for d in acc.disagreements()] == ["text", "text", "text"]


def test_responses_refusal() -> None:
    frames = shapes.responses_frames(shapes.responses_refusal_events(["I c\u00e4n't", " help."]))
    for r in every_chunking(frames, ResponsesAccumulator, "resp-refusal"):
        assert r.accumulator.refusal == {(0, 0): "I c\u00e4n't help."} and r.accumulator.text == {}
        assert r.accumulator.disagreements() == [] and r.outcome is Outcome.COMPLETE


def test_responses_incomplete() -> None:
    frames = shapes.responses_text_stream(PIECES, terminal="response.incomplete")
    for r in every_chunking(frames, ResponsesAccumulator, "resp-incomplete"):
        assert r.outcome is Outcome.INCOMPLETE and r.accumulator.incomplete_reason == "max_output_tokens"
        assert r.accumulator.text == {(0, 0): TEXT} and r.accumulator.usage is not None


def test_responses_failed() -> None:
    frames = shapes.responses_text_stream(PIECES, terminal="response.failed")
    for r in every_chunking(frames, ResponsesAccumulator, "resp-failed"):
        assert r.outcome is Outcome.FAILED and r.error is None, "response.failed is a terminal event, not raised"
        assert r.accumulator.error["code"] == "server_error" and r.accumulator.status == "failed"
        assert "response.failed" in r.accumulator.explain()


@pytest.mark.parametrize("code", ["server_error", 503, None])
def test_responses_error_event(code: str | int | None) -> None:
    frames = shapes.responses_error_stream(["Hi", " th"], message="overl\u00f6aded", code=code)
    for r in every_chunking(frames, ResponsesAccumulator, f"resp-error-{code}"):
        assert r.error is not None and r.error.error["code"] == code and r.error.error["message"] == "overl\u00f6aded"
        assert r.outcome is Outcome.FAILED and r.accumulator.text == {(0, 0): "Hi th"}


def test_responses_cut_before_terminal() -> None:
    frames = shapes.responses_text_stream(PIECES)
    for n_frames, extra in [(len(frames) - 1, 0), (len(frames) - 1, 30), (6, 10)]:
        cut = prefix(frames, n_frames, extra)
        for chunks in chunkings(cut, f"resp-cut-{n_frames}-{extra}"):
            r = replay(chunks, ResponsesAccumulator())
            assert r.outcome is Outcome.TRUNCATED and r.accumulator.usage is None
            assert r.cut_mid_event == (extra > 0)
            assert TEXT.startswith(r.accumulator.text[(0, 0)])


def test_responses_unknown_event_is_counted_and_ignored() -> None:
    events = shapes.responses_text_events(PIECES)
    events.insert(3, {"type": "keepalive"})
    events.insert(6, {"type": "response.future_feature.delta", "delta": "x"})
    frames = shapes.responses_frames(events)
    frames.insert(2, shapes.sse_comment("ping"))
    for r in every_chunking(frames, ResponsesAccumulator, "unknown"):
        acc = r.accumulator
        assert acc.unknown_events == 2 and acc.unknown_types == {"keepalive": 1, "response.future_feature.delta": 1}
        assert acc.text == {(0, 0): TEXT} and r.outcome is Outcome.COMPLETE


def test_responses_replayed_sequence_number() -> None:
    frames = shapes.responses_text_stream(PIECES)
    frames.insert(6, frames[5])  # the second text delta arrives twice
    acc = ResponsesAccumulator()
    with pytest.raises(SequenceError) as info:
        replay([b"".join(frames)], acc)
    assert (info.value.previous, info.value.got) == (5, 5)
    assert "replayed" in str(info.value) and "5" in str(info.value)
    assert acc.text == {(0, 0): "".join(PIECES[:2])}, "the text before the replay is kept, once"
    frames = shapes.responses_text_stream(PIECES)
    frames[6], frames[7] = frames[7], frames[6]
    with pytest.raises(SequenceError, match="sequence_number went backwards: .* 6, but 7"):
        replay([b"".join(frames)], ResponsesAccumulator())


def test_responses_cancel_and_late_events() -> None:
    frames = shapes.responses_text_stream(PIECES)
    r = replay([b"".join(frames)], ResponsesAccumulator(), stop_after=6)
    assert r.outcome is Outcome.CANCELLED and r.accumulator.text == {(0, 0): "".join(PIECES[:2])}
    acc = replay([b"".join(frames)], ResponsesAccumulator()).accumulator
    acc.cancel()
    assert acc.outcome() is Outcome.COMPLETE
    # after the terminal event, anything more (here the whole stream again, renumbered) is ignored
    more = shapes.responses_frames(shapes.responses_text_events(["x"]), start=100)
    acc = replay([b"".join(frames + more)], ResponsesAccumulator()).accumulator
    assert acc.text == {(0, 0): TEXT} and acc.late_events == len(more)


def test_responses_malformed_events() -> None:
    with pytest.raises(FrameError, match=r"event #1 \(event type 'message'\): data is not JSON"):
        ResponsesAccumulator().feed(SSEEvent(data="data: nope"))
    with pytest.raises(FrameError, match="has no 'type'"):
        ResponsesAccumulator().feed(SSEEvent(data='{"delta": "x"}'))
    with pytest.raises(FrameError, match="needs 'content_index'"):
        ResponsesAccumulator().feed(SSEEvent(data='{"type": "response.output_text.delta", "output_index": 0}'))
    with pytest.raises(FrameError, match="sequence_number must be an integer"):
        ResponsesAccumulator().feed(SSEEvent(data='{"type": "keepalive", "sequence_number": "7"}'))
    acc = ResponsesAccumulator()  # no `type` in the JSON: the `event:` line names it
    acc.feed(SSEEvent("response.output_text.delta", '{"output_index": 0, "content_index": 0, "delta": "hi"}'))
    assert acc.text == {(0, 0): "hi"}


def test_outcome_strings() -> None:
    assert [str(o) for o in Outcome] == ["complete", "incomplete", "failed", "truncated", "cancelled"]
    assert Outcome("truncated") is Outcome.TRUNCATED and Outcome.COMPLETE == "complete"


# -- lab 03 exercise checkers reject the classic mistakes -----------------------------------------


def test_lab03_checkers_reject_wrong_answers() -> None:
    from streamlab.exercises import verdict

    def by_arrival(chunks: list[dict]) -> dict:  # a new call whenever an id shows up: breaks on interleaving
        calls: dict[int, dict[str, str]] = {}
        for chunk in chunks:
            for choice in chunk["choices"]:
                for frag in choice["delta"].get("tool_calls") or []:
                    if frag.get("id"):
                        calls[len(calls)] = {"id": frag["id"], "name": frag["function"]["name"], "arguments": ""}
                    else:
                        calls[len(calls) - 1]["arguments"] += frag["function"].get("arguments", "")
        return calls

    assert "key each fragment by its 'index'" in verdict("03.1", by_arrival)

    def loop_ended(datas: list[str], cancelled: bool) -> str:
        return "complete"

    def done_only(datas: list[str], cancelled: bool) -> str:  # ignores finish reasons, errors and cancel
        return "complete" if "[DONE]" in datas else "truncated"

    assert verdict("03.2", loop_ended).startswith("Exercise 03.2: not yet: 9 of 13 wrong")
    assert "not yet" in verdict("03.2", done_only)
    assert verdict("03.2", lambda d, c: str(ChatAccumulator().outcome())).startswith("Exercise 03.2: not yet")


# -- properties: any text, any cut ----------------------------------------------------------------

pieces_st = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=8)
cuts_st = st.lists(st.integers(min_value=0, max_value=10_000), max_size=25)


@settings(max_examples=150, deadline=None)
@given(pieces=pieces_st, cuts=cuts_st, variant=st.sampled_from(sorted(set(shapes.CHAT_VARIANTS) - {"error-int-code"})))
def test_any_chat_text_survives_any_cut(pieces: list[str], cuts: list[int], variant: str) -> None:
    raw = b"".join(shapes.chat_variant_stream(pieces, variant))
    r = replay(chunks_at(raw, [c % (len(raw) + 1) for c in cuts]), ChatAccumulator())
    assert r.accumulator.text == {0: "".join(pieces)} and r.outcome is Outcome.COMPLETE


@settings(max_examples=150, deadline=None)
@given(pieces=pieces_st, args=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4), cuts=cuts_st)
def test_any_responses_text_and_arguments_survive_any_cut(pieces: list[str], args: dict, cuts: list[int]) -> None:
    raw = b"".join(shapes.responses_text_stream(pieces))
    r = replay(chunks_at(raw, [c % (len(raw) + 1) for c in cuts]), ResponsesAccumulator())
    assert r.accumulator.text == {(0, 0): "".join(pieces)} and r.accumulator.disagreements() == []
    encoded = json.dumps(args, ensure_ascii=False)
    arg_pieces = [encoded[i : i + 3] for i in range(0, len(encoded), 3)]
    raw = b"".join(shapes.responses_function_call_stream(arg_pieces))
    r = replay(chunks_at(raw, [c % (len(raw) + 1) for c in cuts]), ResponsesAccumulator())
    assert r.accumulator.call_arguments(0) == args and r.outcome is Outcome.COMPLETE


# -- hardening: only documented errors, whatever the JSON; linear growth keeps the public attributes -------

DEEP_OR_HUGE = {
    "100,000 open brackets": "[" * 100_000,
    "nesting past the recursion limit, valid JSON": "[" * 5000 + "]" * 5000,
    "a 5,000-digit number": '{"choices": [], "usage": {"n": ' + "1" * 5000 + "}}",
    "a 5,000-digit index": '{"choices": [{"index": ' + "7" * 5000 + "}]}",
}


@pytest.mark.parametrize("name", sorted(DEEP_OR_HUGE))
@pytest.mark.parametrize("make", [ChatAccumulator, ResponsesAccumulator])
def test_deep_or_huge_json_is_a_frame_error_and_keeps_what_came(name: str, make: type) -> None:
    """RecursionError and the int-conversion ValueError used to escape: now a FrameError names the event."""
    acc = make()
    if make is ChatAccumulator:
        first = shapes.sse_frame(shapes.to_json(shapes.chat_chunk([shapes.chat_choice({"content": "kept"})])))
    else:
        first = shapes.responses_frames(
            [{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "kept"}]
        )[0]
    with pytest.raises(FrameError) as info:
        replay([first + shapes.sse_frame(DEEP_OR_HUGE[name])], acc)
    assert info.value.event_number == 2 and "event #2" in str(info.value)
    assert list(acc.text.values()) == ["kept"]


@pytest.mark.parametrize("arguments", ["[" * 100_000, '{"n": ' + "9" * 5000 + "}", "[" * 5000 + "]" * 5000])
def test_deep_or_huge_tool_arguments_are_refused_with_tool_call_error(arguments: str) -> None:
    pieces = [arguments[i : i + 997] for i in range(0, len(arguments), 997)]
    chat = replay([b"".join(shapes.chat_tool_call_stream([("call_x", "f", pieces)]))], ChatAccumulator()).accumulator
    assert chat.outcome() is Outcome.COMPLETE and chat.tool_calls[(0, 0)].arguments == arguments
    with pytest.raises(ToolCallError, match="arguments are"):
        chat.tool_arguments()
    assert chat.tool_call_problem() is not None
    resp = replay([b"".join(shapes.responses_function_call_stream(pieces))], ResponsesAccumulator()).accumulator
    assert resp.arguments == {0: arguments} and resp.disagreements() == []
    with pytest.raises(ToolCallError, match="arguments are"):
        resp.call_arguments(0)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ('{"choices": [{"index": 0, "delta": "text"}]}', "'delta' must be dict"),
        ('{"choices": [{"index": 0, "delta": {"tool_calls": 5}}]}', "'delta.tool_calls' must be list"),
        ('{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]}', "'function' must be"),
        ('{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": 7}]}}]}', "'id' must be str"),
        ('{"choices": [{"index": 0, "delta": {"role": ["assistant"]}}]}', "'delta.role' must be str"),
        ('{"choices": [{"index": 0, "delta": {}, "finish_reason": ["stop"]}]}', "'finish_reason' must be str"),
    ],
)
def test_chat_fields_of_the_wrong_type_are_frame_errors(data: str, problem: str) -> None:
    """Each of these used to raise AttributeError or TypeError (some only later, in outcome())."""
    acc = ChatAccumulator()
    with pytest.raises(FrameError, match=problem):
        acc.feed(SSEEvent(data=data))
    assert acc.outcome() is Outcome.TRUNCATED and acc.explain()


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        ({"type": "response.completed", "response": [1]}, "'response' must be dict"),
        ({"type": "response.incomplete", "response": {"incomplete_details": "max_tokens"}}, "incomplete_details"),
        (
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "function_call", "arguments": 5},
            },
            "'arguments' must be str",
        ),
    ],
)
def test_responses_fields_of_the_wrong_type_are_frame_errors(event: dict, problem: str) -> None:
    acc = ResponsesAccumulator()
    with pytest.raises(FrameError, match=problem):
        acc.feed(SSEEvent(data=json.dumps(event)))
    assert acc.outcome() is Outcome.TRUNCATED and acc.explain()
    done = {"type": "response.output_item.done", "output_index": 1, "item": {"type": "message", "content": 5}}
    acc.feed(SSEEvent(data=json.dumps(done)))  # content that is not a list holds no parts: nothing to compare
    assert acc.disagreements() == []


def test_tool_call_is_still_a_dataclass_with_plain_string_fields() -> None:
    call = ToolCall(0, 1, id="c", name="get", arguments='{"a"')
    call.add("arguments", ": 1}")
    call.add("name", "_weather")
    assert (call.name, call.arguments) == ("get_weather", '{"a": 1}')
    assert call == ToolCall(0, 1, "c", None, "get_weather", '{"a": 1}')
    assert dataclasses.asdict(call)["arguments"] == '{"a": 1}'
    assert "arguments='{\"a\": 1}'" in repr(call)
    assert dataclasses.replace(call, arguments="{}").arguments == "{}" and ToolCall(0, 0).arguments == ""


def test_text_reads_are_plain_dicts_of_strings() -> None:
    acc = replay([b"".join(shapes.chat_text_stream(PIECES))], ChatAccumulator()).accumulator
    assert type(acc.text) is dict and acc.text == {0: TEXT} and acc.text[0] is acc.text[0]  # joined once, kept


# Any JSON at all, in every field the accumulators read.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


def _maybe(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly the expected shape, sometimes any JSON at all (one_of picks its branches evenly)."""
    return strategy | strategy | json_values


_rarely = st.none() | st.none() | st.none() | json_values  # an `error` key ends the stream: keep it rare


_fragment = st.fixed_dictionaries(
    {},
    optional={
        "index": _maybe(st.integers(0, 2)),
        "id": json_values,
        "type": json_values,
        "function": _maybe(st.fixed_dictionaries({}, optional={"name": json_values, "arguments": json_values})),
    },
)
_delta = st.fixed_dictionaries(
    {},
    optional={
        "role": json_values,
        "content": json_values,
        "refusal": json_values,
        "tool_calls": _maybe(st.lists(_fragment)),
    },
)
_choice = st.fixed_dictionaries(
    {},
    optional={
        "index": _maybe(st.integers(0, 2)),
        "delta": _maybe(_delta),
        "finish_reason": json_values,
    },
)
chat_objects = st.fixed_dictionaries(
    {},
    optional={
        "choices": _maybe(st.lists(_choice, max_size=3)),
        "usage": json_values,
        "error": _rarely,
    },
)
_RESPONSES_TYPES = sorted(RESPONSES_KNOWN_EVENTS) + ["response.unknown"]
responses_objects = st.fixed_dictionaries(
    {"type": _maybe(st.sampled_from(_RESPONSES_TYPES))},
    optional={
        "sequence_number": _maybe(st.integers(0, 50)),
        "output_index": _maybe(st.integers(0, 2)),
        "content_index": _maybe(st.integers(0, 2)),
        "delta": json_values,
        "text": json_values,
        "arguments": json_values,
        "refusal": json_values,
        "error": _rarely,
        "part": json_values,
        "item": _maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "type": _maybe(st.sampled_from(["function_call", "message"])),
                    "arguments": json_values,
                    "content": json_values,
                    "status": json_values,
                },
            )
        ),
        "response": _maybe(
            st.fixed_dictionaries(
                {}, optional={"usage": json_values, "incomplete_details": json_values, "error": json_values}
            )
        ),
    },
)


def _read_everything(acc: ChatAccumulator | ResponsesAccumulator) -> None:
    """Every read a caller may make: none of them may raise anything but ToolCallError (from the strict ones)."""
    acc.outcome(), acc.explain(), acc.text, acc.refusal
    if isinstance(acc, ChatAccumulator):
        for call in acc.tool_calls.values():
            repr(call), call.name, call.arguments, acc.tool_call_problem(call.choice, call.index)
    else:
        acc.arguments, acc.disagreements(), acc.function_calls()
        for oi in list(acc.items):
            acc.call_problem(oi)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["message"] * 4 + ["error", "ping"]), chat_objects | chat_objects | json_values),
        max_size=6,
    )
)
def test_any_json_into_chat_raises_only_documented_errors(events: list[tuple[str, object]]) -> None:
    acc = ChatAccumulator()
    for kind, obj in events:
        try:
            acc.feed(SSEEvent(kind, json.dumps(obj)))
        except (FrameError, ErrorInStream):
            pass
        _read_everything(acc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["message"] * 4 + ["error", "response.output_text.delta"]),
            responses_objects | responses_objects | json_values,
        ),
        max_size=8,
    )
)
def test_any_json_into_responses_raises_only_documented_errors(events: list[tuple[str, object]]) -> None:
    acc = ResponsesAccumulator()
    for kind, obj in events:
        try:
            acc.feed(SSEEvent(kind, json.dumps(obj)))
        except (FrameError, ErrorInStream, SequenceError):
            pass
        _read_everything(acc)


def _named_call_repeating_its_name(name: str = "get_weather") -> bytes:
    """A call shaped as llama-cpp-python streams a named tool_choice: id, type and the whole name in every fragment."""
    frames = []
    for piece in ('{"location"', ': "Paris"', "}"):
        frag = {"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": piece}}
        chunk = shapes.chat_chunk([shapes.chat_choice({"tool_calls": [frag]})])
        frames.append(shapes.sse_frame(shapes.to_json(chunk)))
    finish = shapes.chat_chunk([shapes.chat_choice({}, finish_reason="tool_calls")])
    frames.append(shapes.sse_frame(shapes.to_json(finish)))
    return b"".join(frames) + b"data: [DONE]\n\n"


def test_a_name_repeated_whole_in_every_fragment_is_joined_like_the_sdk_but_never_safe_to_run() -> None:
    from streamlab.core.sse import parse

    body = _named_call_repeating_its_name()
    acc = replay([body], ChatAccumulator()).accumulator
    call = acc.tool_calls[(0, 0)]
    state = ChatCompletionStreamState()
    for ev in parse(body)[0]:
        if ev.data != "[DONE]":
            state.handle_chunk(ChatCompletionChunk.model_validate_json(ev.data))
    sdk = state.get_final_completion().choices[0].message.tool_calls[0]
    assert call.name == sdk.function.name == "get_weather" * 3  # joined, as the SDK joins it
    assert call.id == "call_1" and (call.name_fragments, call.name_repeated) == (3, "get_weather")
    problem = acc.tool_call_problem(0, 0)
    assert problem is not None and "every one of its 3 name fragments says 'get_weather'" in problem
    with pytest.raises(ToolCallError, match="no function has that name; do not run it"):
        acc.tool_arguments(0, 0)


def test_a_name_sent_once_or_split_in_different_pieces_is_not_a_repeat() -> None:
    split = b"".join(
        shapes.chat_tool_call_stream([("call_1", "get_weather", ('{"a": 1}',))], split_header=True, interleave=False)
    )
    acc = replay([split], ChatAccumulator()).accumulator
    call = acc.tool_calls[(0, 0)]
    assert (call.name, call.name_fragments, call.name_repeated) == ("get_weather", 2, None)
    assert acc.tool_arguments(0, 0) == {"a": 1}
    once = replay([b"".join(shapes.chat_tool_call_stream())], ChatAccumulator()).accumulator
    assert all(c.name_fragments == 1 and c.name_repeated is None for c in once.tool_calls.values())
