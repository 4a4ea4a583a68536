"""A hostile room against the stand-in, the relay and the gateway (issue 25): each test reproduces one way they failed.

Every server here binds 127.0.0.1. Command-line servers run as subprocesses (what an instructor runs), the
rest in-process. Nothing asserts on speed: the waits are on states, with generous safety nets.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import zlib

import httpx
import pytest
from support import LoopbackServer, until

from streamlab.core import shapes
from streamlab.core.standin.script import Episode, Send
from streamlab.net.gateway.app import Gateway
from streamlab.net.relay.app import Relay
from streamlab.net.standin.server import StandIn

pytestmark = [pytest.mark.net]

CHAT = shapes.chat_text_stream(["Hel", "lo"], model="m")
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
HOSTILE_MODELS = [
    "\ud800",  # a lone surrogate: valid JSON, not encodable at all
    "\u6a21\u578b",  # 模型: fine in UTF-8, not in ASCII
    "a\x1b[2J\x1b]0;pwned\x07b",  # clear screen, window title
    "c\x1b]52;c;cHduZWQ=\x07d",  # OSC 52: write the clipboard
    "e\n  POST /v1/forged model=x status=200",  # a forged line
    "f\u2028g\x85h\u202ei",  # Unicode line breaks, a bidi override
    "\x9b31m",  # an 8-bit CSI
]
"""Model names that used to stop the stand-in or act on the instructor's terminal."""

TERMINAL_BYTES = (b"\x1b", b"\x07", b"\x9b", b"\xc2\x9b", "\u2028".encode(), b"\xc2\x85", "\u202e".encode())


def raw_body(model: str) -> bytes:
    """A Chat request for `model`, as JSON text with the model escaped (so a lone surrogate can be sent)."""
    return json.dumps({**ASK, "model": model}).encode("ascii")


def start_cli(*args: str, encoding: str = "utf-8", **popen: object) -> tuple[subprocess.Popen, str]:
    """Start `streamlab ARGS` with stdout in `encoding`; the process and the base URL it printed."""
    env = dict(os.environ, PYTHONIOENCODING=encoding)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlab", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, **popen
    )
    assert proc.stdout is not None
    lines = []
    for raw in proc.stdout:
        line = raw.decode("ascii", "replace")
        lines.append(line)
        if line.startswith("Ctrl-C"):
            break
    base = next(line for line in lines if " at http://" in line).split(" at ")[1].split()[0]
    return proc, base


def stop_cli(proc: subprocess.Popen, sig: int = signal.SIGINT, timeout: float = 30) -> tuple[bytes, bytes]:
    try:
        proc.send_signal(sig)
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# -- 1 and 9: a request stops the stand-in, or reaches the terminal ------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_no_model_name_stops_the_standin_or_reaches_its_terminal(encoding):
    proc, base = start_cli("standin", "--scenario", "flaky", "--port", "0", encoding=encoding)
    try:
        with httpx.Client(timeout=30) as client:
            for model in HOSTILE_MODELS:
                reply = client.post(
                    base + "/chat/completions",
                    content=raw_body(model),
                    headers={"Content-Type": "application/json", "Authorization": "Bearer k\x1b]0;key\x07"},
                )
                assert reply.status_code == 404
            assert proc.poll() is None, "the stand-in exited"
            assert client.post(base + "/chat/completions", json={**ASK, "model": "flaky"}).status_code == 429
    finally:
        out, err = stop_cli(proc)
    assert proc.returncode == 0, err
    assert not any(byte in out for byte in TERMINAL_BYTES), out
    if encoding == "ascii":
        assert out.isascii()
    lines = out.decode("utf-8").splitlines()
    requests = [line for line in lines if line.startswith("  POST ")]
    assert len(requests) == len(HOSTILE_MODELS) + 1, lines  # one line per request: none forged, none split
    assert "model=\\ud800 " in requests[0]
    assert ("model=\\u6a21\\u578b " if encoding == "ascii" else "model=\u6a21\u578b ") in requests[1]
    assert "stopped after 8 request(s)" in lines[-1]


