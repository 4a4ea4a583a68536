"""The stand-in server: routes, scripts, records, error handling and a clean shutdown.

Everything runs against a real server on 127.0.0.1 with real httpx or raw sockets; timing assertions are
facts that cannot fail on a slow machine ("not before the scheduled wait"), never upper bounds on speed.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
from support import dechunk, streamlab_cli

from streamlab.core import shapes
from streamlab.core.sse import parse
from streamlab.core.standin.plan import derive_body
from streamlab.core.standin.scenarios import SCENARIOS, scenario, scenario_of
from streamlab.core.standin.script import (
    Cut,
    End,
    Episode,
    ErrorEpisode,
    KeepAlive,
    Send,
    Stall,
    StoredResponse,
    Wait,
    error_episode,
    paced,
    split_frames,
)
from streamlab.net.standin.server import StandIn, serve, stop_serving

CHAT = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"], model="m")
RESP = shapes.responses_text_stream(["alpha ", "beta ", "gamma ", "delta"], model="r")
HI = [{"role": "user", "content": "hi"}]
"""The stand-in checks requests as the real API does, so every Chat request here carries `messages` (and
every Responses request an `input`); servers whose bytes are compared with the script's play them all
(`usage="scripted"`: the real API sends the usage-only chunk only with `stream_options.include_usage`)."""
ASK = {"model": "m", "messages": HI, "stream": True}


pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # see conftest.py


def post(client: httpx.Client, server: StandIn, path: str, body: object, **kw) -> httpx.Response:
    return client.post(server.url(path), json=body, **kw)


def raw_request(port: int, request: bytes, *, read_until_close: bool = True) -> bytes:
    """Send raw bytes and return everything the server sends back until it closes (or 2 s pass)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        sock.settimeout(2)
        out = bytearray()
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                out += data
        except TimeoutError:
            pass
        return bytes(out)


# -- streaming -------------------------------------------------------------------------------------


def test_stream_sends_each_send_as_one_chunk_and_ends_cleanly():
    with StandIn({"m": Episode(paced(CHAT, first=0.05, gap=0.01))}, usage="scripted") as server:
        body = json.dumps(ASK).encode()
        reply = raw_request(
            server.port,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
        )
        head, _, rest = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        assert b"Transfer-Encoding: chunked" in head
        assert b"Content-Type: text/event-stream" in head
        chunks, terminated = dechunk(rest)
        assert chunks == CHAT
        assert terminated
        server.wait_idle()
        (rec,) = server.records()
        assert rec.ending == "complete" and not rec.client_gone
        assert rec.written == b"".join(CHAT) and rec.frames_written == len(CHAT)
        assert rec.model == "m" and rec.episode == 0 and rec.stream and rec.status == 200
        assert rec.json == ASK


def test_waits_are_honoured_first_bytes_not_before_schedule():
    with (
        StandIn({"m": Episode(paced(CHAT, first=0.2, gap=0.02))}, usage="scripted") as server,
        httpx.Client() as client,
    ):
        t0 = time.perf_counter()
        with client.stream("POST", server.url("chat/completions"), json=ASK) as r:
            arrivals = [(time.perf_counter() - t0, chunk) for chunk in r.iter_bytes()]
        assert b"".join(c for _, c in arrivals) == b"".join(CHAT)
        assert arrivals[0][0] >= 0.2  # the first frame cannot come before its scheduled wait
        assert arrivals[-1][0] >= 0.2 + 0.02 * (len(CHAT) - 1)
        assert len(arrivals) > 1  # delivered progressively, not as one buffered body


def test_episodes_play_in_order_and_the_last_repeats():
    one = shapes.chat_text_stream(["one"], model="m")
    two = shapes.chat_text_stream(["two"], model="m")
    with (
        StandIn({"m": [Episode([Send(f) for f in one]), Episode([Send(f) for f in two])]}, usage="scripted") as server,
        httpx.Client() as client,
    ):
        texts = [post(client, server, "chat/completions", ASK).content for _ in range(3)]
        assert texts == [b"".join(one), b"".join(two), b"".join(two)]
        assert [r.episode for r in server.records()] == [0, 1, 1]
        assert server.requests_for("m") == 3
        server.reset()
        assert server.records() == [] and server.requests_for("m") == 0
        assert post(client, server, "chat/completions", ASK).content == b"".join(one)


