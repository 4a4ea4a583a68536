"""A hostile room, third pass (issue 34, items 3 and 4): the servers' consoles, signals and pipes, each test a
reproduction first.

N6: an unread stderr that asyncio's warnings fill never freezes a relay's or a gateway's loop. N17: `streamlab
chaos | head -n 1` keeps proxying after its reader left. N22: SIGHUP ends every command-line server as SIGTERM
does, with its final lines. Every server binds 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from streamlab.core import shapes
from streamlab.core.standin.script import Episode, Send
from streamlab.net.standin.server import StandIn
from tests.support import standin_base, until

pytestmark = [pytest.mark.net]

CHAT = shapes.chat_text_stream(["Hel", "lo"], model="m")
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def cli(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "streamlab", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONIOENCODING="utf-8"),
    )


def finish(proc: subprocess.Popen, sig: int) -> tuple[str, str]:
    try:
        proc.send_signal(sig)
        return proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def cli_servers(upstream: str) -> dict[str, list[str]]:
    return {
        "relay": ["relay", "--upstream", upstream, "--port", "0"],
        "gateway": ["relay", "--upstream", upstream, "--upstream", upstream, "--port", "0"],
        "chaos": ["chaos", "--upstream", upstream.split("//")[1].split("/")[0], "--port", "0"],
        "standin": ["standin", "--scenario", "background", "--port", "0", "--quiet"],
    }


def base_of(kind: str, first: str) -> str:
    """The /v1 URL to send a request to, from the first line a command-line server printed."""
    if kind == "chaos":
        return f"http://127.0.0.1:{int(first.split(' -> ')[0].rsplit(':', 1)[1])}/v1"
    if kind == "standin":
        return first
    return first.strip()


# -- N22: SIGHUP ends every server as SIGTERM does ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["relay", "gateway", "chaos", "standin"])
def test_sighup_ends_every_cli_server_with_its_final_lines(kind, no_leaked_threads):
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream:
        proc = cli(*cli_servers(upstream.base_url)[kind])
        assert proc.stdout is not None
        first = standin_base(proc) if kind == "standin" else proc.stdout.readline()
        if kind != "standin":
            with httpx.Client(timeout=20) as client:
                assert client.post(base_of(kind, first) + "/chat/completions", json=ASK).status_code == 200
        out, err = finish(proc, signal.SIGHUP)
    assert proc.returncode == 0, (proc.returncode, err)  # it had been -1: killed by the signal, no final line
    if kind == "chaos":
        assert "stopped after 1 connection" in out, out
    if kind == "standin":
        assert "stopped after 0 request(s)" in out, out


# -- N17: `streamlab chaos ... | head -n 1` ---------------------------------------------------------------------------


def test_chaos_keeps_proxying_after_the_reader_of_its_stdout_has_gone(no_leaked_threads):
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream:
        read_end, write_end = os.pipe()
        proc = cli(*cli_servers(upstream.base_url)["chaos"], stdout=write_end)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            first = reader.readline().decode()  # what `head -n 1` reads before it exits
        base = base_of("chaos", first)
        with httpx.Client(timeout=20) as client:
            for _ in range(3):  # each finished connection prints a line into the closed pipe
                assert client.post(base + "/chat/completions", json=ASK).status_code == 200
                time.sleep(0.5)  # the proxy reports a closed connection within 0.2 s
                assert proc.poll() is None, proc.returncode  # it had died of the broken pipe (exit 141)
        out, err = finish(proc, signal.SIGTERM)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err


# -- N6: an unread stderr never freezes a relay's or a gateway's loop ----------------------------------------------

FLOOD = """
import asyncio, gc, logging, sys, threading, time
from pathlib import Path
from streamlab.tools.cli.main import main

def flood():  # once the server's loop runs, it logs as asyncio does when clients leave fast streams
    while not (loops := [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o.is_running()]):
        time.sleep(0.05)
    log = logging.getLogger("asyncio")
    def burst():
        for _ in range(20_000):
            log.warning("socket.send() raised exception.")
    for loop in loops:
        loop.call_soon_threadsafe(burst)
    Path(sys.argv[1]).write_text("flooded")

