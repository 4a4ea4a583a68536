"""The httpx streaming client (sync and async) against the stand-in: events, errors, cancel, timeouts, cuts."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import tracemalloc

import httpx
import pytest
from support import ASK

from streamlab.core import shapes
from streamlab.core.endings import Ending
from streamlab.core.errors import (
    ENDING_ERRORS,
    BadStatus,
    ConnectFailed,
    ConnectionBroken,
    DeadlineExceeded,
    EventTooLarge,
    IdleTimeout,
    IncompleteEvent,
    NotAnEventStream,
    ReadStalled,
    RequestNotSent,
    SSELimitError,
    StreamEndError,
)
from streamlab.core.reading import TimedEvent
from streamlab.core.sse import SSEParser, parse
from streamlab.core.standin.script import (
    Cut,
    End,
    Episode,
    KeepAlive,
    Send,
    Stall,
    StoredResponse,
    Wait,
    error_episode,
    paced,
)
from streamlab.net.client import (
    aresume_response,
    astream_chat,
    astream_responses,
    resume_response,
    stream_chat,
    stream_responses,
)
from streamlab.net.eventstream import RETRYABLE_TRANSPORT_ERRORS, TRANSLATE, AsyncEventStream, EventStream, _translation
from streamlab.net.standin.server import StandIn

WORDS = ["Hel", "lo ", "w\u00f6rld"]
CHAT = shapes.chat_text_stream(WORDS, model="m")
RESP = shapes.responses_text_stream(["alpha ", "beta ", "gamma ", "delta"], model="r")
LONG = shapes.chat_text_stream([f"t{i:03d} " for i in range(200)], model="long")
HALF_CHAR = CHAT[3][: CHAT[3].index(b"\xc3") + 1]  # a frame cut after the first byte of a two-byte character

SCRIPT = {
    "m": Episode(paced(CHAT, first=0.1, gap=0.01)),
    "r": Episode([Send(f) for f in RESP]),
    "long": Episode(paced(LONG, gap=0.005)),
    "flaky": [
        error_episode(429, "slow down", type="rate_limit_exceeded", retry_after_ms=20),
        Episode([Send(f) for f in CHAT]),
    ],
    "text_error": error_episode(503, "ignored"),
    "cut_mid": Episode([Send(f) for f in CHAT[:3]] + [Send(HALF_CHAR), Cut()]),
    "cut_boundary": Episode([Send(f) for f in CHAT[:3]] + [Cut()]),
    "reset": Episode([Send(f) for f in CHAT[:3]] + [Cut(reset=True)]),
    "end_mid": Episode([Send(f) for f in CHAT[:3]] + [Send(HALF_CHAR), End()]),
    "stall": Episode([Send(CHAT[0]), Stall()]),
    "pings": Episode([Send(CHAT[0])] + [Wait(0.02), KeepAlive()] * 500),
    "ids": Episode([Send(shapes.sse_frame(f"part {i}", id=str(i))) for i in range(1, 6)]),
    "huge_line": Episode([Send(CHAT[0] + b"data: " + b"x" * 5000 + b"\n\n"), Send(CHAT[1])]),
    "late_stall": Episode([Send(CHAT[0]), Wait(0.5), Send(CHAT[1]), Stall()]),
    "keepalive_events": Episode(
        [Send(RESP[0])] + [Wait(0.02), Send(shapes.sse_frame('{"type": "keepalive"}', event="keepalive"))] * 500
    ),
}


pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # see conftest.py


@pytest.fixture(scope="module")
def server():
    # The client is under test here, not the stand-in's checks: requests name only the model, and every
    # scripted byte is played (the stand-in's defaults are the real API's: messages required, usage on request).
    with StandIn(
        SCRIPT, stored={"resp_demo": StoredResponse.from_frames(RESP)}, usage="scripted", require_input=False
    ) as s:
        yield s


@pytest.fixture(autouse=True)
def fresh(server):
    server.reset()


def text_of(events: list[TimedEvent]) -> str:
    out = []
    for ev in events:
        if ev.data == "[DONE]":
            continue
        for choice in ev.json()["choices"]:
            out.append(choice["delta"].get("content") or "")
    return "".join(out)


# -- a complete stream -----------------------------------------------------------------------------


def test_sync_stream_yields_timed_events_in_order(server):
    with stream_chat(server.base_url, {"model": "m", "messages": ASK}) as stream:
        events = list(stream)
    assert stream.end_reason == "complete" and not stream.mid_event and stream.error is None
    assert [e.event for e in events] == parse(b"".join(CHAT))[0]
    assert text_of(events) == "Hello w\u00f6rld"
    assert stream.raw == b"".join(CHAT) and stream.bytes_received == len(stream.raw)
    assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
    assert events[0].elapsed >= 0.1  # not before the scheduled first wait
    assert all(a.at <= b.at for a, b in zip(events, events[1:]))
    assert all(e.at - stream.started_at == pytest.approx(e.elapsed) for e in events)
    assert stream.first_byte_at is not None and stream.first_byte_at <= events[0].at
    assert sum(n for _, n in stream.chunks) == len(stream.raw)
    assert events[0].type == "message" and events[-1].data == "[DONE]"
    assert stream.events == events
    server.wait_idle()
    assert server.records()[0].json == {"model": "m", "messages": ASK, "stream": True}


def test_async_stream_yields_the_same_events(server):
    async def run() -> AsyncEventStream:
        async with astream_chat(server.base_url, {"model": "m"}) as stream:
            async for _ in stream:
                pass
        return stream

    stream = asyncio.run(run())
    assert stream.end_reason == "complete"
    assert text_of(stream.events) == "Hello w\u00f6rld" and stream.raw == b"".join(CHAT)
    assert stream.events[0].elapsed >= 0.1


def test_responses_dialect_and_read_all(server):
    stream = stream_responses(server.base_url, {"model": "r", "input": "hi"})
    with stream:
        events = stream.read_all()
    types = [e.type for e in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert [e.json()["sequence_number"] for e in events] == list(range(len(RESP)))


def test_iterating_without_with_opens_and_releases(server):
    stream = stream_chat(server.base_url, {"model": "m"})
    assert stream.status is None and not stream.ended
    assert len(list(stream)) == len(CHAT)
    assert stream.end_reason == "complete"
    with pytest.raises(RuntimeError, match="only once"):
        list(stream)


def test_a_shared_httpx_client_is_left_open(server):
    with httpx.Client() as shared:
        for _ in range(2):
            with stream_chat(server.base_url, {"model": "m"}, client=shared) as stream:
                assert len(list(stream)) == len(CHAT)
        assert not shared.is_closed
        assert shared.post(server.url("chat/completions"), json={"model": "m"}).status_code == 200


# -- HTTP errors -----------------------------------------------------------------------------------


def test_http_error_carries_status_headers_and_parsed_body(server):
    with pytest.raises(BadStatus) as info:
        with stream_chat(server.base_url, {"model": "flaky"}):
            pass
    err = info.value
    assert err.status == 429 and err.headers["retry-after-ms"] == "20"
    assert err.error == {"message": "slow down", "type": "rate_limit_exceeded", "param": None, "code": None}
    assert err.body == {"error": err.error} and "slow down" in str(err)
    assert err.end_reason == "http_error"
    with stream_chat(server.base_url, {"model": "flaky"}) as stream:  # the second episode streams
        assert text_of(list(stream)) == "Hello w\u00f6rld"


def test_http_error_for_unknown_model_and_async(server):
    async def run() -> None:
        async with astream_chat(server.base_url, {"model": "nope"}):
            pass

    with pytest.raises(BadStatus) as info:
        asyncio.run(run())
    assert info.value.status == 404 and info.value.error["code"] == "model_not_found"


def test_a_json_body_where_a_stream_was_expected(server):
    stream = EventStream(server.url("chat/completions"), {"model": "m"})  # no "stream": true
    with pytest.raises(NotAnEventStream) as info:
        stream.open()
    assert info.value.status == 200 and info.value.body["object"] == "chat.completion"
    assert stream.end_reason == "not_event_stream"
    assert isinstance(info.value, BadStatus)


def test_connect_error_when_nothing_listens():
    with socket.socket() as sock:  # find a port that is free, then leave it closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    stream = stream_chat(f"http://127.0.0.1:{port}/v1", {"model": "m"})
    with pytest.raises(ConnectFailed) as info:
        stream.open()
    assert stream.end_reason == "connect_error" and info.value.events_received == 0


# -- cancel ----------------------------------------------------------------------------------------


def test_cancel_closes_the_connection_and_the_server_sees_it(server):
    with stream_chat(server.base_url, {"model": "long"}) as stream:
        for i, _ in enumerate(stream):
            if i == 5:
                break
    assert stream.end_reason == "cancelled" and len(stream.events) >= 6
    assert server.wait_until(lambda rs: rs and rs[0].finished)
    (rec,) = server.records()
    assert rec.client_gone and rec.ending == "client_gone"
    assert rec.frames_written < len(LONG)


def test_async_cancel(server):
    async def run() -> AsyncEventStream:
        async with astream_chat(server.base_url, {"model": "long"}) as stream:
            async for ev in stream:
                if ev.data.count("t00"):
                    break
        return stream

    stream = asyncio.run(run())
    assert stream.end_reason == "cancelled"
    assert server.wait_until(lambda rs: rs and rs[0].finished)
    assert server.records()[0].client_gone


def test_close_before_iterating_yields_nothing(server):
    stream = stream_chat(server.base_url, {"model": "m"}).open()
    stream.close()
    assert list(stream) == [] and stream.end_reason == "cancelled"


# -- broken streams --------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "mid_event"), [("cut_mid", True), ("cut_boundary", False)])
def test_a_cut_connection_is_reported_with_what_arrived(server, model, mid_event):
    got: list[TimedEvent] = []
    with pytest.raises(ConnectionBroken) as info, stream_chat(server.base_url, {"model": model}) as stream:
        for ev in stream:
            got.append(ev)
    assert stream.end_reason == "broken" and stream.mid_event is mid_event
    assert info.value.mid_event is mid_event and info.value.events_received == 3
    assert text_of(got) == "Hello "  # the text so far is intact
    assert stream.raw.endswith(HALF_CHAR if mid_event else CHAT[2])


def test_a_reset_connection_is_reported_as_broken(server):
    with pytest.raises(ConnectionBroken) as info, stream_chat(server.base_url, {"model": "reset"}) as stream:
        for _ in stream:
            pass
    assert not info.value.mid_event and "reset" in str(info.value).lower()
    assert stream.end_reason == "broken"
    server.wait_idle()
    assert server.records()[0].ending == "cut"


def test_async_cut(server):
    async def run() -> AsyncEventStream:
        async with astream_chat(server.base_url, {"model": "cut_mid"}) as stream:
            async for _ in stream:
                pass
        return stream

    with pytest.raises(ConnectionBroken) as info:
        asyncio.run(run())
    assert info.value.mid_event and info.value.events_received == 3


def test_a_clean_end_inside_an_event_is_an_incomplete_event(server):
    with pytest.raises(IncompleteEvent) as info, stream_chat(server.base_url, {"model": "end_mid"}) as stream:
        for _ in stream:
            pass
    assert stream.end_reason == "incomplete_event" and stream.mid_event
    assert info.value.events_received == 3


def test_a_line_past_the_parser_limit_raises_after_the_events_before_it(server):
    got = []
    with (
        pytest.raises(EventTooLarge) as info,
        stream_chat(server.base_url, {"model": "huge_line"}, parser=SSEParser(max_line_bytes=1000)) as stream,
    ):
        for ev in stream:
            got.append(ev)
    assert info.value.limit_error.limit == "max_line_bytes"
    assert len(got) == 1 and got[0].json()["choices"][0]["delta"]["role"] == "assistant"
    assert stream.end_reason == "limit_exceeded"


def test_a_limit_mid_stream_ends_the_stream_like_every_other_ending(server):
    with (
        pytest.raises(EventTooLarge) as info,
        stream_chat(server.base_url, {"model": "huge_line"}, parser=SSEParser(max_line_bytes=1000)) as stream,
    ):
        for _ in stream:
            pass
    err = info.value
    assert stream.end_reason is Ending.LIMIT_EXCEEDED and stream.error is err and stream.mid_event
    assert isinstance(err.__cause__, SSELimitError) and err.limit_error is err.__cause__
    assert err.events_received == 1 and "max_line_bytes=1000" in str(err)
    assert server.wait_until(lambda rs: rs and rs[0].finished)  # the connection was closed, not left reading


@pytest.mark.parametrize(
    ("model", "ending"),
    [
        ("m", Ending.COMPLETE),
        ("cut_mid", Ending.BROKEN),
        ("end_mid", Ending.INCOMPLETE_EVENT),
        ("stall", Ending.READ_TIMEOUT),
        ("huge_line", Ending.LIMIT_EXCEEDED),
        ("text_error", Ending.HTTP_ERROR),
    ],
)
def test_every_ending_is_an_ending_member_and_raises_its_own_class(server, model, ending):
    stream = stream_chat(server.base_url, {"model": model}, read_timeout=0.3, parser=SSEParser(max_line_bytes=1000))
    try:
        with stream:
            for _ in stream:
                pass
    except StreamEndError as exc:
        assert type(exc) is ENDING_ERRORS[ending] and exc.ending is ending and stream.error is exc
    else:
        assert ending is Ending.COMPLETE and stream.error is None
    assert stream.end_reason is ending and stream.end_reason == ending.value


def test_translate_picks_the_most_specific_httpx_class():
    request = httpx.Request("GET", "http://127.0.0.1:1/")
    cases = {  # httpx exception -> (before the headers, while reading the body)
        httpx.ConnectError("refused", request=request): (ConnectFailed, ConnectionBroken),
        httpx.ConnectTimeout("slow", request=request): (ConnectFailed, ReadStalled),
        httpx.ReadTimeout("stalled", request=request): (ReadStalled, ReadStalled),
        httpx.RemoteProtocolError("cut", request=request): (ConnectFailed, ConnectionBroken),
        httpx.ReadError("reset", request=request): (ConnectFailed, ConnectionBroken),
        httpx.UnsupportedProtocol("htp://", request=request): (RequestNotSent, RequestNotSent),
        httpx.LocalProtocolError("bad header", request=request): (RequestNotSent, ConnectionBroken),
    }
    for exc, expected in cases.items():
        assert _translation(exc) == expected, type(exc).__name__
    assert all(issubclass(c, StreamEndError) for pair in TRANSLATE.values() for c in pair)
    assert httpx.HTTPError in TRANSLATE  # the catch-all: every httpx error has a translation


# -- keep="none": constant memory ------------------------------------------------------------------


def test_keep_none_keeps_counts_and_times_but_no_bytes_or_events(server):
    with stream_chat(server.base_url, {"model": "ids"}, keep="none") as stream:
        got = [t.data for t in stream]
    assert got == [f"part {i}" for i in range(1, 6)] and stream.end_reason is Ending.COMPLETE
    assert stream.events_received == 5 and stream.bytes_received > 0 and stream.chunks_received >= 1
    assert stream.last_event_id == "5" and stream.first_event_at <= stream.last_event_at
    for what in ("events", "raw", "chunks"):
        with pytest.raises(RuntimeError, match='keep="none"'):
            getattr(stream, what)
    assert "events=5" in repr(stream)


def test_keep_none_read_all_and_async(server):
    with stream_chat(server.base_url, {"model": "ids"}, keep="none") as stream:
        assert [t.data for t in stream.read_all()] == [f"part {i}" for i in range(1, 6)]

    async def run() -> AsyncEventStream:
        async with astream_chat(server.base_url, {"model": "ids"}, keep="none") as s:
            assert len(await s.read_all()) == 5
        return s

    s = asyncio.run(run())
    assert s.events_received == 5 and s.end_reason is Ending.COMPLETE
    with pytest.raises(RuntimeError, match="not kept"):
        _ = s.raw


def _serve_whole_request_then(response: bytes) -> tuple[int, threading.Thread, socket.socket]:
    """A one-shot loopback server that reads the whole request (head and body) before answering, then
    half-closes and waits for the client to hang up: a large answer is never cut short by a reset."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = int(
                next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
            )
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(response)
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(65536):
                pass

    thread = threading.Thread(target=serve)
    thread.start()
    return listener.getsockname()[1], thread, listener


