"""`streamlab check-path`: the path between a server and a reader graded from when its bytes arrived.

The pure tests build reads from the documented chunk shapes with chosen arrival times and break one thing at a time
(a first event held back, a compressed stream, a dropped header, a cut, a response held open, a keep-alive stream
cut). The network tests put the real proxies (nginx from the operating system's packages, Caddy from the `proxies`
extra) in front of the real stand-in, on loopback, and run the checker and its command line: nginx with gzip is
reported with its evidence, Caddy and the direct route pass, a short idle timeout cutting a slow stream is reported,
each run well under 60 s. Those skip, saying what to install, only where the program is missing. The stand-in sends
five events 0.4 s apart: buffered, they all arrive within a few milliseconds at the end (about 2 s), so every
comparison has a margin of a second or more.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from streamlab import Episode, StandIn, chat_text_stream, paced, scenario
from streamlab.core.conformance.checks import Status
from streamlab.core.endings import Ending
from streamlab.core.pathcheck.checks import PATH_CHECK_IDS, PathRead, PathReads, PathReport, chat_url
from streamlab.core.pathcheck.grade import grade_path
from streamlab.core.proxy.base import install_hint
from streamlab.core.proxy.caddy import CaddyOptions
from streamlab.core.proxy.nginx import NginxOptions
from streamlab.net.pathcheck import check_path
from streamlab.net.proxy.caddy import CaddyProxy, caddy_program
from streamlab.net.proxy.nginx import NginxProxy, nginx_program
from streamlab.tools.cli.main import main

NEEDS_NGINX = pytest.mark.skipif(nginx_program() is None, reason=install_hint("nginx"))
NEEDS_CADDY = pytest.mark.skipif(caddy_program() is None, reason=install_hint("caddy"))

FRAMES = chat_text_stream(["one ", "two "], model="m", include_usage=False)  # role, 2 words, finish, [DONE]
SSE = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))
PACED = [0.4, 0.8, 1.2, 1.6, 2.0]
TOGETHER = [2.0, 2.001, 2.001, 2.002, 2.002]


def a_read(
    name: str = "path",
    times: list[float] = PACED,
    *,
    frames: list[bytes] = FRAMES,
    headers: tuple[tuple[str, str], ...] = SSE,
    status: int | None = 200,
    ending: Ending = Ending.COMPLETE,
    ended_at: float | None = None,
    headers_at: float | None = 0.01,
    problem: str | None = None,
    new_connection: bool | None = True,
) -> PathRead:
    """A read whose frames arrived at `times` (one network read each)."""
    body, arrivals = b"", []
    for frame, at in zip(frames, times):
        body += frame
        arrivals.append((len(body), at))
    end = ended_at if ended_at is not None else (times[-1] if times else headers_at)
    return PathRead(
        name, "http://127.0.0.1:1/v1/chat/completions", "m", status, "HTTP/1.1", headers, body, tuple(arrivals),
        tuple(arrivals), headers_at, end, ending, problem, new_connection,
    )  # fmt: skip


def graded(reads: PathReads) -> dict[str, object]:
    return {f.check: f for f in grade_path(reads)}


def status_of(reads: PathReads) -> dict[str, Status]:
    return {f.check: f.status for f in grade_path(reads)}


# -- buffering and compression, on values ---------------------------------------------------------------------------


def test_a_first_event_held_back_against_the_direct_route_fails_with_the_event_quoted() -> None:
    gz = (*SSE, ("content-encoding", "gzip"))
    reads = PathReads(a_read(times=TOGETHER, headers=gz, headers_at=2.0), direct=a_read("direct"))
    found = {f.check: f for f in grade_path(reads)}
    buffering = found["path.buffering"]
    assert buffering.status is Status.FAIL and "held back 1.60 s" in buffering.detail
    assert "5 of 5 events arrived within 50 ms" in buffering.detail and "headers at 2.00 s" in buffering.detail
    assert buffering.evidence is not None and (buffering.evidence.probe, buffering.evidence.event) == ("path", 1)
    assert buffering.evidence.offset == 0 and buffering.evidence.quote.startswith("b'data: {")
    compression = found["path.compression"]
    assert compression.status is Status.FAIL and "(added by the path)" in compression.detail
    assert compression.evidence is not None and "content-encoding: gzip" in compression.evidence.quote


def test_events_that_flow_pass_and_a_slightly_late_first_event_warns() -> None:
    assert status_of(PathReads(a_read(), direct=a_read("direct")))["path.buffering"] is Status.PASS
    late = a_read(times=[t + 0.3 for t in PACED])
    assert status_of(PathReads(late, direct=a_read("direct")))["path.buffering"] is Status.WARN


def test_without_a_direct_route_a_whole_answer_at_once_fails_but_a_short_one_does_not() -> None:
    found = graded(PathReads(a_read(times=TOGETHER)))
    assert found["path.buffering"].status is Status.FAIL
    assert "no --direct to compare with" in found["path.buffering"].detail
    assert status_of(PathReads(a_read()))["path.buffering"] is Status.PASS
    short = a_read(times=[0.5, 0.5, 0.5], frames=FRAMES[:2] + FRAMES[-1:])
    assert status_of(PathReads(short))["path.buffering"] is Status.PASS, "three events at once prove nothing"


def test_a_compressed_stream_that_flows_is_a_warning_and_the_server_own_compression_is_named() -> None:
    gz = (*SSE, ("content-encoding", "gzip"))
    found = graded(PathReads(a_read(headers=gz), direct=a_read("direct", headers=gz)))
    assert found["path.compression"].status is Status.WARN
    assert "(sent by the server itself)" in found["path.compression"].detail


# -- headers, the HTTP version, the end ------------------------------------------------------------------------------


def test_a_dropped_header_warns_quoting_it_and_nginx_own_header_is_only_noted() -> None:
    direct = a_read("direct", headers=(*SSE, ("x-request-id", "req_1"), ("x-accel-buffering", "no")))
    path = a_read(headers=(*SSE, ("via", "1.1 proxy"), ("x-cache", "MISS")))
    found = graded(PathReads(path, direct=direct))
    headers = found["path.headers"]
    assert headers.status is Status.WARN and "dropped x-request-id" in headers.detail
    assert "x-accel-buffering: nginx reads it" in headers.detail and "added: x-cache" in headers.detail
    assert headers.evidence is not None and headers.evidence.probe == "direct"
    assert "x-request-id: req_1" in headers.evidence.quote
    consumed = graded(PathReads(a_read(), direct=a_read("direct", headers=(*SSE, ("x-accel-buffering", "no")))))
    assert consumed["path.headers"].status is Status.PASS
    assert status_of(PathReads(a_read()))["path.headers"] is Status.SKIP


def test_a_proxy_error_page_fails_the_http_check_with_its_body() -> None:
    page = PathRead(
        "path", "u", "m", 502, "HTTP/1.1", (("content-type", "text/html"),), b"<html>502 Bad Gateway</html>"
    )
    found = graded(PathReads(page))
    assert found["path.http"].status is Status.FAIL and "502 text/html" in found["path.http"].detail
    assert "Bad Gateway" in found["path.http"].evidence.quote
    assert {found[c].status for c in ("path.buffering", "path.complete")} == {Status.SKIP}


def test_a_cut_stream_fails_naming_the_silence_before_it() -> None:
    cut = a_read(times=PACED[:2], ending=Ending.BROKEN, ended_at=3.8, problem="peer closed connection")
    found = graded(PathReads(cut, direct=a_read("direct")))
    complete = found["path.complete"]
    assert complete.status is Status.FAIL and "broke off at 3.80 s after 2 events" in complete.detail
    assert "the longest silence before it 3.00 s" in complete.detail and "peer closed" in complete.detail
    assert complete.evidence is not None and complete.evidence.event == 2
    lost = graded(PathReads(a_read(times=PACED[:4], frames=FRAMES[:3] + FRAMES[-1:]), direct=a_read("direct")))
    assert lost["path.complete"].status is Status.FAIL and "1 lost" in lost["path.complete"].detail


def test_after_a_clean_end_the_response_must_end_and_the_next_request_be_answered() -> None:
    again = a_read("again", new_connection=False)
    ok = graded(PathReads(a_read(), again=again))["path.after_close"]
    assert ok.status is Status.PASS and "kept the connection alive" in ok.detail
    closed = graded(PathReads(a_read(), again=a_read("again", new_connection=True)))["path.after_close"]
    assert closed.status is Status.PASS and "closed the connection" in closed.detail
    held_open = graded(PathReads(a_read(ended_at=4.5)))["path.after_close"]
    assert held_open.status is Status.WARN and "2.50 s after [DONE]" in held_open.detail
    failed = PathRead("again", "u", "m", None, ending=Ending.BROKEN, problem="Server disconnected")
    bad = graded(PathReads(a_read(), again=failed))["path.after_close"]
    assert bad.status is Status.FAIL and "Server disconnected" in bad.evidence.quote


def test_http_1_0_warns() -> None:
    old = PathRead("path", "u", "m", 200, "HTTP/1.0", SSE, FRAMES[0], ((len(FRAMES[0]), 0.1),), (), 0.01, 0.2)
    assert status_of(PathReads(old))["path.version"] is Status.WARN


# -- idle gaps -------------------------------------------------------------------------------------------------------


def test_a_silent_stream_cut_by_the_path_fails_and_one_that_came_whole_passes() -> None:
    whole = a_read("silent", times=[3.0, 3.0, 3.0, 3.0, 3.0])
    assert graded(PathReads(a_read(), silent=whole))["path.idle_silent"].status is Status.PASS
    cut = a_read("silent", times=[], ending=Ending.BROKEN, ended_at=2.01, headers_at=2.0, problem="incomplete")
    found = graded(PathReads(a_read(), silent=cut))["path.idle_silent"]
    assert found.status is Status.FAIL and "after 2.00 s of silence (at 2.01 s" in found.detail
    refused = PathRead("silent", "u", "nope", 404, "HTTP/1.1", (("content-type", "application/json"),), b"{}")
    assert graded(PathReads(a_read(), silent=refused))["path.idle_silent"].status is Status.SKIP
    assert graded(PathReads(a_read(), not_run={"silent": "no"}))["path.idle_silent"].status is Status.SKIP


def test_a_keepalive_stream_must_stay_open_with_its_keepalives_reaching_the_reader() -> None:
    pings = FRAMES[:2] + [b": ping\n\n"] * 3
    kept = a_read("keepalive", times=[0.0, 0.0, 1.0, 2.0, 3.0], frames=pings, ending=Ending.CANCELLED, ended_at=3.5)
    found = graded(PathReads(a_read(), keepalive=kept, window=3.5))["path.idle_keepalive"]
    assert found.status is Status.PASS and "3 keep-alive(s)" in found.detail
    nothing = PathRead("keepalive", "u", "stall", None, ending=Ending.CANCELLED, ended_at=3.5)
    held = graded(PathReads(a_read(), keepalive=nothing, window=3.5))["path.idle_keepalive"]
    assert held.status is Status.WARN and "nothing, not even the headers" in held.detail
    cut = a_read("keepalive", times=[0.0, 0.0, 1.0], frames=pings[:3], ending=Ending.BROKEN, ended_at=1.5)
    assert graded(PathReads(a_read(), keepalive=cut))["path.idle_keepalive"].status is Status.FAIL


def test_a_read_the_checker_own_deadline_stopped_is_never_a_finding() -> None:
    stopped = a_read(times=PACED[:2], ending=Ending.DEADLINE, problem="the checker's own deadline of 1 s")
    found = graded(PathReads(stopped, silent=a_read("silent", ending=Ending.DEADLINE)))
    assert found["path.complete"].status is Status.SKIP and found["path.idle_silent"].status is Status.SKIP
    report = PathReport("u", None, "m", findings=list(found.values()), guard="the checker's own deadline")  # type: ignore[arg-type]
    assert report.exit_code == 2 and report.verdict == "could not be checked"


def test_the_report_as_json_keeps_check_conventions() -> None:
    gz = (*SSE, ("content-encoding", "gzip"))
    reads = PathReads(a_read(times=TOGETHER, headers=gz), direct=a_read("direct"))
    report = PathReport("http://p/v1", "http://d/v1", "m", findings=grade_path(reads))
    doc = json.loads(report.to_json())
    assert doc["tool"] == "streamlab check-path" and doc["version"] == 1 and doc["exit_code"] == 1
    assert [c["id"] for c in doc["checks"]] == list(PATH_CHECK_IDS)
    first = doc["checks"][2]
    assert set(first) == {"id", "group", "status", "promises", "detail", "why", "evidence"}
    assert set(first["evidence"]) == {"probe", "event", "offset", "bytes"}
    text = report.render()
    assert "FAIL  path.buffering" in text and "evidence: path, event #1, byte 0:" in text and "why:" in text
    assert chat_url("http://x/v1/") == "http://x/v1/chat/completions" == chat_url("http://x/v1/chat/completions")


# -- the real thing: nginx and Caddy in front of the stand-in --------------------------------------------------------

SCRIPTS = {
    "paced": Episode(paced(chat_text_stream(["one ", "two "], model="paced"), first=0.4, gap=0.4)),
    "prefill": Episode(paced(chat_text_stream(["late"], model="prefill"), first=3.0)),
    **scenario("stall"),
}


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn(SCRIPTS) as server:
        yield server


def streamed_whole(report: PathReport) -> bool:
    """Every check passed; the first event may have come a little late (a warning) on a busy machine, since the
    path and the direct route are read one after the other, never a failure."""
    late_is_fine = {"path.buffering": {Status.PASS, Status.WARN}}
    return all(f.status in late_is_fine.get(f.check, {Status.PASS}) for f in report.findings)


def timed_check(url: str, **kw: object) -> tuple[PathReport, float]:
    started = time.monotonic()
    report = check_path(url, model="paced", **kw)  # type: ignore[arg-type]
    return report, time.monotonic() - started


@pytest.mark.net
@NEEDS_NGINX
def test_check_path_reports_the_buffering_of_nginx_with_gzip_with_its_evidence(standin: StandIn) -> None:
    with NginxProxy(standin.base_url, NginxOptions(gzip=True)) as proxy:
        report, took = timed_check(proxy.base_url, direct=standin.base_url, keepalive_model=None)
        alone, took_alone = timed_check(proxy.base_url, keepalive_model=None)
    assert took < 60 and took_alone < 60
    assert report.exit_code == 1 and report.error is None, report.render()
    buffering = report.finding("path.buffering")
    assert buffering is not None and buffering.status is Status.FAIL, report.render()
    assert buffering.evidence is not None and buffering.evidence.event == 1
    assert "held back" in buffering.detail and "5 of 5 events arrived within 50 ms" in buffering.detail
    assert report.finding("path.compression").status is Status.FAIL  # type: ignore[union-attr]
    assert alone.finding("path.buffering").status is Status.FAIL, alone.render()  # type: ignore[union-attr]


@pytest.mark.net
@NEEDS_CADDY
def test_check_path_passes_caddy_with_and_without_gzip(standin: StandIn) -> None:
    with CaddyProxy(standin.base_url) as proxy:
        report, took = timed_check(proxy.base_url, direct=standin.base_url, silent_model="prefill", window=2.5)
    assert took < 60 and report.exit_code == 0, report.render()
    assert streamed_whole(report), report.render()
    with CaddyProxy(standin.base_url, CaddyOptions(encode_gzip=True)) as proxy:
        gzip, took = timed_check(proxy.base_url, direct=standin.base_url, keepalive_model=None)
    assert took < 60 and gzip.exit_code == 0, gzip.render()
    assert gzip.finding("path.compression").status is Status.WARN, gzip.render()  # type: ignore[union-attr]


@pytest.mark.net
@NEEDS_CADDY
def test_check_path_reads_https_with_the_ca_it_is_given(standin: StandIn) -> None:
    with CaddyProxy(standin.base_url, CaddyOptions(http2="tls")) as proxy:
        report, took = timed_check(proxy.base_url, keepalive_model=None, ca_file=str(proxy.root_cert))
        untrusted, _ = timed_check(proxy.base_url, keepalive_model=None)
    assert took < 60 and report.exit_code == 0, report.render()
    assert untrusted.exit_code == 2 and "CERTIFICATE_VERIFY_FAILED" in (untrusted.error or ""), untrusted.render()


@pytest.mark.net
def test_check_path_passes_the_direct_route(standin: StandIn) -> None:
    report, took = timed_check(standin.base_url, direct=standin.base_url, silent_model="prefill", window=2.5)
    assert took < 60 and report.exit_code == 0 and streamed_whole(report), report.render()


@pytest.mark.net
@NEEDS_NGINX
def test_check_path_reports_a_short_idle_timeout_cutting_a_slow_stream(standin: StandIn) -> None:
    # proxy_read_timeout 2 s: the 3 s prefill is cut, the keep-alives (one a second) keep the stall open
    with NginxProxy(standin.base_url, NginxOptions(read_timeout=2)) as proxy:
        report, took = timed_check(proxy.base_url, direct=standin.base_url, silent_model="prefill", window=4)
        started = time.monotonic()
        as_main = check_path(proxy.base_url, model="prefill", direct=standin.base_url, keepalive_model=None)
        took_main = time.monotonic() - started
    assert max(took, took_main) < 60
    silent = report.finding("path.idle_silent")
    assert silent is not None and silent.status is Status.FAIL, report.render()
    assert "cut the stream after 2." in silent.detail or "cut the stream after 1.9" in silent.detail, silent.detail
    assert report.finding("path.idle_keepalive").status is Status.PASS, report.render()  # type: ignore[union-attr]
    complete = as_main.finding("path.complete")
    assert complete is not None and complete.status is Status.FAIL and as_main.exit_code == 1, as_main.render()


# -- the command line ------------------------------------------------------------------------------------------------


@pytest.mark.net
@NEEDS_NGINX
def test_the_command_line_prints_json_and_exits_1_on_a_failure(standin: StandIn, capsys) -> None:
    with NginxProxy(standin.base_url, NginxOptions(gzip=True)) as proxy:
        code = main(
            ["check-path", proxy.base_url, "--direct", standin.base_url, "--model", "paced", "--json", "--window", "2"]
        )
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 == doc["exit_code"] and doc["verdict"] == "fail" and doc["error"] is None
    found = {c["id"]: c for c in doc["checks"]}
    assert found["path.buffering"]["status"] == "fail" and found["path.buffering"]["evidence"]["event"] == 1
    assert found["path.idle_keepalive"]["status"] == "warn", "nginx's gzip held the keep-alives back too"
    assert [t["read"] for t in doc["timings"]] == ["path", "direct", "again", "keepalive"]


@pytest.mark.net
def test_the_command_line_says_could_not_check_and_exits_2(standin: StandIn, capsys) -> None:
    with __import__("socket").socket() as free:
        free.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{free.getsockname()[1]}/v1"
    assert main(["check-path", nowhere, "--model", "paced"]) == 2
    out = capsys.readouterr()
    assert "could not be checked: cannot connect" in out.out and "could not check" in out.err
    # the checker's own deadline stopped the read: never a finding of the path, always "could not check"
    assert (
        main(["check-path", standin.base_url, "--model", "paced", "--deadline", "1", "--keepalive-model", "none"]) == 2
    )
    out = capsys.readouterr()
    assert "the checker's own deadline" in out.out and "exit 2" in out.out and "FAIL" not in out.out
    assert main(["check-path", standin.base_url, "--window", "0"]) == 2


def test_the_command_line_explains_itself(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["check-path", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for words in ("--direct", "--silent-model", "--keepalive-model", "Accept-Encoding", "Exit 0"):
        assert words in text
