"""A client that half-closes after its request still gets the whole stream; one that leaves is still noticed.

Issue 25 item 12: a client that sends its whole request and then calls `shutdown(SHUT_WR)` (as `curl -T`, some
proxies and hand-written socket clients do) used to lose the stream: the stand-in watches the socket while it
pauses, and it took the end of input (a read of b"") for a hang-up. A half-close only says "I will send nothing
more"; the client is still reading.

What the stand-in now does, and why. On the wire a FIN after `shutdown(SHUT_WR)` and a FIN after `close()` are the
same segment: the server cannot tell them apart when they arrive. They differ at the server's next write, which a
closed socket answers with an RST. So a hang-up is noticed as soon as anything says the client cannot read any more:
an RST (a client that closes with unread bytes sends one at once; one that closed cleanly sends one in answer to the
next chunk), a write that fails, or POLLHUP/POLLERR while a pause watches the socket. The two cases where no write
would show it are a stall with no end and a reply's wait before any byte of the response (a client that gave up
waiting for the headers, as the SDK's read timeout does in lab 06, closes with nothing unread): there, the end of
input ends the request as client_gone, as before, since nothing more would be sent to a client that can only ever
leave (the relay checker's "client leaves before the first token" and
`test_a_stall_forever_ends_when_the_client_leaves` rely on it). uvicorn 0.54 (h11), for comparison, closes the
connection on a half-close (its `eof_received` returns None, so asyncio closes the transport): a half-closing client
gets no byte of a Starlette stream, not even the status line.

The tests speak HTTP on raw sockets, so that the client's side of the connection is exactly what they say.
"""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest
from support import dechunk

from streamlab.core import shapes
from streamlab.core.endings import Ending
from streamlab.core.standin.script import Episode, Send, Wait, error_episode, paced
from streamlab.net.standin.server import StandIn

pytestmark = [pytest.mark.usefixtures("no_leaked_threads"), pytest.mark.net]

FRAMES = shapes.chat_text_stream([f"t{i:02d} " for i in range(8)], model="m", include_usage=False)
ASK = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(ASK), ASK)
)


def read_all(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the server sends until it closes its end."""
    sock.settimeout(timeout)
    out = bytearray()
    while data := sock.recv(65536):
        out += data
    return bytes(out)


def half_closed(port: int) -> socket.socket:
    """A connection that has sent the whole request and then shut its sending side."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(REQUEST)
    sock.shutdown(socket.SHUT_WR)
    return sock


@pytest.mark.parametrize("first", [0.0, 0.2])
def test_a_client_that_half_closes_after_its_request_gets_the_whole_stream(first: float) -> None:
    # pauses before the first chunk (`first`) and between every chunk: the FIN arrives while the stand-in pauses
    with StandIn({"m": Episode(paced(FRAMES, first=first, gap=0.02))}) as server:
        with half_closed(server.port) as sock:
            reply = read_all(sock)
        assert server.wait_idle()
        (rec,) = server.records()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    chunks, terminated = dechunk(body)
    assert chunks == FRAMES and terminated
    assert rec.ending is Ending.COMPLETE and not rec.client_gone and rec.frames_written == len(FRAMES)


def test_an_end_of_input_before_a_waiting_reply_is_a_hang_up() -> None:
    # before any byte of the response, a FIN is taken for a client that gave up (the SDK's read timeout, lab 06)
    with StandIn({"m": error_episode(429, "slow down", wait=5.0)}) as server:
        with half_closed(server.port) as sock:
            assert server.wait_until(lambda rs: bool(rs) and rs[0].finished)
            (rec,) = server.records()
            assert read_all(sock) == b""
    assert rec.ending is Ending.CLIENT_GONE and rec.client_gone


def test_a_half_closed_client_that_then_closes_is_noticed_at_the_next_write() -> None:
    frames = shapes.chat_text_stream([f"t{i:03d} " for i in range(200)], model="m")
    with StandIn({"m": Episode(paced(frames, gap=0.02))}) as server:
        with half_closed(server.port) as sock:
            assert server.wait_until(lambda rs: bool(rs) and rs[0].frames_written >= 2)
            sock.recv(65536)  # read what came, so that close() sends a FIN, not an RST
            left_at = time.perf_counter()
        assert server.wait_until(lambda rs: rs[0].finished)
        (rec,) = server.records()
    assert rec.ending is Ending.CLIENT_GONE and rec.client_gone
    # the first chunk after the close draws the client's RST; the pause after it sees the RST
    assert sum(at > left_at for at in rec.write_times) <= 2, rec.write_times
    assert rec.frames_written < len(frames)


def test_a_client_that_resets_during_a_long_pause_is_noticed_at_once() -> None:
    with StandIn({"m": Episode([Send(FRAMES[0]), Wait(30.0), Send(FRAMES[1])])}) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(REQUEST)
            assert server.wait_until(lambda rs: bool(rs) and rs[0].frames_written == 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # closed with SO_LINGER 0: an RST, as a client that closes with unread bytes sends
        # far less than the 30 s pause (a safety net for a loaded machine, not a measurement)
        assert server.wait_until(lambda rs: rs[0].finished, timeout=10)
        (rec,) = server.records()
    assert rec.ending is Ending.CLIENT_GONE and rec.frames_written == 1