def _client_peak(n_events: int, keep: str) -> tuple[int, int]:
    """Peak traced memory of the client reading `n_events` events from a raw loopback server, and the count.

    The answer is built before tracing starts (it stands for the network); the loop drops every event."""
    body = CHAT[2] * n_events  # a realistic chat chunk of about 200 bytes
    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    port, thread, listener = _serve_whole_request_then(head.encode() + body)
    tracemalloc.start()
    try:
        with EventStream(f"http://127.0.0.1:{port}/v1/chat/completions", {"model": "m"}, keep=keep) as stream:
            for _ in stream:
                pass
        return tracemalloc.get_traced_memory()[1], stream.events_received
    finally:
        tracemalloc.stop()
        thread.join(5)
        listener.close()


def test_keep_none_reads_a_long_stream_in_constant_memory():
    """Measured, not timed: 10x the events, the same peak; keeping everything is the control that grows.
    (2k and 20k events: tracemalloc costs ~15 us an allocation on this machine; the benchmark does 200k.)"""
    _client_peak(100, "none")  # warm up: the first request pays one-off costs (imports, TLS-free client setup)
    (short, n1), (long, n2) = _client_peak(2_000, "none"), _client_peak(20_000, "none")
    assert (n1, n2) == (2_000, 20_000)
    assert abs(long - short) < 256 * 1024, (short, long)
    kept, _ = _client_peak(20_000, "all")
    assert kept - long > 20_000 * len(CHAT[2]), (kept, long)  # at least the raw bytes


