"""Every claim lab 07 (the capstone relay) prints, asserted on the real components: the stand-in, the chaos proxy,
uvicorn, httpx and the official SDK, plus the lab's plumbing and stage checks (`streamlab.exercises.lab07`).

The stage solutions are taken from the notebook's hidden solutions (tests/labs/test_solutions.py proves each passes
its own check); here each stage is also shown to fail the next stage's check for the reason that stage teaches,
and typical wrong answers to fail on the requirement they break. Timing facts are orderings with wide margins.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from streamlab.core import shapes
from streamlab.core.relay.stream import SUMMARY_FIELDS, marker_frame
from streamlab.core.sse import SSEParser, parse
from streamlab.core.standin.script import End, Episode, Send, Stall, Wait, paced
from streamlab.exercises import verdict
from streamlab.exercises.lab07 import (
    DEADLINE,
    STAGES,
    StreamInfo,
    attempted,
    between_events,
    grade_my_relay,
    relay_app,
)
from streamlab.net.chaos.proxy import ChaosProxy
from streamlab.net.relay.app import Relay
from streamlab.net.relay.serving import AppServer
from streamlab.net.standin.server import StandIn

pytestmark = [pytest.mark.net]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "07-capstone-relay.ipynb"
PIECES = [
    "Gr\u00fc\u00dfe ",
    "aus ",
    "K\u00f6ln, ",
    "na\u00efve ",
    "caf\u00e9 ",
    "\u2014 ",
    "\u65e5\u672c ",
    "\U0001f389",
]
TEXT = "".join(PIECES)
FRAMES = shapes.chat_text_stream(PIECES, include_usage=False)
ASK = [{"role": "user", "content": "Greet me from Cologne."}]
REASON = "the upstream broke before the answer's end"
HALF = len(FRAMES[1]) // 2


def _sends(frames: list[bytes]) -> list[Send]:
    return [Send(frame) for frame in frames]


SCRIPTS = {
    "answer": Episode(paced(FRAMES, gap=0.01)),
    "usage": Episode(paced(shapes.chat_text_stream(PIECES), gap=0.01)),
    "halves": Episode(
        [Send(FRAMES[0]), Send(FRAMES[1][:HALF]), Wait(0.5), Send(FRAMES[1][HALF:])] + _sends(FRAMES[2:])
    ),
    "hang": Episode(_sends(FRAMES[:3]) + [Stall()]),
    "early": Episode(_sends(FRAMES[:4]) + [End()]),
    "marked": Episode(_sends(FRAMES[:3]) + [Send(marker_frame("chat", "upstream_broke", REASON))]),
    "marked-responses": Episode(
        _sends(shapes.responses_text_stream(PIECES)[:6]) + [Send(marker_frame("responses", "upstream_broke", REASON))]
    ),
}


@pytest.fixture(scope="module")
def server() -> Iterator[StandIn]:
    """The lab's stand-in: the same answers, checking requests like the real API."""
    with StandIn(SCRIPTS) as standin:
        yield standin


# -- the lab's own code: its setup cell and hidden solutions -------------------------------------------------------


def _cells() -> list[dict[str, Any]]:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict[str, Any]) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _markdown() -> str:
    return "\n".join(_source(c) for c in _cells() if c["cell_type"] == "markdown")


def _namespace(code: str) -> dict[str, Any]:
    setup = next(_source(c) for c in _cells() if c["cell_type"] == "code")
    ns: dict[str, Any] = {"__name__": "__lab07__"}
    exec(compile(setup, "<setup>", "exec"), ns)
    exec(compile(code, "<lab 07>", "exec"), ns)
    return ns


def solution(ex_id: str) -> Any:
    """The function the hidden solution of exercise `ex_id` defines."""
    match = re.search(rf"<summary>Solution {re.escape(ex_id)}</summary>.*?```python\n(.*?)```", _markdown(), re.S)
    assert match, f"no hidden solution {ex_id} in the lab"
    return _namespace(match.group(1))[STAGES[ex_id][0]]