def test_the_standin_cli_stops_on_sigint_even_when_started_with_it_ignored():
    proc, base = start_cli(
        "standin",
        "--scenario",
        "flaky",
        "--port",
        "0",
        "--quiet",
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    out, err = stop_cli(proc, signal.SIGINT)
    assert proc.returncode == 0, err
    assert b"stopped after 0 request(s)" in out


def test_an_unread_stdout_never_keeps_the_standin_cli_from_serving_or_stopping():
    proc, base = start_cli("standin", "--scenario", "flaky", "--port", "0")
    try:  # nobody reads stdout from here on: the pipe (64 KiB) fills after a few hundred long lines
        with httpx.Client(timeout=30, headers={"Authorization": "Bearer ada"}) as client:
            path = base + "/chat/completions?" + "q" * 190
            for _ in range(600):
                assert client.post(path, json={**ASK, "model": "x" * 80}).status_code == 404
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)  # used to hang for ever: the last prints blocked on the full pipe
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == 0


# -- 4: memory a client chooses, in the stand-in's records ------------------------------------------------------


def test_a_record_keeps_bounded_strings_whatever_the_client_sends(no_leaked_threads):
    key = "k" * 60_000
    head = "".join(f"x-h{i}: v\r\n" for i in range(300))  # hundreds of tiny headers beside a 60 KB key
    with StandIn({"m": Episode([Send(f) for f in CHAT])}) as server:
        body = json.dumps({**ASK, "model": "m" * 200_000}).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(
                f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n{head}"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            while sock.recv(65536):
                pass
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}) as client:
            assert client.post(server.url("chat/completions"), json=ASK).status_code == 200
        assert server.wait_idle()
        first, second = server.records()
        assert len(first.model) < 300 and first.model.startswith("mmm")
        assert len(first.learner) <= 200 and first.learner == second.learner  # one bounded name, the same key
        assert len(first.headers) <= 64 and all(len(v) <= 300 for v in first.headers.values())
        assert [r.index for r in server.records(learner=key)] == [0, 1]
        assert server.requests_for("m", learner=key) == 1


# -- 2: one value breaks the dashboard feed for every viewer ----------------------------------------------------


def read_feed_until(sock: socket.socket, needle: bytes, timeout: float = 20.0) -> bytes:
    """What a dashboard feed sent until `needle` appeared (fails when the feed ends or time runs out)."""
    got = bytearray()
    deadline = time.monotonic() + timeout
    while needle not in got:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        data = sock.recv(65536)
        assert data, f"the feed ended before {needle!r}: {bytes(got)[-300:]!r}"
        got += data
    return bytes(got)


def open_feed(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /dashboard/events HTTP/1.1\r\nHost: x\r\n\r\n")
    return sock


def test_a_hostile_model_name_never_breaks_the_dashboard_feed(no_leaked_threads):
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, dashboard_keepalive=0.5) as server,
        open_feed(server.port) as watching,
    ):
        read_feed_until(watching, b"event: snapshot")
        with httpx.Client() as client:
            for model in HOSTILE_MODELS:
                client.post(
                    server.url("chat/completions"),
                    content=raw_body(model),
                    headers={"Content-Type": "application/json", "Authorization": "Bearer ada"},
                )
            client.post(server.url("chat/completions"), json=ASK, headers={"Authorization": "Bearer bob"})
        seen = read_feed_until(watching, b'"model":"m"')  # bob's row came after every hostile one
        with open_feed(server.port) as fresh:  # a page that connects now gets a snapshot holding those rows
            snapshot = read_feed_until(fresh, b'"requests":8')
        assert b"\\ud800" in seen and b"\\\\x9b31m" in snapshot  # ada's row shows her last model, escaped (N21)
        for feed in (seen, snapshot):
            assert not any(byte in feed for byte in TERMINAL_BYTES)
            frames = [line for line in feed.split(b"\n") if line.startswith(b"data: {")]
            assert frames and all(json.loads(line[6:].decode("utf-8")) for line in frames)


# -- 6 and 9: the relay's and the gateway's summary lines -------------------------------------------------------


