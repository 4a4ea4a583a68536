"""The relay checker's checks, by requirement: each scripts one upstream behaviour and grades the result (I/O layer).

`run_checks` runs the checks of the chosen requirements in the order of `CHECKS`, then grades the summary
lines against every stream the checks asked for. Each check starts the chaos proxy in front of the stand-in
on the fixed upstream port for its own duration (`CheckRun.front`): without faults for the scripted checks,
with the faults it needs for the chaos checks and the seeded fuzz. The verdicts come from
`streamlab.core.relay.grade`; a check's name says what it does, and its result names the outcome it exercises.
"""

from __future__ import annotations

import concurrent.futures
import socket
import time
from collections.abc import Callable
from typing import Any

from streamlab.core.endings import Outcome
from streamlab.core.relay.grade import (
    FuzzRun,
    RelayReport,
    SdkResult,
    comment_lines,
    grade_death,
    grade_identical,
    grade_sdk,
    grade_summaries,
    is_marker,
    plan_fuzz,
    raw_offset,
    utf8_inner_offsets,
)
from streamlab.core.sse import parse
from streamlab.net.relaycheck.probe import (
    CHAT,
    DEATHS,
    DELTA,
    HALF_AT,
    LINGER,
    PIECES,
    RESP,
    TEXT,
    CheckOptions,
    CheckRun,
    Death,
    RawResult,
    build_script,
    raw_stream,
)
from streamlab.net.standin.records import RequestRecord
from streamlab.net.standin.server import StandIn

__all__ = ["CHECKS", "run_checks"]

FRAMES = {"chat": CHAT, "responses": RESP}

NEVER_FORWARDED = (
    "the checker's upstream never received this request: the relay answered without it (is the relay started "
    "with the upstream URL the checker gives it, `{upstream}` in --relay-cmd?)"
)
"""The evidence of a check whose request the relay never passed on (it answered from elsewhere, or by itself)."""
CHAOS_MODEL = {"chat": "check-chaos", "responses": "check-chaos-responses"}


def _raw_identical(run: CheckRun, raw: RawResult, model: str) -> tuple[bool, str]:
    if raw.status != 200 or raw.error:
        return False, f"the relay answered {raw.status} {raw.error}".strip()
    return grade_identical(run.upstream_sent(model), raw.body)


def check_forwarding(run: CheckRun) -> None:
    """The text and the events arrive identical, for both dialects, and an honest early end stays one."""
    length_text = "".join(PIECES[:3])
    cases = (
        ("text and events identical (chat)", "check-chat", "chat", TEXT, Outcome.COMPLETE),
        ("text and events identical (responses)", "check-responses", "responses", TEXT, Outcome.COMPLETE),
        ("an answer cut by finish_reason length passes as is", "check-length", "chat", length_text, Outcome.INCOMPLETE),
    )
    with run.front():
        for name, model, dialect, text, outcome in cases:
            ok_raw, raw_evidence = _raw_identical(run, run.raw(model, dialect, outcome, len(text)), model)
            ok_sdk, sdk_evidence = grade_sdk(
                run.sdk(model, dialect, outcome, len(text)), expected_text=text, must_raise=False
            )
            run.add(name, 1, outcome, ok_raw and ok_sdk, f"{raw_evidence}; {sdk_evidence}")


def check_halves(run: CheckRun) -> None:
    """Bytes leave before their event is complete: half an event reaches the client while the upstream waits. The
    half ends inside a UTF-8 character, so a relay that decodes text (and holds back what it cannot decode yet)
    fails too."""
    with run.front():
        raw = run.raw("check-halves", "chat", Outcome.COMPLETE, len(TEXT))
        run.upstream_sent("check-halves")  # waits for the stand-in's record to finish: all its writes timed
        records = run.standin.records("check-halves")
    if not records:
        run.add("bytes leave before their event is complete", 1, Outcome.COMPLETE, False, NEVER_FORWARDED)
        return
    record = records[-1]
    first_half = CHAT[1][:HALF_AT]  # ends inside the two bytes of "ü"
    # Look after the first event: its bytes start like the second's, and a match there would credit a relay
    # that holds whole events with forwarding half of one.
    first_end = raw.body.find(b"\n\n")
    where = raw.body.find(first_half, first_end + 2 if first_end >= 0 else 0)
    arrived = next((at for at, size in raw.arrivals if where >= 0 and size >= where + len(first_half)), None)
    if raw.status != 200 or arrived is None or len(record.write_times) < 3:
        run.add(
            "bytes leave before their event is complete",
            1,
            Outcome.COMPLETE,
            False,
            f"the first half of the event never reached the client (status {raw.status}) {raw.error}".strip(),
        )
        return
    lead = record.write_times[2] - arrived
    evidence = (
        f"half an event reached the client {lead:.2f} s before the upstream wrote the rest"
        if lead > 0
        else f"half an event reached the client only {-lead:.2f} s after the upstream wrote the rest: held back "
        '(the half ends inside the two bytes of "\u00fc": a relay that waits for whole events or lines, '
        "or decodes the bytes as text, holds it back)"
    )
    run.add("bytes leave before their event is complete", 1, Outcome.COMPLETE, lead > 0, evidence)