def reference_body() -> Any:
    """The reference relay's decisions in the lab's plumbing, from the lab's last <details> block."""
    match = re.search(
        r"<summary>The reference relay, in your plumbing</summary>.*?```python\n(.*?)```", _markdown(), re.S
    )
    assert match, "the lab shows no reference body"
    return _namespace(match.group(1))["reference_body"]


# -- wrong answers a learner writes ---------------------------------------------------------------------------------


async def whole_events(upstream: httpx.Response, stream: StreamInfo) -> AsyncIterator[bytes]:
    """Holds every event until it is complete, then re-serialises all of its fields."""
    parser = SSEParser()
    async for chunk in upstream.aiter_raw():
        for event in parser.feed(chunk):
            head = b"" if event.event == "message" else f"event: {event.event}\n".encode()
            yield head + b"".join(f"data: {line}\n".encode() for line in event.data.split("\n")) + b"\n"


async def decodes_text(upstream: httpx.Response, stream: StreamInfo) -> AsyncIterator[bytes]:
    """Decodes the bytes as text and encodes them again: the same bytes in the end, but a character cut between two
    chunks waits for its second half (what the lab says `aiter_text()` does)."""
    async for text in upstream.aiter_text():
        yield text.encode()


async def summary_after_the_loop(upstream: httpx.Response, stream: StreamInfo) -> AsyncIterator[bytes]:
    """Stage 2 with its summary written after the read loop instead of in a `finally`."""
    from streamlab.core.accumulate import ChatAccumulator, ResponsesAccumulator

    parser = SSEParser()
    acc = ChatAccumulator() if stream.dialect == "chat" else ResponsesAccumulator()
    async for chunk in upstream.aiter_raw():
        yield chunk
        for event in parser.feed(chunk):
            acc.feed(event)
    stream.summaries.append(
        {
            "model": stream.model,
            "outcome": str(acc.outcome()),
            "text_chars": sum(map(len, acc.text.values())),
            "usage": acc.usage,
            "ttft_s": None,
            "total_s": stream.elapsed(),
        }
    )


def _keepalive_variant(*, beat: bytes | None, cancel_reader: bool) -> Any:
    """`with_keepalives` from the lab with one change: a fixed keep-alive (`beat`), or a reader task that is never
    cancelled."""
    good = solution("07.4")
    keepalive_bytes = good.__globals__["keepalive_bytes"]

    async def body(upstream: httpx.Response, stream: StreamInfo) -> AsyncIterator[bytes]:
        parser, queue = SSEParser(), asyncio.Queue()
        summary = {
            "model": stream.model,
            "outcome": "complete",
            "text_chars": 0,
            "usage": None,
            "ttft_s": None,
            "total_s": None,
        }

        async def read_upstream() -> None:
            try:
                async for chunk in upstream.aiter_raw():
                    queue.put_nowait(chunk)
            finally:
                queue.put_nowait(None)
                await upstream.aclose()

        reader = asyncio.ensure_future(read_upstream())
        try:
            while True:
                try:
                    chunk = await asyncio.wait_for(queue.get(), stream.keepalive)
                except TimeoutError:
                    out = beat if beat is not None else keepalive_bytes(parser)
                    if out:
                        yield out
                    continue
                if chunk is None:
                    break
                yield chunk
                parser.feed(chunk)
        finally:
            if cancel_reader:
                reader.cancel()
            stream.summaries.append(summary)

    return body


# -- section 2: what faults do to a client, with and without a relay ----------------------------------------------


def sdk_reads(base_url: str, model: str, timeout: float = 1.0) -> str:
    """The lab's naive client: the official SDK in a plain loop."""
    client = openai.OpenAI(base_url=base_url, api_key="lab07", max_retries=0, timeout=timeout)
    text = ""
    try:
        for chunk in client.chat.completions.create(model=model, messages=ASK, stream=True):
            text += "".join(choice.delta.content or "" for choice in chunk.choices)
    except Exception as exc:  # the verdict is the exception's class, as the lab prints it
        return f"raised {type(exc).__name__}"
    finally:
        client.close()
    return "text identical" if text == TEXT else f"returned normally, {len(text)} of {len(TEXT)} characters"


