"""The chaos proxy, measured on the wire: real sockets on 127.0.0.1, a real stand-in, the real SDK, no mocks.

Timing assertions are lower bounds only (a loaded machine can only make things slower); every wait is on a
state (bytes read, a record's field, a thread's end), never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import openai
import pytest
from support import streamlab_cli

from streamlab.core.chaos import Action, ConnectionEnd, Direction, FaultSpec, Fired
from streamlab.core.errors import ConnectionBroken, FaultSpecError, ReadStalled
from streamlab.core.standin.scenarios import scenario
from streamlab.net.chaos.book import ChaosBook
from streamlab.net.chaos.proxy import ChaosProxy, serve_chaos, stop_chaos
from streamlab.net.client import stream_chat
from streamlab.net.standin.server import StandIn
from streamlab.tools.cli.main import main as cli_main

pytestmark = [pytest.mark.net, pytest.mark.usefixtures("no_leaked_threads")]  # see conftest.py

UP, DOWN = Direction.UP, Direction.DOWN
PAYLOAD = bytes(range(256)) * 20  # 5120 bytes
TEXT = "naïve café: 日本語, emoji 🎉; ".encode() * 16  # about 600 bytes, most characters multi-byte
TIMEOUT = 10.0


# --- a one-purpose TCP server ---------------------------------------------------------------------------------


class Upstream:
    """A TCP server on 127.0.0.1 that runs `handler(conn)` on each of `connections` accepted connections, in
    one thread; `results()` joins it and returns what each handler returned (or the OSError it raised)."""

    def __init__(self, handler: Callable[[socket.socket], object], connections: int = 1) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(TIMEOUT)  # a test that fails before connecting must not hang the suite
        self.address = self.sock.getsockname()
        self._results: list[object] = []
        self._thread = threading.Thread(target=self._serve, args=(handler, connections), name="test-upstream")
        self._thread.start()

    def _serve(self, handler: Callable[[socket.socket], object], connections: int) -> None:
        with self.sock:
            for _ in range(connections):
                try:
                    conn, _ = self.sock.accept()
                except OSError as exc:
                    self._results.append(exc)
                    return
                with conn:
                    conn.settimeout(TIMEOUT)
                    try:
                        self._results.append(handler(conn))
                    except OSError as exc:
                        self._results.append(exc)

    def results(self) -> list[object]:
        self._thread.join(TIMEOUT * 2)
        assert not self._thread.is_alive(), "the upstream handler never finished"
        return self._results


def read_to_end(sock: socket.socket) -> tuple[bytes, str]:
    """Every byte until the peer closes: (bytes, "eof") after a FIN, (bytes, "reset") after a RST."""
    got = bytearray()
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        return bytes(got), "reset"
    return bytes(got), "eof"


def read_exactly(sock: socket.socket, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        assert chunk, f"the connection ended after {len(got)} of {n} bytes"
        got += chunk
    return bytes(got)


def send_then_read(payload: bytes) -> Callable[[socket.socket], object]:
    def handler(conn: socket.socket) -> object:
        conn.sendall(payload)
        return read_to_end(conn)

    return handler


def connect(proxy: ChaosProxy) -> socket.socket:
    sock = socket.create_connection(proxy.address, timeout=TIMEOUT)
    return sock


def only_record(proxy: ChaosProxy):
    assert proxy.wait_until(lambda rs: len(rs) == 1 and rs[0].closed, TIMEOUT), proxy.records()
    return proxy.records()[0]


# --- cut and reset ---------------------------------------------------------------------------------------------


def test_a_cut_down_delivers_exactly_n_bytes_then_a_clean_end_to_both_peers():
    upstream = Upstream(send_then_read(PAYLOAD))
    with ChaosProxy(upstream=upstream.address, cut_after=1234, direction="down") as proxy:
        with connect(proxy) as client:
            assert read_to_end(client) == (PAYLOAD[:1234], "eof")
        rec = only_record(proxy)
    assert upstream.results() == [(b"", "eof")]  # the server got a FIN too
    assert (rec.end, rec.bytes_down, rec.fired) == (ConnectionEnd.CUT, 1234, (Fired(DOWN, Action.CUT, 1234),))


def test_a_cut_up_delivers_exactly_n_bytes_to_the_server():
    upstream = Upstream(read_to_end)
    with ChaosProxy(upstream=upstream.address, cut_after=777, direction="up") as proxy:
        with connect(proxy) as client:
            client.sendall(PAYLOAD)
            assert read_to_end(client) == (b"", "eof")
        rec = only_record(proxy)
    assert upstream.results() == [(PAYLOAD[:777], "eof")]
    assert (rec.end, rec.bytes_up, rec.fired) == (ConnectionEnd.CUT, 777, (Fired(UP, Action.CUT, 777),))


def test_a_reset_down_gives_econnreset_after_exactly_n_bytes():
    upstream = Upstream(send_then_read(PAYLOAD))
    with ChaosProxy(upstream=upstream.address, reset_after=1500) as proxy:
        with connect(proxy) as client:
            assert read_to_end(client) == (PAYLOAD[:1500], "reset")
        rec = only_record(proxy)
    (server_saw,) = upstream.results()
    assert server_saw == (b"", "reset") or isinstance(server_saw, ConnectionResetError)
    assert (rec.end, rec.bytes_down, rec.fired) == (ConnectionEnd.RESET, 1500, (Fired(DOWN, Action.RESET, 1500),))


def test_a_reset_up_gives_the_server_econnreset_after_exactly_n_bytes():
    upstream = Upstream(read_to_end)
    with ChaosProxy(upstream=upstream.address, reset_after=900, direction="up") as proxy:
        with connect(proxy) as client:
            client.sendall(PAYLOAD)
            assert read_to_end(client) == (b"", "reset")
        rec = only_record(proxy)
    assert upstream.results() == [(PAYLOAD[:900], "reset")]
    assert (rec.end, rec.bytes_up) == (ConnectionEnd.RESET, 900)


def test_a_limit_of_zero_acts_before_any_byte():
    upstream = Upstream(send_then_read(PAYLOAD))
    with ChaosProxy(upstream=upstream.address, cut_after=0) as proxy:
        with connect(proxy) as client:
            assert read_to_end(client) == (b"", "eof")
        rec = only_record(proxy)
    upstream.results()
    assert (rec.end, rec.bytes_down, rec.fired) == (ConnectionEnd.CUT, 0, (Fired(DOWN, Action.CUT, 0),))


# --- slicing -------------------------------------------------------------------------------------------------


def sliced_run(seed: int) -> tuple[bytes, int, object]:
    """TEXT through a slicing proxy: (bytes the client read, number of reads, the record)."""

    def handler(conn: socket.socket) -> object:
        conn.sendall(TEXT)
        conn.shutdown(socket.SHUT_WR)
        return read_to_end(conn)

    upstream = Upstream(handler)
    with ChaosProxy(upstream=upstream.address, slice_sizes=(1, 6), slice_delay_ms=1, seed=seed) as proxy:
        with connect(proxy) as client:
            got, reads = bytearray(), 0
            while chunk := client.recv(65536):
                got += chunk
                reads += 1
        rec = only_record(proxy)
    upstream.results()
    return bytes(got), reads, rec


def boundaries(sizes) -> set[int]:
    out, at = set(), 0
    for size in sizes:
        at += size
        out.add(at)
    return out


def test_slicing_delivers_the_same_bytes_in_many_small_writes_cut_where_the_seed_says():
    got, reads, rec = sliced_run(seed=11)
    assert got == TEXT and reads > 1
    assert rec.end is ConnectionEnd.CLOSED and rec.bytes_down == len(TEXT) and rec.fired == ()
    assert all(1 <= size <= 6 for size in rec.writes_down) and sum(rec.writes_down) == len(TEXT)
    plan = FaultSpec(slice_sizes=(1, 6), seed=11).slice_plan(0, DOWN)
    plan.split(len(TEXT))
    assert rec.slices_down == tuple(plan.planned)  # the pure plan, on the wire
    planned_cuts = set(FaultSpec(slice_sizes=(1, 6), seed=11).slice_plan(0, DOWN).offsets(len(TEXT)))
    assert planned_cuts <= boundaries(rec.writes_down)  # an arrival boundary can only add a cut
    assert any(TEXT[cut] & 0xC0 == 0x80 for cut in planned_cuts)  # some writes end inside a UTF-8 character


def test_the_same_seed_gives_the_same_slices_and_another_seed_other_ones():
    _, _, first = sliced_run(seed=5)
    _, _, again = sliced_run(seed=5)
    _, _, other = sliced_run(seed=6)
    assert first.slices_down == again.slices_down
    assert first.slices_down != other.slices_down


def test_each_connection_has_its_own_counter_and_its_own_seeded_plan():
    upstream = Upstream(send_then_read(PAYLOAD), connections=2)
    with ChaosProxy(upstream=upstream.address, cut_after=300, slice_sizes=(1, 9), seed=3) as proxy:
        for _ in range(2):
            with connect(proxy) as client:
                assert read_to_end(client) == (PAYLOAD[:300], "eof")
            assert proxy.wait_until(lambda rs: rs[-1].closed, TIMEOUT)
        first, second = proxy.records()
    upstream.results()
    spec = FaultSpec(cut_after=300, slice_sizes=(1, 9), seed=3)
    for number, rec in enumerate((first, second)):
        assert rec.number == number and rec.bytes_down == 300 and rec.end is ConnectionEnd.CUT
        plan = spec.slice_plan(number, DOWN)
        plan.split(300)
        assert rec.slices_down == tuple(plan.planned)
    assert first.slices_down != second.slices_down


def test_slicing_both_directions_through_an_echo_server():
    def echo(conn: socket.socket) -> object:
        while chunk := conn.recv(65536):
            conn.sendall(chunk)
        return "echoed"

    upstream = Upstream(echo)
    with ChaosProxy(upstream=upstream.address, direction="both", slice_sizes=(1, 4), seed=2) as proxy:
        with connect(proxy) as client:
            client.sendall(TEXT)
            client.shutdown(socket.SHUT_WR)  # the end of the request is passed on, after every byte
            assert read_to_end(client) == (TEXT, "eof")
        rec = only_record(proxy)
    assert upstream.results() == ["echoed"]
    assert rec.end is ConnectionEnd.CLOSED and rec.bytes_up == rec.bytes_down == len(TEXT)
    assert max(rec.writes_up) <= 4 and max(rec.writes_down) <= 4
    assert rec.client_closed and rec.server_closed


# --- time: latency and bandwidth (lower bounds only) ----------------------------------------------------------


def test_latency_down_delays_the_first_byte_by_at_least_the_latency():
    upstream = Upstream(send_then_read(b"ping"))
    with ChaosProxy(upstream=upstream.address, latency_ms=200) as proxy:
        started = time.monotonic()
        with connect(proxy) as client:
            assert client.recv(4) == b"ping"
            assert time.monotonic() - started >= 0.2
    upstream.results()


def test_latency_up_delays_what_the_server_receives():
    arrived: list[float] = []

    def handler(conn: socket.socket) -> object:
        data = conn.recv(4)
        arrived.append(time.monotonic())
        return data

    upstream = Upstream(handler)
    with ChaosProxy(upstream=upstream.address, latency_ms=150, direction="up") as proxy:
        with connect(proxy) as client:
            sent = time.monotonic()
            client.sendall(b"pong")
            assert upstream.results() == [b"pong"]
    assert arrived[0] - sent >= 0.15


def test_bandwidth_paces_the_bytes():
    upstream = Upstream(send_then_read(PAYLOAD[:3000]))
    with ChaosProxy(upstream=upstream.address, bandwidth=10_000) as proxy:  # 1000-byte writes, 0.1 s apart
        started = time.monotonic()
        with connect(proxy) as client:
            assert read_exactly(client, 3000) == PAYLOAD[:3000]
            assert time.monotonic() - started >= 0.2  # three writes, two gaps
        rec = only_record(proxy)
    upstream.results()
    assert rec.writes_down == (1000, 1000, 1000)


# --- stall ---------------------------------------------------------------------------------------------------------


def test_a_stall_passes_n_bytes_then_silence_while_the_connection_stays_open_until_the_proxy_stops():
    def handler(conn: socket.socket) -> object:
        conn.sendall(PAYLOAD)
        conn.shutdown(socket.SHUT_WR)  # the server is done; the stall must not pass even its end on
        return read_to_end(conn)

    upstream = Upstream(handler)
    proxy = ChaosProxy(upstream=upstream.address, stall_after=1000).start()
    try:
        with connect(proxy) as client:
            assert read_exactly(client, 1000) == PAYLOAD[:1000]
            rest = len(PAYLOAD) - 1000
            assert proxy.wait_until(
                lambda rs: rs[0].fired and rs[0].dropped_down == rest and rs[0].server_closed, TIMEOUT
            )
            client.setblocking(False)
            with pytest.raises(BlockingIOError):  # open (not EOF, not reset) and silent: nothing more can come
                client.recv(1)
            (rec,) = proxy.records()
            assert rec.end is ConnectionEnd.OPEN and rec.fired == (Fired(DOWN, Action.STALL, 1000),)
            proxy.stop()
            client.setblocking(True)
            assert read_to_end(client)[0] == b""
    finally:
        proxy.stop()
    assert proxy.records()[0].end is ConnectionEnd.STOPPED
    upstream.results()


def test_a_stall_down_ends_when_the_client_gives_up():
    upstream = Upstream(send_then_read(PAYLOAD))
    with ChaosProxy(upstream=upstream.address, stall_after=500) as proxy:
        with connect(proxy) as client:
            assert read_exactly(client, 500) == PAYLOAD[:500]
        rec = only_record(proxy)
    (server_saw,) = upstream.results()  # the server's connection ended too (closed, or reset if it had unread bytes)
    assert server_saw in ((b"", "eof"), (b"", "reset")) or isinstance(server_saw, ConnectionResetError)
    assert rec.end is ConnectionEnd.CLIENT_GONE and rec.bytes_down == 500 and rec.client_closed


def test_a_stall_up_ends_when_the_server_gives_up():
    def handler(conn: socket.socket) -> object:
        return read_exactly(conn, 1000)  # then the server gives up and closes

    upstream = Upstream(handler)
    with ChaosProxy(upstream=upstream.address, stall_after=1000, direction="up") as proxy:
        with connect(proxy) as client:
            client.sendall(PAYLOAD)
            assert read_to_end(client)[0] == b""
        rec = only_record(proxy)
    assert upstream.results() == [PAYLOAD[:1000]]
    assert rec.end is ConnectionEnd.SERVER_GONE and rec.bytes_up == 1000 and rec.server_closed


def test_both_directions_count_their_own_bytes():
    def handler(conn: socket.socket) -> object:
        conn.sendall(PAYLOAD[:200])
        return read_to_end(conn)

    upstream = Upstream(handler)
    with ChaosProxy(upstream=upstream.address, direction="both", cut_after=300) as proxy:
        with connect(proxy) as client:
            assert read_exactly(client, 200) == PAYLOAD[:200]  # down stays under its limit
            client.sendall(PAYLOAD)  # up reaches its own
            assert read_to_end(client) == (b"", "eof")
        rec = only_record(proxy)
    assert upstream.results() == [(PAYLOAD[:300], "eof")]
    assert (rec.bytes_up, rec.bytes_down, rec.fired) == (300, 200, (Fired(UP, Action.CUT, 300),))


# --- lifecycle --------------------------------------------------------------------------------------------------


def test_an_unreachable_upstream_closes_the_client_and_says_so():
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        port = placeholder.getsockname()[1]  # free once closed: nobody listens there
    with ChaosProxy(upstream=f"127.0.0.1:{port}") as proxy:
        with connect(proxy) as client:
            assert read_to_end(client)[0] == b""
        rec = only_record(proxy)
    assert rec.end is ConnectionEnd.CONNECT_ERROR


def test_stop_closes_open_connections_and_is_idempotent():
    upstream = Upstream(read_to_end)
    proxy = ChaosProxy(upstream=upstream.address)
    with pytest.raises(RuntimeError, match="not running"):
        proxy.address  # noqa: B018
    assert proxy.start() is proxy.start()  # starting twice is one proxy
    with connect(proxy) as client:
        client.sendall(b"hello")
        assert proxy.wait_until(lambda rs: rs and rs[0].bytes_up == 5, TIMEOUT)
        proxy.stop()
        proxy.stop()
        assert read_to_end(client)[0] == b""
    assert upstream.results() == [(b"hello", "eof")]
    assert proxy.records()[0].end is ConnectionEnd.STOPPED and not proxy.running


def test_the_async_variant_runs_in_the_callers_loop():
    upstream = Upstream(send_then_read(PAYLOAD))

    async def main() -> tuple[bytes, object]:
        async with ChaosProxy(upstream=upstream.address, cut_after=100, slice_sizes=(1, 3)) as proxy:
            reader, writer = await asyncio.open_connection(*proxy.address)
            data = await reader.read()  # to EOF
            writer.close()
            await writer.wait_closed()
            while not (proxy.records() and proxy.records()[0].closed):
                await asyncio.sleep(0.01)  # polling a state in the loop: wait_until would block it
        return data, proxy.records()[0]

    data, rec = asyncio.run(main())
    upstream.results()
    assert data == PAYLOAD[:100] and rec.end is ConnectionEnd.CUT


def test_a_port_in_use_raises_in_the_callers_thread_and_leaves_no_thread():
    with ChaosProxy(upstream=("127.0.0.1", 9)) as first:
        second = ChaosProxy(upstream=("127.0.0.1", 9), port=first.port)
        with pytest.raises(OSError):
            second.start()
        assert not second.running


def test_serve_chaos_replaces_the_previous_proxy_so_a_rerun_cell_leaks_nothing():
    first = serve_chaos(ChaosProxy(upstream=("127.0.0.1", 9)))
    second = serve_chaos(ChaosProxy(upstream=("127.0.0.1", 9), cut_after=1))
    try:
        assert not first.running and second.running
    finally:
        stop_chaos()
    assert not second.running
    stop_chaos()  # idempotent


def test_the_book_keeps_the_last_connections_and_keeps_counting():
    book = ChaosBook(max_records=3)
    for _ in range(5):
        book.open(("127.0.0.1", 1), 0.0)
    assert [r.number for r in book.snapshot()] == [2, 3, 4]


def test_bad_options_raise_a_clear_error():
    with pytest.raises(FaultSpecError, match="upstream='nowhere'"):
        ChaosProxy(upstream="nowhere")
    with pytest.raises(FaultSpecError, match="slice_sizes"):
        ChaosProxy(upstream=("127.0.0.1", 9), slice_sizes=(3, 1))
    with pytest.raises(FaultSpecError, match="only one of"):
        ChaosProxy(upstream=("127.0.0.1", 9), cut_after=1, reset_after=2)


def test_url_and_repr_name_the_proxy():
    with ChaosProxy(upstream=("127.0.0.1", 9), cut_after=5, seed=2) as proxy:
        assert proxy.url("/v1") == f"http://127.0.0.1:{proxy.port}/v1"
        assert "-> 127.0.0.1:9 (down: cut after 5 bytes; seed 2)" in repr(proxy)


# --- the stand-in behind the proxy, read by the library's client and by the official SDK -----------------------------


CHAT = {"model": "scheduled", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def standin():
    """A stand-in per test: stopping it joins its handler threads, so none ends during a later test."""
    with StandIn(scenario("ttft")) as server:
        yield server


@pytest.fixture(scope="module")
def direct_text() -> str:
    """The answer read straight from the stand-in, without the proxy."""
    with StandIn(scenario("ttft")) as server, stream_chat(server.base_url, CHAT) as stream:
        return "".join(chunk_text(t.event.data) for t in stream)


def chunk_text(data: str) -> str:
    if data == "[DONE]":
        return ""
    return "".join(c["delta"].get("content") or "" for c in json.loads(data)["choices"])


def upstream_of(server: StandIn) -> tuple[str, int]:
    return ("127.0.0.1", server.port)


def test_stream_chat_through_slicing_reads_the_same_text(standin, direct_text):
    with ChaosProxy(upstream=upstream_of(standin), slice_sizes=(1, 5), seed=1) as proxy:
        with stream_chat(proxy.url("/v1"), CHAT) as stream:
            text = "".join(chunk_text(t.event.data) for t in stream)
        assert stream.end_reason == "complete" and len(stream.chunks) > 1
    assert direct_text and text == direct_text


def test_the_sdk_through_slicing_reads_the_same_text(standin, direct_text):
    with (
        ChaosProxy(upstream=upstream_of(standin), direction="both", slice_sizes=(1, 7), seed=4) as proxy,
        openai.OpenAI(base_url=proxy.url("/v1"), api_key="stand-in", max_retries=0, timeout=TIMEOUT) as client,
    ):
        chunks = client.chat.completions.create(stream=True, **CHAT)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == direct_text


@pytest.mark.parametrize("fault", ["cut_after", "reset_after"])
def test_stream_chat_sees_a_broken_stream_when_the_proxy_cuts_or_resets(standin, fault):
    with ChaosProxy(upstream=upstream_of(standin), **{fault: 1000}) as proxy:
        with stream_chat(proxy.url("/v1"), CHAT) as stream, pytest.raises(ConnectionBroken):
            for _ in stream:
                pass
        assert stream.end_reason == "broken" and stream.events  # some events came, then the break
        assert proxy.wait_until(lambda rs: rs and rs[0].finished, TIMEOUT)
        assert proxy.records()[0].bytes_down == 1000


@pytest.mark.parametrize("fault", ["cut_after", "reset_after"])
def test_the_sdk_raises_instead_of_returning_a_short_answer(standin, fault):
    with (
        ChaosProxy(upstream=upstream_of(standin), **{fault: 1000}) as proxy,
        openai.OpenAI(base_url=proxy.url("/v1"), api_key="stand-in", max_retries=0, timeout=TIMEOUT) as client,
    ):
        stream = client.chat.completions.create(stream=True, **CHAT)
        received = []
        with pytest.raises(openai.APIConnectionError):  # the SDK wraps the broken read
            for chunk in stream:
                received.append(chunk)
    assert received  # it was streaming: the failure came mid-answer, as an exception


def test_stream_chat_sees_a_stall_as_a_read_timeout(standin):
    with ChaosProxy(upstream=upstream_of(standin), stall_after=1000) as proxy:
        with stream_chat(proxy.url("/v1"), CHAT, read_timeout=0.5) as stream, pytest.raises(ReadStalled):
            for _ in stream:
                pass
        assert proxy.records()[0].fired == (Fired(DOWN, Action.STALL, 1000),)


# --- the command line ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_command_line_prints_its_address_proxies_and_stops_on_ctrl_c_or_sigterm(sig):
    upstream = Upstream(send_then_read(PAYLOAD))
    host, port = upstream.address
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlab",
            "chaos",
            "--upstream",
            f"{host}:{port}",
            "--cut-after",
            "10",
            "--seed",
            "7",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stdout.readline()
        match = re.match(
            r"streamlab chaos: 127\.0\.0\.1:(\d+) -> 127\.0\.0\.1:\d+ "
            r"\(down: cut after 10 bytes; seed 7\)",
            first,
        )
        assert match, first
        with socket.create_connection(("127.0.0.1", int(match.group(1))), timeout=TIMEOUT) as client:
            assert read_to_end(client) == (PAYLOAD[:10], "eof")
        upstream.results()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "cut down after 10 bytes" in out and "stopped after 1 connection" in out


def test_sigterm_right_after_the_address_line_still_stops_cleanly():
    """The handler is installed before the address is printed: a script that kills the proxy as soon as it
    has read the address gets the closing report, not Python's default death by signal."""
    with streamlab_cli("chaos", "--upstream", "127.0.0.1:9") as proc:
        assert proc.stdout.readline().startswith("streamlab chaos: 127.0.0.1:")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    assert "stopped after 0 connections" in out


def test_the_command_line_help_documents_every_option(capsys):
    with pytest.raises(SystemExit) as info:
        cli_main(["chaos", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for option in (
        "--upstream",
        "--host",
        "--port",
        "--seed",
        "--direction",
        "--latency",
        "--bandwidth",
        "--slice",
        "--cut-after",
        "--reset-after",
        "--stall-after",
    ):
        assert option in out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--upstream", "nowhere"], "--upstream"),
        (["--upstream", "127.0.0.1:9", "--slice", "5:1"], "--slice"),
        (["--upstream", "127.0.0.1:9", "--cut-after", "-3"], "--cut-after"),
        (["--upstream", "127.0.0.1:9", "--cut-after", "3", "--stall-after", "4"], "only one of"),
    ],
)
def test_the_command_line_refuses_bad_options_naming_them(capsys, args, says):
    with pytest.raises(SystemExit) as info:
        cli_main(["chaos", *args])
    assert info.value.code == 2
    assert says in capsys.readouterr().err