# -- timeouts --------------------------------------------------------------------------------------


def test_read_timeout_between_bytes(server):
    with (
        pytest.raises(ReadStalled) as info,
        stream_chat(server.base_url, {"model": "stall"}, read_timeout=0.2) as stream,
    ):
        for _ in stream:
            pass
    assert stream.end_reason == "read_timeout" and info.value.events_received == 1
    assert info.value.elapsed >= 0.2


def test_deadline_is_distinct_from_the_read_timeout(server):
    t0 = time.perf_counter()
    with (
        pytest.raises(DeadlineExceeded) as info,
        stream_chat(server.base_url, {"model": "stall"}, read_timeout=30, deadline=0.3) as stream,
    ):
        for _ in stream:
            pass
    assert stream.end_reason == "deadline" and not isinstance(info.value, ReadStalled)
    assert 0.3 <= time.perf_counter() - t0 < 10  # well before the 30 s read timeout


def test_deadline_interrupts_a_read_already_waiting(server):
    # The read that stalls starts at about 0.5 s. httpx's own read timeout (clipped to the deadline, 0.8 s)
    # would only fire at about 1.3 s; the deadline watchdog stops it at 0.8 s.
    t0 = time.perf_counter()
    with (
        pytest.raises(DeadlineExceeded),
        stream_chat(server.base_url, {"model": "late_stall"}, read_timeout=30, deadline=0.8) as stream,
    ):
        for _ in stream:
            pass
    assert 0.8 <= time.perf_counter() - t0 < 1.25
    assert len(stream.events) == 2