@pytest.fixture(scope="module")
def wire(server: StandIn) -> int:
    """The answer's length on the wire, measured through a proxy without faults."""
    with ChaosProxy(("127.0.0.1", server.port)) as proxy:
        assert sdk_reads(proxy.url("/v1"), "answer") == "text identical"
        assert proxy.wait_until(lambda records: bool(records) and records[0].finished)
        return proxy.records()[0].bytes_down


def test_the_answer_has_33_characters_in_47_bytes_over_11_frames():
    assert (len(FRAMES), len(TEXT), len(TEXT.encode())) == (11, 33, 47)


def test_a_cut_between_events_delivers_exactly_the_events_before_it(server, wire):
    for count in (1, 4, len(FRAMES) - 1):
        at = between_events(FRAMES, wire, count)
        with (
            ChaosProxy(("127.0.0.1", server.port), cut_after=at) as proxy,
            httpx.Client(timeout=5, trust_env=False) as http,
        ):
            body = b""
            with pytest.raises(httpx.RemoteProtocolError):
                with http.stream(
                    "POST", proxy.url("/v1/chat/completions"), json={"model": "answer", "messages": ASK, "stream": True}
                ) as response:
                    for chunk in response.iter_raw():
                        body += chunk
        assert body == b"".join(FRAMES[:count])
    with pytest.raises(ValueError, match="between 0 and 11"):
        between_events(FRAMES, wire, 12)


ROWS = {
    "latency 40\u00b130 ms, both ways": (
        dict(latency_ms=40, jitter_ms=30, direction="both"),
        "answer",
        "text identical",
        "text identical",
        "complete",
    ),
    "bandwidth 8,000 bytes/s": (dict(bandwidth=8000), "answer", "text identical", "text identical", "complete"),
    "1-7 byte slices, both ways": (
        dict(slice_sizes=(1, 7), direction="both"),
        "answer",
        "text identical",
        "text identical",
        "complete",
    ),
    "cut between two events": (
        dict(cut_after="between"),
        "answer",
        "raised APIConnectionError",
        "raised APIError",
        "truncated, marked",
    ),
    "cut inside an event": (
        dict(cut_after="inside"),
        "answer",
        "raised APIConnectionError",
        "raised JSONDecodeError",
        "truncated, marked",
    ),
    "reset between two events": (
        dict(reset_after="between"),
        "answer",
        "raised APIConnectionError",
        "raised APIError",
        "truncated, marked",
    ),
    "stall between two events": (
        dict(stall_after="between"),
        "answer",
        "raised APITimeoutError",
        "raised APIError",
        "truncated, marked",
    ),
    "cut the request after 100 bytes": (
        dict(cut_after=100, direction="up"),
        "answer",
        "raised APIConnectionError",
        "raised InternalServerError",
        "failed",
    ),
    "no fault; the upstream ends early": (
        {},
        "early",
        "returned normally, 16 of 33 characters",
        "raised APIError",
        "truncated, marked",
    ),
}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_what_each_fault_does_to_the_sdk_direct_and_through_the_relay(server, wire, row, no_leaked_threads):
    faults, model, direct_says, relayed_says, summary_says = ROWS[row]
    between = between_events(FRAMES, wire, 4)
    where = {"between": between, "inside": between + 60}
    faults = {k: where.get(v, v) if isinstance(v, str) else v for k, v in faults.items()}
    with (
        ChaosProxy(("127.0.0.1", server.port), seed=7, **faults) as proxy,
        Relay(proxy.url("/v1"), keepalive=0.2, read_timeout=0.5) as relay,
    ):
        assert sdk_reads(proxy.url("/v1"), model, timeout=0.5) == direct_says
        assert sdk_reads(relay.base_url, model, timeout=3.0) == relayed_says
        assert relay.wait_for_summaries(1)
        summary = relay.summaries[0]
    assert summary["outcome"] + (", marked" if summary["marked"] else "") == summary_says


