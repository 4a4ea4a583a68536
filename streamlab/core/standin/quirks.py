"""Provider quirks as small composable transformations of a scripted answer (sans-IO core: bytes in, bytes out).

A real OpenAI-compatible server differs from the documented stream in a few specific, reproducible ways:
it leaves `finish_reason` out instead of sending null, repeats the role on every chunk, ignores
`include_usage`, drops the tool-call `index`, sends an error as a field no parser reads. Each such difference
is a `Fault` here: a named function that takes the frames of a documented stream (or an error reply) and
returns them changed, in the spirit of toxiproxy's toxics. A provider profile (`streamlab.core.standin.profiles`) is a
list of faults; the stand-in applies them to whatever episode it would have played.

Frames keep the slot (the scripted `Send` step) they came from, so a transformation keeps the episode's
timing: `frames_of(steps)` takes an episode apart, `steps_from(steps, frames)` puts it back together, and a
frame nobody touched keeps its exact bytes.

Four kinds of fault: "chat" and "responses" faults rewrite the frames of a stream of that dialect; "error"
faults rewrite the error reply to a request the API refuses (an `ErrorEpisode`), possibly into a 200 stream;
"request" faults refuse a request the API accepts (an `ErrorEpisode` instead of the stream, or the episode as it
was), or answer it with another episode before the stream faults run (`responses_tools_ignored`).
`with_pings` is not a fault but a profile's timing: a keep-alive comment every N seconds of the episode, as
sse-starlette writes them under llama-cpp-python's server (`SSE_STARLETTE_PING`).
A fault that `owns_usage` decides itself whether usage is sent; otherwise the documented rule applies (usage
only when `stream_options.include_usage` asks for it).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from streamlab.core.shapes import (
    REASONING_FIELDS,
    RESPONSES_TERMINAL_STATUS,
    chat_text_stream,
    chat_usage,
    error_body,
    responses_frames,
    responses_reasoning_events,
    responses_text_stream,
    sse_comment,
    sse_frame,
    to_json,
)
from streamlab.core.sse import parse
from streamlab.core.standin.script import Episode, ErrorEpisode, KeepAlive, Send, Step, Wait, paced, split_frames

__all__ = [
    "Frame",
    "Context",
    "Fault",
    "FAULTS",
    "frames_of",
    "steps_from",
    "apply_usage_rule",
    "THINKING",
    "AZURE_FILTER_CHUNK",
    "STREAM_OPTIONS_REFUSAL",
    "SSE_STARLETTE_PING",
    "with_pings",
]


@dataclass(frozen=True)
class Frame:
    """One SSE frame of a scripted stream: the `slot` (index of the `Send` step it came from), its scripted
    bytes (`raw`, None once changed), the event's JSON (`obj`, None for a comment, `[DONE]` or a partial
    frame), the `event:` name, and whether it is `[DONE]`."""

    slot: int
    raw: bytes | None
    obj: Any = None
    event: str | None = None
    done: bool = False

    def encode(self) -> bytes:
        if self.raw is not None:
            return self.raw
        if self.done:
            return sse_frame("[DONE]")
        return sse_frame(to_json(self.obj), event=self.event)

    def changed(self, obj: Any) -> Frame:
        """This frame carrying `obj` instead (re-encoded on output)."""
        return replace(self, raw=None, obj=obj)

    @property
    def chunk(self) -> dict[str, Any] | None:
        """The JSON object when this is a Chat chunk (it has a `choices` list), else None."""
        return self.obj if isinstance(self.obj, dict) and isinstance(self.obj.get("choices"), list) else None

    @property
    def usage_only(self) -> bool:
        """A Chat usage chunk: `choices == []` with a usage object."""
        return self.chunk is not None and self.obj["choices"] == [] and isinstance(self.obj.get("usage"), dict)


@dataclass(frozen=True)
class Context:
    """What a fault may know about the request: the `dialect` ("chat" or "responses"), its JSON body, and
    whether the body was `not_json` at all (then `request` is empty)."""

    dialect: str
    request: Mapping[str, Any]
    not_json: bool = False

    @property
    def wants_usage(self) -> bool:
        options = self.request.get("stream_options")
        return self.dialect == "responses" or (isinstance(options, dict) and options.get("include_usage") is True)

    @property
    def streamed(self) -> bool:
        return self.request.get("stream") is True


StreamFix = Callable[[list[Frame], Context], list[Frame]]
ErrorFix = Callable[[ErrorEpisode, Context], "ErrorEpisode | Episode"]
RequestFix = Callable[[Episode, Context], "ErrorEpisode | Episode"]


@dataclass(frozen=True)
class Fault:
    """A named change: `kind` "chat", "responses", "error" or "request", the function that makes it, what it
    `does`, and whether it `owns_usage` (decides by itself when usage is sent)."""

    name: str
    kind: str
    apply: StreamFix | ErrorFix | RequestFix
    does: str
    owns_usage: bool = False


# -- taking an episode apart and putting it back ----------------------------------------------------------------


def _frame(slot: int, raw: bytes) -> Frame:
    events, _ = parse(raw)
    if len(events) != 1:
        return Frame(slot, raw)  # a comment, a partial frame, or something this module does not rewrite
    ev = events[0]
    if ev.data.strip() == "[DONE]":
        return Frame(slot, raw, done=True)
    try:
        obj = json.loads(ev.data)
    except (ValueError, RecursionError):
        obj = None
    return Frame(slot, raw, obj, None if ev.event == "message" else ev.event)


def frames_of(steps: Sequence[Step]) -> list[Frame]:
    """Every frame of every `Send` step, tagged with the step's index."""
    return [_frame(i, raw) for i, step in enumerate(steps) if isinstance(step, Send) for raw in split_frames(step.data)]


