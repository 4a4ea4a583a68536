"""`streamlab check`: every check on bytes alone, evidence that points at the bytes, and no crash on garbage.

The pure tests build probe results from the documented shapes (`streamlab.core.shapes`) and break one thing
at a time; the network tests put small raw socket servers in front of the checker (random bytes, an HTML page
with a 200, a server that closes at once, a line over the parser's limit, a stall, a refused key) and the
command line in front of a stand-in. What each provider profile must draw is in tests/test_profiles.py.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from conftest import free_port, http_response
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
        "chat.error": json.dumps(shapes.error_body("messages must be a list", "invalid_request_error")).encode(),
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
            status, headers, body = (400, JSON, given) if probe.kind == "error" else (200, SSE, given)
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
    return json.loads(frames(body)[k][len(b"data: "):])


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


@pytest.mark.parametrize(("change", "status", "words"), [
    (lambda b: b.replace(b"data: [DONE]\n\n", b""), "fail", "without data: [DONE]"),
    (lambda b: b + b"data: [DONE]\n\n", "warn", "sent 2 times"),
    (lambda b: b + shapes.sse_frame(shapes.to_json(shapes.chat_chunk([shapes.chat_choice({"content": "!"})]))),
     "fail", "after [DONE]"),
])
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
    assert changed[at:at + len(shown)] == shown


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

    running = usage_body(lambda p: [dict(c, usage=shapes.chat_usage(12, 1)) if isinstance(c, dict) and c["choices"]
                                     else c for c in p])
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


def tools_body(fix: Callable[[dict], None] | None = None, *, finish: str = "tool_calls",
               calls=(("call_1", "get_weather", ('{"loc', 'ation": ', '"Paris"}')),)) -> bytes:
    body = b"".join(shapes.chat_tool_call_stream(list(calls), interleave=False, include_usage=False,
                                                 finish_reason=finish))
    parts = frames(body)
    out: list[dict | bytes] = []
    for part in parts[:-1]:
        obj = json.loads(part[len(b"data: "):])
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
    two = (("call_1", "get_weather", ('{"a": 1}',)), ("call_2", "get_time", ('{"b": 2}',)))
    reused = tools_body(lambda f: f.update(index=0), calls=two)
    assert issues(chat_tools=reused) == {"tools.index": "fail"}
    broken = tools_body(calls=(("call_1", "get_weather", ('{"loc', 'ation": "Par')),))
    f = finding("tools.arguments", chat_tools=broken)
    assert f.status is Status.FAIL and "'{\"location\": \"Par'" in f.detail


def test_no_tool_call_means_the_tool_checks_are_skipped_not_failed() -> None:
    found = verdicts(grade(results(chat_tools=documented()["chat.plain"])))
    assert {found[c] for c in ("tools.index", "tools.header", "tools.arguments", "tools.finish")} == {Status.SKIP}


def test_arguments_are_parsed_only_once_complete() -> None:
    f = finding("tools.arguments", chat_tools=tools_body())
    assert f.status is Status.PASS and "4 fragments, parsed once complete" in f.detail


# -- errors -----------------------------------------------------------------------------------------------------------


def test_refusals() -> None:
    flat = json.dumps({"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}).encode()
    assert issues(chat_error=(400, JSON, flat), responses_error=(400, JSON, flat)) == {"error.shape": "fail"}
    assert issues(chat_error=(400, JSON, b'{"error": "bad"}')) == {"error.shape": "warn"}
    html = b"<html><body>Internal Server Error</body></html>"
    assert issues(chat_error=(500, (("content-type", "text/html"),), html)) == {"error.status": "fail",
                                                                                 "error.shape": "fail"}
    f = finding("error.status", chat_error=(200, SSE, documented()["chat.plain"]))
    assert f.status is Status.FAIL and "inside a stream" in f.detail


def test_an_error_field_line_is_unrecognisable_and_located() -> None:
    body = documented()["chat.plain"][:200].rsplit(b"\n\n", 1)[0] + b'\n\nerror: {"message": "out of memory"}\n\n'
    f = finding("errors.in_stream", chat_plain=body)
    assert f.status is Status.FAIL and f.evidence.offset == body.index(b"error:")
    ok = shapes.chat_error_stream(WORDS[:1])
    assert finding("errors.in_stream", chat_plain=b"".join(ok)).status is Status.PASS


def test_a_responses_route_that_is_not_served() -> None:
    gone = (404, JSON, b'{"detail": "Not Found"}')
    found = verdicts(grade(results(responses_text=gone, responses_tools=gone, responses_error=gone)))
    assert found["responses.http"] is Status.FAIL
    assert found["responses.terminal"] is Status.SKIP and found["error.status"] is Status.PASS  # chat's refusal only


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
    differs = responses_body(lambda e: [dict(x, text=x["text"] + "?") if x["type"] == "response.output_text.done"
                                        else x for x in e])
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
    alphabet = [b"data: ", b"event: ", b"id: ", b": ", b"\n", b"\r", b"\r\n", b"{", b"}", b'"choices"', b"[DONE]",
                b"\xff", b"\xc3", b"error: ", b'"type":"response.completed"', b"retry: 9", b"\x00"]
    garbage = {name.replace(".", "_"): b"".join(rng.choice(alphabet) if rng.random() < 0.7 else rng.randbytes(5)
                                                 for _ in range(rng.randrange(0, 300)))
               for name in PROBES}
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
        (3, 1, "1"), (14, None, None), (22, 2, "2"), (46, None, None)]
    assert sc.blocks[2].event.last_event_id == "7" and sc.blocks[2].event_line == "x"
    assert sc.tail is sc.blocks[3] and sc.line_endings().startswith("mixed")


# -- the report ------------------------------------------------------------------------------------------------


def test_the_report_card_its_json_and_exit_codes() -> None:
    clean = Report("http://x/v1", "m", "both", grade(results()), timing_facts(results()))
    assert clean.exit_code == 0 and clean.verdict == "pass"
    warned = Report("http://x/v1", "m", "both", grade(results(chat_tools=tools_body(
        lambda f: f.update(id="call_1", type="function")))))
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
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length")), 0)
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
@pytest.mark.parametrize(("reply", "words"), [
    (GARBAGE, "no HTTP response"),
    (None, "no HTTP response"),
    (http_response(b"<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"),
     "HTTP 200 text/html"),
])
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
def test_a_huge_line_is_cut_at_the_checkers_limits_and_reported() -> None:
    line = b"data: " + b"x" * (2 * 1024 * 1024)
    with raw_server(http_response(line)) as port:
        report = check_endpoint(f"http://127.0.0.1:{port}/v1", model="m", timeout=10)
        small = check_endpoint(f"http://127.0.0.1:{port}/v1", model="m", timeout=10, max_body_bytes=64 * 1024)
    framing = report.finding("chat.framing")
    assert framing.status is Status.FAIL and "max_line_bytes" in framing.detail
    assert "stopped reading at the checker's limit of 65536 bytes" in small.probes[0]
    assert small.finding("chat.framing").status is Status.FAIL


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
    denied = http_response(json.dumps(shapes.error_body("Incorrect API key provided", "invalid_request_error",
                                                        "invalid_api_key")).encode(),
                           status="401 Unauthorized", content_type="application/json")
    with raw_server(denied) as port:
        report = check_endpoint(f"http://127.0.0.1:{port}/v1", model="m", api_key="sk-wrong", timeout=5)
    assert report.exit_code == 2 and report.unreachable == ("the endpoint refused the API key (HTTP 401): "
                                                            "Incorrect API key provided")


@pytest.mark.net
def test_the_command_line_against_the_stand_in(capsys: pytest.CaptureFixture[str]) -> None:
    from streamlab.net.standin.server import StandIn

    with StandIn({}, profile="openai") as server:
        assert main(["check", server.base_url, "--model", "any", "--dialect", "both"]) == 0
        table = capsys.readouterr().out
        assert main(["check", server.base_url, "--model", "any", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
    assert "30 pass, 0 warn, 0 fail, 0 skip: pass (exit 0)" in table and "timing (reported, never graded)" in table
    assert doc["summary"] == {"pass": 22, "warn": 0, "fail": 0, "skip": 0} and doc["dialect"] == "chat"
    with StandIn({}, profile="broken") as server:
        assert main(["check", server.base_url, "--model", "any", "--failures-only"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  chat.done" in out and "PASS" not in out