threading.Thread(target=flood, daemon=True).start()
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_an_unread_stderr_full_of_asyncio_warnings_never_freezes_the_server(kind, tmp_path: Path, no_leaked_threads):
    marker = tmp_path / "flooded"
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream:
        proc = subprocess.Popen(
            [sys.executable, "-c", FLOOD, str(marker), *cli_servers(upstream.base_url)[kind]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,  # never read until the end: 64 KiB fill it
        )
        try:
            assert proc.stdout is not None
            ready = selectors.DefaultSelector()
            ready.register(proc.stdout, selectors.EVENT_READ)
            assert ready.select(timeout=60), "no URL: the flood froze the loop while it started"
            base = proc.stdout.readline().decode().strip()
            until(marker.exists, "the flood to be scheduled on the server's loop")
            with httpx.Client(timeout=20) as client:  # it had timed out: the loop was stuck writing to stderr
                assert client.post(base + "/chat/completions", json=ASK).status_code == 200
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)  # SIGTERM had been ignored too (stderr still unread here)
        finally:
            if proc.poll() is None:
                proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert b"Traceback" not in err, err[-2000:]  # what did not fit was dropped (and counted, if there was time)


# -- N13: `streamlab check` grades in time linear in the events ------------------------------------------------------


class CountedReads(tuple):
    """A probe's arrivals that count how many of their reads the grader looks at."""

    looked = 0

    def __iter__(self):
        for item in tuple.__iter__(self):
            CountedReads.looked += 1
            yield item

    def __getitem__(self, index):
        CountedReads.looked += 1
        return tuple.__getitem__(self, index)


def test_timing_facts_look_at_each_read_a_bounded_number_of_times_per_event():
    from streamlab.core.conformance.checks import ProbeResult, probes_for
    from streamlab.core.conformance.grade import timing_facts

    pieces = ["x"] * 3000
    body = b"".join(shapes.chat_text_stream(pieces, model="m"))
    ends = [i + 2 for i in range(len(body) - 1) if body[i : i + 2] == b"\n\n"]  # one read per event
    arrivals = CountedReads((end, n * 0.001) for n, end in enumerate(ends))
    probe = next(p for p in probes_for("chat", "m") if p.name == "chat.plain")
    result = ProbeResult(probe, 200, (("content-type", "text/event-stream"),), body, arrivals, 0.01)
    CountedReads.looked = 0
    (fact,) = timing_facts([result])
    assert fact.events == len(ends) and fact.total == arrivals[-1][1] and fact.max_gap == pytest.approx(0.001)
    assert CountedReads.looked < 40 * len(ends), CountedReads.looked  # it had been every read per event: n²/2


# -- N9: `check-relay` keeps a bounded tail of what a relay prints ---------------------------------------------------

LOUD_RELAY = """
import json, pathlib, socket, sys, time
server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
out = sys.stdout
for _ in range(100_000):
    out.write("x" * 1023 + "\\n")  # 100 MB of lines that are not summaries
out.write("{" + "y" * 5_000_000 + "\\n")  # and one 5 MB line that only looks like one
for n in range(3):
    out.write(json.dumps({"model": "m", "n": n}) + "\\n")
out.flush()
pathlib.Path(sys.argv[2]).write_text("printed")
time.sleep(60)
"""


def test_check_relay_keeps_a_bounded_tail_of_what_a_relay_prints(tmp_path: Path):
    import tracemalloc

    from streamlab.net.relaycheck.run import relay_command

    script, marker = tmp_path / "loud.py", tmp_path / "printed"
    script.write_text(LOUD_RELAY)
    factory = relay_command(f"{sys.executable} {script} {{port}} {marker} {{upstream}}", keepalive=1, read_timeout=2)
    tracemalloc.start()
    try:
        with factory("http://127.0.0.1:9/v1") as relay:
            until(marker.exists, "the loud relay to print everything")
            until(lambda: len(relay.read_summaries()) == 3, "the reader to reach the summaries")
            assert [s["n"] for s in relay.read_summaries()] == [0, 1, 2]
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024, peak  # every line had been kept: 4.1 GB in 24 s against a real loud relay


