"""Lab 09's claims, one test per symptom: each cause is reproduced against the library and each fix shown to work,
so a change in the library that would make the lab's prose wrong fails a test named after the symptom.

The live tests use one stand-in that checks requests like the real API (`require_input`, usage chunks only when
asked for), as the lab does. Nothing here asserts a duration: where the lab compares moments, the test compares
the client's arrival times with the stand-in's own write times (one clock) or waits on a state.
"""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from streamlab.core import shapes
from streamlab.core.accumulate import ChatAccumulator, ResponsesAccumulator
from streamlab.core.endings import Ending, Outcome
from streamlab.core.errors import (
    ConnectionBroken,
    FrameError,
    IdleTimeout,
    NotAnEventStream,
    SequenceError,
    ToolCallError,
)
from streamlab.core.harness import broken
from streamlab.core.harness.fuzz import chunks_at
from streamlab.core.sse import SSEParser
from streamlab.core.standin.script import (
    Cut,
    End,
    Episode,
    KeepAlive,
    Send,
    Stall,
    StoredResponse,
    Wait,
    paced,
)
from streamlab.exercises import verdict
from streamlab.exercises.lab09 import CAPTURES, CAUSES, EXPECTED, READ_CASES, expected_answer
from streamlab.net.chaos.proxy import ChaosProxy
from streamlab.net.client import resume_response, stream_chat, stream_responses
from streamlab.net.relay.app import Relay
from streamlab.net.relay.serving import AppServer
from streamlab.net.resume import ResumableResponseStream
from streamlab.net.sdk import read_sdk_stream
from streamlab.net.standin.server import StandIn

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "09-troubleshooting.ipynb"
ASK = {"messages": [{"role": "user", "content": "Tell me something."}]}
HELLO = shapes.chat_text_stream(["Hel", "lo"])


def _sends(frames: list[bytes]) -> list[Send]:
    return [Send(frame) for frame in frames]


def _events(parser, chunks: list[bytes]) -> list:
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    parser.close()
    return events


def _text(events) -> str:
    acc = ChatAccumulator()
    for event in events:
        acc.feed(event)
    return acc.text.get(0, "")


def _chunks_of(url: str, body: dict) -> list[bytes]:
    with httpx.Client(timeout=10) as http, http.stream("POST", url, json=body) as response:
        return list(response.iter_bytes())


@pytest.fixture(scope="module")
def server():
    with StandIn({"unused": Episode([])}, usage="requested", require_input=True) as standin:
        yield standin


@pytest.fixture
def sdk(server):
    with openai.OpenAI(base_url=server.base_url, api_key="lab09-test", max_retries=0) as client:
        yield client


# -- 1. all the text appears at once -----------------------------------------------------------------------


def test_all_at_once_a_client_that_reads_the_whole_body_shows_nothing_while_the_server_still_writes(server):
    server.set_scripts({"stalls": Episode(_sends(HELLO[:2]) + [Stall()])})  # a first piece, then nothing
    with httpx.Client(timeout=httpx.Timeout(10, read=0.5)) as http, pytest.raises(httpx.ReadTimeout):
        http.post(server.url("chat/completions"), json={"model": "stalls", "stream": True, **ASK})
    with stream_chat(server.base_url, {"model": "stalls", **ASK}, read_timeout=10) as stream:
        for timed in stream:
            if '"content":"Hel"' in timed.data:
                break  # the streaming client has the text while the server is still in its stall
    assert server.wait_idle()
    assert [r.ending for r in server.records("stalls")] == [Ending.CLIENT_GONE, Ending.CLIENT_GONE]


def test_all_at_once_a_buffering_client_shows_text_only_after_the_last_write_and_a_streaming_one_before(server):
    server.set_scripts({"slow": Episode(paced(HELLO, gap=0.2))})
    with httpx.Client(timeout=10) as http:
        response = http.post(server.url("chat/completions"), json={"model": "slow", "stream": True, **ASK})
    on_screen = time.perf_counter()
    assert _text(_events(SSEParser(), [response.content])) == "Hello"
    first_text = None
    with stream_chat(server.base_url, {"model": "slow", **ASK}) as stream:
        for timed in stream:
            if first_text is None and '"content":"Hel"' in timed.data:
                first_text = timed.at
    assert server.wait_idle()
    buffered, streamed = server.records("slow")
    assert on_screen > buffered.write_times[-1]  # the terminating chunk leaves after the last write is timed
    assert first_text < streamed.write_times[-1]


