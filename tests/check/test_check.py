"""`streamlab check`: every check on bytes alone, evidence that points at the bytes, and no crash on garbage.

The pure tests build probe results from the documented shapes (`streamlab.core.shapes`) and break one thing
at a time; the network tests put small raw socket servers in front of the checker (random bytes, an HTML page
with a 200, a server that closes at once, a line over the parser's limit, a stall, a refused key) and the
command line in front of a stand-in. What each provider profile must draw is in tests/standin/test_profiles.py.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
from collections.abc import Callable, Iterator

import pytest
from support import free_port, http_response

from streamlab.core import shapes
from streamlab.core.conformance.checks import (
    CHECK_IDS,
    CHECKS,
    ProbeResult,
    Report,
    Status,
    probes_for,
    render_matrix,
)
from streamlab.core.conformance.grade import grade, timing_facts
from streamlab.core.scan import scan
from streamlab.net.check import check_endpoint
from streamlab.tools.cli.main import main

SSE = (("content-type", "text/event-stream; charset=utf-8"),)
JSON = (("content-type", "application/json"),)
PROBES = {p.name: p for p in probes_for("both", "m")}
WORDS = ["One", ", two", ", three"]


def documented() -> dict[str, bytes]:
    """The OpenAI-exact body of every probe (the refusals as JSON)."""
    call = [("call_1", "get_weather", ('{"loc', 'ation": ', '"Paris"}'))]
    return {
        "chat.plain": b"".join(shapes.chat_text_stream(WORDS, include_usage=False)),
        "chat.usage": b"".join(shapes.chat_text_stream(WORDS)),
        "chat.tools": b"".join(shapes.chat_tool_call_stream(call, interleave=False, include_usage=False)),
        "chat.named": b"".join(
            shapes.chat_tool_call_stream(call, interleave=False, include_usage=False, finish_reason="stop")
        ),  # OpenAI's, for a named tool
        "chat.error": json.dumps(shapes.error_body("messages must be a list", "invalid_request_error")).encode(),
        "chat.not_json": json.dumps(
            shapes.error_body("We could not parse the JSON body of your request.", "invalid_request_error")
        ).encode(),
        "chat.too_long": json.dumps(
            shapes.error_body(
                "This model's maximum context length is 128000 tokens.",
                "invalid_request_error",
                "context_length_exceeded",
            )
        ).encode(),
        "responses.text": b"".join(shapes.responses_text_stream(WORDS)),
        "responses.tools": b"".join(shapes.responses_function_call_stream(['{"location":', ' "Paris"}'])),
        "responses.error": json.dumps(shapes.error_body("input must be a string", "invalid_request_error")).encode(),
    }


def results(**bodies: bytes | tuple[int, tuple[tuple[str, str], ...], bytes]) -> list[ProbeResult]:
    """Every probe's result: the documented body unless `bodies` replaces it (keyword: probe name with _ for .)."""
    base = documented()
    out = []
    for name, probe in PROBES.items():
        given = bodies.get(name.replace(".", "_"), base[name])
        if isinstance(given, tuple):
            status, headers, body = given
        else:
            refused = probe.kind in ("error", "not_json", "too_long")
            status, headers, body = (400, JSON, given) if refused else (200, SSE, given)
        out.append(ProbeResult(probe, status, headers, body, ((len(body), 0.01),), 0.005))
    return out


def verdicts(found: list) -> dict[str, Status]:
    return {f.check: f.status for f in found}


def issues(**bodies) -> dict[str, str]:
    return {f.check: f.status.value for f in grade(results(**bodies)) if f.status in (Status.WARN, Status.FAIL)}


def finding(check: str, **bodies):
    return next(f for f in grade(results(**bodies)) if f.check == check)


def frames(body: bytes) -> list[bytes]:
    return [f + b"\n\n" for f in body.split(b"\n\n") if f]


def chunk_json(body: bytes, k: int) -> dict:
    return json.loads(frames(body)[k][len(b"data: ") :])


def rebuild(parts: list[bytes | dict]) -> bytes:
    return b"".join(p if isinstance(p, bytes) else shapes.sse_frame(shapes.to_json(p)) for p in parts)


# -- the documented stream passes, and every check is graded ---------------------------------------------------


def test_the_documented_streams_pass_every_check_of_both_dialects() -> None:
    found = grade(results())
    assert [f.check for f in found] == list(CHECK_IDS)
    assert all(f.status is Status.PASS for f in found), [(f.check, f.detail) for f in found if f.status != "pass"]


def test_a_dialect_gets_only_its_own_checks() -> None:
    chat = [f.check for f in grade(results(), dialect="chat")]
    assert "responses.http" not in chat and "chat.done" in chat and "errors.in_stream" in chat
    resp = [f.check for f in grade(results(), dialect="responses")]
    assert "chat.done" not in resp and "responses.terminal" in resp and "error.status" in resp


def test_every_check_says_what_it_promises_and_why() -> None:
    for check in CHECKS.values():
        assert check.promises and check.why and check.group in ("chat", "usage", "tools", "errors", "responses")


# -- framing ------------------------------------------------------------------------------------------------------


def test_line_endings_are_noted_and_comments_tolerated() -> None:
    crlf = documented()["chat.plain"].replace(b"\n", b"\r\n")
    pinged = b": keep-alive\n\n" + documented()["chat.usage"]
    f = finding("chat.framing", chat_plain=crlf, chat_usage=pinged)
    assert f.status is Status.PASS
    assert "CRLF" in f.detail and "LF" in f.detail and "1 comment line(s), tolerated" in f.detail


def test_an_unknown_field_and_an_unfinished_event_fail_the_framing_with_their_bytes() -> None:
    body = documented()["chat.plain"]
    raw = b'{"choices": []}\n\n' + body
    f = finding("chat.framing", chat_plain=raw)
    assert f.status is Status.FAIL and "field name" in f.detail
    assert f.evidence.offset == 0 and "choices" in f.evidence.quote
    cut = body + b'data: {"id": "x"'
    f = finding("chat.framing", chat_plain=cut)
    assert f.status is Status.FAIL and "ends inside an event" in f.detail
    assert f.evidence.offset == len(body)


