"""One request through one or more upstreams, decided without a socket: events in, actions out (sans-IO core).

The relay and the gateway do the same thing with every request, and this machine decides all of it once:

    start                                     -> Connect(first upstream)
    refused (its breaker said no)             -> Connect(next), or Reject 503 when every breaker said no
    failed (no status, no connection, an error status, a stream that died before its first event)
                                              -> fallback.decide: Connect(next), or pass the failure on
    reply (a 2xx that is not a stream)        -> Respond with it as it came
    stream_head                               -> hold (the gateway) or commit at once (the relay: Head)
    chunk / tick / half_close                 -> while holding: keep-alives, then the commit (Head and the
                                                 held bytes) once the first event is complete; after it: Send
                                                 the bytes as they came, keep-alives (`Pacing`), Probe
    answered (the terminal event went out)    -> Send(end) at once, however long the upstream stays open
    upstream_end / stop / read timeout        -> fallback.decide: Resume the same response after its cursor, or
                                                 the marked final event (`RelayedStream.upstream_ended`)
    client_gone                               -> the upstream is closed; the attempt noted as neutral

Every attempt's result goes once to its upstream's breaker (`Record`) and once into `tried` (the log's
attempts). The relay is this machine with one upstream, no hold and no breaker; the gateway, several upstreams
and a hold. `streamlab.net.relay.wire` carries the actions out (HTTP, the clock, the client's socket); the
machine never reads a clock: every event brings its `now`, so fail-over, commit and resume are tested on a
fake clock (tests/relay/test_exchange.py).

The relayed stream itself (bytes in, bytes out, the summary, keep-alives that never change an event, the marked
final event) is `RelayedStream`; the waits are `Pacing`; the moves after a failure are
`streamlab.core.gateway.fallback.decide`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from streamlab.core.endings import Ending, Outcome
from streamlab.core.gateway.breaker import Health, health_of
from streamlab.core.gateway.fallback import Move, Situation, decide
from streamlab.core.gateway.log import Attempt, AttemptNote
from streamlab.core.relay.pacing import Due, Pacing
from streamlab.core.relay.stream import BOM, RelayedStream, raises_in_sdk
from streamlab.core.safejson import json_or_none
from streamlab.core.sse import SSEEvent, parse

__all__ = [
    "HOLD_LIMIT",
    "KEEPALIVE",
    "Failure",
    "Connect",
    "Close",
    "Commit",
    "Head",
    "Send",
    "Respond",
    "Reject",
    "Record",
    "Resume",
    "Probe",
    "Settle",
    "Drain",
    "Action",
    "Exchange",
]

HOLD_LIMIT = 1 << 20
"""Bytes held while waiting for a first event; past it the answer is committed anyway (no first event is
that large in practice, and holding more would only delay the client)."""

KEEPALIVE = b": keep-alive\n\n"
"""The keep-alive sent while an answer is held (no byte of it is out, so any comment is safe)."""


@dataclass
class Failure:
    """A failed attempt before anything of it reached the client: what happened, and what to pass on."""

    upstream: str
    ending: Ending
    detail: str = ""
    status: int | None = None  # an error status, passed to the client as it came
    answered: int | None = None  # the status line of a stream that died before its first event
    body: bytes = b""  # the upstream's JSON error body as it came (or the text, wrapped)
    headers: dict[str, str] | None = None  # its headers a client's retry logic reads
    retry_after: float | None = None
    content: Outcome | None = None  # for a stream that ended cleanly but failed (COMPLETE)
    in_stream_error: bool = False


class Connect(NamedTuple):
    """Ask this upstream (its breaker first), and feed back `refused`, `failed`, `reply` or `stream_head`."""

    upstream: str


class Close(NamedTuple):
    """Close the current upstream response (its attempt is over; another may follow)."""


class Commit(NamedTuple):
    """This upstream's answer is the client's from here on (the executor notes its request id, its home)."""

    upstream: str


class Head(NamedTuple):
    """Send the 200 head of an event stream, with these upstream headers (and the label naming `upstream`)."""

    headers: Mapping[str, str]
    upstream: str | None = None


class Send(NamedTuple):
    """Send body bytes (`more=False`: they are the last, the body ends)."""

    data: bytes
    more: bool = True


class Respond(NamedTuple):
    """A whole response that is not a stream, as an upstream sent it: status, JSON body, headers."""

    status: int
    body: bytes
    headers: Mapping[str, str] | None = None


class Reject(NamedTuple):
    """A whole error response of the server's own (the executor writes it in the OpenAI error shape)."""

    status: int
    code: str
    message: str
    headers: Mapping[str, str] | None = None


