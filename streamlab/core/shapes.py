"""Builders for streamed responses in the two OpenAI dialects, as SSE bytes (sans-IO core).

Everything here is SYNTHETIC: the shapes were written by hand from the OpenAI API reference (the
`chat.completion.chunk` object, the Responses streaming events, the error object) and from what
OpenAI-compatible servers are known to do differently. None of it was captured from a real server, and
the text, ids and token counts are placeholders.

The module is sans-IO: builders return plain dicts (one JSON body) or `bytes` (one complete SSE frame
each, ending in a blank line), and a stream is a `list[bytes]`. Join the list to get the body a server
would send; cut it anywhere to get what a network might deliver. Keeping one frame per list item makes it
easy to drop, repeat or insert frames when building a broken stream on purpose.

Two dialects:

* Chat Completions: data-only frames, one JSON `chat.completion.chunk` each, ended by the literal text
  `[DONE]` (not JSON). See `chat_text_stream`, `chat_tool_call_stream`, `chat_refusal_stream`,
  `chat_multi_choice_stream`, `chat_error_stream` and `chat_variant_stream` (compatible-server quirks).
* Responses: typed events; the JSON `type` names the event, the `event:` line repeats it, every event
  carries a `sequence_number` counting from 0, and a terminal event (`response.completed`,
  `response.incomplete` or `response.failed`) ends the stream; there is no `[DONE]`. Builders first make
  event dicts without numbers (`responses_text_events`, ...) and `responses_frames` numbers and frames
  them, so an extra event can be inserted anywhere and the numbering stays consistent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

__all__ = [
    "CREATED",
    "CHAT_VARIANTS",
    "DEFAULT_TOOL_CALLS",
    "RESPONSES_TERMINALS",
    "RESPONSES_TERMINAL_STATUS",
    "to_json",
    "sse_frame",
    "sse_comment",
    "error_body",
    "chat_usage",
    "chat_choice",
    "chat_chunk",
    "chat_done",
    "chat_text_stream",
    "chat_completion_body",
    "chat_refusal_stream",
    "chat_tool_call_stream",
    "chat_multi_choice_stream",
    "chat_error_stream",
    "chat_variant_stream",
    "responses_usage",
    "responses_frames",
    "responses_text_events",
    "responses_text_stream",
    "responses_function_call_events",
    "responses_function_call_stream",
    "responses_refusal_events",
    "responses_error_event",
    "responses_error_stream",
    "response_body",
    "REASONING_FIELDS",
    "chat_reasoning_stream",
    "chat_logprobs",
    "with_logprobs",
    "json_pieces",
    "responses_queued_event",
    "responses_reasoning_events",
]

CREATED = 1694268190
"""The fixed `created` timestamp of every synthetic object (determinism beats realism here)."""

RESPONSES_TERMINAL_STATUS: Mapping[str, str] = MappingProxyType(
    {
        "response.completed": "completed",
        "response.incomplete": "incomplete",
        "response.failed": "failed",
    }
)
"""The documented events that end a Responses stream, each with the status it gives the response: the one
definition of that set (the accumulators, the resume cursor and the graders read it from here)."""

RESPONSES_TERMINALS = tuple(RESPONSES_TERMINAL_STATUS)
"""The same three event types as a tuple, in that order (the builders' `terminal=` choices)."""

DEFAULT_TOOL_CALLS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("call_a", "get_weather", ('{"loc', 'ation": "Par', 'is, France"}')),
    ("call_b", "get_time", ('{"city":', ' "Oslo"}')),
)
"""Two parallel tool calls: (call id, function name, argument fragments)."""


# -- frames ---------------------------------------------------------------------------------------