def test_idle_timeout_counts_only_what_is_content(server):
    def is_content(ev) -> bool:
        return ev.event != "keepalive"

    with (
        pytest.raises(IdleTimeout) as info,
        stream_responses(
            server.base_url, {"model": "keepalive_events"}, idle_timeout=0.2, is_content=is_content
        ) as stream,
    ):
        for _ in stream:
            pass
    assert info.value.events_received > 1  # keep-alive events were delivered, yet the stream counts as idle
    assert {e.type for e in stream.events[1:]} == {"keepalive"}


def test_deadline_while_bytes_keep_coming(server):
    # The stream is bound before it opens: under load a short deadline could fire while waiting for the headers,
    # inside `with ... as stream`, which then left `stream` unbound (an UnboundLocalError, not a verdict). The
    # deadline counts from the request, so it is given time for the headers on a loaded machine, and still ends
    # the stream long before the pings do (they keep coming for 10 s).
    stream = stream_chat(server.base_url, {"model": "pings"}, read_timeout=5, deadline=2.0)
    with pytest.raises(DeadlineExceeded), stream:
        for _ in stream:
            pass
    assert stream.end_reason == "deadline"
    assert stream.bytes_received > len(CHAT[0])  # keep-alives did arrive; the deadline still applies


def test_idle_timeout_when_only_keepalives_arrive(server):
    with (
        pytest.raises(IdleTimeout) as info,
        stream_chat(server.base_url, {"model": "pings"}, read_timeout=5, idle_timeout=0.2) as stream,
    ):
        for _ in stream:
            pass
    assert stream.end_reason == "idle_timeout" and info.value.events_received == 1
    assert server.wait_until(lambda rs: rs and rs[0].finished)
    assert server.records()[0].client_gone