def test_a_named_event_in_a_chat_stream_is_a_warning() -> None:
    body = b'event: ping\ndata: {"type": "ping"}\n\n' + documented()["chat.plain"]
    f = finding("chat.framing", chat_plain=body)
    assert f.status is Status.WARN and "'ping'" in f.detail and f.evidence.event == 1


# -- [DONE] and the chunks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        (lambda b: b.replace(b"data: [DONE]\n\n", b""), "fail", "without data: [DONE]"),
        (lambda b: b + b"data: [DONE]\n\n", "warn", "sent 2 times"),
        (
            lambda b: b + shapes.sse_frame(shapes.to_json(shapes.chat_chunk([shapes.chat_choice({"content": "!"})]))),
            "fail",
            "after [DONE]",
        ),
    ],
)
def test_done_must_come_once_and_last(change: Callable[[bytes], bytes], status: str, words: str) -> None:
    f = finding("chat.done", chat_plain=change(documented()["chat.plain"]))
    assert f.status.value == status and words in f.detail


def test_evidence_locates_a_missing_finish_reason_by_event_and_offset() -> None:
    body = documented()["chat.plain"]
    second = chunk_json(body, 1)
    del second["choices"][0]["finish_reason"]
    parts = frames(body)
    changed = rebuild([parts[0], second, *parts[2:]])
    f = finding("chat.finish_null", chat_plain=changed)
    assert f.status is Status.WARN and f.evidence.probe == "chat.plain" and f.evidence.event == 2
    at = f.evidence.offset
    assert len(parts[0]) <= at < len(parts[0]) + len(frames(changed)[1])
    shown = eval(f.evidence.quote.strip("."))  # the quote is a bytes literal, perhaps with "..." around it
    assert changed[at : at + len(shown)] == shown


def test_role_missing_repeated_and_content_after_the_finish() -> None:
    body = documented()["chat.plain"]
    parts = frames(body)
    first, second = chunk_json(body, 0), chunk_json(body, 1)
    del first["choices"][0]["delta"]["role"]
    assert issues(chat_plain=rebuild([first, *parts[1:]])) == {"chat.role": "fail"}
    second["choices"][0]["delta"]["role"] = "assistant"
    assert issues(chat_plain=rebuild([parts[0], second, *parts[2:]])) == {"chat.role_repeated": "warn"}
    late = shapes.sse_frame(shapes.to_json(shapes.chat_chunk([shapes.chat_choice({"content": "late"})])))
    assert issues(chat_plain=rebuild([*parts[:-1], late, parts[-1]])) == {"chat.finish": "fail"}
    unfinished = [p for p in parts if b'"finish_reason":"stop"' not in p]
    assert issues(chat_plain=b"".join(unfinished)) == {"chat.finish": "fail"}


def test_chunk_shape_object_id_and_delta() -> None:
    body = documented()["chat.plain"]
    parts = frames(body)
    second = chunk_json(body, 1)
    assert issues(chat_plain=rebuild([parts[0], dict(second, object="chunk"), *parts[2:]])) == {"chat.object": "warn"}
    assert issues(chat_plain=rebuild([parts[0], dict(second, id="other"), *parts[2:]])) == {"chat.id": "warn"}
    assert issues(chat_plain=rebuild([parts[0], dict(second, choices=None), *parts[2:]])) == {"chat.delta": "fail"}
    assert issues(chat_plain=rebuild([parts[0], b"data: One\n\n", *parts[1:]])) == {"chat.json": "fail"}


# -- usage ----------------------------------------------------------------------------------------------------------


def usage_body(change: Callable[[list[dict | bytes]], list[dict | bytes]]) -> bytes:
    body = documented()["chat.usage"]
    parts: list[dict | bytes] = [chunk_json(body, k) for k in range(len(frames(body)) - 1)] + [frames(body)[-1]]
    return rebuild(change(parts))


def test_usage_rules() -> None:
    no_usage = usage_body(lambda p: p[:-2] + p[-1:])
    assert issues(chat_usage=no_usage) == {"usage.chunk": "fail"}
    assert verdicts(grade(results(chat_usage=no_usage)))["usage.counts"] is Status.SKIP

    running = usage_body(
        lambda p: [dict(c, usage=shapes.chat_usage(12, 1)) if isinstance(c, dict) and c["choices"] else c for c in p]
    )
    assert issues(chat_usage=running) == {"usage.chunk": "warn"}

    with_choice = usage_body(lambda p: p[:-2] + [dict(p[-2], choices=[{"index": 0, "delta": {}}])] + p[-1:])
    assert issues(chat_usage=with_choice) == {"usage.choices": "warn"}

    zero = usage_body(lambda p: p[:-2] + [dict(p[-2], usage=shapes.chat_usage(12, 0))] + p[-1:])
    f = finding("usage.counts", chat_usage=zero)
    assert f.status is Status.FAIL and "completion_tokens is 0" in f.detail

    wrong = usage_body(lambda p: p[:-2] + [dict(p[-2], usage={**p[-2]["usage"], "total_tokens": 99})] + p[-1:])
    f = finding("usage.counts", chat_usage=wrong)
    assert f.status is Status.FAIL and "total_tokens is 99" in f.detail


def test_usage_that_nobody_asked_for() -> None:
    asked = documented()["chat.usage"]
    assert issues(chat_plain=asked) == {"usage.unrequested": "fail"}  # a choices == [] chunk: chunk.choices[0] breaks
    parts = frames(asked)
    on_finish = chunk_json(asked, len(parts) - 3)
    on_finish["usage"] = shapes.chat_usage(12, 3)
    body = rebuild([*parts[:-3], on_finish, parts[-1]])
    assert issues(chat_plain=body) == {"usage.unrequested": "warn"}


# -- tool calls -------------------------------------------------------------------------------------------------------


