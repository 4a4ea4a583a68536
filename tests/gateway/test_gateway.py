"""The gateway on a real network path: two stand-ins, a chaos proxy in front of the primary, the official SDK.

What is proven here: a failure before the first event moves the request to the backup (the client gets the
backup's whole answer), a failure after it never does (the client gets an exception, never two answers
spliced); a breaker stops sending to a failing upstream within its threshold and lets exactly one probe through
after its cool-down (the cool-down passes on a hand-moved clock: no test sleeps through it); the /metrics page
parses with the Prometheus client's own parser; every log line is JSON with the documented fields.

Timing facts are orderings on scripted pauses far apart; states are waited on, never slept on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import ASK

from streamlab.core import shapes
from streamlab.core.gateway.log import LOG_FIELDS, tokens_of
from streamlab.core.relay.stream import SUMMARY_FIELDS
from streamlab.core.sse import parse
from streamlab.core.standin.script import (
    Cut,
    Episode,
    Send,
    Stall,
    StoredResponse,
    Wait,
    error_episode,
    paced,
)
from streamlab.net.gateway.app import Gateway, ManualClock, upstreams_from
from streamlab.net.gateway.bench import GatewayBench, response_offsets
from streamlab.net.gateway.metrics import FAMILIES
from streamlab.net.standin.server import StandIn

pytestmark = pytest.mark.net  # every test here opens sockets (see tests/conftest.py)

PRIMARY = ["alpha ", "beta ", "gamma ", "delta"]
BACKUP = ["uno ", "dos ", "tres"]
P_TEXT, B_TEXT = "".join(PRIMARY), "".join(BACKUP)
P_FRAMES = shapes.chat_text_stream(PRIMARY, model="m", completion_id="chatcmpl-primary")
B_FRAMES = shapes.chat_text_stream(BACKUP, model="m", completion_id="chatcmpl-backup")
R_FRAMES = shapes.responses_text_stream(["one ", "two ", "three ", "four"], response_id="resp_gw")


def primary_script() -> dict:
    return {
        "ok": Episode([Send(f) for f in P_FRAMES]),
        "storm": error_episode(429, "slow down", type="rate_limit_exceeded", retry_after_ms=50),
        "down": error_episode(503, "down"),
        "bad": error_episode(400, "messages is malformed", type="invalid_request_error"),
        "reset-first": Episode([Cut(reset=True)]),
        "cut-after-two": Episode([Send(f) for f in P_FRAMES[:3]] + [Cut()]),
        "stall-first": Episode([Stall()]),
        "slow-first": Episode([Wait(0.6)] + [Send(f) for f in P_FRAMES]),
        "late-cut": Episode([Wait(0.6), Cut()]),
        "with-id": Episode([Send(f) for f in P_FRAMES], headers={"x-request-id": "req_primary_42"}),
        "error-first": Episode([Send(shapes.chat_error_stream([])[-1])]),  # an error object, nothing before
        "hang": Episode([Send(P_FRAMES[0]), Send(P_FRAMES[1]), Stall()]),
        "probe": Episode([Wait(0.3)] + [Send(f) for f in P_FRAMES]),
        "bg": Episode(
            [Send(f) for f in R_FRAMES[:6]] + [Cut()], store_as="resp_gw", stored=StoredResponse.from_frames(R_FRAMES)
        ),
        "bg-elsewhere": error_episode(503, "down"),
        "late-cut-both": Episode([Wait(0.6), Cut()]),
    }


def backup_script() -> dict:
    models = [
        "ok",
        "storm",
        "down",
        "bad",
        "reset-first",
        "cut-after-two",
        "stall-first",
        "slow-first",
        "late-cut",
        "with-id",
        "error-first",
        "hang",
        "probe",
        "m",
    ]
    script: dict = {model: Episode([Send(f) for f in B_FRAMES]) for model in models}
    script["bg"] = Episode([Send(f) for f in shapes.responses_text_stream(BACKUP, response_id="resp_backup")])
    backup_frames = shapes.responses_text_stream(BACKUP, response_id="resp_on_backup")
    script["bg-elsewhere"] = Episode(
        [Send(f) for f in backup_frames], store_as="resp_on_backup", stored=StoredResponse.from_frames(backup_frames)
    )
    script["late-cut-both"] = error_episode(503, "down too")
    return script


@pytest.fixture
def bench():
    with GatewayBench(
        primary_script(), backup_script(), keepalive=0.2, read_timeout=0.5, failure_threshold=3, cooldown=30
    ) as b:
        yield b


def sdk(gw: Gateway, key: str = "test") -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=10)


def chat(client: openai.OpenAI, model: str, seen: list[str] | None = None) -> str:
    """The text the SDK yields (raises whatever it raises); `seen` collects it piece by piece."""
    seen = [] if seen is None else seen
    for chunk in client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True, stream_options={"include_usage": True}
    ):
        seen += [c.delta.content or "" for c in chunk.choices]
    return "".join(seen)


def last_log(gw: Gateway, count: int) -> dict:
    assert gw.wait_for_logs(count), gw.logs
    return gw.logs[count - 1]


# -- fallback: before the first event, never after ------------------------------------------------------


@pytest.mark.parametrize("model", ["down", "storm", "reset-first", "stall-first", "error-first"])
def test_a_primary_that_fails_before_the_first_event_is_replaced_whole_by_the_backup(bench, model):
    with sdk(bench.gateway) as client:
        assert chat(client, model) == B_TEXT
    log = last_log(bench.gateway, 1)
    assert (log["upstream"], log["failover"], log["attempts"], log["outcome"]) == ("backup", True, 2, "complete")
    assert [(t["upstream"], t["result"], t["move"]) for t in log["tried"]] == [
        ("primary", "fault", "fail_over"),
        ("backup", "ok", None),
    ]


def test_a_primary_that_fails_after_the_first_event_makes_the_sdk_raise_with_no_backup_text(bench):
    seen: list[str] = []
    with sdk(bench.gateway) as client, pytest.raises(openai.APIError, match="gateway|relay"):
        chat(client, "cut-after-two", seen)
    assert "".join(seen) == "alpha beta " and not set(BACKUP) & set(seen)
    log = last_log(bench.gateway, 1)
    assert (log["upstream"], log["failover"], log["outcome"], log["marked"]) == ("primary", False, "truncated", True)
    assert log["tried"][-1]["move"] == "marked_end"
    assert bench.backup.records() == []  # never asked


def test_the_async_sdk_gets_the_backups_whole_answer_or_an_exception_never_both(bench):
    async def read(model: str) -> tuple[str, str | None]:
        seen: list[str] = []
        async with openai.AsyncOpenAI(base_url=bench.gateway.base_url, api_key="async", max_retries=0) as client:
            try:
                stream = await client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": "x"}], stream=True
                )
                async for chunk in stream:
                    seen += [c.delta.content or "" for c in chunk.choices]
            except openai.APIError as exc:
                return "".join(seen), type(exc).__name__
        return "".join(seen), None

    assert asyncio.run(read("reset-first")) == (B_TEXT, None)
    assert asyncio.run(read("cut-after-two")) == ("alpha beta ", "APIError")


def test_failover_happens_exactly_up_to_the_first_event_at_every_cut_offset():
    """Cut (FIN) or reset (RST) the primary's response at offsets on both sides of the first event's end: the
    client gets the backup's whole answer, or an exception after a prefix of the primary's, never a mix. (A
    breaker that never opens, so that every request tries the primary first.)"""
    with (
        GatewayBench(
            primary_script(), backup_script(), keepalive=0.2, read_timeout=0.5, failure_threshold=1000
        ) as bench,
        sdk(bench.gateway) as client,
    ):
        assert chat(client, "ok") == P_TEXT
        assert bench.gateway.wait_for_logs(1)  # logged once the primary's whole body was read through the proxy
        offsets = response_offsets(P_FRAMES, bench.proxy.records()[0].bytes_down)
        cuts = sorted(
            {
                0,
                20,
                offsets.head - 1,
                offsets.head + 3,
                offsets.first_event - 1,
                offsets.first_event,
                offsets.first_event + 40,
                offsets.total - 10,
            }
        )
        outcomes = {}
        for fault in ("cut_after", "reset_after"):
            for at in cuts:
                bench.set_faults(**{fault: at})
                seen: list[str] = []
                try:
                    text = chat(client, "ok", seen)
                except (openai.APIError, ValueError):
                    text = None
                if text is None:
                    assert P_TEXT.startswith("".join(seen)) and not set(BACKUP) & set(seen), (fault, at, seen)
                    outcomes[fault, at] = "raised"
                else:
                    assert text in (P_TEXT, B_TEXT), (fault, at, text)  # never spliced
                    outcomes[fault, at] = "backup" if text == B_TEXT else "primary"
    for (fault, at), got in outcomes.items():
        expected = "backup" if at < offsets.first_event else "raised" if at < offsets.total else "primary"
        assert got == expected, (fault, at, offsets, sorted(outcomes.items()))


def test_a_slow_first_event_gets_keepalives_and_can_still_fail_over(bench):
    with httpx.Client(timeout=10) as client:
        with client.stream(
            "POST",
            f"{bench.gateway.base_url}/chat/completions",
            json={"model": "late-cut", "stream": True, "messages": ASK},
        ) as r:
            assert r.status_code == 200  # the head went out with the first keep-alive
            raw = r.read()
    assert raw.startswith(b": keep-alive\n\n")
    events, truncated = parse(raw)
    assert (
        not truncated
        and "".join(
            json.loads(e.data)["choices"][0]["delta"].get("content", "")
            for e in events
            if e.data != "[DONE]" and json.loads(e.data)["choices"]
        )
        == B_TEXT
    )
    assert last_log(bench.gateway, 1)["failover"] is True


def test_when_every_upstream_fails_after_the_head_went_out_the_stream_ends_marked(bench):
    with httpx.Client(timeout=10) as client:
        with client.stream(
            "POST",
            f"{bench.gateway.base_url}/chat/completions",
            json={"model": "late-cut-both", "stream": True, "messages": ASK},
        ) as r:
            raw = r.read()
    assert r.status_code == 200 and raw.startswith(b": keep-alive\n\n")  # too late for a 503: a marked end
    events, truncated = parse(raw)
    assert not truncated and [json.loads(e.data)["error"]["type"] for e in events] == ["relay_error"]
    with sdk(bench.gateway) as client, pytest.raises(openai.APIError):
        chat(client, "late-cut-both")


def test_a_request_that_is_not_a_stream_fails_over_too(bench):
    body = {"model": "down", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(timeout=10) as client:
        reply = client.post(f"{bench.gateway.base_url}/chat/completions", json=body)
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == B_TEXT
    log = last_log(bench.gateway, 1)
    assert (log["upstream"], log["failover"], log["ending"]) == ("backup", True, "not_event_stream")


def test_a_stored_response_is_retrieved_from_the_upstream_that_created_it(bench):
    with sdk(bench.gateway) as client:
        created = list(client.responses.create(model="bg-elsewhere", input="x", background=True, stream=True))
        assert created[0].response.id == "resp_on_backup"  # the primary failed: the backup created it
        again = list(client.responses.retrieve("resp_on_backup", stream=True, starting_after=3))
    assert [e.sequence_number for e in again] == list(range(4, len(created)))
    assert [r.method for r in bench.backup.records()] == ["POST", "GET"]
    assert [r.method for r in bench.primary.records()] == ["POST"]  # never asked for a response it does not hold


def test_an_error_of_the_request_itself_is_passed_through_without_failover(bench):
    with sdk(bench.gateway) as client, pytest.raises(openai.BadRequestError):
        chat(client, "bad")
    assert bench.backup.records() == []
    assert [t["move"] for t in last_log(bench.gateway, 1)["tried"]] == ["pass_error"]


def test_a_background_response_cut_after_its_first_events_is_resumed_on_the_same_upstream(bench):
    with sdk(bench.gateway) as client:
        events = list(client.responses.create(model="bg", input="count", background=True, stream=True))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "one two three four" and events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))  # each event once, in order
    log = last_log(bench.gateway, 1)
    assert (log["upstream"], log["resumes"], log["outcome"], log["request_id"]) == ("primary", 1, "complete", "resp_gw")
    assert [r.method for r in bench.primary.records()] == ["POST", "GET"] and bench.backup.records() == []


def test_a_client_that_leaves_closes_the_upstream(bench):
    with httpx.Client(timeout=10) as client:
        with client.stream(
            "POST",
            f"{bench.gateway.base_url}/chat/completions",
            json={"model": "hang", "stream": True, "messages": ASK},
        ) as r:
            next(r.iter_raw())
    assert bench.primary.wait_until(lambda rs: rs and rs[-1].ending == "client_gone")
    assert last_log(bench.gateway, 1)["outcome"] == "cancelled"


# -- the breaker ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["429 storm", "503", "resets", "stalls"])
def test_the_breaker_stops_traffic_within_its_threshold_and_probes_once_after_the_cooldown(bench, how):
    model = {"429 storm": "storm", "503": "down", "resets": "ok", "stalls": "ok"}[how]
    if how == "resets":
        bench.set_faults(reset_after=0)
    elif how == "stalls":
        bench.set_faults(stall_after=0)
    gw = bench.gateway
    with sdk(gw) as client:
        for _ in range(5):
            assert chat(client, model) == B_TEXT
            bench.clock.advance(1)
        assert primary_requests(gw, 5) == 3  # within the threshold, then nothing
        assert [log["tried"][0]["result"] for log in gw.logs] == ["fault"] * 3 + ["refused"] * 2
        assert gw.breakers["primary"].state == "open"
        bench.clock.advance(30)
        assert chat(client, model) == B_TEXT  # the probe fails
        assert primary_requests(gw, 6) == 4 and gw.breakers["primary"].state == "open"
        assert chat(client, model) == B_TEXT and primary_requests(gw, 7) == 4
        bench.set_faults()
        bench.clock.advance(30)
        assert chat(client, "ok") == P_TEXT  # the probe succeeds: closed again
        assert primary_requests(gw, 8) == 5 and gw.breakers["primary"].state == "closed"
    signals = [(t.before, t.after) for t in gw.breakers["primary"].transitions]
    assert signals == [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ]


def primary_requests(gw: Gateway, logs: int) -> int:
    """Requests sent to the primary over the first `logs` requests, from the gateway's log (a reset or a stall
    made by the proxy never reaches the stand-in's records)."""
    assert gw.wait_for_logs(logs)
    return sum(
        1 for log in gw.logs[:logs] for t in log["tried"] if t["upstream"] == "primary" and t["result"] != "refused"
    )


