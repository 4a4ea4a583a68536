"""The relay: its sans-IO rules (keep-alives that never change events, a marked end on every death, the
summary) and the reference relay on a real network path (stand-in, uvicorn, httpx, the official SDK).

Timing facts here are orderings or generous bounds on things that are scheduled far apart; nothing asserts
how fast the machine is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlab.core import shapes
from streamlab.core.endings import Ending, Outcome
from streamlab.core.harness.fixtures import load_fixture
from streamlab.core.relay.stream import (
    REQUIREMENTS,
    SUMMARY_FIELDS,
    RelayedStream,
    capture_name,
    marker_frame,
    raises_in_sdk,
    requirement,
)
from streamlab.core.sse import SSEEvent, parse
from streamlab.core.standin.script import Cut, Episode, KeepAlive, Send, Stall, Wait, error_episode, paced
from streamlab.net.relay.app import Relay
from streamlab.net.standin.server import StandIn

CHAT = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld ", "\U0001f600"], model="m")
RESP = shapes.responses_text_stream(["Hel", "lo ", "w\u00f6rld"], model="r")
CHAT_TEXT = "Hello w\u00f6rld \U0001f600"
RESP_TEXT = "Hello w\u00f6rld"

# An upstream with every framing a keep-alive could break: CRLF and CR line ends, multi-line data, event and id
# lines, comments, an event whose blank line comes in a later chunk.
TRICKY = (
    b"event: first\r\nid: 1\r\ndata: line one\r\ndata: line two\r\n\r\n"
    b': a comment\rdata: cr only\r\rdata: lf\n\nretry: 1500\nevent: x\ndata: {"k": "\xc3\xb6"}\n\n'
    b"data: a\r\ndata: b\r\n\r\n"
)


def relayed(
    chunks: list[bytes], *, beat_after_each: bool = True, dialect: str = "chat", beat_first: bool = False
) -> tuple[bytes, RelayedStream]:
    """Run chunks through a RelayedStream, asking for a keep-alive before and after each; the downstream bytes."""
    rs = RelayedStream(dialect=dialect, model="m")
    out = bytearray(rs.keepalive(0.0) if beat_first else b"")
    for i, chunk in enumerate(chunks):
        out += rs.upstream(chunk, float(i))
        if beat_after_each:
            out += rs.keepalive(float(i))
    return bytes(out), rs


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in zip(points, points[1:])]


# -- the rules as data --


def test_requirements_are_five_and_named_once():
    assert [r.number for r in REQUIREMENTS] == [1, 2, 3, 4, 5]
    assert requirement("keepalive").number == 3 and requirement(4).key == "marked-end"
    with pytest.raises(KeyError):
        requirement("nope")
    assert list(SUMMARY_FIELDS)[:2] == ["model", "outcome"]


# -- keep-alives never change the events --


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=12), st.booleans())
def test_keepalives_wherever_the_upstream_stalls_never_change_the_events(cuts, first):
    upstream = TRICKY
    down, rs = relayed(split(upstream, cuts), beat_first=first)
    assert parse(down) == parse(upstream)
    assert rs.keepalives >= 1


def test_keepalive_forms_at_each_kind_of_boundary():
    rs = RelayedStream(dialect="chat")
    rs.upstream(b'data: {"a": 1}\n\n', 0.0)
    assert rs.keepalive(1.0) == b": keep-alive\n\n"  # between events: the usual comment and blank line
    rs.upstream(b"data: one\n", 1.0)
    assert rs.keepalive(2.0) == b": keep-alive\n"  # inside an event: a blank line here would dispatch it early
    rs.upstream(b"data: tw", 2.0)
    assert rs.keepalive(3.0) == b""  # inside a line: never
    rs.upstream(b"o\r", 3.0)
    assert rs.keepalive(4.0) == b": keep-alive\r"  # after a CR: an LF from upstream must pair with our CR
    assert rs.keepalives == 3


def test_keepalive_before_a_bom_drops_the_bom_so_the_first_event_survives():
    upstream = b"\xef\xbb\xbfdata: first\n\n"
    for cuts in ([], [1], [2], [1, 2], [3]):
        down, rs = relayed(split(upstream, cuts), beat_first=True)
        assert parse(down) == parse(upstream) == ([SSEEvent(data="first")], False)
        assert b"\xef\xbb\xbf" not in down


# -- a marked final event on every death --


@pytest.mark.parametrize("dialect,frames", [("chat", CHAT), ("responses", RESP)])
@pytest.mark.parametrize("ending", [Ending.BROKEN, Ending.READ_TIMEOUT, Ending.COMPLETE])
def test_every_cut_offset_ends_with_a_marker_after_every_event_received(dialect, frames, ending):
    whole = b"".join(frames)
    terminal = len(whole)  # the terminal event ([DONE], response.completed) ends the stream
    for k in range(len(whole) + 1):
        rs = RelayedStream(dialect=dialect)
        down = rs.upstream(whole[: k // 2], 0.0) + rs.upstream(whole[k // 2 : k], 1.0)
        down += rs.upstream_ended(ending, 2.0)
        events, truncated = parse(down)
        received, _ = parse(whole[:k])
        assert not truncated, k  # the body ends on an event boundary
        assert events[: len(received)] == received, k  # nothing the upstream sent is lost or changed
        if k >= terminal:
            assert events == received and not rs.marked, k
            continue
        assert rs.marked and raises_in_sdk(events[-1]), k
        assert len(events) - len(received) in (1, 2), k  # the marker, after the event left open (if any)
        assert rs.outcome is Outcome.TRUNCATED


def test_an_error_the_sdk_raises_on_gets_no_second_marker_but_a_responses_error_event_does():
    chat = shapes.chat_error_stream(["Hel"])
    rs = RelayedStream(dialect="chat")
    rs.upstream(b"".join(chat), 0.0)
    assert rs.upstream_ended(Ending.COMPLETE, 1.0) == b"" and rs.outcome is Outcome.FAILED
    resp = shapes.responses_error_stream(["Hel"])
    rs = RelayedStream(dialect="responses")
    rs.upstream(b"".join(resp), 0.0)
    final = rs.upstream_ended(Ending.COMPLETE, 1.0)
    (event,), _ = parse(final)
    assert event.event == "error" and raises_in_sdk(event) and rs.outcome is Outcome.FAILED
    assert (
        json.loads(event.data)["sequence_number"]
        == json.loads(parse(b"".join(resp))[0][-1].data)["sequence_number"] + 1
    )


def test_marker_shapes():
    chat = json.loads(parse(marker_frame("chat", "upstream_broken", "cut"))[0][0].data)
    assert chat["error"]["code"] == "upstream_broken" and chat["error"]["message"] == "relay: cut"
    (ev,), _ = parse(marker_frame("responses", "upstream_stalled", "slow", sequence_number=7))
    obj = json.loads(ev.data)
    assert ev.event == "error" and obj["type"] == "error" and obj["sequence_number"] == 7 and obj["error"]


# -- the summary --


def test_summary_from_bytes_and_timestamps():
    rs = RelayedStream(dialect="chat", model="m", started=10.0)
    for i, frame in enumerate(shapes.chat_text_stream(["ab", "c\u00f6"], include_usage=True)):
        rs.upstream(frame, 10.5 + i)
    assert rs.upstream_ended(Ending.COMPLETE, 20.0) == b""
    s = rs.summary()
    assert list(s)[: len(SUMMARY_FIELDS)] == list(SUMMARY_FIELDS)
    assert (s["outcome"], s["text_chars"], s["ttft_s"], s["total_s"]) == ("complete", 4, 1.5, 10.0)
    assert s["usage"]["completion_tokens"] == 2 and s["marked"] is False


def test_client_gone_is_cancelled_unless_the_answer_had_ended():
    rs = RelayedStream(dialect="chat")
    rs.upstream(b"".join(CHAT[:3]), 0.0)
    rs.client_gone(1.0)
    assert rs.outcome is Outcome.CANCELLED and rs.ending is Ending.CLIENT_GONE
    rs = RelayedStream(dialect="chat")
    rs.upstream(b"".join(CHAT), 0.0)
    rs.client_gone(1.0)
    assert rs.outcome is Outcome.COMPLETE


def test_capture_name_is_a_safe_file_stem():
    assert capture_name(3, "gpt/4o mini") == "relay-0003-gpt_4o_mini"


# -- the reference relay on a real network path --------------------------------------------------------------

net = pytest.mark.net  # these tests open sockets (see tests/conftest.py)


def chat_deaths(frames: list[bytes], text_at: int) -> dict[str, Episode]:
    """Every way an upstream can die after its 200, for one dialect's frames (`text_at`: a frame with text)."""
    head = [Send(f) for f in frames[:text_at]]
    frame = frames[text_at]
    inside = frame.index("\u00f6".encode()) + 1
    return {
        "cut-between-events": Episode(head + [Cut()]),
        "cut-mid-line": Episode(head + [Send(frame[:20]), Cut()]),
        "cut-inside-utf8": Episode(head + [Send(frame[:inside]), Cut()]),
        "cut-before-blank-line": Episode(head + [Send(frame[:-1]), Cut()]),
        "reset": Episode(head + [Cut(reset=True)]),
        "reset-mid-line": Episode(head + [Send(frame[:20]), Cut(reset=True)]),
        "ended-early": Episode(head),
        "stall": Episode(head + [Stall()]),
    }