def tools_body(
    fix: Callable[[dict], None] | None = None,
    *,
    finish: str = "tool_calls",
    calls=(("call_1", "get_weather", ('{"loc', 'ation": ', '"Paris"}')),),
) -> bytes:
    body = b"".join(
        shapes.chat_tool_call_stream(list(calls), interleave=False, include_usage=False, finish_reason=finish)
    )
    parts = frames(body)
    out: list[dict | bytes] = []
    for part in parts[:-1]:
        obj = json.loads(part[len(b"data: ") :])
        for frag in obj["choices"][0]["delta"].get("tool_calls") or []:
            if fix:
                fix(frag)
        out.append(obj)
    return rebuild(out + [parts[-1]])


def test_tool_call_rules() -> None:
    assert issues(chat_tools=tools_body()) == {}
    assert issues(chat_tools=tools_body(lambda f: f.pop("index"))) == {"tools.index": "fail"}
    assert issues(chat_tools=tools_body(lambda f: f.update(id="call_1", type="function"))) == {"tools.header": "warn"}
    assert issues(chat_tools=tools_body(lambda f: f.pop("id", None))) == {"tools.header": "fail"}
    assert issues(chat_tools=tools_body(finish="stop")) == {"tools.finish": "fail"}
    two = (("call_1", "get_weather", ('{"a": 1}',)), ("call_2", "get_weather", ('{"b": 2}',)))
    reused = tools_body(lambda f: f.update(index=0), calls=two)
    assert issues(chat_tools=reused) == {"tools.index": "fail"}
    broken = tools_body(calls=(("call_1", "get_weather", ('{"loc', 'ation": "Par')),))
    f = finding("tools.arguments", chat_tools=broken)
    assert f.status is Status.FAIL and '\'{"location": "Par\'' in f.detail


def test_no_tool_call_means_the_tool_checks_are_skipped_but_an_ignored_required_fails() -> None:
    text = documented()["chat.plain"]
    found = verdicts(grade(results(chat_tools=text, chat_named=text)))
    assert {found[c] for c in ("tools.index", "tools.header", "tools.name", "tools.arguments", "tools.finish")} == {
        Status.SKIP
    }
    assert found["tools.legacy"] is Status.PASS
    f = finding("tools.required", chat_tools=text, chat_named=text)
    assert f.status is Status.FAIL and 'tool_choice "required", but no tool was called' in f.detail
    assert f.evidence.probe == "chat.tools" and "finish_reason 'stop'" in f.detail
    named = finding("tools.named", chat_tools=text, chat_named=text)
    assert named.status is Status.FAIL and "tool_choice names 'get_weather', but no tool was called" in named.detail
    assert named.evidence.probe == "chat.named"


def test_a_named_call_passes_the_named_check_and_an_ignored_one_is_its_only_finding() -> None:
    assert finding("tools.named", chat_named=tools_body(finish="stop")).status is Status.PASS
    assert issues(chat_tools=tools_body(), chat_named=documented()["chat.plain"]) == {"tools.named": "fail"}


def test_an_ignored_required_is_graded_and_the_named_probe_still_grades_the_call() -> None:
    named = tools_body(finish="stop")  # OpenAI ends a named forced call with "stop": allowed there
    assert issues(chat_tools=documented()["chat.plain"], chat_named=named) == {"tools.required": "fail"}
    assert issues(chat_named=tools_body(finish="length")) == {"tools.finish": "fail"}
    assert issues(chat_tools=tools_body(finish="stop")) == {"tools.finish": "fail"}  # "required" says tool_calls


def test_arguments_are_parsed_only_once_complete() -> None:
    f = finding("tools.arguments", chat_tools=tools_body())
    assert f.status is Status.PASS and "8 fragments, parsed once complete" in f.detail  # 4 per tool probe


# -- errors -----------------------------------------------------------------------------------------------------------


