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
from streamlab.core.scan import Block

__all__ = ["chat_findings"]


def _done(streams: Sequence[Stream]) -> Finding:
    worst = Worst("chat.done")
    for st in streams:
        events = st.scan.events
        dones = [b for b in events if is_done(b)]
        if not dones:
            last = events[-1] if events else None
            worst.add(Status.FAIL, f"{st.name}: the body ended without data: [DONE] after {len(events)} events",
                      st.at(last) if last else body_evidence(st.result))
            continue
        after = [b for b in events if b.number is not None and b.number > (dones[0].number or 0)]
        others = [b for b in after if not is_done(b)]
        if others:
            worst.add(Status.FAIL, f"{st.name}: event #{others[0].number} comes after [DONE], where the SDK "
                      "never reads", st.at(others[0]))
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
                object_w.add(Status.WARN, f"{st.name}: \"object\" is {obj.get('object')!r}", st.at(block, b'"object"'))
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
    return [json_w.result(f"every data line but [DONE] is a JSON object ({chunks} chunks)"),
            object_w.result("every chunk says \"object\": \"chat.completion.chunk\""),
            id_w.result("one id per stream, on every chunk"),
            delta_w.result("every choice has an integer index and a delta object")]


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
    role_w, repeat_w, null_w, finish_w = (Worst(c) for c in
                                          ("chat.role", "chat.role_repeated", "chat.finish_null", "chat.finish"))
    for st in streams:
        entries = by_index(st)
        if not entries:
            last = st.scan.events[-1] if st.scan.events else None
            finish_w.add(Status.FAIL, f"{st.name}: no choice ever arrived",
                         st.at(last) if last else body_evidence(st.result))
        for i, rows in sorted(entries.items()):
            first_block, first = rows[0]
            if (first.get("delta") or {}).get("role") != "assistant":
                role_w.add(Status.FAIL, f"{st.name}: the first delta of choice {i} has no role \"assistant\"",
                           st.at(first_block, b'"delta"'))
            for block, choice in rows[1:]:
                if isinstance(choice.get("delta"), dict) and "role" in choice["delta"] and choice["delta"]["role"]:
                    repeat_w.add(Status.WARN, f"{st.name}: choice {i} repeats the role in event #{block.number}",
                                 st.at(block, b'"role"'))
                    break
            final = next((k for k, (_, c) in enumerate(rows) if c.get("finish_reason") is not None), None)
            if final is None:
                finish_w.add(Status.FAIL, f"{st.name}: choice {i} never got a finish_reason", st.at(rows[-1][0]))
                continue
            for block, choice in rows[:final]:
                if "finish_reason" not in choice:
                    null_w.add(Status.WARN, f"{st.name}: event #{block.number} leaves finish_reason out instead of "
                               "sending null", st.at(block, b'"delta"'))
                    break
            late = next(((b, c) for b, c in rows[final + 1:] if carries(c.get("delta"))), None)
            if late is not None:
                finish_w.add(Status.FAIL, f"{st.name}: choice {i} carries content after its finish_reason",
                             st.at(late[0], b'"delta"'))
    return [role_w.result("the first delta of every choice says role \"assistant\""),
            repeat_w.result("the role comes once per choice"),
            null_w.result("finish_reason is null on every chunk before the final one"),
            finish_w.result("every choice ends with a finish_reason, nothing after it")]


def _usage_blocks(st: Stream) -> list[Block]:
    return [b for b in st.chunks if isinstance(b.obj.get("usage"), dict)]


