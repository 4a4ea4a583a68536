"""A client's FIN ends its stream at once at the stand-in, in the middle of a long pause too.

The stand-in plays a model server, and the servers it stands in for take a FIN for a departure: llama-cpp-python
(a Starlette app under uvicorn) closes the connection on it, and a cancel reaches the model at once (the
`cancelled` captures in streamlab/data/captures show it). The labs' cancel lessons measure exactly that: how soon
the upstream sees its client go. A FIN after `shutdown(SHUT_WR)` and one after `close()` are the same segment, so
a half-closing client loses its stream here, as it would at the real server; the relay and the gateway, which can
write a keep-alive comment that changes no event, probe instead and serve a half-close
(tests/hostile/test_hostile_ii.py).

Raw sockets, so that the client's side of the connection is exactly what the tests say.
"""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest

from streamlab.core import shapes
from streamlab.core.endings import Ending
from streamlab.core.standin.script import Episode, Send, Wait, error_episode
from streamlab.net.standin.server import StandIn

pytestmark = [pytest.mark.usefixtures("no_leaked_threads"), pytest.mark.net]

FRAMES = shapes.chat_text_stream([f"t{i:02d} " for i in range(8)], model="m", include_usage=False)
ASK = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(ASK), ASK)
)


@pytest.mark.parametrize("how", ["close", "shutdown"])
def test_a_fin_during_a_long_pause_ends_the_stream_at_once(how: str) -> None:
    with StandIn({"m": Episode([Send(FRAMES[0]), Wait(30.0), Send(FRAMES[1])])}) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        try:
            sock.sendall(REQUEST)
            assert server.wait_until(lambda rs: bool(rs) and rs[0].frames_written == 1)
            sock.recv(65536)  # read what came, so that close() sends a FIN, not an RST
            left_at = time.perf_counter()
            if how == "close":
                sock.close()
            else:
                sock.shutdown(socket.SHUT_WR)
            assert server.wait_until(lambda rs: rs[0].finished, timeout=10)  # not the 30 s pause
        finally:
            sock.close()
        (rec,) = server.records()
    assert rec.ending is Ending.CLIENT_GONE and rec.client_gone and rec.frames_written == 1
    assert rec.finished_at is not None and rec.finished_at - left_at < 1.0


def test_an_end_of_input_before_a_waiting_reply_is_a_hang_up() -> None:
    # a client that gave up waiting for the headers (the SDK's read timeout, lab 06) closes with nothing unread
    with StandIn({"m": error_episode(429, "slow down", wait=5.0)}) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(REQUEST)
            sock.shutdown(socket.SHUT_WR)
            assert server.wait_until(lambda rs: bool(rs) and rs[0].finished)
            (rec,) = server.records()
            sock.settimeout(10)
            assert sock.recv(65536) == b""
    assert rec.ending is Ending.CLIENT_GONE and rec.client_gone


def test_a_client_that_resets_during_a_long_pause_is_noticed_at_once() -> None:
    with StandIn({"m": Episode([Send(FRAMES[0]), Wait(30.0), Send(FRAMES[1])])}) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(REQUEST)
            assert server.wait_until(lambda rs: bool(rs) and rs[0].frames_written == 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # closed with SO_LINGER 0: an RST, as a client that closes with unread bytes sends
        assert server.wait_until(lambda rs: rs[0].finished, timeout=10)
        (rec,) = server.records()
    assert rec.ending is Ending.CLIENT_GONE and rec.frames_written == 1
