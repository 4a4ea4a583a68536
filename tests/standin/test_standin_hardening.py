"""The stand-in as a server in a room must hold: bad requests, slow clients, too many clients, a long day.

Each test reproduces a way the stand-in used to fail (issue 10) against a real server on 127.0.0.1. Nothing
asserts on speed: timeouts are set small and the tests wait on states (a record finished, a connection
released), with generous safety nets for a loaded machine.
"""

from __future__ import annotations

import json
import queue
import signal
import socket
import threading
import time

import httpx
import openai
import pytest
from support import dechunk, standin_base, streamlab_cli, until

from streamlab.core import shapes
from streamlab.core.endings import Ending
from streamlab.core.standin.script import Episode, Send, Stall, paced
from streamlab.net.standin.server import StandIn

CHAT = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"], model="m")
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
"""A request as the real API wants it (the stand-in refuses a Chat request without `messages`)."""
USAGE_CHUNK = CHAT[5]  # the usage-only chunk (choices: [])

pytestmark = [pytest.mark.usefixtures("no_leaked_threads"), pytest.mark.net]


def read_all(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(timeout)
    out = bytearray()
    while data := sock.recv(65536):
        out += data
    return bytes(out)


def exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        return read_all(sock)


def status_of(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


def json_of(reply: bytes) -> dict:
    return json.loads(reply.partition(b"\r\n\r\n")[2])


def post_head(body: bytes, *extra: bytes) -> bytes:
    lines = [
        b"POST /v1/chat/completions HTTP/1.1",
        b"Host: x",
        b"Content-Type: application/json",
        b"Content-Length: %d" % len(body),
        *extra,
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n"


# -- stopping --------------------------------------------------------------------------------------


class _StopSeesTheHandlerFirst(StandIn):
    """Stops in the order that used to lose the race: every handler sees the stop, and finishes what it does
    about it, before any connection is shut down."""

    handler_done = False

    def _on_stopping(self) -> None:
        self.handler_done = self.wait_until(lambda rs: bool(rs) and all(r.finished for r in rs), timeout=30)


def test_stop_during_a_final_stall_records_stopped_and_never_ends_the_body_cleanly():
    server = _StopSeesTheHandlerFirst({"m": Episode([Send(CHAT[0]), Stall()])}).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            body = json.dumps(ASK).encode()
            sock.sendall(post_head(body) + body)
            server.wait_until(lambda rs: bool(rs) and rs[0].frames_written == 1)
            server.stop()
            reply = read_all(sock)
        assert server.handler_done
        (rec,) = server.records()
        assert rec.ending == "stopped" and rec.ending is Ending.STOPPED and not rec.client_gone
        chunks, terminated = dechunk(reply.partition(b"\r\n\r\n")[2])
        assert chunks == [CHAT[0]] and not terminated  # the client sees a broken body, not a clean end
    finally:
        server.stop()


# -- requests checked like the real API -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "headers", "fragment"),
    [
        ("chat/completions", b"[" * 100_000, {}, "nested too deeply"),
        (
            "chat/completions",
            b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}',
            {"Content-Type": "text/plain"},
            "Content-Type",
        ),
        ("chat/completions", b'{"model": "m", "stream": true}', {}, "'messages'"),
        ("responses", b'{"model": "m", "stream": true}', {}, "'input'"),
        ("chat/completions", b'{"messages": [{"role": "user", "content": "hi"}]}', {}, "model"),
    ],
)
def test_bad_requests_get_an_openai_shaped_400_and_a_finished_record(path, body, headers, fragment):
    # usage="scripted": the request after the refusal must get every scripted byte, the usage chunk included
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, require_input=True, usage="scripted") as server,
        httpx.Client() as client,
    ):
        r = client.post(server.url(path), content=body, headers={"Content-Type": "application/json", **headers})
        assert r.status_code == 400
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and fragment in err["message"]
        assert server.wait_idle()
        (rec,) = server.records()
        assert rec.ending is Ending.HTTP_ERROR and rec.status == 400
        ok = client.post(server.url("chat/completions"), json=ASK)
        assert ok.status_code == 200 and ok.content == b"".join(CHAT)