def _ttft(result: RawResult) -> float | None:
    at = result.first_time(2)  # the role chunk, then the first text
    return None if at is None else at - result.sent_at


def check_ttft(run: CheckRun) -> None:
    """The time to first token the relay adds: the best of three runs, direct and through the relay."""
    direct = [_ttft(raw_stream(run.standin.base_url, "check-ttft", "chat", timeout=run.timeout)) for _ in range(3)]
    with run.front():
        relayed = [_ttft(run.raw("check-ttft", "chat", Outcome.COMPLETE, len(TEXT))) for _ in range(3)]
    if None in relayed or None in direct:
        run.add(
            "time to first token added by the relay",
            1,
            Outcome.COMPLETE,
            False,
            "the first token never arrived through the relay",
        )
        return
    best_direct, best_relay = min(d for d in direct if d is not None), min(r for r in relayed if r is not None)
    added = best_relay - best_direct
    run.add(
        "time to first token added by the relay",
        1,
        Outcome.COMPLETE,
        added <= run.options.ttft_bound,
        f"{best_direct * 1000:.0f} ms direct, {best_relay * 1000:.0f} ms through the relay: "
        f"{added * 1000:+.0f} ms (bound {run.options.ttft_bound * 1000:.0f} ms)",
    )


def check_slicing(run: CheckRun) -> None:
    """Chaos: every write cut into 1-7 bytes, both ways (inside UTF-8 characters, between CR and LF)."""
    for dialect in ("chat", "responses"):
        model = CHAOS_MODEL[dialect]
        with run.front(direction="both", slice_sizes=(1, 7), seed=run.options.seed):
            ok_raw, raw_evidence = _raw_identical(run, run.raw(model, dialect, Outcome.COMPLETE, len(TEXT)), model)
            sdk = run.sdk(model, dialect, Outcome.COMPLETE, len(TEXT))
        ok_sdk, sdk_evidence = grade_sdk(sdk, expected_text=TEXT, must_raise=False)
        run.add(
            f"chaos: 1-7 byte slices both ways ({dialect})",
            1,
            Outcome.COMPLETE,
            ok_raw and ok_sdk,
            f"{raw_evidence}; {sdk_evidence}",
        )


def _last_finished(model: str) -> Callable[[list[RequestRecord]], bool]:
    """A `wait_until` predicate: the stand-in's latest request is for `model` and has finished."""
    return lambda records: bool(records) and records[-1].model == model and records[-1].finished


def check_disconnects(run: CheckRun) -> None:
    """A client that leaves makes the upstream see its client leave, within the bound."""
    bound = run.options.disconnect_bound
    cases = (
        ("client leaves mid-stream (chat)", "check-hang", "chat", 1),
        ("client leaves before the first token (responses)", "check-thinking", "responses", 0),
    )
    for name, model, dialect, leave_after in cases:
        with run.front():
            raw = run.raw(model, dialect, Outcome.CANCELLED, leave_after=leave_after)
            run.standin.wait_until(_last_finished(model), bound + 2.0)
            records = run.standin.records(model)
        record = records[-1] if records else None
        if raw.status != 200:
            run.add(name, 2, Outcome.CANCELLED, False, f"the relay answered {raw.status} {raw.error}".strip())
        elif record is None:
            run.add(name, 2, Outcome.CANCELLED, False, NEVER_FORWARDED)
        elif record.ending != "client_gone" or record.finished_at is None:
            run.add(
                name,
                2,
                Outcome.CANCELLED,
                False,
                f"{bound + 2.0:g} s after the client left, the upstream "
                f"request is still {record.ending} (the relay kept it open)",
            )
        else:
            delay = max(record.finished_at - raw.closed_at, 0.0)
            run.add(
                name,
                2,
                Outcome.CANCELLED,
                delay <= bound,
                f"the upstream saw its client go {delay * 1000:.0f} "
                f"ms after the client left (bound {bound * 1000:.0f} ms)",
            )