def start_relay(upstreams: list[str], encoding: str = "utf-8") -> tuple[subprocess.Popen, str]:
    """`streamlab relay` (the gateway with two upstreams) on a free port; the process and its base URL."""
    args = [a for url in upstreams for a in ("--upstream", url)]
    env = dict(os.environ, PYTHONIOENCODING=encoding)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlab", "relay", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().decode().strip()


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_summary_lines_are_json_that_no_client_can_break_or_use_on_a_terminal(kind, no_leaked_threads):
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream:
        proc, url = start_relay([upstream.base_url] * (1 if kind == "relay" else 2), encoding="ascii")
        try:
            with httpx.Client(timeout=30) as client:
                for model in HOSTILE_MODELS:
                    reply = client.post(
                        url + "/chat/completions", content=raw_body(model), headers={"Content-Type": "application/json"}
                    )
                    assert reply.status_code == 404
                lines = [proc.stdout.readline() for _ in HOSTILE_MODELS]
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
    assert all(line.isascii() and line.endswith(b"\n") for line in lines)
    assert not any(byte in b"".join(lines) for byte in TERMINAL_BYTES)
    assert [json.loads(line)["model"] for line in lines] == HOSTILE_MODELS  # escaped, yet the same value


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_an_unread_stdout_never_freezes_the_relay_or_the_gateway(kind, no_leaked_threads):
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream:
        proc, url = start_relay([upstream.base_url] * (1 if kind == "relay" else 2))
        try:  # nobody reads stdout from here on: the 64 KiB pipe fills after about a hundred long lines
            with httpx.Client(timeout=10) as client:
                for i in range(400):  # the relay used to freeze at request 210, the gateway at 114
                    reply = client.post(url + "/chat/completions", json={**ASK, "model": "m" + "x" * 500})
                    assert reply.status_code == 404, i
                if kind == "gateway":
                    assert client.get(url.removesuffix("/v1") + "/metrics").status_code == 200
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)  # SIGTERM used to be unable to stop it
        finally:
            if proc.poll() is None:
                proc.kill()
            _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


# -- 4 and 5: memory a client or an upstream chooses, in the relay and the gateway --------------------------------


@functools.cache
def gzip_twice(size: int) -> bytes:
    """`size` zero bytes compressed with gzip, then gzip again, made a megabyte at a time: a decompression bomb."""

    def gz(chunks):
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        for chunk in chunks:
            yield c.compress(chunk)
        yield c.flush()

    return b"".join(gz([b"".join(gz(b"\0" * (1 << 20) for _ in range(size >> 20)))]))


class RawUpstream(LoopbackServer):
    """An upstream that answers every request with the same raw bytes (a status line, headers, a body)."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        super().__init__()

    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(65536)
        try:
            conn.sendall(self.reply)
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(65536):
                pass
        except OSError:
            pass


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def served(kind: str, upstream: str, **options):
    return Relay(upstream, **options) if kind == "relay" else Gateway([upstream], **options)


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_an_error_body_bomb_is_decoded_under_a_bound_and_refused_with_a_502(kind, no_leaked_threads):
    bomb = gzip_twice(256 << 20)  # under 1 KB that decodes to 256 MiB
    upstream = RawUpstream(
        b"HTTP/1.1 500 Oops\r\nContent-Type: application/json\r\nContent-Encoding: gzip, gzip\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(bomb), bomb)
    )
    before = peak_mb()
    try:
        with served(kind, upstream.base_url) as server, httpx.Client(timeout=30) as client:
            reply = client.post(server.base_url + "/chat/completions", json=ASK)
    finally:
        upstream.close()
    assert reply.status_code == 502 and "over 8388608 bytes" in reply.json()["error"]["message"]
    assert peak_mb() - before < 200  # it had decoded the whole body: 2.3 GB for a gigabyte


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_an_upload_over_the_limit_gets_a_413_and_is_never_held_whole(kind, no_leaked_threads):
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream,
        served(kind, upstream.base_url, max_body_bytes=1 << 20) as server,
        httpx.Client(timeout=30) as client,
    ):

        def upload():
            yield b'{"model": "m", "pad": "'
            for _ in range(64):
                yield b" " * (1 << 20)
            yield b'"}'

        chunked = client.post(server.base_url + "/chat/completions", content=upload())
        declared = client.post(server.base_url + "/chat/completions", content=b"{" + b" " * (2 << 20) + b"}")
        fine = client.post(server.base_url + "/chat/completions", json=ASK)
    assert chunked.status_code == declared.status_code == 413
    assert chunked.json()["error"]["code"] == "request_too_large" and fine.status_code == 200
    assert upstream.totals().requests == 1  # nothing over the limit went upstream


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_summaries_are_a_bounded_ring_of_bounded_fields(kind, no_leaked_threads):
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream,
        served(kind, upstream.base_url, max_records=3) as server,
        httpx.Client(timeout=30) as client,
    ):
        for i in range(5):
            client.post(server.base_url + "/chat/completions", json={**ASK, "model": f"{i}" + "m" * 500_000})
        assert server.wait_for_summaries(5) if kind == "relay" else server.wait_for_logs(5)
        kept = server.summaries
    assert [s["model"][0] for s in kept] == ["2", "3", "4"]
    assert all(len(s["model"]) < 300 and len(json.dumps(s)) < 5000 for s in kept)


# -- 3: an unexpected exception in the probe left the breaker half-open for ever ----------------------------------

DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested past Python's recursion limit: `json.loads` raises RecursionError, not ValueError."""
BAD_FIRST_EVENTS = {
    "deep first event": b"data: " + DEEP.encode() + b"\n\n",
    "deep error event": b'data: {"error": ' + DEEP.encode() + b"}\n\n",
    "deep id": b'data: {"id": ' + DEEP.encode() + b"}\n\n",
}