def test_a_summaries_file_is_read_as_a_bounded_tail_too(tmp_path: Path):
    from streamlab.net.relaycheck.run import MAX_LINE_CHARS, summaries_from_file

    path = tmp_path / "summaries.jsonl"
    path.write_text('{"model": "before"}\n')
    read = summaries_from_file(path)
    with path.open("a") as f:
        f.write("{" + "z" * (MAX_LINE_CHARS * 5) + "\n" + '{"model": "m"}\n' + '{"model": "half')
    assert read() == [{"model": "m"}]  # the old line skipped, the long one let go, the half line waits
    with path.open("a") as f:
        f.write('"}\n')
    assert read() == [{"model": "m"}, {"model": "half"}]


# -- N10, N15, N16, N18: a capture folder from anyone, replayed ------------------------------------------------------


def capture_files(folder: Path, name: str, *, status=200, content_type="text/event-stream", at=0.01, index=None):
    """Write one capture, NAME.sse and NAME.json, in the record format `streamlab.net.capture` writes."""
    folder.mkdir(parents=True, exist_ok=True)
    body = b"".join(CHAT)
    record = {
        "request": {"body": {"model": "m"}},
        "reads": [{"at": at, "bytes": len(body)}],
        "response": {"status": status, "headers": [["content-type", content_type]], "headers_at": 0.005},
    }
    (folder / f"{name}.sse").write_bytes(body)
    (folder / f"{name}.json").write_text(json.dumps(record))  # json writes inf and nan as Infinity and NaN
    if index is not None:
        (folder / "index.json").write_text(json.dumps({"captures": [{"name": n} for n in index]}))


@pytest.mark.parametrize(
    "where", ["name", "content_type"], ids=["CR LF in a capture's name", "CR LF in its Content-Type"]
)
def test_replay_refuses_a_capture_that_would_inject_a_response_header(where, tmp_path: Path):
    from streamlab.core.capture import load_captures

    evil = "x\r\nSet-Cookie: session=stolen"
    if where == "name":
        capture_files(tmp_path, evil)
    else:
        capture_files(tmp_path, "chat", content_type="text/event-stream" + evil[1:], status=500)
    with pytest.raises(ValueError, match="name|headers"):  # it had been sent as a header of its own
        load_captures(tmp_path)


def test_replay_refuses_a_capture_written_by_hand_with_a_header_to_inject():
    from streamlab.core.capture import Capture
    from streamlab.core.standin.replay import episode_from_capture

    record = {
        "request": {},
        "reads": [],
        "response": {"status": 500, "headers": [["content-type", "text/plain\r\nX-Injected: 1"]]},
    }
    with pytest.raises(ValueError, match="headers"):
        episode_from_capture(Capture("chat", b"oops", record))


@pytest.mark.parametrize(
    "change",
    [{"status": 101}, {"status": 100}, {"status": 0}, {"status": 1000}, {"at": float("inf")}, {"at": float("nan")}]
    + [{"at": -1.0}, {"at": 1e9}],
    ids=["101", "100", "0", "1000", "inf pause", "NaN pause", "negative pause", "a pause of 30 years"],
)
def test_replay_refuses_odd_statuses_and_pauses(change, tmp_path: Path):
    from streamlab.core.capture import load_captures

    capture_files(tmp_path, "chat", **change)
    with pytest.raises(ValueError, match="status|seconds|between"):  # it had written a second response in a 200
        load_captures(tmp_path)


def test_replay_stays_inside_its_capture_folder(tmp_path: Path):
    from streamlab.core.capture import load_capture, load_captures

    capture_files(tmp_path / "secret", "private")
    capture_files(tmp_path / "room", "chat", index=["chat", "../secret/private"])
    with pytest.raises(ValueError, match="plain name"):  # `..` in index.json had read a capture outside
        load_captures(tmp_path / "room")
    (tmp_path / "room" / "index.json").unlink()
    (tmp_path / "room" / "chat.sse").unlink()
    (tmp_path / "room" / "chat.sse").symlink_to(tmp_path / "secret" / "private.sse")
    with pytest.raises(ValueError, match="out of the capture folder"):
        load_capture("chat", tmp_path / "room")
    (tmp_path / "room" / "chat.sse").unlink()
    (tmp_path / "room" / "chat.sse").symlink_to("/dev/zero")  # it had read without end
    with pytest.raises(ValueError, match="out of the capture folder|not a regular file"):
        load_capture("chat", tmp_path / "room")