# -- 2. JSONDecodeError on the last frame ------------------------------------------------------------------


def test_done_marker_is_not_json_and_the_accumulator_tests_it_first():
    with pytest.raises(json.JSONDecodeError, match=re.escape("Expecting value: line 1 column 2 (char 1)")):
        json.loads("[DONE]")
    events = _events(SSEParser(), HELLO)
    assert events[-1].data == "[DONE]"
    acc = ChatAccumulator()
    for event in events:
        acc.feed(event)
    assert acc.saw_done and acc.outcome() is Outcome.COMPLETE


# -- 3. mojibake -------------------------------------------------------------------------------------------


def test_mojibake_a_chunk_cut_inside_a_character_garbles_per_chunk_decoding_and_not_the_byte_parser(server):
    frames = shapes.chat_text_stream(["Crème ", "brûlée"])
    cut = frames[1].index("è".encode()) + 1
    server.set_scripts(
        {"accents": Episode([Send(frames[0]), Send(frames[1][:cut]), Send(frames[1][cut:]), *_sends(frames[2:])])}
    )
    chunks = _chunks_of(server.url("chat/completions"), {"model": "accents", "stream": True, **ASK})
    assert chunks[1].endswith(b"\xc3") and chunks[2].startswith(b"\xa8")  # each Send arrived as one chunk
    with pytest.raises(UnicodeDecodeError):
        [chunk.decode("utf-8") for chunk in chunks]
    assert _text(_events(broken.DecodeEachChunk(), chunks)) == "Cr\ufffd\ufffdme brûlée"
    latin1 = b"".join(chunks).decode("latin-1").encode("utf-8")
    assert _text(_events(SSEParser(), [latin1])) == "CrÃ¨me brÃ»lÃ©e"
    assert _text(_events(SSEParser(), chunks)) == "Crème brûlée"


# -- 4. CRLF, 5. data: without the space -------------------------------------------------------------------


def test_crlf_stream_has_no_event_for_a_loop_that_searches_for_lf_lf():
    raw = b"".join(HELLO).replace(b"\n", b"\r\n")
    assert _events(broken.BlankLineIsLFLF(), [raw]) == []
    between_cr_and_lf = [i + 1 for i in range(len(raw) - 1) if raw[i : i + 2] == b"\r\n"]
    for chunks in ([raw], chunks_at(raw, between_cr_and_lf)):
        events = _events(SSEParser(), chunks)
        assert len(events) == len(HELLO) and _text(events) == "Hello"


def test_data_without_the_space_is_lost_by_a_loop_that_matches_data_colon_space():
    raw = b"".join(HELLO).replace(b"data: ", b"data:")
    assert _events(broken.DataNeedsSpace(), [raw]) == []
    assert [e.data for e in _events(SSEParser(), [raw])] == [e.data for e in _events(SSEParser(), HELLO)]


# -- 6. text repeated after a reconnect --------------------------------------------------------------------


def test_repeated_text_a_retry_that_appends_repeats_the_start_and_a_restart_does_not(server):
    capital = shapes.chat_text_stream(["The ", "capital ", "of ", "France ", "is ", "Paris."])
    server.set_scripts({"flaky": [Episode(_sends(capital[:6]) + [Cut()]), Episode(_sends(capital))]})
    shown, kept = "", ""
    for _attempt in (1, 2):
        acc = ChatAccumulator()
        try:
            with stream_chat(server.base_url, {"model": "flaky", **ASK}) as stream:
                for timed in stream:
                    acc.feed(timed.event)
            kept = acc.text[0]
            shown += acc.text[0]
            break
        except ConnectionBroken:
            shown += acc.text[0]
    assert shown == "The capital of France is The capital of France is Paris."
    assert kept == "The capital of France is Paris." and acc.outcome() is Outcome.COMPLETE