@pytest.mark.parametrize("bad", sorted(BAD_FIRST_EVENTS))
def test_an_unexpected_exception_in_the_probe_never_leaves_the_breaker_half_open(bad, no_leaked_threads):
    from streamlab.core.standin.script import error_episode
    from streamlab.net.gateway.app import ManualClock

    clock = ManualClock()
    script = {
        "m": [error_episode(503, "down"), Episode([Send(BAD_FIRST_EVENTS[bad])]), Episode([Send(f) for f in CHAT])]
    }
    with (
        StandIn(script, usage="scripted") as upstream,
        Gateway([upstream.base_url], failure_threshold=1, cooldown=30, clock=clock) as gw,
        httpx.Client(timeout=30) as client,
    ):

        def ask() -> httpx.Response:
            return client.post(gw.base_url + "/chat/completions", json=ASK)

        assert ask().status_code == 503 and gw.breakers["primary"].state == "open"
        clock.advance(30)
        probe = ask()  # the probe meets the bad first event
        assert probe.status_code in (200, 502)
        assert gw.wait_for_logs(2)
        assert gw.breakers["primary"].state == "open" and not gw.breakers["primary"].probing
        assert gw.logs[1]["tried"][0]["result"] == "fault"  # heard by the breaker: the probe is back
        clock.advance(30)
        healed = ask()  # a new probe goes through, and the upstream is healthy again
        assert healed.status_code == 200 and b"[DONE]" in healed.content
        assert gw.breakers["primary"].state == "closed"


def test_a_bug_met_by_the_probe_releases_its_permit_and_ends_in_the_error_tree(monkeypatch, no_leaked_threads):
    import streamlab.net.gateway.exchange as exchange
    from streamlab.core.errors import InternalError, StreamlabError
    from streamlab.core.standin.script import error_episode
    from streamlab.net.gateway.app import ManualClock

    def bug(*args, **kwargs):
        raise RuntimeError("a bug nobody expected")

    clock = ManualClock()
    script = {"m": [error_episode(503, "down"), Episode([Send(f) for f in CHAT])]}
    with (
        StandIn(script, usage="scripted") as upstream,
        Gateway([upstream.base_url], failure_threshold=1, cooldown=30, clock=clock) as gw,
        httpx.Client(timeout=30) as client,
    ):
        assert client.post(gw.base_url + "/chat/completions", json=ASK).status_code == 503
        clock.advance(30)
        monkeypatch.setattr(exchange, "request_id_of", bug)  # fails right at the commit
        probe = client.post(gw.base_url + "/chat/completions", json=ASK)
        monkeypatch.undo()
        assert probe.status_code == 502 and "RuntimeError: a bug nobody expected" in probe.json()["error"]["message"]
        assert gw.wait_for_logs(2) and gw.logs[1]["status"] == 502 and "internal error" in gw.logs[1]["detail"]
        # released as neutral: the gateway's own failure is not the upstream's, so the next request probes again
        assert gw.breakers["primary"].state == "half_open" and not gw.breakers["primary"].probing
        assert gw.logs[1]["tried"][0]["result"] == "neutral"
        assert client.post(gw.base_url + "/chat/completions", json=ASK).status_code == 200
        assert gw.breakers["primary"].state == "closed"
    assert issubclass(InternalError, StreamlabError)


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_a_header_that_is_not_latin_1_goes_back_byte_for_byte(kind, no_leaked_threads):
    body = b"".join(CHAT)
    upstream = RawUpstream(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Request-Id: \xe6\xa8\xa1\xe5\x9e\x8b\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    )
    try:
        with served(kind, upstream.base_url) as server, httpx.Client(timeout=30) as client:
            reply = client.post(server.base_url + "/chat/completions", json=ASK)
    finally:
        upstream.close()
    assert reply.status_code == 200 and b"[DONE]" in reply.content
    assert dict(reply.headers.raw)[b"x-request-id"] == "\u6a21\u578b".encode()


