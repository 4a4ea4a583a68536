"""The Chat Completions checks: [DONE], chunk shape, roles, finish reasons, usage, tool calls (sans-IO core).

Each function looks at the Chat streams the checker got (`streamlab.core.conformance.base.Stream`) and returns the
findings of its checks (`streamlab.core.conformance.checks.CHECKS`), worst verdict first seen, with the evidence.
`chat_findings` runs them all; `streamlab.core.conformance.grade.grade` calls it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamlab.core.conformance.base import (
    Stream,
    Worst,
    body_evidence,
    by_index,
    carries,
    count_problem,
    grade_framing,
    grade_http,
    is_done,
    pick,
    streams_of,
)
from streamlab.core.conformance.checks import Finding, ProbeResult, Status
from streamlab.core.safejson import json_or_none
from streamlab.core.scan import Block
from streamlab.core.shapes import REASONING_FIELDS

__all__ = ["ANSWERS", "chat_findings", "over_cap", "reasoning_note", "REASONING_NOTE"]


def _done(streams: Sequence[Stream]) -> Finding:
    worst = Worst("chat.done")
    for st in streams:
        events = st.scan.events
        dones = [b for b in events if is_done(b)]
        if not dones and st.cut:
            continue  # the checker stopped reading before the end: not the server's doing
        if not dones:
            last = events[-1] if events else None
            worst.add(
                Status.FAIL,
                f"{st.name}: the body ended without data: [DONE] after {len(events)} events",
                st.at(last) if last else body_evidence(st.result),
            )
            continue
        after = [b for b in events if b.number is not None and b.number > (dones[0].number or 0)]
        others = [b for b in after if not is_done(b)]
        if others:
            worst.add(
                Status.FAIL,
                f"{st.name}: event #{others[0].number} comes after [DONE], where the SDK never reads",
                st.at(others[0]),
            )
        elif after:
            worst.add(Status.WARN, f"{st.name}: [DONE] sent {len(dones)} times", st.at(after[0]))
    return worst.result(f"exactly one [DONE], last, in each of {len(streams)} streams")


def _json_and_shape(streams: Sequence[Stream]) -> list[Finding]:
    json_w, object_w, id_w, delta_w = (Worst(c) for c in ("chat.json", "chat.object", "chat.id", "chat.delta"))
    for st in streams:
        for block in st.scan.events:
            if is_done(block) or block.event is None or block.event.event != "message":
                continue
            if not isinstance(block.obj, dict):
                json_w.add(Status.FAIL, f"{st.name}: event #{block.number}'s data is not a JSON object", st.at(block))
        first_id: Any = None
        for block in st.chunks:
            obj = block.obj
            if obj.get("object") != "chat.completion.chunk":
                object_w.add(Status.WARN, f'{st.name}: "object" is {obj.get("object")!r}', st.at(block, b'"object"'))
            cid = obj.get("id")
            if not isinstance(cid, str) or not cid:
                id_w.add(Status.WARN, f"{st.name}: event #{block.number} has no id", st.at(block))
            elif first_id is None:
                first_id = cid
            elif cid != first_id:
                id_w.add(Status.WARN, f"{st.name}: the id changes from {first_id!r} to {cid!r}", st.at(block, b'"id"'))
            problem = _choices_problem(obj.get("choices"))
            if problem:
                delta_w.add(Status.FAIL, f"{st.name}: event #{block.number}: {problem}", st.at(block, b'"choices"'))
    chunks = sum(len(st.chunks) for st in streams)
    return [
        json_w.result(f"every data line but [DONE] is a JSON object ({chunks} chunks)"),
        object_w.result('every chunk says "object": "chat.completion.chunk"'),
        id_w.result("one id per stream, on every chunk"),
        delta_w.result("every choice has an integer index and a delta object" + reasoning_note(streams)),
    ]


REASONING_NOTE = "not in the OpenAI reference: documented by the servers that send them, noted, never graded"
"""What the checker says of reasoning fields in Chat deltas (`streamlab.core.shapes.REASONING_FIELDS`)."""


def reasoning_note(streams: Sequence[Stream]) -> str:
    """ "" when no delta carries a reasoning field, else a note for `chat.delta`'s detail: which fields came, in how
    many deltas, how many carried the same text in both (a mirror a client must not show twice), and that they are
    not graded. A reasoning model's thinking is not a fault; the reference simply has no field for it."""
    counts = dict.fromkeys(REASONING_FIELDS, 0)
    mirrored = 0
    for st in streams:
        for _, choice in st.choices():
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            found = [name for name in REASONING_FIELDS if isinstance(delta.get(name), str)]
            for name in found:
                counts[name] += 1
            mirrored += len(found) == 2 and delta[found[0]] == delta[found[1]]
    seen = ", ".join(f"delta.{name} in {n} delta(s)" for name, n in counts.items() if n)
    if not seen:
        return ""
    both = f", the same text in both fields in {mirrored} (count it once)" if mirrored else ""
    return f"; note: reasoning fields {seen}{both}, {REASONING_NOTE}"