def test_async_timeouts(server):
    async def run(model: str, **kw) -> None:
        async with astream_chat(server.base_url, {"model": model}, **kw) as stream:
            async for _ in stream:
                pass

    with pytest.raises(ReadStalled):
        asyncio.run(run("stall", read_timeout=0.2))
    with pytest.raises(DeadlineExceeded):
        asyncio.run(run("stall", read_timeout=30, deadline=0.3))
    with pytest.raises(IdleTimeout):
        asyncio.run(run("pings", idle_timeout=0.2))


def test_timeouts_must_be_positive():
    with pytest.raises(ValueError, match="read_timeout"):
        EventStream("http://127.0.0.1:1/v1/chat/completions", {}, read_timeout=0)


def test_every_failure_is_a_stream_error():
    for cls in (
        BadStatus,
        ConnectFailed,
        ConnectionBroken,
        ReadStalled,
        IdleTimeout,
        DeadlineExceeded,
        IncompleteEvent,
        NotAnEventStream,
    ):
        assert issubclass(cls, StreamEndError)


# -- resuming --------------------------------------------------------------------------------------


def test_resume_a_stored_response(server):
    with resume_response(server.base_url, "resp_demo", starting_after=5) as stream:
        seqs = [e.json()["sequence_number"] for e in stream]
    assert seqs == list(range(6, len(RESP)))
    with resume_response(server.base_url, "resp_demo") as stream:
        assert len(list(stream)) == len(RESP)

    async def run() -> list[int]:
        async with aresume_response(server.base_url, "resp_demo", starting_after=0) as s:
            return [e.json()["sequence_number"] async for e in s]

    assert asyncio.run(run()) == list(range(1, len(RESP)))