# -- 11: an exception mid-stream, a deeply nested body, a header httpx cannot encode ------------------------------


def test_a_crash_mid_stream_still_ends_the_body_with_the_marked_final_event(monkeypatch, no_leaked_threads):
    from streamlab.core.relay.stream import RelayedStream
    from streamlab.core.sse import parse

    def crash(self, data, now):  # the relay's first move with the first chunk, after the head went out
        raise RuntimeError("a bug nobody expected")

    monkeypatch.setattr(RelayedStream, "forward", crash)
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream,
        Relay(upstream.base_url) as relay,
        httpx.Client(timeout=30) as client,
    ):
        reply = client.post(relay.base_url + "/chat/completions", json=ASK)
        assert relay.wait_for_summaries(1)
        summary = relay.summaries[0]
    events, truncated = parse(reply.content)
    assert reply.status_code == 200 and not truncated
    assert json.loads(events[-1].data)["error"]["code"] == "upstream_broken"  # the SDK raises on it
    assert summary["marked"] is True and "RuntimeError: a bug nobody expected" in summary["detail"]


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_odd_but_valid_client_bytes_are_forwarded_not_a_500_nor_a_fault(kind, no_leaked_threads):
    deep = b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b', "stream": true}'
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream,
        served(kind, upstream.base_url) as server,
    ):
        replies = []
        for extra, body in ((b"Authorization: Bearer \xe9t\xe9\r\n", json.dumps(ASK).encode()), (b"", deep)):
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                sock.sendall(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Connection: close\r\n" + extra + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
                replies.append(read_all(sock))
        assert upstream.wait_idle()
        learners = [r.learner for r in upstream.records()]
        if kind == "gateway":
            assert server.breakers["primary"].failures == 0
    assert replies[0].startswith(b"HTTP/1.1 200 ") and learners[0] == "\xe9t\xe9"  # the key's bytes, as sent
    assert replies[1].startswith(b"HTTP/1.1 400 ") and b"application/json" in replies[1]  # the upstream's own 400


def read_all(sock: socket.socket) -> bytes:
    out = bytearray()
    while data := sock.recv(65536):
        out += data
    return bytes(out)


# -- 7: the client's credentials reached the backup upstream on failover ----------------------------------------

CLIENT_CREDENTIALS = {
    "Authorization": "Bearer sk-client-for-primary",
    "OpenAI-Organization": "org-client",
    "OpenAI-Project": "proj-client",
}


def credentials(record) -> dict[str, str]:
    return {k: v for k, v in record.headers.items() if k in ("authorization", "openai-organization", "openai-project")}


@pytest.mark.parametrize("backup_key", [None, "sk-backup-own"])
def test_credentials_go_only_to_the_upstream_they_were_configured_for(backup_key, monkeypatch, no_leaked_threads):
    from streamlab.core.standin.script import error_episode

    spec = "backup={url}"
    if backup_key is not None:
        monkeypatch.setenv("STREAMLAB_TEST_BACKUP_KEY", backup_key)
        spec += "#STREAMLAB_TEST_BACKUP_KEY"
    with (
        StandIn({"m": error_episode(503, "down")}) as primary,
        StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as backup,
        Gateway([primary.base_url, spec.format(url=backup.base_url)]) as gw,
        httpx.Client(timeout=30, headers=CLIENT_CREDENTIALS) as client,
    ):
        reply = client.post(gw.base_url + "/chat/completions", json=ASK)
        assert reply.status_code == 200 and reply.headers["x-gateway-upstream"] == "backup"  # it failed over
        assert primary.wait_idle() and backup.wait_idle()
        (to_primary,) = primary.records()
        (to_backup,) = backup.records()
    assert credentials(to_primary) == {k.lower(): v for k, v in CLIENT_CREDENTIALS.items()}
    expected = {} if backup_key is None else {"authorization": f"Bearer {backup_key}"}
    assert credentials(to_backup) == expected  # never the client's key, nor its organization or project


def test_an_upstream_with_its_own_key_never_sees_the_clients(monkeypatch, no_leaked_threads):
    from streamlab.net.gateway.app import upstreams_from

    monkeypatch.setenv("STREAMLAB_TEST_PRIMARY_KEY", "sk-primary-own")
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as primary,
        Gateway([f"main={primary.base_url}#STREAMLAB_TEST_PRIMARY_KEY"]) as gw,
        httpx.Client(timeout=30, headers=CLIENT_CREDENTIALS) as client,
    ):
        assert client.post(gw.base_url + "/chat/completions", json=ASK).status_code == 200
        assert primary.wait_idle()
        (seen,) = primary.records()
    assert credentials(seen) == {"authorization": "Bearer sk-primary-own"}
    assert "sk-primary-own" not in repr(gw.upstreams)
    monkeypatch.delenv("STREAMLAB_TEST_PRIMARY_KEY")
    with pytest.raises(ValueError, match="STREAMLAB_TEST_PRIMARY_KEY is not set"):
        upstreams_from(["http://127.0.0.1:1/v1#STREAMLAB_TEST_PRIMARY_KEY"])