def steps_from(steps: Sequence[Step], frames: Sequence[Frame]) -> list[Step]:
    """`steps` with each `Send` replaced by the frames now tagged with its index (dropped when none are)."""
    by_slot: dict[int, list[bytes]] = {}
    for frame in frames:
        by_slot.setdefault(frame.slot, []).append(frame.encode())
    out: list[Step] = []
    for i, step in enumerate(steps):
        if not isinstance(step, Send):
            out.append(step)
        elif by_slot.get(i):
            out.append(Send(b"".join(by_slot[i])))
    return out


def apply_usage_rule(frames: list[Frame], ctx: Context) -> list[Frame]:
    """The documented rule for Chat: without `include_usage`, no usage chunk and no `usage` key at all."""
    if ctx.dialect != "chat" or ctx.wants_usage:
        return frames
    return _without_usage(frames)


def _without_usage(frames: list[Frame]) -> list[Frame]:
    out = []
    for frame in frames:
        if frame.usage_only:
            continue
        if frame.chunk is not None and "usage" in frame.obj:
            frame = frame.changed({k: v for k, v in frame.obj.items() if k != "usage"})
        out.append(frame)
    return out


# -- Chat faults -------------------------------------------------------------------------------------------------


def _map_choices(frames: list[Frame], fix: Callable[[dict[str, Any]], dict[str, Any] | None]) -> list[Frame]:
    """Apply `fix` to a copy of every choice of every chunk; a frame whose choices did not change keeps its bytes."""
    out = []
    for frame in frames:
        chunk = frame.chunk
        if chunk is None or not chunk["choices"]:
            out.append(frame)
            continue
        choices = [fix(json.loads(json.dumps(c))) if isinstance(c, dict) else c for c in chunk["choices"]]
        out.append(frame if choices == chunk["choices"] else frame.changed({**chunk, "choices": choices}))
    return out


def _omit_null_finish(frames: list[Frame], ctx: Context) -> list[Frame]:
    def fix(choice: dict[str, Any]) -> dict[str, Any]:
        if "finish_reason" in choice and choice["finish_reason"] is None:
            del choice["finish_reason"]
        return choice

    return _map_choices(frames, fix)


def _role_every_delta(frames: list[Frame], ctx: Context) -> list[Frame]:
    def fix(choice: dict[str, Any]) -> dict[str, Any]:
        if isinstance(choice.get("delta"), dict) and not choice["delta"].get("role"):
            choice["delta"] = {"role": "assistant", **choice["delta"]}
        return choice

    return _map_choices(frames, fix)


def _no_role(frames: list[Frame], ctx: Context) -> list[Frame]:
    def fix(choice: dict[str, Any]) -> dict[str, Any]:
        if isinstance(choice.get("delta"), dict):
            choice["delta"].pop("role", None)
        return choice

    return _map_choices(frames, fix)


def _tool_finish_stop(frames: list[Frame], ctx: Context) -> list[Frame]:
    def fix(choice: dict[str, Any]) -> dict[str, Any]:
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
        return choice

    return _map_choices(frames, fix)


def _fragments(frames: list[Frame], fix: Callable[[dict[str, Any], dict[int, dict[str, Any]]], None]) -> list[Frame]:
    """Apply `fix(fragment, first fragment by index)` to every tool-call fragment."""
    first: dict[int, dict[str, Any]] = {}

    def each(choice: dict[str, Any]) -> dict[str, Any]:
        for frag in (choice.get("delta") or {}).get("tool_calls") or []:
            if isinstance(frag, dict):
                first.setdefault(frag.get("index", -1), dict(frag))
                fix(frag, first)
        return choice

    return _map_choices(frames, each)


def _tool_call_no_index(frames: list[Frame], ctx: Context) -> list[Frame]:
    return _fragments(frames, lambda frag, first: frag.pop("index", None) and None)


def _tool_id_every_fragment(frames: list[Frame], ctx: Context) -> list[Frame]:
    def fix(frag: dict[str, Any], first: dict[int, dict[str, Any]]) -> None:
        opening = first.get(frag.get("index", -1), {})
        for key in ("id", "type"):
            if key in opening and key not in frag:
                frag[key] = opening[key]

    return _fragments(frames, fix)