def test_last_event_id_reconnect(server):
    with stream_chat(server.base_url, {"model": "ids"}) as first:
        for ev in first:
            if ev.data == "part 2":
                break
    assert first.last_event_id == "2"
    with stream_chat(server.base_url, {"model": "ids"}, last_event_id=first.last_event_id) as second:
        assert [e.data for e in second] == ["part 3", "part 4", "part 5"]
    server.wait_idle()
    assert server.records()[-1].headers["last-event-id"] == "2"


def test_the_last_event_id_persists_across_a_reconnect_until_the_stream_sets_one(server):
    with stream_chat(server.base_url, {"model": "m"}, last_event_id="7") as stream:  # frames without id fields
        events = list(stream)
    assert {e.id for e in events} == {"7"} and stream.last_event_id == "7"


def test_async_stream_responses(server):
    async def run() -> list[str]:
        async with astream_responses(server.base_url, {"model": "r"}) as s:
            return [e.type async for e in s]

    assert asyncio.run(run())[-1] == "response.completed"


def test_fifty_concurrent_async_streams_all_complete():
    # Correctness under concurrency only (timings are the benchmark's job: benchmarks/bench_load.py).
    # A burst of 50 new connections once overflowed http.server's default listen backlog of 5.
    n = 50
    script = {
        f"c{i}": Episode(paced(shapes.chat_text_stream([f"c{i} ", "done"], model=f"c{i}"), gap=0.01)) for i in range(n)
    }

    async def run(base_url: str) -> list[AsyncEventStream]:
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=n)) as shared:

            async def one(i: int) -> AsyncEventStream:
                async with astream_chat(base_url, {"model": f"c{i}"}, client=shared) as stream:
                    await stream.read_all()
                return stream

            return list(await asyncio.gather(*(one(i) for i in range(n))))

    with StandIn(script, require_input=False) as server:
        streams = asyncio.run(run(server.base_url))
        assert server.wait_idle()
        assert sorted(r.ending for r in server.records()) == ["complete"] * n
    assert [text_of(s.events) for s in streams] == [f"c{i} done" for i in range(n)]
    assert all(s.end_reason == "complete" for s in streams)


