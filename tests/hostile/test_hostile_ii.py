"""A hostile room, second pass (issue 25): what tests/hostile/test_hostile.py left open, each test a reproduction first.

Learner eviction a flood of keys could force, wrongly typed `tools` in profile mode, deeply nested client
bodies, every line separator `str.splitlines` honours, SIGINT and SIGTERM for every command-line server, and
a client that half-closes its side after the request. Every server binds 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from streamlab.core import shapes
from streamlab.core.standin.actions import Reply, Stream
from streamlab.core.standin.plan import plan
from streamlab.core.standin.profiles import PROFILES
from streamlab.core.standin.request import Request, RequestHead
from streamlab.core.standin.room import DEFAULT_MAX_LEARNERS, Options, Room
from streamlab.core.standin.scenarios import scenario
from streamlab.core.standin.script import Episode, Send
from streamlab.net.gateway.app import Gateway
from streamlab.net.relay.app import Relay
from streamlab.net.standin.server import StandIn

pytestmark = [pytest.mark.net]

CHAT = shapes.chat_text_stream(["Hel", "lo"], model="m")
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def request(path: str, body: object, key: str | None = None) -> Request:
    headers = [("content-type", "application/json")]
    if key is not None:
        headers.append(("authorization", f"Bearer {key}"))
    return Request(RequestHead("POST", path, "HTTP/1.1", tuple(headers)), json.dumps(body).encode())


def read_all(sock: socket.socket) -> bytes:
    out = bytearray()
    while data := sock.recv(65536):
        out += data
    return bytes(out)


def served(kind: str, upstream: str, **options):
    return Relay(upstream, **options) if kind == "relay" else Gateway([upstream], **options)


# -- 12: a flood of new keys made the room forget every learner ------------------------------------------------


def test_no_flood_of_new_keys_makes_the_room_forget_a_learner_who_came_back():
    room = Room(scenario("flaky"))
    ask = {"model": "flaky", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    learners = [f"learner-{i}" for i in range(30)]
    for key in learners:  # a room's learners: the first request gets flaky's 429, the second the answer
        assert plan(room, request("/v1/chat/completions", ask, key)).action.status == 429
        assert isinstance(plan(room, request("/v1/chat/completions", ask, key)).action, Stream)
    refused = []
    for i in range(DEFAULT_MAX_LEARNERS + 1):  # one client, 10,001 new keys, each used twice (it used to work)
        for _ in range(2):
            reply = plan(room, request("/v1/chat/completions", ask, f"flood-{i}")).action
            if isinstance(reply, Reply) and reply.body["error"]["code"] == "room_full":
                refused.append(reply)
    assert all(room.requests_for("flaky", key) == 2 for key in learners)  # nobody forgotten
    assert len(room.learners) == DEFAULT_MAX_LEARNERS and len(refused) == 2 * 31  # the last keys were refused
    error = refused[0].body["error"]
    assert refused[0].status == 429 and error["type"] == "requests" and "room is full" in error["message"]
    assert isinstance(plan(room, request("/v1/chat/completions", ask, "learner-7")).action, Stream)  # still served
    room.reset("flood-0")  # a place freed by the instructor goes to a new key
    assert plan(room, request("/v1/chat/completions", ask, "late")).action.status == 429  # flaky's own 429


def test_a_flood_of_keys_used_once_forgets_only_keys_used_once():
    room = Room(scenario("flaky"), max_learners=50)
    ask = {"model": "flaky", "messages": [{"role": "user", "content": "hi"}]}
    for key in ("ada", "bob"):
        plan(room, request("/v1/chat/completions", ask, key))
        plan(room, request("/v1/chat/completions", ask, key))
    for i in range(5000):
        assert plan(room, request("/v1/chat/completions", ask, f"once-{i}")).action.status == 429  # flaky's
    assert room.requests_for("flaky", "ada") == room.requests_for("flaky", "bob") == 2
    assert len(room.learners) == 50 and "once-4999" in room.learners  # the newest single keys are in


# -- 12: wrongly typed `tools` ended in stand-in 500s in profile mode -----------------------------------------------

WRONG_TOOLS = {
    "a string": ("x", "tools"),
    "a number": (5, "tools"),
    "a boolean": (True, "tools"),
    "an object": ({"type": "function"}, "tools"),
    "numbers": ([1, 2], "tools[0]"),
    "null inside": ([None], "tools[0]"),
    "no type": ([{"function": {"name": "f"}}], "tools[0].type"),
    "a numeric type": ([{"type": 5, "name": "f"}], "tools[0].type"),
    "a string function": ([{"type": "function", "function": "f"}], "tools[0]"),
    "a list function": ([{"type": "function", "function": ["f"]}], "tools[0]"),
    "no name": ([{"type": "function", "function": {}}], "tools[0]"),
    "a numeric name": ([{"type": "function", "function": {"name": 5}, "name": 5}], "tools[0]"),
    "string parameters": (
        [{"type": "function", "function": {"name": "f", "parameters": "x"}, "name": "f", "parameters": "x"}],
        "tools[0]",
    ),
    "list parameters": (
        [{"type": "function", "function": {"name": "f", "parameters": [1]}, "name": "f", "parameters": [1]}],
        "tools[0]",
    ),
    "a numeric description": (
        [{"type": "function", "function": {"name": "f", "description": 5}, "name": "f", "description": 5}],
        "tools[0]",
    ),
    "a second tool wrong": ([{"type": "function", "function": {"name": "f"}, "name": "f"}, 7], "tools[1]"),
}
"""Wrong `tools` values and the start of the field the refusal must name (either dialect)."""


def _refusal_for(profile: str, dialect: str, body: dict) -> tuple[int | str, str]:
    """The status of the profile's reply (or "stream": a profile that refuses inside a 200 stream) and its text."""
    room = Room({}, options=Options(profile=PROFILES[profile]))
    path = "/v1/chat/completions" if dialect == "chat" else "/v1/responses"
    action = plan(room, request(path, body)).action
    if isinstance(action, Reply):
        return action.status, json.dumps(action.body)
    return "stream", b"".join(getattr(a, "data", b"") for a in action.actions).decode()