def test_dashboard_feeds_are_capped_apart_from_the_api(no_leaked_threads):
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, max_connections=8, dashboard_max_feeds=3) as server:
        feeds = [open_feed(server.port) for _ in range(3)]
        try:
            for feed in feeds:
                read_feed_until(feed, b"event: snapshot")
            with open_feed(server.port) as fourth:
                refused = read_all(fourth)
            assert refused.startswith(b"HTTP/1.1 503 ") and b"too_many_feeds" in refused
            with httpx.Client(timeout=20) as client:  # the API still has its connections
                assert client.post(server.url("chat/completions"), json=ASK).status_code == 200
        finally:
            for feed in feeds:
                feed.close()


# -- 5 and 10: decompression bombs against the checker and the client; headers dripped a byte at a time ----------


def bomb_reply(status: bytes, content_type: bytes, size: int = 256 << 20) -> bytes:
    bomb = gzip_twice(size)
    return (
        b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Encoding: gzip, gzip\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n%s" % (status, content_type, len(bomb), bomb)
    )


def test_the_checker_counts_decoded_bytes_after_every_layer(no_leaked_threads):
    from streamlab.core.conformance.checks import probes_for
    from streamlab.net.check import run_probe

    upstream = RawUpstream(bomb_reply(b"200 OK", b"text/event-stream"))
    before = peak_mb()
    try:
        with httpx.Client() as client:
            result = run_probe(client, upstream.base_url, probes_for("chat", "m")[0], max_body_bytes=4 << 20)
    finally:
        upstream.close()
    assert len(result.body) == 4 << 20 and "limit of 4194304 bytes" in (result.cut or "")
    assert peak_mb() - before < 200  # it had decoded the whole body first: 2.1 GB for a gigabyte


@pytest.mark.parametrize("status", [b"500 Oops", b"200 OK"])
def test_the_client_decodes_a_bomb_in_bounded_pieces(status, no_leaked_threads):
    from streamlab.core.errors import BadStatus, EventTooLarge
    from streamlab.net.eventstream import MAX_ERROR_BODY_BYTES, EventStream

    upstream = RawUpstream(bomb_reply(status, b"application/json" if b"500" in status else b"text/event-stream"))
    before = peak_mb()
    try:
        with pytest.raises((BadStatus, EventTooLarge)) as info:
            with EventStream(upstream.base_url + "/chat/completions", {"model": "m"}, keep="none") as stream:
                list(stream)
    finally:
        upstream.close()
    if isinstance(info.value, BadStatus):
        assert len(info.value.body) == MAX_ERROR_BODY_BYTES  # the 1 MiB cap, counted after decoding
    assert peak_mb() - before < 200  # it had reached about 1 GB


class DripServer(LoopbackServer):
    """A server that sends a status line, then one byte of a header line every 0.1 s, for ever."""

    def handle(self, conn: socket.socket) -> None:
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
            while not self.stopping.wait(0.1):
                conn.sendall(b"a")
        except OSError:
            pass


def test_the_sync_clients_deadline_covers_the_wait_for_headers(no_leaked_threads):
    from streamlab.core.errors import DeadlineExceeded
    from streamlab.net.eventstream import EventStream

    server = DripServer()
    started = time.monotonic()
    try:
        with pytest.raises(DeadlineExceeded):
            EventStream(server.base_url + "/chat/completions", {"model": "m"}, deadline=1.0, read_timeout=60).open()
    finally:
        server.close()
    assert time.monotonic() - started < 15  # it had waited for the headers for ever (each byte within 60 s)


