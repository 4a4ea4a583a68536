"""JSON nested past Python's recursion limit, from a real local server, at every public entry point that reads it:
the client's error body (sync and async), both resumable streams and `streamlab check` end in the library's own
answers, never a bare `RecursionError` (issue 35: 12 of 31 `json.loads` of network bytes lacked the guard)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest
from support import ASK, LoopbackServer, http_response

from streamlab.core.errors import BadStatus, ResumeError
from streamlab.core.reading import TimedEvent
from streamlab.core.resume import SequenceCursor, is_content_event, is_terminal_event
from streamlab.core.safejson import TOO_DEEP, json_or_none, json_problem, loads, read_json
from streamlab.core.sse import SSEEvent
from streamlab.net.check import check_endpoint
from streamlab.net.client import astream_chat, stream_chat
from streamlab.net.progress import RoomLink
from streamlab.net.relaycheck.run import summaries_from_file
from streamlab.net.resume import LastEventIdStream, ResumableResponseStream

pytestmark = pytest.mark.net

DEEP = "[" * 5000
"""Deeper than Python's recursion limit: `json.loads` raises RecursionError (not a ValueError) on it."""


class Replies(LoopbackServer):
    """Answers every connection with the next reply in turn (the last one again when they run out)."""

    def __init__(self, *replies: bytes) -> None:
        self.replies = list(replies)
        self.served = 0
        super().__init__()

    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        head = b""
        while b"\r\n\r\n" not in head:
            piece = conn.recv(65536)
            if not piece:
                return
            head += piece
        reply = self.replies[min(self.served, len(self.replies) - 1)]
        self.served += 1
        conn.sendall(reply)


def _deep_500() -> bytes:
    return http_response(DEEP.encode(), status="500 Internal Server Error", content_type="application/json")


def test_the_raw_parser_really_recurses() -> None:
    """The premise: without the guard this text raises RecursionError, which `except ValueError` misses."""
    with pytest.raises(RecursionError):
        json.loads(DEEP)


def test_the_guarded_reader_fails_only_with_value_error() -> None:
    with pytest.raises(ValueError, match="recursion limit"):
        read_json(DEEP)
    assert read_json(b'{"a": [1]}') == {"a": [1]}
    assert json_or_none(DEEP) is None and json_or_none(b"\xff") is None and json_or_none("null") is None
    assert loads(DEEP, "not JSON") == (None, TOO_DEEP)
    assert loads("1" * 5000, "not JSON")[1].startswith("JSON that Python cannot read")
    assert loads("{", "not JSON")[1].startswith("not JSON (")
    try:
        read_json(DEEP)
    except ValueError as exc:
        assert json_problem(exc, "not JSON") == TOO_DEEP


def test_the_core_readers_of_event_data_never_recurse() -> None:
    deep = SSEEvent(data=DEEP)
    assert is_terminal_event(deep) is False
    assert is_content_event(SSEEvent(data=DEEP + '"keepalive"')) is True
    assert SequenceCursor().admit_data(DEEP) == (False, None)
    with pytest.raises(ValueError, match="recursion limit"):
        TimedEvent(deep, 0.0, 0.0).json()


def test_stream_chat_sync_reads_a_deep_error_body_as_text() -> None:
    server = Replies(_deep_500())
    try:
        with pytest.raises(BadStatus) as caught, stream_chat(server.base_url, {"model": "m", "messages": ASK}):
            pass
    finally:
        server.close()
    assert caught.value.status == 500
    assert caught.value.body == DEEP  # kept as the text it is: it is not JSON Python can read


def test_stream_chat_async_reads_a_deep_error_body_as_text() -> None:
    server = Replies(_deep_500())

    async def run() -> BadStatus:
        try:
            async with astream_chat(server.base_url, {"model": "m", "messages": ASK}):
                pass
        except BadStatus as exc:
            return exc
        raise AssertionError("no BadStatus")

    try:
        exc = asyncio.run(run())
    finally:
        server.close()
    assert exc.status == 500 and exc.body == DEEP


def test_last_event_id_stream_survives_a_deep_event_and_a_deep_error() -> None:
    stream_body = f"id: 1\ndata: {DEEP}\n\nid: 2\ndata: [DONE]\n\n".encode()
    server = Replies(http_response(stream_body))
    try:
        with LastEventIdStream(f"{server.base_url}/chat/completions", {"model": "m"}) as stream:
            datas = [timed.data for timed in stream]
    finally:
        server.close()
    assert datas == [DEEP, "[DONE]"] and stream.finished

    server = Replies(_deep_500())
    try:
        with pytest.raises(ResumeError) as caught, LastEventIdStream(f"{server.base_url}/chat/completions", {}) as s:
            list(s)
    finally:
        server.close()
    assert isinstance(caught.value.__cause__, BadStatus) and caught.value.__cause__.body == DEEP


def test_resumable_response_stream_yields_a_deep_event_without_moving_the_cursor() -> None:
    created = {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1"}}
    done = {"type": "response.completed", "sequence_number": 1, "response": {"id": "resp_1"}}
    body = f"data: {json.dumps(created)}\n\ndata: {DEEP}\n\ndata: {json.dumps(done)}\n\n".encode()
    server = Replies(http_response(body))
    try:
        with ResumableResponseStream(server.base_url, {"model": "m", "background": True}) as stream:
            datas = [timed.data for timed in stream]
    finally:
        server.close()
    assert datas[1] == DEEP and len(datas) == 3
    assert stream.cursor.value == 1 and stream.terminal == "response.completed"


def test_check_reports_a_deep_refusal_instead_of_crashing() -> None:
    """`streamlab check` reads a 401's body for the message; 5,000 `[` there had crashed it."""
    refusal = http_response(DEEP.encode(), status="401 Unauthorized", content_type="application/json")
    server = Replies(refusal)
    try:
        report = check_endpoint(server.base_url, model="m", timeout=5, deadline=5)
    finally:
        server.close()
    assert report.exit_code in (1, 2)
    assert "refused the API key (HTTP 401)" in report.render()


def test_check_relay_reads_a_deep_summary_line_as_not_a_summary(tmp_path: Path) -> None:
    """`streamlab check-relay` reads the summary lines a relay prints: one nested past the limit is not one."""
    log = tmp_path / "relay.log"
    log.write_text("")
    read = summaries_from_file(log)
    log.write_text('{"a": ' + DEEP + "\n" + '{"outcome": "complete"}\n')
    assert read() == [{"outcome": "complete"}]


def test_joining_a_room_that_answers_deep_json_says_so_and_keeps_the_link() -> None:
    """A room's join reply nested past the limit had stopped the link's thread with a RecursionError."""
    deep = "[" * 3000  # under the room reply's 4 KiB cap, still past the recursion limit
    server = Replies(http_response(deep.encode(), content_type="application/json"))
    link = RoomLink(server.base_url.removesuffix("/v1"), "ada", code="xk7-m2q", timeout=5)
    try:
        with pytest.raises(RuntimeError, match="not joined"):
            link.api_key  # noqa: B018 - waits for the join
        assert link.last_error is not None and link.last_error.startswith("HTTP 200: joining failed")
        assert "RecursionError" not in link.last_error and "thread stopped" not in link.last_error
    finally:
        link.close()
        server.close()