# -- section 3: the plumbing ---------------------------------------------------------------------------------------


async def _forward(upstream: httpx.Response, stream: StreamInfo) -> AsyncIterator[bytes]:
    async for chunk in upstream.aiter_raw():
        yield chunk


def test_the_plumbing_streams_with_headers_that_stop_proxy_buffering(server, no_leaked_threads):
    with AppServer(relay_app(_forward, server.base_url)) as hop, httpx.Client(timeout=5, trust_env=False) as http:
        response = http.post(
            f"{hop.url}/v1/chat/completions", json={"model": "answer", "messages": ASK, "stream": True}
        )
    assert response.status_code == 200 and response.content == b"".join(FRAMES)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache" and response.headers["x-accel-buffering"] == "no"
    assert "content-length" not in response.headers


def test_the_plumbing_gives_the_body_what_stream_info_promises(server, no_leaked_threads):
    seen: list[StreamInfo] = []

    async def body(upstream: httpx.Response, stream: StreamInfo) -> AsyncIterator[bytes]:
        seen.append(stream)
        async for chunk in upstream.aiter_raw():
            yield chunk

    summaries: list[dict[str, Any]] = []
    with (
        AppServer(relay_app(body, server.base_url, keepalive=0.3, read_timeout=0.9, summaries=summaries)) as hop,
        httpx.Client(timeout=5, trust_env=False) as http,
    ):
        http.post(f"{hop.url}/v1/responses", json={"model": "answer", "input": "hi", "stream": True})
    info = seen[0]
    assert (info.model, info.dialect, info.keepalive, info.read_timeout) == ("answer", "responses", 0.3, 0.9)
    assert info.summaries is summaries and 0 < info.elapsed()


def test_the_plumbing_passes_an_error_status_through_as_it_came(server, no_leaked_threads):
    with AppServer(relay_app(_forward, server.base_url)) as hop, httpx.Client(timeout=5, trust_env=False) as http:
        response = http.post(f"{hop.url}/v1/chat/completions", json={"model": "answer", "stream": True})
    assert response.status_code == 400  # no messages: the stand-in refuses, as the real API does
    assert "messages" in response.json()["error"]["message"]


def test_the_plumbing_answers_502_when_the_upstream_cannot_be_reached(no_leaked_threads):
    from support import free_port

    with (
        AppServer(relay_app(_forward, f"http://127.0.0.1:{free_port()}/v1")) as hop,
        httpx.Client(timeout=5, trust_env=False) as http,
    ):
        response = http.post(f"{hop.url}/v1/chat/completions", json={"model": "x", "messages": ASK, "stream": True})
    assert response.status_code == 502 and response.json()["error"]["code"] == "upstream_unreachable"


def test_the_plumbing_ends_a_stream_after_its_deadline_and_closes_the_body(server, no_leaked_threads):
    closed: list[bool] = []

    async def forever(upstream: httpx.Response, stream: StreamInfo) -> AsyncIterator[bytes]:
        try:
            while True:
                await asyncio.sleep(0.05)
                yield b": keep-alive\n\n"
        finally:
            closed.append(True)
            await upstream.aclose()

    assert DEADLINE == 6.0
    with (
        AppServer(relay_app(forever, server.base_url, deadline=0.5)) as hop,
        httpx.Client(timeout=5, trust_env=False) as http,
    ):
        started = time.perf_counter()
        response = http.post(f"{hop.url}/v1/chat/completions", json={"model": "hang", "messages": ASK, "stream": True})
        took = time.perf_counter() - started
    assert response.status_code == 200 and response.content.startswith(b": keep-alive\n\n")
    assert took < 4.0 and closed == [True]


# -- section 4: forward bytes as they arrive ------------------------------------------------------------------------