def _tool_call_in_one_chunk(frames: list[Frame], ctx: Context) -> list[Frame]:
    """Send each tool call whole, in one chunk, when its last fragment would have come (fragments of one choice)."""
    calls: dict[int, dict[str, Any]] = {}
    tool_frames = [
        k
        for k, f in enumerate(frames)
        if f.chunk and any((c.get("delta") or {}).get("tool_calls") for c in f.obj["choices"] if isinstance(c, dict))
    ]
    if not tool_frames:
        return frames
    for k in tool_frames:
        for choice in frames[k].obj["choices"]:
            for frag in (choice.get("delta") or {}).get("tool_calls") or []:
                call = calls.setdefault(
                    frag.get("index", 0), {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                if "index" in frag:
                    call["index"] = frag["index"]
                call["id"] = call["id"] or frag.get("id")
                fn = frag.get("function") or {}
                call["function"]["name"] += fn.get("name") or ""
                call["function"]["arguments"] += fn.get("arguments") or ""
    first, last = frames[tool_frames[0]], frames[tool_frames[-1]]
    choice = dict(first.obj["choices"][0])
    choice["delta"] = {
        **{k: v for k, v in choice["delta"].items() if k != "tool_calls"},
        "tool_calls": [calls[i] for i in sorted(calls)],
    }
    whole = replace(last, raw=None, obj={**first.obj, "choices": [choice]})
    out = []
    for k, frame in enumerate(frames):
        if k == tool_frames[-1]:
            out.append(whole)
        elif k not in tool_frames:
            out.append(frame)
    return out


def _drop_usage(frames: list[Frame], ctx: Context) -> list[Frame]:
    return _without_usage(frames)


def _usage_on_finish_chunk(frames: list[Frame], ctx: Context) -> list[Frame]:
    """Usage rides on the finish chunk, requested or not; no separate usage chunk."""
    usage = next((f.obj["usage"] for f in frames if f.usage_only), None)
    frames = _without_usage(frames)
    if usage is None:
        pieces = sum(
            1
            for f in frames
            if f.chunk and any((c.get("delta") or {}).get("content") for c in f.obj["choices"] if isinstance(c, dict))
        )
        usage = chat_usage(12, pieces)
    out = []
    placed = False
    for frame in frames:
        chunk = frame.chunk
        if not placed and chunk and any(isinstance(c, dict) and c.get("finish_reason") for c in chunk["choices"]):
            frame, placed = frame.changed({**chunk, "usage": dict(usage)}), True
        out.append(frame)
    return out


def _usage_chunk_with_choice(frames: list[Frame], ctx: Context) -> list[Frame]:
    return [f.changed({**f.obj, "choices": [{"index": 0, "delta": {}}]}) if f.usage_only else f for f in frames]


def _usage_total_wrong(frames: list[Frame], ctx: Context) -> list[Frame]:
    out = []
    for f in frames:
        usage = f.obj.get("usage") if f.chunk else None
        if isinstance(usage, dict) and isinstance(usage.get("total_tokens"), int):
            f = f.changed({**f.obj, "usage": {**usage, "total_tokens": usage["total_tokens"] + 1}})
        out.append(f)
    return out


def _timings(frames: list[Frame], ctx: Context) -> list[Frame]:
    """llama-server's `timings` object next to the usage (a field OpenAI does not send; harmless)."""
    timings = {"prompt_n": 12, "prompt_ms": 35.2, "predicted_n": 10, "predicted_ms": 180.4}
    return [
        f.changed({**f.obj, "timings": timings}) if f.chunk and isinstance(f.obj.get("usage"), dict) else f
        for f in frames
    ]


def _no_done(frames: list[Frame], ctx: Context) -> list[Frame]:
    return [f for f in frames if not f.done]


def _id_changes(frames: list[Frame], ctx: Context) -> list[Frame]:
    out, n = [], 0
    for f in frames:
        if f.chunk is not None and isinstance(f.obj.get("id"), str):
            if n:
                f = f.changed({**f.obj, "id": f"{f.obj['id']}-{n}"})
            n += 1
        out.append(f)
    return out


def _ping_comments(frames: list[Frame], ctx: Context) -> list[Frame]:
    """A `: ping` comment before every frame but the first (what proxies add to keep idle connections open)."""
    out: list[Frame] = []
    for k, f in enumerate(frames):
        if k:
            out.append(Frame(f.slot, sse_comment("ping")))
        out.append(f)
    return out


def _tool_name_every_fragment(frames: list[Frame], ctx: Context) -> list[Frame]:
    """llama-cpp-python (a named tool_choice): the function's whole name in every fragment of the call."""

    def fix(frag: dict[str, Any], first: dict[int, dict[str, Any]]) -> None:
        name = (first.get(frag.get("index", -1), {}).get("function") or {}).get("name")
        if name:
            frag["function"] = {"name": name, **{k: v for k, v in (frag.get("function") or {}).items() if k != "name"}}

    return _fragments(frames, fix)


def _calls_tools(frame: Frame) -> bool:
    return frame.chunk is not None and any(
        isinstance(c, dict) and (c.get("delta") or {}).get("tool_calls") for c in frame.obj["choices"]
    )


def _role_null_in_tool_calls(frames: list[Frame], ctx: Context) -> list[Frame]:
    """llama-cpp-python's tool-call streams: `"role": null` on every delta after the first."""
    if not any(_calls_tools(f) for f in frames):
        return frames
    seen: set[int] = set()

    def fix(choice: dict[str, Any]) -> dict[str, Any]:
        if isinstance(choice.get("delta"), dict) and isinstance(choice.get("index"), int):
            if choice["index"] in seen:
                choice["delta"] = {"role": None, **{k: v for k, v in choice["delta"].items() if k != "role"}}
            seen.add(choice["index"])
        return choice

    return _map_choices(frames, fix)


def _legacy_function_call(frames: list[Frame], ctx: Context) -> list[Frame]:
    """llama-cpp-python: each tool-call fragment is also sent as the deprecated `delta.function_call`."""

    def fix(choice: dict[str, Any]) -> dict[str, Any]:
        delta = choice.get("delta")
        calls = delta.get("tool_calls") if isinstance(delta, dict) else None
        if isinstance(delta, dict) and isinstance(calls, list) and calls and isinstance(calls[0], dict):
            fn = calls[0].get("function") or {}
            delta["function_call"] = {k: fn[k] for k in ("name", "arguments") if k in fn}
        return choice

    return _map_choices(frames, fix)


TEXT_INSTEAD = ["I would", " check the", " weather in", " Paris for", " you."]
"""What a server that ignores tool_choice "required" answers instead of the call."""


def _required_ignored(frames: list[Frame], ctx: Context) -> list[Frame]:
    """llama-cpp-python (gemma chat format): tool_choice "required" (or "auto") is ignored and the model answers
    in text; only a tool_choice that names the function gets a call. The text keeps the answer's slots."""
    if ctx.request.get("tool_choice", "auto") not in ("required", "auto"):
        return frames
    return _tools_ignored(frames, ctx)


def _tools_ignored(frames: list[Frame], ctx: Context) -> list[Frame]:
    """llama-server (`--jinja`, Gemma 270M): every tool_choice is ignored, a named one too, and the model answers
    in text. The text keeps the answer's slots."""
    if not any(_calls_tools(f) for f in frames):
        return frames
    first: dict[str, Any] = next((f.obj for f in frames if f.chunk is not None), {})
    text = [
        _frame(0, raw)
        for raw in chat_text_stream(
            TEXT_INSTEAD,
            include_usage=ctx.wants_usage,
            model=str(first.get("model", "model-a")),
            completion_id=str(first.get("id", "chatcmpl-demo")),
        )
    ]
    slots = [f.slot for f in frames]
    return [replace(f, slot=slots[min(k, len(slots) - 1)]) for k, f in enumerate(text)]


THINKING = ("Counting ", "to five, ", "in words.")
"""What a profile's reasoning model thinks before its answer, one piece per chunk (or delta event)."""


def _content_frame(frame: Frame) -> bool:
    return frame.chunk is not None and any(
        isinstance(c, dict) and ((c.get("delta") or {}).get("content") or (c.get("delta") or {}).get("tool_calls"))
        for c in frame.obj["choices"]
    )


def _reasoning_mix(frames: list[Frame], ctx: Context) -> list[Frame]:
    """Thinking chunks just before the first chunk that carries content or a tool call (in its slot), one in each
    shape servers send: `delta.reasoning_content` (DeepSeek, llama.cpp, older vLLM), `delta.reasoning` (newer
    vLLM, Ollama, OpenRouter), and the same text in both fields (vLLM's compatibility mirror,
    vllm-project/vllm#43933, #34030), each with `"content": null`."""
    k = next((k for k, f in enumerate(frames) if _content_frame(f)), None)
    if k is None:
        return frames
    shapes = (("reasoning_content",), ("reasoning",), REASONING_FIELDS)
    thinking = [
        Frame(
            frames[k].slot,
            None,
            {
                **frames[k].obj,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": None, **dict.fromkeys(names, piece)},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ],
            },
        )
        for piece, names in zip(THINKING, shapes)
    ]
    first = frames[k].obj["choices"][0]
    role = (first.get("delta") or {}).get("role") if isinstance(first, dict) else None
    if role:  # the role opens the message: it moves to the first thinking chunk
        thinking[0].obj["choices"][0]["delta"] = {"role": role, **thinking[0].obj["choices"][0]["delta"]}
        rest = {key: v for key, v in first["delta"].items() if key != "role"}
        frames = [
            *frames[:k],
            frames[k].changed({**frames[k].obj, "choices": [{**first, "delta": rest}]}),
            *frames[k + 1 :],
        ]
    return frames[:k] + thinking + frames[k:]


def _tools_not_streamed(frames: list[Frame], ctx: Context) -> list[Frame]:
    """Ollama with tools in the request (ollama/ollama#9092): no token streaming; the answer's text comes whole
    in one chunk, and each tool call whole in one chunk, where the last piece would have come."""
    if not ctx.request.get("tools"):
        return frames
    frames = _tool_call_in_one_chunk(frames, ctx)
    texts = [
        k
        for k, f in enumerate(frames)
        if f.chunk
        and f.obj["choices"]
        and isinstance(c := f.obj["choices"][0], dict)
        and isinstance((c.get("delta") or {}).get("content"), str)
        and c["delta"]["content"]
    ]
    if len(texts) < 2:
        return frames
    whole = "".join(frames[k].obj["choices"][0]["delta"]["content"] for k in texts)
    last = frames[texts[-1]]
    choice = {**last.obj["choices"][0], "delta": {"content": whole}}
    merged = last.changed({**last.obj, "choices": [choice]})
    return [merged if k == texts[-1] else f for k, f in enumerate(frames) if k not in texts[:-1]]


AZURE_FILTER_CHUNK: dict[str, Any] = {
    "choices": [],
    "created": 0,
    "id": "",
    "model": "",
    "object": "",
    "prompt_filter_results": [
        {
            "prompt_index": 0,
            "content_filter_results": {
                name: {"filtered": False, "severity": "safe"} for name in ("hate", "self_harm", "sexual", "violence")
            },
        }
    ],
}
"""Azure OpenAI's first chunk: the prompt's content-filter results, with `choices: []` and empty id, model and
object (a loop that reads `chunk.choices[0]` fails on it before any text)."""


def _azure_filter_first_chunk(frames: list[Frame], ctx: Context) -> list[Frame]:
    """Azure OpenAI: a first chunk with `choices: []` and `prompt_filter_results` before the answer."""
    return [Frame(frames[0].slot, None, json.loads(json.dumps(AZURE_FILTER_CHUNK)))] + frames if frames else frames


def _usage_over_max_tokens(frames: list[Frame], ctx: Context) -> list[Frame]:
    """A usage count larger than the `max_tokens` the request set: completion_tokens = max_tokens + 10 (the total
    adds up), as a proxy that estimates usage reports it."""
    cap = ctx.request.get("max_tokens")
    if not isinstance(cap, int) or isinstance(cap, bool):
        return frames
    out = []
    for f in frames:
        usage = f.obj.get("usage") if f.chunk else None
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            made = cap + 10
            f = f.changed(
                {**f.obj, "usage": {**usage, "completion_tokens": made, "total_tokens": usage["prompt_tokens"] + made}}
            )
        out.append(f)
    return out


# -- Responses faults ----------------------------------------------------------------------------------------------


def _typed(frames: list[Frame]) -> list[int]:
    return [k for k, f in enumerate(frames) if isinstance(f.obj, dict) and isinstance(f.obj.get("type"), str)]


def _seq_repeat(frames: list[Frame], ctx: Context) -> list[Frame]:
    """The third event repeats the second one's sequence_number."""
    typed = _typed(frames)
    if len(typed) < 3:
        return frames
    out = list(frames)
    second, third = frames[typed[1]], frames[typed[2]]
    out[typed[2]] = third.changed({**third.obj, "sequence_number": second.obj.get("sequence_number")})
    return out


def _done_text_differs(frames: list[Frame], ctx: Context) -> list[Frame]:
    """`response.output_text.done` says one character more than its deltas did."""
    return [
        f.changed({**f.obj, "text": f.obj["text"] + "!"})
        if isinstance(f.obj, dict)
        and f.obj.get("type") == "response.output_text.done"
        and isinstance(f.obj.get("text"), str)
        else f
        for f in frames
    ]


def _double_terminal(frames: list[Frame], ctx: Context) -> list[Frame]:
    """The terminal event is sent twice (the second with the next sequence_number)."""
    typed = _typed(frames)
    if not typed:
        return frames
    last = frames[typed[-1]]
    seq = last.obj.get("sequence_number")
    again = last.changed({**last.obj, "sequence_number": seq + 1 if isinstance(seq, int) else seq})
    return frames[: typed[-1] + 1] + [again] + frames[typed[-1] + 1 :]


def _drop_keys(frames: list[Frame], keys: tuple[str, ...]) -> list[Frame]:
    return [
        f.changed({k: v for k, v in f.obj.items() if k not in keys})
        if isinstance(f.obj, dict) and isinstance(f.obj.get("type"), str) and any(k in f.obj for k in keys)
        else f
        for f in frames
    ]


def _no_sequence_number(frames: list[Frame], ctx: Context) -> list[Frame]:
    """llama-server: Responses events without `sequence_number`."""
    return _drop_keys(frames, ("sequence_number",))


def _no_output_indexes(frames: list[Frame], ctx: Context) -> list[Frame]:
    """llama-server: Responses events without `output_index` and `content_index`."""
    return _drop_keys(frames, ("output_index", "content_index"))


def _completed_at_cap(frames: list[Frame], ctx: Context) -> list[Frame]:
    """llama-server with a base model: the answer runs to `max_output_tokens` (a base model rambles until the
    cap; the stand-in's short answer is counted as if it had) and still ends `response.completed`, not
    `response.incomplete`."""
    cap = ctx.request.get("max_output_tokens")
    if not isinstance(cap, int) or isinstance(cap, bool):
        return frames
    out = []
    for f in frames:
        response = f.obj.get("response") if isinstance(f.obj, dict) else None
        usage = response.get("usage") if isinstance(response, dict) else None
        if f.obj.get("type") == "response.completed" and isinstance(usage, dict) and isinstance(response, dict):
            tokens = usage.get("input_tokens")
            given = tokens if isinstance(tokens, int) else 0
            usage = {**usage, "output_tokens": cap, "total_tokens": given + cap}
            f = f.changed({**f.obj, "response": {**response, "usage": usage}})
        out.append(f)
    return out


def _responses_reasoning(frames: list[Frame], raw: bool) -> list[Frame]:
    """A text answer rebuilt as a reasoning model sends it: a reasoning item (summary, or raw text) at
    output_index 0, then the message at 1. A function call, or a stream without text, is left alone."""
    typed = [f.obj for f in frames if isinstance(f.obj, dict) and isinstance(f.obj.get("type"), str)]
    if not typed or any(o["type"].startswith("response.function_call") for o in typed):
        return frames
    pieces = [
        o["delta"] for o in typed if o["type"] == "response.output_text.delta" and isinstance(o.get("delta"), str)
    ]
    response: dict[str, Any] = given if isinstance(given := typed[0].get("response"), dict) else {}
    end = typed[-1]["type"] if typed[-1]["type"] in RESPONSES_TERMINAL_STATUS else None
    if not pieces:
        return frames
    events = responses_reasoning_events(
        THINKING,
        pieces,
        raw=raw,
        terminal=end,
        response_id=str(response.get("id", "resp_demo")),
        model=str(response.get("model", "model-a")),
    )
    slots = [f.slot for f in frames]
    rebuilt = [_frame(0, raw_bytes) for raw_bytes in responses_frames(events)]
    return [replace(f, slot=slots[min(k, len(slots) - 1)]) for k, f in enumerate(rebuilt)]


def _reasoning_done_differs(frames: list[Frame], ctx: Context) -> list[Frame]:
    """A reasoning summary before the answer (`_responses_reasoning`) whose `response.reasoning_summary_text.done`
    says one character more than its deltas did."""
    return [
        f.changed({**f.obj, "text": f.obj["text"] + "!"})
        if isinstance(f.obj, dict)
        and f.obj.get("type") == "response.reasoning_summary_text.done"
        and isinstance(f.obj.get("text"), str)
        else f
        for f in _responses_reasoning(frames, raw=False)
    ]


# -- request faults --------------------------------------------------------------------------------------------------

STREAM_OPTIONS_REFUSAL = "'stream_options' : property 'stream_options' is unsupported"
"""The message of the 400 a server that does not know `stream_options` answers (Groq's wording, vercel/ai#1578)."""


def _responses_tools_ignored(ep: Episode, ctx: Context) -> ErrorEpisode | Episode:
    """llama-server (`--jinja`, Gemma 270M): a Responses request that offers tools gets a text answer, never a
    function call, as its Chat route does (`_tools_ignored`). The text keeps the answer's pace."""
    if ctx.dialect != "responses" or not ctx.request.get("tools"):
        return ep
    model = str(ctx.request.get("model") or "stand-in")
    return replace(ep, steps=tuple(paced(responses_text_stream(TEXT_INSTEAD, model=model), first=0.01, gap=0.002)))


def _stream_options_400(ep: Episode, ctx: Context) -> ErrorEpisode | Episode:
    """Groq (2024), Bedrock through LiteLLM (BerriAI/litellm#9916): a request with `stream_options` is refused
    with a 400 naming the field; the same request without it streams."""
    if "stream_options" not in ctx.request:
        return ep
    return ErrorEpisode(400, error_body(STREAM_OPTIONS_REFUSAL, "invalid_request_error", None, "stream_options"))


# -- error faults ----------------------------------------------------------------------------------------------------


def _message(ep: ErrorEpisode) -> str:
    error = ep.body.get("error") if isinstance(ep.body, Mapping) else None
    return str(error.get("message")) if isinstance(error, Mapping) else json.dumps(ep.body)


def _error_flat_envelope(ep: ErrorEpisode, ctx: Context) -> ErrorEpisode:
    """vLLM before 0.10.1: the error's fields at the top level, `"object": "error"`, an integer code."""
    body = {"object": "error", "message": _message(ep), "type": "BadRequestError", "param": None, "code": ep.status}
    return ErrorEpisode(ep.status, body, ep.headers, ep.wait)


def _error_in_stream_field(ep: ErrorEpisode, ctx: Context) -> ErrorEpisode | Episode:
    """llama-server (2025): a request refused once streaming was asked for gets a 200, an `error:` field line
    (which the SSE standard ignores), then `data: [DONE]`."""
    if ep.status != 400 or not ctx.streamed:
        return ep
    error = {"code": ep.status, "message": _message(ep), "type": "invalid_request_error"}
    return Episode([Send(b"error: " + json.dumps(error).encode() + b"\n\n"), Send(b"data: [DONE]\n\n")])


def _error_500_detail(ep: ErrorEpisode, ctx: Context) -> ErrorEpisode:
    """A framework's default: 500 with `{"detail": "Internal Server Error"}`."""
    return ErrorEpisode(500, {"detail": "Internal Server Error"}, ep.headers, ep.wait)


def _code(ep: ErrorEpisode) -> Any:
    error = ep.body.get("error") if isinstance(ep.body, Mapping) else None
    return error.get("code") if isinstance(error, Mapping) else None


TRACEBACK_TAIL = (
    '\n\n  File "/usr/lib/python3/site-packages/llama_cpp/server/app.py", line 376, in '
    "create_chat_completion\n    POST /v1/chat/completions"
)
"""How llama-cpp-python's 500 message ends: FastAPI's pointer into the server's source (the path shortened)."""


def _validation_500_traceback(ep: ErrorEpisode, ctx: Context) -> ErrorEpisode:
    """llama-cpp-python: a request that fails validation gets a 500 (its route handler catches FastAPI's
    validation error as an unexpected exception), the message quoting the server's source file."""
    if ep.status != 400 or ctx.not_json or _code(ep) == "context_length_exceeded":
        return ep
    message = f"1 validation error:\n  {{'msg': {_message(ep)!r}}}{TRACEBACK_TAIL}"
    return ErrorEpisode(500, error_body(message, "internal_server_error"), ep.headers, ep.wait)


def _not_json_500_text(ep: ErrorEpisode, ctx: Context) -> ErrorEpisode:
    """llama-cpp-python: a body that is not JSON crashes its error handler, and Starlette answers a plain-text
    500 "Internal Server Error"."""
    return ErrorEpisode(500, b"Internal Server Error", ep.headers, ep.wait) if ctx.not_json else ep


def _not_json_500(ep: ErrorEpisode, ctx: Context) -> ErrorEpisode:
    """llama-server: a body that is not JSON is a 500 with nlohmann::json's parse error as the message."""
    if not ctx.not_json:
        return ep
    message = (
        "[json.exception.parse_error.101] parse error at line 1, column 94: syntax error while parsing "
        "array - unexpected end of input; expected ']'"
    )
    return ErrorEpisode(500, {"error": {"code": 500, "message": message, "type": "server_error"}}, ep.headers, ep.wait)


def _too_long_empty_200(ep: ErrorEpisode, ctx: Context) -> ErrorEpisode | Episode:
    """llama-cpp-python: a streamed prompt longer than the context is a 200 with an empty body (the error is
    raised inside the generator, after the headers went out)."""
    if _code(ep) != "context_length_exceeded" or not ctx.streamed:
        return ep
    return Episode([])


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("omit_null_finish", "chat", _omit_null_finish, 'leaves "finish_reason" out while it is null'),
        Fault("role_every_delta", "chat", _role_every_delta, 'repeats "role": "assistant" in every delta'),
        Fault("no_role", "chat", _no_role, "never sends a role"),
        Fault("tool_finish_stop", "chat", _tool_finish_stop, 'ends a tool call with finish_reason "stop"'),
        Fault("tool_call_no_index", "chat", _tool_call_no_index, "sends tool-call fragments without an index"),
        Fault(
            "tool_id_every_fragment",
            "chat",
            _tool_id_every_fragment,
            "repeats the call's id and type on every fragment",
        ),
        Fault(
            "tool_call_in_one_chunk",
            "chat",
            _tool_call_in_one_chunk,
            "sends each tool call whole, in one chunk (allowed: arguments need not be split)",
        ),
        Fault("drop_usage", "chat", _drop_usage, "never sends usage, whatever include_usage says", owns_usage=True),
        Fault(
            "usage_on_finish_chunk",
            "chat",
            _usage_on_finish_chunk,
            "always sends usage, on the finish chunk (choices not empty)",
            owns_usage=True,
        ),
        Fault(
            "usage_chunk_with_choice",
            "chat",
            _usage_chunk_with_choice,
            'gives the usage chunk a choice {"index": 0, "delta": {}}',
        ),
        Fault("usage_total_wrong", "chat", _usage_total_wrong, "reports a total_tokens one more than the sum"),
        Fault("timings", "chat", _timings, "adds a timings object next to the usage (allowed: an extra field)"),
        Fault("no_done", "chat", _no_done, "ends the body without data: [DONE]"),
        Fault("id_changes", "chat", _id_changes, "gives every chunk another id"),
        Fault("ping_comments", "chat", _ping_comments, "sends : ping comments between frames (allowed: comments)"),
        Fault(
            "tool_name_every_fragment",
            "chat",
            _tool_name_every_fragment,
            "repeats the function's whole name in every fragment of a call",
        ),
        Fault(
            "role_null_in_tool_calls",
            "chat",
            _role_null_in_tool_calls,
            'sends "role": null on every delta after the first of a tool-call stream',
        ),
        Fault(
            "legacy_function_call",
            "chat",
            _legacy_function_call,
            "sends each tool-call fragment again as the deprecated function_call",
        ),
        Fault(
            "required_ignored",
            "chat",
            _required_ignored,
            'ignores tool_choice "required" (and "auto"): answers in text',
        ),
        Fault(
            "tools_ignored",
            "chat",
            _tools_ignored,
            'ignores every tool_choice, "required" and a named function too: answers in text',
        ),
        Fault(
            "reasoning_mix",
            "chat",
            _reasoning_mix,
            "streams thinking before the answer in reasoning_content, reasoning, then both (allowed: extra fields)",
        ),
        Fault(
            "tools_not_streamed",
            "chat",
            _tools_not_streamed,
            "with tools in the request, sends the text whole in one chunk and each call whole (allowed)",
        ),
        Fault(
            "azure_filter_first_chunk",
            "chat",
            _azure_filter_first_chunk,
            "sends a first chunk with choices [] and prompt_filter_results, its id, model and object empty",
        ),
        Fault(
            "usage_over_max_tokens",
            "chat",
            _usage_over_max_tokens,
            "reports more completion tokens than the request's max_tokens",
        ),
        Fault(
            "reasoning_done_differs",
            "responses",
            _reasoning_done_differs,
            "sends a reasoning summary whose .done says more than its deltas",
        ),
        Fault(
            "responses_tools_ignored",
            "request",
            _responses_tools_ignored,
            "answers a Responses request that offers tools in text, never with a function call",
        ),
        Fault(
            "stream_options_400",
            "request",
            _stream_options_400,
            "refuses a request that sets stream_options with a 400 naming it",
        ),
        Fault("seq_repeat", "responses", _seq_repeat, "repeats a sequence_number"),
        Fault("no_sequence_number", "responses", _no_sequence_number, "sends events without sequence_number"),
        Fault(
            "no_output_indexes", "responses", _no_output_indexes, "sends events without output_index and content_index"
        ),
        Fault(
            "completed_at_cap",
            "responses",
            _completed_at_cap,
            "runs to max_output_tokens and still ends response.completed",
        ),
        Fault("done_text_differs", "responses", _done_text_differs, "says more in output_text.done than in its deltas"),
        Fault("double_terminal", "responses", _double_terminal, "sends the terminal event twice"),
        Fault(
            "error_flat_envelope",
            "error",
            _error_flat_envelope,
            'answers errors with {"object": "error", "message": ...} instead of {"error": {...}}',
        ),
        Fault(
            "error_in_stream_field",
            "error",
            _error_in_stream_field,
            "answers a refused streaming request with 200 and an error: field line",
        ),
        Fault("error_500_detail", "error", _error_500_detail, 'answers errors with 500 {"detail": ...}'),
        Fault(
            "validation_500_traceback",
            "error",
            _validation_500_traceback,
            "answers a request that fails validation with a 500 quoting the server's source file",
        ),
        Fault(
            "not_json_500_text",
            "error",
            _not_json_500_text,
            'answers a body that is not JSON with a plain-text 500 "Internal Server Error"',
        ),
        Fault("not_json_500", "error", _not_json_500, "answers a body that is not JSON with a 500"),
        Fault(
            "too_long_empty_200",
            "error",
            _too_long_empty_200,
            "answers a streamed prompt over the context with a 200 and an empty body",
        ),
    )
}
"""Every fault a profile can name."""