def to_json(obj: Any) -> str:
    """Compact JSON, non-ASCII kept as UTF-8 (so multi-byte characters really are multi-byte on the wire)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sse_frame(data: str, event: str | None = None, id: str | None = None) -> bytes:
    """One complete SSE frame: optional `event:` and `id:` lines, one `data:` line per line of `data`, blank line.

    A `data` containing newlines becomes several `data:` lines, which a parser joins back with "\\n".
    `event` and `id` must be single lines (a line break would start a new field).
    """
    for name, value in (("event", event), ("id", id)):
        if value is not None and ("\n" in value or "\r" in value):
            raise ValueError(f"sse_frame: the {name} field cannot contain a line break: {value!r}")
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    if id is not None:
        lines.append(f"id: {id}")
    lines.extend(f"data: {line}" for line in data.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def sse_comment(text: str = "ping") -> bytes:
    """A comment frame (`: ping`): a keep-alive that parsers must skip; it dispatches no event."""
    if "\n" in text or "\r" in text:
        raise ValueError(f"sse_comment: a comment is one line: {text!r}")
    return f": {text}\n\n".encode()


def error_body(
    message: str, type: str = "server_error", code: str | int | None = None, param: str | None = None
) -> dict[str, Any]:
    """An OpenAI-shaped error object `{"error": {"message", "type", "param", "code"}}`.

    OpenAI sends `code` as a string or null; some compatible servers send an HTTP-like integer, so both
    are accepted here and must be accepted by a client.
    """
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# -- Chat Completions -----------------------------------------------------------------------------

_ABSENT: Any = object()  # "leave the key out", as opposed to None ("send null")


def chat_usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """A Chat Completions usage object (totals for the whole request)."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_choice(
    delta: Mapping[str, Any], *, index: int = 0, finish_reason: str | None = None, omit_null_finish: bool = False
) -> dict[str, Any]:
    """One entry of a chunk's `choices`: a `delta` (a piece of the message), its `index`, `finish_reason`.

    `omit_null_finish` leaves `finish_reason` out instead of sending null (a LiteLLM habit).
    """
    choice: dict[str, Any] = {"index": index, "delta": dict(delta), "logprobs": None}
    if finish_reason is not None or not omit_null_finish:
        choice["finish_reason"] = finish_reason
    return choice


def chat_chunk(
    choices: Sequence[Mapping[str, Any]],
    *,
    usage: Any = _ABSENT,
    model: str = "model-a",
    completion_id: str = "chatcmpl-demo",
) -> dict[str, Any]:
    """One `chat.completion.chunk` object. Leave `usage` out to omit the key; pass None to send null."""
    chunk: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": None,
        "choices": [dict(c) for c in choices],
    }
    if usage is not _ABSENT:
        chunk["usage"] = usage
    return chunk


def chat_done() -> bytes:
    """The Chat Completions terminator: the literal text `[DONE]` (not JSON, no `event:` line)."""
    return sse_frame("[DONE]")


def _chat_frames(
    deltas: Sequence[tuple[int, Mapping[str, Any], str | None]],
    *,
    include_usage: bool,
    usage: Mapping[str, Any],
    model: str,
    completion_id: str,
) -> list[bytes]:
    """Frame (choice index, delta, finish_reason) triples, add the usage chunk if asked, then [DONE]."""
    mid = None if include_usage else _ABSENT  # with include_usage, every other chunk says "usage": null
    frames = [
        sse_frame(
            to_json(
                chat_chunk(
                    [chat_choice(d, index=i, finish_reason=f)], usage=mid, model=model, completion_id=completion_id
                )
            )
        )
        for i, d, f in deltas
    ]
    if include_usage:
        frames.append(sse_frame(to_json(chat_chunk([], usage=dict(usage), model=model, completion_id=completion_id))))
    frames.append(chat_done())
    return frames


def chat_text_stream(
    pieces: Sequence[str],
    *,
    include_usage: bool = True,
    model: str = "model-a",
    completion_id: str = "chatcmpl-demo",
    prompt_tokens: int = 12,
    finish_reason: str = "stop",
) -> list[bytes]:
    """A Chat Completions text answer streamed as one content chunk per piece.

    Frames: a role chunk (`{"role": "assistant", "content": ""}`), one content chunk per piece, a finish
    chunk with an empty delta and `finish_reason` ("stop" unless told otherwise: "length" or
    "content_filter" make an incomplete answer), then, only when `include_usage` is set (the request's
    `stream_options.include_usage`), a usage chunk whose `choices` is empty, and finally `data: [DONE]`.
    With `include_usage` every other chunk carries `"usage": null`; without it no chunk has the key.
    `completion_tokens` is the number of pieces (one token per piece, by convention).
    """
    deltas: list[tuple[int, Mapping[str, Any], str | None]] = [(0, {"role": "assistant", "content": ""}, None)]
    deltas += [(0, {"content": p}, None) for p in pieces]
    deltas.append((0, {}, finish_reason))
    return _chat_frames(
        deltas,
        include_usage=include_usage,
        usage=chat_usage(prompt_tokens, len(pieces)),
        model=model,
        completion_id=completion_id,
    )