@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("wrong", sorted(WRONG_TOOLS))
def test_wrongly_typed_tools_get_the_profiles_400_naming_the_field_never_a_500(profile, wrong):
    tools, param = WRONG_TOOLS[wrong]
    for dialect, base in (("chat", {"messages": [{"role": "user", "content": "hi"}]}), ("responses", {"input": "hi"})):
        for stream in (True, False):
            body = {"model": "any", **base, "stream": stream, "tools": tools, "tool_choice": "required"}
            status, text = _refusal_for(profile, dialect, body)
            # the same refusal as any other wrongly typed field gets from this profile (its own shape and status)
            wrong_field = {"messages": "x"} if dialect == "chat" else {"input": 5}
            like = _refusal_for(profile, dialect, {"model": "any", "stream": stream, **wrong_field})
            assert "stand-in internal error" not in text, (dialect, stream, text)
            assert status == like[0], (dialect, stream, text)
            if status in (400, "stream") and "Invalid type for '" in like[1]:  # a profile that words it as the API
                assert f"'{param}" in text, (dialect, stream, text)


def test_a_wrong_tools_gets_an_openai_shaped_400_on_the_wire_in_a_lenient_room_too():
    wrong = [{"type": "function", "function": {"name": "f", "parameters": "x"}}]
    with StandIn({}, profile="openai") as strict, StandIn({}, profile="openai", require_input=False) as lenient:
        with httpx.Client(timeout=20) as client:
            refused = client.post(strict.url("chat/completions"), json={**ASK, "tools": wrong})
            answered = client.post(lenient.url("chat/completions"), json={**ASK, "tools": wrong})
            for tools in ("x", 5, [1], [{"type": "function", "function": "f"}]):  # lenient: checked by no one
                assert client.post(lenient.url("chat/completions"), json={**ASK, "tools": tools}).status_code == 200
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "tools[0].function.parameters"
    assert answered.status_code == 200 and b'"name":"f"' in answered.content.replace(b" ", b"")


# -- 11: a deeply nested client body -----------------------------------------------------------------------------

DEEP_BODIES = {
    "open brackets": b"[" * 100_000,
    "nested objects": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "nested messages": b'{"model":"m","stream":true,"messages":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
}