def test_error_episode_then_stream_with_retry_headers():
    script = {
        "m": [
            error_episode(
                429,
                "slow down",
                type="rate_limit_exceeded",
                code="rate_limit_exceeded",
                retry_after=2,
                retry_after_ms=150,
            ),
            Episode([Send(f) for f in CHAT]),
        ]
    }
    with StandIn(script, usage="scripted") as server, httpx.Client() as client:
        r = post(client, server, "chat/completions", ASK)
        assert r.status_code == 429
        assert r.headers["retry-after-ms"] == "150" and r.headers["retry-after"] == "2"
        assert r.json() == {
            "error": {
                "message": "slow down",
                "type": "rate_limit_exceeded",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
        r = post(client, server, "chat/completions", ASK)
        assert r.status_code == 200 and r.content == b"".join(CHAT)
        assert server.wait_idle()  # the record is completed just after the last byte is handed to the client
        assert [rec.ending for rec in server.records()] == ["http_error", "complete"]


def test_error_episode_accepts_http_date_and_custom_body():
    ep = error_episode(503, "busy", retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    assert ("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT") in ep.headers
    custom = ErrorEpisode(
        500,
        {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}},
        (("x-request-id", "req_1"),),
    )
    with StandIn({"m": custom}) as server, httpx.Client() as client:
        r = post(client, server, "chat/completions", {"model": "m", "messages": HI})
        assert r.status_code == 500 and r.headers["x-request-id"] == "req_1"
        assert r.json()["error"]["message"] == "boom"


def test_non_streaming_gets_one_json_body_after_the_thinking_time():
    steps = paced(CHAT, first=0.15, gap=0.01) + [Stall(0.01)]
    with StandIn({"m": Episode(steps)}) as server, httpx.Client() as client:
        t0 = time.perf_counter()
        r = post(client, server, "chat/completions", {"model": "m", "messages": HI})
        elapsed = time.perf_counter() - t0
        server.wait_idle()  # the record is completed just after the last byte is handed to the client
        assert elapsed >= Episode(steps).thinking_time
        assert r.headers["content-type"] == "application/json"
        body = r.json()
        assert body["object"] == "chat.completion"
        assert body["choices"][0]["message"]["content"] == "Hello w\u00f6rld"
        assert body["choices"][0]["finish_reason"] == "stop"
        assert body["usage"]["completion_tokens"] == 3
        (rec,) = server.records()
        assert not rec.stream and rec.ending == "complete" and rec.written == r.content


def test_non_streaming_uses_the_episode_body_when_given():
    body = shapes.chat_completion_body("given", model="m")
    with StandIn({"m": Episode([Send(f) for f in CHAT], body=body)}) as server, httpx.Client() as client:
        assert post(client, server, "chat/completions", {"model": "m", "messages": HI}).json() == body


def test_non_streaming_responses_body_is_the_terminal_response():
    with StandIn({"r": Episode([Send(f) for f in RESP])}) as server, httpx.Client() as client:
        got = post(client, server, "responses", {"model": "r", "input": "hi"}).json()
        assert got["object"] == "response" and got["status"] == "completed"
        assert got["output"][0]["content"][0]["text"] == "alpha beta gamma delta"


def test_non_streaming_without_derivable_body_is_a_clear_500():
    with StandIn({"m": Episode([Send(b": only a comment\n\n")])}) as server, httpx.Client() as client:
        r = post(client, server, "chat/completions", {"model": "m", "messages": HI})
        assert r.status_code == 500 and "no non-streaming body" in r.json()["error"]["message"]


def test_keepalive_comment_and_empty_send_and_end():
    steps = [Send(CHAT[0]), KeepAlive(), Send(b""), KeepAlive("still thinking"), End(), Send(CHAT[1])]
    with StandIn({"m": Episode(steps)}) as server, httpx.Client() as client:
        r = post(client, server, "chat/completions", ASK)
        assert r.content == CHAT[0] + b": ping\n\n" + b": still thinking\n\n"  # nothing after End
        events, truncated = parse(r.content)
        assert len(events) == 1 and not truncated


def test_cut_closes_without_the_terminating_chunk():
    half = CHAT[3][: CHAT[3].index(b"\xc3") + 1]  # stop inside the two-byte character
    with StandIn({"m": Episode([Send(CHAT[0]), Send(half), Cut()])}) as server:
        body = json.dumps(ASK).encode()
        reply = raw_request(
            server.port,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
        )
        chunks, terminated = dechunk(reply.partition(b"\r\n\r\n")[2])
        assert chunks == [CHAT[0], half] and not terminated
        server.wait_idle()
        (rec,) = server.records()
        assert rec.ending == "cut" and not rec.client_gone


def test_server_notices_a_client_that_goes_away():
    frames = shapes.chat_text_stream([f"t{i:03d} " for i in range(200)], model="m")
    with StandIn({"m": Episode(paced(frames, gap=0.01))}) as server, httpx.Client() as client:
        with client.stream("POST", server.url("chat/completions"), json=ASK) as r:
            for _ in r.iter_bytes():
                break
        assert server.wait_until(lambda rs: rs and rs[0].finished)
        (rec,) = server.records()
        assert rec.client_gone and rec.ending == "client_gone"
        assert 0 < rec.frames_written < len(frames)
        assert rec.bytes_written < len(b"".join(frames))


def test_a_stall_forever_ends_when_the_client_leaves():
    with StandIn({"m": Episode([Send(CHAT[0]), Stall()])}) as server:
        with httpx.Client(timeout=httpx.Timeout(5, read=0.2)) as client, pytest.raises(httpx.ReadTimeout):
            with client.stream("POST", server.url("chat/completions"), json=ASK) as r:
                for _ in r.iter_bytes():
                    pass
        assert server.wait_until(lambda rs: rs and rs[0].finished)
        assert server.records()[0].ending == "client_gone"


def test_stop_ends_stalls_and_idle_keep_alive_connections():
    server = StandIn({"m": Episode([Send(CHAT[0]), Stall()]), "ok": Episode([Send(f) for f in CHAT])}).start()
    client = httpx.Client()
    try:
        ok = {"model": "ok", "messages": HI, "stream": True}
        post(client, server, "chat/completions", ok)  # leaves a kept-alive connection
        stalled = client.send(client.build_request("POST", server.url("chat/completions"), json=ASK), stream=True)
        chunks = stalled.iter_bytes()  # keep the generator: dropping it would close the response
        assert next(chunks) == CHAT[0]
        t0 = time.perf_counter()
        server.stop()
        assert time.perf_counter() - t0 < 3  # stop does not wait for a stall that never ends
        assert not server.running
        assert server.records()[1].ending == "stopped"
        stalled.close()
    finally:
        client.close()
        server.stop()  # idempotent


# -- malformed requests ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "content", "headers", "status", "fragment"),
    [
        ("POST", "/v1/chat/completions", b"not json", {}, 400, "not valid JSON"),
        ("POST", "/v1/chat/completions", b"[1, 2]", {}, 400, "must be a JSON object"),
        ("POST", "/v1/chat/completions", b'{"stream": true}', {}, 400, "model"),
        ("POST", "/v1/chat/completions", b'{"model": 7}', {}, 400, "model"),
        (
            "POST",
            "/v1/chat/completions",
            b'{"model": "nope", "messages": [{"role": "user", "content": "hi"}]}',
            {},
            404,
            "does not exist",
        ),
        ("POST", "/v1/responses", b"", {}, 400, "missing request body"),
        ("GET", "/v1/chat/completions", b"", {}, 405, "use POST"),
        ("DELETE", "/v1/responses/resp_x", b"", {}, 405, "use GET"),
        ("GET", "/v1/responses/resp_x/cancel", b"", {}, 405, "use POST"),
        ("POST", "/v1/embeddings", b"{}", {}, 404, "unknown path"),
        ("GET", "/", b"", {}, 404, "unknown path"),
        ("GET", "/v1/responses/missing", b"", {}, 404, "No response found"),
        ("POST", "/v1/responses/missing/cancel", b"", {}, 404, "No response found"),
        ("POST", "/v1/chat/completions", b"x" * 2000, {}, 413, "exceeds"),
        ("POST", "/v1/chat/completions", b"x" * 3_000_000, {}, 413, "exceeds"),
        ("OPTIONS", "/v1/chat/completions", b"", {}, 405, "not allowed"),
        ("TRACE", "/v1/responses", b"", {}, 405, "not allowed"),
    ],
)
def test_malformed_requests_get_openai_shaped_errors_and_the_server_keeps_serving(
    method, path, content, headers, status, fragment
):
    with (
        StandIn({"m": Episode([Send(f) for f in CHAT])}, max_body_bytes=1000, usage="scripted") as server,
        httpx.Client() as client,
    ):
        r = client.request(method, f"http://127.0.0.1:{server.port}{path}", content=content, headers=headers)
        assert r.status_code == status
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert fragment in err["message"]
        ok = post(client, server, "chat/completions", ASK)
        assert ok.status_code == 200 and ok.content == b"".join(CHAT)
        assert [rec.status for rec in server.records()] == [status, 200]


def test_unknown_model_error_names_the_scripted_models():
    with StandIn({"b": Episode(), "a": Episode()}) as server, httpx.Client() as client:
        err = post(client, server, "chat/completions", {"model": "zz", "messages": HI}).json()["error"]
        assert err["code"] == "model_not_found" and err["param"] == "model" and "a, b" in err["message"]


def test_garbage_request_line_and_bad_content_length_get_json_errors():
    with StandIn({"m": Episode([Send(f) for f in CHAT])}) as server:
        reply = raw_request(server.port, b"this is not http\r\n\r\n")
        assert b" 400 " in reply.split(b"\r\n", 1)[0]
        assert json.loads(reply.partition(b"\r\n\r\n")[2])["error"]["type"] == "invalid_request_error"
        reply = raw_request(server.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -3\r\n\r\n")
        assert b" 400 " in reply.split(b"\r\n", 1)[0] and b"Content-Length" in reply
        reply = raw_request(
            server.port,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        )
        assert b" 411 " in reply.split(b"\r\n", 1)[0]
        with httpx.Client() as client:
            assert post(client, server, "chat/completions", ASK).status_code == 200


# -- Last-Event-ID and stored (background) responses -------------------------------------------------


def test_last_event_id_resumes_after_the_frame_that_set_it():
    frames = [shapes.sse_frame(f"part {i}", id=str(i)) for i in range(1, 6)]
    with StandIn({"m": Episode([Send(f) for f in frames])}) as server, httpx.Client() as client:
        url = server.url("chat/completions")
        r = client.post(url, json=ASK, headers={"Last-Event-ID": "3"})
        assert r.content == frames[3] + frames[4]
        r = client.post(url, json=ASK, headers={"Last-Event-ID": "unknown"})
        assert r.content == b"".join(frames)  # an ID the stream never set: send it all
        assert [rec.resumed_after for rec in server.records()] == ["3", None]


def test_last_event_id_skips_partial_sends_and_their_waits():
    frames = [shapes.sse_frame(f"part {i}", id=str(i)) for i in range(1, 4)]
    payload = b"".join(frames)
    pieces = [payload[:7], payload[7:30], payload[30:]]  # Sends that do not line up with frames
    steps = [Wait(0.3), Send(pieces[0]), Wait(0.3), Send(pieces[1]), Send(pieces[2])]
    with StandIn({"m": Episode(steps)}) as server, httpx.Client() as client:
        t0 = time.perf_counter()
        r = client.post(server.url("chat/completions"), json=ASK, headers={"Last-Event-ID": "2"})
        assert r.content == frames[2]
        assert time.perf_counter() - t0 < 0.6  # the waits before already-delivered bytes are skipped


def test_stored_response_get_stream_and_starting_after():
    stored = StoredResponse.from_frames(RESP)
    assert [seq for seq, _ in stored.frames] == list(range(len(RESP)))
    with StandIn({}, stored={"resp_demo": stored}) as server, httpx.Client() as client:
        base = server.url("responses/resp_demo")
        assert client.get(base, params={"stream": "true"}).content == b"".join(RESP)
        assert client.get(base, params={"stream": "true", "starting_after": 5}).content == b"".join(RESP[6:])
        assert client.get(base, params={"stream": "true", "starting_after": 99}).content == b""
        r = client.get(base, params={"stream": "true", "starting_after": "x"})
        assert r.status_code == 400 and r.json()["error"]["param"] == "starting_after"
        plain = client.get(base).json()
        assert plain["id"] == "resp_demo" and plain["status"] == "completed"
        assert [rec.resumed_after for rec in server.records()[:3]] == [None, "5", "99"]


def test_stored_response_cuts_each_get_where_told():
    stored = StoredResponse.from_frames(RESP, cuts=(10, None))
    with StandIn({}, stored={"resp_demo": stored}) as server, httpx.Client() as client:
        url = server.url("responses/resp_demo")
        with pytest.raises(httpx.RemoteProtocolError), client.stream("GET", url, params={"stream": "true"}) as r:
            got = bytearray()
            for chunk in r.iter_bytes():
                got += chunk
        assert bytes(got) == RESP[0][:10]
        assert client.get(url, params={"stream": "true", "starting_after": 0}).content == b"".join(RESP[1:])
        assert [rec.ending for rec in server.records()] == ["cut", "complete"]


def test_background_episode_is_stored_and_resumable():
    whole = StoredResponse.from_frames(RESP)
    script = {"bg": Episode([Send(f) for f in RESP[:7]] + [Cut()], store_as="resp_demo", stored=whole)}
    with StandIn(script) as server, httpx.Client() as client:
        with (
            pytest.raises(httpx.RemoteProtocolError),
            client.stream("POST", server.url("responses"), json={"model": "bg", "input": "hi", "stream": True}) as r,
        ):
            got = bytearray()
            for chunk in r.iter_bytes():
                got += chunk
        events, _ = parse(bytes(got))
        last_seq = json.loads(events[-1].data)["sequence_number"]
        rest = client.get(server.url("responses/resp_demo"), params={"stream": "true", "starting_after": last_seq})
        assert bytes(got) + rest.content == b"".join(RESP)


def test_cancel_stops_a_playing_background_stream():
    frames = shapes.responses_text_stream([f"w{i} " for i in range(100)], model="bg")
    script = {"bg": Episode(paced(frames, gap=0.01), store_as="resp_demo")}
    with StandIn(script) as server, httpx.Client() as client:
        with client.stream("POST", server.url("responses"), json={"model": "bg", "input": "hi", "stream": True}) as r:
            chunks = r.iter_bytes()
            next(chunks)
            cancel = client.post(server.url("responses/resp_demo/cancel"))
            assert cancel.status_code == 200 and cancel.json()["status"] == "cancelled"
            rest = b"".join(chunks)  # the stream ends cleanly soon after the cancel
        assert len(rest) < len(b"".join(frames))
        server.wait_idle()
        stream_rec = server.records()[0]
        assert stream_rec.ending == "cancelled" and stream_rec.frames_written < len(frames)
        assert client.get(server.url("responses/resp_demo")).json()["status"] == "cancelled"


# -- lifecycle, helpers, concurrency -----------------------------------------------------------------


def test_serve_replaces_the_previous_server():
    first = serve({"m": Episode([Send(CHAT[0])])})
    port = first.port
    second = serve({"m": Episode([Send(CHAT[1])])})
    try:
        assert not first.running and second.running
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            pass
        with httpx.Client() as client:
            assert post(client, second, "chat/completions", ASK).content == CHAT[1]
    finally:
        stop_serving()
    assert not second.running
    stop_serving()  # idempotent


def test_base_url_and_errors_before_start():
    server = StandIn({"m": Episode()})
    with pytest.raises(RuntimeError, match="not running"):
        server.base_url  # noqa: B018
    with server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.url("/responses") == server.base_url + "/responses"
        with pytest.raises(RuntimeError, match="already started"):
            server.start()


def test_concurrent_requests_are_all_recorded():
    with StandIn({"m": Episode(paced(CHAT, first=0.05, gap=0.01))}, usage="scripted") as server:
        results: list[bytes] = []

        def one() -> None:
            with httpx.Client() as client:
                results.append(post(client, server, "chat/completions", ASK).content)

        threads = [threading.Thread(target=one) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [b"".join(CHAT)] * 20
        server.wait_idle()
        records = server.records()
        assert sorted(r.index for r in records) == list(range(20))
        assert all(r.ending == "complete" for r in records) and server.requests_for("m") == 20


def test_script_validation_errors_are_clear():
    with pytest.raises(TypeError, match="step 1"):
        Episode([Send(b"x"), "wait"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="bytes"):
        Episode([Send("text")])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no episodes"):
        StandIn({"m": []})
    with pytest.raises(TypeError, match="episode 0"):
        StandIn({"m": [{"steps": []}]})  # type: ignore[list-item]
    with pytest.raises(ValueError, match="store_as"):
        Episode(stored=StoredResponse(()))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"", []),
        (b"data: a\n\n", [b"data: a\n\n"]),
        (b"data: a\r\n\r\ndata: b\r\rdata: c", [b"data: a\r\n\r\n", b"data: b\r\r", b"data: c"]),
        (b"\n\ndata: x\n", [b"\n", b"\n", b"data: x\n"]),
        (b": c\r\n\nid: 1\n\r", [b": c\r\n\n", b"id: 1\n\r"]),
    ],
)
def test_split_frames_cuts_at_blank_lines_and_is_lossless(raw, expected):
    assert split_frames(raw) == expected
    assert b"".join(split_frames(raw)) == raw


def test_derive_body_for_both_dialects():
    chat = derive_body(b"".join(CHAT), "chat", "m")
    assert chat is not None and chat["choices"][0]["message"]["content"] == "Hello w\u00f6rld"
    resp = derive_body(b"".join(RESP), "responses", "r")
    assert resp is not None and resp["status"] == "completed"
    assert derive_body(b"data: [DONE]\n\n", "chat", "m") is None


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_named_scenarios_play(name):
    with StandIn(scenario(name)) as server, httpx.Client() as client:
        (model,) = scenario(name)
        path = scenario_of(model).route
        given = {"input": "hi"} if path == "responses" else {"messages": HI}
        if name == "stall":  # endless keep-alives: read the first bytes only
            with client.stream("POST", server.url(path), json={"model": model, **given, "stream": True}) as r:
                got = b""
                for chunk in r.iter_bytes():
                    got += chunk
                    if b"still" in got:
                        break
                assert b'"content":"still "' in got
            return
        try:
            r = post(client, server, path, {"model": model, **given, "stream": True})
        except httpx.RemoteProtocolError:  # the scenarios that cut on purpose
            assert name in ("cutoff", "background", "tools-cut")
            return
        except httpx.ReadError:  # the one that resets the connection
            assert name == "reset"
            return
        assert r.status_code in (200, 429)
    with pytest.raises(ValueError, match="unknown scenario"):
        scenario("nope")


# -- the command line ------------------------------------------------------------------------------


def test_cli_standin_serves_a_scenario_until_ctrl_c():
    import re
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlab", "standin", "--scenario", "ttft", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        banner = "".join(lines)
        base = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", banner).group(1)
        assert f"curl -N {base}/chat/completions" in banner and '"model": "scheduled"' in banner
        assert f"OpenAI(base_url='{base}'" in banner
        with httpx.Client() as client:
            r = client.post(
                base + "/chat/completions",
                json={"model": "scheduled", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
            )
        events, truncated = parse(r.content)
        assert r.status_code == 200 and events[-1].data == "[DONE]" and not truncated
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert "stopped after 1 request(s)" in out and "Traceback" not in err
        assert "POST /v1/chat/completions model=scheduled status=200 complete" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_cli_standin_stops_cleanly_on_sigterm():
    import signal

    with streamlab_cli("standin", "--scenario", "ttft", "--port", "0", "--quiet") as proc:
        assert "streamlab stand-in" in proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)  # what `kill`, a process manager or a container stop sends
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "stopped after 0 request(s)" in out and "Traceback" not in err


def test_cli_standin_help_list_and_bad_scenario():
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "streamlab", "standin", *args], capture_output=True, text=True, timeout=30
        )

    assert "--scenario" in run("--help").stdout
    listed = run("--list").stdout
    assert all(name in listed for name in SCENARIOS)
    bad = run("--scenario", "nope", "--port", "0")
    assert bad.returncode == 2 and "unknown scenario" in bad.stderr
