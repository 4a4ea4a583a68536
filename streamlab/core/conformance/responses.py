"""The Responses API checks: event names, sequence numbers, .done values, the terminal event, usage (sans-IO core).

Each function looks at the Responses streams the checker got (`streamlab.core.conformance.base.Stream`) and returns
its check's finding (`streamlab.core.conformance.checks.CHECKS`), worst verdict first seen, with the evidence.
`responses_findings` runs them all; `streamlab.core.conformance.grade.grade` calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamlab.core.conformance.base import (
    RESPONSES_TERMINALS,
    Stream,
    Worst,
    body_evidence,
    count_problem,
    grade_framing,
    grade_http,
    pick,
    streams_of,
    unserved,
)
from streamlab.core.conformance.chat import over_cap
from streamlab.core.conformance.checks import Finding, ProbeResult, Status
from streamlab.core.resume import sequence_verdict
from streamlab.core.safejson import json_or_none
from streamlab.core.scan import Block

__all__ = ["responses_findings"]


def _typed(st: Stream) -> list[tuple[Block, dict[str, Any]]]:
    return [(b, b.obj) for b in st.scan.events if isinstance(b.obj, dict) and isinstance(b.obj.get("type"), str)]


def _event_types(streams: Sequence[Stream]) -> Finding:
    worst = Worst("responses.event_type")
    for st in streams:
        for block in st.scan.events:
            obj = block.obj
            if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
                worst.add(
                    Status.FAIL, f"{st.name}: event #{block.number} is not a JSON object with a type", st.at(block)
                )
                continue
            line = block.event_line
            if line is None:
                worst.add(
                    Status.WARN, f"{st.name}: event #{block.number} ({obj['type']}) has no event: line", st.at(block)
                )
            elif line != obj["type"]:
                worst.add(
                    Status.FAIL,
                    f"{st.name}: event #{block.number} says event: {line} but its type is {obj['type']}",
                    st.at(block, b"event:"),
                )
    return worst.result("every event's event: line equals its JSON type")


_WHERE = {
    **{
        t: ("output_index",)
        for t in (
            "response.output_item.added",
            "response.output_item.done",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
        )
    },
    **{
        t: ("output_index", "content_index")
        for t in (
            "response.content_part.added",
            "response.content_part.done",
            "response.output_text.delta",
            "response.output_text.done",
            "response.refusal.delta",
            "response.refusal.done",
            "response.reasoning_text.delta",
            "response.reasoning_text.done",
        )
    },
    **{
        t: ("output_index", "summary_index")
        for t in (
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_part.done",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
        )
    },
}
"""The index fields the API reference gives each output event (every one of them also has a sequence_number),
the reasoning events' among them: a reasoning summary's parts are numbered by `summary_index`, raw reasoning text
by `content_index` (the openai SDK's `ResponseReasoningSummaryTextDeltaEvent`, `ResponseReasoningTextDeltaEvent`)."""


def _indexes(streams: Sequence[Stream]) -> Finding:
    worst = Worst("responses.indexes")
    seen = 0
    for st in streams:
        for block, obj in _typed(st):
            wanted = _WHERE.get(obj["type"], ())
            seen += bool(wanted)
            missing = [k for k in wanted if not isinstance(obj.get(k), int) or isinstance(obj.get(k), bool)]
            if missing:
                worst.add(
                    Status.FAIL,
                    f"{st.name}: event #{block.number} ({obj['type']}) has no integer {' or '.join(missing)}",
                    st.at(block),
                )
    return worst.result(f"{seen} output event(s), each with its output_index (and content_index or summary_index)")


def _sequence(streams: Sequence[Stream]) -> Finding:
    worst = Worst("responses.sequence")
    for st in streams:
        previous: int | None = None
        for block, obj in _typed(st):
            seq = obj.get("sequence_number")
            if not isinstance(seq, int) or isinstance(seq, bool):
                worst.add(
                    Status.FAIL,
                    f"{st.name}: event #{block.number} ({obj['type']}) has no integer sequence_number",
                    st.at(block),
                )
            elif (verdict := sequence_verdict(previous, seq, keepalive=obj["type"] == "keepalive")) == "new":
                previous = seq
            elif verdict != "repeat":  # a keep-alive repeating a number is harmless (the library's one rule)
                worst.add(
                    Status.FAIL,
                    f"{st.name}: event #{block.number} ({obj['type']}) has sequence_number {seq} after {previous}",
                    st.at(block, b'"sequence_number"'),
                )
    return worst.result("sequence_number strictly increases in every stream")


_DELTA_DONE = {
    "response.output_text.delta": ("text", "delta"),
    "response.output_text.done": ("text", "text"),
    "response.refusal.delta": ("refusal", "delta"),
    "response.refusal.done": ("refusal", "refusal"),
    "response.function_call_arguments.delta": ("arguments", "delta"),
    "response.function_call_arguments.done": ("arguments", "arguments"),
    "response.reasoning_summary_text.delta": ("reasoning summary", "delta"),
    "response.reasoning_summary_text.done": ("reasoning summary", "text"),
    "response.reasoning_text.delta": ("reasoning text", "delta"),
    "response.reasoning_text.done": ("reasoning text", "text"),
}


def _done_matches(streams: Sequence[Stream]) -> Finding:
    worst = Worst("responses.done_matches")
    compared = 0
    for st in streams:
        built: dict[tuple[Any, ...], str] = {}
        for block, obj in _typed(st):
            kind = _DELTA_DONE.get(obj["type"])
            if kind is None or not isinstance(obj.get(kind[1]), str):
                continue
            key = (
                kind[0],
                obj.get("item_id"),
                obj.get("output_index"),
                obj.get("content_index"),
                obj.get("summary_index"),
            )
            if obj["type"].endswith(".delta"):
                built[key] = built.get(key, "") + obj[kind[1]]
                continue
            compared += 1
            if built.get(key, "") != obj[kind[1]]:
                worst.add(
                    Status.FAIL,
                    f"{st.name}: {obj['type']} says {obj[kind[1]][:40]!r}, the deltas joined give "
                    f"{built.get(key, '')[:40]!r}",
                    st.at(block, f'"{kind[1]}"'.encode()),
                )
    return worst.result(f"{compared} .done value(s), each equal to its deltas")


def _terminal(streams: Sequence[Stream]) -> Finding:
    worst = Worst("responses.terminal")
    for st in streams:
        typed = _typed(st)
        ends = [k for k, (_, obj) in enumerate(typed) if obj["type"] in RESPONSES_TERMINALS]
        if not ends and st.cut:
            continue  # the checker stopped reading before the end
        if not ends:
            last = typed[-1] if typed else None
            worst.add(
                Status.FAIL,
                f"{st.name}: no terminal event (the last was {last[1]['type'] if last else 'none'})",
                st.at(last[0]) if last else body_evidence(st.result),
            )
        elif len(ends) > 1:
            block = typed[ends[1]][0]
            worst.add(Status.FAIL, f"{st.name}: {len(ends)} terminal events", st.at(block))
        elif ends[0] != len(typed) - 1:
            block, obj = typed[ends[0] + 1]
            worst.add(Status.FAIL, f"{st.name}: {obj['type']} comes after the terminal event", st.at(block))
    return worst.result(f"one terminal event, last, in each of {len(streams)} streams")


def _incomplete(streams: Sequence[Stream]) -> Finding:
    worst = Worst("responses.incomplete")
    seen = []
    for st in streams:
        cap = st.result.request.cap
        end = next(((b, o) for b, o in _typed(st) if o["type"] in RESPONSES_TERMINALS), None)
        if end is None or cap is None:
            continue
        response = raw if isinstance(raw := end[1].get("response"), dict) else {}
        usage = raw if isinstance(raw := response.get("usage"), dict) else {}
        made = usage.get("output_tokens")
        if end[1]["type"] == "response.completed" and isinstance(made, int) and made >= cap:
            worst.add(
                Status.FAIL,
                f"{st.name}: {made} output tokens reached max_output_tokens ({cap}), yet the "
                "answer ends response.completed, not response.incomplete",
                st.at(end[0], b'"usage"'),
            )
        else:
            seen.append(
                f"{st.name}: {end[1]['type']}" + (f" at {made} of {cap} tokens" if isinstance(made, int) else "")
            )
    return worst.result("; ".join(seen) or "no stream reached its terminal event")


def _responses_usage(streams: Sequence[Stream]) -> Finding:
    worst = Worst("responses.usage")
    graded = []
    for st in streams:
        typed = _typed(st)
        done = next(((b, o) for b, o in typed if o["type"] == "response.completed"), None)
        if done is None:
            continue
        response = raw if isinstance(raw := done[1].get("response"), dict) else {}
        usage = response.get("usage")
        produced = any(o["type"].endswith(".delta") for _, o in typed)
        problem = (
            "response.completed carries no usage"
            if not isinstance(usage, dict)
            else count_problem(usage, ("input_tokens", "output_tokens", "total_tokens"), produced)
            or over_cap(usage.get("output_tokens"), st.result.request.cap, "output_tokens", "max_output_tokens")
        )
        if problem:
            worst.add(Status.FAIL, f"{st.name}: {problem}", st.at(done[0], b'"usage"'))
        graded.append(st.name)
    if not graded and worst.found is None:
        return Finding("responses.usage", Status.SKIP, "no response.completed arrived")
    return worst.result(f"usage adds up on response.completed ({', '.join(graded)})")


def _responses_arguments(st: Stream | None) -> Finding:
    if st is None:
        return Finding("responses.arguments", Status.SKIP, "the tool probe got no stream")
    worst = Worst("responses.arguments")
    items = [
        (b, o["item"])
        for b, o in _typed(st)
        if o["type"] == "response.output_item.done"
        and isinstance(o.get("item"), dict)
        and o["item"].get("type") == "function_call"
    ]
    if not items:
        return Finding("responses.arguments", Status.SKIP, f"{st.name}: the model answered without calling a function")
    for block, item in items:
        value = json_or_none(item.get("arguments") if isinstance(item.get("arguments"), str) else "")
        if not isinstance(value, dict):
            worst.add(
                Status.FAIL,
                f"{st.name}: {item.get('name')!r}'s arguments are not a JSON object",
                st.at(block, b'"arguments"'),
            )
    return worst.result(f"{len(items)} function call(s), arguments parse as JSON objects")


_READ = (
    "responses.event_type",
    "responses.sequence",
    "responses.indexes",
    "responses.done_matches",
    "responses.terminal",
    "responses.incomplete",
    "responses.usage",
    "responses.arguments",
)


def responses_findings(results: Sequence[ProbeResult]) -> list[Finding]:
    answers = [r for r in pick(results, "responses") if r.request.kind in ("text", "tools")]
    if (gone := unserved(answers)) is not None:
        said = f"POST /{gone.request.route} answered HTTP {gone.status}: the server does not serve the Responses API"
        return [
            Finding(c, Status.SKIP, f"{said} (nothing to grade)")
            for c in ("responses.http", "responses.framing", *_READ)
        ]
    streams = streams_of(answers)
    tools = next((st for st in streams if st.result.request.kind == "tools"), None)
    findings = [grade_http("responses.http", answers), grade_framing("responses.framing", streams, chat=False)]
    if not streams:
        return findings + [Finding(c, Status.SKIP, "no Responses stream to read") for c in _READ]
    return findings + [
        _event_types(streams),
        _sequence(streams),
        _indexes(streams),
        _done_matches(streams),
        _terminal(streams),
        _incomplete(streams),
        _responses_usage(streams),
        _responses_arguments(tools),
    ]
