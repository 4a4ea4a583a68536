"""The fast read of Chat chunks (`streamlab.core.pieces.OneHole`, `learn_hole`, `LearnedShape`): exact, or not used.

A chunk that is the JSON of the text chunk before it but for its text is read by comparing its two ends and
scanning one string. Every test here holds the fast accumulator against the same accumulator with learning
turned off (`Slow`), event by event: the same state, the same exceptions with the same messages. The
fast path must also really be taken where it can be (`hits`), or these tests would prove nothing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlab.core import pieces, shapes
from streamlab.core.accumulate import ChatAccumulator
from streamlab.core.pieces import LearnedShape, OneHole, learn_hole
from streamlab.core.sse import SSEEvent, SSEParser

CONTENT = ("choices", 0, "delta", "content")


class Slow(ChatAccumulator):
    """The accumulator that never learns a shape: every chunk decoded whole (the reference)."""

    def _learn(self, data: str, obj: dict[str, Any]) -> None:
        pass


def state(acc: ChatAccumulator) -> dict[str, Any]:
    return {
        "text": acc.text,
        "refusal": acc.refusal,
        "role": acc.role,
        "finish": acc.finish_reason,
        "calls": {k: (c.id, c.name, c.arguments) for k, c in acc.tool_calls.items()},
        "usage": acc.usage,
        "usage_chunks": acc.usage_chunks,
        "chunks": acc.chunks,
        "events": acc.events,
        "done": acc.saw_done,
        "late": acc.late_events,
        "ignored": acc.ignored_events,
        "choices": acc.choices,
        "error": acc.error,
        "outcome": acc.outcome(),
    }


def feed_both(datas: list[str], events: list[str] | None = None) -> ChatAccumulator:
    """Feed the same events to a fast and a slow accumulator; assert they agree after every one."""
    fast, slow = ChatAccumulator(), Slow()
    for i, data in enumerate(datas):
        event = SSEEvent(event=(events[i] if events else "message"), data=data)
        outcomes = []
        for acc in (fast, slow):
            try:
                acc.feed(event)
                outcomes.append(None)
            except Exception as exc:  # noqa: BLE001 - compared, type and message
                outcomes.append((type(exc), str(exc)))
        assert outcomes[0] == outcomes[1], (i, data)
        assert state(fast) == state(slow), (i, data)
    return fast


def chunk(
    content: Any, *, index: int = 0, extra: str = "", finish: Any = None, role: str | None = None, usage: Any = None
) -> str:
    delta: dict[str, Any] = {"content": content}
    if role is not None:
        delta = {"role": role, **delta}
    return (
        json.dumps(
            {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}],
                "usage": usage,
            },
            ensure_ascii=False,
        )
        + extra
    )


def test_a_plain_stream_is_read_fast_and_exactly() -> None:
    frames = shapes.chat_text_stream([f"w{i} \u00e9\U0001f642 " for i in range(200)], model="m")
    parser = SSEParser()
    datas = [e.data for f in frames for e in parser.feed(f)]
    fast = feed_both(datas)
    assert fast._shape.hole is not None and fast._shape.hole.hits >= 190  # nearly every text chunk, fast
    assert fast.outcome().value == "complete"


def test_the_hole_reads_any_string_token_and_nothing_else() -> None:
    text = chunk("hi")
    hole = learn_hole(text, json.loads(text), CONTENT)
    assert hole is not None
    for value in ["", 'a"b', "\\", "\n\t\u2028", "\u00e9\U0001f642", "}]", '","content":"x']:
        assert hole.read(chunk(value)) == value
    assert hole.read(chunk("a\\u00e9").replace("\\\\u00e9", "\\u00e9")) == "a\u00e9"  # an escape in the text
    for bad in ['"a","content":"b"', '"a" "b"', '"a\x01"', '"a\\x"', '"a', "1", "null", '"a"+"b"']:
        assert hole.read(text.replace('"hi"', bad)) is None, bad


def test_chunks_near_the_shape_decode_as_json_would() -> None:
    """Ends that match but a middle that is not one string token: the slow way, with its result or its error."""
    base = chunk("hi")
    datas = [
        chunk("a"),
        chunk("b"),  # learnt, then read fast
        base.replace('"hi"', '"x","content":"y"'),  # a duplicate key: the last wins
        base.replace('"hi"', '"bad\x01"'),  # a control character: not JSON
        chunk("c"),
    ]
    feed_both(datas[:3])
    feed_both(datas)  # the FrameError of the fourth, the same from both


def test_what_a_repeat_could_change_is_never_learnt() -> None:
    """Role, finish reason, usage: chunks that carry them are read the slow way, every time."""
    datas = [
        chunk("", role="assistant"),
        chunk("a"),
        chunk("b"),
        chunk("c", role="tool"),
        chunk("d"),
        chunk("e", usage={"total_tokens": 3}),
        chunk("f"),
        chunk("g", finish="stop"),
        "[DONE]",
    ]
    fast = feed_both(datas)
    assert fast.role == {0: "tool"} and fast.usage == {"total_tokens": 3}


def test_a_shadowed_duplicate_key_is_not_the_hole() -> None:
    text = '{"choices":[{"index":0,"delta":{"content":"a","content":"a"}}]}'
    hole = learn_hole(text, json.loads(text), CONTENT)
    assert hole is not None and hole.prefix.endswith('"a","content":')
    assert hole.read(text.replace(':"a"}', ':"zz"}')) == "zz"


def test_no_hole_when_the_key_is_written_with_an_escape() -> None:
    text = '{"choices":[{"index":0,"delta":{"\\u0063ontent":"a"}}]}'
    assert learn_hole(text, json.loads(text), CONTENT) is None
    feed_both([text, text.replace('"a"', '"b"')])


def test_shapes_that_keep_changing_are_learnt_less_and_less(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = pieces.learn_hole

    def counting(*args: Any) -> OneHole | None:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(pieces, "learn_hole", counting)
    datas = [chunk(f"t{i}", extra=" " * (i % 7)) for i in range(1000)]  # trailing blanks: a new shape most times
    feed_both(datas)
    assert len(calls) < 40


def test_two_choices_taking_turns_stay_exact() -> None:
    feed_both(
        [chunk(f"t{i}", index=i % 2) for i in range(300)]
        + [chunk(None, index=0, finish="stop"), chunk(None, index=1, finish="stop"), "[DONE]"]
    )


def test_a_learnt_shape_serves_until_the_shape_changes() -> None:
    shape = LearnedShape()
    text = chunk("a")
    shape.learn(text, json.loads(text), CONTENT, 0)
    assert shape.hole is not None and shape.key == 0
    for i in range(5):
        assert shape.hole.read(chunk(str(i))) == str(i)
    other = chunk("a", extra=" ")
    shape.learn(other, json.loads(other), CONTENT, 0)  # it served: the new shape is learnt at once
    assert shape.hole is not None and shape.hole.read(chunk("z", extra=" ")) == "z"


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            texts.map(chunk),
            texts.map(lambda t: chunk(t, role="assistant")),
            texts.map(lambda t: chunk(t, finish="length")),
            texts.map(lambda t: chunk(t, index=1)),
            texts.map(lambda t: chunk(t, extra="  ")),
            texts.map(lambda t: chunk(t).replace('"content":', '"content" :')),
            texts.map(lambda t: chunk(t)[:-3]),  # cut JSON
            texts.map(lambda t: chunk(t).replace('"delta":{', '"delta":{"refusal":"no",')),
            st.just("[DONE]"),
        ),
        max_size=40,
    )
)
def test_any_mix_of_chunks_reads_the_same_fast_and_slow(datas: list[str]) -> None:
    feed_both(datas)