def test_half_open_lets_one_probe_through_while_others_go_to_the_backup(bench):
    gw = bench.gateway
    with sdk(gw) as client:
        for _ in range(3):
            chat(client, "down")
        bench.clock.advance(30)
        probe_text: list[str] = []
        probe = threading.Thread(target=lambda: probe_text.append(chat(sdk(gw, "probe-key"), "probe")))
        probe.start()
        try:
            assert bench.primary.wait_until(lambda rs: any(r.model == "probe" for r in rs))
            assert chat(client, "probe") == B_TEXT  # the probe is out: this one goes to the backup
        finally:
            probe.join(10)
    # The client holds the last byte before the gateway has told the breaker how the stream went: its log line
    # (written after) is the sign that it has. Five requests: three down, the probe, the one sent to the backup.
    assert gw.wait_for_logs(5)
    assert probe_text == [P_TEXT] and gw.breakers["primary"].state == "closed"
    assert [r.model for r in bench.primary.records()].count("probe") == 1


def test_when_every_breaker_is_open_the_answer_is_503_with_retry_after():
    with (
        StandIn({"m": error_episode(503, "down")}) as a,
        StandIn({"m": error_episode(502, "bad gateway")}) as b,
        Gateway([a.base_url, b.base_url], failure_threshold=1, cooldown=30, clock=ManualClock()) as gw,
        httpx.Client(timeout=10) as client,
    ):
        first = client.post(f"{gw.base_url}/chat/completions", json={"model": "m", "stream": True, "messages": ASK})
        assert first.status_code == 502  # the last upstream's own answer, passed on
        second = client.post(f"{gw.base_url}/chat/completions", json={"model": "m", "stream": True, "messages": ASK})
        assert second.status_code == 503 and second.headers["retry-after"] == "30"
        assert second.json()["error"]["code"] == "upstreams_unavailable"
        assert gw.wait_for_logs(2) and [t["result"] for t in gw.logs[1]["tried"]] == ["refused", "refused"]
        assert gw.logs[1]["upstream"] is None and gw.logs[1]["attempts"] == 0