def chat_completion_body(text: str, *, model: str = "model-a", completion_id: str = "chatcmpl-demo") -> dict[str, Any]:
    """The non-streaming `chat.completion` object for the same answer (`message` instead of `delta`).

    Usage counts one completion token per whitespace-separated word: a placeholder, not a tokenizer.
    """
    message = {"role": "assistant", "content": text, "refusal": None}
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
        "usage": chat_usage(12, len(text.split())),
    }


def chat_refusal_stream(
    pieces: Sequence[str], *, include_usage: bool = True, model: str = "model-a", completion_id: str = "chatcmpl-demo"
) -> list[bytes]:
    """A refusal: the pieces arrive in `delta.refusal` (not `content`), then finish_reason "stop"."""
    deltas: list[tuple[int, Mapping[str, Any], str | None]] = [
        (0, {"role": "assistant", "content": None, "refusal": ""}, None)
    ]
    deltas += [(0, {"refusal": p}, None) for p in pieces]
    deltas.append((0, {}, "stop"))
    return _chat_frames(
        deltas, include_usage=include_usage, usage=chat_usage(12, len(pieces)), model=model, completion_id=completion_id
    )


def _tool_fragment(
    index: int,
    *,
    call_id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
    with_type: bool = False,
) -> dict[str, Any]:
    """One `delta.tool_calls[]` entry. Only `index` is required by the schema; the rest is optional."""
    frag: dict[str, Any] = {"index": index}
    if call_id is not None:
        frag["id"] = call_id
    if with_type:
        frag["type"] = "function"
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if arguments is not None:
        fn["arguments"] = arguments
    if fn:
        frag["function"] = fn
    return frag


def chat_tool_call_stream(
    calls: Sequence[tuple[str, str, Sequence[str]]] = DEFAULT_TOOL_CALLS,
    *,
    interleave: bool = True,
    split_header: bool = False,
    finish_reason: str = "tool_calls",
    include_usage: bool = True,
    model: str = "model-a",
    completion_id: str = "chatcmpl-demo",
) -> list[bytes]:
    """Parallel tool calls: each call is (id, function name, argument fragments).

    A call opens with a fragment carrying its `index`, `id`, `type` and `name` with empty arguments (the
    usual shape); later fragments carry only `index` and a piece of the arguments JSON. `interleave`
    deals the argument fragments round-robin across the calls, so an accumulator keyed by position rather
    than by `index` mixes them up. `split_header` instead sends the id and the name in two halves each,
    with the id arriving only on the second fragment: the schema only promises `index`, and the
    openai-python SDK concatenates these strings, so a client must too.
    """
    first_delta: dict[str, Any] = {"role": "assistant", "content": None}
    openings: list[list[dict[str, Any]]] = []
    for k, (call_id, name, _pieces) in enumerate(calls):
        if split_header:
            h_name, h_id = len(name) // 2, len(call_id) // 2
            openings.append(
                [
                    _tool_fragment(k, name=name[:h_name], arguments=""),
                    _tool_fragment(k, call_id=call_id[:h_id], name=name[h_name:], with_type=True),
                    _tool_fragment(k, call_id=call_id[h_id:]),
                ]
            )
        else:
            openings.append([_tool_fragment(k, call_id=call_id, name=name, arguments="", with_type=True)])
    argument_frags = [[_tool_fragment(k, arguments=p) for p in pieces] for k, (_i, _n, pieces) in enumerate(calls)]
    per_call = [o + a for o, a in zip(openings, argument_frags)]
    order: list[dict[str, Any]] = []
    if interleave:
        longest = max((len(p) for p in per_call), default=0)
        for step in range(longest):
            order += [p[step] for p in per_call if step < len(p)]
    else:
        for p in per_call:
            order += p
    deltas: list[tuple[int, Mapping[str, Any], str | None]] = []
    for n, frag in enumerate(order):
        delta = dict(first_delta) if n == 0 else {}
        delta["tool_calls"] = [frag]
        deltas.append((0, delta, None))
    deltas.append((0, {}, finish_reason))
    n_tokens = sum(len(p) for _i, _n, p in calls) + 2 * len(calls)
    return _chat_frames(
        deltas, include_usage=include_usage, usage=chat_usage(50, n_tokens), model=model, completion_id=completion_id
    )