def test_repeated_text_a_resume_without_cursor_replays_and_the_cursor_refuses_it(server):
    frames = shapes.responses_text_stream(["alpha ", "beta ", "gamma ", "delta"], response_id="resp_t09")
    script = {
        "bg": Episode(_sends(frames[:7]) + [Cut()], store_as="resp_t09", stored=StoredResponse.from_frames(frames))
    }
    body = {"model": "bg", "background": True, "input": "Four words."}
    server.set_scripts(script)
    acc = ResponsesAccumulator()
    with pytest.raises(ConnectionBroken), stream_responses(server.base_url, body) as first:
        for timed in first:
            acc.feed(timed.event)
    with resume_response(server.base_url, "resp_t09") as again:  # no starting_after
        replayed = [json.loads(t.data)["sequence_number"] for t in again]
    assert replayed[0] == 0
    with pytest.raises(SequenceError):
        acc.feed(again.events[0].event)
    server.set_scripts(script)
    acc = ResponsesAccumulator()
    with ResumableResponseStream(server.base_url, body) as resumable:
        handled = []
        for timed in resumable:
            handled.append(json.loads(timed.data)["sequence_number"])
            acc.feed(timed.event)
    assert handled == list(range(len(frames)))
    assert acc.text[(0, 0)] == "alpha beta gamma delta" and acc.outcome() is Outcome.COMPLETE


# -- 7. IndexError on choices[0], 8. no usage --------------------------------------------------------------


def test_index_error_the_usage_chunk_has_no_choices_and_the_guard_keeps_the_usage(server, sdk):
    server.set_scripts({"usage": Episode(_sends(HELLO))})
    options = {"stream_options": {"include_usage": True}}
    with pytest.raises(IndexError):
        for chunk in sdk.chat.completions.create(model="usage", stream=True, **ASK, **options):
            chunk.choices[0]
    assert chunk.choices == [] and chunk.usage.total_tokens == 14
    text, usage = "", None
    for chunk in sdk.chat.completions.create(model="usage", stream=True, **ASK, **options):
        usage = chunk.usage or usage
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
    assert text == "Hello" and usage.completion_tokens == 2


def test_no_usage_without_include_usage_nor_on_a_cut_stream(server, sdk):
    server.set_scripts({"usage": Episode(_sends(HELLO))})
    assert all(chunk.usage is None for chunk in sdk.chat.completions.create(model="usage", stream=True, **ASK))
    assert server.wait_idle()
    assert b'"choices":[],"usage"' not in server.records("usage")[-1].written
    acc = ChatAccumulator()
    for event in _events(SSEParser(), HELLO[:3]):  # cut before the finish and usage chunks
        acc.feed(event)
    assert acc.usage is None and acc.outcome() is Outcome.TRUNCATED


# -- 9. invalid tool-call JSON -----------------------------------------------------------------------------


def test_tool_call_arguments_parse_only_whole_and_joined_by_index():
    frames = shapes.chat_tool_call_stream(interleave=True)
    fragments = [
        frag
        for event in _events(SSEParser(), frames)
        if event.data != "[DONE]"
        for choice in json.loads(event.data)["choices"]
        for frag in choice["delta"].get("tool_calls") or []
    ]
    with pytest.raises(json.JSONDecodeError):
        json.loads(next(f["function"]["arguments"] for f in fragments if f.get("function", {}).get("arguments")))
    by_arrival: list[str] = []
    for frag in fragments:
        if frag.get("id"):
            by_arrival.append("")
        by_arrival[-1] += frag.get("function", {}).get("arguments") or ""
    for arguments in by_arrival:
        with pytest.raises(json.JSONDecodeError):
            json.loads(arguments)
    acc = ChatAccumulator()
    for event in _events(SSEParser(), frames):
        acc.feed(event)
    assert acc.tool_arguments(0, 0) == {"location": "Paris, France"} and acc.tool_arguments(0, 1) == {"city": "Oslo"}
    cut = ChatAccumulator()
    for event in _events(SSEParser(), frames[:-3]):  # every fragment, no finish chunk
        cut.feed(event)
    with pytest.raises(ToolCallError, match="never finished"):
        cut.tool_arguments(0, 0)