def _first_half_early(server: StandIn, base_url: str) -> tuple[bool, bytes]:
    arrivals, body = [], b""
    with httpx.Client(timeout=5, trust_env=False) as http:
        with http.stream(
            "POST", f"{base_url}/chat/completions", json={"model": "halves", "messages": ASK, "stream": True}
        ) as response:
            for chunk in response.iter_raw():
                body += chunk
                arrivals.append((time.perf_counter(), len(body)))
    server.wait_idle()
    second_half_written = server.records("halves")[-1].write_times[2]
    end_of_first_half = body.index(FRAMES[1]) + HALF
    arrived = next(at for at, size in arrivals if size >= end_of_first_half)
    return arrived < second_half_written, body


def test_a_relay_that_sends_whole_events_holds_back_half_an_event(server, no_leaked_threads):
    with AppServer(relay_app(whole_events, server.base_url)) as hop:
        early, body = _first_half_early(server, hop.url + "/v1")
    assert not early and body == b"".join(FRAMES)


def test_the_reference_relay_passes_half_an_event_on_at_once_byte_for_byte(server, no_leaked_threads):
    with Relay(server.base_url) as relay:
        early, body = _first_half_early(server, relay.base_url)
    assert early and body == b"".join(FRAMES)


def test_the_first_half_of_the_split_event_is_also_a_prefix_of_the_role_chunk():
    """Why the lab looks for the split event after the first one: both start with the same bytes."""
    assert FRAMES[0].startswith(FRAMES[1][:HALF])


# -- section 5: the summary line -------------------------------------------------------------------------------------


def test_the_reference_summary_line_of_a_complete_stream(server, no_leaked_threads):
    with (
        Relay(server.base_url) as relay,
        openai.OpenAI(base_url=relay.base_url, api_key="lab07", max_retries=0) as client,
    ):
        for _ in client.chat.completions.create(
            model="usage", messages=ASK, stream=True, stream_options={"include_usage": True}
        ):
            pass
        assert relay.wait_for_summaries(1)
        line = relay.summaries[0]
    assert {key: line[key] for key in ("model", "outcome", "text_chars", "usage")} == {
        "model": "usage",
        "outcome": "complete",
        "text_chars": 33,
        "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20},
    }
    assert 0 < line["ttft_s"] <= line["total_s"]
    assert list(line)[: len(SUMMARY_FIELDS)] == list(SUMMARY_FIELDS)
    assert [key for key in line if key not in SUMMARY_FIELDS] == [
        "id",
        "route",
        "status",
        "ending",
        "marked",
        "events",
        "keepalives",
        "bytes_in",
        "bytes_out",
        "detail",
        "problem",
    ]


# -- section 6: cancel reaches the upstream -------------------------------------------------------------------------


def _leave_after_two(server: StandIn, base_url: str) -> tuple[str, int]:
    with openai.OpenAI(base_url=base_url, api_key="lab07", max_retries=0, timeout=5) as client:
        stream = client.chat.completions.create(model="hang", messages=ASK, stream=True)
        for _, _chunk in zip(range(2), stream):
            pass
        stream.close()
    assert server.wait_idle()
    record = server.records("hang")[-1]
    return str(record.ending), record.frames_written


def test_a_body_without_finally_lets_the_upstream_go_but_writes_no_summary(server, no_leaked_threads):
    summaries: list[dict[str, Any]] = []

    async def forward_only(upstream: httpx.Response, stream: StreamInfo) -> AsyncIterator[bytes]:
        async for chunk in upstream.aiter_raw():
            yield chunk
        stream.summaries.append({"model": stream.model})

    with AppServer(relay_app(forward_only, server.base_url, summaries=summaries)) as hop:
        assert _leave_after_two(server, hop.url + "/v1") == ("client_gone", 3)
        time.sleep(0.3)  # give a late summary line every chance to appear: none may
    assert summaries == []