def _choices_problem(choices: Any) -> str | None:
    if not isinstance(choices, list):
        return f"choices is {json.dumps(choices)[:40]}, not a list"
    for choice in choices:
        if not isinstance(choice, dict) or not isinstance(choice.get("index"), int):
            return "a choice has no integer index"
        if not isinstance(choice.get("delta"), dict):
            return f"choice {choice['index']} has no delta object"
    return None


def _roles_and_finish(streams: Sequence[Stream]) -> list[Finding]:
    role_w, repeat_w, null_w, finish_w = (
        Worst(c) for c in ("chat.role", "chat.role_repeated", "chat.finish_null", "chat.finish")
    )
    for st in streams:
        entries = by_index(st)
        if not entries and not st.cut:
            last = st.scan.events[-1] if st.scan.events else None
            finish_w.add(
                Status.FAIL, f"{st.name}: no choice ever arrived", st.at(last) if last else body_evidence(st.result)
            )
        for i, rows in sorted(entries.items()):
            first_block, first = rows[0]
            if (first.get("delta") or {}).get("role") != "assistant":
                role_w.add(
                    Status.FAIL,
                    f'{st.name}: the first delta of choice {i} has no role "assistant"',
                    st.at(first_block, b'"delta"'),
                )
            for block, choice in rows[1:]:
                delta = raw if isinstance(raw := choice.get("delta"), dict) else {}
                if "role" in delta and delta["role"] is None:
                    repeat_w.add(
                        Status.WARN,
                        f'{st.name}: choice {i} sends "role": null after its first delta (event #{block.number})',
                        st.at(block, b'"role"'),
                    )
                    break
                if delta.get("role"):
                    repeat_w.add(
                        Status.WARN,
                        f"{st.name}: choice {i} repeats the role in event #{block.number}",
                        st.at(block, b'"role"'),
                    )
                    break
            final = next((k for k, (_, c) in enumerate(rows) if c.get("finish_reason") is not None), None)
            if final is None and st.cut:
                continue
            if final is None:
                finish_w.add(Status.FAIL, f"{st.name}: choice {i} never got a finish_reason", st.at(rows[-1][0]))
                continue
            for block, choice in rows[:final]:
                if "finish_reason" not in choice:
                    null_w.add(
                        Status.WARN,
                        f"{st.name}: event #{block.number} leaves finish_reason out instead of sending null",
                        st.at(block, b'"delta"'),
                    )
                    break
            late = next(((b, c) for b, c in rows[final + 1 :] if carries(c.get("delta"))), None)
            if late is not None:
                finish_w.add(
                    Status.FAIL,
                    f"{st.name}: choice {i} carries content after its finish_reason",
                    st.at(late[0], b'"delta"'),
                )
    return [
        role_w.result('the first delta of every choice says role "assistant"'),
        repeat_w.result("the role comes once per choice"),
        null_w.result("finish_reason is null on every chunk before the final one"),
        finish_w.result("every choice ends with a finish_reason, nothing after it"),
    ]