def test_tool_calls_from_a_cut_sdk_stream_are_refused(server, sdk):
    frames = shapes.chat_tool_call_stream(interleave=True)
    server.set_scripts({"tools-cut": Episode(_sends(frames[:-3]) + [End()])})
    result = read_sdk_stream(sdk.chat.completions.create(model="tools-cut", stream=True, **ASK))
    assert result.outcome is Outcome.TRUNCATED
    assert [c.name for c in result.tool_calls] == ["get_weather", "get_time"]
    assert all(not c.complete and "never finished" in c.problem for c in result.tool_calls)


# -- 10. a connection that hangs forever -------------------------------------------------------------------


def test_hang_keep_alives_keep_a_read_timeout_from_firing_and_an_idle_timeout_catches_it(server):
    stall = shapes.chat_text_stream(["Still ", "thinking"])[:3]
    server.set_scripts({"stall": Episode(_sends(stall) + [Wait(0.05), KeepAlive()] * 20 + [Cut()])})
    with (
        pytest.raises(ConnectionBroken),
        stream_chat(server.base_url, {"model": "stall", **ASK}, read_timeout=1.0) as stream,
    ):
        for _ in stream:
            pass
    assert stream.end_reason is Ending.BROKEN and stream.raw.count(b": ping") == 20
    with (
        pytest.raises(IdleTimeout),
        stream_chat(server.base_url, {"model": "stall", **ASK}, read_timeout=1.0, idle_timeout=0.3) as stream,
    ):
        for _ in stream:
            pass
    assert stream.end_reason is Ending.IDLE_TIMEOUT and len(stream.events) == 3
    assert server.wait_idle()
    record = server.records("stall")[-1]
    assert record.ending is Ending.CLIENT_GONE and record.written.count(b": ping") < 20


# -- 11. fine locally, broken in production ----------------------------------------------------------------

DISHES = ["Crème ", "brûlée, ", "naïve ", "café."]


def test_production_a_chunk_ends_line_parser_breaks_on_cut_lines_and_ours_does_not():
    raw = b"".join(shapes.chat_text_stream(DISHES))
    assert _text(_events(broken.ChunkEndsLine(), shapes.chat_text_stream(DISHES))) == "".join(DISHES)
    rng = random.Random(9)
    cuts = sorted(rng.sample(range(1, len(raw)), 200))
    chunks = chunks_at(raw, cuts)
    try:
        garbled = _text(_events(broken.ChunkEndsLine(), chunks))
    except FrameError:  # a line cut in two became a frame that is not JSON
        garbled = None
    assert garbled != "".join(DISHES)
    assert _text(_events(SSEParser(), chunks)) == "".join(DISHES)


def test_production_through_a_slicing_proxy_the_client_gets_small_chunks_and_our_parser_the_same_text(server):
    server.set_scripts({"prod": Episode(_sends(shapes.chat_text_stream(DISHES)))})
    body = {"model": "prod", "stream": True, **ASK}
    local = _chunks_of(server.url("chat/completions"), body)
    with ChaosProxy(upstream=("127.0.0.1", server.port), slice_sizes=(1, 8), slice_delay_ms=1, seed=9) as proxy:
        far = _chunks_of(proxy.url("/v1/chat/completions"), body)
        assert proxy.wait_until(lambda records: all(r.finished for r in records))
        record = proxy.records()[-1]
    assert b"".join(far) == b"".join(local)
    assert record.writes_down and max(record.writes_down) <= 8
    assert _text(_events(SSEParser(), far)) == "".join(DISHES)


def test_production_a_proxy_that_cuts_leaves_a_truncated_answer(server):
    server.set_scripts({"prod": Episode(_sends(shapes.chat_text_stream(DISHES)))})
    acc = ChatAccumulator()
    with ChaosProxy(upstream=("127.0.0.1", server.port), cut_after=700) as proxy:
        with pytest.raises(ConnectionBroken), stream_chat(proxy.url("/v1"), {"model": "prod", **ASK}) as stream:
            for timed in stream:
                acc.feed(timed.event)
    assert stream.mid_event and acc.text[0] == "Crème " and acc.outcome() is Outcome.TRUNCATED