def test_the_reference_relay_records_a_departure_as_cancelled(server, no_leaked_threads):
    with Relay(server.base_url) as relay:
        assert _leave_after_two(server, relay.base_url) == ("client_gone", 3)
        assert relay.wait_for_summaries(1)
        assert relay.summaries[0]["outcome"] == "cancelled"


# -- section 7: keep-alives -----------------------------------------------------------------------------------------

UPSTREAM = b'data: {"n": 1}\n\nevent: note\ndata: two\r\ndata: lines\r\n\r\n'
STALLS = {  # where the upstream stalls -> (line_open, in_event, cr_pending), the events after b": ping\n\n" there
    "between two events": (UPSTREAM.index(b"event:"), (False, False, False), None),
    "inside an event, between its lines": (
        UPSTREAM.index(b"data: two"),
        (False, True, False),
        [("message", '{"n": 1}'), ("message", "two\nlines")],
    ),
    "inside a line": (
        UPSTREAM.index(b"two") + 2,
        (True, True, False),
        [("message", '{"n": 1}'), ("note", "tw: ping"), ("message", "lines")],
    ),
    "between the CR and the LF of a CRLF": (
        UPSTREAM.index(b"\r\n") + 1,
        (False, True, True),
        [("message", '{"n": 1}'), ("note", "two"), ("message", "lines")],
    ),
}


@pytest.mark.parametrize("where", list(STALLS))
def test_a_fixed_keep_alive_changes_the_events_wherever_the_parser_is_not_between_events(where):
    at, state, changed = STALLS[where]
    parser = SSEParser()
    parser.feed(UPSTREAM[:at])
    assert (parser.line_open, parser.in_event, parser.cr_pending) == state
    want, _ = parse(UPSTREAM)
    got, _ = parse(UPSTREAM[:at] + b": ping\n\n" + UPSTREAM[at:])
    assert [(e.event, e.data) for e in want] == [("message", '{"n": 1}'), ("note", "two\nlines")]
    assert (got == want) if changed is None else ([(e.event, e.data) for e in got] == changed)


@pytest.mark.parametrize("where", list(STALLS))
def test_the_lab_keep_alive_rule_never_changes_the_events(where):
    keepalive_bytes = solution("07.4").__globals__["keepalive_bytes"]
    at = STALLS[where][0]
    parser = SSEParser()
    parser.feed(UPSTREAM[:at])
    beat = keepalive_bytes(parser)
    assert parse(UPSTREAM[:at] + beat + UPSTREAM[at:]) == parse(UPSTREAM)
    assert bool(beat) is (where != "inside a line")


def test_waiting_for_a_chunk_with_wait_for_cancels_the_read_and_ends_the_body(server, no_leaked_threads):
    said: list[str] = []

    async def read() -> None:
        async with httpx.AsyncClient(timeout=httpx.Timeout(5, read=None), trust_env=False) as http:
            async with http.stream(
                "POST", server.url("chat/completions"), json={"model": "hang", "messages": ASK, "stream": True}
            ) as response:
                chunks = response.aiter_raw()
                while True:
                    try:
                        await asyncio.wait_for(anext(chunks), 0.2)
                    except TimeoutError:
                        said.append("timeout")
                        break
                try:
                    await anext(chunks)
                except StopAsyncIteration:
                    said.append("the body looks finished")

    asyncio.run(read())
    assert said == ["timeout", "the body looks finished"]
    assert server.wait_idle()
    assert server.records("hang")[-1].ending == "client_gone"


# -- section 8: the marked final event -----------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["marked", "marked-responses"])
def test_the_sdk_raises_api_error_with_the_relay_message_on_either_marker(server, model):
    with openai.OpenAI(base_url=server.base_url, api_key="lab07", max_retries=0) as client:
        with pytest.raises(openai.APIError) as info:
            if model == "marked":
                for _ in client.chat.completions.create(model=model, messages=ASK, stream=True):
                    pass
            else:
                for _ in client.responses.create(model=model, input="hi", stream=True):
                    pass
    assert type(info.value) is openai.APIError
    assert info.value.message == f"relay: {REASON}"