def test_the_checker_gives_up_on_dripped_headers_at_its_deadline(no_leaked_threads):
    from streamlab.core.conformance.checks import probes_for
    from streamlab.net.check import run_probe

    server = DripServer()
    started = time.monotonic()
    try:
        with httpx.Client() as client:
            result = run_probe(client, server.base_url, probes_for("chat", "m")[0], timeout=60, deadline=1.0)
    finally:
        server.close()
    assert result.status is None and "deadline of 1 s" in (result.cut or "")
    assert time.monotonic() - started < 15


def test_an_endpoint_that_never_answers_within_the_deadline_could_not_be_checked(no_leaked_threads):
    # It had passed: 11 checks over 0 streams ("exactly one [DONE] ... in each of 0 streams"), exit 0.
    from streamlab.net.check import check_endpoint

    server = DripServer()
    try:
        report = check_endpoint(server.base_url, model="m", dialect="chat", timeout=60, deadline=0.5)
    finally:
        server.close()
    assert report.exit_code == 2 and not report.findings, report.render()
    assert "no probe got an HTTP response" in (report.unreachable or "") and "deadline" in report.unreachable
    assert report.probes and "could not be checked" in report.render()


# -- 8: deadlines before and during the request, and a connection cap, for the relay and the gateway -------------