# -- 12. the SDK loop ends normally on a cut stream --------------------------------------------------------


def test_sdk_loop_ends_quietly_on_a_clean_cut_and_read_sdk_stream_says_truncated(server, sdk):
    answer = shapes.chat_text_stream(["The ", "answer ", "is ", "forty-", "two."])
    server.set_scripts({"cut": Episode(_sends(answer[:4]) + [End()])})
    chunks = list(sdk.chat.completions.create(model="cut", stream=True, **ASK))  # raises nothing
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "The answer is "
    assert all(c.choices[0].finish_reason is None for c in chunks)
    result = read_sdk_stream(sdk.chat.completions.create(model="cut", stream=True, **ASK))
    assert result.outcome is Outcome.TRUNCATED and result.ending is Ending.COMPLETE


# -- 13. a proxy that buffers ------------------------------------------------------------------------------


def test_buffering_relay_delivers_after_the_last_write_and_the_reference_relay_streams(server):
    server.set_scripts({"slow": Episode(paced(HELLO, gap=0.2))})

    async def buffering_relay(request):
        async with httpx.AsyncClient(timeout=10) as http:
            upstream = await http.post(
                server.url("chat/completions"),
                content=await request.body(),
                headers={"content-type": "application/json"},
            )
        return Response(upstream.content, status_code=upstream.status_code, media_type="text/event-stream")

    def first_text_and_headers(base_url: str) -> tuple[float, httpx.Headers]:
        first = None
        with stream_chat(base_url, {"model": "slow", **ASK}) as stream:
            for timed in stream:
                if first is None and '"content":"Hel"' in timed.data:
                    first = timed.at
        assert server.wait_idle()
        return first - server.records("slow")[-1].write_times[-1], stream.response.headers

    app = Starlette(routes=[Route("/v1/chat/completions", buffering_relay, methods=["POST"])])
    with AppServer(app) as hop:
        after_last_write, headers = first_text_and_headers(hop.url + "/v1")
    assert after_last_write > 0
    assert headers.get("content-length") and headers.get("x-accel-buffering") is None
    with Relay(upstream=server.base_url) as relay:
        after_last_write, headers = first_text_and_headers(relay.base_url)
    assert after_last_write < 0
    assert headers.get("content-length") is None and headers["transfer-encoding"] == "chunked"
    assert headers["x-accel-buffering"] == "no" and headers["cache-control"] == "no-cache"


# -- 14. a 200 with an HTML body ---------------------------------------------------------------------------


def test_html_200_gives_the_sdk_no_chunks_and_the_client_refuses_it():
    async def home_page(request):
        return HTMLResponse("<!DOCTYPE html><html><body><h1>Welcome</h1></body></html>")

    site = Starlette(routes=[Route("/{path:path}", home_page, methods=["GET", "POST"])])
    with AppServer(site) as web, openai.OpenAI(base_url=web.url + "/v1", api_key="x", max_retries=0) as wrong:
        stream = wrong.chat.completions.create(model="any", stream=True, **ASK)
        assert stream.response.headers["content-type"].startswith("text/html")
        assert list(stream) == []
        assert isinstance(wrong.chat.completions.create(model="any", **ASK), str)
        with pytest.raises(NotAnEventStream), stream_chat(web.url + "/v1", {"model": "any", **ASK}) as raw:
            list(raw)


# -- the exercises -----------------------------------------------------------------------------------------


def test_each_capture_of_exercise_09_1_shows_its_cause():
    raw = {key: capture.raw for key, capture in CAPTURES.items()}
    assert set(EXPECTED.values()) < set(CAUSES)
    assert _events(broken.BlankLineIsLFLF(), [raw["a"]]) == [] and len(_events(SSEParser(), [raw["a"]])) == 4
    assert _events(broken.DataNeedsSpace(), [raw["b"]]) == [] and len(_events(SSEParser(), [raw["b"]])) == 4
    outcomes = {}
    for key in ("c", "d"):
        acc = ChatAccumulator()
        for event in _events(SSEParser(), [raw[key]]):
            acc.feed(event)
        outcomes[key] = (acc.outcome(), acc.finish_reason.get(0))
    assert outcomes == {"c": (Outcome.TRUNCATED, None), "d": (Outcome.INCOMPLETE, "length")}

    def naive(events):
        text = ""
        for event in events:
            text += json.loads(event.data)["choices"][0]["delta"].get("content") or ""
        return text

    with pytest.raises(json.JSONDecodeError):
        naive(_events(SSEParser(), [raw["e"]]))
    with pytest.raises(IndexError):
        naive(_events(SSEParser(), [raw["f"]]))
    assert not any(b"<" in r or b": ping" in r for r in raw.values())  # "html" and "keep-alive" fit none