# -- keep-alives on a clock: not a fault, a profile's timing -------------------------------------------------------

SSE_STARLETTE_PING = "ping - {stamp}"
"""The comment sse-starlette 3.7 writes every 15 s (its `_ping`: `ping - ` and `datetime.now(timezone.utc)`), which
llama-cpp-python's server sends as `: ping - 2026-12-03 20:35:52.236910+00:00` and LF LF (its `sep="\n"`)."""
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def with_pings(steps: Sequence[Step], every: float, comment: str = SSE_STARLETTE_PING) -> list[Step]:
    """`steps` with a keep-alive comment each time `every` seconds of the episode's waits have passed, whatever
    else is being sent (sse-starlette's ping task runs beside the stream, tokens flowing or not): a `Wait` that
    crosses the mark is split around it. `{stamp}` in `comment` becomes the moment as a UTC time; the core has no
    clock, so it counts from the Unix epoch (the shape of the server's, not its value)."""
    if every <= 0:
        raise ValueError(f"pings need a positive interval, not {every!r}")
    out: list[Step] = []
    now, mark = 0.0, every
    for step in steps:
        if not isinstance(step, Wait):
            out.append(step)
            continue
        left = step.seconds
        while now + left >= mark:
            before = mark - now
            if before > 0:
                out.append(Wait(before))
            out.append(KeepAlive(comment.format(stamp=_EPOCH + datetime.timedelta(seconds=mark))))
            left, now, mark = left - before, mark, mark + every
        if left > 0:
            out.append(Wait(left))
            now += left
    return out
