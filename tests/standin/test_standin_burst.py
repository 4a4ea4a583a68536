"""A stream's scripted waits count from the request's arrival, not from when its handler got round to it.

Issue 23 item 4: with 100 requests in the same instant, the stand-in's TTFT error p95 was 144 ms against uvicorn +
Starlette's 98 ms. Each stream's first pause started only after its handler thread had read, planned and
recorded the request, and in a burst that thread first waits its turn under the GIL behind every other
connection's work, so the last streams' first tokens came that much late. Now the first pause counts from the
moment the request's last byte arrived (the kernel's time stamp on Linux, else when the read returned) and each
later pause from the write before it. The figures are `benchmarks/bench_burst.py`'s; these tests pin the rule
with a planner made slow on purpose, so they need no burst and assert no speed: the slow part is 1.5 s, a
scheduling delay would have to exceed the 0.7 s margin to fail them, and none of the old behaviour fits.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from support import dechunk

from streamlab.core import shapes
from streamlab.core.standin.actions import Decision, Stream
from streamlab.core.standin.plan import plan
from streamlab.core.standin.request import Request, RequestHead
from streamlab.core.standin.room import Room
from streamlab.core.standin.script import Episode, Send, Wait
from streamlab.net.standin.player import Client, Parkable, Parked, Player, Playing
from streamlab.net.standin.records import OpenRecord, RecordBook
from streamlab.net.standin.wire import Connection, Limits, PageHandler, stamp_arrivals

pytestmark = [pytest.mark.usefixtures("no_leaked_threads"), pytest.mark.net]

FRAMES = shapes.chat_text_stream(["Hel", "lo"], model="m", include_usage=False)
SLOW = 1.5  # seconds the planner takes (in a burst: the other connections' work under the GIL)
FIRST = 2.0  # the scripted wait before the first chunk
GAP = 0.5  # and between the two chunks after it
ASK = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
REQUEST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (
    len(ASK),
    ASK,
)


class SlowHost:
    """A server's side for one `Connection`, with the real planner and records, whose planning takes SLOW s."""

    def __init__(self) -> None:
        self.limits = Limits()
        self.book = RecordBook()
        self.stopping = threading.Event()
        self.room = Room({"m": Episode([Wait(FIRST), Send(FRAMES[0]), Wait(GAP), *map(Send, FRAMES[1:])])})
        self.signal = socket.socketpair()
        self.player = Player(
            book=self.book, stopping=self.stopping, wakeup=self.signal[0], cancelled=self.cancelled, send_timeout=5
        ).start()

    @property
    def wakeup(self) -> socket.socket:
        return self.signal[0]

    def decide(self, request: Request) -> Decision:
        time.sleep(SLOW)
        return plan(self.room, request)

    def cancelled(self, stream: Stream) -> bool:
        return False

    def page(self, head: RequestHead) -> PageHandler | None:
        return None

    def play(self, client: Client, stream: Stream, rec: OpenRecord, *, since: float, read_cap: int) -> Playing:
        return self.player.play(client, stream, rec, since=since, read_cap=read_cap)

    def park(self, client: Parkable, *, idle: float, read_cap: int) -> Parked:
        return self.player.park(client, idle=idle, read_cap=read_cap)


def serve_one(conn: socket.socket, host: SlowHost) -> None:
    """What the stand-in's handler thread does with an accepted connection: serve it, then close it."""
    with conn:
        Connection(conn, host).serve()


@pytest.mark.parametrize("stamped", [True, False], ids=["kernel-stamp", "read-time"])
def test_the_first_pause_counts_from_the_request_s_arrival(stamped: bool) -> None:
    host = SlowHost()
    try:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            if stamped and not stamp_arrivals(listener):
                pytest.skip("this platform does not stamp arrivals (the read-time case covers it)")
            with socket.create_connection(listener.getsockname(), timeout=30) as client:
                server = threading.Thread(target=serve_one, args=(listener.accept()[0], host))
                server.start()
                sent = time.perf_counter()
                client.sendall(REQUEST)  # no shutdown: a FIN is a departure at the stand-in (test_standin_fin.py)
                reply = bytearray()
                while data := client.recv(65536):
                    reply += data
            server.join(timeout=30)
    finally:
        host.player.close()
        for end in host.signal:
            end.close()
    chunks, terminated = dechunk(bytes(reply).partition(b"\r\n\r\n")[2])
    assert chunks == FRAMES and terminated
    (rec,) = host.book.snapshots()
    first, second = rec.write_times[0], rec.write_times[1]
    assert first >= sent + FIRST - 0.001  # never early (but for the µs of moving a kernel stamp onto perf_counter),
    assert first < sent + FIRST + SLOW - 0.7  # and the slow planner was inside the wait, not added to it
    assert second >= first + GAP  # a later pause counts from the write before it
