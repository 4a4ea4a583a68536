"""The one relay engine: `Pacing` (pure), `is_event_stream` (the WHATWG media-type rule), `UpstreamReader`, and
the relay and the gateway agreeing with the client on the same upstream (the drifted Content-Type case)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from streamlab.core import shapes
from streamlab.core.endings import Ending
from streamlab.core.relay.pacing import Due, Pacing
from streamlab.core.sse import is_event_stream
from streamlab.net.client import stream_chat
from streamlab.net.gateway.app import Gateway
from streamlab.net.relay.app import Relay
from streamlab.net.relay.serving import AppServer
from streamlab.net.relay.upstream import Read, UpstreamReader

STREAM = b"".join(shapes.chat_text_stream(["Hel", "lo"], model="m"))
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


# -- Pacing: the keep-alive and read-timeout arithmetic, with the clock passed in ---------------------------


def test_pacing_waits_for_the_nearer_of_keepalive_and_read_timeout() -> None:
    p = Pacing(keepalive=1.0, read_timeout=5.0, now=10.0)
    assert p.wait(10.0) == 1.0
    assert p.due(10.5) is Due.NOTHING
    assert p.due(11.0) is Due.KEEPALIVE
    assert p.wait(11.0) == 1.0  # the keep-alive restarted the downstream clock
    assert p.due(15.0) is Due.READ_TIMEOUT
    assert p.wait(20.0) == 0.0  # never negative


def test_pacing_without_keepalives_only_times_out() -> None:
    p = Pacing(keepalive=None, read_timeout=2.0, now=0.0)
    assert p.wait(0.5) == 1.5
    assert p.due(1.9) is Due.NOTHING
    p.upstream(1.9)
    assert p.due(3.8) is Due.NOTHING
    assert p.due(3.9) is Due.READ_TIMEOUT


def test_pacing_restart_upstream_keeps_the_downstream_clock() -> None:
    p = Pacing(keepalive=1.0, read_timeout=5.0, now=0.0)
    p.restart_upstream(0.9)  # bytes held back (the gateway before its first event): nothing went out
    assert p.due(1.0) is Due.KEEPALIVE
    assert p.due(5.5) is Due.NOTHING or p.due(5.9) is Due.READ_TIMEOUT


@pytest.mark.parametrize("bad", [{"keepalive": 0.0, "read_timeout": 1.0}, {"keepalive": None, "read_timeout": 0}])
def test_pacing_refuses_non_positive_intervals(bad: dict) -> None:
    with pytest.raises(ValueError, match="positive"):
        Pacing(now=0.0, **bad)


# -- is_event_stream: one rule for every reader ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "text/event-stream",
        "Text/Event-Stream",
        "text/event-stream; charset=utf-8",
        " TEXT/EVENT-STREAM ;charset=UTF-8",
        "text/event-stream\t",
    ],
)
def test_event_stream_media_types(value: str) -> None:
    assert is_event_stream(value)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "application/json",
        "text/event-streams",
        "text/event-stream-x",
        "text/plain; text/event-stream",
        "text/event\u017fstream",
    ],
)
def test_not_event_stream_media_types(value: str | None) -> None:
    assert not is_event_stream(value)


# -- UpstreamReader ---------------------------------------------------------------------------------------------


def _response(chunks: list[bytes]) -> httpx.Response:
    async def body():
        for c in chunks:
            yield c
            await asyncio.sleep(0)

    return httpx.Response(200, content=body())


def test_reader_hands_out_chunks_then_the_end_and_holds_back_when_the_caller_is_behind() -> None:
    async def run() -> list[tuple[Read, bytes]]:
        loop = asyncio.get_running_loop()
        watch, stop = loop.create_future(), loop.create_future()
        reader = UpstreamReader(_response([b"a", b"b", b"c", b"d"]), watch=watch, stop=stop, max_queued=2)
        await asyncio.sleep(0.01)
        assert len(reader._items) <= 2  # read ahead at most max_queued chunks
        got = []
        while True:
            item = await reader.next(1.0)
            got.append((item.kind, item.data))
            if item.kind is not Read.CHUNK:
                assert item.ending is Ending.COMPLETE
                break
        await reader.close()
        return got

    assert asyncio.run(run()) == [
        (Read.CHUNK, b"a"),
        (Read.CHUNK, b"b"),
        (Read.CHUNK, b"c"),
        (Read.CHUNK, b"d"),
        (Read.END, b""),
    ]


def test_reader_says_idle_gone_and_stop() -> None:
    async def never():
        await asyncio.sleep(3600)
        yield b""

    async def run() -> list[Read]:
        loop = asyncio.get_running_loop()
        watch, stop = loop.create_future(), loop.create_future()
        reader = UpstreamReader(httpx.Response(200, content=never()), watch=watch, stop=stop)
        kinds = [(await reader.next(0.01)).kind]
        stop.set_result(True)
        kinds.append((await reader.next(5.0)).kind)
        watch.set_result(None)
        kinds.append((await reader.next(5.0)).kind)  # the client gone wins over the stop
        await reader.close()
        return kinds

    assert asyncio.run(run()) == [Read.IDLE, Read.STOP, Read.GONE]


# -- the drift the engine removed: the same upstream reads the same through client, relay and gateway ---------


def _odd_case_upstream() -> Starlette:
    async def chat(request: Request) -> Response:
        return Response(STREAM, headers={"content-type": "Text/Event-Stream; Charset=UTF-8"})

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


@pytest.mark.net
@pytest.mark.parametrize("via", ["direct", "relay", "gateway"])
def test_a_mixed_case_content_type_is_a_stream_everywhere(via: str) -> None:
    with AppServer(_odd_case_upstream(), name="odd-upstream") as upstream:
        base = f"{upstream.url}/v1"
        if via == "direct":
            stream = stream_chat(base, ASK)
            with stream:
                events = list(stream)
            assert stream.end_reason is Ending.COMPLETE and events
            return
        server = Relay(base) if via == "relay" else Gateway([base])
        with server:
            stream = stream_chat(server.base_url, ASK)
            with stream:
                events = list(stream)
            assert stream.end_reason is Ending.COMPLETE
            assert [e.event.data for e in events][-1] == "[DONE]"