class CountedList(list):
    """A record's reads that count how often they are walked."""

    walks = 0

    def __iter__(self):
        CountedList.walks += 1
        return list.__iter__(self)


def test_a_capture_with_many_reads_is_replayed_in_linear_time():
    from streamlab.core.capture import Capture
    from streamlab.core.standin.replay import episode_from_capture

    body = b"".join(CHAT) * 200
    reads = CountedList({"at": 0.001 * (n + 1), "bytes": 1} for n in range(4000))
    record = {"request": {}, "reads": reads, "response": {"status": 200, "headers": [["content-type", "x/y"]]}}
    CountedList.walks = 0
    episode = episode_from_capture(Capture("many", body, record))
    assert len(episode.steps) == 2 * 4000
    assert CountedList.walks < 10, CountedList.walks  # every read had rebuilt them all: 8.8-34 s for 4,000


# -- N7 (item 3): `join_room` against a hostile room; issue 36: its failures said once --------------------------------


class HostileRoom:
    """A room on 127.0.0.1 that answers a verdict's POST with `reply(conn)` (a subclass's), one connection at a
    time, until closed."""

    def __init__(self, reply) -> None:
        from tests.support import LoopbackServer

        class Server(LoopbackServer):
            def handle(self, conn):
                conn.settimeout(5)
                head = b""
                with contextlib.suppress(OSError):
                    while b"\r\n\r\n" not in head:
                        head += conn.recv(65536) or b"\r\n\r\n"
                    with contextlib.suppress(OSError):
                        reply(conn, self.stopping)

        self.server = Server()
        self.url = self.server.base_url.removesuffix("/v1")

    def close(self) -> None:
        self.server.close()


def endless_body(conn, stopping):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
    while not stopping.is_set():  # 6.4 MB a second, for ever
        conn.sendall(chunk)
        time.sleep(0.01)


def gzip_gzip_bomb(conn, stopping):
    import gzip

    body = gzip.compress(gzip.compress(bytes(64 * 1024 * 1024)))  # a few hundred bytes; 64 MiB decoded
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip, gzip\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    stopping.wait(10)


def dripped_headers(conn, stopping):
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    while not stopping.wait(0.2):  # a byte of a header every 0.2 s: each read well within a 1 s timeout
        conn.sendall(b"X")


@pytest.mark.parametrize(
    ("reply", "said"),
    [(endless_body, "longer than"), (gzip_gzip_bomb, "longer than"), (dripped_headers, "within 1 s")],
    ids=["endless body", "gzip, gzip bomb", "dripped headers"],
)
def test_join_room_reads_a_bounded_answer_within_its_whole_deadline(reply, said, monkeypatch, capsys):
    from streamlab.net import progress

    monkeypatch.setenv(progress.ENV, "off")
    room = HostileRoom(reply)
    try:
        link = progress.join_room(room.url, name="ada", timeout=1.0)
        progress.record_verdict("01.1", "passed")
        # a hostile room had grown the kernel to 6.1 GB (endless), 2.1 GB (bomb), or held it 60 s (dripped)
        assert link.flush(20), link
        assert link.failed == 1 and link.sent == 0 and said in (link.last_error or ""), link
    finally:
        progress.leave_room()
        room.close()


def test_a_room_that_cannot_be_reached_is_said_once_in_one_line(monkeypatch, capsys):
    from streamlab.net import progress
    from tests.support import free_port

    monkeypatch.setenv(progress.ENV, "off")
    try:
        link = progress.join_room(f"http://127.0.0.1:{free_port()}", name="ada", timeout=1.0)
        for exercise in ("01.1", "01.2", "01.3"):
            progress.record_verdict(exercise, "passed")
        assert link.flush(20) and link.failed == 3, link
    finally:
        progress.leave_room()
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "not reaching the room" in line]
    assert len(said) == 1 and "127.0.0.1" in said[0], err  # it had failed silently, check cells saying `passed`


# -- N20: the progress store bounds its lock wait and its size, and keeps what it does not understand --------------


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from streamlab.net import progress

    path = tmp_path / ".streamlab" / "progress.json"
    path.parent.mkdir()
    monkeypatch.setenv(progress.ENV, str(path))
    monkeypatch.setattr(progress, "LOCK_WAIT", 0.5, raising=False)
    return path


