"""The relay checker: the reference relay passes it, and each deliberately broken relay fails it on the
requirement it breaks (and only there, for the other requirement each test also runs).

The broken relays are written the way a learner would write one: a Starlette `StreamingResponse` over an
httpx stream, using the library's pure `RelayedStream` for the decisions, with one flaw each. Checking them
through the same checker proves it grades a relay it did not write. The verdict functions are tested on
bytes alone at the top.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from streamlab.core import shapes
from streamlab.core.endings import Ending, Outcome
from streamlab.core.relay.grade import (
    CheckResult,
    RelayReport,
    SdkResult,
    StreamExpectation,
    grade_death,
    grade_identical,
    grade_sdk,
    grade_summaries,
    plan_fuzz,
    raw_offset,
    utf8_inner_offsets,
)
from streamlab.core.relay.stream import RelayedStream, dialect_of, marker_frame
from streamlab.net.relay.app import Relay
from streamlab.net.relay.serving import AppServer
from streamlab.net.relaycheck.run import check_relay, ephemeral_floor, relay_command, steady_port

CHAT = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"])
WHOLE = b"".join(CHAT)
# The checks stall for 4 x keepalive, under the read timeout; the read timeout is well over the halves
# check's 1 s gap inside an event, so a loaded machine cannot turn that gap into a relay's deadline.
KEEPALIVE, READ_TIMEOUT = 0.2, 2.0

net = pytest.mark.net  # the tests below the verdicts open sockets (see tests/conftest.py)


# -- verdicts on bytes -----------------------------------------------------------------------------------------


def test_identical_events_pass_and_a_changed_event_is_named():
    assert grade_identical(WHOLE, WHOLE.replace(b"\n\ndata", b"\n\n: keep-alive\n\ndata", 1)) == (
        True,
        "7 events identical, 1 comment line(s) added",
    )
    ok, evidence = grade_identical(WHOLE, WHOLE.replace(b"Hel", b"Hal"))
    assert not ok and evidence.startswith("event 2 differs")


def test_a_death_needs_every_event_then_a_marker_then_a_clean_end():
    sent = b"".join(CHAT[:3]) + CHAT[3][:10]
    marker = marker_frame("chat", "upstream_broken", "cut")
    good = b"".join(CHAT[:3]) + CHAT[3][:10] + b"\n\n" + marker
    assert grade_death(sent, good, body_complete=True)[0]
    assert not grade_death(sent, b"".join(CHAT[:3]), body_complete=True)[0]  # silent end
    assert not grade_death(sent, good, body_complete=False)[0]  # the body broke after the marker
    assert not grade_death(sent, b"".join(CHAT[:2]) + marker, body_complete=True)[0]  # an event lost
    assert grade_death(sent, b"".join(CHAT[:2]) + marker, body_complete=True, all_delivered=False)[0]  # a reset
    assert not grade_death(sent, b"".join(CHAT[:3]) + CHAT[1] + CHAT[1] + marker, body_complete=True)[0]


def test_the_sdk_must_raise_on_a_death_and_return_everything_otherwise():
    assert not grade_sdk(SdkResult("Hel"), expected_text="Hello", must_raise=True)[0]
    assert grade_sdk(SdkResult("Hel", "APIError", "relay: cut"), expected_text="Hello", must_raise=True)[0]
    assert grade_sdk(SdkResult("Hello"), expected_text="Hello", must_raise=False)[0]
    assert not grade_sdk(SdkResult("Hel"), expected_text="Hello", must_raise=False)[0]


def test_summaries_are_counted_and_matched_by_model():
    streams = [
        StreamExpectation("a", Outcome.COMPLETE, 5),
        StreamExpectation("b", Outcome.CANCELLED),
        StreamExpectation("c", required=False),
    ]
    line = {"ttft_s": 0.1, "total_s": 0.2, "usage": None}
    good = [
        {"model": "a", "outcome": "complete", "text_chars": 5, **line},
        {"model": "b", "outcome": "cancelled", "text_chars": 2, **line},
    ]
    assert grade_summaries(good, streams)[0]
    assert not grade_summaries(good[:1], streams)[0]
    ok, evidence = grade_summaries([good[0], {**good[1], "outcome": "truncated"}], streams)
    assert not ok and "cancelled" in evidence
    assert not grade_summaries(None, streams)[0]


def test_a_summary_verdict_names_the_stream_in_words_and_gives_the_model_to_find_it():
    streams = [
        StreamExpectation("check-x", Outcome.COMPLETE, about="the stream whose client hangs up early"),
        StreamExpectation("plain", Outcome.COMPLETE),
    ]
    ok, evidence = grade_summaries([], streams)
    assert not ok
    assert "the stream whose client hangs up early (model check-x): 0 summary line(s) for 1 stream(s)" in evidence
    assert "plain: 0 summary line(s)" in evidence  # no words given: the model is all there is


def test_every_scripted_upstream_has_words_for_its_verdicts():
    from streamlab.net.relaycheck.probe import ABOUT, CheckOptions, build_script

    assert set(build_script(CheckOptions())) == set(ABOUT)
    assert all(about.startswith("the ") and "check-" not in about for about in ABOUT.values())


def test_the_report_holds_a_requirement_only_when_every_check_of_it_passed():
    report = RelayReport("relay")
    for n in (1, 2, 3, 4, 5):
        report.add(CheckResult(f"check {n}", n, Outcome.COMPLETE, True, "fine"))
    assert report.ok
    report.add(CheckResult("another", 3, Outcome.COMPLETE, False, "a keep-alive split a line"))
    assert not report.ok and report.holds(3) is False and report.holds(1) is True
    assert "3 of 5" not in report.render() and "4 of 5 requirements hold" in report.render()


def test_fuzz_plans_are_seeded_and_aim_inside_characters():
    inner = {"chat": [raw_offset(CHAT, 100, p) for p in utf8_inner_offsets(WHOLE)], "responses": [500]}
    args = dict(
        down_total={"chat": 900, "responses": 1500}, up_total={"chat": 300, "responses": 300}, utf8_offsets=inner
    )
    plan = plan_fuzz(7, 40, **args)
    assert plan == plan_fuzz(7, 40, **args) and plan != plan_fuzz(8, 40, **args)
    assert {p.direction for p in plan} == {"down", "up", "both"} and {p.action for p in plan} == {"cut", "reset"}
    assert any(p.inside_utf8 for p in plan)
    assert all(p.after in inner[p.dialect] for p in plan if p.inside_utf8)


def test_raw_offsets_step_over_the_chunk_framing():
    chunks = [b"abc", b"\xc3\xb6x"]
    wire = b"HEAD" + b"".join(f"{len(c):x}\r\n".encode() + c + b"\r\n" for c in chunks)
    for p, byte in enumerate(b"".join(chunks)):
        assert wire[raw_offset(chunks, 4, p)] == byte
    assert utf8_inner_offsets(b"".join(chunks)) == [4]


# -- relays with one flaw each -----------------------------------------------------------------------------------


def learner_relay(upstream: str, sink: list[dict[str, Any]], *, flaw: str = "") -> Starlette:
    """A relay as a learner writes one (StreamingResponse + httpx + RelayedStream), with one `flaw`:
    "buffers", "ignores-disconnects", "no-keepalives", "naive-keepalives", "silent-death", "no-summary",
    "summary-after-loop" (writes the summary only when the upstream's body ends while its client is still there),
    or "endless" (keeps a stalled stream open with keep-alives for ever, never ending it)."""
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=None), trust_env=False) as client:
            state["client"] = client
            yield

    async def handle(request: Request) -> Response:
        body = await request.body()
        rs = RelayedStream(
            dialect=dialect_of(request.url.path), model=json.loads(body).get("model"), started=time.perf_counter()
        )
        client: httpx.AsyncClient = state["client"]
        req = client.build_request(
            "POST",
            upstream + request.url.path[len("/v1") :],
            content=body,
            headers={"content-type": "application/json"},
        )
        upstream_response = await client.send(req, stream=True)
        if upstream_response.status_code != 200:
            await upstream_response.aread()
            return JSONResponse(upstream_response.json(), status_code=upstream_response.status_code)
        queue: asyncio.Queue[Any] = asyncio.Queue()

        async def read_upstream() -> None:
            try:
                async for chunk in upstream_response.aiter_raw():
                    await queue.put(chunk)
                await queue.put(Ending.COMPLETE)
            except httpx.HTTPError:
                await queue.put(Ending.BROKEN)
            finally:
                await upstream_response.aclose()

        reader = asyncio.ensure_future(read_upstream())
        return StreamingResponse(_pump(rs, queue, reader, sink, flaw), media_type="text/event-stream")

    routes = [Route("/v1/chat/completions", handle, methods=["POST"]), Route("/v1/responses", handle, methods=["POST"])]
    return Starlette(routes=routes, lifespan=lifespan)


async def _pump(
    rs: RelayedStream, queue: asyncio.Queue[Any], reader: asyncio.Future[None], sink: list[dict[str, Any]], flaw: str
) -> Any:
    held, last = bytearray(), time.perf_counter()
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), KEEPALIVE)
            except asyncio.TimeoutError:
                now = time.perf_counter()
                if now - last < READ_TIMEOUT or flaw == "endless":
                    beat = {"no-keepalives": b"", "naive-keepalives": b": keep-alive\n\n"}.get(flaw, rs.keepalive(now))
                    if beat:
                        yield beat
                    continue
                item = Ending.READ_TIMEOUT
            now = time.perf_counter()
            if isinstance(item, Ending):
                final = rs.upstream_ended(item, now)
                if held:
                    yield bytes(held)
                if final and flaw != "silent-death":
                    yield final
                if flaw == "summary-after-loop":  # reached only when the stream ends before its client leaves
                    sink.append(rs.summary())
                return
            last = now
            out = rs.upstream(item, now)
            if flaw == "buffers":
                held += out
            elif out:
                yield out
    finally:
        if flaw != "ignores-disconnects":
            reader.cancel()
        rs.client_gone(time.perf_counter())
        if flaw not in ("no-summary", "summary-after-loop"):
            sink.append(rs.summary())


@contextlib.contextmanager
def running(app_for: Any, upstream: str) -> Iterator[Any]:
    sink: list[dict[str, Any]] = []
    with AppServer(app_for(upstream, sink), name="learner") as server:
        yield type("LearnerRelay", (), {"base_url": f"{server.url}/v1", "summaries": sink})()


def check(factory: Any, requirements: tuple[int, ...], **options: Any) -> RelayReport:
    """Run the checker with the tests' intervals. Its time bounds are loosened (a loaded machine must not fail
    the reference relay); every flaw below fails on facts that do not depend on speed."""
    return check_relay(
        factory,
        requirements=requirements,
        keepalive=KEEPALIVE,
        read_timeout=READ_TIMEOUT,
        **{"fuzz_runs": 0, "ttft_bound": 1.0, "disconnect_bound": 2.0, **options},
    )


@net
@pytest.mark.parametrize(
    "flaw,broken,kept,failing",
    [
        ("buffers", 1, 5, "bytes leave before their event is complete"),
        ("ignores-disconnects", 2, 5, "client leaves mid-stream (chat)"),
        ("no-keepalives", 3, 5, "keep-alives: stall between events (chat)"),
        ("naive-keepalives", 3, 5, "keep-alives: stall inside a line (chat)"),
        ("silent-death", 4, 5, "cut between events (chat)"),
        ("no-summary", 5, 2, "one JSON summary line per stream"),
        ("summary-after-loop", 5, 2, "summary line when the client hangs up at [DONE]"),
    ],
)
def test_a_broken_relay_fails_on_the_requirement_it_breaks(flaw, broken, kept, failing, no_leaked_threads):
    report = check(
        lambda up: running(lambda u, s: learner_relay(u, s, flaw=flaw), up),
        (broken, kept),
        fuzz_runs=4 if broken == 4 else 0,
    )
    assert report.holds(broken) is False, report.render()
    assert report.holds(kept) is True, report.render()
    assert failing in {r.name for r in report.failures}, report.render()
    assert not report.ok


@net
def test_a_relay_that_never_ends_a_stalled_stream_fails_and_the_checker_still_finishes(no_leaked_threads):
    report = check(lambda up: running(lambda u, s: learner_relay(u, s, flaw="endless"), up), (4,), fuzz_runs=0)
    assert report.holds(4) is False, report.render()
    stalls = [r for r in report.failures if "stall" in r.name]
    assert stalls and "never ended" in report.render(), report.render()


def canned_relay(upstream: str, sink: list[dict[str, Any]]) -> Starlette:
    """A "relay" that answers every request with one stream of its own and never calls `upstream`: what a
    learner's relay with a mistyped upstream URL, or one that serves a cached answer, looks like to the checker."""

    async def answer(request: Request) -> StreamingResponse:
        await request.body()

        async def frames() -> AsyncIterator[bytes]:
            yield b"".join(shapes.chat_text_stream(["canned"], model="m"))

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/{path:path}", answer, methods=["POST"])])