def test_refusals() -> None:
    flat = json.dumps({"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}).encode()
    assert issues(chat_error=(400, JSON, flat), responses_error=(400, JSON, flat)) == {"error.shape": "fail"}
    assert issues(chat_error=(400, JSON, b'{"error": "bad"}')) == {"error.shape": "warn"}
    html = b"<html><body>Internal Server Error</body></html>"
    assert issues(chat_error=(500, (("content-type", "text/html"),), html)) == {
        "error.status": "fail",
        "error.shape": "fail",
    }
    f = finding("error.status", chat_error=(200, SSE, documented()["chat.plain"]))
    assert f.status is Status.FAIL and "accepted: the server answered it as if it were valid" in f.detail
    f = finding("error.status", chat_error=(200, SSE, b"".join(shapes.chat_error_stream([]))))
    assert f.status is Status.FAIL and "the refusal arrives inside a stream" in f.detail


def test_an_error_field_line_is_unrecognisable_and_located() -> None:
    body = documented()["chat.plain"][:200].rsplit(b"\n\n", 1)[0] + b'\n\nerror: {"message": "out of memory"}\n\n'
    f = finding("errors.in_stream", chat_plain=body)
    assert f.status is Status.FAIL and f.evidence.offset == body.index(b"error:")
    ok = shapes.chat_error_stream(WORDS[:1])
    assert finding("errors.in_stream", chat_plain=b"".join(ok)).status is Status.PASS


def test_a_responses_route_that_is_not_served_is_a_skip_that_says_so() -> None:
    gone = (404, JSON, b'{"detail": "Not Found"}')
    found = grade(results(responses_text=gone, responses_tools=gone, responses_error=gone))
    responses = [f for f in found if CHECKS[f.check].group == "responses"]
    assert {f.status for f in responses} == {Status.SKIP}
    assert all(
        "POST /responses answered HTTP 404: the server does not serve the Responses API" in f.detail for f in responses
    )
    assert verdicts(found)["error.status"] is Status.PASS  # chat's refusal only
    half = verdicts(grade(results(responses_tools=gone)))  # one route, two answers: that is a failure
    assert half["responses.http"] is Status.FAIL


# -- Responses -----------------------------------------------------------------------------------------------------


def responses_body(change: Callable[[list[dict]], list[dict]], *, event_lines: bool = True) -> bytes:
    return b"".join(shapes.responses_frames(change(shapes.responses_text_events(WORDS)), event_lines=event_lines))


def test_responses_rules() -> None:
    def rename(events):
        events[3] = dict(events[3], type="response.content_part.added")
        return events

    body = responses_body(lambda e: e).replace(b"event: response.output_text.delta", b"event: delta", 1)
    assert issues(responses_text=body) == {"responses.event_type": "fail"}
    assert issues(responses_text=responses_body(lambda e: e, event_lines=False)) == {"responses.event_type": "warn"}
    repeated = responses_body(lambda e: e).replace(b'"sequence_number":3', b'"sequence_number":2')
    assert issues(responses_text=repeated) == {"responses.sequence": "fail"}
    differs = responses_body(
        lambda e: [dict(x, text=x["text"] + "?") if x["type"] == "response.output_text.done" else x for x in e]
    )
    assert issues(responses_text=differs) == {"responses.done_matches": "fail"}
    assert issues(responses_text=responses_body(lambda e: e[:-1])) == {"responses.terminal": "fail"}
    assert issues(responses_text=responses_body(lambda e: e + e[-1:])) == {"responses.terminal": "fail"}
    no_usage = responses_body(lambda e: e[:-1] + [{**e[-1], "response": {**e[-1]["response"], "usage": None}}])
    assert issues(responses_text=no_usage) == {"responses.usage": "fail"}
    bad_args = b"".join(shapes.responses_function_call_stream(['{"location":', ' "Par']))
    assert issues(responses_tools=bad_args) == {"responses.arguments": "fail"}


# -- garbage never raises --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_garbage_bodies_are_graded_never_raised(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = [
        b"data: ",
        b"event: ",
        b"id: ",
        b": ",
        b"\n",
        b"\r",
        b"\r\n",
        b"{",
        b"}",
        b'"choices"',
        b"[DONE]",
        b"\xff",
        b"\xc3",
        b"error: ",
        b'"type":"response.completed"',
        b"retry: 9",
        b"\x00",
    ]
    garbage = {
        name.replace(".", "_"): b"".join(
            rng.choice(alphabet) if rng.random() < 0.7 else rng.randbytes(5) for _ in range(rng.randrange(0, 300))
        )
        for name in PROBES
    }
    found = grade(results(**garbage))
    assert [f.check for f in found] == list(CHECK_IDS)
    report = Report("http://x/v1", "m", "both", found, timing_facts(results(**garbage)))
    assert json.loads(report.to_json())["summary"]
    assert report.render()


def test_a_line_over_the_parsers_limit_is_a_framing_failure_with_its_offset() -> None:
    body = documented()["chat.plain"] + b"data: " + b"x" * (1024 * 1024 + 10)
    f = finding("chat.framing", chat_plain=body)
    assert f.status is Status.FAIL and "max_line_bytes" in f.detail
    assert f.evidence.offset == len(documented()["chat.plain"])


def test_scan_pins_each_event_to_its_block() -> None:
    body = b"\xef\xbb\xbfdata: 1\r\n\r\n: ping\n\nid: 7\nevent: x\ndata: 2\n\ndata: cut"
    sc = scan(body)
    assert [(b.start, b.number, b.event.data if b.event else None) for b in sc.blocks] == [
        (3, 1, "1"),
        (14, None, None),
        (22, 2, "2"),
        (46, None, None),
    ]
    assert sc.blocks[2].event.last_event_id == "7" and sc.blocks[2].event_line == "x"
    assert sc.tail is sc.blocks[3] and sc.line_endings().startswith("mixed")


# -- the report ------------------------------------------------------------------------------------------------


def test_the_report_card_its_json_and_exit_codes() -> None:
    clean = Report("http://x/v1", "m", "both", grade(results()), timing_facts(results()))
    assert clean.exit_code == 0 and clean.verdict == "pass"
    warned = Report(
        "http://x/v1",
        "m",
        "both",
        grade(results(chat_tools=tools_body(lambda f: f.update(id="call_1", type="function")))),
    )
    assert warned.exit_code == 0 and warned.issues() == {"tools.header": Status.WARN}
    failed = Report("http://x/v1", "m", "both", grade(results(chat_tools=tools_body(finish="stop"))))
    assert failed.exit_code == 1
    text = failed.render()
    assert "FAIL  tools.finish" in text and "evidence: chat.tools, event #" in text and "why: agent loops" in text
    doc = json.loads(failed.to_json())
    assert doc["exit_code"] == 1 and doc["verdict"] == "fail" and doc["version"] == 1
    entry = next(c for c in doc["checks"] if c["id"] == "tools.finish")
    assert set(entry) == {"id", "group", "status", "promises", "detail", "why", "evidence"}
    assert set(entry["evidence"]) == {"probe", "event", "offset", "bytes"}
    gone = Report("http://x/v1", "m", "chat", unreachable="connection refused")
    assert gone.exit_code == 2 and json.loads(gone.to_json())["error"] == "connection refused"


def test_timing_facts_come_from_the_arrival_of_each_event() -> None:
    body = b": ping\n\n" + documented()["chat.plain"] + b": ping\n\n"
    arrivals = ((8, 0.1), (len(body) - 8, 0.3), (len(body), 1.5))  # a ping, every event, a ping a while later
    probe = ProbeResult(PROBES["chat.plain"], 200, SSE, body, arrivals, 0.05)
    (fact,) = timing_facts([probe])
    assert (fact.headers, fact.first_content, fact.total, fact.max_gap) == (0.05, 0.3, 1.5, 0.0)
    assert fact.keepalives == 2 and fact.max_keepalive_interval == pytest.approx(1.4)
    assert fact.events == 6 and fact.bytes == len(body)


def test_the_matrix_text_twin() -> None:
    a = Report("a", "m", "both", grade(results()))
    b = Report("b", "m", "both", grade(results(chat_tools=tools_body(finish="stop"))))
    text = render_matrix({"exact": a, "other": b}, ["tools.finish", "chat.done"])
    assert text.splitlines()[1].split() == ["tools.finish", ".", "F"]
    assert text.splitlines()[2].split() == ["chat.done", ".", "."]


# -- over the network: garbage servers, refusals, the command line ---------------------------------------------


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
    )
    while len(body) < length:
        piece = conn.recv(65536)
        if not piece:
            return
        body += piece