def chat_multi_choice_stream(
    answers: Sequence[Sequence[str]],
    *,
    finish_reasons: Sequence[str] | None = None,
    include_usage: bool = True,
    model: str = "model-a",
    completion_id: str = "chatcmpl-demo",
) -> list[bytes]:
    """A request with `n = len(answers)`: each chunk carries a delta for one choice, choices interleaved.

    Every choice gets its own role chunk, its pieces, and its own finish chunk (`finish_reasons[i]`,
    default "stop"): choices can end at different times and for different reasons.
    """
    reasons = list(finish_reasons) if finish_reasons is not None else ["stop"] * len(answers)
    if len(reasons) != len(answers):
        raise ValueError(f"chat_multi_choice_stream: {len(answers)} answers but {len(reasons)} finish reasons")
    per_choice: list[list[tuple[int, Mapping[str, Any], str | None]]] = []
    for i, pieces in enumerate(answers):
        steps: list[tuple[int, Mapping[str, Any], str | None]] = [(i, {"role": "assistant", "content": ""}, None)]
        steps += [(i, {"content": p}, None) for p in pieces]
        steps.append((i, {}, reasons[i]))
        per_choice.append(steps)
    deltas = []
    for step in range(max((len(s) for s in per_choice), default=0)):
        deltas += [s[step] for s in per_choice if step < len(s)]
    n_tokens = sum(len(p) for p in answers)
    return _chat_frames(
        deltas, include_usage=include_usage, usage=chat_usage(12, n_tokens), model=model, completion_id=completion_id
    )


def chat_error_stream(
    pieces: Sequence[str],
    error: Mapping[str, Any] | None = None,
    *,
    event: str | None = None,
    then_done: bool = False,
    model: str = "model-a",
    completion_id: str = "chatcmpl-demo",
) -> list[bytes]:
    """A stream that starts normally (HTTP 200, role chunk, some content) and then fails.

    The failure arrives as a data frame holding an error object (`error_body(...)` by default); `event`
    adds an `event:` line (some servers send `event: error`), and `then_done` appends `[DONE]` after it
    (some servers do, some just close). There is no finish chunk and no usage.
    """
    frames = chat_text_stream(pieces, include_usage=False, model=model, completion_id=completion_id)[:-2]
    body = dict(error) if error is not None else error_body("The server had an error while processing your request.")
    frames.append(sse_frame(to_json(body), event=event))
    if then_done:
        frames.append(chat_done())
    return frames


CHAT_VARIANTS: dict[str, str] = {
    "openai": "the documented shape: role chunk, content chunks, finish chunk, usage chunk with choices [], [DONE]",
    "vllm-continuous-usage": "usage on every chunk, counting up (vLLM's continuous_usage_stats)",
    "ollama-role-every-chunk": 'every delta repeats "role": "assistant"',
    "litellm-usage-in-choice": "the usage chunk keeps a choice with an empty delta; null finish_reason is omitted",
    "no-role-chunk": "no opening role chunk: the first chunk already carries content",
    "ping-comments": "`: ping` comment frames between chunks (keep-alives from a proxy)",
    "ping-events": "`event: ping` frames with a JSON body between chunks",
    "error-int-code": "an error frame whose code is an integer, after some content",
}
"""Provider variants understood by `chat_variant_stream`, with what each changes."""