@net
def test_a_relay_that_never_calls_the_checkers_upstream_fails_those_checks_in_words(no_leaked_threads):
    # The checker had raised IndexError (no upstream record to read) and printed no report at all.
    report = check(lambda up: running(canned_relay, up), (1, 2), fuzz_runs=0)
    assert report.holds(1) is False and report.holds(2) is False, report.render()
    never = {r.name for r in report.failures if "never received this request" in r.evidence}
    assert {"bytes leave before their event is complete", "client leaves mid-stream (chat)"} <= never, report.render()


@net
def test_the_learner_relay_without_a_flaw_keeps_what_the_flaws_break(no_leaked_threads):
    report = check(lambda up: running(lambda u, s: learner_relay(u, s), up), (2, 3, 5))
    assert all(report.holds(n) for n in (2, 3, 5)), report.render()


@net
@pytest.mark.slow
def test_the_reference_relay_passes_every_check_and_the_fuzz(no_leaked_threads):
    lines: list[str] = []
    report = check(
        lambda up: Relay(up, keepalive=KEEPALIVE, read_timeout=READ_TIMEOUT),
        (1, 2, 3, 4, 5),
        fuzz_runs=8,
        seed=3,
        log=lines.append,
    )
    assert report.ok, report.render()
    assert {o.value for o in report.outcomes()} == {"complete", "incomplete", "failed", "truncated", "cancelled"}
    assert len(lines) == len(report.results)