@contextlib.contextmanager
def raw_server(reply: bytes | None, *, end: bool = True) -> Iterator[int]:
    """A raw server on 127.0.0.1 answering every connection with `reply` (None: close at once, unanswered);
    with `end=False` it then sends nothing more and keeps the connection open until the client leaves."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.05)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn, contextlib.suppress(OSError):
                conn.settimeout(5)
                if reply is not None:
                    _read_request(conn)
                    conn.sendall(reply)
                    if end:
                        conn.shutdown(socket.SHUT_WR)
                    conn.recv(1)  # wait for the client to close, so our close never resets the reply

    thread = threading.Thread(target=serve, name="raw-check-server", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


GARBAGE = random.Random(7).randbytes(3000)


@pytest.mark.net
@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (GARBAGE, "no HTTP response"),
        (None, "no HTTP response"),
        (
            http_response(b"<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"),
            "HTTP 200 text/html",
        ),
    ],
)
def test_garbage_servers_are_reported_not_raised(reply: bytes | None, words: str) -> None:
    with raw_server(reply) as port:
        report = check_endpoint(f"http://127.0.0.1:{port}/v1", model="m", timeout=5)
    assert report.exit_code == 1 and report.unreachable is None
    http = report.finding("chat.http")
    assert http.status is Status.FAIL and words in http.detail
    if reply is not None and b"html" in reply:
        assert "<html>" in http.evidence.quote
    assert report.render() and json.loads(report.to_json())["verdict"] == "fail"


@pytest.mark.net
@pytest.mark.parametrize("key", [None, "sk-wrong"], ids=["findings", "refused-key"])
def test_nothing_a_server_sends_acts_on_the_terminal_running_check(key: str | None) -> None:
    # A Content-Type and an error message with escape sequences (clear screen, a clipboard write by OSC 52, an
    # 8-bit CSI, a carriage return that overwrites the line) had reached the terminal through the report; "ü"
    # and a lone surrogate must not stop it where stdout is ASCII.
    import os
    import subprocess
    import sys

    message = "bad\x1b[2J key\x1b]52;c;cHduZWQ=\x07 \u009b31m\r\u00fc\ud800"
    body = json.dumps(shapes.error_body(message, "invalid_request_error", "invalid_api_key")).encode("ascii")
    status = "400 Bad Request" if key is None else "401 Unauthorized"
    reply = http_response(body, status=status, content_type="application/json\x1b[31m")
    with raw_server(reply) as port:
        command = [sys.executable, "-m", "streamlab", "check", f"http://127.0.0.1:{port}/v1", "--model", "m"]
        command += [] if key is None else ["--api-key", key]
        env = dict(os.environ, PYTHONIOENCODING="ascii")
        done = subprocess.run(command, capture_output=True, env=env, timeout=120)
    assert b"Traceback" not in done.stderr, done.stderr.decode("ascii", "replace")
    assert done.returncode == (1 if key is None else 2), done.stderr
    both = done.stdout + done.stderr
    assert both and not any(b in both for b in (b"\x1b", b"\x07", b"\x9b", b"\xc2\x9b", b"\r")), both[-2000:]
    assert b"\\x1b[" in both  # escaped, so what the server sent can still be read


@pytest.mark.net
def test_a_huge_line_is_cut_at_the_checkers_limits_and_reported() -> None:
    line = b"data: " + b"x" * (2 * 1024 * 1024)
    with raw_server(http_response(line)) as port:
        report = check_endpoint(f"http://127.0.0.1:{port}/v1", model="m", timeout=10)
        small = check_endpoint(f"http://127.0.0.1:{port}/v1", model="m", timeout=10, max_body_bytes=64 * 1024)
    framing = report.finding("chat.framing")
    assert framing.status is Status.FAIL and "max_line_bytes" in framing.detail  # seen in the bytes that came
    assert "stopped reading at the checker's limit of 65536 bytes (what never came is not a finding)" in small.probes[0]
    # the checker cut that stream itself, inside its first line: the end it never read is no finding
    assert {small.finding(c).status for c in ("chat.framing", "chat.done", "chat.finish")} == {Status.PASS}


@pytest.mark.net
def test_a_stalled_stream_is_cut_off_by_the_timeout_and_graded() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    first = shapes.chat_text_stream(WORDS)[0]
    stalled = head + b"%x\r\n%s\r\n" % (len(first), first)
    with raw_server(stalled, end=False) as port:
        report = check_endpoint(f"http://127.0.0.1:{port}/v1", model="m", timeout=0.5)
    assert "the body broke off" in report.probes[0] and "timed out" in report.probes[0]
    assert report.finding("chat.done").status is Status.FAIL and report.exit_code == 1


@pytest.mark.net
def test_refused_connections_and_keys_mean_could_not_be_checked(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    report = check_endpoint(url, model="m", timeout=5)
    assert report.exit_code == 2 and "Connection refused" in report.unreachable and not report.findings
    assert main(["check", url, "--model", "m", "--json"]) == 2
    out = capsys.readouterr()
    assert json.loads(out.out)["exit_code"] == 2 and "could not check" in out.err
    denied = http_response(
        json.dumps(
            shapes.error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key")
        ).encode(),
        status="401 Unauthorized",
        content_type="application/json",
    )
    with raw_server(denied) as port:
        report = check_endpoint(f"http://127.0.0.1:{port}/v1", model="m", api_key="sk-wrong", timeout=5)
    assert report.exit_code == 2 and report.unreachable == (
        "the endpoint refused the API key (HTTP 401): Incorrect API key provided"
    )


@pytest.mark.net
def test_the_command_line_against_the_stand_in(capsys: pytest.CaptureFixture[str]) -> None:
    from streamlab.net.standin.server import StandIn

    with StandIn({}, profile="openai") as server:
        assert main(["check", server.base_url, "--model", "any", "--dialect", "both"]) == 0
        table = capsys.readouterr().out
        assert main(["check", server.base_url, "--model", "any", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
    assert "38 pass, 0 warn, 0 fail, 0 skip: pass (exit 0)" in table and "timing (reported, never graded)" in table
    assert doc["summary"] == {"pass": 28, "warn": 0, "fail": 0, "skip": 0} and doc["dialect"] == "chat"
    with StandIn({}, profile="broken") as server:
        assert main(["check", server.base_url, "--model", "any", "--failures-only"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  chat.done" in out and "PASS" not in out


# -- made for real servers: bounded probes, the checker's own cuts, and what llama.cpp's servers send ----------------


def test_every_probe_bounds_generation_and_the_invalid_bodies_are_what_they_say() -> None:
    for probe in probes_for("both", "m", max_tokens=40):
        if probe.kind == "not_json":
            with pytest.raises(ValueError):
                json.loads(probe.content)
            continue
        assert probe.cap == (1 if probe.kind == "too_long" else 40), probe.name
        assert json.loads(probe.content) == dict(probe.body)
    long = PROBES["chat.too_long"].body["messages"][0]["content"]
    assert len(long) > 200_000  # over 50,000 tokens with the usual tokenizers: past a 32K context
    assert [p.name for p in probes_for("responses", "m")][-2:] == ["responses.not_json", "responses.too_long"]
    assert PROBES["chat.named"].body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


def llama_cpp_python_named() -> bytes:
    """A named call shaped as llama-cpp-python 0.3.36 streams it: a role-only first chunk, then every fragment
    with the call's id, type and whole name, `"role": null`, and the same fragment again as `function_call`."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**head, "choices": [{"index": 0, "finish_reason": finish, "logprobs": None, "delta": delta}]}

    parts: list[bytes | dict] = [
        chunk({"role": "assistant", "content": None, "function_call": None, "tool_calls": None})
    ]
    for piece in ('{"location"', ': "Paris, France"', "}"):
        fn = {"name": "get_weather", "arguments": piece}
        parts.append(
            chunk(
                {
                    "role": None,
                    "content": None,
                    "function_call": fn,
                    "tool_calls": [
                        {"index": 0, "id": "call__0_get_weather_cmpl-1", "type": "function", "function": fn}
                    ],
                }
            )
        )
    parts.append(chunk({"role": None, "content": None, "function_call": None, "tool_calls": None}, "tool_calls"))
    return rebuild([*parts, b"data: [DONE]\n\n"])