def test_a_held_lock_costs_a_verdict_and_one_line_never_a_frozen_check_cell(store: Path, capsys):
    import fcntl
    import threading

    from streamlab.net import progress

    done = threading.Event()
    with open(store.with_name(store.name + ".lock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another kernel, stuck while it records
        try:
            recorder = threading.Thread(target=lambda: (progress.record_verdict("01.1", "passed"), done.set()))
            recorder.start()
            assert done.wait(20), "the check cell waited as long as the lock was held"  # 39.9 s had been measured
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
            recorder.join(20)
    assert not store.exists() and "stayed locked" in capsys.readouterr().err


def test_a_newer_streamlabs_file_is_left_as_it_is(store: Path, capsys):
    from streamlab.net import progress

    newer = json.dumps({"format": 2, "exercises": {"01.1": {"verdict": "passed", "at": "2027-01-01T00:00:00Z"}}})
    store.write_text(newer)
    assert progress.record_verdict("01.2", "passed") is False
    assert store.read_text() == newer and not store.with_name("progress.json.corrupt").exists()  # it was moved aside
    assert "newer streamlab" in capsys.readouterr().err


def test_what_this_version_does_not_understand_is_kept(store: Path):
    from streamlab.net import progress

    store.write_text(
        json.dumps(
            {
                "format": 1,
                "theme": "dark",
                "exercises": {"14.1": {"verdict": "passed", "at": "2026-11-29T10:31:07Z", "score": 3}, "x.y": [1]},
            }
        )
    )
    assert progress.record_verdict("01.1", "not yet") and progress.record_verdict("14.1", "not yet")
    doc = json.loads(store.read_text())
    assert doc["theme"] == "dark" and doc["exercises"]["x.y"] == [1]  # both had been dropped
    assert doc["exercises"]["14.1"]["score"] == 3 and doc["exercises"]["14.1"]["verdict"] == "not yet"
    assert list(doc["exercises"]) == ["01.1", "14.1", "x.y"]
    assert set(progress.read_progress()) == {"01.1", "14.1"}


def test_a_progress_file_past_its_bound_is_not_read_whole(store: Path):
    from streamlab.core.progress import MAX_PROGRESS_BYTES
    from streamlab.net import progress

    store.write_text(json.dumps({"format": 1, "exercises": {}, "junk": "j" * (2 * MAX_PROGRESS_BYTES)}))
    assert progress.read_progress() == {}
    assert progress.record_verdict("01.1", "passed")  # it had read and rewritten the whole file on every check
    assert store.with_name("progress.json.corrupt").stat().st_size > 2 * MAX_PROGRESS_BYTES
    assert store.stat().st_size < 1000


# -- N14: Ctrl-C during a re-run of `serve(port=N)` or `serve_chaos` --------------------------------------------------

INTERRUPTED_RERUN = """
import os, signal
from streamlab.core.standin.script import Episode, Send
from streamlab.net.chaos.proxy import ChaosProxy, serve_chaos
from streamlab.net.standin.server import StandIn, serve, stop_serving

script = {"m": Episode([Send(b"data: [DONE]\\\\n\\\\n")])}
ctrl_c = lambda *args: os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, landing while the old server stops

def rerun(start, patch, restore):
    patch()
    try:
        start()
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted")
    restore()
    outcomes = []
    for _ in range(3):
        try:
            start()
            outcomes.append("ok")
        except OSError as exc:
            outcomes.append(type(exc).__name__)
    print(" ".join(outcomes), flush=True)

port = serve(script).port
rerun(lambda: serve(script, port=port), lambda: setattr(StandIn, "_on_stopping", ctrl_c),
      lambda: setattr(StandIn, "_on_stopping", lambda self: None))
stop_serving()

upstream = serve(script)
chaos_port = serve_chaos(ChaosProxy(upstream=("127.0.0.1", upstream.port))).address[1]
start = ChaosProxy.start
def interrupted_start(self):  # Ctrl-C, landing the moment the new proxy listens
    started = start(self)
    ctrl_c()
    return started
rerun(lambda: serve_chaos(ChaosProxy(upstream=("127.0.0.1", upstream.port), port=chaos_port)),
      lambda: setattr(ChaosProxy, "start", interrupted_start), lambda: setattr(ChaosProxy, "start", start))
"""


def test_ctrl_c_during_a_rerun_never_leaves_a_server_holding_the_port():
    proc = subprocess.run([sys.executable, "-c", INTERRUPTED_RERUN], capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    # every later serve(port=N) had failed: the half-stopped server still held the port
    assert proc.stdout.decode().splitlines() == ["interrupted", "ok ok ok", "interrupted", "ok ok ok"], proc.stdout


# -- N19: the library's `StandIn()` keeps the records' budget, whatever JSON it is sent -------------------------------


def held_bytes(value, seen=None) -> int:
    """What a parsed JSON value holds in Python, every container and item counted once."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(held_bytes(k, seen) + held_bytes(v, seen) for k, v in value.items())
    elif isinstance(value, list):
        size += sum(held_bytes(item, seen) for item in value)
    return size


def test_a_library_standin_holds_its_budget_against_bodies_of_empty_json_objects(no_leaked_threads):
    from streamlab.net.standin.records import DEFAULT_MAX_TOTAL_BYTES

    count = (1024 * 1024 - 200) // 3
    body = json.dumps({**ASK, "x": [{}] * count}, separators=(",", ":")).encode()  # under the 1 MiB body limit
    with StandIn({"m": Episode([Send(f) for f in CHAT])}) as server, httpx.Client(timeout=60) as client:
        for _ in range(40):
            assert client.post(server.url("chat/completions"), content=body).status_code == 200
        assert server.wait_idle()
        records = server.records()
    held = sum(len(r.body) + len(r.written) + (held_bytes(r.json) if r.json is not None else 0) for r in records)
    assert held <= DEFAULT_MAX_TOTAL_BYTES, held  # 31 parsed bodies of 25 MB each: 855 MB against 64 MiB
    assert records[-1].json is not None and len(records[-1].body) == len(body)  # the newest is kept whole


def test_check_grades_a_stream_of_tiny_events_in_bounded_memory():
    import tracemalloc

    from streamlab.core.conformance.checks import ProbeResult, probes_for
    from streamlab.core.conformance.grade import MAX_GRADED_BLOCKS, grade, timing_facts

    event = b'data: {"choices":[]}\n\n'  # 24-byte reads, at full speed, until the 4 MiB cap
    count = 6 * MAX_GRADED_BLOCKS
    arrivals = tuple((len(event) * (n + 1), n * 1e-5) for n in range(count))
    probe = next(p for p in probes_for("chat", "m") if p.name == "chat.plain")
    result = ProbeResult(probe, 200, (("content-type", "text/event-stream"),), event * count, arrivals, 0.01)
    tracemalloc.start()
    try:
        findings = grade([result], dialect="chat")
        (fact,) = timing_facts([result])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024, peak  # every block was scanned and parsed: 1.17 GB for a 4 MiB body
    assert fact.events == MAX_GRADED_BLOCKS and findings
    done = next(f for f in findings if f.check == "chat.done")
    assert done.status != "fail", done  # what was never read is the checker's cut, not the server's fault


# -- N12: a script's end is not held by a client ------------------------------------------------------------------

HOLDER = """
import sys
from streamlab import serve
from streamlab.core.standin.scenarios import scenario
server = serve(scenario("stall"), require_input=False)
print(server.base_url, flush=True)
sys.stdin.readline()  # the test says when the script's work is done
"""


def test_a_script_using_serve_ends_promptly_while_a_client_holds_a_stream():
    # The handler threads had been non-daemon: the interpreter joins those before atexit stops the server, so a
    # finished script waited for the client's stream (an hour of keep-alives here) before it could exit.
    script = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        base_url = script.stdout.readline().strip()
        body = {"model": "stall", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        with httpx.Client(timeout=30) as client, client.stream("POST", f"{base_url}/chat/completions", json=body) as r:
            assert r.status_code == 200
            next(r.iter_raw())  # the stream is running, and this client holds it
            script.stdin.close()  # the script's work is done
            assert script.wait(timeout=15) == 0
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
        script.stdout.close()