class Record(NamedTuple):
    """Tell the current attempt's breaker how it went (once per attempt): a `Failure` or a `Health`."""

    upstream: str
    result: Failure | Health
    detail: str = ""


class Resume(NamedTuple):
    """Ask `upstream` for the rest of `response_id` after `cursor`; feed back `resumed`."""

    upstream: str
    response_id: str
    cursor: int


class Probe(NamedTuple):
    """The client half-closed: write `Exchange.beat(now)` twice, a moment apart (gone, or only half-closed?)."""


class Settle(NamedTuple):
    """The client's body ended at the answer's end: feed `Exchange.settle` (the summary, the breaker, a drain)."""


class Drain(NamedTuple):
    """The client's body has ended: read what the upstream still sends, for at most `timeout` seconds."""

    timeout: float


Action = Connect | Close | Commit | Head | Send | Respond | Reject | Record | Resume | Probe | Settle | Drain
"""What the machine asks its executor to do."""

_CLOSE, _PROBE, _SETTLE = Close(), Probe(), Settle()
_DEATHS = frozenset({Ending.BROKEN, Ending.READ_TIMEOUT, Ending.INCOMPLETE_EVENT, Ending.COMPLETE, Ending.STOPPED})
"""Endings `RelayedStream.upstream_ended` knows how to mark; anything else is marked as a break."""
_ANSWERED = (Outcome.COMPLETE, Outcome.INCOMPLETE)


def response_id_of(first: SSEEvent | None) -> str | None:
    """The id of a Responses response from its first event (`response.created`), else None."""
    obj = json_or_none(first.data) if first is not None else None
    response = obj.get("response") if isinstance(obj, dict) else None
    rid = response.get("id") if isinstance(response, dict) else None
    return rid if isinstance(rid, str) else None


