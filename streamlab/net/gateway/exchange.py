"""One request through the gateway: try upstreams in order, hold the first event, then forward (I/O layer).

`Exchange` is the ASGI response the gateway returns for every proxied route. It runs the whole request
with the client's `send` in hand, because what goes out depends on what the upstreams do:

    for each upstream, in order of preference:
        its breaker says no                      -> note "refused", next upstream
        send the request; no status, no connection, an error status
                                                 -> Failure -> fallback.decide -> fail over, or pass it on
        a 2xx that is not a stream               -> pass it on as it came
        a stream: hold its bytes until the first event is complete (keep-alives meanwhile)
            it dies first, or that event is an error object
                                                 -> Failure -> fallback.decide -> fail over, or pass it on
            the first event is complete          -> commit: send the head and the held bytes, then forward
                                                    every chunk as it arrives (`RelayedStream`, as the relay)
            it dies after the commit             -> fallback.decide -> resume on the same upstream, or
                                                    the marked final event
    every breaker said no                        -> 503 with Retry-After

Every attempt's result goes to its upstream's breaker once; every request ends with one log record
(`GatewayState.finished`). Deciding lives in the core (`breaker`, `fallback`, `relaysummary`); this module
moves bytes, races the upstream against the client and the clock, and carries the decisions out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from streamlab.core.endings import Ending, Outcome
from streamlab.core.errors import InternalError
from streamlab.core.gateway.breaker import Health, Permit, health_of
from streamlab.core.gateway.fallback import Move, Situation, decide
from streamlab.core.gateway.log import Attempt, AttemptNote, request_id_of
from streamlab.core.relay.pacing import Due, Pacing
from streamlab.core.relay.stream import BOM, MAX_UNPARSED, RelayedStream, raises_in_sdk
from streamlab.core.sse import SSEEvent, is_event_stream, parse
from streamlab.net.relay.serving import PROBE_GAP, half_closed
from streamlab.net.relay.upstream import (
    STREAM_HEADERS,
    Read,
    UpstreamReader,
    cancel_all,
    connect_failure,
    disconnected,
    internal_error,
    json_reply,
    probe,
    read_reply,
    request_facts,
)

if TYPE_CHECKING:
    from streamlab.net.gateway.app import GatewayState, Upstream

__all__ = ["Exchange", "Failure", "HOLD_LIMIT"]

HOLD_LIMIT = 1 << 20
"""Bytes held while waiting for a first event; past it the answer is committed anyway (no first event is
that large in practice, and holding more would only delay the client)."""

_KEEPALIVE = b": keep-alive\n\n"
_CHUNK = Read.CHUNK  # read once: an enum member looked up through its class costs 0.2 us, per chunk here


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


def _resumable_request(request: Request, body: bytes) -> bool:
    """A Responses stream that can be continued from a cursor: created with background and stream, or a
    retrieve with stream=true."""
    if "/responses" not in request.url.path or request.url.path.endswith("/cancel"):
        return False
    if request.method == "GET":
        return request.query_params.get("stream", "").lower() == "true"
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and obj.get("background") is True and obj.get("stream") is True


def _response_id(request: Request, first: SSEEvent | None) -> str | None:
    """The id of the Responses response being streamed: from the retrieve path, else the first event's."""
    if request.method == "GET":
        return request.path_params.get("response_id")
    try:
        obj = json.loads(first.data) if first is not None else None
    except (ValueError, RecursionError):
        return None
    response = obj.get("response") if isinstance(obj, dict) else None
    rid = response.get("id") if isinstance(response, dict) else None
    return rid if isinstance(rid, str) else None