def check_keepalives(run: CheckRun) -> None:
    """Keep-alives during upstream silences, wherever the upstream stopped: the events never change."""
    cases = (
        ("stall between events (chat)", "check-ka-between", "chat", True),
        ("stall inside an event, between its lines (responses)", "check-ka-in-event", "responses", False),
        ("stall inside a line (chat)", "check-ka-mid-line", "chat", False),
        ("stall between the CR and the LF of a CRLF (chat)", "check-ka-after-cr", "chat", False),
    )

    def one(model: str, dialect: str, beat_needed: bool) -> tuple[bool, str]:
        raw = run.raw(model, dialect, Outcome.COMPLETE, len(TEXT))
        passed, evidence = _raw_identical(run, raw, model)
        beats = comment_lines(raw.body) - comment_lines(run.upstream_sent(model))
        if beat_needed and beats < 1 and passed:
            passed, evidence = False, f"no keep-alive in {run.options.stall:g} s of silence ({evidence})"
        return passed, evidence

    # The four stalls run side by side (each has its own model name and upstream record): one stall's time in all.
    with run.front(), concurrent.futures.ThreadPoolExecutor(len(cases), "relaycheck-keepalive") as pool:
        verdicts = [pool.submit(one, model, dialect, beat_needed) for _, model, dialect, beat_needed in cases]
        for (name, *_), verdict in zip(cases, verdicts, strict=True):
            passed, evidence = verdict.result()
            run.add(f"keep-alives: {name}", 3, Outcome.COMPLETE, passed, evidence)


def _death_verdict(raw: RawResult, sent: bytes, sdk: SdkResult, *, all_delivered: bool) -> tuple[bool, str]:
    if raw.status != 200:
        ok_raw, raw_evidence = False, f"the relay answered {raw.status} {raw.error}".strip()
    else:
        ok_raw, raw_evidence = grade_death(sent, raw.body, body_complete=raw.complete, all_delivered=all_delivered)
    ok_sdk, sdk_evidence = grade_sdk(sdk, expected_text=TEXT, must_raise=True)
    return ok_raw and ok_sdk, f"{raw_evidence}; {sdk_evidence}"


def _raw_and_sdk(
    run: CheckRun, model: str, dialect: str, outcome: Outcome | None
) -> tuple[RawResult, SdkResult, bytes]:
    """The raw client and the SDK on the same scripted stream at the same time (a stall costs one read timeout,
    not two), and what the upstream wrote (the script is the same for both requests)."""
    with concurrent.futures.ThreadPoolExecutor(2, "relaycheck-pair") as pool:
        raw = pool.submit(run.raw, model, dialect, outcome)
        sdk = pool.submit(run.sdk, model, dialect, outcome)
        raw_result, sdk_result = raw.result(), sdk.result()
    return raw_result, sdk_result, run.upstream_sent(model)


def _one_death(run: CheckRun, death: Death) -> tuple[bool, str]:
    raw, sdk, sent = _raw_and_sdk(run, death.model, death.dialect, death.outcome)
    return _death_verdict(raw, sent, sdk, all_delivered=death.all_delivered)


def check_deaths(run: CheckRun) -> None:
    """Every scripted death after the 200: a marked final event, a clean end, and the SDK raises.

    The deaths run side by side, one thread each, as a room's streams would reach a relay: each has its own
    model name, so no two share an upstream record, and the verdicts are added in `DEATHS` order. A relay that
    never ends its streams costs the checker one deadline, not one per death."""
    with run.front(), concurrent.futures.ThreadPoolExecutor(len(DEATHS), "relaycheck-death") as pool:
        verdicts = [pool.submit(_one_death, run, death) for death in DEATHS]
        for death, verdict in zip(DEATHS, verdicts, strict=True):
            passed, evidence = verdict.result()
            run.add(death.name, 4, death.outcome, passed, evidence)