# -- metrics and logs ----------------------------------------------------------------------------------------


def test_the_metrics_page_parses_with_the_prometheus_parser(bench):
    gw = bench.gateway
    with sdk(gw) as client:
        for model in ("ok", "down", "down", "down", "ok"):
            chat(client, model)
    assert gw.wait_for_logs(5)
    page = httpx.get(gw.metrics_url, timeout=5)
    assert page.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(page.text)}
    assert set(FAMILIES) <= set(families)

    def value(family: str, sample: str, **labels: str) -> float:
        return sum(
            s.value
            for s in families[family].samples
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
        )

    assert value("streamlab_gateway_ttft_seconds", "streamlab_gateway_ttft_seconds_count", upstream="primary") == 1
    assert value("streamlab_gateway_ttft_seconds", "streamlab_gateway_ttft_seconds_count", upstream="backup") == 4
    assert value("streamlab_gateway_stream_seconds", "streamlab_gateway_stream_seconds_count") == 5
    assert value("streamlab_gateway_endings", "streamlab_gateway_endings_total", outcome="complete") == 5
    assert (
        value("streamlab_gateway_attempts", "streamlab_gateway_attempts_total", upstream="primary", result="fault") == 3
    )
    assert (
        value("streamlab_gateway_attempts", "streamlab_gateway_attempts_total", upstream="primary", result="refused")
        == 1
    )
    assert value("streamlab_gateway_breaker_state", "streamlab_gateway_breaker_state", upstream="primary") == 2
    assert value("streamlab_gateway_breaker_state", "streamlab_gateway_breaker_state", upstream="backup") == 0
    assert value("streamlab_gateway_output_tokens", "streamlab_gateway_output_tokens_total") == 4 + 3 * 4
    assert page.text == gw.metrics_text() or "streamlab_gateway" in gw.metrics_text()