def chat_variant_stream(
    pieces: Sequence[str],
    variant: str,
    *,
    model: str = "model-a",
    completion_id: str = "chatcmpl-demo",
    prompt_tokens: int = 12,
) -> list[bytes]:
    """The same text answer as `chat_text_stream(pieces)`, the way a compatible server varies it.

    `variant` is a key of `CHAT_VARIANTS`. Each variant is the documented stream with one change (usage
    requested in all of them), so a correct client rebuilds the same text from every one.
    """
    if variant not in CHAT_VARIANTS:
        raise ValueError(f"unknown chat variant {variant!r}; choose from {sorted(CHAT_VARIANTS)}")
    base = chat_text_stream(pieces, model=model, completion_id=completion_id, prompt_tokens=prompt_tokens)
    if variant == "openai":
        return base
    if variant in ("ping-comments", "ping-events"):
        ping = sse_comment("ping") if variant == "ping-comments" else sse_frame(to_json({"type": "ping"}), event="ping")
        out = [ping]
        for framed in base:
            out += [framed, ping]
        return out[:-1]  # no ping after [DONE]
    if variant == "error-int-code":
        return chat_error_stream(
            pieces[: max(1, len(pieces) // 2)],
            error_body("upstream model crashed", "server_error", code=500),
            model=model,
            completion_id=completion_id,
        )

    def frame(choices: list[dict[str, Any]], usage: Any) -> bytes:
        return sse_frame(to_json(chat_chunk(choices, usage=usage, model=model, completion_id=completion_id)))

    final_usage = chat_usage(prompt_tokens, len(pieces))
    frames: list[bytes] = []
    if variant == "vllm-continuous-usage":
        frames.append(frame([chat_choice({"role": "assistant", "content": ""})], chat_usage(prompt_tokens, 0)))
        for k, p in enumerate(pieces, 1):
            frames.append(frame([chat_choice({"content": p})], chat_usage(prompt_tokens, k)))
        frames.append(frame([chat_choice({}, finish_reason="stop")], final_usage))
        frames.append(frame([], final_usage))
    elif variant == "ollama-role-every-chunk":
        frames.append(frame([chat_choice({"role": "assistant", "content": ""})], None))
        frames += [frame([chat_choice({"role": "assistant", "content": p})], None) for p in pieces]
        frames.append(frame([chat_choice({"role": "assistant", "content": ""}, finish_reason="stop")], None))
        frames.append(frame([], final_usage))
    elif variant == "litellm-usage-in-choice":
        frames.append(frame([chat_choice({"role": "assistant", "content": ""}, omit_null_finish=True)], None))
        frames += [frame([chat_choice({"content": p}, omit_null_finish=True)], None) for p in pieces]
        frames.append(frame([chat_choice({}, finish_reason="stop")], None))
        frames.append(frame([chat_choice({}, omit_null_finish=True)], final_usage))
    elif variant == "no-role-chunk":
        frames += [frame([chat_choice({"content": p})], None) for p in pieces]
        frames.append(frame([chat_choice({}, finish_reason="stop")], None))
        frames.append(frame([], final_usage))
    frames.append(chat_done())
    return frames


# -- Responses ------------------------------------------------------------------------------------


def responses_usage(input_tokens: int = 37, output_tokens: int = 11, reasoning_tokens: int = 0) -> dict[str, Any]:
    """A Responses usage object (it lives in the `response` of the terminal event)."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens,
    }


def responses_frames(events: Iterable[Mapping[str, Any]], *, start: int = 0, event_lines: bool = True) -> list[bytes]:
    """Number and frame Responses events: `sequence_number` from `start`, `event:` line equal to `type`.

    Each event dict is copied; a `sequence_number` already in it is replaced. `event_lines=False` leaves
    the `event:` line out (the JSON `type` is what identifies the event; some servers send only data).
    """
    frames = []
    for n, ev in enumerate(events, start):
        if "type" not in ev:
            raise ValueError(f"responses_frames: event {n - start} has no 'type': {dict(ev)!r}")
        body = {k: v for k, v in ev.items() if k != "sequence_number"}
        body["sequence_number"] = n
        frames.append(sse_frame(to_json(body), event=str(ev["type"]) if event_lines else None))
    return frames


def _response(
    response_id: str,
    model: str,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    *,
    error: dict[str, Any] | None = None,
    incomplete_reason: str | None = None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "model": model,
        "output": output,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "usage": usage,
    }


def _terminal(
    terminal: str,
    response_id: str,
    model: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any],
    incomplete_reason: str,
) -> dict[str, Any]:
    status = RESPONSES_TERMINAL_STATUS.get(terminal)
    if status is None:
        raise ValueError(f"unknown terminal event {terminal!r}; choose from {RESPONSES_TERMINALS}")
    failed = {"code": "server_error", "message": "The model failed to generate a response."}
    err = failed if status == "failed" else None
    reason = incomplete_reason if status == "incomplete" else None
    resp = _response(response_id, model, status, output, usage, error=err, incomplete_reason=reason)
    return {"type": terminal, "response": resp}


def _opening(response_id: str, model: str) -> list[dict[str, Any]]:
    return [
        {"type": "response.created", "response": _response(response_id, model, "in_progress", [], None)},
        {"type": "response.in_progress", "response": _response(response_id, model, "in_progress", [], None)},
    ]


def _message_events(pieces: Sequence[str], output_index: int, item_id: str, kind: str) -> list[dict[str, Any]]:
    """The events of one assistant message with one content part of `kind` ("output_text" or "refusal")."""
    full = "".join(pieces)
    field = "text" if kind == "output_text" else "refusal"
    prefix = "response.output_text" if kind == "output_text" else "response.refusal"
    empty: dict[str, Any] = {"type": kind, field: ""} | ({"annotations": []} if kind == "output_text" else {})
    part = dict(empty, **{field: full})
    where = {"item_id": item_id, "output_index": output_index, "content_index": 0}
    msg = {"id": item_id, "type": "message", "role": "assistant"}
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            "output_index": output_index,
            "item": dict(msg, status="in_progress", content=[]),
        },
        {"type": "response.content_part.added", **where, "part": empty},
    ]
    extra: dict[str, Any] = {"logprobs": []} if kind == "output_text" else {}
    events += [{"type": f"{prefix}.delta", **where, "delta": p, **extra} for p in pieces]
    events += [
        {"type": f"{prefix}.done", **where, field: full, **extra},
        {"type": "response.content_part.done", **where, "part": part},
        {
            "type": "response.output_item.done",
            "output_index": output_index,
            "item": dict(msg, status="completed", content=[part]),
        },
    ]
    return events


def responses_text_events(
    pieces: Sequence[str],
    *,
    terminal: str | None = "response.completed",
    response_id: str = "resp_demo",
    model: str = "model-a",
    incomplete_reason: str = "max_output_tokens",
    usage: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The events (unnumbered dicts) of a Responses text answer; `terminal=None` stops before the terminal."""
    events = _opening(response_id, model) + _message_events(pieces, 0, "msg_demo", "output_text")
    if terminal is not None:
        output = [events[-1]["item"]]
        usage = usage if usage is not None else responses_usage(output_tokens=len(pieces))
        events.append(_terminal(terminal, response_id, model, output, usage, incomplete_reason))
    return events


def responses_text_stream(
    pieces: Sequence[str],
    *,
    terminal: str = "response.completed",
    response_id: str = "resp_demo",
    model: str = "model-a",
) -> list[bytes]:
    """A Responses text answer as SSE frames.

    Events, numbered from 0: `response.created`, `response.in_progress`, `response.output_item.added`
    (a message), `response.content_part.added`, one `response.output_text.delta` per piece,
    `response.output_text.done` (the whole text), `response.content_part.done`,
    `response.output_item.done`, then `terminal`: `response.completed`, `response.incomplete` (with
    `incomplete_details.reason` "max_output_tokens") or `response.failed` (with `response.error`).
    """
    return responses_frames(responses_text_events(pieces, terminal=terminal, response_id=response_id, model=model))


def responses_function_call_events(
    arg_pieces: Sequence[str],
    *,
    name: str = "get_weather",
    call_id: str = "call_demo",
    item_id: str = "fc_demo",
    output_index: int = 0,
    terminal: str | None = "response.completed",
    response_id: str = "resp_demo",
    model: str = "model-a",
) -> list[dict[str, Any]]:
    """The events of a Responses function call: the item is announced with empty arguments, extended by
    `response.function_call_arguments.delta`, finished by `.done` (the whole string), then the item is done."""
    args = "".join(arg_pieces)
    call = {"id": item_id, "type": "function_call", "call_id": call_id, "name": name}
    where = {"item_id": item_id, "output_index": output_index}
    events: list[dict[str, Any]] = _opening(response_id, model)
    events.append(
        {
            "type": "response.output_item.added",
            "output_index": output_index,
            "item": dict(call, arguments="", status="in_progress"),
        }
    )
    events += [{"type": "response.function_call_arguments.delta", **where, "delta": p} for p in arg_pieces]
    events.append({"type": "response.function_call_arguments.done", **where, "arguments": args})
    done_item = dict(call, arguments=args, status="completed")
    events.append({"type": "response.output_item.done", "output_index": output_index, "item": done_item})
    if terminal is not None:
        usage = responses_usage(input_tokens=50, output_tokens=len(arg_pieces) + 2)
        events.append(_terminal(terminal, response_id, model, [done_item], usage, "max_output_tokens"))
    return events


def responses_function_call_stream(
    arg_pieces: Sequence[str],
    *,
    name: str = "get_weather",
    call_id: str = "call_demo",
    terminal: str = "response.completed",
    response_id: str = "resp_demo",
    model: str = "model-a",
) -> list[bytes]:
    """A Responses function call as SSE frames (see `responses_function_call_events`)."""
    return responses_frames(
        responses_function_call_events(
            arg_pieces, name=name, call_id=call_id, terminal=terminal, response_id=response_id, model=model
        )
    )


def responses_refusal_events(
    pieces: Sequence[str], *, response_id: str = "resp_demo", model: str = "model-a"
) -> list[dict[str, Any]]:
    """A refusal in the Responses dialect: a message whose content part is a `refusal`, streamed by
    `response.refusal.delta` / `response.refusal.done`, then `response.completed`."""
    events = _opening(response_id, model) + _message_events(pieces, 0, "msg_demo", "refusal")
    output = [events[-1]["item"]]
    events.append(
        _terminal("response.completed", response_id, model, output, responses_usage(output_tokens=len(pieces)), "")
    )
    return events


def responses_error_event(message: str, code: str | int | None = "server_error", param: str | None = None) -> dict:
    """The Responses `error` event (unnumbered): `code`, `message` and `param` at the top level."""
    return {"type": "error", "code": code, "message": message, "param": param}


def responses_error_stream(
    pieces: Sequence[str],
    *,
    message: str = "The server had an error while processing your request.",
    code: str | int | None = "server_error",
    response_id: str = "resp_demo",
    model: str = "model-a",
) -> list[bytes]:
    """A Responses stream that sends some text deltas, then an `error` event, and no terminal event."""
    events = responses_text_events(pieces, terminal=None, response_id=response_id, model=model)[: 4 + len(pieces)]
    events.append(responses_error_event(message, code))
    return responses_frames(events)


def response_body(text: str, *, response_id: str = "resp_demo", model: str = "model-a") -> dict[str, Any]:
    """The non-streaming Response object for the same answer (what `response.completed` carries)."""
    part = dict(type="output_text", text=text, annotations=[])
    item = {"id": "msg_demo", "type": "message", "role": "assistant", "status": "completed", "content": [part]}
    return _response(response_id, model, "completed", [item], responses_usage(output_tokens=len(text.split())))


# -- reasoning, logprobs and structured answers ----------------------------------------------------

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""The two delta fields compatible servers stream a reasoning model's thinking in, neither of them in OpenAI's
Chat reference (OpenAI streams no reasoning text over Chat Completions): `reasoning_content` (DeepSeek's API,
llama.cpp's llama-server, older vLLM) and `reasoning` (newer vLLM, vllm-project/vllm#27755; Ollama, OpenRouter)."""


def chat_reasoning_stream(
    reasoning: Sequence[str],
    pieces: Sequence[str],
    *,
    field: str = "reasoning_content",
    include_usage: bool = True,
    model: str = "model-a",
    completion_id: str = "chatcmpl-demo",
    prompt_tokens: int = 12,
    finish_reason: str = "stop",
) -> list[bytes]:
    """A Chat answer from a reasoning model: the thinking first, one chunk per piece of `reasoning` in the delta
    `field`, then the answer, one content chunk per piece of `pieces`, as `chat_text_stream` sends it.

    `field` is "reasoning_content" (DeepSeek, llama.cpp, older vLLM: `{"content": null, "reasoning_content":
    ...}`), "reasoning" (newer vLLM, Ollama, OpenRouter) or "both": every reasoning delta carries the same text in
    both fields, as vLLM's compatibility mirror sends it (vllm-project/vllm#43933, #34030). Usage counts every
    piece as a completion token and the reasoning pieces again in `completion_tokens_details.reasoning_tokens`.
    """
    if field not in (*REASONING_FIELDS, "both"):
        raise ValueError(f"field must be one of {REASONING_FIELDS + ('both',)}, got {field!r}")
    names = REASONING_FIELDS if field == "both" else (field,)
    deltas: list[tuple[int, Mapping[str, Any], str | None]] = [(0, {"role": "assistant", "content": ""}, None)]
    deltas += [(0, {"content": None, **dict.fromkeys(names, r)}, None) for r in reasoning]
    deltas += [(0, {"content": p}, None) for p in pieces]
    deltas.append((0, {}, finish_reason))
    usage: dict[str, Any] = chat_usage(prompt_tokens, len(reasoning) + len(pieces))
    usage["completion_tokens_details"] = {"reasoning_tokens": len(reasoning)}
    return _chat_frames(deltas, include_usage=include_usage, usage=usage, model=model, completion_id=completion_id)


def chat_logprobs(token: str, position: int) -> dict[str, Any]:
    """The `logprobs` of a choice whose delta carries `token`: one entry (token, logprob, UTF-8 bytes, no
    alternatives), as OpenAI sends per chunk when the request sets `logprobs: true`. The logprob is a placeholder,
    a function of `position` (the token's number in the answer) so that every value differs."""
    entry = {"token": token, "logprob": round(-0.01 - 0.05 * position, 4), "bytes": list(token.encode("utf-8"))}
    return {"content": [{**entry, "top_logprobs": []}], "refusal": None}


def with_logprobs(frames: Sequence[bytes]) -> list[bytes]:
    """`frames` of a Chat stream with `logprobs` (`chat_logprobs`) on every choice whose delta carries text;
    other frames keep their bytes. A client concatenates `choices[i].logprobs.content` across chunks."""
    out, position = [], 0
    for frame in frames:
        text = frame.decode("utf-8")
        if not text.startswith("data: {"):
            out.append(frame)
            continue
        chunk = json.loads(text[len("data: ") :])
        changed = False
        for choice in chunk.get("choices") or []:
            content = (choice.get("delta") or {}).get("content")
            if isinstance(content, str) and content:
                choice["logprobs"] = chat_logprobs(content, position)
                position, changed = position + 1, True
        out.append(sse_frame(to_json(chunk)) if changed else frame)
    return out


def json_pieces(value: Any, size: int = 6) -> list[str]:
    """`value` as compact JSON cut every `size` characters: a structured answer the way a model streams it
    (pieces end anywhere: inside a key, a string, a number, between `true`'s letters)."""
    text = to_json(value)
    return [text[i : i + size] for i in range(0, len(text), size)]


def responses_queued_event(response_id: str = "resp_demo", model: str = "model-a") -> dict[str, Any]:
    """`response.queued` (unnumbered): a background response (`"background": true`) waits for a worker; it
    follows `response.created`, and `response.in_progress` follows it once a worker runs the response."""
    return {"type": "response.queued", "response": _response(response_id, model, "queued", [], None)}


def _reasoning_events(pieces: Sequence[str], *, raw: bool, item_id: str = "rs_demo") -> list[dict[str, Any]]:
    """The events of one reasoning item at output_index 0: a summary (`response.reasoning_summary_part.added`,
    `response.reasoning_summary_text.delta` per piece, `.done`, `response.reasoning_summary_part.done`), or with
    `raw` the reasoning text itself (`response.reasoning_text.delta` per piece, `.done`; open-weight models served
    by vLLM send it); then `response.output_item.done` with the whole item."""
    full = "".join(pieces)
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
    events: list[dict[str, Any]] = [{"type": "response.output_item.added", "output_index": 0, "item": item}]
    if raw:
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        events += [{"type": "response.reasoning_text.delta", **where, "delta": p} for p in pieces]
        events.append({"type": "response.reasoning_text.done", **where, "text": full})
        done = {**item, "content": [{"type": "reasoning_text", "text": full}], "status": "completed"}
    else:
        where = {"item_id": item_id, "output_index": 0, "summary_index": 0}
        events.append({"type": "response.reasoning_summary_part.added", **where, "part": _summary("")})
        events += [{"type": "response.reasoning_summary_text.delta", **where, "delta": p} for p in pieces]
        events.append({"type": "response.reasoning_summary_text.done", **where, "text": full})
        events.append({"type": "response.reasoning_summary_part.done", **where, "part": _summary(full)})
        done = {**item, "summary": [_summary(full)], "status": "completed"}
    events.append({"type": "response.output_item.done", "output_index": 0, "item": done})
    return events


def _summary(text: str) -> dict[str, Any]:
    return {"type": "summary_text", "text": text}


def responses_reasoning_events(
    reasoning: Sequence[str],
    pieces: Sequence[str],
    *,
    raw: bool = False,
    background: bool = False,
    terminal: str | None = "response.completed",
    response_id: str = "resp_demo",
    model: str = "model-a",
) -> list[dict[str, Any]]:
    """The events (unnumbered) of a Responses answer from a reasoning model: the reasoning item first (output_index
    0: its summary, or with `raw` its reasoning text, see `_reasoning_events`), then the message (output_index 1),
    whose `response.output_text.delta`s therefore come after every reasoning delta. `background` plays a background
    response that waits for a worker: `response.created` (status "queued"), `response.queued`, then
    `response.in_progress`. (`response.created` stays first: the official SDK's `responses.stream()` raises
    RuntimeError when any other event opens the stream.) Usage counts the reasoning pieces as `reasoning_tokens`."""
    events = _opening(response_id, model)
    if background:  # created says "queued"; in_progress comes once a worker takes it
        events[0]["response"]["status"] = "queued"
        events.insert(1, responses_queued_event(response_id, model))
    thinking = _reasoning_events(reasoning, raw=raw)
    events += thinking + _message_events(pieces, 1, "msg_demo", "output_text")
    if terminal is not None:
        output = [thinking[-1]["item"], events[-1]["item"]]
        usage = responses_usage(output_tokens=len(reasoning) + len(pieces), reasoning_tokens=len(reasoning))
        events.append(_terminal(terminal, response_id, model, output, usage, "max_output_tokens"))
    return events