@net
def test_the_cli_starts_a_relay_command_and_grades_it():
    cmd = (
        f"{sys.executable} -m streamlab relay --upstream {{upstream}} --port {{port}} --keepalive {{keepalive}} "
        "--read-timeout {read_timeout}"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamlab",
            "check-relay",
            "--relay-cmd",
            cmd,
            "--only",
            "2,5",
            "--keepalive",
            str(KEEPALIVE),
            "--read-timeout",
            str(READ_TIMEOUT),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr  # two of five requirements checked: never a pass
    assert "(2) close the upstream when the client goes away: holds" in proc.stdout
    assert "(5) one JSON summary line per stream: holds" in proc.stdout
    assert "(1) forward as bytes arrive, keeping a running summary: not checked" in proc.stdout


@net
def test_the_checkers_upstream_port_is_below_the_ephemeral_range_and_free():
    # The chaos proxy binds this port again for every check. A port from the ephemeral range can become the
    # local end of an outgoing connection between two checks (the checker's own clients open dozens), and the
    # next bind then fails with "address already in use": seen once in 20 full runs under load.
    floor = ephemeral_floor()
    ports = {steady_port() for _ in range(20)}
    assert all(1024 <= port < floor for port in ports), (floor, sorted(ports))
    assert len(ports) > 1  # picked at random, so two checkers on one machine rarely meet
    for port in list(ports)[:3]:
        with socket.socket() as sock:  # nothing listens there: it can be bound
            sock.bind(("127.0.0.1", port))


@net
def test_a_port_in_use_is_never_picked(monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        busy = taken.getsockname()[1]
        monkeypatch.setattr("streamlab.net.relaycheck.run.ephemeral_floor", lambda: busy + 1)
        assert steady_port(span=1) != busy  # the only candidate is taken: it falls back to a free port
    finally:
        taken.close()


@net
def test_a_relay_started_by_hand_is_checked_through_its_url_and_summary_file(tmp_path, no_leaked_threads):
    summaries = tmp_path / "summaries.jsonl"
    port = steady_port()  # bound again for every check: not from the ephemeral range
    upstream = f"http://127.0.0.1:{port}/v1"
    with (
        summaries.open("a") as out,
        Relay(
            upstream,
            keepalive=KEEPALIVE,
            read_timeout=READ_TIMEOUT,
            on_summary=lambda s: (out.write(json.dumps(s) + "\n"), out.flush()),
        ) as r,
    ):
        report = check_relay(
            relay_url=f"http://127.0.0.1:{r.port}",
            summary_file=summaries,
            upstream_port=port,
            requirements=(2, 5),
            keepalive=KEEPALIVE,
            read_timeout=READ_TIMEOUT,
            fuzz_runs=0,
        )
    assert report.holds(2) and report.holds(5), report.render()


def test_a_relay_command_needs_both_placeholders():
    with pytest.raises(ValueError, match="placeholders"):
        relay_command("python relay.py --port {port}", keepalive=1, read_timeout=5)
    with pytest.raises(ValueError, match="read_timeout"):
        check_relay(relay_url="http://127.0.0.1:1", keepalive=1.0, read_timeout=2.0)


@net
def test_a_relay_command_that_dies_is_reported_with_its_stderr(no_leaked_threads):
    cmd = f"{sys.executable} -c 'import sys; sys.exit(\"no relay here: \" + sys.argv[1])' {{upstream}} {{port}}"
    with pytest.raises(RuntimeError, match="exited with status 1") as info:
        check(relay_command(cmd, keepalive=KEEPALIVE, read_timeout=READ_TIMEOUT), (2,))
    assert "no relay here: http://127.0.0.1:" in str(info.value)
