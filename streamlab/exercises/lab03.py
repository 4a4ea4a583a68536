"""Exercise checks for lab 03 (two dialects: rebuild the answer from deltas, say how the stream ended).

* 03.1 `collect_tool_calls(chunks)`: a tool-call accumulator. It gets the decoded Chat Completions chunks
  of one stream (dicts, `[DONE]` already left out) and returns `{tool index: {"id", "name", "arguments"}}`
  for choice 0, every string concatenated from its fragments.
* 03.2 `classify(datas, cancelled=False)`: the outcome of a Chat Completions stream. It gets the `data` string
  of every event in order (the literal `[DONE]` included, if it came) and whether the caller stopped
  reading, and returns "complete", "incomplete", "failed", "truncated" or "cancelled".
* 03.3 `split_reasoning(chunks)`: a reasoning model's thinking kept apart from its answer. It gets the decoded
  chunks of one stream and returns `(reasoning, answer)` for choice 0: the thinking from `delta.reasoning_content`
  or `delta.reasoning` (the same text in both fields of one delta counted once), the answer from `delta.content`.

The cases are built with `streamlab.core.shapes` and the expected answers come from what was streamed (the
builders' inputs) or from `streamlab.core.accumulate`, never typed in by hand.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from streamlab.core import shapes
from streamlab.core.accumulate import ChatAccumulator
from streamlab.core.errors import ErrorInStream
from streamlab.core.sse import parse
from streamlab.exercises import NotAttempted, exercise

_THREE_CALLS = (
    ("call_1", "lookup", ('{"q": ', '"caf\u00e9"}')),
    ("call_2", "convert", ('{"from": "EUR",', ' "to": "NOK"', "}")),
    ("call_3", "now", ("{}",)),
)


def _datas(frames: list[bytes]) -> list[str]:
    """The `data` of every message event of a stream, in order (what a client's SSE parser yields)."""
    events, _cut = parse(b"".join(frames))
    return [e.data for e in events if e.event == "message"]


def _chunks(frames: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(d) for d in _datas(frames) if d != "[DONE]"]


def _expected_calls(calls: tuple[tuple[str, str, tuple[str, ...]], ...]) -> dict[int, dict[str, str]]:
    return {k: {"id": cid, "name": name, "arguments": "".join(p)} for k, (cid, name, p) in enumerate(calls)}


def _call(label: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call the learner's function on one case; if it crashes, say which case did it."""
    try:
        return fn(*args)
    except (NotAttempted, NotImplementedError):
        raise  # a stub: "not attempted yet"
    except Exception as exc:
        raise AssertionError(f"{label}: your code raised {type(exc).__name__}: {exc}") from exc


TOOL_CASES: list[tuple[str, list[bytes], dict[int, dict[str, str]], str]] = [
    (
        "two calls, fragments interleaved",
        shapes.chat_tool_call_stream(),
        _expected_calls(shapes.DEFAULT_TOOL_CALLS),
        "key each fragment by its 'index' field, not by the order fragments arrive in",
    ),
    (
        "two calls, one after the other",
        shapes.chat_tool_call_stream(interleave=False),
        _expected_calls(shapes.DEFAULT_TOOL_CALLS),
        "concatenate every 'arguments' fragment of a call",
    ),
    (
        "id and name split across fragments, id late",
        shapes.chat_tool_call_stream(split_header=True),
        _expected_calls(shapes.DEFAULT_TOOL_CALLS),
        "'id' and 'function.name' may be missing from the first fragment and arrive in pieces: concatenate them too",
    ),
    (
        "three calls",
        shapes.chat_tool_call_stream(_THREE_CALLS),
        _expected_calls(_THREE_CALLS),
        "handle any number of calls",
    ),
    (
        "a plain text answer (no tool calls)",
        shapes.chat_text_stream(["Hi"]),
        {},
        "a stream without tool_calls gives an empty dict (and 'tool_calls' may be absent or null in a delta)",
    ),
]


@exercise("03.1", "collect_tool_calls")
def check_tool_calls(fn: Any) -> None:
    if fn is Ellipsis:
        raise NotAttempted
    if not callable(fn):
        raise AssertionError("collect_tool_calls should be a function taking a list of chunk dicts")
    for label, frames, want, hint in TOOL_CASES:
        got = _call(label, fn, _chunks(frames))
        if not isinstance(got, dict):
            raise AssertionError(f"{label}: return a dict {{tool index: call}}, got {type(got).__name__}")
        if sorted(got) != sorted(want):
            raise AssertionError(f"{label}: expected tool indexes {sorted(want)}, got {sorted(got)!r}; {hint}")
        for k in sorted(want):
            call = got[k]
            if not isinstance(call, dict):
                raise AssertionError(f"{label}: call {k} should be a dict with id, name, arguments")
            for field in ("id", "name", "arguments"):
                if call.get(field) != want[k][field]:
                    raise AssertionError(
                        f"{label}: call {k} {field} is {call.get(field)!r}, expected {want[k][field]!r}; {hint}"
                    )


def _cut(frames: list[bytes], n: int) -> list[bytes]:
    return frames[:n]


def _no_finish(frames: list[bytes]) -> list[bytes]:
    return frames[:-2] + frames[-1:]  # [DONE] kept, the finish chunk dropped (usage not requested)


_TEXT = ["Hel", "lo"]

OUTCOME_CASES: list[tuple[str, list[bytes], bool]] = [
    ("a normal answer", shapes.chat_text_stream(_TEXT), False),
    ("a normal answer without usage", shapes.chat_text_stream(_TEXT, include_usage=False), False),
    ("tool calls", shapes.chat_tool_call_stream(), False),
    ("the token limit was reached", shapes.chat_text_stream(_TEXT, finish_reason="length"), False),
    ("the content filter stopped it", shapes.chat_text_stream(_TEXT, finish_reason="content_filter"), False),
    ("[DONE] but no finish_reason", _no_finish(shapes.chat_text_stream(_TEXT, include_usage=False)), False),
    ("an error frame after some text", shapes.chat_error_stream(_TEXT), False),
    ("an error frame, then [DONE]", shapes.chat_error_stream(_TEXT, then_done=True), False),
    ("the connection dropped after two chunks", _cut(shapes.chat_text_stream(_TEXT), 2), False),
    ("finished, but the usage chunk and [DONE] never came", _cut(shapes.chat_text_stream(_TEXT), 4), False),
    ("the caller stopped reading after two chunks", _cut(shapes.chat_text_stream(_TEXT), 2), True),
    ("the caller stopped reading, but only after [DONE]", shapes.chat_text_stream(_TEXT), True),
    (
        "n=2, choice 1 hit the token limit",
        shapes.chat_multi_choice_stream([["a"], ["b"]], finish_reasons=["stop", "length"]),
        False,
    ),
]


def expected_outcome(frames: list[bytes], cancelled: bool) -> str:
    """The reference answer for 03.2, from streamlab's own ChatAccumulator."""
    acc = ChatAccumulator()
    events, _cut = parse(b"".join(frames))
    try:
        for ev in events:
            acc.feed(ev)
    except ErrorInStream:
        pass
    if cancelled:
        acc.cancel()
    return str(acc.outcome())


@exercise("03.2", "classify")
def check_classify(fn: Callable[[list[str], bool], Any] | Any) -> None:
    if fn is Ellipsis:
        raise NotAttempted
    if not callable(fn):
        raise AssertionError("classify should be a function (datas, cancelled) -> outcome string")
    wrong = []
    for label, frames, cancelled in OUTCOME_CASES:
        want = expected_outcome(frames, cancelled)
        got = _call(f"{label} (cancelled={cancelled})", fn, _datas(frames), cancelled)
        if str(got) != want:
            wrong.append(f"{label}: {want}, not {got!r}")
    if wrong:
        raise AssertionError(f"{len(wrong)} of {len(OUTCOME_CASES)} wrong; first: " + "; ".join(wrong[:2]))


_THINKING = ["The user ", "wants a ", "greeting. ", "Keep it short."]
_ANSWER = ["Hel", "lo", "!"]

REASONING_CASES: list[tuple[str, list[bytes], str]] = [
    (
        "thinking in delta.reasoning_content (DeepSeek, llama.cpp)",
        shapes.chat_reasoning_stream(_THINKING, _ANSWER, field="reasoning_content"),
        "read the thinking from 'reasoning_content'; its chunks say \"content\": null, which adds no answer text",
    ),
    (
        "thinking in delta.reasoning (newer vLLM, Ollama, OpenRouter)",
        shapes.chat_reasoning_stream(_THINKING, _ANSWER, field="reasoning"),
        "servers use two field names: read 'reasoning' as well as 'reasoning_content'",
    ),
    (
        "the same thinking in both fields of every delta (vLLM's mirror)",
        shapes.chat_reasoning_stream(_THINKING, _ANSWER, field="both"),
        "when both fields carry the same text in one delta, it is one piece: keep it once, never twice",
    ),
    (
        "a plain answer, no thinking",
        shapes.chat_text_stream(_ANSWER),
        "a stream without reasoning gives an empty reasoning string",
    ),
    (
        "thinking only, cut by the token limit before any answer",
        shapes.chat_reasoning_stream(_THINKING, [], finish_reason="length"),
        "a model can spend its whole budget thinking: the answer is then empty, not the thinking",
    ),
]


def expected_split(frames: list[bytes]) -> tuple[str, str]:
    """The reference answer for 03.3, from streamlab's own ChatAccumulator: (reasoning, answer) of choice 0."""
    acc = ChatAccumulator()
    events, _cut = parse(b"".join(frames))
    for ev in events:
        acc.feed(ev)
    return acc.reasoning.get(0, ""), acc.text.get(0, "")


@exercise("03.3", "split_reasoning")
def check_split_reasoning(fn: Any) -> None:
    if fn is Ellipsis:
        raise NotAttempted
    if not callable(fn):
        raise AssertionError("split_reasoning should be a function taking a list of chunk dicts")
    for label, frames, hint in REASONING_CASES:
        want = expected_split(frames)
        got = _call(label, fn, _chunks(frames))
        if not isinstance(got, tuple) or len(got) != 2:
            raise AssertionError(f"{label}: return a pair (reasoning, answer), got {got!r}")
        for part, mine, right in zip(("reasoning", "answer"), got, want):
            if mine != right:
                raise AssertionError(f"{label}: the {part} is {mine!r}, expected {right!r}; {hint}")