def test_the_marker_bytes_the_lab_prints():
    chat = marker_frame("chat", "upstream_broke", REASON)
    assert chat.startswith(b'data: {"error": {"message": "relay: the upstream broke') and chat.endswith(b"}}\n\n")
    responses = marker_frame("responses", "upstream_broke", REASON)
    assert responses.startswith(b'event: error\ndata: {"type": "error", "code": "upstream_broke"')
    assert b'"error": {"message": "relay: ' in responses


@pytest.mark.parametrize(
    "prefix,state",
    [
        (b'data: {"cho', "a cut line"),
        (b"event: x\ndata: 1\r", "after a CR"),
        (b"data: 1\n", "a cut event"),
        (b"data: 1\n\n", "between events"),
    ],
)
def test_two_crlf_end_whatever_a_death_left_open_so_the_marker_is_the_last_event(prefix, state):
    final_bytes = solution("07.5").__globals__["final_bytes"]
    from streamlab.core.accumulate import ChatAccumulator

    marked = prefix + final_bytes(ChatAccumulator(), "chat", "broke")
    events, cut = parse(marked)
    assert not cut and json.loads(events[-1].data)["error"]["code"] == "upstream_broke", state


# -- the checks: stubs, each stage against the next, wrong answers ------------------------------------------------


async def _stub(upstream: httpx.Response, stream: StreamInfo) -> AsyncIterator[bytes]:
    raise NotImplementedError


async def _stub_generator(upstream: httpx.Response, stream: StreamInfo) -> AsyncIterator[bytes]:
    raise NotImplementedError
    yield b""  # pragma: no cover - makes it an async generator


def test_untouched_stubs_are_not_attempted_at_once():
    for ex_id in STAGES:
        started = time.perf_counter()
        assert verdict(ex_id, _stub) == f"Exercise {ex_id}: not attempted yet"
        assert verdict(ex_id, _stub_generator) == f"Exercise {ex_id}: not attempted yet"
        assert verdict(ex_id, ...) == f"Exercise {ex_id}: not attempted yet"
        assert time.perf_counter() - started < 5.0
    assert not attempted(_stub) and attempted(solution("07.1"))


def test_a_body_that_is_not_an_async_generator_is_told_so():
    async def returns(upstream: httpx.Response, stream: StreamInfo) -> None:
        return None

    assert verdict("07.1", returns).endswith(
        "should be an async generator function (`async def` with `yield` in "
        "it): the relay sends every bytes object it yields"
    )
    assert verdict("07.1", 3) == "Exercise 07.1: not yet: pass_through should be a function, got int"


def test_grading_an_untouched_relay_says_not_attempted(capsys):
    assert grade_my_relay(_stub) is None
    assert capsys.readouterr().out == (
        "Your relay: not attempted yet (fill in with_marked_end, exercise 07.5, then run this cell again)\n"
    )


def test_stage_1_without_a_summary_fails_stage_2_on_the_summary_lines(no_leaked_threads):
    text = verdict("07.2", solution("07.1"))
    assert text.startswith("Exercise 07.2: not yet: (5) one JSON summary line per stream: 0 summary lines for"), text


def test_a_summary_after_the_loop_fails_stage_2_naming_the_stream_in_words(no_leaked_threads):
    """The SDK hangs up at data: [DONE] while the upstream's body is still open: the code after the loop never
    runs. The verdict says which stream that was in words; the model name is only there to find its line."""
    text = verdict("07.2", summary_after_the_loop)
    assert text.startswith("Exercise 07.2: not yet: (5) one JSON summary line per stream: "), text
    assert "the stream whose client hangs up at data: [DONE] (model check-done-linger): 0 summary line(s)" in text
    assert not re.search(r"(?<!model )\bcheck-[a-z-]+", text), f"an internal name used as the stream's name: {text}"