def _cells() -> list[dict]:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_exercise_09_2_refuses_the_labs_buggy_loop_and_the_stub():
    code = next(_source(c) for c in _cells() if _source(c).startswith("def buggy_read_answer"))
    namespace: dict = {"json": json, "READ_CASES": READ_CASES, "expected_answer": expected_answer}
    exec(code.split("\n\nfor name, chunks")[0], namespace)
    assert verdict("09.2", namespace["buggy_read_answer"]).startswith("Exercise 09.2: not yet: ")

    def stub(chunks):
        raise NotImplementedError

    assert verdict("09.2", stub) == "Exercise 09.2: not attempted yet"
    assert verdict("09.1", {key: ... for key in EXPECTED}) == "Exercise 09.1: not attempted yet"


# -- the lab's shape ---------------------------------------------------------------------------------------


def _anchor(heading: str) -> str:
    """The id JupyterLab 4 gives a heading: its text with inline code unwrapped, spaces made dashes."""
    return re.sub(r"`([^`]*)`", r"\1", heading).strip().replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return {
        _anchor(m.group(1))
        for c in cells
        if c["cell_type"] == "markdown"
        for m in re.finditer(r"^#{1,6} +(.+)$", _source(c), re.M)
    }


def test_every_symptom_section_reproduces_explains_fixes_and_links_the_lab_that_teaches_it():
    sections: dict[str, str] = {}
    current = None
    for cell in _cells():
        text = _source(cell)
        heading = re.match(r"## (\d+)\. ", text) if cell["cell_type"] == "markdown" else None
        if cell["cell_type"] == "markdown" and text.startswith("## ") and not heading:
            current = None
        if heading:
            current = heading.group(1)
            sections[current] = ""
        if current is not None:
            sections[current] += f"\n<{cell['cell_type']}>\n{text}"
    symptoms = {number: body for number, body in sections.items() if "**Symptom.**" in body}
    assert len(symptoms) >= 12
    for number, body in symptoms.items():
        for part in ("**Cause.**", "**Fix.**", "**Taught in:**"):
            assert part in body, f"section {number} has no {part}"
        assert body.count("<code>") >= 2, f"section {number}: the symptom and the fix each run"
        taught = body.split("**Taught in:**", 1)[1]
        assert re.search(r"\]\(\d\d-[a-z0-9-]+\.ipynb#", taught), f"section {number} links no lab section"


def test_every_link_of_lab_09_resolves_to_a_heading():
    notebooks = NOTEBOOK.parent
    text = "\n".join(_source(c) for c in _cells() if c["cell_type"] == "markdown")
    links = re.findall(r"\]\(((?:\d\d-[a-z0-9-]+\.ipynb)?)(?:#([^)\s]+))?\)", text)
    assert len(links) > 30
    for target, anchor in links:
        path = notebooks / target if target else NOTEBOOK
        if not path.exists():
            assert target in ("08-verify-an-endpoint.ipynb", "10-relay-to-gateway.ipynb") and not anchor, target
            continue
        if anchor:
            assert anchor in _anchors(path), f"{target or 'lab 09'} has no heading with the id {anchor!r}"


def test_lab_09_draws_the_hops_and_maps_each_symptom_to_its_section():
    text = "\n".join(_source(c) for c in _cells() if c["cell_type"] == "markdown")
    assert "```mermaid" in text
    table = [line for line in text.splitlines() if re.match(r"\| .* \| \[\d+\]\(#", line)]
    assert len(table) == 14