def post_raw(port: int, body: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        return read_all(sock)


@pytest.mark.parametrize("kind", ["standin", "relay", "gateway"])
def test_a_deeply_nested_body_gets_a_json_400_and_its_line(kind, no_leaked_threads):
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream:
        server = upstream if kind == "standin" else served(kind, upstream.base_url).start()
        try:
            replies = [post_raw(server.port, body) for body in DEEP_BODIES.values()]
            if kind == "standin":
                assert upstream.wait_idle()
                lines = [r.status for r in upstream.records()]
            else:
                assert server.wait_for_summaries(3) if kind == "relay" else server.wait_for_logs(3)
                lines = [s["status"] for s in server.summaries]
        finally:
            if server is not upstream:
                server.stop()
    for reply in replies:
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ") and b"application/json" in head.lower(), reply[:300]
        assert "nested too deeply" in json.loads(body)["error"]["message"]
    assert lines == [400, 400, 400]  # a record, a summary line, a log line each (the relay had written none)


# -- 9: every line separator str.splitlines honours, in a model name, a path and a key ---------------------------

SEPARATORS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""What `str.splitlines` splits at (besides CRLF): each must be escaped in every line a server writes."""
HOSTILE = "m" + "".join(f"{ch}x" for ch in SEPARATORS)


def start_cli(*args: str) -> tuple[subprocess.Popen, list[str]]:
    """`streamlab ARGS` with UTF-8 stdout; the process and the lines it printed before serving."""
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlab", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as under nohup or `&`
    )
    assert proc.stdout is not None
    return proc, []


def hostile_requests(client: httpx.Client, base: str) -> int:
    """Send the hostile model name, path and key; how many requests were sent. (The relay and the gateway refuse
    the response id themselves, with a 404 and no line: only the stand-in's console shows that one.)"""
    quoted = "".join(f"%{b:02X}" for b in HOSTILE.encode())
    sent = 0
    for path, model, key in (
        ("/chat/completions", HOSTILE, "ada"),
        (f"/responses/resp_{quoted}?stream=true", None, "ada"),
        ("/chat/completions?q=" + quoted, "m", "ada"),
        ("/chat/completions", "m", "k\x85\u2028\u2029"),  # HTTP allows no ASCII control in a header value
    ):
        headers = {"Authorization": f"Bearer {key}".encode()}
        if model is None:
            client.get(base + path, headers=headers)
        else:
            client.post(base + path, content=json.dumps({**ASK, "model": model}), headers=headers)
        sent += 1
    return sent


def stop(proc: subprocess.Popen, sig: int = signal.SIGINT) -> tuple[bytes, bytes]:
    try:
        proc.send_signal(sig)
        return proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def assert_one_line_each(out: bytes, expected: int, lines: list[str]) -> None:
    text = out.decode("utf-8")
    for ch in SEPARATORS[2:]:
        assert ch not in text, (repr(ch), text)
    assert len(lines) == expected and all(not line.endswith("\r") for line in lines), lines


def test_no_separator_splits_or_forges_a_line_of_the_standin_console():
    proc, _ = start_cli("standin", "--scenario", "background", "--port", "0")
    assert proc.stdout is not None
    banner = []
    for raw in proc.stdout:
        banner.append(raw.decode())
        if banner[-1].startswith("Ctrl-C"):
            break
    base = next(line for line in banner if " at http://" in line).split(" at ")[1].split()[0]
    with httpx.Client(timeout=30) as client:
        sent = hostile_requests(client, base)
    out, err = stop(proc)
    assert proc.returncode == 0 and b"Traceback" not in err, err
    requests = [line for line in out.decode("utf-8").splitlines() if line.startswith("  ")]
    assert_one_line_each(out, sent, [line for line in requests if line.lstrip().startswith(("POST", "GET"))])


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_no_separator_splits_a_summary_line_on_a_utf8_stdout(kind, no_leaked_threads):
    script = {"m": Episode([Send(f) for f in CHAT]), HOSTILE: Episode([Send(f) for f in CHAT])}
    with StandIn(script, usage="scripted") as upstream:
        ups = [a for _ in range(1 if kind == "relay" else 2) for a in ("--upstream", upstream.base_url)]
        proc, _ = start_cli("relay", *ups, "--port", "0")
        assert proc.stdout is not None
        base = proc.stdout.readline().decode().strip()
        with httpx.Client(timeout=30) as client:
            sent = hostile_requests(client, base)
        sent -= 1  # the refused response id has no line
        out = b"".join(proc.stdout.readline() for _ in range(sent))  # one line per request, as each finishes
        rest, err = stop(proc)
    assert proc.returncode == 0 and b"Traceback" not in err and rest == b"", (rest, err)
    lines = out.decode("utf-8").splitlines()
    assert_one_line_each(out, sent, lines)
    summaries = [json.loads(line) for line in lines]
    assert summaries[0]["model"] == HOSTILE  # escaped on the line, the same value once read


# -- 12: SIGINT and SIGTERM for every command-line server, even started with SIGINT ignored --------------------


def cli_servers(upstream: str) -> dict[str, list[str]]:
    return {
        "relay": ["relay", "--upstream", upstream, "--port", "0"],
        "gateway": ["relay", "--upstream", upstream, "--upstream", upstream, "--port", "0"],
        "chaos": ["chaos", "--upstream", upstream.split("//")[1].split("/")[0], "--port", "0"],
    }


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("kind", ["relay", "gateway", "chaos"])
def test_every_cli_server_stops_cleanly_on_a_signal_even_with_sigint_ignored(kind, sig, no_leaked_threads):
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream:
        proc, _ = start_cli(*cli_servers(upstream.base_url)[kind])
        assert proc.stdout is not None
        first = proc.stdout.readline().decode()
        if kind == "chaos":  # serving: one request through the proxy first
            port = int(first.split(" -> ")[0].rsplit(":", 1)[1])
            with httpx.Client(timeout=20) as client:
                assert client.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=ASK).status_code == 200
        else:
            with httpx.Client(timeout=20) as client:
                assert client.post(first.strip() + "/chat/completions", json=ASK).status_code == 200
        started = time.monotonic()
        out, err = stop(proc, sig)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, err
    assert time.monotonic() - started < 20


# -- 12: a client that half-closes after its request ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["relay", "gateway"])
@pytest.mark.parametrize(
    "framing",
    [b"HTTP/1.1", b"HTTP/1.1\r\nConnection: close", b"HTTP/1.0"],
    ids=["keep-alive", "connection-close", "http-1.0"],
)
def test_a_client_that_half_closes_after_its_request_gets_the_whole_stream(kind, framing, no_leaked_threads):
    # A request that says the connection closes after it (Connection: close, or HTTP/1.0) leaves h11's client in
    # MUST_CLOSE, not DONE: such a half-close had been taken for a departure, and the client got no byte.
    from streamlab.core.sse import parse
    from streamlab.core.standin.script import Wait

    steps = [Wait(0.2), *(s for f in CHAT for s in (Send(f), Wait(0.05)))]  # still to come when the FIN arrives
    with (
        StandIn({"m": Episode(steps)}, usage="scripted") as upstream,
        served(kind, upstream.base_url) as server,
    ):
        body = json.dumps(ASK).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
            sock.sendall(
                b"POST /v1/chat/completions %s\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (framing, len(body), body)
            )
            sock.shutdown(socket.SHUT_WR)  # "I have said all I will say": not "I have gone"
            reply = read_all(sock)
        assert server.wait_for_summaries(1) if kind == "relay" else server.wait_for_logs(1)
        summary = server.summaries[0]
    head, _, rest = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), reply[:300]
    assert b"[DONE]" in rest and summary["outcome"] == "complete", (reply[-300:], summary)
    events, _ = parse(b"".join(CHAT))
    assert all(e.data.encode() in rest for e in events)