# --- found in review: races, encodings and classifications -----------------------------------------


_LONG = shapes.chat_text_stream([f"t{i:04d} " for i in range(3000)], model="long")
_UNTIL_CLOSED = Episode([*(Send(f) for f in _LONG[:-1]), Stall(None), Send(_LONG[-1])])
"""3,000 frames as fast as they go, then nothing until the client closes: a stream only a close can end."""


def test_close_from_another_thread_never_raises_in_the_reader() -> None:
    """A "Stop" button on another thread: the reader ends quietly as cancelled, however the race falls (mid-read
    or waiting for bytes). The stream stalls before its last frame, so only the close can end it: a reader that got
    ahead of a late close had read it to "complete" (once in a loaded run)."""
    outcomes = []
    with StandIn({"long": _UNTIL_CLOSED}, require_input=False) as srv:
        for i in range(25):
            stream = stream_chat(srv.base_url, {"model": "long"})
            stream.open()
            result: dict[str, str] = {}

            def reader(stream: EventStream = stream, result: dict[str, str] = result) -> None:
                try:
                    for _ in stream:
                        pass
                    result["r"] = f"ended {stream.end_reason}"
                except BaseException as exc:  # noqa: BLE001 - any exception here is the bug
                    result["r"] = f"raised {type(exc).__name__}: {exc}"

            thread = threading.Thread(target=reader)
            thread.start()
            time.sleep(0.001 * (i % 8))
            stream.close()
            thread.join(5)
            outcomes.append(result.get("r"))
    assert set(outcomes) == {"ended cancelled"}, outcomes


def test_aclose_from_another_task_never_raises_in_the_reader() -> None:
    async def run(srv: StandIn) -> list[str]:
        outcomes = []
        for i in range(15):
            stream = astream_chat(srv.base_url, {"model": "long"})
            await stream.open()

            async def reader(stream: AsyncEventStream = stream) -> str:
                async for _ in stream:
                    pass
                return f"ended {stream.end_reason}"

            task = asyncio.ensure_future(reader())
            for _ in range(i % 5):
                await asyncio.sleep(0)
            await stream.aclose()
            outcomes.append(await task)
        return outcomes

    with StandIn({"long": _UNTIL_CLOSED}, require_input=False) as srv:
        outcomes = asyncio.run(run(srv))
    assert set(outcomes) == {"ended cancelled"}, outcomes