DEATHS = sorted(chat_deaths(CHAT, 3))


def _sends_of(frames: list[bytes]) -> list[Send]:
    return [Send(f) for f in frames]


def build_script() -> dict[str, Episode]:
    script: dict[str, Episode] = {
        "chat-ok": Episode(paced(CHAT, gap=0.002)),
        "resp-ok": Episode(paced(RESP, gap=0.002)),
        "chat-error-after-200": Episode([Send(f) for f in shapes.chat_error_stream(["Hel"])]),
        "resp-error-after-200": Episode([Send(f) for f in shapes.responses_error_stream(["Hel"])]),
        "halves": Episode(
            # 0.4 s inside the event: well under the relay's 1 s read timeout (a wait of 1 s raced it under load)
            [Send(CHAT[0]), Send(CHAT[1][:30]), Wait(0.4), Send(CHAT[1][30:])] + [Send(f) for f in CHAT[2:]]
        ),
        "stalls": Episode(
            [
                Send(CHAT[0]),
                Wait(0.5),
                Send(CHAT[1][:30]),
                Wait(0.5),
                Send(CHAT[1][30:-1]),
                Wait(0.5),
                Send(CHAT[1][-1:]),
                KeepAlive(),
            ]
            + [Send(f) for f in CHAT[2:]]
        ),
        "hang": Episode([Send(CHAT[0]), Stall()]),
        "busy": error_episode(429, "slow down", type="rate_limit_exceeded", retry_after_ms=200),
        "stored": Episode(_sends_of(RESP), store_as="resp_relayed"),
    }
    for name, ep in chat_deaths(CHAT, 3).items():
        script[f"chat-{name}"] = ep
    for name, ep in chat_deaths(RESP, 6).items():
        script[f"resp-{name}"] = ep
    return script