def header_bytes(standin: StandIn) -> int:
    """The size of the stand-in's status line and headers (they do not depend on the request; the Date
    header has a fixed width)."""
    body = b'{"model": "check-chaos", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    with socket.create_connection(("127.0.0.1", standin.port), timeout=5) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            more = sock.recv(4096)
            if not more:
                raise RuntimeError("the stand-in closed before its headers")
            data += more
    return data.index(b"\r\n\r\n") + 4


def _chaos_case(
    run: CheckRun, dialect: str, faults: dict[str, Any], sent: bytes, all_delivered: bool
) -> tuple[bool, str]:
    # Every connection through the proxy gets its own byte counters, so both clients meet the same fault.
    with run.front(direction="down", seed=run.options.seed, **faults):
        raw, sdk, _ = _raw_and_sdk(run, CHAOS_MODEL[dialect], dialect, Outcome.TRUNCATED)
    return _death_verdict(raw, sent, sdk, all_delivered=all_delivered)


def check_chaos(run: CheckRun) -> None:
    """Chaos deaths at chosen wire offsets: a cut inside a UTF-8 character, a reset mid-line, a stall."""
    head = header_bytes(run.standin)
    resp_at = len(b"".join(RESP[:DELTA])) + RESP[DELTA].index("\u00fc".encode()) + 1
    chat_at = len(b"".join(CHAT[:3])) + CHAT[3].index("\u00f6".encode()) + 1
    stall_at = len(b"".join(CHAT[:3]))
    cases = (
        ("chaos: cut down inside a UTF-8 character (responses)", "responses", "cut_after", resp_at, True),
        ("chaos: reset down inside a UTF-8 character (chat)", "chat", "reset_after", chat_at, False),
        ("chaos: stall down between events (chat)", "chat", "stall_after", stall_at, True),
    )
    for name, dialect, fault, at, all_delivered in cases:
        frames = FRAMES[dialect]
        wire = raw_offset(frames, head, at)
        passed, evidence = _chaos_case(run, dialect, {fault: wire}, b"".join(frames)[:at], all_delivered)
        run.add(name, 4, Outcome.TRUNCATED, passed, f"after {wire} bytes on the wire: {evidence}")


def _fuzz_one(run: CheckRun, plan: FuzzRun) -> tuple[str, str | None]:
    """One fuzz run: ("complete" | "marked" | "refused", the problem or None)."""
    faults = {"direction": plan.direction, "seed": run.options.seed + plan.number, f"{plan.action}_after": plan.after}
    model, whole = CHAOS_MODEL[plan.dialect], b"".join(FRAMES[plan.dialect])
    with run.front(**faults):
        raw = run.raw(model, plan.dialect, None)
    with run.front(**faults):
        sdk = run.sdk(model, plan.dialect, None)
    if sdk.raised is None and sdk.text != TEXT:
        return "", f"the SDK returned normally with {len(sdk.text)} of {len(TEXT)} characters"
    if raw.status is None:
        return "", f"no answer from the relay ({raw.error})"
    if raw.status != 200:
        return "refused", None
    got, _ = parse(raw.body)
    if raw.complete and got == parse(whole)[0]:
        return "complete", None
    passed, evidence = grade_death(whole, raw.body, body_complete=raw.complete, all_delivered=False)
    return ("marked", None) if passed and is_marker(got[-1]) else ("", evidence)