def _usage_blocks(st: Stream) -> list[Block]:
    return [b for b in st.chunks if isinstance(b.obj.get("usage"), dict)]


def _usage(unasked: Sequence[Stream], asked: Stream | None) -> list[Finding]:
    extra = Worst("usage.unrequested")
    for st in unasked:
        for block in _usage_blocks(st):
            if block.obj.get("choices") == []:
                extra.add(
                    Status.FAIL,
                    f"{st.name}: a usage chunk with choices == [] arrived although no usage was asked for",
                    st.at(block, b'"usage"'),
                )
            else:
                extra.add(
                    Status.WARN,
                    f"{st.name}: event #{block.number} carries usage although none was asked for",
                    st.at(block, b'"usage"'),
                )
    found = [extra.result(f"no usage in the {len(unasked)} stream(s) that did not ask for it")]
    if asked is None:
        return found + [
            Finding(c, Status.SKIP, "no stream asked for usage")
            for c in ("usage.chunk", "usage.choices", "usage.counts")
        ]
    blocks = _usage_blocks(asked)
    if not blocks and asked.cut:
        return found + [
            Finding(
                c,
                Status.SKIP,
                f"{asked.name}: the checker stopped reading before the end "
                f"({asked.result.cut}), where the usage chunk comes",
            )
            for c in ("usage.chunk", "usage.choices", "usage.counts")
        ]
    if not blocks:
        last = asked.scan.events[-1] if asked.scan.events else None
        return found + [
            Finding(
                "usage.chunk",
                Status.FAIL,
                f"{asked.name}: include_usage was set, but no chunk carried usage",
                asked.at(last) if last else body_evidence(asked.result),
            ),
            Finding("usage.choices", Status.SKIP, "no usage chunk came"),
            Finding("usage.counts", Status.SKIP, "no usage came"),
        ]
    last = blocks[-1]
    if len(blocks) > 1:
        found.append(
            Finding(
                "usage.chunk",
                Status.WARN,
                f"{asked.name}: {len(blocks)} chunks carried usage (running totals?): keep the last, never add them up",
                asked.at(blocks[0], b'"usage"'),
            )
        )
    else:
        found.append(Finding("usage.chunk", Status.PASS, f"{asked.name}: one usage chunk, event #{last.number}"))
    if last.obj.get("choices") == []:
        found.append(Finding("usage.choices", Status.PASS, f"{asked.name}: the usage chunk has choices == []"))
    else:
        found.append(
            Finding(
                "usage.choices",
                Status.WARN,
                f"{asked.name}: the usage chunk carries choices {json.dumps(last.obj.get('choices'))[:60]}",
                asked.at(last, b'"choices"'),
            )
        )
    text = any(carries(c.get("delta")) for _, c in asked.choices())
    problem = count_problem(last.obj["usage"], ("prompt_tokens", "completion_tokens", "total_tokens"), text)
    problem = problem or over_cap(
        last.obj["usage"].get("completion_tokens"), asked.result.request.cap, "completion_tokens", "max_tokens"
    )
    if problem:
        found.append(Finding("usage.counts", Status.FAIL, f"{asked.name}: {problem}", asked.at(last, b'"usage"')))
    else:
        u = last.obj["usage"]
        found.append(
            Finding(
                "usage.counts",
                Status.PASS,
                f"{asked.name}: prompt {u['prompt_tokens']} + completion "
                f"{u['completion_tokens']} = total {u['total_tokens']}",
            )
        )
    return found


def over_cap(made: Any, cap: int | None, made_name: str, cap_name: str) -> str | None:
    """What is wrong when a usage count says more tokens were generated than the request's bound allowed (a
    server that stops at `max_tokens` cannot produce more; a proxy that estimates usage can report more), or None."""
    if isinstance(made, int) and not isinstance(made, bool) and cap is not None and made > cap:
        return f"{made_name} is {made}, more than the {cap_name} of {cap} the request set"
    return None