def test_stage_2_calls_a_stream_whose_client_left_truncated_not_cancelled(no_leaked_threads):
    # Stage 2 already writes its summary in a `finally`, but without acc.cancel() a departed client's stream
    # reads as cut short by the upstream.
    text = verdict("07.3", solution("07.2"))
    assert text.startswith(
        "Exercise 07.3: not yet: (5) one JSON summary line per stream: the Chat stream whose "
        "client leaves mid-stream (model check-hang): no summary says outcome cancelled (they say "
        "truncated)"
    ), text


def test_stage_3_sends_no_keep_alive(no_leaked_threads):
    text = verdict("07.4", solution("07.3"))
    assert text.startswith("Exercise 07.4: not yet: (3) keep-alives: stall between events (chat): no keep-alive"), text


def test_a_fixed_keep_alive_fails_inside_an_event(no_leaked_threads):
    text = verdict("07.4", _keepalive_variant(beat=b": keep-alive\n\n", cancel_reader=True))
    assert text.startswith("Exercise 07.4: not yet: (3) keep-alives: stall inside"), text


def test_a_reader_task_left_running_keeps_the_upstream_open(no_leaked_threads):
    text = verdict("07.4", _keepalive_variant(beat=None, cancel_reader=False))
    assert text.startswith("Exercise 07.4: not yet: (2) client leaves"), text
    assert "the upstream request is still" in text


@pytest.mark.slow
def test_stage_4_ends_quietly_when_the_upstream_dies_and_the_sdk_returns_normally(no_leaked_threads):
    text = verdict("07.5", solution("07.4"))
    assert text.startswith("Exercise 07.5: not yet: (4) cut between events (chat): no marked final event"), text
    assert "the SDK returned normally with 10 of 33 characters" in text


def test_a_relay_that_holds_whole_events_fails_stage_1(no_leaked_threads):
    text = verdict("07.1", whole_events)
    assert text.startswith("Exercise 07.1: not yet: (1) bytes leave before their event is complete"), text


def test_a_relay_that_decodes_text_fails_stage_1(no_leaked_threads):
    """`aiter_text()` gives back the same bytes in the end, so only timing tells: the checker's half event ends
    inside a two-byte character, which a decoding relay holds until the rest arrives."""
    text = verdict("07.1", decodes_text)
    assert text.startswith("Exercise 07.1: not yet: (1) bytes leave before their event is complete"), text
    assert "held back" in text and "decodes the bytes as text" in text, text


# -- section 9: the reports -----------------------------------------------------------------------------------------


# The reference Relay with the lab's options is graded in the lab itself (its cells 24 and 25 under nbval: every
# requirement's count of passing checks, the five outcomes, the verdict), and the last stage's hidden solution by
# tests/labs/test_solutions.py; here the lab's reference body goes through grade_my_relay, as a learner's would.


@pytest.mark.slow
def test_grading_the_reference_body_shown_in_the_lab_prints_a_passing_report(capsys, no_leaked_threads):
    report = grade_my_relay(reference_body())
    assert report is not None and report.ok, report and report.render()
    counts = [len([r for r in report.results if r.requirement == n]) for n in (1, 2, 3, 4, 5)]
    assert counts == [7, 2, 4, 13, 2]
    out = capsys.readouterr().out
    assert out.rstrip().endswith("5 of 5 requirements hold: the relay passes")


# -- the lab's text ---------------------------------------------------------------------------------------------------


def test_the_brief_is_rendered_from_the_requirements_not_restated():
    code = "\n".join(_source(c) for c in _cells() if c["cell_type"] == "code")
    assert "for req in REQUIREMENTS:" in code
    from streamlab.core.relay.stream import REQUIREMENTS

    assert not any(req.rule in _markdown() for req in REQUIREMENTS)


def test_the_lab_draws_the_relay_data_flow():
    text = _markdown()
    block = text.split("```mermaid", 1)[1].split("```", 1)[0]
    for node in ("stand-in", "chaos proxy", "your relay", "client", "summary line", "record"):
        assert node in block, node
    assert not re.search(r"^\s*(end|graph|subgraph|class|style|click)\b", block, re.M)