def _usage(unasked: Sequence[Stream], asked: Stream | None) -> list[Finding]:
    extra = Worst("usage.unrequested")
    for st in unasked:
        for block in _usage_blocks(st):
            if block.obj.get("choices") == []:
                extra.add(Status.FAIL, f"{st.name}: a usage chunk with choices == [] arrived although no usage was "
                          "asked for", st.at(block, b'"usage"'))
            else:
                extra.add(Status.WARN, f"{st.name}: event #{block.number} carries usage although none was asked for",
                          st.at(block, b'"usage"'))
    found = [extra.result(f"no usage in the {len(unasked)} stream(s) that did not ask for it")]
    if asked is None:
        return found + [Finding(c, Status.SKIP, "no stream asked for usage")
                        for c in ("usage.chunk", "usage.choices", "usage.counts")]
    blocks = _usage_blocks(asked)
    if not blocks:
        last = asked.scan.events[-1] if asked.scan.events else None
        return found + [
            Finding("usage.chunk", Status.FAIL, f"{asked.name}: include_usage was set, but no chunk carried usage",
                    asked.at(last) if last else body_evidence(asked.result)),
            Finding("usage.choices", Status.SKIP, "no usage chunk came"),
            Finding("usage.counts", Status.SKIP, "no usage came")]
    last = blocks[-1]
    if len(blocks) > 1:
        found.append(Finding("usage.chunk", Status.WARN, f"{asked.name}: {len(blocks)} chunks carried usage (running "
                             "totals?): keep the last, never add them up", asked.at(blocks[0], b'"usage"')))
    else:
        found.append(Finding("usage.chunk", Status.PASS, f"{asked.name}: one usage chunk, event #{last.number}"))
    if last.obj.get("choices") == []:
        found.append(Finding("usage.choices", Status.PASS, f"{asked.name}: the usage chunk has choices == []"))
    else:
        found.append(Finding("usage.choices", Status.WARN, f"{asked.name}: the usage chunk carries choices "
                             f"{json.dumps(last.obj.get('choices'))[:60]}", asked.at(last, b'"choices"')))
    text = any(carries(c.get("delta")) for _, c in asked.choices())
    problem = count_problem(last.obj["usage"], ("prompt_tokens", "completion_tokens", "total_tokens"), text)
    if problem:
        found.append(Finding("usage.counts", Status.FAIL, f"{asked.name}: {problem}", asked.at(last, b'"usage"')))
    else:
        u = last.obj["usage"]
        found.append(Finding("usage.counts", Status.PASS, f"{asked.name}: prompt {u['prompt_tokens']} + completion "
                             f"{u['completion_tokens']} = total {u['total_tokens']}"))
    return found



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
            fn = frag.get("function") if isinstance(frag.get("function"), dict) else {}
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
                index_w.add(Status.FAIL, f"{st.name}: a tool-call fragment is not an object",
                            st.at(block, b"tool_calls"))
                continue
            ci, idx, fid = choice["index"], frag.get("index"), frag.get("id")
            if isinstance(idx, int) and not isinstance(idx, bool):
                call = by_key.get((ci, idx))
                if call is not None and fid and frag.get("type") and call.id and fid != call.id:
                    index_w.add(Status.FAIL, f"{st.name}: a second call ({fid!r}) reuses index {idx}",
                                st.at(block, b'"index"'))
                    call = None
                if call is None:
                    call = by_key[(ci, idx)] = _Call(ci, idx)
                    calls.append(call)
            else:
                index_w.add(Status.FAIL, f"{st.name}: a tool-call fragment has no integer index",
                            st.at(block, b"tool_calls"))
                call = next((c for c in calls if fid and c.id == fid), None)
                if call is None and (fid or not calls):
                    call = _Call(ci, None)
                    calls.append(call)
                call = call or calls[-1]
            call.fragments.append((block, frag))
    return calls


def _tools(st: Stream | None) -> list[Finding]:
    ids = ("tools.index", "tools.header", "tools.arguments", "tools.finish")
    if st is None:
        return [Finding(c, Status.SKIP, "the tool probe got no stream") for c in ids]
    index_w, header_w, args_w, finish_w = (Worst(c) for c in ids)
    calls = _calls(st, index_w)
    if not calls:
        return [Finding(c, Status.SKIP, f"{st.name}: the model answered without calling a tool (nothing to grade)")
                for c in ids]
    for call in calls:
        for key, label in (("id", "id"), ("type", "type")):
            got = call.strings(key)
            if not got:
                status = Status.FAIL if key == "id" else Status.WARN
                header_w.add(status, f"{st.name}: call {call.index} never got a{'n' if key == 'id' else ''} {label}",
                             st.at(call.fragments[0][0], b"tool_calls"))
            elif len(got) > 1:
                header_w.add(Status.WARN, f"{st.name}: call {call.index} sends its {label} {len(got)} times",
                             st.at(got[1][0], b'"tool_calls"'))
        joined = "".join(v for _, v in call.strings("arguments"))
        try:
            value = json.loads(joined)
        except (ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            args_w.add(Status.FAIL, f"{st.name}: call {call.index}'s arguments, joined from {len(call.fragments)} "
                       f"fragment(s), are not a JSON object: {joined[:60]!r}",
                       st.at(call.fragments[-1][0], b"arguments"))
    rows = by_index(st)
    for ci in sorted({c.choice for c in calls}):
        final = next(((b, c) for b, c in rows.get(ci, []) if c.get("finish_reason") is not None), None)
        if final is None or final[1]["finish_reason"] != "tool_calls":
            reason = "no finish_reason" if final is None else f"finish_reason {final[1]['finish_reason']!r}"
            finish_w.add(Status.FAIL, f"{st.name}: choice {ci} called a tool but ended with {reason}",
                         st.at(final[0], b"finish_reason") if final else None)
    names = ", ".join(sorted({"".join(v for _, v in c.strings("name")) for c in calls}))
    return [index_w.result(f"{len(calls)} call(s) ({names}), each fragment with its index"),
            header_w.result("each call's id and type came once"),
            args_w.result(f"joined arguments parse as JSON objects ({sum(len(c.fragments) for c in calls)} "
                          "fragments, parsed once complete)"),
            finish_w.result("finish_reason \"tool_calls\"")]


# -- all of them ----------------------------------------------------------------------------------------------


def chat_findings(results: Sequence[ProbeResult]) -> list[Finding]:
    answers = [r for r in pick(results, "chat") if r.request.kind != "error"]
    streams = streams_of(answers)
    by_kind = {st.result.request.kind: st for st in streams}
    unasked = [st for st in streams if st.result.request.kind != "usage"]
    return [grade_http("chat.http", answers), grade_framing("chat.framing", streams, chat=True), _done(streams),
            *_json_and_shape(streams), *_roles_and_finish(streams), *_usage(unasked, by_kind.get("usage")),
            *_tools(by_kind.get("tools"))]
