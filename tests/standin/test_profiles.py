"""Provider profiles: each reproduces its documented quirks, and `streamlab check` reports exactly those.

The quirks of every profile are data (`Profile.quirks`: the check each one trips, warn or fail). The central
test runs the real checker against the real stand-in in each profile and demands equality with that data:
no finding the profile does not inject, none missing. The same holds on bytes alone (the planner's answer
through `apply_profile`, graded without a socket), and the OpenAI-exact profile passes every check.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from support import ASK

from streamlab.core import shapes
from streamlab.core.conformance.checks import CHECK_IDS, ProbeResult, Status, probes_for
from streamlab.core.conformance.grade import grade
from streamlab.core.sse import parse
from streamlab.core.standin.profiles import (
    ANSWER_PIECES,
    PROFILE_NAMES,
    PROFILES,
    Quirk,
    answer_episode,
    apply_profile,
    get_profile,
)
from streamlab.core.standin.quirks import FAULTS, Context, frames_of
from streamlab.core.standin.script import Episode, ErrorEpisode, Send, Wait
from streamlab.net.check import check_endpoint
from streamlab.net.standin.server import StandIn
from streamlab.tools.cli.main import build_parser

REFUSAL = ErrorEpisode(
    400, shapes.error_body("invalid type for 'messages'", "invalid_request_error", "invalid_type", "messages")
)
SSE = (("content-type", "text/event-stream"),)


NOT_JSON = ErrorEpisode(
    400, shapes.error_body("We could not parse the JSON body of your request.", "invalid_request_error")
)
TOO_LONG = ErrorEpisode(
    400,
    shapes.error_body(
        "This model's maximum context length is 32768 tokens.",
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
    ),
)
DOCUMENTED_REFUSAL = {"error": REFUSAL, "not_json": NOT_JSON, "too_long": TOO_LONG}


def simulate(name: str) -> list[ProbeResult]:
    """What the stand-in in profile `name` sends each probe, computed without a socket."""
    out = []
    for probe in probes_for("both", "any"):
        answer = DOCUMENTED_REFUSAL.get(probe.kind) or answer_episode(probe.dialect, probe.body)
        request = {} if probe.kind == "not_json" else probe.body
        sent = apply_profile(
            PROFILES[name], answer, dialect=probe.dialect, request=request, not_json=probe.kind == "not_json"
        )
        if isinstance(sent, ErrorEpisode):
            plain = isinstance(sent.body, bytes)
            kind = (("content-type", "text/plain" if plain else "application/json"),)
            out.append(ProbeResult(probe, sent.status, kind, sent.body if plain else json.dumps(sent.body).encode()))
        else:
            out.append(ProbeResult(probe, 200, SSE, sent.payload, ((len(sent.payload), 0.0),)))
    return out


def chunks(body: bytes) -> list[dict]:
    events, _ = parse(body)
    return [json.loads(e.data) for e in events if e.data != "[DONE]"]


# -- the checker reports exactly what each profile injects ---------------------------------------------------------


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_on_bytes_alone_each_profile_draws_exactly_its_quirks(name: str) -> None:
    found = {f.check: f.status for f in grade(simulate(name)) if f.status in (Status.WARN, Status.FAIL)}
    assert found == PROFILES[name].expected()


LEAVES_NOTHING_TO_GRADE = {
    "drop_usage": {"usage.choices", "usage.counts"},
    "error_in_stream_field": {"error.shape"},
    "tools_ignored": {"tools.index", "tools.header", "tools.name", "tools.arguments", "tools.finish"},
    "stream_options_400": {"usage.chunk", "usage.choices", "usage.counts"},
    "responses_tools_ignored": {"responses.arguments"},
}
"""A fault that removes what other checks read (no usage chunk, no error body) makes them skip."""
RESPONSES = {c for c in CHECK_IDS if c.startswith("responses.")}


def expected_skips(name: str) -> set[str]:
    """Every skip follows from a declared quirk, or from a Responses route that is not served (all its checks)."""
    profile = PROFILES[name]
    skips = {c for fault in profile.faults for c in LEAVES_NOTHING_TO_GRADE.get(fault, ())}
    if profile.responses_404 is not None:
        skips |= RESPONSES
    return skips - set(profile.expected())


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_streamlab_check_against_the_stand_in_reports_exactly_the_profiles_quirks(name: str) -> None:
    with StandIn({}, profile=name) as server:
        report = check_endpoint(server.base_url, model="any-model", dialect="both", timeout=10)
    assert report.issues() == PROFILES[name].expected(), report.render(passes=False, timings=False)
    skipped = {f.check for f in report.findings if f.status is Status.SKIP}
    assert skipped == expected_skips(name), "every skip follows from a declared quirk, and no other check skips"
    assert report.exit_code == (1 if any(s is Status.FAIL for s in report.issues().values()) else 0)


def test_the_openai_profile_passes_every_check_and_skips_none() -> None:
    with StandIn({}, profile="openai") as server:
        report = check_endpoint(server.base_url, model="gpt-anything", dialect="both", timeout=10)
    assert [f.check for f in report.findings] == list(CHECK_IDS)
    assert all(f.status is Status.PASS for f in report.findings), report.render(passes=False)


def test_each_fault_is_used_and_each_profile_differs() -> None:
    used = {name for p in PROFILES.values() for name in p.faults}
    assert used == set(FAULTS)
    assert len({frozenset(p.expected().items()) for p in PROFILES.values()}) == len(PROFILES)


# -- documented where the docstring says ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in PROFILE_NAMES if n not in ("broken", "reasoning", "usage-over-cap")])
def test_every_quirk_of_a_real_server_cites_its_sources_in_the_profile_doc(name: str) -> None:
    profile = PROFILES[name]
    assert profile.doc and profile.title
    for quirk in profile.quirks:
        assert quirk.sources or quirk.capture, quirk
        for source in quirk.sources:
            assert source.startswith("https://github.com/") and source in profile.doc, source
        if quirk.capture:  # a real capture: NAME.sse (the bytes) beside NAME.json, named in the doc
            folder, _, file = quirk.capture.rpartition("/")
            assert folder.startswith("streamlab/data/captures/") and file.endswith(".sse"), quirk.capture
            assert folder + "/" in profile.doc and f"`{file.removesuffix('.sse')}`" in profile.doc, quirk.capture


def test_the_profiles_of_the_real_servers_in_lab_11_cite_a_capture_for_every_quirk() -> None:
    root = Path(__file__).resolve().parents[2]
    for name in ("llama-cpp-python", "llama-server"):
        assert all(q.capture for q in PROFILES[name].quirks), name
        for quirk in PROFILES[name].quirks:  # the cited capture ships: its bytes and its record
            sse = root / quirk.capture
            assert sse.is_file() and sse.with_suffix(".json").is_file(), quirk.capture


def test_the_broken_profile_says_it_is_no_real_server() -> None:
    broken = PROFILES["broken"]
    assert "no real server" in broken.doc and len(broken.quirks) >= 5
    assert {q.check.split(".")[0] for q in broken.quirks} >= {"chat", "usage", "tools", "error", "responses"}


# -- what a profile changes, and what it keeps -----------------------------------------------------------------


def test_a_profile_keeps_the_timing_and_the_untouched_bytes() -> None:
    request = {"model": "m", "messages": ASK, "stream": True, "stream_options": {"include_usage": True}}
    answer = answer_episode("chat", request)
    assert apply_profile(PROFILES["openai"], answer, dialect="chat", request=request).steps == answer.steps
    changed = apply_profile(PROFILES["vllm"], answer, dialect="chat", request=request)
    waits = [s for s in answer.steps if isinstance(s, Wait)]
    assert [s for s in changed.steps if isinstance(s, Wait)] == waits
    assert len(changed.steps) == len(answer.steps) and changed.steps != answer.steps


def test_the_documented_usage_rule_and_the_profiles_own() -> None:
    plain = {"model": "m", "messages": ASK, "stream": True}
    asked = dict(plain, stream_options={"include_usage": True})
    answer = answer_episode("chat", plain)
    for name, without, with_ in [("openai", False, True), ("ollama", False, False), ("llamacpp", True, True)]:
        sent = [apply_profile(PROFILES[name], answer, dialect="chat", request=r).payload for r in (plain, asked)]
        assert [any(isinstance(c.get("usage"), dict) for c in chunks(body)) for body in sent] == [without, with_], name
    body = apply_profile(PROFILES["llamacpp"], answer, dialect="chat", request=plain).payload
    finish = next(c for c in chunks(body) if c["choices"] and c["choices"][0].get("finish_reason"))
    assert finish["usage"]["completion_tokens"] == len(ANSWER_PIECES) and "timings" in finish


def test_the_variations_change_bytes_but_break_no_promise() -> None:
    tools = {
        "model": "m",
        "messages": ASK,
        "stream": True,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
                },
            }
        ],
    }
    ctx = Context("chat", tools)
    frames = frames_of(answer_episode("chat", tools).steps)
    whole = FAULTS["tool_call_in_one_chunk"].apply(frames, ctx)
    calls = [c for f in whole if f.chunk for ch in f.obj["choices"] for c in ch["delta"].get("tool_calls") or []]
    assert len(calls) == 1 and json.loads(calls[0]["function"]["arguments"]) == {"location": "Paris, France"}
    pinged = FAULTS["ping_comments"].apply(frames, ctx)
    assert sum(f.encode() == b": ping\n\n" for f in pinged) == len(frames) - 1


def test_refusals_under_each_profile() -> None:
    ctx_request = {"model": "m", "messages": "x", "stream": True}
    flat = apply_profile(PROFILES["vllm"], REFUSAL, dialect="chat", request=ctx_request)
    assert flat.status == 400 and flat.body["object"] == "error" and flat.body["code"] == 400
    in_stream = apply_profile(PROFILES["llamacpp"], REFUSAL, dialect="chat", request=ctx_request)
    assert isinstance(in_stream, Episode) and in_stream.payload.startswith(b"error: {")
    assert in_stream.payload.endswith(b"data: [DONE]\n\n")
    assert apply_profile(PROFILES["openai"], REFUSAL, dialect="chat", request=ctx_request) is REFUSAL
    limited = ErrorEpisode(429, shapes.error_body("slow down", "rate_limit_exceeded"))
    assert apply_profile(PROFILES["llamacpp"], limited, dialect="chat", request=ctx_request) is limited
    gone = apply_profile(PROFILES["ollama"], answer_episode("responses", {}), dialect="responses", request={})
    assert isinstance(gone, ErrorEpisode) and gone.status == 404


def test_scripted_models_keep_their_script_and_other_models_get_the_answer() -> None:
    frames = shapes.chat_text_stream(["Hel", "lo"], model="m")
    ask = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
    with StandIn({"m": Episode([Send(f) for f in frames])}, profile="ollama") as server, httpx.Client() as client:
        scripted = client.post(server.url("chat/completions"), json={"model": "m", **ask}).content
        other = client.post(server.url("chat/completions"), json={"model": "other", **ask}).content
        whole = client.post(server.url("chat/completions"), json={"model": "other", "messages": ask["messages"]})
    texts = [
        "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks(body) if c["choices"])
        for body in (scripted, other)
    ]
    assert texts == ["Hello", "".join(ANSWER_PIECES)]
    assert all(c["choices"][0]["delta"]["role"] == "assistant" for c in chunks(scripted) if c["choices"])
    assert whole.json()["choices"][0]["message"]["content"] == "".join(ANSWER_PIECES)


def test_unknown_names_are_refused_and_say_what_is_known() -> None:
    with pytest.raises(ValueError, match="known: openai, vllm, ollama, litellm, llamacpp, broken"):
        get_profile("gateway")
    with pytest.raises(ValueError, match="unknown check"):
        Quirk("chat.nope", Status.WARN, "", (), "no_done")
    with pytest.raises(ValueError, match="warn or a fail"):
        Quirk("chat.done", Status.PASS, "", (), "no_done")
    with pytest.raises(ValueError, match="unknown fault"):
        Quirk("chat.done", Status.FAIL, "", (), "nothing")
    with pytest.raises(ValueError, match="unknown profile"):
        StandIn({}, profile="nope")
    assert build_parser().parse_args(["standin", "--profile", "vllm"]).profile == "vllm"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["standin", "--profile", "nope"])


def test_the_compatibility_matrix_figure_and_its_text_twin_agree() -> None:
    from streamlab.core.conformance.checks import Report, render_matrix
    from streamlab.tools.plots import plot_compatibility_matrix

    reports = {name: Report("stand-in", "any", "both", grade(simulate(name))) for name in PROFILE_NAMES}
    fig = plot_compatibility_matrix(reports)
    marks = {text.get_gid(): text.get_text() for text in fig.axes[0].texts}
    assert len(marks) == len(CHECK_IDS) * len(PROFILE_NAMES)
    assert (
        marks["cell:tools.index:ollama"],
        marks["cell:chat.finish_null:vllm"],
        marks["cell:chat.done:openai"],
        marks["cell:responses.terminal:llamacpp"],
    ) == ("F", "W", "", "-")
    twin = {line.split()[0]: line.split()[1:] for line in render_matrix(reports).splitlines()[1:-1]}
    for check in CHECK_IDS:
        assert [marks[f"cell:{check}:{n}"] or "." for n in PROFILE_NAMES] == twin[check]


def test_the_planner_applies_the_profile_to_answers_and_refusals_alike() -> None:
    from streamlab.core.standin.actions import Reply, Stream, Write
    from streamlab.core.standin.plan import plan
    from streamlab.core.standin.request import Request, parse_head
    from streamlab.core.standin.room import Options, Room

    def post(room: Room, path: str, body: dict) -> object:
        head = parse_head(f"POST {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        return plan(room, Request(head, json.dumps(body).encode())).action

    ask = {"model": "unknown", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    plain = Room({})
    assert post(plain, "/v1/chat/completions", ask).status == 404  # no profile: the model does not exist
    llama = Room({}, options=Options(profile=get_profile("llamacpp")))
    answer = post(llama, "/v1/chat/completions", ask)
    assert isinstance(answer, Stream) and b'"timings"' in b"".join(
        a.data for a in answer.actions if isinstance(a, Write)
    )
    refused = post(llama, "/v1/chat/completions", dict(ask, messages="not a list"))
    assert isinstance(refused, Stream) and refused.actions[0].data.startswith(b"error: ")
    gone = post(llama, "/v1/responses", {"model": "unknown", "input": "hi", "stream": True})
    assert isinstance(gone, Reply) and gone.status == 404 and gone.body["error"]["message"] == "File Not Found"


def test_the_stand_in_refuses_a_prompt_over_its_context_and_a_body_that_is_not_json_like_the_api() -> None:
    long = [{"role": "user", "content": "word " * 140_000}]
    with StandIn({}, profile="openai") as server, httpx.Client() as client:
        refused = client.post(server.url("chat/completions"), json={"model": "m", "messages": long, "stream": True})
        garbled = client.post(
            server.url("chat/completions"),
            content=b'{"model": "m", "messages": [',
            headers={"Content-Type": "application/json"},
        )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "context_length_exceeded"
    assert garbled.status_code == 400 and "not valid JSON" in garbled.json()["error"]["message"]


def test_llama_cpp_pythons_named_call_is_never_safe_to_run_for_our_accumulator() -> None:
    from streamlab.core.accumulate import ChatAccumulator, replay

    request = {
        "model": "m",
        "messages": ASK,
        "stream": True,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }
    sent = apply_profile(PROFILES["llama-cpp-python"], answer_episode("chat", request), dialect="chat", request=request)
    acc = replay([sent.payload], ChatAccumulator()).accumulator
    call = acc.tool_calls[(0, 0)]
    assert call.name_repeated == "get_weather" and call.name.startswith("get_weatherget_weather")
    assert "do not run it" in acc.tool_call_problem(0, 0)
    required = dict(request, tool_choice="required")
    text = apply_profile(
        PROFILES["llama-cpp-python"], answer_episode("chat", required), dialect="chat", request=required
    )
    assert not replay([text.payload], ChatAccumulator()).accumulator.tool_calls  # "required" ignored: text


def test_the_llama_server_profile_plays_its_responses_quirks_and_its_plain_chat() -> None:
    request = {"model": "m", "input": "hi", "stream": True, "max_output_tokens": 40}
    sent = apply_profile(
        PROFILES["llama-server"], answer_episode("responses", request), dialect="responses", request=request
    )
    events = chunks(sent.payload)
    assert not any(k in e for e in events for k in ("sequence_number", "output_index", "content_index"))
    assert events[-1]["type"] == "response.completed" and events[-1]["response"]["usage"]["output_tokens"] == 40
    plain = {"model": "m", "messages": ASK, "stream": True}
    chat = apply_profile(PROFILES["llama-server"], answer_episode("chat", plain), dialect="chat", request=plain)
    assert not any("usage" in c for c in chunks(chat.payload))  # usage only when asked, today
    refused = apply_profile(PROFILES["llama-server"], REFUSAL, dialect="chat", request={}, not_json=True)
    assert refused.status == 500 and refused.body["error"]["type"] == "server_error"
    assert apply_profile(PROFILES["llama-server"], REFUSAL, dialect="chat", request=plain) is REFUSAL
