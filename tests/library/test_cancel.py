"""Cancelling a stream by closing the connection: the server notices, stops writing, nothing leaks."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time
import warnings

import pytest

from streamlab.core.accumulate import ChatAccumulator, ResponsesAccumulator
from streamlab.core.endings import Outcome
from streamlab.core.shapes import chat_text_stream, responses_text_stream
from streamlab.core.standin.script import Episode, StoredResponse, paced
from streamlab.net.client import astream_chat, stream_chat
from streamlab.net.resume import ResumableResponseStream
from streamlab.net.retry import RetryingStream
from streamlab.net.standin.server import StandIn

N_PIECES = 200
STOP_AFTER = 5
LONG = chat_text_stream([f"t{i:03d} " for i in range(N_PIECES)])


@pytest.fixture
def server():
    # The client is under test here, not the stand-in's checks: requests name only the model, and every
    # scripted byte is played (the stand-in's defaults are the real API's: messages required, usage on request).
    with StandIn({"long": Episode(paced(LONG, gap=0.01))}, usage="scripted", require_input=False) as s:
        yield s


def _content_deltas(acc: ChatAccumulator) -> int:
    return len(acc.text.get(0, "").split())


def _threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if not t.name.startswith("standin:")}


def _settled(before: set[threading.Thread], timeout: float = 5.0) -> bool:
    """True once every thread started since `before` has ended (the server's handler needs a moment)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _threads() <= before:
            return True
        time.sleep(0.01)
    return False


def _assert_server_stopped_early(server: StandIn) -> None:
    assert server.wait_idle(timeout=5), "the stand-in never finished the request"
    (rec,) = server.records()
    assert rec.client_gone and rec.ending == "client_gone"
    assert rec.frames_written < len(LONG)  # it stopped writing well before the end
    assert rec.bytes_written < len(b"".join(LONG)) // 2


def test_cancel_after_n_deltas_sync(server: StandIn) -> None:
    before = _threads()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        acc = ChatAccumulator()
        with stream_chat(server.base_url, {"model": "long", "stream_options": {"include_usage": True}}) as stream:
            for timed in stream:
                acc.feed(timed.event)
                if _content_deltas(acc) == STOP_AFTER:
                    break  # leaving the `with` block closes the connection
        acc.cancel()
        gc.collect()
    assert acc.text[0] == "t000 t001 t002 t003 t004 "
    assert acc.outcome() is Outcome.CANCELLED and acc.usage is None
    assert stream.end_reason == "cancelled"
    _assert_server_stopped_early(server)
    assert _settled(before), f"threads left behind: {_threads() - before}"
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_cancel_after_n_deltas_async(server: StandIn) -> None:
    before = _threads()

    async def main() -> ChatAccumulator:
        acc = ChatAccumulator()
        stream = astream_chat(server.base_url, {"model": "long"})
        async with stream:
            async for timed in stream:
                acc.feed(timed.event)
                if _content_deltas(acc) == STOP_AFTER:
                    break
        acc.cancel()
        assert stream.end_reason == "cancelled"
        return acc

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        acc = asyncio.run(main())
        gc.collect()
    assert acc.outcome() is Outcome.CANCELLED and acc.usage is None
    _assert_server_stopped_early(server)
    assert _settled(before), f"threads left behind: {_threads() - before}"
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_cancel_through_the_retrying_stream(server: StandIn) -> None:
    acc = ChatAccumulator()
    with RetryingStream(lambda: stream_chat(server.base_url, {"model": "long"})) as rs:
        for timed in rs:
            acc.feed(timed.event)
            if _content_deltas(acc) == STOP_AFTER:
                break
    acc.cancel()
    assert acc.outcome() is Outcome.CANCELLED and len(rs.attempts) == 0  # no attempt "failed"; none retried
    _assert_server_stopped_early(server)


def test_cancel_a_resumable_stream_does_not_reconnect() -> None:
    frames = responses_text_stream([f"w{i} " for i in range(100)], response_id="resp_long")
    stored = StoredResponse.from_frames(frames)
    with StandIn({"bg": Episode(paced(frames, gap=0.01))}, stored={"resp_long": stored}, require_input=False) as server:
        acc = ResponsesAccumulator()
        with ResumableResponseStream(server.base_url, {"model": "bg", "background": True}) as stream:
            for timed in stream:
                acc.feed(timed.event)
                if json.loads(timed.data)["type"] == "response.output_text.delta":
                    break
        acc.cancel()
        assert server.wait_idle(timeout=5)
        records = server.records()
    assert len(records) == 1 and records[0].client_gone  # closed, and no GET to resume it
    assert acc.outcome() is Outcome.CANCELLED and acc.usage is None
    assert len(stream.connections) == 1