# -- tool calls ------------------------------------------------------------------------------------------------


@dataclass
class _Call:
    choice: int
    index: int | None
    fragments: list[tuple[Block, dict[str, Any]]] = field(default_factory=list)

    @property
    def id(self) -> str | None:
        return next((f["id"] for _, f in self.fragments if isinstance(f.get("id"), str) and f["id"]), None)

    def strings(self, key: str) -> list[tuple[Block, str]]:
        out = []
        for block, frag in self.fragments:
            fn = raw if isinstance(raw := frag.get("function"), dict) else {}
            value = fn.get(key) if key in ("name", "arguments") else frag.get(key)
            if isinstance(value, str) and (value or key == "arguments"):
                out.append((block, value))
        return out


def _calls(st: Stream, index_w: Worst) -> list[_Call]:
    """Group a Chat stream's tool-call fragments into calls, by (choice, index); a fragment without an index
    joins the call with its id, or the latest call (noting the missing index in `index_w`)."""
    calls: list[_Call] = []
    by_key: dict[tuple[int, int], _Call] = {}
    for block, choice in st.choices():
        fragments = (choice.get("delta") or {}).get("tool_calls") or []
        for frag in fragments if isinstance(fragments, list) else []:
            if not isinstance(frag, dict):
                index_w.add(
                    Status.FAIL, f"{st.name}: a tool-call fragment is not an object", st.at(block, b"tool_calls")
                )
                continue
            ci, idx, fid = choice["index"], frag.get("index"), frag.get("id")
            if isinstance(idx, int) and not isinstance(idx, bool):
                call = by_key.get((ci, idx))
                if call is not None and fid and frag.get("type") and call.id and fid != call.id:
                    index_w.add(
                        Status.FAIL, f"{st.name}: a second call ({fid!r}) reuses index {idx}", st.at(block, b'"index"')
                    )
                    call = None
                if call is None:
                    call = by_key[(ci, idx)] = _Call(ci, idx)
                    calls.append(call)
            else:
                index_w.add(
                    Status.FAIL, f"{st.name}: a tool-call fragment has no integer index", st.at(block, b"tool_calls")
                )
                call = next((c for c in calls if fid and c.id == fid), None)
                if call is None and (fid or not calls):
                    call = _Call(ci, None)
                    calls.append(call)
                call = call or calls[-1]
            call.fragments.append((block, frag))
    return calls


def _finish_of(st: Stream, ci: int) -> tuple[Block, dict[str, Any]] | None:
    return next(((b, c) for b, c in by_index(st).get(ci, []) if c.get("finish_reason") is not None), None)


def _required(st: Stream | None, calls: list[_Call]) -> Finding:
    if st is None:
        return Finding("tools.required", Status.SKIP, "the tool probe got no stream")
    if calls:
        return Finding("tools.required", Status.PASS, f'{st.name}: {len(calls)} call(s), as "required" demands')
    if st.cut:
        return Finding(
            "tools.required",
            Status.SKIP,
            f"{st.name}: the checker stopped reading ({st.result.cut}) before any call came",
        )
    final = _finish_of(st, 0)
    said = f"finish_reason {final[1]['finish_reason']!r}" if final else "no finish_reason"
    text = next((b for b, c in st.choices() if carries(c.get("delta"))), None)
    where = st.at(text, b'"content"') if text else (st.at(final[0]) if final else body_evidence(st.result))
    return Finding(
        "tools.required",
        Status.FAIL,
        f'{st.name}: tool_choice "required", but no tool was called '
        f"(the answer is text, {said}): the request's demand was ignored",
        where,
    )