def test_llama_cpp_pythons_named_call_draws_each_of_its_quirks_with_evidence() -> None:
    body = llama_cpp_python_named()
    assert issues(chat_named=body) == {
        "tools.header": "warn",
        "tools.name": "fail",
        "tools.legacy": "warn",
        "chat.role_repeated": "warn",
    }
    name = finding("tools.name", chat_named=body)
    assert "repeats its whole name 'get_weather' in 3 fragments" in name.detail
    assert "'get_weatherget_weatherget_weather'" in name.detail and name.evidence.event == 3
    role = finding("chat.role_repeated", chat_named=body)
    assert '"role": null after its first delta' in role.detail and role.evidence.event == 2
    legacy = finding("tools.legacy", chat_named=body)
    assert "deprecated function_call beside tool_calls" in legacy.detail and "function_call" in legacy.evidence.quote
    assert finding("tools.arguments", chat_named=body).status is Status.PASS  # the arguments themselves join fine


def test_a_name_split_in_pieces_passes_and_an_unoffered_name_fails() -> None:
    split = b"".join(
        shapes.chat_tool_call_stream(
            [("call_1", "get_weather", ('{"a": 1}',))], split_header=True, interleave=False, include_usage=False
        )
    )
    assert finding("tools.name", chat_tools=split).status is Status.PASS
    other = tools_body(calls=(("call_1", "get_time", ('{"a": 1}',)),))
    f = finding("tools.name", chat_tools=other)
    assert f.status is Status.FAIL and "'get_time', not a function the request offered (get_weather)" in f.detail


def test_arguments_cut_by_the_checkers_max_tokens_are_not_a_finding_but_a_raw_newline_is() -> None:
    cut = tools_body(calls=(("call_1", "get_weather", ('{"loc', 'ation": "Par')),), finish="length")
    assert "tools.arguments" not in issues(chat_named=cut)
    newline = tools_body(calls=(("call_1", "get_weather", ('{"location": "Paris,\n', 'France"}')),))
    f = finding("tools.arguments", chat_tools=newline)
    assert f.status is Status.FAIL and "a raw control character, U+000A, inside a string" in f.detail


