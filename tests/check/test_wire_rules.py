"""One home for each wire rule (issue 35): every reader asks the same function, so none can disagree.

Whether a response is an event stream is `streamlab.core.sse.is_event_stream` (WHATWG: the essence before ";",
HTTP whitespace trimmed, ASCII case-insensitive). The client, `streamlab check`'s probes, `check-path`'s reads
and the captures had each written their own test (`split(";")[0].strip().lower()`, `startswith`), which said yes
to a value the standard refuses (a form feed is not HTTP whitespace) and no to one it accepts."""

from __future__ import annotations

import dataclasses

import httpx
import pytest
from support import http_response, one_shot_server

from streamlab.core.capture import fixture_from_capture, load_capture
from streamlab.core.conformance.checks import ProbeRequest, ProbeResult
from streamlab.core.endings import Ending
from streamlab.core.pathcheck.checks import PathRead
from streamlab.core.sse import is_event_stream
from streamlab.net.check import run_probe
from streamlab.net.eventstream import EventStream, describe_transport_error, transport_ending

CONTENT_TYPES = [
    "text/event-stream",
    "Text/Event-Stream; charset=UTF-8",
    " \ttext/event-stream ; charset=utf-8",
    "text/event-stream\x0c",  # a form feed: str.strip() removed it, HTTP whitespace does not include it
    "\x0btext/event-stream",  # a vertical tab, likewise
    "text/event-stream-x",
    "text/event-streams",
    "application/json",
    "text/html; charset=utf-8",
    "",
]


def _probe(content_type: str) -> ProbeResult:
    request = ProbeRequest("p", "chat", "chat/completions", "text", {})
    return ProbeResult(request, 200, (("content-type", content_type),))


def _path(content_type: str) -> PathRead:
    return PathRead("path", "http://127.0.0.1/v1/chat/completions", "m", 200, headers=(("content-type", content_type),))


def _client(content_type: str) -> bool:
    stream = EventStream("http://127.0.0.1:9/v1/chat/completions", {})
    return stream._opened(httpx.Response(200, headers={"content-type": content_type}))


@pytest.mark.parametrize("value", CONTENT_TYPES, ids=repr)
def test_every_reader_asks_the_one_rule(value: str) -> None:
    want = is_event_stream(value)
    assert _probe(value).is_event_stream is want, "streamlab check"
    assert _path(value).is_event_stream is want, "streamlab check-path"
    assert _client(value) is want, "the client"


def test_the_rule_refuses_what_the_standard_refuses() -> None:
    assert is_event_stream("Text/Event-Stream; charset=UTF-8") and is_event_stream(" \ttext/event-stream ;x=y")
    assert not is_event_stream("text/event-stream\x0c") and not is_event_stream("\x0btext/event-stream")


def test_a_capture_is_an_event_stream_by_the_same_rule() -> None:
    """A capture whose Content-Type is spelled in capitals is still an event stream (`startswith` had refused it)."""
    capture = load_capture("chat-plain")
    record = {**capture.record, "response": {**capture.record["response"]}}
    record["response"]["headers"] = [
        [k, "Text/Event-Stream; charset=UTF-8" if k.lower() == "content-type" else v]
        for k, v in capture.record["response"]["headers"]
    ]
    shouting = dataclasses.replace(capture, record=record)
    assert shouting.content_type == "Text/Event-Stream; charset=UTF-8"
    assert fixture_from_capture(shouting).raw == fixture_from_capture(capture).raw


# -- one httpx mapping: streamlab.net.eventstream.TRANSLATE, its ending and its words -------------------------------


def _reset() -> httpx.ReadError:
    exc = httpx.ReadError("[Errno 104] Connection reset by peer")
    exc.__cause__ = ConnectionResetError(104, "Connection reset by peer")
    return exc


@pytest.mark.parametrize(
    ("exc", "reading", "ending"),
    [
        (httpx.ReadTimeout("slow"), True, Ending.READ_TIMEOUT),
        (httpx.WriteTimeout("slow"), True, Ending.READ_TIMEOUT),
        (httpx.ConnectTimeout("slow"), False, Ending.CONNECT_ERROR),
        (httpx.ConnectError("refused"), False, Ending.CONNECT_ERROR),
        (httpx.RemoteProtocolError("cut"), True, Ending.BROKEN),
        (httpx.UnsupportedProtocol("ftp"), False, Ending.INVALID_REQUEST),
        (_reset(), True, Ending.BROKEN),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_one_mapping_names_the_ending_the_client_raises(exc: httpx.HTTPError, reading: bool, ending: Ending) -> None:
    assert transport_ending(exc, reading=reading) is ending


def test_the_words_for_what_broke() -> None:
    assert describe_transport_error(_reset(), reading=True, peer="the upstream") == "reset by the upstream"
    cut = httpx.RemoteProtocolError("peer closed connection without sending complete message body")
    said = describe_transport_error(cut, reading=True)
    # httpx's own words stay: lab 13 tells HTTP/1.1's incomplete chunked read from HTTP/2's StreamReset by them
    assert said == "closed by the server before the end of the body: " + str(cut)
    assert describe_transport_error(cut, reading=False).startswith("the reply is not valid HTTP/1.1, or the server")
    assert describe_transport_error(httpx.ReadTimeout("x"), reading=True) == "timed out (ReadTimeout)"
    assert len(describe_transport_error(httpx.ReadError("x" * 500), reading=True)) == 200


@pytest.mark.net
def test_check_says_a_body_cut_mid_way_was_closed_not_invalid_http() -> None:
    """`streamlab check` had worded a body cut after its headers as "the reply is not valid HTTP/1.1, or the
    server closed the connection": its own description of a failure before the headers."""
    reply = http_response(b"data: {}\n\n", content_length=1000)  # promises 1000 bytes, sends 10, closes
    probe = ProbeRequest("p", "chat", "chat/completions", "text", {"model": "m"})
    with one_shot_server(reply) as port, httpx.Client(trust_env=False) as client:
        result = run_probe(client, f"http://127.0.0.1:{port}/v1", probe, timeout=5, deadline=5)
    assert result.status == 200 and result.body == b"data: {}\n\n"
    assert result.problem.startswith(
        "the body broke off after 10 bytes: closed by the server before the end of the body"
    )


# -- one sequence rule: the checker grades servers by the rule the library reads them with --------------------------


def test_check_does_not_fail_a_server_for_a_keepalive_that_repeats_a_number() -> None:
    """The live API numbers keep-alives like any other event; one repeated (a resumed stream sends it again) is
    harmless to the cursor and the accumulator, so `streamlab check` does not fail it either. Content that
    repeats a number still fails."""
    from .test_check import issues, responses_body

    with_keepalive = responses_body(lambda e: e[:3] + [{"type": "keepalive"}] + e[3:])
    assert b'{"type":"keepalive","sequence_number":3}' in with_keepalive
    repeated = with_keepalive.replace(
        b'{"type":"keepalive","sequence_number":3}', b'{"type":"keepalive","sequence_number":2}'
    )
    assert issues(responses_text=with_keepalive) == issues(responses_text=repeated) == {}
    replayed = responses_body(lambda e: e).replace(b'"sequence_number":3', b'"sequence_number":2')
    assert issues(responses_text=replayed) == {"responses.sequence": "fail"}