@pytest.mark.parametrize(
    ("body", "message", "param", "code"),
    [
        (
            {"model": "m", "messages": [], "stream": True},
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            "messages",
            "empty_array",
        ),
        (
            {"model": "m", "messages": "hi", "stream": True},
            "Invalid type for 'messages': expected an array of objects, but got a string instead.",
            "messages",
            "invalid_type",
        ),
        (
            {"model": "m", "messages": ["hi"], "stream": True},
            "Invalid type for 'messages[0]': expected an object, but got a string instead.",
            "messages[0]",
            "invalid_type",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "a"}, {"content": "b"}], "stream": True},
            "Missing required parameter: 'messages[1].role'.",
            "messages[1].role",
            "missing_required_parameter",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"},
            "Invalid type for 'stream': expected a boolean, but got a string instead.",
            "stream",
            "invalid_type",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": True}},
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
            None,
        ),
    ],
)
def test_the_real_apis_other_refusals_come_with_its_message_param_and_code(body, message, param, code):
    # The texts are the real API's (as its 400s quote them), so a learner's error handling meets the same words.
    with StandIn({"m": Episode([Send(f) for f in CHAT])}) as server, httpx.Client() as client:
        r = client.post(server.url("chat/completions"), json=body)
        assert r.status_code == 400
        assert r.json() == {
            "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
        }


def test_the_official_sdk_raises_bad_request_for_an_empty_message_list():
    openai = pytest.importorskip("openai")
    with StandIn({"m": Episode([Send(f) for f in CHAT])}) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        try:
            with pytest.raises(openai.BadRequestError) as caught:
                client.chat.completions.create(model="m", messages=[], stream=True)
        finally:
            client.close()
    assert caught.value.code == "empty_array" and caught.value.param == "messages"


def test_a_lenient_stand_in_still_streams_an_empty_message_list():
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, require_input=False, usage="scripted") as server,
        httpx.Client() as client,
    ):
        r = client.post(server.url("chat/completions"), json={"model": "m", "messages": [], "stream": True})
        assert r.status_code == 200 and r.content == b"".join(CHAT)


def test_oversize_body_gets_413_before_any_100_continue():
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, max_body_bytes=1000) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(post_head(b"x" * 5000, b"Expect: 100-continue"))  # asks first, sends no body
            reply = read_all(sock)
        assert status_of(reply) == 413 and b"100 Continue" not in reply
        assert "exceeds" in json_of(reply)["error"]["message"]
        body = json.dumps(ASK).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(post_head(body, b"Expect: 100-continue", b"Connection: close"))
            sock.settimeout(10)
            interim = b""
            while not interim.endswith(b"\r\n\r\n"):
                interim += sock.recv(1)
            assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
            sock.sendall(body)
            assert status_of(read_all(sock)) == 200


@pytest.mark.parametrize(
    ("raw", "status", "fragment"),
    [
        (post_head(b"{}", b"Content-Length: 7"), 400, "conflicting Content-Length"),
        (b"GET /\r\n", 400, "HTTP/0.9"),
        (b"GET / HTTP/3.0\r\n\r\n", 505, "not supported"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431, "head"),
    ],
)
def test_malformed_heads_get_a_reply_not_silence(raw, status, fragment):
    with StandIn({"m": Episode([Send(f) for f in CHAT])}) as server:
        reply = exchange(server.port, raw)
        assert status_of(reply) == status and fragment in json_of(reply)["error"]["message"]
        with httpx.Client() as client:
            assert client.post(server.url("chat/completions"), json=ASK).status_code == 200


# -- the usage chunk ----------------------------------------------------------------------------------------


def test_usage_chunk_only_when_asked_so_the_sdk_loop_never_sees_empty_choices():
    with (
        StandIn({"m": Episode(paced(CHAT, gap=0.005))}, usage="requested") as server,
        openai.OpenAI(base_url=server.base_url, api_key="ada", max_retries=0, timeout=10) as client,
    ):
        messages = [{"role": "user", "content": "hi"}]
        stream = client.chat.completions.create(model="m", messages=messages, stream=True)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)  # IndexError on a usage chunk
        assert text == "Hello w\u00f6rld"
        chunks = list(
            client.chat.completions.create(
                model="m", messages=messages, stream=True, stream_options={"include_usage": True}
            )
        )
        assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 3
        server.wait_idle()
        first, second = server.records()
        assert USAGE_CHUNK not in first.written and USAGE_CHUNK in second.written


# -- slow clients, many clients ------------------------------------------------------------------------------


def test_half_sent_requests_are_answered_408_and_release_their_threads():
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, header_timeout=0.3, body_timeout=0.3) as server:
        threads_serving = threading.active_count()
        socks = []
        try:
            for i in range(40):
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                socks.append(sock)
                if i % 2:  # the head never ends
                    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
                else:  # the body never comes whole
                    sock.sendall(post_head(b"x" * 100) + b"{" * 10)
            assert server.wait_connections(0, timeout=60)  # released while the clients still hold their ends
            until(lambda: threading.active_count() <= threads_serving, "the handler threads to end")
            replies = [read_all(sock) for sock in socks]
        finally:
            for sock in socks:
                sock.close()
        assert all(status_of(r) == 408 for r in replies)
        assert "did not arrive" in json_of(replies[0])["error"]["message"]
        records = server.records()
        assert len(records) == 20 and all(r.status == 408 and r.ending is Ending.HTTP_ERROR for r in records)