@pytest.mark.parametrize("half", [False, True], ids=["close", "half-close-mid-line"])
@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_a_client_that_closes_during_a_stall_still_closes_the_upstream_at_once(kind, half, no_leaked_threads):
    """The other side of serving half-closes: a FIN during an upstream stall may be a departure. Keep-alives
    are a minute apart here, so only the probe (two keep-alives at the FIN) can tell within the bound. Stalled
    inside a line no keep-alive may be written: the client that half-closed there still gets its stream."""
    from streamlab.core.standin.script import Stall, Wait

    if half:  # the upstream stops inside a line for 0.6 s, then finishes: a half-closed client reads it all
        steps = [Send(CHAT[0]), Send(CHAT[1][:20]), Wait(0.6), Send(CHAT[1][20:]), *(Send(f) for f in CHAT[2:])]
    else:
        steps = [Send(CHAT[0]), Send(CHAT[1]), Stall()]
    with (
        StandIn({"m": Episode(steps)}, usage="scripted") as upstream,
        served(kind, upstream.base_url, keepalive=60.0, read_timeout=30.0) as server,
    ):
        body = json.dumps(ASK).encode()
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=20)
        try:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            got = b""  # until the second event's first 20 bytes came (they start like the first event's)
            while CHAT[0] not in got or CHAT[1][:20] not in got[got.index(CHAT[0]) + len(CHAT[0]) :]:
                got += sock.recv(65536)
            if half:
                sock.shutdown(socket.SHUT_WR)
                got += read_all(sock)
            else:
                left = time.perf_counter()
                sock.close()
        finally:
            sock.close()
        assert upstream.wait_until(lambda rs: bool(rs) and rs[-1].finished, 5.0)
        record = upstream.records("m")[-1]
    if half:
        assert got.count(b"[DONE]") == 1 and record.ending == "complete", (got[-200:], record.ending)
        assert b"keep-alive" not in got  # none could be written inside the line
    else:
        assert record.ending == "client_gone" and record.finished_at is not None
        assert record.finished_at - left < 1.0  # the probe's doing: keep-alives are 60 s apart, the timeout 30 s