def check_fuzz(run: CheckRun) -> None:
    """Seeded chaos: cut or reset the request, the response or both at random offsets (half of the response
    cuts inside a multi-byte character). The SDK must never return a partial answer normally, and every
    stream the relay started must end with the upstream's end or a marked final event."""
    if run.options.fuzz_runs <= 0:
        return
    head = header_bytes(run.standin)
    down, up, inner = {}, {}, {}
    for dialect, frames in FRAMES.items():
        with run.front() as proxy:
            run.raw(CHAOS_MODEL[dialect], dialect, Outcome.COMPLETE, len(TEXT))
            proxy.wait_until(lambda rs: bool(rs) and rs[-1].bytes_up > 0, 5.0)
            up[dialect] = max((r.bytes_up for r in proxy.records()), default=400)
        down[dialect] = raw_offset(frames, head, len(b"".join(frames)) - 1) + 8  # + CRLF and the last chunk
        inner[dialect] = [raw_offset(frames, head, p) for p in utf8_inner_offsets(b"".join(frames))]
    plan = plan_fuzz(run.options.seed, run.options.fuzz_runs, down_total=down, up_total=up, utf8_offsets=inner)
    kinds: dict[str, int] = {"complete": 0, "marked": 0, "refused": 0}
    failures = []
    for item in plan:
        kind, problem = _fuzz_one(run, item)
        if problem:
            failures.append(f"{item.describe()}: {problem}")
        else:
            kinds[kind] += 1
    inside = sum(p.inside_utf8 for p in plan)
    evidence = (
        f"{len(plan)} runs (seed {run.options.seed}): {kinds['complete']} complete, {kinds['marked']} "
        f"ended with a marker, {kinds['refused']} refused with an error status; {inside} cut inside a "
        "UTF-8 character"
    )
    if failures:
        evidence = f"{len(failures)} of {len(plan)} runs failed; first: {failures[0]}"
    run.add("seeded fuzz: cuts and resets both ways", 4, Outcome.TRUNCATED, not failures, evidence)


def check_hangup_at_done(run: CheckRun) -> Callable[[], None]:
    """The official SDK closes the connection the moment it reads `data: [DONE]`. Here the upstream keeps its
    body open a moment longer, so the relay is still waiting on it when its client leaves, and Starlette cancels
    the relay's generator there: a summary written after the read loop never comes (one written in a `finally`
    does), and it must say complete, because the whole answer went through. Returns the grading step, which
    `run_checks` adds after the count of summary lines (the more general verdict comes first)."""
    model = "check-done-linger"
    with run.front():
        sdk = run.sdk(model, "chat", Outcome.COMPLETE, len(TEXT))
        ok_sdk, sdk_evidence = grade_sdk(sdk, expected_text=TEXT, must_raise=False)
        end = time.monotonic() + LINGER + 2.0
        lines = _lines_for(run, model)
        while lines is not None and not lines and time.monotonic() < end:
            time.sleep(0.05)
            lines = _lines_for(run, model)
    if lines is None:
        passed, evidence = False, "no summary lines to read"
    elif not lines:
        passed, evidence = (
            False,
            (
                "no summary line: the client hung up at [DONE] while the relay still waited "
                "for the upstream's end, and the code after the read loop never ran"
            ),
        )
    else:
        said = str(lines[-1].get("outcome"))
        passed = said == Outcome.COMPLETE.value
        evidence = f"the summary line came, saying {said}" + ("" if passed else " (the whole answer went through)")
    return lambda: run.add(
        "summary line when the client hangs up at [DONE]",
        5,
        Outcome.COMPLETE,
        ok_sdk and passed,
        f"{sdk_evidence}; {evidence}",
    )


def _lines_for(run: CheckRun, model: str) -> list[Any] | None:
    lines = run.relay.read_summaries()
    return None if lines is None else [line for line in lines if line.get("model") == model]


CHECKS: tuple[tuple[int, Callable[[CheckRun], None]], ...] = (
    (1, check_forwarding),
    (1, check_halves),
    (1, check_ttft),
    (1, check_slicing),
    (2, check_disconnects),
    (3, check_keepalives),
    (4, check_deaths),
    (4, check_chaos),
    (4, check_fuzz),
)
"""Every check, with the requirement it grades, in the order they run."""


def run_checks(
    report: RelayReport, relay: Any, standin: StandIn, port: int, options: CheckOptions, log: Callable[[str], None]
) -> None:
    """Run the checks of `options.requirements` against the relay; add their results to `report`."""
    standin.set_scripts(build_script(options))
    run = CheckRun(report, relay, standin, port, options, log)
    for requirement, check in CHECKS:
        if requirement in options.requirements:
            check(run)
    if 5 in options.requirements:
        hangup = check_hangup_at_done(run)
        check_summaries(run)
        hangup()


def check_summaries(run: CheckRun) -> None:
    """One summary line per stream the checks asked for, each saying what happened."""
    required = sum(e.required for e in run.streams)
    end = time.monotonic() + 5.0
    lines = run.relay.read_summaries()
    while lines is not None and len(lines) < required and time.monotonic() < end:
        time.sleep(0.05)
        lines = run.relay.read_summaries()
    passed, evidence = grade_summaries(lines, run.streams)
    run.add("one JSON summary line per stream", 5, None, passed, evidence)