def _named(st: Stream | None, calls: list[_Call]) -> Finding:
    """A tool_choice that names a function is an order, not a hint: the answer must call it (llama-server
    answers Gemma 270M's named call in prose)."""
    if st is None:
        return Finding("tools.named", Status.SKIP, "the named-tool probe got no stream")
    wanted = ((st.result.request.body.get("tool_choice") or {}).get("function") or {}).get("name", "?")
    if calls:
        return Finding(
            "tools.named", Status.PASS, f"{st.name}: {len(calls)} call(s) after tool_choice named {wanted!r}"
        )
    if st.cut:
        return Finding(
            "tools.named", Status.SKIP, f"{st.name}: the checker stopped reading ({st.result.cut}) before any call came"
        )
    final = _finish_of(st, 0)
    said = f"finish_reason {final[1]['finish_reason']!r}" if final else "no finish_reason"
    text = next((b for b, c in st.choices() if carries(c.get("delta"))), None)
    where = st.at(text, b'"content"') if text else (st.at(final[0]) if final else body_evidence(st.result))
    return Finding(
        "tools.named",
        Status.FAIL,
        f"{st.name}: tool_choice names {wanted!r}, but no tool was called (the answer is text, {said}): "
        "the request's demand was ignored",
        where,
    )


def _name(st: Stream, call: _Call, offered: Sequence[str], name_w: Worst) -> None:
    names = call.strings("name")
    joined = "".join(v for _, v in names)
    if joined in offered:
        return
    if not names:
        name_w.add(
            Status.FAIL,
            f"{st.name}: call {call.index} never got a function name",
            st.at(call.fragments[0][0], b"tool_calls"),
        )
    elif len(names) > 1 and all(v == names[0][1] for _, v in names):
        name_w.add(
            Status.FAIL,
            f"{st.name}: call {call.index} repeats its whole name {names[0][1]!r} in {len(names)} "
            f"fragments: joined, as the SDK joins them, it reads {joined[:36]!r}..., which no tool has",
            st.at(names[1][0], b'"name"'),
        )
    else:
        name_w.add(
            Status.FAIL,
            f"{st.name}: call {call.index}'s name joins to {joined[:40]!r}, not a function the "
            f"request offered ({', '.join(offered)})",
            st.at(names[0][0], b'"name"'),
        )


def _legacy(streams: Sequence[Stream]) -> Finding:
    if not streams:
        return Finding("tools.legacy", Status.SKIP, "the tool probes got no stream")
    worst = Worst("tools.legacy")
    for st in streams:
        for block, choice in st.choices():
            delta = raw if isinstance(raw := choice.get("delta"), dict) else {}
            if delta.get("function_call") is not None:
                beside = " beside tool_calls" if delta.get("tool_calls") else ""
                worst.add(
                    Status.WARN,
                    f"{st.name}: event #{block.number} carries the deprecated function_call{beside}",
                    st.at(block, b'"function_call"'),
                )
                break
    return worst.result(f"no function_call in the {len(streams)} tool stream(s)")


def _tools(required: Stream | None, named: Stream | None, offered: Sequence[str]) -> list[Finding]:
    """The tool checks over the stream that asked for a call with "required" and the one that named the function."""
    ids = ("tools.index", "tools.header", "tools.name", "tools.arguments", "tools.finish")
    index_w, header_w, name_w, args_w, finish_w = (Worst(c) for c in ids)
    graded = [(st, _calls(st, index_w)) for st in (required, named) if st is not None]
    first = _required(required, graded[0][1] if required is not None else [])
    second = _named(named, graded[-1][1] if named is not None else [])
    streams = [st for st, _ in graded]
    if not any(calls for _, calls in graded):
        why = "the tool probes got no stream" if not graded else "the model answered without calling a tool"
        return [first, second, *(Finding(c, Status.SKIP, f"{why} (nothing to grade)") for c in ids), _legacy(streams)]
    fragments = 0
    for st, calls in graded:
        for call in calls:
            fragments += len(call.fragments)
            _header(st, call, header_w)
            _name(st, call, offered, name_w)
            _arguments(st, call, args_w)
        for ci in sorted({c.choice for c in calls}):
            final = _finish_of(st, ci)
            allowed = ("tool_calls", "stop") if st.result.request.kind == "named" else ("tool_calls",)
            if final is None and st.cut:
                continue
            if final is None or final[1]["finish_reason"] not in allowed:
                reason = "no finish_reason" if final is None else f"finish_reason {final[1]['finish_reason']!r}"
                finish_w.add(
                    Status.FAIL,
                    f"{st.name}: choice {ci} called a tool but ended with {reason}",
                    st.at(final[0], b"finish_reason") if final else None,
                )
    every = [c for _, calls in graded for c in calls]
    names = ", ".join(sorted({"".join(v for _, v in c.strings("name"))[:40] for c in every}))
    return [
        first,
        second,
        index_w.result(f"{len(every)} call(s) ({names}), each fragment with its index"),
        header_w.result("each call's id and type came once"),
        name_w.result(f"every call names an offered function ({', '.join(offered)})"),
        args_w.result(f"joined arguments parse as JSON objects ({fragments} fragments, parsed once complete)"),
        finish_w.result('finish_reason "tool_calls" (or "stop" after a named tool_choice)'),
        _legacy(streams),
    ]