def test_an_idle_kept_alive_connection_is_closed_after_the_idle_timeout():
    """The server's side of the keep-alive contract, on a raw socket: the answer comes whole, then the idle
    connection is closed (an EOF reaches the client) after `idle_timeout`, and a new connection is served.

    (Reusing a pooled httpx connection here raced: the server could count the connection closed before its FIN
    reached the client, which then sent its next request into a closed socket, as any keep-alive client can.)"""
    body = json.dumps(ASK).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ada\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, idle_timeout=0.2) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            started, received = time.monotonic(), bytearray()  # before the send: the server may be done first
            sock.sendall(request)
            while data := sock.recv(65536):  # returns b"" at the server's FIN; a 30 s timeout would raise
                received += data
            idle = time.monotonic() - started
        chunks, terminated = dechunk(received.split(b"\r\n\r\n", 1)[1])
        assert received.startswith(b"HTTP/1.1 200") and terminated and b"[DONE]" in b"".join(chunks)
        assert idle >= 0.2, f"closed after {idle:.3f} s, before the idle timeout"
        assert server.wait_connections(0, timeout=30)
        with httpx.Client() as client:
            assert client.post(server.url("chat/completions"), json=ASK).status_code == 200


def test_connections_over_the_cap_get_a_503_and_the_slot_comes_back():
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, max_connections=2) as server:
        held = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(2)]
        try:
            until(lambda: server.open_connections() == 2, "two connections to be served")
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as extra:
                reply = read_all(extra)
            assert status_of(reply) == 503 and json_of(reply)["error"]["code"] == "too_many_connections"
            assert b"Retry-After: 1" in reply
            held.pop().close()
            assert server.wait_connections(1, timeout=30)
            with httpx.Client() as client:
                r = client.post(server.url("chat/completions"), json=ASK)
                assert r.status_code == 200
        finally:
            for sock in held:
                sock.close()
        assert server.totals().refused_connections == 1


# -- records -------------------------------------------------------------------------------------------------


def test_records_are_a_bounded_ring_with_totals_and_a_feed_of_finished_requests():
    finished: queue.Queue = queue.Queue()
    with (
        StandIn(
            {"m": Episode([Send(f) for f in CHAT])}, max_records=5, max_record_bytes=100, usage="scripted"
        ) as server,
        httpx.Client() as client,
    ):
        unsubscribe = server.subscribe(finished.put)
        for _ in range(12):
            client.post(server.url("chat/completions"), json=ASK)
        fed = [finished.get(timeout=30) for _ in range(12)]
        assert sorted(r.index for r in fed) == list(range(12)) and all(r.finished for r in fed)
        records = server.records()
        assert [r.index for r in records] == list(range(7, 12))
        assert all(r.written == b"".join(CHAT)[:100] and r.bytes_written == len(b"".join(CHAT)) for r in records)
        totals = server.totals()
        assert totals.requests == 12 and totals.endings == {Ending.COMPLETE: 12}
        unsubscribe()
        client.post(server.url("chat/completions"), json=ASK)
        assert server.wait_idle() and server.totals().requests == 13
        assert finished.empty()


def test_cli_quiet_prints_no_request_lines():
    with streamlab_cli("standin", "--scenario", "flaky", "--port", "0", "--quiet") as proc:
        base = standin_base(proc)
        with httpx.Client(headers={"Authorization": "Bearer ada"}) as client:
            for _ in range(3):
                client.post(base + "/chat/completions", json={**ASK, "model": "flaky"})
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped after 3 request(s)" in out and "POST /v1" not in out


def test_a_record_keeps_at_most_its_byte_budget_of_a_large_request():
    with StandIn({"m": Episode([Send(f) for f in CHAT])}, max_record_bytes=100) as server, httpx.Client() as client:
        body = {"model": "m", "messages": [{"role": "user", "content": "x" * 1000}], "stream": True}
        assert client.post(server.url("chat/completions"), json=body).status_code == 200
        small = ASK
        assert client.post(server.url("chat/completions"), json=small).status_code == 200
        assert server.wait_idle()
        large, short = server.records()
        assert len(large.body) == 100 and large.json is None and large.model == "m"
        assert short.json == small