class Exchange(Response):
    """One client request through the gateway (module docstring)."""

    def __init__(self, state: GatewayState, request: Request, body: bytes, started: float) -> None:
        self.state = state
        self.request = request
        self.body = body
        self.started = started
        self.status_code = 200
        self.background = None
        self.model = request_facts(request, body)[0]
        rest = request.url.path[len("/v1") :]
        self.rest = rest + (f"?{request.url.query}" if request.url.query else "")
        self.headers_up = state.forward_headers(request)
        self.resumable = _resumable_request(request, body)
        self.rs = state.new_stream(request, self.model, started)  # replaced by the stream the client gets
        self.tried: list[AttemptNote] = []
        self.request_id: str | None = None
        self.response_id: str | None = None  # a Responses stream's id, for resuming it
        self.answered_by: str | None = None
        self.status_sent: int | None = None
        self.resumes = 0
        self.head_sent = False
        self.body_sent = 0
        self.body_ended = False
        self.committed = False  # an upstream's answer was chosen: its bytes are the client's from here on
        self.permit_open = False  # the current attempt's breaker permit has not been reported yet
        self.error: InternalError | None = None  # the unexpected exception this request met, if any
        self.probed = False  # a half-close probe went to a stream's reader (one per request)

    # -- the request, start to end --

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.state.stopping is not None
        self.scope, self.receive, self.send = scope, receive, send
        self.watch = asyncio.ensure_future(disconnected(receive))
        self.stop = asyncio.ensure_future(self.state.stopping.wait())
        try:
            try:
                await self._run()
            except Exception as exc:  # outside any attempt (no permit is out): answer, record, go on
                await self._end_broken(self._internal(exc, "the gateway"))
        finally:
            if not self.rs.done:  # cancelled from outside (the server shutting down hard)
                self.rs.upstream_ended(Ending.STOPPED, self.state.perf(), "the gateway task was cancelled")
            await cancel_all(self.watch, self.stop)
            self.state.finished(self)

    async def _run(self) -> None:
        upstreams = self.state.upstreams
        home = self.state.home_of(self.request.path_params.get("response_id"))
        if home is not None:  # a stored response lives on the upstream that created it: ask only that one
            upstreams = tuple(u for u in upstreams if u.name == home)
        last: Failure | None = None
        for i, upstream in enumerate(upstreams):
            permit = self.state.allow(upstream.name)
            if permit is None:
                self.tried.append(AttemptNote(upstream.name, Attempt.REFUSED, detail="its circuit breaker is open"))
                continue
            failure = await self._guarded(upstream, permit, upstreams_left=len(upstreams) - i - 1)
            if failure is None:
                return
            last = failure
        if last is not None:
            await self._pass_failure(last)
        else:
            await self._all_refused()

    async def _guarded(self, upstream: Upstream, permit: Permit, *, upstreams_left: int) -> Failure | None:
        """`_attempt`, with any exception it did not expect made an `InternalError` and an outcome like any
        other. Its permit is reported as neutral: released (a half-open breaker's probe had stayed out for ever,
        and with one upstream every request got 503), but never counted against the upstream, since the
        gateway's own failure proves nothing about it and a client must not be able to trip breakers by making
        the gateway fail. Then failover or a 502 before the commit, the marked final event after it."""
        self.permit_open = True
        try:
            return await self._attempt(upstream, permit, upstreams_left=upstreams_left)
        except Exception as exc:
            detail = self._internal(exc, f"{upstream.name}'s answer")
            failure = Failure(upstream.name, Ending.BROKEN, detail)
            verdict = decide(Situation(0, Ending.BROKEN, None, False, 0 if self.stop.done() else upstreams_left))
            move = None if self.committed else verdict.move
            if self.permit_open:
                self._record(upstream.name, permit, Health.NEUTRAL, detail=detail)
                self.tried.append(AttemptNote(upstream.name, Attempt.NEUTRAL, None, Ending.BROKEN, move, detail))
            if move is Move.FAIL_OVER:
                return failure
            if self.committed or self.head_sent:
                await self._end_broken(detail)
            else:
                await self._pass_failure(failure)
            return None

    def _internal(self, exc: Exception, where: str) -> str:
        """Note an unexpected exception as this request's `InternalError`; its message (the log's detail)."""
        self.error = internal_error(exc, where)
        return str(self.error)

    async def _end_broken(self, detail: str) -> None:
        """End the client's side after an internal error: a 502 before the head, else the marked final event
        (nothing more once the body has ended). The client may be gone already: that is not an error here."""
        now = self.state.perf()
        with contextlib.suppress(Exception):
            if not self.head_sent:
                self.rs.failed(Ending.BROKEN, now, status=502, detail=detail)
                await self._respond(_error(502, "gateway_error", detail))
            elif not self.body_ended:
                final = b"" if self.rs.done else self.rs.upstream_ended(Ending.BROKEN, now, detail)
                await self._body(final, more=False)
        if not self.rs.done:
            self.rs.upstream_ended(Ending.BROKEN, now, detail)

    def _record(self, name: str, permit: Permit, result: Failure | Health, *, detail: str = "") -> None:
        """Report the current attempt to its breaker (once: the permit is then no longer out)."""
        self.permit_open = False
        self.state.record(name, permit, result, detail=detail)

    async def _attempt(self, upstream: Upstream, permit: Permit, *, upstreams_left: int) -> Failure | None:
        """One upstream's turn. Returns a Failure when the request moves on to the next upstream, else None."""
        state, timeout = self.state, self.state.config.read_timeout
        assert state.client is not None
        request = state.client.build_request(
            self.request.method,
            upstream.url.rstrip("/") + self.rest,
            content=self.body,
            headers=self.state.headers_for(upstream, self.headers_up),
        )
        sending = asyncio.ensure_future(state.client.send(request, stream=True))
        done, _ = await asyncio.wait(
            {sending, self.watch, self.stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if sending not in done:
            await cancel_all(sending)
            if self.watch in done:
                return self._client_left(upstream.name, permit, "before the upstream answered")
            why = "the gateway is stopping" if self.stop in done else f"no status within {timeout:g} s"
            failure = Failure(upstream.name, Ending.STOPPED if self.stop in done else Ending.READ_TIMEOUT, why)
            return await self._failed(permit, failure, upstreams_left)
        try:
            response = sending.result()
        except httpx.HTTPError as exc:
            failure = Failure(upstream.name, *connect_failure(exc))
            return await self._failed(permit, failure, upstreams_left)
        if response.status_code < 300 and is_event_stream(response.headers.get("content-type")):
            return await self._stream(upstream, permit, response, upstreams_left)
        reply = await read_reply(response, timeout=state.config.read_timeout)
        obj, headers = reply.obj, state.response_headers(response)
        if response.status_code >= 300 or reply.status is not None:
            status = reply.status or response.status_code
            detail = f"HTTP {response.status_code}" + (f": {reply.problem[:200]}" if reply.status else "")
            failure = Failure(
                upstream.name,
                Ending.HTTP_ERROR,
                detail,
                status=status,
                body=reply.payload,
                headers=headers,
                retry_after=state.retry_after(response),
            )
            return await self._failed(permit, failure, upstreams_left)
        self._record(upstream.name, permit, Health.OK, detail=f"HTTP {response.status_code}, not a stream")
        self.tried.append(AttemptNote(upstream.name, Attempt.OK, response.status_code, Ending.NOT_EVENT_STREAM))
        self.answered_by = upstream.name
        if isinstance(obj, dict) and obj.get("object") == "response" and isinstance(obj.get("id"), str):
            state.remember(obj["id"], upstream.name)
        self.rs.failed(Ending.NOT_EVENT_STREAM, state.perf(), status=response.status_code, detail="not a stream")
        await self._respond(
            Response(reply.payload, status_code=response.status_code, headers=headers, media_type="application/json")
        )
        return None

    # -- failures before anything was sent --

    async def _failed(self, permit: Permit, failure: Failure, upstreams_left: int) -> Failure | None:
        """Note a failed attempt, tell its breaker, and fail over (return it) or pass it to the client."""
        left = 0 if self.stop.done() else upstreams_left  # a stopping gateway starts nothing new
        verdict = decide(Situation(0, failure.ending, failure.status, failure.in_stream_error, left))
        health = health_of(failure.ending, status=failure.status, content=failure.content)
        self.tried.append(
            AttemptNote(
                failure.upstream,
                Attempt.of(health),
                failure.status or failure.answered,
                failure.ending,
                verdict.move,
                failure.detail,
            )
        )
        self._record(failure.upstream, permit, failure)
        if verdict.move is Move.FAIL_OVER:
            return failure
        await self._pass_failure(failure)
        return None

    async def _pass_failure(self, failure: Failure) -> None:
        """Give the client the last failure: its status and body as they came (502 or 504 when there was no
        status), or, once the head is out, the marked final event."""
        now = self.state.perf()
        self.answered_by = failure.upstream
        if self.head_sent:
            self.rs.status = 200
            final = self.rs.upstream_ended(
                failure.ending if failure.ending in _DEATHS else Ending.BROKEN,
                now,
                f"{failure.upstream}: {failure.detail}",
            )
            await self._body(final, more=False)
            return
        if failure.status is not None:
            detail = f"{failure.upstream}: {failure.detail}"
            self.rs.failed(Ending.HTTP_ERROR, now, status=failure.status, detail=detail)
            await self._respond(
                Response(
                    failure.body, status_code=failure.status, headers=failure.headers, media_type="application/json"
                )
            )
            return
        status, code = {Ending.READ_TIMEOUT: (504, "upstream_timeout"), Ending.STOPPED: (503, "gateway_stopping")}.get(
            failure.ending, (502, "upstream_unreachable")
        )
        self.rs.failed(failure.ending, now, status=status, detail=f"{failure.upstream}: {failure.detail}")
        await self._respond(_error(status, code, f"{failure.upstream}: {failure.detail}"))

    async def _all_refused(self) -> None:
        wait = self.state.retry_in()
        self.rs.failed(Ending.HTTP_ERROR, self.state.perf(), status=503, detail="every circuit breaker is open")
        await self._respond(
            _error(
                503,
                "upstreams_unavailable",
                f"every upstream's circuit breaker is open; retry in {wait:.3g} s",
                {"retry-after": str(max(1, math.ceil(wait)))},
            )
        )

    def _client_left(self, name: str, permit: Permit, when: str) -> None:
        why = f"the client left {when}"
        self._record(name, permit, Health.NEUTRAL, detail=why)
        self.tried.append(AttemptNote(name, Attempt.NEUTRAL, ending=Ending.CLIENT_GONE, detail=why))
        self.answered_by = name
        self.rs.client_gone(self.state.perf(), why)
        self.status_sent = self.status_sent or 499

    # -- a stream --

    async def _stream(
        self, upstream: Upstream, permit: Permit, response: httpx.Response, upstreams_left: int
    ) -> Failure | None:
        rs = self.state.new_stream(self.request, self.model, self.started, stream_id=self.rs.stream_id)
        rs.status = response.status_code
        reader = UpstreamReader(
            response, watch=self.watch, stop=self.stop, clock=self.state.perf, probe=self._unprobed_half_close()
        )
        try:
            kind, value = await self._first_event(upstream.name, reader, rs)
            if kind == "failed":
                value.answered = response.status_code
            if kind == "gone":
                self.rs = rs
                return self._client_left(upstream.name, permit, "before the first event")
            held, first = value if kind == "commit" else (b"", None)
            if kind == "failed" or (first is not None and raises_in_sdk(first)):
                failure = (
                    value
                    if kind == "failed"
                    else Failure(
                        upstream.name,
                        Ending.COMPLETE,
                        "an error object as the first event",
                        answered=rs.status,
                        content=Outcome.FAILED,
                        in_stream_error=True,
                    )
                )
                verdict = decide(Situation(0, failure.ending, None, failure.in_stream_error, upstreams_left))
                if kind == "failed" or verdict.move is Move.FAIL_OVER:
                    await reader.close()
                    return await self._failed(permit, failure, upstreams_left)
            self.rs, self.answered_by, self.committed = rs, upstream.name, True
            self.request_id = request_id_of(response.headers, first)
            self.response_id = _response_id(self.request, first)
            self.state.remember(self.response_id, upstream.name)
            await self._commit(upstream, response, held)
            await self._forward(upstream, permit, reader, rs)
            return None
        finally:
            await reader.close()

    async def _first_event(self, name: str, reader: UpstreamReader, rs: RelayedStream) -> tuple[str, Any]:
        """Read until the first event is complete: ("commit", (held bytes, first event)), ("failed",
        Failure) or ("gone", None). Sends keep-alives (and with the first one, the head) meanwhile."""
        config = self.state.config
        held = bytearray()
        pacing = Pacing(keepalive=config.keepalive, read_timeout=config.read_timeout, now=self.state.perf())
        while True:
            item = await reader.next(pacing.wait(self.state.perf()))
            if item.kind is Read.GONE:
                return "gone", None
            if item.kind is Read.PROBE:  # nothing of this upstream's is out yet: a keep-alive after the head
                await self._start(STREAM_HEADERS)
                await self._probe(lambda: _KEEPALIVE)
                continue
            if item.kind is Read.STOP:
                return "failed", Failure(name, Ending.STOPPED, "the gateway is stopping")
            if item.kind is Read.END:
                assert item.ending is not None
                content = rs.accumulator.outcome() if item.ending is Ending.COMPLETE else None
                return "failed", Failure(
                    name, item.ending, item.detail or "the body ended before its first event", content=content
                )
            if item.kind is Read.CHUNK:
                pacing.restart_upstream(item.at)  # nothing went out: the downstream clock keeps running
                rs.upstream(item.data, item.at)
                held += item.data
                if rs.events or len(held) > HOLD_LIMIT:
                    events, _ = parse(bytes(held))
                    return "commit", (bytes(held), events[0] if events else None)
                continue
            due = pacing.due(item.at)
            if due is Due.READ_TIMEOUT:
                return "failed", Failure(name, Ending.READ_TIMEOUT, f"no first event within {config.read_timeout:g} s")
            if due is Due.KEEPALIVE:
                await self._start(STREAM_HEADERS)
                await self._body(_KEEPALIVE)

    async def _commit(self, upstream: Upstream, response: httpx.Response, held: bytes) -> None:
        extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.state.response_headers(response).items()]
        await self._start(STREAM_HEADERS + extra + [(b"x-gateway-upstream", upstream.name.encode("latin-1"))])
        if self.body_sent and held.startswith(BOM):  # a BOM only counts at the very start of the body
            held = held[len(BOM) :]
        await self._body(held)

    async def _forward(self, upstream: Upstream, permit: Permit, reader: UpstreamReader, rs: RelayedStream) -> None:
        """After the commit: forward until the end, resuming or marking the end when the upstream dies."""
        config, perf = self.state.config, self.state.perf
        pacing = Pacing(keepalive=config.keepalive, read_timeout=config.read_timeout, now=perf())
        recorded = False  # the breaker hears about an attempt once, at its first death or at its end
        while True:  # (a chunk already queued needs no wait worked out)
            item = await reader.next(None if reader.queued else pacing.wait(perf()))
            now = item.at
            if item.kind is _CHUNK:
                pacing.upstream(now)
                await self._body(rs.forward(item.data, now))  # the bytes first, then the parse
                if rs.answered:  # the terminal event went out: end the client's body now, then drain
                    final = rs.upstream_ended(Ending.COMPLETE, now)
                    if not recorded:  # the breaker hears first: a client's next request must see its new state
                        recorded = True
                        self._note(upstream.name, permit, rs, None, rs.ending, rs.detail)
                    await self._body(final, more=False)
                    await reader.drain(config.read_timeout)
                    break
                if not reader.queued or rs.unparsed >= MAX_UNPARSED:  # a burst is parsed in one go
                    rs.catch_up()
                continue
            rs.catch_up()  # what follows reads the parse
            if item.kind is Read.GONE:
                rs.client_gone(now, "the client closed the connection")
                break
            if item.kind is Read.PROBE:
                await self._probe(lambda: rs.keepalive(perf()))
                continue
            if item.kind is Read.IDLE:
                due = pacing.due(now)
                if due is Due.KEEPALIVE:
                    await self._body(rs.keepalive(now))
                if due is not Due.READ_TIMEOUT:
                    continue
            ending, detail = (
                (item.ending, item.detail)
                if item.kind is Read.END and item.ending is not None
                else (Ending.STOPPED, "the gateway is stopping")
                if item.kind is Read.STOP
                else (Ending.READ_TIMEOUT, f"nothing for {config.read_timeout:g} s")
            )
            content = rs.accumulator.outcome()
            finished = ending is Ending.COMPLETE and content in (Outcome.COMPLETE, Outcome.INCOMPLETE)
            if not finished and ending is not Ending.STOPPED:
                move = self._after_death(upstream.name, permit, rs, ending, detail, record=not recorded)
                recorded = True
                if move is Move.RESUME:
                    resumed = await self._resume(upstream, rs)
                    if resumed is not None:
                        await reader.swap(resumed)
                        self.resumes += 1
                        pacing.restart_upstream(perf())
                        continue
            final = rs.upstream_ended(ending, now, detail)
            if not recorded:
                recorded = True
                self._note(upstream.name, permit, rs, None, rs.ending, rs.detail)
            await self._body(final, more=False)
            break
        if not recorded:  # the client left
            self._note(upstream.name, permit, rs, None, rs.ending, rs.detail)

    def _after_death(
        self, name: str, permit: Permit, rs: RelayedStream, ending: Ending, detail: str, *, record: bool
    ) -> Move:
        """The upstream died after the commit: ask the fallback rule what now, and note it (telling the breaker
        if `record`)."""
        parser = rs.parser
        boundary = parser is not None and not (parser.line_open or parser.in_event)
        acc = rs.accumulator
        cursor = getattr(acc, "last_sequence_number", None)
        resumable = (
            self.resumable
            and cursor is not None
            and self.response_id is not None
            and self.resumes < self.state.config.max_resumes
        )
        error = acc.outcome() is Outcome.FAILED and rs.sdk_raises
        verdict = decide(Situation(rs.events, ending, None, error, 0, resumable, boundary))
        self._note(name, permit, rs, verdict.move, ending, detail, record=record)
        return verdict.move

    def _note(
        self,
        name: str,
        permit: Permit,
        rs: RelayedStream,
        move: Move | None,
        ending: Ending,
        detail: str,
        *,
        record: bool = True,
    ) -> None:
        """Note how a committed attempt went in the log's `tried`, and tell the breaker (if `record`)."""
        content = rs.accumulator.outcome()
        health = health_of(ending, content=content)
        if record:
            self._record(name, permit, health, detail=detail or str(ending))
        self.tried.append(AttemptNote(name, Attempt.of(health), 200, ending, move, detail))

    async def _resume(self, upstream: Upstream, rs: RelayedStream) -> httpx.Response | None:
        """Ask the same upstream for the rest of the same response, after the last event handled."""
        response_id, cursor = self.response_id, getattr(rs.accumulator, "last_sequence_number", None)
        state = self.state
        assert state.client is not None
        headers = {k: v for k, v in self.state.headers_for(upstream, self.headers_up).items() if k != "content-type"}
        url = f"{upstream.url.rstrip('/')}/responses/{response_id}?stream=true&starting_after={cursor}"
        try:
            response = await asyncio.wait_for(
                state.client.send(state.client.build_request("GET", url, headers=headers), stream=True),
                state.config.read_timeout,
            )
        except (httpx.HTTPError, asyncio.TimeoutError):
            return None
        if response.status_code == 200 and is_event_stream(response.headers.get("content-type")):
            return response
        await response.aclose()
        return None

    # -- sending to the client --

    async def _start(self, headers: list[tuple[bytes, bytes]]) -> None:
        if not self.head_sent:
            self.head_sent = True
            self.status_sent = 200
            await self.send({"type": "http.response.start", "status": 200, "headers": headers})

    def _unprobed_half_close(self) -> asyncio.Future[Any] | None:
        """The half-close future for this request's next stream until a probe has been made (a failed-over
        stream's reader still gets it when the first never came to probing)."""
        return None if self.probed else half_closed(self.scope)

    async def _probe(self, beat: Callable[[], bytes]) -> None:
        """The shared half-close probe (`streamlab.net.relay.upstream.probe`), once per request."""
        self.probed = True
        await probe(beat, self._body, PROBE_GAP)

    async def _body(self, data: bytes, *, more: bool = True) -> None:
        if data or not more:
            self.body_sent += len(data)
            self.body_ended = not more
            await self.send({"type": "http.response.body", "body": data, "more_body": more})

    async def _respond(self, response: Response) -> None:
        self.status_sent = response.status_code
        self.head_sent = True
        await response(self.scope, self.receive, self.send)


_DEATHS = frozenset({Ending.BROKEN, Ending.READ_TIMEOUT, Ending.INCOMPLETE_EVENT, Ending.COMPLETE, Ending.STOPPED})
"""Endings `RelayedStream.upstream_ended` knows how to mark; anything else is marked as a break."""


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {"error": {"message": f"gateway: {message}", "type": "gateway_error", "param": None, "code": code}}
    return json_reply(body, status, headers)