def test_two_gateways_keep_separate_counts(bench):
    with Gateway([bench.backup.base_url]) as other:
        with sdk(bench.gateway) as client:
            chat(client, "ok")
        assert bench.gateway.wait_for_logs(1)
        assert "streamlab_gateway_endings_total{" not in other.metrics_text()


def test_every_log_line_is_json_with_the_documented_fields(bench, caplog):
    gw = bench.gateway
    with caplog.at_level(logging.INFO, logger="streamlab.gateway"), sdk(gw) as client:
        for model in ("with-id", "down", "cut-after-two"):
            try:
                chat(client, model)
            except openai.APIError:
                pass
        assert gw.wait_for_logs(3)
        deadline = time.monotonic() + 10  # the lines are logged by the gateway's writer thread, just after
        while sum(r.name == "streamlab.gateway" for r in caplog.records) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = [r.getMessage() for r in caplog.records if r.name == "streamlab.gateway"]
    records = [json.loads(line) for line in lines]
    assert len(records) == 3 and all("\n" not in line for line in lines)
    for record in records:
        assert list(record)[: len(LOG_FIELDS)] == list(LOG_FIELDS)
        assert set(SUMMARY_FIELDS) <= set(record)  # a gateway log line is also a relay summary line
    with_id, failed_over, cut = records
    assert (with_id["request_id"], with_id["upstream"], with_id["attempts"], with_id["tokens"]) == (
        "req_primary_42",
        "primary",
        1,
        4,
    )
    assert with_id["ttft_s"] <= with_id["total_s"] and with_id["ending"] == "complete"
    assert (failed_over["request_id"], failed_over["upstream"], failed_over["failover"]) == (
        "chatcmpl-backup",
        "backup",
        True,
    )
    assert failed_over["tried"][0]["status"] == 503 and failed_over["tokens"] == 3
    assert (cut["ending"], cut["outcome"], cut["tokens"], cut["request_id"]) == (
        "broken",
        "truncated",
        None,
        "chatcmpl-primary",
    )
    assert gw.log_line(records[0]) == lines[0]