TRACEBACK = json.dumps(
    {
        "error": {
            "message": "1 validation error:\n  {'msg': 'Input should be a valid list'}\n\n  "
            'File "/srv/llama_cpp/server/app.py", line 376, in create_chat_completion',
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    }
).encode()


def test_a_500_with_a_traceback_says_so_and_points_at_it() -> None:
    f = finding("error.status", chat_error=(500, JSON, TRACEBACK))
    assert f.status is Status.FAIL and "not a client error, and the body carries a Python traceback" in f.detail
    assert "File" in f.evidence.quote and f.evidence.offset > 0
    assert finding("error.shape", chat_error=(500, JSON, TRACEBACK)).status is Status.PASS  # shaped, just a 500


PLAIN = (("content-type", "text/plain; charset=utf-8"),)


def test_a_body_that_is_not_json() -> None:
    assert issues() == {}  # the documented 400 passes
    f = finding("error.not_json", chat_not_json=(500, PLAIN, b"Internal Server Error"))
    assert f.status is Status.FAIL and f.detail == "chat.not_json: HTTP 500 text/plain: not a client error"
    assert f.evidence.quote == "b'Internal Server Error'"
    f = finding("error.not_json", chat_not_json=(400, PLAIN, b"bad request"))
    assert f.status is Status.FAIL and "the body is not JSON (text/plain), so there is no error.message" in f.detail
    f = finding("error.not_json", chat_not_json=(400, JSON, b'{"error": "bad"}'))
    assert f.status is Status.WARN
    f = finding("error.not_json", chat_not_json=(200, SSE, documented()["chat.plain"]))
    assert f.status is Status.FAIL and "accepted" in f.detail


def test_a_prompt_longer_than_the_context() -> None:
    f = finding("error.too_long", chat_too_long=(200, SSE, b""))
    assert f.status is Status.FAIL and "accepted, with an empty body: no event, no error" in f.detail
    f = finding("error.too_long", chat_too_long=(200, SSE, documented()["chat.plain"]))
    assert f.status is Status.SKIP and "fit the model's context: it was answered" in f.detail  # a big context
    error_event = b"".join(shapes.chat_error_stream([]))
    assert finding("error.too_long", chat_too_long=(200, SSE, error_event)).status is Status.WARN
    field = b'error: {"message": "the request exceeds the available context size"}\n\ndata: [DONE]\n\n'
    f = finding("error.too_long", chat_too_long=(200, SSE, field))
    assert f.status is Status.FAIL and "`error:` field line, which parsers ignore" in f.detail
    f = finding("error.too_long", chat_too_long=(500, JSON, TRACEBACK))
    assert f.status is Status.FAIL and "traceback" in f.detail
    waited = [
        r
        if r.name != "chat.too_long"
        else ProbeResult(r.request, None, cut="no response within the checker's deadline of 30 s")
        for r in results()
    ]
    f = next(f for f in grade(waited) if f.check == "error.too_long")
    assert f.status is Status.SKIP and "no answer before the checker's deadline" in f.detail


def llama_server_responses(events: list[dict] | None = None) -> bytes:
    """A Responses stream shaped as llama-server sends it: no sequence_number, output_index or content_index."""
    drop = ("sequence_number", "output_index", "content_index")
    body = b"".join(shapes.responses_frames(events or shapes.responses_text_events(WORDS)))
    frames_out = []
    for frame in frames(body):
        name, _, data = frame.partition(b"\ndata: ")
        obj = {k: v for k, v in json.loads(data).items() if k not in drop}
        frames_out.append(name + b"\ndata: " + json.dumps(obj).encode() + b"\n\n")
    return b"".join(frames_out)


def test_responses_events_without_their_indexes() -> None:
    body = llama_server_responses()
    assert issues(responses_text=body) == {"responses.sequence": "fail", "responses.indexes": "fail"}
    f = finding("responses.indexes", responses_text=body)
    assert "event #3 (response.output_item.added) has no integer output_index" in f.detail
    only_content = responses_body(lambda e: [{k: v for k, v in x.items() if k != "content_index"} for x in e])
    f = finding("responses.indexes", responses_text=only_content)
    assert f.status is Status.FAIL and "(response.content_part.added) has no integer content_index" in f.detail


def test_an_answer_stopped_by_max_output_tokens_must_end_incomplete() -> None:
    cap = PROBES["responses.text"].cap
    capped = responses_body(
        lambda e: (
            e[:-1] + [{**e[-1], "response": {**e[-1]["response"], "usage": shapes.responses_usage(output_tokens=cap)}}]
        )
    )
    f = finding("responses.incomplete", responses_text=capped)
    assert f.status is Status.FAIL and f"{cap} output tokens reached max_output_tokens ({cap})" in f.detail
    honest = b"".join(shapes.responses_text_stream(WORDS, terminal="response.incomplete"))
    f = finding("responses.incomplete", responses_text=honest)
    assert f.status is Status.PASS and "responses.text: response.incomplete" in f.detail
    assert "responses.text: response.completed at 3 of 40 tokens" in finding("responses.incomplete").detail


def cut(result: ProbeResult, at: int) -> ProbeResult:
    """`result` as the checker keeps it when it stops reading after `at` bytes itself."""
    return ProbeResult(
        result.request,
        result.status,
        result.headers,
        result.body[:at],
        ((at, 30.0),),
        0.01,
        cut="still sending after the checker's deadline of 30 s: stopped reading",
    )


def test_a_stream_the_checker_cut_itself_is_graded_on_what_came_and_its_missing_end_is_no_finding() -> None:
    base = results()
    halves = [cut(r, len(r.body) // 2) if r.is_event_stream else r for r in base]
    assert {f.check: f.status.value for f in grade(halves) if f.status in (Status.WARN, Status.FAIL)} == {}
    skipped = {f.check for f in grade(halves) if f.status is Status.SKIP}
    assert skipped >= {"usage.chunk", "usage.choices", "usage.counts"}
    broken = [
        r
        if not r.is_event_stream
        else ProbeResult(
            r.request, r.status, r.headers, r.body[: len(r.body) // 2], r.arrivals, 0.01, problem="the body broke off"
        )
        for r in base
    ]  # the same bytes, cut by the server: those are findings
    found = {f.check for f in grade(broken) if f.status is Status.FAIL}
    assert {"chat.done", "chat.finish", "usage.chunk", "responses.terminal"} <= found
    late = shapes.sse_frame(shapes.to_json(shapes.chat_chunk([shapes.chat_choice({"content": "!"})])))
    what_came = cut(results(chat_plain=documented()["chat.plain"] + late)[0], 10_000)
    assert "chat.done" in {f.check for f in grade([what_came, *base[1:]]) if f.status is Status.FAIL}


@contextlib.contextmanager
def one_request_per_connection(reply: bytes) -> Iterator[list[int]]:
    """A keep-alive server that answers one request per connection, then closes the connection without a byte when
    a second request arrives on it (what llama.cpp's servers do after a stream). Yields the port, then the count
    of requests refused that way."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.05)
    stop, refused = threading.Event(), [0]

    def one(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(5)
            _read_request(conn)
            conn.sendall(reply)
            if conn.recv(1):  # a second request on this connection: close, unanswered
                refused[0] += 1

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, name="keepalive-check-server", daemon=True)
    thread.start()
    try:
        yield [listener.getsockname()[1], refused]  # type: ignore[list-item]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.mark.net
def test_every_probe_goes_on_a_fresh_connection_so_a_closed_keep_alive_is_no_finding() -> None:
    body = documented()["chat.plain"]
    with one_request_per_connection(http_response(body)) as (port, refused):
        report = check_endpoint(f"http://127.0.0.1:{port}/v1", model="m", timeout=5)
    assert not any("no response" in line for line in report.probes), report.probes
    assert report.finding("chat.http").status is Status.PASS and refused[0] == 0


@pytest.mark.net
def test_a_stream_still_going_at_the_deadline_is_cut_and_not_a_finding() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    first = shapes.chat_text_stream(WORDS)[0]
    piece = shapes.sse_frame(shapes.to_json(shapes.chat_chunk([shapes.chat_choice({"content": " and on"})])))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def ramble() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                _read_request(conn)
                conn.sendall(head + b"%x\r\n%s\r\n" % (len(first), first))
                for _ in range(100):  # ten seconds of tokens, one every 0.1 s
                    conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                    threading.Event().wait(0.1)

    thread = threading.Thread(target=ramble, daemon=True)
    thread.start()
    try:
        report = check_endpoint(
            f"http://127.0.0.1:{listener.getsockname()[1]}/v1",
            model="m",
            timeout=5,
            deadline=0.6,
            probes=[PROBES["chat.plain"]],
        )
    finally:
        listener.close()
    assert "the checker's deadline of 0.6 s: stopped reading (what never came is not a finding)" in report.probes[0]
    assert not report.issues(), report.render(passes=False)
    (fact,) = report.timings
    assert fact.total < 2 and fact.events > 2


@pytest.mark.net
def test_the_deadline_falling_in_a_gap_between_tokens_is_the_checkers_cut_not_a_finding() -> None:
    # Issue 36: on a loaded machine a slow model's gap between two tokens outlasts the deadline; the checker's own
    # socket guard then shuts the socket, and that had been reported as "the body broke off" (a false FAIL).
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    first = shapes.chat_text_stream(WORDS)[0]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    done = threading.Event()

    def slow_model() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                _read_request(conn)
                conn.sendall(head)
                done.wait(0.8)  # a token late in the deadline: the next read's own timeout ends after the guard's
                conn.sendall(b"%x\r\n%s\r\n" % (len(first), first))
                done.wait(10)  # the next token is far away: the deadline falls inside this gap

    thread = threading.Thread(target=slow_model, daemon=True)
    thread.start()
    try:
        report = check_endpoint(
            f"http://127.0.0.1:{listener.getsockname()[1]}/v1",
            model="m",
            timeout=5,
            deadline=1.0,
            probes=[PROBES["chat.plain"]],
        )
    finally:
        done.set()
        listener.close()
    assert "the checker's deadline of 1 s: stopped reading (what never came is not a finding)" in report.probes[0]
    assert "broke off" not in report.probes[0]
    assert not report.issues(), report.render(passes=False)


@pytest.mark.net
def test_no_response_before_the_deadline_is_not_a_finding() -> None:
    with raw_server(b"", end=False) as port:  # reads the request, then says nothing
        report = check_endpoint(
            f"http://127.0.0.1:{port}/v1",
            model="m",
            timeout=5,
            deadline=0.3,
            probes=[PROBES["chat.plain"], PROBES["chat.too_long"]],
        )
    assert all("no response within the checker's deadline of 0.3 s (not a finding)" in p for p in report.probes)
    # Nothing came, so nothing was seen: no finding, and no pass either (could not be checked, exit 2).
    assert not report.issues() and not report.findings and report.exit_code == 2


def test_the_command_line_refuses_bounds_that_are_not_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "http://127.0.0.1:9/v1", "--model", "m", "--deadline", "0"]) == 2
    assert main(["check", "http://127.0.0.1:9/v1", "--model", "m", "--max-tokens", "0"]) == 2
    err = capsys.readouterr().err
    assert "--deadline must be a positive number" in err and "--max-tokens must be at least 1" in err


REAL = {
    "chat.plain": "chat-plain",
    "chat.usage": "include-usage",
    "chat.tools": "tool-choice-required",
    "chat.named": "tool-named",
    "chat.error": "error-messages-not-list",
    "chat.not_json": "error-not-json",
    "chat.too_long": "prompt-over-context",
}
"""Which real llama-cpp-python capture answers each Chat probe (streamlab.net.capture wrote them)."""


def test_the_real_llama_cpp_python_captures_draw_exactly_its_profiles_chat_quirks() -> None:
    from pathlib import Path

    from streamlab.core.standin.profiles import LLAMA_CPP_PYTHON_CAPTURES, PROFILES

    folder = Path(__file__).resolve().parents[2] / LLAMA_CPP_PYTHON_CAPTURES
    if not folder.is_dir():
        pytest.skip(f"no captures at {folder}")
    real = []
    for probe, name in REAL.items():
        record = json.loads((folder / f"{name}.json").read_text())
        headers = tuple((k.lower(), v) for k, v in record["response"]["headers"])
        body = (folder / f"{name}.sse").read_bytes()
        real.append(ProbeResult(PROBES[probe], record["response"]["status"], headers, body, ((len(body), 0.1),)))
    found = {f.check: f.status for f in grade(real, dialect="chat") if f.status in (Status.WARN, Status.FAIL)}
    quirks = PROFILES["llama-cpp-python"]
    assert found == {c: s for c, s in quirks.expected().items() if CHECKS[c].group != "responses"}
    assert {q.capture.rpartition("/")[2].removesuffix(".sse") for q in quirks.quirks} <= set(REAL.values())
    status = next(f for f in grade(real, dialect="chat") if f.check == "error.status")
    assert "a Python traceback" in status.detail  # the path is redacted in the capture; the file and line remain
