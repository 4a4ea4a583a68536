"""The stand-in's one Player thread (streamlab.net.standin.player): it plays every stream and waits for each
kept-alive connection's next request, serving whole requests itself (issue 34, item 5: no wake-up per frame,
no thread per request on the hot path).

What a client sees must not change: requests in pieces, a pipelined request, keep-alive, a stalled body's 408
within `body_timeout`, a client that leaves while its request waits, and a record subscriber that cannot read a
script must not take the server down.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
from support import dechunk

from streamlab.core import shapes
from streamlab.core.standin.board import first_text_write
from streamlab.core.standin.script import Episode, Send, Wait
from streamlab.net.standin.server import StandIn

pytestmark = [pytest.mark.net, pytest.mark.usefixtures("no_leaked_threads")]

FRAMES = shapes.chat_text_stream(["Hel", "lo"], model="m", include_usage=False)
ASK = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()


def head(length: int = len(ASK), *, close: bool = False) -> bytes:
    extra = b"Connection: close\r\n" if close else b""
    return b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n" % (extra, length)


class Replies:
    """Replies read off one kept-alive socket in order (two pipelined replies may come in one read)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf = sock, b""

    def _more(self) -> None:
        data = self.sock.recv(65536)
        assert data, "the connection closed inside a reply"
        self.buf += data

    def next(self) -> tuple[int, bytes]:
        """The next reply's status and payload (a chunked body de-chunked)."""
        while b"\r\n\r\n" not in self.buf:
            self._more()
        top, _, self.buf = self.buf.partition(b"\r\n\r\n")
        status = int(top.split(b" ")[1])
        if b"Transfer-Encoding: chunked" in top:
            while b"0\r\n\r\n" not in self.buf or dechunk(self.buf)[1] is False:
                self._more()
            chunks, _ = dechunk(self.buf)
            payload = b"".join(chunks)
            framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
            assert self.buf.startswith(framed)
            self.buf = self.buf[len(framed) :]
            return status, payload
        lines = top.split(b"\r\n")
        length = int(next(line.split(b":")[1] for line in lines if line.lower().startswith(b"content-length")))
        while len(self.buf) < length:
            self._more()
        payload, self.buf = self.buf[:length], self.buf[length:]
        return status, payload


def test_a_request_in_pieces_and_a_pipelined_one_are_answered_in_order_on_one_connection() -> None:
    with StandIn({"m": Episode([Wait(0.05), *map(Send, FRAMES)])}) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            replies = Replies(sock)
            sock.sendall(head())  # the head alone: the player waits for its body
            time.sleep(0.1)
            sock.sendall(ASK[:10])
            time.sleep(0.1)
            sock.sendall(ASK[10:])
            assert replies.next() == (200, b"".join(FRAMES))
            sock.sendall(head() + ASK + head() + ASK)  # two at once: the second waits for the first
            assert replies.next() == (200, b"".join(FRAMES))
            assert replies.next() == (200, b"".join(FRAMES))
            sock.sendall(b"POST /v1/chat/comp")  # a head in pieces: the connection's thread reads it
            time.sleep(0.1)
            sock.sendall(head()[18:] + ASK)
            assert replies.next() == (200, b"".join(FRAMES))
        assert server.wait_idle()
        records = server.records()
    assert [r.status for r in records] == [200] * 4 and all(r.ending == "complete" for r in records)


def test_a_body_that_stalls_gets_its_408_within_the_body_timeout() -> None:
    """The player waits `body_timeout` for a body, then the connection's thread refuses it at once (it had
    started a second `body_timeout` of its own)."""
    with StandIn({"m": Episode(list(map(Send, FRAMES)))}, body_timeout=1.0) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            started = time.monotonic()
            sock.sendall(head() + ASK[:5])
            status, body = Replies(sock).next()
            took = time.monotonic() - started
    assert status == 408 and b"did not arrive within 1 s" in body
    assert 1.0 - 0.05 <= took < 1.9, took


def test_a_client_that_leaves_mid_stream_or_between_requests_frees_its_connection() -> None:
    with StandIn({"m": Episode([Send(FRAMES[0]), Wait(30), *map(Send, FRAMES[1:])])}) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(head() + ASK)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.close()  # in the 30 s pause: the stream ends at once
        idle = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        idle.close()  # parked, never asked anything
        assert server.wait_connections(0, timeout=5)
        assert server.wait_idle()
        (rec,) = server.records()
    assert rec.ending == "client_gone"


def test_a_script_line_past_the_parser_limit_does_not_raise_for_the_dashboard() -> None:
    """The dashboard asks which write first shows text after every stream; a 32 MB line (past the parser's
    limit) had raised SSELimitError there, in the thread that finished the stream."""
    assert first_text_write([b"data: " + b"x" * (33 << 20)]) is None
    assert first_text_write([shapes.chat_text_stream(["Hi"], model="m")[1], b"data: " + b"x" * (33 << 20)]) == 0


def test_streams_and_replies_keep_flowing_after_a_subscriber_raises() -> None:
    with StandIn({"m": Episode(list(map(Send, FRAMES)))}) as server:
        server.subscribe(lambda record: 1 / 0)  # a subscriber's bug: the connection and the server go on
        with httpx.Client(timeout=10, trust_env=False) as client:
            for _ in range(3):
                with client.stream("POST", server.url("chat/completions"), content=ASK) as r:
                    assert b"".join(r.iter_raw()) == b"".join(FRAMES)
            assert server.wait_idle()
            assert server.open_connections() == 1  # one kept-alive connection carried all three
        assert len(server.records()) == 3 and server.totals().requests == 3
    assert not [t for t in threading.enumerate() if t.name == "standin:player"]


def test_connections_whose_requests_the_player_serves_start_no_thread() -> None:
    """A thousand connections opened at once (a relay's upstream connections in a room) had started a thousand
    handler threads in that instant; now an accepted connection waits in the player, and a thread starts only for
    what could block (here: none)."""
    with StandIn({"m": Episode([Wait(1.0), *map(Send, FRAMES)])}) as server:
        before = threading.active_count()
        socks = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(30)]
        try:
            for sock in socks:
                sock.sendall(head() + ASK)
            assert server.wait_until(lambda rs: len(rs) == 30 and all(r.status == 200 for r in rs), timeout=10)
            assert threading.active_count() - before < 3, threading.active_count() - before
            replies = [Replies(sock).next() for sock in socks]
        finally:
            for sock in socks:
                sock.close()
        assert replies == [(200, b"".join(FRAMES))] * 30
        assert server.wait_connections(0, timeout=5)