def test_tokens_are_read_from_either_dialects_usage():
    assert tokens_of({"prompt_tokens": 3, "completion_tokens": 7}) == 7
    assert tokens_of({"input_tokens": 3, "output_tokens": 9}) == 9
    assert tokens_of(None) is None and tokens_of({"completion_tokens": True}) is None


# -- configuration and the command line ---------------------------------------------------------------------


def test_upstreams_are_named_in_order_of_preference():
    ups = upstreams_from(["http://a/v1", "backup=http://b/v1", "http://c/v1", "http://d/v1"])
    assert [(u.name, u.url) for u in ups] == [
        ("primary", "http://a/v1"),
        ("backup", "http://b/v1"),
        ("tertiary", "http://c/v1"),
        ("upstream4", "http://d/v1"),
    ]
    with pytest.raises(ValueError, match="unique"):
        upstreams_from(["x=http://a/v1", "x=http://b/v1"])
    with pytest.raises(ValueError, match="http:// or https://"):
        upstreams_from(["ftp://a"])
    with pytest.raises(ValueError, match="at least one"):
        upstreams_from([])


def test_the_servers_socket_says_tcp_so_that_asyncio_turns_nagle_off():
    """asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP, and accepted sockets inherit the
    listening socket's proto. With proto 0, a head and a first chunk written back to back waited for the
    client's delayed ACK (measured: about 20 ms more time to first token through the relay, 45 through the
    gateway, on loopback)."""
    import socket

    with Gateway(["http://127.0.0.1:9/v1"]) as gw:
        listening = gw._server._sock  # AppServer binds it itself, before uvicorn takes it over
        assert listening is not None and listening.proto == socket.IPPROTO_TCP