def _header(st: Stream, call: _Call, header_w: Worst) -> None:
    for key in ("id", "type"):
        got = call.strings(key)
        if not got:
            status = Status.FAIL if key == "id" else Status.WARN
            header_w.add(
                status,
                f"{st.name}: call {call.index} never got a{'n' if key == 'id' else ''} {key}",
                st.at(call.fragments[0][0], b"tool_calls"),
            )
        elif len(got) > 1:
            header_w.add(
                Status.WARN,
                f"{st.name}: call {call.index} sends its {key} {len(got)} times",
                st.at(got[1][0], b'"tool_calls"'),
            )


def _arguments(st: Stream, call: _Call, args_w: Worst) -> None:
    joined = "".join(v for _, v in call.strings("arguments"))
    value = json_or_none(joined)
    if isinstance(value, dict):
        return
    final = _finish_of(st, call.choice)
    cap = st.result.request.cap
    if (
        st.cut
        or (final is not None and final[1]["finish_reason"] == "length")
        or (cap is not None and len(call.fragments) >= cap)
    ):
        return  # the checker's own bound (its deadline, or the max_tokens it sent) stopped the arguments
    args_w.add(
        Status.FAIL,
        f"{st.name}: call {call.index}'s arguments, joined from {len(call.fragments)} "
        f"fragment(s), are not a JSON object{control_note(joined)}: {joined[:60]!r}",
        st.at(call.fragments[-1][0], b"arguments"),
    )


def control_note(text: str) -> str:
    """A note when `text` fails to parse because of a raw control character inside a string, else ""."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Invalid control character"):
            return f" (a raw control character, U+{ord(text[exc.pos]):04X}, inside a string: JSON forbids it)"
    except (ValueError, RecursionError):
        pass
    return ""


# -- all of them ----------------------------------------------------------------------------------------------


ANSWERS = ("text", "usage", "tools", "named")
"""The probe kinds answered with a stream (the others are requests the API must refuse)."""


def _offered(results: Sequence[ProbeResult]) -> list[str]:
    names = []
    for r in results:
        for tool in r.request.body.get("tools") or []:
            spec = tool.get("function", tool) if isinstance(tool, dict) else {}
            if isinstance(spec, dict) and isinstance(spec.get("name"), str) and spec["name"] not in names:
                names.append(spec["name"])
    return names


def chat_findings(results: Sequence[ProbeResult]) -> list[Finding]:
    answers = [r for r in pick(results, "chat") if r.request.kind in ANSWERS]
    streams = streams_of(answers)
    by_kind = {st.result.request.kind: st for st in streams}
    unasked = [st for st in streams if st.result.request.kind != "usage"]
    tools = _tools(by_kind.get("tools"), by_kind.get("named"), _offered(answers))
    return [
        grade_http("chat.http", answers),
        grade_framing("chat.framing", streams, chat=True),
        _done(streams),
        *_json_and_shape(streams),
        *_roles_and_finish(streams),
        *_usage(unasked, by_kind.get("usage")),
        *tools,
    ]
