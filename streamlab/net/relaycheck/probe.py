"""The relay checker's instruments: the scripted upstream, the two clients, the run's bookkeeping (I/O layer).

The upstream answers come from `build_script`: one model name per behaviour, all built from one answer
whose text is full of multi-byte characters. The clients are raw httpx (the bytes and their arrival times)
and the official openai SDK (what a user would see). `CheckRun` holds one run's relay, stand-in, fixed
upstream port and options, starts the chaos proxy in front of the stand-in for a check (`front`), and notes
every stream it asks the relay for, so the summary lines can be compared with them at the end. The checks
themselves are in `streamlab.net.relaycheck.checks`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from openai.types.responses import ResponseTextDeltaEvent

from streamlab.core import shapes
from streamlab.core.endings import Outcome
from streamlab.core.relay.grade import (
    GAVE_UP,
    CheckResult,
    RelayReport,
    SdkResult,
    StreamExpectation,
)
from streamlab.core.sse import parse
from streamlab.core.standin.script import Cut, Episode, Send, Stall, Wait, paced
from streamlab.net.chaos.proxy import ChaosProxy
from streamlab.net.eventstream import SocketDeadline
from streamlab.net.standin.server import StandIn

__all__ = [
    "CheckOptions",
    "CheckRun",
    "RawResult",
    "Death",
    "DEATHS",
    "build_script",
    "raw_stream",
    "sdk_stream",
    "MAX_STREAM_BYTES",
    "PIECES",
    "TEXT",
    "CHAT",
    "RESP",
    "DELTA",
    "ABOUT",
    "HALF_AT",
    "HALF_GAP",
    "TTFT",
]

PIECES = [
    "Gr\u00fc\u00dfe ",
    "aus ",
    "K\u00f6ln, ",
    "na\u00efve ",
    "caf\u00e9 ",
    "\u2014 ",
    "\u65e5\u672c ",
    "\U0001f389",
]  # two-, three- and four-byte characters: cuts land inside them
TEXT = "".join(PIECES)
CHAT = shapes.chat_text_stream(PIECES, model="stand-in")
RESP = shapes.responses_text_stream(PIECES, model="stand-in")
DELTA = 4  # RESP[DELTA] is the first response.output_text.delta ("Grüße ")
HALF_GAP = 1.0  # seconds between the two halves of one event (a wide margin: the check is an ordering)
HALF_AT = CHAT[1].index("\u00fc".encode()) + 1
"""Where the halves check splits the first content event: inside the two bytes of "ü", so that a relay which
decodes text (httpx's `aiter_text()`, a decoder of its own) holds back the byte it cannot decode yet, as surely as
a relay that waits for whole lines or events holds back the rest."""
TTFT = 0.3  # the scripted time to first token
LINGER = 0.5  # seconds the upstream keeps its body open after data: [DONE] (the SDK hangs up first)


@dataclass(frozen=True)
class CheckOptions:
    """What the checker assumes about the relay and how strict it is (see `check_relay`)."""

    keepalive: float = 0.25
    read_timeout: float = 2.0
    disconnect_bound: float = 1.0
    ttft_bound: float = 0.25
    seed: int = 1
    fuzz_runs: int = 16
    requirements: tuple[int, ...] = (1, 2, 3, 4, 5)

    def __post_init__(self) -> None:
        if not (0 < self.keepalive and 4 * self.keepalive < self.read_timeout):
            raise ValueError(
                f"the keep-alive checks stall the upstream for 4 x keepalive ({4 * self.keepalive:g} s), "
                f"which must stay under read_timeout ({self.read_timeout:g} s)"
            )
        if self.read_timeout < HALF_GAP + 0.5:
            raise ValueError(
                f"the halves check leaves the upstream silent for {HALF_GAP:g} s inside an event; "
                f"read_timeout ({self.read_timeout:g} s) must exceed it by at least 0.5 s, or a relay "
                "would rightly give up on a healthy upstream"
            )
        unknown = set(self.requirements) - {1, 2, 3, 4, 5}
        if unknown:
            raise ValueError(f"requirements are numbered 1-5, got {sorted(unknown)}")

    @property
    def stall(self) -> float:
        """How long the keep-alive checks keep the upstream silent."""
        return 4 * self.keepalive


def _rest(frames: list[bytes], start: int) -> list[Send]:
    return [Send(f) for f in frames[start:]]


def build_script(options: CheckOptions) -> dict[str, Episode]:
    """Every upstream behaviour the checks need, each under its own model name."""
    s = options.stall
    crlf = [f.replace(b"\n", b"\r\n") for f in CHAT]
    cr_at = crlf[1].index(b"\r") + 1  # just after the CR of the data line's CRLF
    ev_at = RESP[DELTA].index(b"\n") + 1  # after `event: response.output_text.delta`, before its data line
    umlaut = RESP[DELTA].index("\u00fc".encode()) + 1  # inside the two bytes of "ü"
    return {
        "check-chat": Episode(paced(CHAT, gap=0.002)),
        "check-responses": Episode(paced(RESP, gap=0.002)),
        "check-length": Episode(paced(shapes.chat_text_stream(PIECES[:3], finish_reason="length"), gap=0.002)),
        "check-halves": Episode(
            [Send(CHAT[0]), Send(CHAT[1][:HALF_AT]), Wait(HALF_GAP), Send(CHAT[1][HALF_AT:]), *_rest(CHAT, 2)]
        ),
        "check-ttft": Episode([Send(CHAT[0]), Wait(TTFT), *_rest(CHAT, 1)]),
        "check-hang": Episode([Send(CHAT[0]), Send(CHAT[1]), Stall()]),
        "check-thinking": Episode([Stall()]),
        "check-ka-between": Episode([Send(CHAT[0] + CHAT[1]), Wait(s), *_rest(CHAT, 2)]),
        "check-ka-in-event": Episode(
            [
                *_sends(RESP[:DELTA]),
                Send(RESP[DELTA][:ev_at]),
                Wait(s),
                Send(RESP[DELTA][ev_at:]),
                *_rest(RESP, DELTA + 1),
            ]
        ),
        "check-ka-mid-line": Episode([Send(CHAT[0]), Send(CHAT[1][:20]), Wait(s), Send(CHAT[1][20:]), *_rest(CHAT, 2)]),
        "check-ka-after-cr": Episode(
            [Send(crlf[0]), Send(crlf[1][:cr_at]), Wait(s), Send(crlf[1][cr_at:]), *_rest(crlf, 2)]
        ),
        "check-die-cut": Episode(_sends(CHAT[:3]) + [Cut()]),
        "check-die-cut-utf8": Episode(_sends(RESP[:DELTA]) + [Send(RESP[DELTA][:umlaut]), Cut()]),
        "check-die-cut-before-blank": Episode(_sends(CHAT[:2]) + [Send(CHAT[2][:-1]), Cut()]),
        "check-die-reset": Episode(_sends(CHAT[:3]) + [Cut(reset=True)]),
        "check-die-reset-mid-line": Episode(_sends(RESP[: DELTA + 1]) + [Send(RESP[DELTA + 1][:25]), Cut(reset=True)]),
        "check-die-error-chat": Episode(_sends(shapes.chat_error_stream(PIECES[:2]))),
        "check-die-error-responses": Episode(_sends(shapes.responses_error_stream(PIECES[:2]))),
        "check-die-ended-early": Episode(_sends(RESP[: DELTA + 2])),
        "check-die-stall": Episode(_sends(CHAT[:3]) + [Stall()]),
        "check-done-linger": Episode(_sends(CHAT) + [Wait(LINGER)]),
        "check-chaos": Episode(_sends(CHAT)),
        "check-chaos-responses": Episode(_sends(RESP)),
    }


def _sends(frames: list[bytes]) -> list[Send]:
    return [Send(f) for f in frames]


@dataclass(frozen=True)
class Death:
    """An upstream death check: the model that scripts it, its dialect, the outcome it exercises, and
    whether every event sent must arrive (a reset may destroy bytes in flight)."""

    name: str
    model: str
    dialect: str
    outcome: Outcome = Outcome.TRUNCATED
    all_delivered: bool = True


DEATHS = (
    Death("cut between events (chat)", "check-die-cut", "chat"),
    Death("cut inside a UTF-8 character (responses)", "check-die-cut-utf8", "responses"),
    Death("cut before an event's blank line (chat)", "check-die-cut-before-blank", "chat"),
    Death("reset between events (chat)", "check-die-reset", "chat", all_delivered=False),
    Death("reset mid-line (responses)", "check-die-reset-mid-line", "responses", all_delivered=False),
    Death("error object after the 200 (chat)", "check-die-error-chat", "chat", Outcome.FAILED),
    Death("error event after the 200 (responses)", "check-die-error-responses", "responses", Outcome.FAILED),
    Death("clean end without the terminal event (responses)", "check-die-ended-early", "responses"),
    Death("stall past the read timeout (chat)", "check-die-stall", "chat"),
)


ABOUT = {
    "check-chat": "the plain Chat answer",
    "check-responses": "the plain Responses answer",
    "check-length": "the answer cut short by finish_reason length",
    "check-halves": "the answer with one event sent in two halves",
    "check-ttft": "the timed answer (time to first token)",
    "check-hang": "the Chat stream whose client leaves mid-stream",
    "check-thinking": "the Responses stream whose client leaves before the first token",
    "check-ka-between": "the stream that stalls between events",
    "check-ka-in-event": "the stream that stalls inside an event",
    "check-ka-mid-line": "the stream that stalls inside a line",
    "check-ka-after-cr": "the stream that stalls between a CR and its LF",
    "check-done-linger": "the stream whose client hangs up at data: [DONE]",
    "check-chaos": "the Chat streams through chaos faults",
    "check-chaos-responses": "the Responses streams through chaos faults",
    **{death.model: f"the stream that dies: {death.name}" for death in DEATHS},
}
"""Each scripted upstream's stream in words, for verdicts: the model names are the checker's own."""


# -- the two clients ---------------------------------------------------------------------------------------------


@dataclass
class RawResult:
    """One raw streaming request: status, body bytes, whether the body ended properly, the transport error if
    any, each chunk's arrival (perf_counter, bytes so far), when the request was sent and when we hung up."""

    status: int | None = None
    body: bytes = b""
    complete: bool = False
    error: str = ""
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    sent_at: float = 0.0
    closed_at: float = 0.0

    def first_time(self, events: int) -> float | None:
        """When the client first held `events` complete events (None if never)."""
        for at, size in self.arrivals:
            if len(parse(self.body[:size])[0]) >= events:
                return at
        return None


def _request(dialect: str, model: str) -> tuple[str, dict[str, Any]]:
    if dialect == "chat":
        return "chat/completions", {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    return "responses", {"model": model, "stream": True, "input": "hi"}


MAX_STREAM_BYTES = 16 * 1024 * 1024
"""The most of one relay's stream the checker keeps (raw bytes, or the SDK's text): no scripted stream comes
near it, and a relay that streams for ever had run the checker out of memory in 21 s."""


def deadline_for(timeout: float) -> float:
    """The longest a checker stream may last in all. A healthy relay ends every scripted stream within about
    one read timeout (the longest scripted silence is the stall it must cut), and `timeout` is the relay's read
    timeout plus 5 s, so half of it again is slack for a loaded machine, not time spent waiting on a relay that
    never ends."""
    return 1.5 * timeout


@contextlib.contextmanager
def _watchdog(seconds: float, close: Callable[[], None]) -> Iterator[threading.Event]:
    """Call `close` (from a timer thread) if the block outlives `seconds`; the event says whether it fired.
    Keep-alive comments defeat a per-read timeout, so only an overall deadline ends a relay that never stops."""
    fired = threading.Event()

    def give_up() -> None:
        fired.set()
        with contextlib.suppress(Exception):
            close()

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield fired
    finally:
        timer.cancel()
        timer.join()


def raw_stream(base_url: str, model: str, dialect: str, *, timeout: float, leave_after: int | None = None) -> RawResult:
    """POST a streaming request with httpx and read the raw body; with `leave_after=N` hang up once N events
    arrived (0: right after the status line). A stream that outlives `deadline_for(timeout)` is closed and
    recorded as an error."""
    path, body = _request(dialect, model)
    result = RawResult(sent_at=time.perf_counter())
    data = bytearray()
    fired = threading.Event()
    guard = SocketDeadline(deadline_for(timeout) + 1.0)  # the wait for the headers too: a relay may drip them
    try:
        with httpx.Client(
            timeout=httpx.Timeout(timeout, connect=5.0), trust_env=False, event_hooks={"request": [guard.hook]}
        ) as client:
            with (
                client.stream(
                    "POST", f"{base_url}/{path}", json=body, headers={"Authorization": "Bearer relay-check"}
                ) as response,
                _watchdog(deadline_for(timeout), response.close) as fired,
            ):
                result.status = response.status_code
                if leave_after != 0:
                    for chunk in response.iter_raw():
                        data += chunk
                        result.arrivals.append((time.perf_counter(), len(data)))
                        if len(data) > MAX_STREAM_BYTES:
                            result.error = f"the stream went on past {MAX_STREAM_BYTES} bytes: the checker stopped"
                            break
                        if leave_after is not None and len(parse(bytes(data))[0]) >= leave_after:
                            break
                    else:
                        result.complete = not fired.is_set()
    except httpx.HTTPError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    except Exception:  # closing from the watchdog may surface as any error of the reading side
        if not fired.is_set() and not guard.fired:
            raise
    finally:
        guard.cancel()
    if fired.is_set() or guard.fired:
        result.complete = False
        result.error = f"the checker gave up after {deadline_for(timeout):g} s: the stream never ended"
    result.closed_at = time.perf_counter()
    result.body = bytes(data)
    return result


def sdk_stream(base_url: str, model: str, dialect: str, *, timeout: float) -> tuple[SdkResult, int | None]:
    """Stream with the official openai SDK, as a user would; the text it yielded, what it raised, and the HTTP
    status (from the exception for an error status)."""
    guard = SocketDeadline(deadline_for(timeout) + 1.0)  # the wait for the headers too: a relay may drip them
    http = httpx.Client(timeout=timeout, trust_env=False, event_hooks={"request": [guard.hook]})
    client = openai.OpenAI(  # openai 3 names httpx2's Client in its types; an httpx.Client is what it is given here
        base_url=base_url,
        api_key="relay-check",
        max_retries=0,
        timeout=timeout,
        http_client=http,  # type: ignore[arg-type]
    )
    text: list[str] = []
    fired = threading.Event()
    gave_up = SdkResult("", GAVE_UP, f"the checker gave up after {deadline_for(timeout):g} s")
    try:
        if dialect == "chat":
            stream: Any = client.chat.completions.create(
                model=model, stream=True, messages=[{"role": "user", "content": "hi"}]
            )
            with _watchdog(deadline_for(timeout), stream.response.close) as fired:
                for chunk in stream:
                    text += [c.delta.content or "" for c in chunk.choices]
                    if len(text) > MAX_STREAM_BYTES // 16:  # pieces of text: a relay that never stops
                        break
        else:
            stream = client.responses.create(model=model, input="hi", stream=True)
            with _watchdog(deadline_for(timeout), stream.response.close) as fired:
                for event in stream:
                    if isinstance(event, ResponseTextDeltaEvent):
                        text.append(event.delta)
                    if len(text) > MAX_STREAM_BYTES // 16:
                        break
        if fired.is_set() or guard.fired or len(text) > MAX_STREAM_BYTES // 16:
            return SdkResult("".join(text), gave_up.raised, gave_up.message), 200
        return SdkResult("".join(text)), 200
    except Exception as exc:  # whatever the SDK raises is the evidence: a raise is never a normal return
        if fired.is_set() or guard.fired:
            return SdkResult("".join(text), gave_up.raised, gave_up.message), 200
        return SdkResult("".join(text), type(exc).__name__, str(exc)), getattr(exc, "status_code", 200)
    finally:
        guard.cancel()
        client.close()
        http.close()


# -- running the checks ------------------------------------------------------------------------------------------


class CheckRun:
    """One checker run: the relay, the stand-in, the fixed upstream port, and the streams asked for so far."""

    def __init__(
        self,
        report: RelayReport,
        relay: Any,
        standin: StandIn,
        port: int,
        options: CheckOptions,
        log: Callable[[str], None],
    ) -> None:
        self.report, self.relay, self.standin, self.port = report, relay, standin, port
        self.options, self.log = options, log
        self.url = relay.base_url
        self.timeout = options.read_timeout + 5.0
        self.streams: list[StreamExpectation] = []

    def add(self, name: str, requirement: int, outcome: Outcome | None, passed: bool, evidence: str) -> None:
        result = self.report.add(CheckResult(name, requirement, outcome, passed, evidence))
        self.log(result.line())

    @contextlib.contextmanager
    def front(self, **faults: Any) -> Iterator[ChaosProxy]:
        """The chaos proxy in front of the stand-in, on the fixed upstream port, for the duration of a check."""
        with ChaosProxy(("127.0.0.1", self.standin.port), port=self.port, **faults) as proxy:
            yield proxy

    def raw(
        self,
        model: str,
        dialect: str,
        outcome: Outcome | None,
        chars: int | None = None,
        leave_after: int | None = None,
    ) -> RawResult:
        result = raw_stream(self.url, model, dialect, timeout=self.timeout, leave_after=leave_after)
        self.streams.append(
            StreamExpectation(model, outcome, chars, required=result.status == 200, about=ABOUT.get(model, ""))
        )
        return result

    def sdk(self, model: str, dialect: str, outcome: Outcome | None, chars: int | None = None) -> SdkResult:
        result, status = sdk_stream(self.url, model, dialect, timeout=self.timeout)
        self.streams.append(
            StreamExpectation(model, outcome, chars, required=status == 200, about=ABOUT.get(model, ""))
        )
        return result

    def upstream_sent(self, model: str) -> bytes:
        """What the stand-in wrote for the latest request for `model` (once it has finished, or after 5 s)."""
        self.standin.wait_until(lambda rs: all(r.finished for r in rs if r.model == model), 5.0)
        records = self.standin.records(model)
        return records[-1].written if records else b""