class Exchange:
    """One request through `upstreams`, in order of preference (module docstring).

    `stream` is the request's `RelayedStream` (its summary, whatever happens); `new_stream()` makes the one of
    each stream an upstream starts (a fresh one, with the request's stream id). `hold`: send nothing of an
    answer before its first event is complete, and name the upstream in the head (the gateway), or commit at
    its head (the relay). `label`: the server's name in codes (`gateway_stopping`...). `resumable`: a
    Responses stream that may be continued from a cursor; `response_id` is its id when the request names it
    (a retrieve). Feed events; each returns the actions to
    carry out, in order. `done` says the request is over; `rs` is the stream the client got (its summary).
    """

    def __init__(
        self,
        *,
        upstreams: Sequence[str],
        stream: RelayedStream,
        new_stream: Callable[[], RelayedStream],
        keepalive: float | None,
        read_timeout: float,
        hold: bool = True,
        label: str = "gateway",
        resumable: bool = False,
        response_id: str | None = None,
        max_resumes: int = 0,
    ) -> None:
        self.upstreams = tuple(upstreams)
        self.new_stream = new_stream
        self.keepalive, self.read_timeout = keepalive, read_timeout
        self.hold, self.label = hold, label
        self.resumable, self.response_id, self.max_resumes = resumable, response_id, max_resumes
        self.rs = stream  # replaced by each stream's own: the last is the one the client got
        self.tried: list[AttemptNote] = []
        self.answered_by: str | None = None
        self.status_sent: int | None = None
        self.first: SSEEvent | None = None  # the committed answer's first event
        self.resumes = 0
        self.head_sent = self.body_ended = self.committed = self.stopping = self.done = False
        self.body_sent = 0
        self.recorded = True  # the current attempt's breaker has heard (no attempt is out yet)
        self._next = 0  # the index of the next upstream to try
        self._current = ""
        self._held = bytearray()
        self._pacing: Pacing | None = None
        self._last: Failure | None = None
        self._status: int | None = None  # the current stream's status line
        self._headers: Mapping[str, str] = {}  # the current stream's headers a client reads
        self._ending: tuple[Ending, str] = (Ending.BROKEN, "")  # why a resume was asked for
        self._settle_at = 0.0  # when the bytes that ended the answer came

    # -- before a stream --

    @property
    def current(self) -> str:
        """The upstream of the current attempt ("" before the first)."""
        return self._current

    @property
    def upstreams_left(self) -> int:
        """Upstreams not tried yet (none once the server is stopping: it starts nothing new)."""
        return 0 if self.stopping else len(self.upstreams) - self._next

    def start(self, now: float) -> list[Action]:
        """The request arrived: ask the first upstream."""
        return self._connect_next(now)

    def _connect_next(self, now: float, retry_in: float = 0.0) -> list[Action]:
        if self._next < len(self.upstreams) and not (self.stopping and self._last is not None):
            self._current = self.upstreams[self._next]
            self._next += 1
            self.recorded = False
            return [Connect(self._current)]
        if self._last is not None:
            return self._pass_failure(self._last, now)
        self.rs.failed(Ending.HTTP_ERROR, now, status=503, detail="every circuit breaker is open")
        return self._reject(
            503,
            "upstreams_unavailable",
            f"every upstream's circuit breaker is open; retry in {retry_in:.3g} s",
            {"retry-after": str(max(1, -int(-retry_in // 1)))},
        )

    def refused(self, now: float, *, retry_in: float = 0.0) -> list[Action]:
        """The current upstream's breaker said no (`retry_in`: seconds until the first breaker allows again)."""
        self.recorded = True
        self.tried.append(AttemptNote(self._current, Attempt.REFUSED, detail="its circuit breaker is open"))
        return self._connect_next(now, retry_in)

    def failed(self, failure: Failure, now: float) -> list[Action]:
        """The current attempt failed before anything of it reached the client: fail over or pass it on."""
        verdict = decide(Situation(0, failure.ending, failure.status, failure.in_stream_error, self.upstreams_left))
        health = health_of(failure.ending, status=failure.status, content=failure.content)
        status = failure.status or failure.answered
        self.tried.append(
            AttemptNote(failure.upstream, Attempt.of(health), status, failure.ending, verdict.move, failure.detail)
        )
        self.recorded = True
        actions: list[Action] = [Record(failure.upstream, failure)]
        if verdict.move is Move.FAIL_OVER:
            self._last = failure
            return actions + self._connect_next(now)
        return actions + self._pass_failure(failure, now)

    def reply(self, status: int, body: bytes, headers: Mapping[str, str] | None, now: float) -> list[Action]:
        """The current upstream answered with a 2xx that is not a stream: pass it on as it came."""
        name = self._current
        self.recorded = True
        self.tried.append(AttemptNote(name, Attempt.OK, status, Ending.NOT_EVENT_STREAM))
        self.answered_by = name
        self.rs.failed(Ending.NOT_EVENT_STREAM, now, status=status, detail="not a stream")
        return [Record(name, Health.OK, f"HTTP {status}, not a stream"), *self._respond(status, body, headers)]

    def _pass_failure(self, failure: Failure, now: float) -> list[Action]:
        """Give the client the last failure: its status and body as they came (502, 503 or 504 when there was
        no status), or, once the head is out, the marked final event."""
        self.answered_by = failure.upstream
        detail = f"{failure.upstream}: {failure.detail}" if self.hold else failure.detail
        if self.head_sent:
            self.rs.status = 200
            ending = failure.ending if failure.ending in _DEATHS else Ending.BROKEN
            return self._end(self.rs.upstream_ended(ending, now, detail))
        if failure.status is not None:
            self.rs.failed(Ending.HTTP_ERROR, now, status=failure.status, detail=detail)
            return self._respond(failure.status, failure.body, failure.headers)
        codes = {Ending.READ_TIMEOUT: (504, "upstream_timeout"), Ending.STOPPED: (503, f"{self.label}_stopping")}
        status, code = codes.get(failure.ending, (502, "upstream_unreachable"))
        self.rs.failed(failure.ending, now, status=status, detail=detail)
        return self._reject(status, code, detail if self.hold else f"{failure.upstream}: {detail}")

    def client_left(self, now: float, when: str) -> list[Action]:
        """The client went away before the current attempt's answer was committed."""
        why = f"the client left {when}"
        name = self._current
        self.recorded = True
        self.tried.append(AttemptNote(name, Attempt.NEUTRAL, ending=Ending.CLIENT_GONE, detail=why))
        self.answered_by = name
        self.rs.client_gone(now, why)
        self.status_sent = self.status_sent or 499
        self.done = True
        return [Record(name, Health.NEUTRAL, why)]

    def crashed(self, detail: str, now: float, *, head_sent: bool, body_ended: bool) -> list[Action]:
        """The executor met an exception nothing expected (`detail` says which). The attempt is released as
        neutral (the server's own failure proves nothing about the upstream, and a client must not be able to
        trip breakers by making it fail); then fail-over before the commit, else a 502 or the marked end.
        `head_sent` and `body_ended` are what really went out (an action may have failed half done)."""
        self.head_sent, self.body_ended = head_sent, body_ended
        if self.body_ended:
            self.done = True
        actions: list[Action] = []
        move = None
        if not self.committed and self._current:
            move = decide(Situation(0, Ending.BROKEN, None, False, self.upstreams_left)).move
        if not self.recorded:
            self.recorded = True
            actions.append(Record(self._current, Health.NEUTRAL, detail))
            self.tried.append(AttemptNote(self._current, Attempt.NEUTRAL, None, Ending.BROKEN, move, detail))
        if move is Move.FAIL_OVER:
            self._last = Failure(self._current, Ending.BROKEN, detail)
            return [*actions, _CLOSE, *self._connect_next(now)]
        self.answered_by = self.answered_by or self._current or None
        if not self.head_sent:
            self.rs.failed(Ending.BROKEN, now, status=502, detail=detail)
            return actions + self._reject(502, f"{self.label}_error", detail)
        final = b"" if self.rs.done else self.rs.upstream_ended(Ending.BROKEN, now, detail)
        return actions if self.body_ended else actions + self._end(final)

    # -- a stream --

    def stream_head(self, status: int, headers: Mapping[str, str], now: float) -> list[Action]:
        """The current upstream answered with an event stream: hold it (or, with no hold, commit at once)."""
        rs = self.new_stream()
        rs.status = status
        if self.resumable:
            rs.track_cursor()
        self.rs, self._status, self._headers = rs, status, headers
        self._held = bytearray()
        self._pacing = Pacing(keepalive=self.keepalive, read_timeout=self.read_timeout, now=now)
        if self.hold:
            return []
        return self._commit(now)

    @property
    def holding(self) -> bool:
        """An answer is being held: no event of it is complete yet (the machine may still fail over)."""
        return self._pacing is not None and not self.committed

    def wait(self, now: float) -> float | None:
        """Seconds the executor may wait for the upstream before it must feed `tick` (None: no stream yet)."""
        pacing = self._pacing
        return None if pacing is None else pacing.wait(now)

    def chunk(self, data: bytes, at: float) -> list[Action]:
        """Bytes from the upstream: sent on as they came (the parse waits while it may: `RelayedStream.follow`)."""
        if not self.committed:
            return self._hold_chunk(data, at)
        rs = self.rs
        self._pacing.upstream(at)  # type: ignore[union-attr]
        out = rs.forward(data, at)
        self.body_sent += len(out)
        if rs.at_done and not self.hold:  # the answer is over: its end goes out first, the summary after
            self._settle_at = at
            return [Send(out), *self._end(b""), _SETTLE]
        if rs.answered:  # the terminal event went out: end the client's body now, then drain
            return [Send(out), *self._answered(at)]
        rs.follow()  # the parse the TTFT and the bounds need; the rest waits for a reader (the bytes went out first)
        return [Send(out)] if out else []

    def settle(self, now: float) -> list[Action]:
        """After a body ended at its `[DONE]` (`Settle`): the summary catches up, the breaker hears, then drain."""
        rs = self.rs
        if rs.upstream_ended(Ending.COMPLETE, self._settle_at):
            rs.marked = False  # a marker after [DONE] could not be sent: the body has ended
        noted = [] if self.recorded else self._note(None, rs.ending, rs.detail)
        return [*noted, Drain(self.read_timeout)]

    def _answered(self, now: float) -> list[Action]:
        rs = self.rs
        final = rs.upstream_ended(Ending.COMPLETE, now)
        actions = [] if self.recorded else self._note(None, rs.ending, rs.detail)  # the breaker first
        return [*actions, *self._end(final), Drain(self.read_timeout)]

    def _hold_chunk(self, data: bytes, at: float) -> list[Action]:
        rs, pacing = self.rs, self._pacing
        assert pacing is not None
        pacing.restart_upstream(at)  # nothing went out: the downstream clock keeps running
        rs.upstream(data, at)
        self._held += data
        if not (rs.events or len(self._held) > HOLD_LIMIT):
            return []
        events, _ = parse(bytes(self._held))
        first = events[0] if events else None
        if first is not None and raises_in_sdk(first):
            failure = Failure(
                self._current,
                Ending.COMPLETE,
                "an error object as the first event",
                answered=rs.status,
                content=Outcome.FAILED,
                in_stream_error=True,
            )
            if decide(Situation(0, Ending.COMPLETE, None, True, self.upstreams_left)).move is Move.FAIL_OVER:
                return [_CLOSE, *self.failed(failure, at)]
        self.first = first
        return self._commit(at)

    def _commit(self, now: float) -> list[Action]:
        """This answer is the client's: its head (if not out yet) and its held bytes."""
        self.committed, self.answered_by = True, self._current
        if self.response_id is None:
            self.response_id = response_id_of(self.first)
        held = bytes(self._held)
        self._held = bytearray()
        actions: list[Action] = [Commit(self._current)]
        if not self.head_sent:
            self.head_sent, self.status_sent = True, 200
            actions.append(Head(self._headers, self._current if self.hold else None))
        if self.body_sent and held.startswith(BOM):  # a BOM only counts at the very start of the body
            held = held[len(BOM) :]
        self._pacing = Pacing(keepalive=self.keepalive, read_timeout=self.read_timeout, now=now)
        if held:
            self.body_sent += len(held)
            actions.append(Send(held))
        if self.rs.answered:
            actions += self._answered(now)
        return actions

    def tick(self, now: float) -> list[Action]:
        """The wait `wait` gave has passed with nothing from the upstream: a keep-alive, or the read timeout."""
        pacing = self._pacing
        if pacing is None:
            return []
        due = pacing.due(now)
        if due is Due.READ_TIMEOUT:
            if not self.committed:
                why = f"no first event within {self.read_timeout:g} s"
                failure = Failure(self._current, Ending.READ_TIMEOUT, why, answered=self._status)
                return [_CLOSE, *self.failed(failure, now)]
            return self._death(Ending.READ_TIMEOUT, f"nothing for {self.read_timeout:g} s", now)
        if due is Due.KEEPALIVE:
            return self._keepalive(now)
        return []

    def _keepalive(self, now: float) -> list[Action]:
        if self.committed:
            beat = self.rs.keepalive(now)
            self.body_sent += len(beat)
            return [Send(beat)] if beat else []
        actions: list[Action] = []
        if not self.head_sent:  # nothing of this answer is out: the head goes with a keep-alive
            self.head_sent, self.status_sent = True, 200
            actions.append(Head({}))
        self.body_sent += len(KEEPALIVE)
        return [*actions, Send(KEEPALIVE)]

    def half_close(self, now: float) -> list[Action]:
        """The client shut its sending side: probe it (`beat`), once the head is out."""
        if not self.committed and not self.head_sent:
            self.head_sent, self.status_sent = True, 200
            return [Head({}), _PROBE]
        return [_PROBE]

    def beat(self, now: float) -> bytes:
        """A probe's keep-alive at `now` (b"" where one would change the events: then nothing is written)."""
        if not self.committed:
            return KEEPALIVE
        beat = self.rs.keepalive(now)
        self.body_sent += len(beat)
        return beat

    def client_gone(self, now: float) -> list[Action]:
        """The client closed its connection while a stream was being read."""
        if not self.committed:
            return self.client_left(now, "before the first event")
        rs = self.rs
        rs.catch_up()
        rs.client_gone(now, "the client closed the connection")
        self.done = True
        return self._note(None, rs.ending, rs.detail) if not self.recorded else []

    def stop(self, now: float) -> list[Action]:
        """The server is stopping: no new upstream is tried, a stream ends with the marked final event."""
        self.stopping = True
        if not self.committed:
            why = f"the {self.label} is stopping"
            return [_CLOSE, *self.failed(Failure(self._current, Ending.STOPPED, why, answered=self._status), now)]
        return self._death(Ending.STOPPED, f"the {self.label} is stopping", now)

    def upstream_end(self, ending: Ending, detail: str, now: float) -> list[Action]:
        """The upstream's body stopped: cleanly (`COMPLETE`), or cut, reset or stalled."""
        if not self.committed:
            content = self.rs.accumulator.outcome() if ending is Ending.COMPLETE else None
            why = detail or "the body ended before its first event"
            failure = Failure(self._current, ending, why, answered=self._status, content=content)
            return [_CLOSE, *self.failed(failure, now)]
        return self._death(ending, detail, now)

    def _death(self, ending: Ending, detail: str, now: float) -> list[Action]:
        """The committed answer's upstream stopped: resume the same response, or end the client's body."""
        rs = self.rs
        rs.catch_up()
        content = rs.accumulator.outcome()
        finished = ending is Ending.COMPLETE and content in _ANSWERED
        actions: list[Action] = []
        if not finished and ending is not Ending.STOPPED:
            move, actions = self._after_death(ending, detail)
            if move is Move.RESUME:
                assert self.response_id is not None and rs.cursor is not None
                self._ending = (ending, detail)
                return [*actions, Resume(self._current, self.response_id, rs.cursor)]
        final = rs.upstream_ended(ending, now, detail)
        if not self.recorded:
            actions += self._note(None, rs.ending, rs.detail)
        return actions + self._end(final)

    def _after_death(self, ending: Ending, detail: str) -> tuple[Move, list[Action]]:
        """Ask the fallback rule what now, and note it (telling the breaker, if it has not heard yet)."""
        rs = self.rs
        parser = rs.parser
        boundary = parser is not None and not (parser.line_open or parser.in_event)
        resumable = (
            self.resumable
            and rs.cursor is not None
            and self.response_id is not None
            and self.resumes < self.max_resumes
        )
        error = rs.accumulator.outcome() is Outcome.FAILED and rs.sdk_raises
        move = decide(Situation(rs.events, ending, None, error, 0, resumable, boundary)).move
        return move, self._note(move, ending, detail)

    def resumed(self, ok: bool, now: float) -> list[Action]:
        """The answer to `Resume`: True, the same response goes on (the executor reads the new body); False,
        it could not: the marked final event."""
        if ok:
            self.resumes += 1
            self._pacing.restart_upstream(now)  # type: ignore[union-attr]
            return []
        ending, detail = self._ending
        return self._end(self.rs.upstream_ended(ending, now, detail))

    # -- bookkeeping --

    def _note(self, move: Move | None, ending: Ending, detail: str) -> list[Action]:
        """Note how a committed attempt went in `tried`; tell the breaker (once per attempt)."""
        health = health_of(ending, content=self.rs.accumulator.outcome())
        self.tried.append(AttemptNote(self._current, Attempt.of(health), 200, ending, move, detail))
        if self.recorded:
            return []
        self.recorded = True
        return [Record(self._current, health, detail or str(ending))]

    def _end(self, final: bytes) -> list[Action]:
        self.body_ended = self.done = True
        self.body_sent += len(final)
        return [Send(final, more=False)]

    def _respond(self, status: int, body: bytes, headers: Mapping[str, str] | None) -> list[Action]:
        self.head_sent, self.status_sent, self.done = True, status, True
        return [Respond(status, body, headers)]

    def _reject(self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> list[Action]:
        self.head_sent, self.status_sent, self.done = True, status, True
        return [Reject(status, code, message, headers)]