def test_abandoned_loop_without_with_cancels_and_stops_the_watchdog() -> None:
    long = shapes.chat_text_stream([f"t{i:04d} " for i in range(500)], model="long")
    # still writing when we walk away
    with StandIn({"long": Episode(paced(long, gap=0.01))}, require_input=False) as srv:
        stream = stream_chat(srv.base_url, {"model": "long"}, deadline=30)
        for _ in stream:
            break
        assert stream.end_reason == "cancelled"
        timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
        assert not [t for t in timers if not t.name.startswith("pytest_timeout")]  # pytest-timeout's own is not ours
        assert srv.wait_until(lambda recs: recs[0].client_gone, timeout=5)


def test_non_ascii_last_event_id_round_trips_as_utf8() -> None:
    """The standard sends the last event ID UTF-8 encoded; the stand-in must match it to resume."""
    frames = [b"id: \xc3\xa9-1\ndata: a\n\n", b"id: \xc3\xa9-2\ndata: b\n\n", b"data: [DONE]\n\n"]
    with StandIn({"m": Episode([Send(f) for f in frames])}, require_input=False) as srv:
        with stream_chat(srv.base_url, {"model": "m"}, last_event_id="\u00e9-1") as stream:
            data = [t.data for t in stream]
        assert data == ["b", "[DONE]"]
        assert srv.records()[0].resumed_after == "\u00e9-1"


def test_a_request_that_cannot_be_sent_is_not_a_retryable_connect_error() -> None:
    stream = EventStream("htp://127.0.0.1:1/v1/chat/completions", {"model": "m"})
    with pytest.raises(RequestNotSent) as info:
        stream.open()
    assert stream.end_reason == "invalid_request"
    assert not isinstance(info.value, RETRYABLE_TRANSPORT_ERRORS)


def test_a_broken_json_body_instead_of_a_stream_is_reported_and_released() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve_once() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a"')
        conn.close()

    thread = threading.Thread(target=serve_once)
    thread.start()
    stream = EventStream(f"http://127.0.0.1:{port}/v1/chat/completions", {"model": "m"})
    with pytest.raises(NotAnEventStream):
        stream.open()
    thread.join(5)
    listener.close()
    assert stream.end_reason == "not_event_stream"


def _serve_once(content_type: str | None, body: bytes) -> tuple[int, threading.Thread, socket.socket]:
    """A one-shot raw HTTP/1.1 server on loopback answering 200 with this Content-Type (or none)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    head = "" if content_type is None else f"Content-Type: {content_type}\r\n"

    def serve_once() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(f"HTTP/1.1 200 OK\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        conn.close()

    thread = threading.Thread(target=serve_once)
    thread.start()
    return listener.getsockname()[1], thread, listener


@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "text/plain", None])
def test_a_2xx_that_is_not_an_event_stream_is_refused(content_type: str | None) -> None:
    """As the standard says: any Content-Type but text/event-stream fails (a proxy's HTML page, say)."""
    port, thread, listener = _serve_once(content_type, b"data: looks like SSE\n\n")
    stream = EventStream(f"http://127.0.0.1:{port}/v1/chat/completions", {"model": "m"})
    with pytest.raises(NotAnEventStream, match="not text/event-stream"):
        stream.open()
    thread.join(5)
    listener.close()
    assert stream.end_reason == "not_event_stream" and stream.events == []


def test_event_stream_media_type_is_matched_without_case_or_parameters() -> None:
    port, thread, listener = _serve_once("Text/Event-Stream;charset=UTF-8", b"data: a\n\ndata: [DONE]\n\n")
    with EventStream(f"http://127.0.0.1:{port}/v1/chat/completions", {"model": "m"}) as stream:
        assert [t.data for t in stream] == ["a", "[DONE]"]
    thread.join(5)
    listener.close()