def test_manual_clock_moves_only_forward():
    clock = ManualClock(5)
    assert clock() == 5 and clock.advance(2.5) == 7.5 and clock.set(10) == 10
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)


def test_stopping_the_gateway_mid_stream_ends_it_marked_and_leaves_nothing_behind(no_leaked_threads):
    with StandIn({"hang": Episode([Send(P_FRAMES[0]), Send(P_FRAMES[1]), Stall()])}) as server:
        gw = Gateway([server.base_url, server.base_url + "/"], keepalive=None).start()
        with httpx.Client(timeout=10) as client:
            body = {"model": "hang", "stream": True, "messages": ASK}
            with client.stream("POST", f"{gw.base_url}/chat/completions", json=body) as r:
                it = r.iter_raw()
                got = next(it)
                gw.stop()
                got += b"".join(it)
    events, truncated = parse(got)
    assert not truncated and json.loads(events[-1].data)["error"]["code"] == "relay_stopped"


def test_the_relay_cli_with_two_upstreams_runs_the_gateway():
    with StandIn({"m": error_episode(503, "down")}) as a, StandIn({"m": Episode(paced(B_FRAMES))}) as b:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlab",
                "relay",
                "--upstream",
                a.base_url,
                "--upstream",
                f"backup={b.base_url}",
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
            with sdk_url(url) as client:
                assert chat(client, "m") == B_TEXT
            record = json.loads(proc.stdout.readline())
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=10)
    assert (record["upstream"], record["failover"], record["outcome"]) == ("backup", True, "complete")
    assert "gateway" in err and proc.returncode == 0


def sdk_url(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="test", max_retries=0, timeout=10)