def guarded_app_server(**options):
    """An `AppServer` (what the relay and the gateway run on) whose one route reads its body with a deadline."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    from streamlab.net.relay.serving import AppServer
    from streamlab.net.relay.upstream import read_request_body

    async def echo(request):
        body = await read_request_body(request, limit=1 << 20, timeout=0.5)
        return body if isinstance(body, Response) else Response(b"got %d" % len(body))

    return AppServer(Starlette(routes=[Route("/echo", echo, methods=["POST"])]), **options)


def test_a_head_or_a_body_that_never_finishes_is_cut_at_its_deadline(no_leaked_threads):
    with guarded_app_server(head_timeout=0.5) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as idle:
            assert idle.recv(1) == b""  # closed without a word: it had been held for ever
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as dripping:
            dripping.sendall(b"POST /echo HTTP/1.1\r\nHost")  # the rest never comes, as from a dripping client
            assert read_all(dripping).startswith(b"HTTP/1.1 408 ")
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as slow_body:
            slow_body.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
            reply = read_all(slow_body)
            assert reply.startswith(b"HTTP/1.1 408 ") and b"did not arrive within 0.5 s (3 bytes came)" in reply
        with httpx.Client(timeout=20) as client:
            assert client.post(server.url + "/echo", content=b"12345").text == "got 5"


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_connections_over_the_cap_get_a_503_and_give_their_descriptor_back(kind, no_leaked_threads):
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream,
        served(kind, upstream.base_url, max_connections=4) as server,
    ):
        idle = [socket.create_connection(("127.0.0.1", server.port), timeout=20) for _ in range(4)]
        try:
            until(lambda: server.open_connections() == 4, "the server to take the four in")
            with socket.create_connection(("127.0.0.1", server.port), timeout=20) as extra:
                refused = read_all(extra)
            assert refused.startswith(b"HTTP/1.1 503 ") and b"too many connections" in refused
        finally:
            for sock in idle:
                sock.close()
        deadline = time.monotonic() + 20
        while True:  # the slots come back as the idle ones close
            with httpx.Client(timeout=20) as client:
                reply = client.post(server.base_url + "/chat/completions", json=ASK)
            if reply.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert reply.status_code == 200


# -- 5 and 10: check-relay against a relay that streams for ever, or drips its headers -----------------------------


def endless_relay():
    """A "relay" that answers every stream with chat chunks, as fast as it can, for ever."""
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from streamlab.net.relay.serving import AppServer

    chunk = b"".join(shapes.chat_text_stream(["word "] * 200, model="m")[1:-3])

    async def forever(request):
        async def body():
            while True:
                yield chunk
                await asyncio.sleep(0)  # let the loop run: a client that left, a server stopping

        return StreamingResponse(body(), media_type="text/event-stream")

    return AppServer(Starlette(routes=[Route("/v1/chat/completions", forever, methods=["POST"])]))


def test_the_relay_checker_keeps_a_bounded_part_of_an_endless_stream(no_leaked_threads):
    from streamlab.net.relaycheck.probe import MAX_STREAM_BYTES, raw_stream, sdk_stream

    before = peak_mb()
    with endless_relay() as relay:
        raw = raw_stream(relay.url + "/v1", "m", "chat", timeout=2.0)
        sdk, _ = sdk_stream(relay.url + "/v1", "m", "chat", timeout=2.0)
    assert not raw.complete and len(raw.body) <= MAX_STREAM_BYTES + (1 << 20) and "past" in raw.error
    assert sdk.raised  # never a normal end
    assert peak_mb() - before < 400  # it had run out of memory in 21 s


def test_the_relay_checker_gives_up_on_dripped_headers(no_leaked_threads):
    from streamlab.net.relaycheck.probe import raw_stream, sdk_stream

    server = DripServer()
    started = time.monotonic()
    try:
        raw = raw_stream(server.base_url, "m", "chat", timeout=1.0)
        sdk, _ = sdk_stream(server.base_url, "m", "chat", timeout=1.0)
    finally:
        server.close()
    assert "gave up" in raw.error and sdk.raised
    assert time.monotonic() - started < 30  # each had waited for ever


# -- 12: the smaller ones ------------------------------------------------------------------------------------------


def test_starting_after_takes_only_a_plain_integer(no_leaked_threads):
    from streamlab.core.standin.scenarios import scenario

    with StandIn(scenario("background")) as server, httpx.Client(timeout=20) as client:
        url = server.url("responses/resp_demo")
        statuses = {
            text: client.get(url, params={"stream": "true", "starting_after": text}).status_code
            for text in ("+5", "1_0", " 5", "\u0665", "5")  # int() took all of these
        }
    assert statuses == {"+5": 400, "1_0": 400, " 5": 400, "\u0665": 400, "5": 200}


@pytest.mark.parametrize("path", [b"/v1/chat/completions", b"/dashboard/events"])
def test_a_five_thousand_digit_content_length_is_refused_not_a_500(path, no_leaked_threads):
    with StandIn({"m": Episode([Send(f) for f in CHAT])}) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
            sock.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n" % (path, b"9" * 5000))
            reply = read_all(sock)
    assert reply.startswith(b"HTTP/1.1 413 ")  # the API path had been a 500, the dashboard path silence


@pytest.mark.parametrize("kind", ["relay", "gateway"])
@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n" % (b"9" * 5000),
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Bad\x01: y\r\n\r\n",
    ],
    ids=["huge-content-length", "bad-chunk-size", "control-in-header"],
)
def test_a_request_that_is_not_http_gets_an_openai_shaped_400(kind, request_bytes, no_leaked_threads):
    # uvicorn's own reply had been plain text ("Invalid HTTP request received."), which an SDK cannot read.
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream,
        served(kind, upstream.base_url) as server,
    ):
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
            sock.sendall(request_bytes)
            reply = read_all(sock)
        assert upstream.totals().requests == 0
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and b"content-type: application/json" in head.lower(), reply[:300]
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error" and "not valid HTTP/1.1" in error["message"]


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_a_response_id_of_dots_never_reaches_another_upstream_path(kind, no_leaked_threads):
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, usage="scripted") as upstream,
        served(kind, upstream.base_url) as server,
    ):
        for rid in (b"..", b"%2e%2e", b"."):  # sent as is: an HTTP client would resolve the dots itself
            with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
                sock.sendall(b"GET /v1/responses/%s?stream=true HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % rid)
                reply = read_all(sock)
            assert reply.startswith(b"HTTP/1.1 404 ") and b'"param":"response_id"' in reply, reply[:300]
        assert upstream.totals().requests == 0  # not one went upstream (it had reached the upstream's /v1)


def test_a_retry_after_of_ten_years_opens_a_breaker_for_minutes_at_most(no_leaked_threads):
    from streamlab.core.standin.script import error_episode
    from streamlab.net.gateway.app import MAX_BREAKER_WAIT, ManualClock

    clock = ManualClock()
    down = error_episode(503, "down", retry_after="315360000")
    with (
        StandIn({"m": [down, Episode([Send(f) for f in CHAT])]}, usage="scripted") as upstream,
        Gateway([upstream.base_url], failure_threshold=1, cooldown=30, clock=clock) as gw,
        httpx.Client(timeout=20) as client,
    ):
        assert client.post(gw.base_url + "/chat/completions", json=ASK).status_code == 503
        assert gw.breakers["primary"].open_until == MAX_BREAKER_WAIT  # not ten years
        clock.advance(MAX_BREAKER_WAIT)
        assert client.post(gw.base_url + "/chat/completions", json=ASK).status_code == 200