@pytest.mark.parametrize("kind", ["relay", "gateway", "chaos"])
def test_a_second_signal_while_stopping_never_ends_in_a_traceback(kind, no_leaked_threads):
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream:
        proc, _ = start_cli(*cli_servers(upstream.base_url)[kind])
        assert proc.stdout is not None
        proc.stdout.readline()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGINT, signal.SIGTERM):  # an impatient Ctrl-C, a kill
            proc.send_signal(sig)
        out, err = stop(proc, signal.SIGINT)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, err


STOP_WHILE_WAITING = """
import os, signal, threading, time
from streamlab.net.console import stop_signals

stop = threading.Event()
restore = stop_signals(stop)
with stop._cond:  # where the main thread is for a moment inside stop.wait(): holding the event's lock
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.2)  # the handler runs here, in this thread
assert stop.wait(10)
restore()
print("stopped")
"""


def test_a_signal_while_the_main_thread_holds_the_stop_events_lock_still_stops_it():
    proc = subprocess.run([sys.executable, "-c", STOP_WHILE_WAITING], capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stdout == b"stopped\n", proc.stderr  # the handler had deadlocked


# -- 4: what the stand-in's records hold, all together -------------------------------------------------------------


def test_the_standins_records_hold_a_bounded_total_whatever_the_models_are_called(no_leaked_threads):
    from streamlab.net.standin.records import DEFAULT_MAX_TOTAL_BYTES

    body = json.dumps({**ASK, "model": "m" * 1_000_000}).encode()  # under the 1 MiB body limit
    with StandIn({"m": Episode([Send(f) for f in CHAT])}) as server, httpx.Client(timeout=60) as client:
        for _ in range(100):
            reply = client.post(server.url("chat/completions"), content=body)
            assert reply.status_code == 404 and len(reply.content) < 2000  # the name is not quoted whole
        assert server.wait_idle()
        records = server.records()
    held = sum(len(r.body) + len(r.written) + (len(body) if r.json is not None else 0) for r in records)
    assert len(records) == 100 and held <= DEFAULT_MAX_TOTAL_BYTES + len(body)  # it had been about 300 MB
    assert all(r.bytes_written > 0 for r in records) and len(records[-1].body) == len(body)  # counts stay exact


# -- 8: a flood past `ulimit -n` -------------------------------------------------------------------------------------

FLOODED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))
from streamlab.net.gateway.app import Gateway
from streamlab.net.relay.app import Relay
kind, upstream = sys.argv[1], sys.argv[2]
server = Relay(upstream) if kind == "relay" else Gateway([upstream])
with server:
    print(server.port, flush=True)
    sys.stdin.readline()
    print(server._server.accept_pauses, flush=True)
"""


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_a_flood_past_the_descriptor_limit_pauses_accepting_without_a_traceback_and_recovers(kind):
    # 160 descriptors: the cap is 48 connections, and refused ones still hold theirs until their close runs, so
    # 400 connections at once run the process out of descriptors. asyncio then stops accepting for a second
    # and recovers, as it should; it had also printed a traceback for every such accept, on the server's stderr.
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream:
        proc = subprocess.Popen(
            [sys.executable, "-c", FLOODED, kind, upstream.base_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdin is not None
            port = int(proc.stdout.readline())
            flood = []
            for _ in range(400):
                sock = socket.socket()
                sock.setblocking(False)
                sock.connect_ex(("127.0.0.1", port))
                flood.append(sock)
            time.sleep(1.5)  # the server accepts, refuses over its cap, runs out, pauses, accepts again
            for sock in flood:
                sock.close()
            deadline = time.monotonic() + 15
            while True:  # served again once the flood's descriptors are back
                try:
                    reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=ASK, timeout=5)
                    if reply.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "never served again after the flood"
                time.sleep(0.2)
            assert b"[DONE]" in reply.content
            proc.stdin.write("\n")
            proc.stdin.flush()
            pauses = int(proc.stdout.readline())
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert "Traceback" not in err and "out of system resource" not in err, err[-2000:]
    assert proc.returncode == 0, err[-2000:]
    assert pauses >= 1  # the flood did run it out of descriptors: the test tested something
