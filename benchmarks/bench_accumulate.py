"""Accumulator benchmark: rebuilding an answer from 100,000 deltas, against peers measured in the same run.

Run it (never from pytest; it prints numbers and checks results, it asserts nothing about speed):

    .venv/bin/python benchmarks/bench_accumulate.py               # 100,000 deltas per workload, about a minute
    .venv/bin/python benchmarks/bench_accumulate.py --clock cpu   # CPU time: steadier when the machine is busy
    .venv/bin/python benchmarks/bench_accumulate.py --deltas 20000 --sdk-deltas 0   # a quick look

Three workloads, each a list of already parsed `SSEEvent`s (the parser is measured by bench_parsers.py), so
the time is the accumulator's alone, JSON decoding of every event included:

1. Chat text: a role chunk, N content chunks of a few characters each (some multi-byte), a finish chunk, [DONE].
2. Chat tool-call arguments: one call announced, then N argument fragments, then finish_reason "tool_calls".
3. Responses function-call arguments: N `response.function_call_arguments.delta` events, then `.done`.

Contenders, all fed the same events:

* streamlab: `ChatAccumulator` / `ResponsesAccumulator` (pieces kept in lists, joined when read);
* naive: the same decoding with text grown by `store[i] = store.get(i, "") + piece` inside a dict, which is
  how the accumulators grew text before (quadratic: every delta copies the whole string so far);
* openai: the official SDK's `ChatCompletionStreamState` (what `client.chat.completions.stream()` runs), each
  chunk validated with `ChatCompletionChunk.model_validate_json` as in tests/library/test_accumulate.py (Chat only;
  the SDK's Responses state needs typed event objects of every kind, so it is left out there). It is far
  slower (a pydantic model per chunk, and strings grown with `+=` inside dicts), so it gets its own table at
  --sdk-deltas (10,000 by default), with streamlab measured again at that size;
* json.loads only: decoding every event and nothing else, the floor any accumulator pays.

Every contender's final text or arguments are compared with the expected string; a mismatch is printed.
Runs: the best of --repeat (one run for anything slower than 2 s), garbage collector off during each run.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

try:
    import streamlab  # noqa: F401
except ImportError:  # run from a checkout without the editable install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import openai
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from streamlab.core import shapes
from streamlab.core.accumulate import ChatAccumulator, ResponsesAccumulator
from streamlab.core.sse import SSEEvent

PIECES = (" the", " stream", ",", " caf\u00e9", " \u4e16\u754c", " \U0001f642", " token", ".")


def _chunk_event(delta: dict, finish: str | None = None) -> SSEEvent:
    return SSEEvent(data=shapes.to_json(shapes.chat_chunk([shapes.chat_choice(delta, finish_reason=finish)])))


def chat_text_events(n: int) -> tuple[list[SSEEvent], str]:
    """A Chat text answer of `n` content deltas, and the text it spells."""
    pieces = [PIECES[k % len(PIECES)] for k in range(n)]
    events = [_chunk_event({"role": "assistant", "content": ""})]
    events += [_chunk_event({"content": p}) for p in pieces]
    events += [_chunk_event({}, "stop"), SSEEvent(data="[DONE]")]
    return events, "".join(pieces)


def _argument_pieces(n: int) -> list[str]:
    """`n` fragments that together make one JSON object: {"k0": 0, "k1": 1, ...}."""
    body = [f'"k{k}": {k}, ' for k in range(n - 2)]
    return ["{", *body, '"end": true}'] if n >= 2 else ['{"end": true}']


def chat_arguments_events(n: int) -> tuple[list[SSEEvent], str]:
    """One Chat tool call whose arguments arrive in `n` fragments, and the arguments string."""
    pieces = _argument_pieces(n)
    opening = {"index": 0, "id": "call_bench", "type": "function", "function": {"name": "f", "arguments": ""}}
    events = [_chunk_event({"role": "assistant", "content": None, "tool_calls": [opening]})]
    events += [_chunk_event({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    events += [_chunk_event({}, "tool_calls"), SSEEvent(data="[DONE]")]
    return events, "".join(pieces)


def responses_arguments_events(n: int) -> tuple[list[SSEEvent], str]:
    """A Responses function call whose arguments arrive in `n` deltas, and the arguments string."""
    pieces = _argument_pieces(n)
    numbered = [dict(ev, sequence_number=k) for k, ev in enumerate(shapes.responses_function_call_events(pieces))]
    events = [SSEEvent(event=ev["type"], data=shapes.to_json(ev)) for ev in numbered]
    return events, "".join(pieces)


# -- contenders: each takes the events and returns the rebuilt string -------------------------------------


def streamlab_chat_text(events: list[SSEEvent]) -> str:
    acc = ChatAccumulator()
    for ev in events:
        acc.feed(ev)
    return acc.text[0]


def streamlab_chat_arguments(events: list[SSEEvent]) -> str:
    acc = ChatAccumulator()
    for ev in events:
        acc.feed(ev)
    return acc.tool_calls[(0, 0)].arguments


def streamlab_responses_arguments(events: list[SSEEvent]) -> str:
    acc = ResponsesAccumulator()
    for ev in events:
        acc.feed(ev)
    return acc.arguments[0]


def naive_chat(events: list[SSEEvent], want: str) -> str:
    """JSON per event, strings grown inside dicts (the accumulators' former way)."""
    text: dict[int, str] = {}
    calls: dict[tuple[int, int], dict[str, str]] = {}
    for ev in events:
        if ev.data == "[DONE]":
            break
        for choice in json.loads(ev.data)["choices"]:
            i, delta = choice["index"], choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text[i] = text.get(i, "") + delta["content"]
            for frag in delta.get("tool_calls") or ():
                call = calls.setdefault((i, frag["index"]), {"arguments": ""})
                call["arguments"] = call["arguments"] + (frag.get("function") or {}).get("arguments", "")
    return text.get(0, "") if want == "text" else calls[(0, 0)]["arguments"]


def naive_responses_arguments(events: list[SSEEvent]) -> str:
    arguments: dict[int, str] = {}
    for ev in events:
        obj = json.loads(ev.data)
        if obj["type"] == "response.function_call_arguments.delta":
            arguments[obj["output_index"]] = arguments.get(obj["output_index"], "") + obj["delta"]
    return arguments[0]


def sdk_chat(events: list[SSEEvent], want: str) -> str:
    """The official SDK's own stream state (openai.lib.streaming.chat.ChatCompletionStreamState)."""
    state = ChatCompletionStreamState()
    for ev in events:
        if ev.data != "[DONE]":
            state.handle_chunk(ChatCompletionChunk.model_validate_json(ev.data))
    message = state.get_final_completion().choices[0].message
    return (message.content or "") if want == "text" else message.tool_calls[0].function.arguments


def json_only(events: list[SSEEvent]) -> str:
    for ev in events:
        if ev.data != "[DONE]":
            json.loads(ev.data)
    return ""


# -- timing --------------------------------------------------------------------------------------------


CLOCK: Callable[[], float] = time.perf_counter  # --clock cpu switches to time.process_time


def best_of(fn: Callable[[], str], repeat: int) -> tuple[float, str]:
    """Best time of `repeat` runs (gc off during each); a run over 2 s is not repeated."""
    best, result = float("inf"), ""
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = CLOCK()
            result = fn()
            elapsed = CLOCK() - t0
        finally:
            gc.enable()
        best = min(best, elapsed)
        if elapsed > 2.0:
            break
    return best, result


Workload = tuple[str, Callable[[int], tuple[list[SSEEvent], str]], list[tuple[str, Callable[[list[SSEEvent]], str]]]]

WORKLOADS: list[Workload] = [
    (
        "Chat text",
        chat_text_events,
        [
            ("streamlab", streamlab_chat_text),
            ("naive s = s + piece", lambda e: naive_chat(e, "text")),
            ("openai SDK", lambda e: sdk_chat(e, "text")),
            ("json.loads only", json_only),
        ],
    ),
    (
        "Chat tool-call arguments",
        chat_arguments_events,
        [
            ("streamlab", streamlab_chat_arguments),
            ("naive s = s + piece", lambda e: naive_chat(e, "arguments")),
            ("openai SDK", lambda e: sdk_chat(e, "arguments")),
            ("json.loads only", json_only),
        ],
    ),
    (
        "Responses function-call arguments",
        responses_arguments_events,
        [
            ("streamlab", streamlab_responses_arguments),
            ("naive s = s + piece", naive_responses_arguments),
            ("json.loads only", json_only),
        ],
    ),
]


def table(n: int, repeat: int, names: set[str]) -> bool:
    """One table: every workload at `n` deltas, the named contenders; True when streamlab was exact."""
    exact = True
    print(f"\n{n:,} deltas per workload")
    print(f"{'workload':<36} {'contender':<22} {'seconds':>9} {'vs streamlab':>13}  result")
    for title, build, contenders in WORKLOADS:
        events, expected = build(n)
        ours = None
        for name, fn in contenders:
            if name not in names:
                continue
            seconds, result = best_of(lambda fn=fn, events=events: fn(events), repeat)
            ours = seconds if name == "streamlab" else ours
            floor = name == "json.loads only"
            ok = floor or result == expected
            exact = exact and (ok or name != "streamlab")
            verdict = "-" if floor else ("exact" if ok else f"MISMATCH ({len(result)} vs {len(expected)} characters)")
            ratio = f"{seconds / ours:.2f}x" if ours else "-"
            print(f"{title:<36} {name:<22} {seconds:9.3f} {ratio:>13}  {verdict}", flush=True)
        print(f"{'':<36} ({len(events):,} events, {len(expected.encode()):,} bytes rebuilt)")
    return exact


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deltas", type=int, default=100_000, help="deltas per workload (default 100,000)")
    ap.add_argument(
        "--sdk-deltas",
        type=int,
        default=10_000,
        help="deltas per workload for the openai SDK's table; 0 leaves it out (default 10,000)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement, the best one counts (default 3)")
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: time.perf_counter (default); cpu: time.process_time, steadier on a loaded machine",
    )
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    print(
        f"Python {sys.version.split()[0]}; openai {openai.__version__}; best of {args.repeat}, gc off during each "
        f"run, {'CPU' if args.clock == 'cpu' else 'wall-clock'} time"
    )
    exact = table(args.deltas, args.repeat, {"streamlab", "naive s = s + piece", "json.loads only"})
    if args.sdk_deltas:  # the SDK validates a pydantic model per chunk and grows strings in place: far slower
        exact = table(args.sdk_deltas, args.repeat, {"streamlab", "openai SDK", "json.loads only"}) and exact
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