@pytest.fixture(scope="module")
def standin():
    with StandIn(build_script(), usage="scripted") as server:
        yield server


@pytest.fixture(scope="module")
def relay(standin):
    with Relay(standin.base_url, keepalive=0.1, read_timeout=1.0) as r:
        yield r


def summary_for(relay: Relay, model: str | None, timeout: float = 5.0, *, route: str | None = None) -> dict:
    """The latest summary for `model` (or for `route`), waiting for it: the relay writes it as the stream ends."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = [s for s in relay.summaries if (s["route"] == route if route else s["model"] == model)]
        if found:
            return found[-1]
        time.sleep(0.01)
    raise AssertionError(f"no summary for {model or route!r}: {relay.summaries}")


def sdk(relay: Relay) -> openai.OpenAI:
    return openai.OpenAI(base_url=relay.base_url, api_key="test", max_retries=0, timeout=10)


def sdk_run(client: openai.OpenAI, dialect: str, model: str) -> str:
    """The text the SDK returns for a stream (raises whatever the SDK raises)."""
    text = []
    if dialect == "chat":
        for chunk in client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            text += [c.delta.content or "" for c in chunk.choices]
    else:
        for event in client.responses.create(model=model, input="hi", stream=True):
            text += [event.delta] if event.type == "response.output_text.delta" else []
    return "".join(text)


@net
@pytest.mark.parametrize(
    "dialect,model,expected", [("chat", "chat-ok", CHAT_TEXT), ("responses", "resp-ok", RESP_TEXT)]
)
def test_the_sdk_through_the_relay_gets_identical_text_and_a_summary(relay, dialect, model, expected):
    assert sdk_run(sdk(relay), dialect, model) == expected
    s = summary_for(relay, model)
    assert (s["outcome"], s["text_chars"], s["marked"]) == ("complete", len(expected), False)
    assert 0 <= s["ttft_s"] <= s["total_s"]
    assert set(SUMMARY_FIELDS) <= set(s)


@net
@pytest.mark.parametrize("death", DEATHS)
@pytest.mark.parametrize("dialect", ["chat", "resp"])
def test_the_sdk_raises_on_every_upstream_death(relay, standin, dialect, death):
    model = f"{dialect}-{death}"
    with pytest.raises((openai.APIError, ValueError)) as info:
        sdk_run(sdk(relay), "chat" if dialect == "chat" else "responses", model)
    s = summary_for(relay, model)
    assert s["marked"] and s["outcome"] == "truncated", s
    if "mid-line" not in death and "utf8" not in death:  # otherwise the cut JSON line fails to decode first
        assert isinstance(info.value, openai.APIError) and "relay:" in str(info.value)


@net
@pytest.mark.parametrize("dialect", ["chat", "resp"])
def test_an_error_after_the_200_makes_the_sdk_raise(relay, dialect):
    model = f"{dialect}-error-after-200"
    with pytest.raises(openai.APIError):
        sdk_run(sdk(relay), "chat" if dialect == "chat" else "responses", model)
    assert summary_for(relay, model)["outcome"] == "failed"


def body(model: str) -> dict:
    """A streaming Chat Completions request body, with the messages the stand-in requires as the real API does."""
    return {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def stream_raw(relay: Relay, model: str, path: str = "chat/completions") -> tuple[bytes, list[tuple[float, bytes]]]:
    """POST a streaming request with httpx; the body and each chunk with its arrival time."""
    chunks = []
    with httpx.stream("POST", f"{relay.base_url}/{path}", json=body(model), timeout=10) as r:
        assert r.headers["cache-control"] == "no-cache" and r.headers["x-accel-buffering"] == "no"
        for chunk in r.iter_raw():
            chunks.append((time.perf_counter(), chunk))
    return b"".join(c for _, c in chunks), chunks


@net
def test_bytes_leave_before_their_event_is_complete(relay, standin):
    body, chunks = stream_raw(relay, "halves")
    # The client can hold every byte before the stand-in's thread has timed its last writes: wait for the record.
    assert standin.wait_until(lambda records: [r for r in records if r.model == "halves"][-1].finished)
    record = standin.records("halves")[-1]
    second_half_written = record.write_times[2]
    first_half = CHAT[0] + CHAT[1][:30]
    got_first_half = next(t for t, _ in _cumulative(chunks) if _ >= len(first_half))
    assert got_first_half < second_half_written  # forwarded while the upstream was still waiting
    assert parse(body) == parse(b"".join(CHAT))


def _cumulative(chunks: list[tuple[float, bytes]]) -> list[tuple[float, int]]:
    total, out = 0, []
    for t, c in chunks:
        total += len(c)
        out.append((t, total))
    return out


@net
def test_keepalives_during_stalls_leave_the_events_unchanged(relay, standin):
    body, _ = stream_raw(relay, "stalls")
    upstream = standin.records("stalls")[-1].written
    assert parse(body) == parse(upstream)
    assert body.count(b": keep-alive") >= 1  # at least the stall between events got one
    assert summary_for(relay, "stalls")["keepalives"] >= 1


@net
def test_a_client_that_leaves_closes_the_upstream(relay, standin):
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", f"{relay.base_url}/chat/completions", json=body("hang")) as r:
            next(r.iter_raw())
    assert standin.wait_until(lambda rs: [x.ending for x in rs if x.model == "hang"][-1:] == ["client_gone"], 5)
    assert summary_for(relay, "hang")["outcome"] == "cancelled"


@net
def test_a_background_response_streams_through_the_get_route(relay):
    with httpx.stream(
        "GET", f"{relay.base_url}/responses/resp_relayed", params={"stream": "true", "starting_after": "3"}
    ) as r:
        body = r.read()
    assert [e.data for e in parse(body)[0]] == [e.data for e in parse(b"".join(RESP[4:]))[0]]
    s = summary_for(relay, None, route="GET /v1/responses/resp_relayed")
    assert s["outcome"] == "complete" and s["text_chars"] == len(RESP_TEXT)  # the replay starts at the first delta


@net
def test_error_statuses_pass_through_with_their_retry_headers(relay):
    r = httpx.post(f"{relay.base_url}/chat/completions", json=body("busy"), timeout=10)
    assert r.status_code == 429 and r.headers["retry-after-ms"] == "200"
    assert r.json()["error"]["message"] == "slow down"
    with pytest.raises(openai.RateLimitError):
        sdk_run(sdk(relay), "chat", "busy")
    s = summary_for(relay, "busy")
    assert (s["outcome"], s["status"], s["ending"]) == ("failed", 429, "http_error")


@net
def test_an_unreachable_upstream_is_a_502_in_the_openai_shape(no_leaked_threads):
    with Relay("http://127.0.0.1:9/v1") as r:
        reply = httpx.post(f"{r.base_url}/chat/completions", json=body("x"), timeout=10)
        assert reply.status_code == 502 and reply.json()["error"]["code"] == "upstream_unreachable"
        assert r.wait_for_summaries(1) and r.summaries[0]["ending"] == "connect_error"


@net
def test_a_captured_stream_loads_back_as_a_fixture(standin, tmp_path, no_leaked_threads):
    with Relay(standin.base_url, capture=tmp_path) as r:
        body, _ = stream_raw(r, "chat-cut-mid-line")
        assert r.wait_for_summaries(1)
        name = capture_name(r.summaries[0]["id"], "chat-cut-mid-line")
    fixture = load_fixture(name, tmp_path)
    assert fixture.raw == standin.records("chat-cut-mid-line")[-1].written
    assert parse(fixture.raw) == (list(fixture.expected.events), fixture.expected.truncated)
    assert fixture.expected.truncated


@net
def test_stopping_the_relay_mid_stream_ends_it_marked_and_leaves_nothing_behind(standin, no_leaked_threads):
    relay = Relay(standin.base_url, keepalive=None).start()
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", f"{relay.base_url}/chat/completions", json=body("hang")) as r:
            it = r.iter_raw()
            got = next(it)
            relay.stop()
            got += b"".join(it)
    events, truncated = parse(got)
    assert not truncated and json.loads(events[-1].data)["error"]["code"] == "relay_stopped"


@net
def test_the_cli_prints_its_url_then_one_summary_line_per_stream(standin):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlab",
            "relay",
            "--upstream",
            standin.base_url,
            "--port",
            "0",
            "--keepalive",
            "0.2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().split()[-1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with httpx.stream("POST", f"{url}/chat/completions", json=body("chat-ok")) as r:
            r.read()
        line = json.loads(proc.stdout.readline())
        assert (line["model"], line["outcome"], line["text_chars"]) == ("chat-ok", "complete", len(CHAT_TEXT))
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


# -- the relay behind the chaos proxy: every fault, each direction ----------------------------------------------

CHAOS_FAULTS = {
    "latency": dict(latency_ms=30, jitter_ms=20),
    "bandwidth": dict(bandwidth=20_000),
    "slices": dict(slice_sizes=(1, 5)),
    "cut": dict(cut_after=...),
    "reset": dict(reset_after=...),
    "stall": dict(stall_after=...),
}
"""The faults; the terminal ones (`...`) fire 700 bytes into the stream coming down, or 100 bytes into the
request going up (inside its headers: the request is about 330 bytes), which comes first with "both"."""


def chaos_options(fault: str, direction: str) -> dict:
    after = 700 if direction == "down" else 100
    return {k: (after if v is ... else v) for k, v in CHAOS_FAULTS[fault].items()}


@pytest.fixture(scope="module")
def chaos_standin():
    with StandIn({"chat-ok": Episode(paced(CHAT, gap=0.002))}, usage="scripted") as server:
        yield server


@net
@pytest.mark.parametrize("direction", ["down", "up", "both"])
@pytest.mark.parametrize("fault", sorted(CHAOS_FAULTS))
def test_the_sdk_through_the_relay_and_the_chaos_proxy_never_mistakes_a_fault_for_an_answer(
    chaos_standin, fault, direction, no_leaked_threads
):
    from streamlab.net.chaos.proxy import ChaosProxy

    terminal = fault in ("cut", "reset", "stall")
    with (
        ChaosProxy(
            ("127.0.0.1", chaos_standin.port), direction=direction, seed=5, **chaos_options(fault, direction)
        ) as proxy,
        Relay(proxy.url("/v1"), keepalive=0.1, read_timeout=1.0) as r,
    ):
        if terminal:
            with pytest.raises((openai.APIError, ValueError)):
                sdk_run(sdk(r), "chat", "chat-ok")
        else:
            assert sdk_run(sdk(r), "chat", "chat-ok") == CHAT_TEXT
        assert r.wait_for_summaries(1)
        summary = r.summaries[0]
    if not terminal:
        assert summary["outcome"] == "complete"
    elif direction == "down":  # the stream had started: the relay marked its end
        assert summary["outcome"] == "truncated" and summary["marked"]
    else:  # the request itself was cut, reset or stalled: no stream ever started, an error status instead
        assert summary["outcome"] == "failed" and summary["status"] != 200 and not summary["marked"]


@net
def test_serve_relay_replaces_the_previous_one(standin, no_leaked_threads):
    from streamlab.net.relay.app import serve_relay, stop_relay

    first_url = serve_relay(standin.base_url).base_url
    second = serve_relay(standin.base_url, keepalive=None)
    try:
        with pytest.raises(httpx.ConnectError):
            httpx.post(f"{first_url}/chat/completions", json=body("chat-ok"), timeout=5)
        assert sdk_run(sdk(second), "chat", "chat-ok") == CHAT_TEXT
    finally:
        stop_relay()
