"""One request on the wire for the relay and the gateway: carry out the exchange machine's actions (I/O layer).

`ExchangeWire` is the ASGI response both servers return for every proxied route. It feeds the sans-IO
`streamlab.core.relay.exchange.Exchange` what happens (the upstream's status and bytes, the client leaving, the
clock, the server stopping) and does what it answers: send the request upstream, write the head and the bytes,
a keep-alive probe, a resume, a breaker's record. Nothing is decided here; this module reads, writes, waits and
closes. What differs between the relay and the gateway comes in as `Hooks`: where a request goes, the breakers
(the relay has none), what to note at the commit, and what to do with the finished request (a summary line, a
log record).

    machine events   <- UpstreamReader items (CHUNK, END, GONE, PROBE, STOP, IDLE), the status line, replies
    machine actions  -> Connect, Close, Commit, Head, Send, Respond, Reject, Record, Resume, Probe, Settle, Drain

The request's record is written as soon as the client's body has ended (after a fast stream, `SETTLE_GRACE`
later: its summary is parsed then); only then does the wire drain what the upstream still sends after its
terminal event (so an upstream that stalls after `[DONE]` delays nobody).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from streamlab.core.endings import Ending
from streamlab.core.gateway.breaker import Health
from streamlab.core.relay import exchange as ex
from streamlab.core.relay.exchange import Exchange, Failure
from streamlab.core.sse import is_event_stream
from streamlab.net.relay.serving import PROBE_GAP, flushed, half_closed
from streamlab.net.relay.upstream import (
    STREAM_HEADERS,
    Read,
    UpstreamReader,
    cancel_all,
    connect_failure,
    disconnected,
    forwarded_response_headers,
    internal_error,
    probe,
    read_reply,
)

__all__ = ["Hooks", "ExchangeWire", "SETTLE_GRACE"]

SETTLE_GRACE = 0.005
"""Seconds between a fast stream's last bytes leaving the process and its summary's parse (`Settle`). The parse
takes a CPU for a few milliseconds per MB (`summary_cost` in `benchmarks/bench_relay.py`), and on a 2-core machine
the client reading the last bytes of a 2.3 MB body had shared one with it. In `bench_relay`'s 64 KiB-write ratio
against the pass-through, at the time it came (benchmarks/README.md, stop 41): median 0.855x over six runs
without the grace, 0.895x over eight with it (run to run ±0.05). The summary line comes that much later."""

_CHUNK = Read.CHUNK  # read once: an enum member looked up through its class costs 0.2 us, per chunk here
_SEND = ex.Send


def _no_record(name: str, permit: Any, result: Failure | Health, detail: str) -> None:
    return None


def _allow(name: str) -> Any:
    return True


async def _no_resume(name: str, response_id: str, cursor: int) -> httpx.Response | None:
    return None


@dataclass
class Hooks:
    """What the wire asks its server: how to reach an upstream, its breakers, and what to do at the end.

    `request(name)` builds the upstream request; `error(status, code, message, headers)` a response of the
    server's own; `finished(wire)` writes the request's record. The rest default to a relay's: every upstream
    allowed, nothing recorded, no resume, nothing noted at the commit.
    """

    client: httpx.AsyncClient
    request: Callable[[str], httpx.Request]
    clock: Callable[[], float]
    stopping: asyncio.Event
    read_timeout: float
    error: Callable[[int, str, str, Mapping[str, str] | None], Response]
    finished: Callable[[ExchangeWire], None]
    label: str = "relay"
    allow: Callable[[str], Any] = _allow
    record: Callable[[str, Any, Failure | Health, str], None] = _no_record
    retry_in: Callable[[], float] = lambda: 0.0
    resume: Callable[[str, str, int], Awaitable[httpx.Response | None]] = _no_resume
    response_headers: Callable[[httpx.Response], dict[str, str]] = field(
        default=lambda response: forwarded_response_headers(response.headers)
    )
    retry_after: Callable[[httpx.Response], float | None] = lambda response: None
    committed: Callable[[ExchangeWire, str], None] = lambda wire, name: None
    replied: Callable[[str, Any], None] = lambda name, obj: None


class ExchangeWire(Response):
    """One client request carried out on the wire (module docstring); `machine` decides, `hooks` serve."""

    def __init__(self, machine: Exchange, hooks: Hooks) -> None:
        self.machine = machine
        self.hooks = hooks
        self.status_code = 200
        self.background = None
        self.reader: UpstreamReader | None = None
        self.response: httpx.Response | None = None  # the current upstream response
        self.permit: Any = None  # the current attempt's breaker permit
        self.head_out = self.body_out = False  # what really went out (an action may fail half done)
        self.probed = False  # a half-close probe went to a stream's reader (one per request)
        self.drain: float | None = None
        self.reported = False
        self.request_id: str | None = None  # noted by the server at the commit (the gateway's log)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Carry the request out in a task of its own. The loop below wakes at least once per upstream chunk; in
        the request's own task every wake-up resumed the whole ASGI chain above it too (uvicorn, the middleware,
        the router: about ten coroutine frames), 66 times for a 60-chunk stream
        (`tests/relay/test_relay_bursts.py`). A cancelled request cancels this task and waits for its clean-up
        (awaiting a task passes the cancel on)."""
        await asyncio.ensure_future(self._serve(scope, receive, send))

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope, self.receive, self.send = scope, receive, send
        self.watch = asyncio.ensure_future(disconnected(receive))
        self.stop = asyncio.ensure_future(self.hooks.stopping.wait())
        machine = self.machine
        try:
            await self._guarded(machine.start, self.hooks.clock())
            while not machine.done:
                await self._guarded(self._step)
            self._report()
            if self.drain is not None and self.reader is not None:
                await self.reader.drain(self.drain)
        finally:
            rs = machine.rs
            if not rs.done:  # cancelled from outside (the server shutting down hard): nothing more is sent
                rs.upstream_ended(Ending.STOPPED, self.hooks.clock(), f"the {self.hooks.label} task was cancelled")
                rs.marked = False  # so the summary does not claim a final event the client never got
            await self._close()
            await cancel_all(self.watch, self.stop)
            self._report()

    def _report(self) -> None:
        if not self.reported:
            self.reported = True
            self.hooks.finished(self)

    async def _guarded(self, step: Callable[..., Any], *args: Any) -> None:
        """Run one step; an exception nothing expected becomes an `InternalError` the machine answers (a 502,
        the marked final event, or fail-over), and the request goes on or ends, never the server."""
        try:
            actions = step(*args)
            if actions is not None and not isinstance(actions, list):
                actions = await actions
            if actions:
                await self._carry(actions)
        except Exception as exc:
            current = self.machine.current
            where = f"{current}'s answer" if current else f"the {self.hooks.label}"
            detail = str(internal_error(exc, where))
            try:
                now = self.hooks.clock()
                await self._carry(self.machine.crashed(detail, now, head_sent=self.head_out, body_ended=self.body_out))
            except Exception:
                self.machine.done = True
                if not self.machine.rs.done:
                    self.machine.rs.upstream_ended(Ending.BROKEN, self.hooks.clock(), detail)
                    self.machine.rs.marked = False

    async def _step(self) -> list[ex.Action]:
        """The next thing the upstream, the client or the clock did, fed to the machine."""
        reader, machine = self.reader, self.machine
        assert reader is not None, "a stream step without a stream"
        item = await reader.next(None if reader.queued else machine.wait(self.hooks.clock()))
        if item.kind is _CHUNK:
            if reader.queued and machine.committed and machine.rs.ttft is not None:
                # behind the upstream, past the first token: what queued goes out with this chunk, in one write
                data, at = reader.coalesce(item.data)
                return machine.chunk(data, item.at if at is None else at)
            return machine.chunk(item.data, item.at)
        if self.stop.done():
            machine.stopping = True  # a stopping server starts nothing new
        kind = item.kind
        if kind is Read.GONE:
            return machine.client_gone(item.at)
        if kind is Read.PROBE:
            self.probed = True
            return machine.half_close(item.at)
        if kind is Read.STOP:
            return machine.stop(item.at)
        if kind is Read.END:
            assert item.ending is not None
            return machine.upstream_end(item.ending, item.detail, item.at)
        return machine.tick(item.at)

    async def _carry(self, actions: list[ex.Action]) -> None:
        """Do what the machine said, in order (a `Connect` feeds the machine again, and carries its answer)."""
        for action in actions:
            if type(action) is _SEND:
                data, more = action
                if data or not more:
                    self.body_out = not more
                    await self.send({"type": "http.response.body", "body": data, "more_body": more})
            else:
                await self._do(action)

    async def _do(self, action: ex.Action) -> None:  # noqa: C901 (one branch per action)
        hooks, machine = self.hooks, self.machine
        if isinstance(action, ex.Connect):
            await self._carry(await self._connect(action.upstream))
        elif isinstance(action, ex.Head):
            extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in action.headers.items()]
            if action.upstream is not None:
                extra.append((b"x-gateway-upstream", action.upstream.encode("latin-1")))
            self.head_out = True
            await self.send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS + extra})
        elif isinstance(action, ex.Record):
            hooks.record(action.upstream, self.permit, action.result, action.detail)
        elif isinstance(action, ex.Commit):
            hooks.committed(self, action.upstream)
        elif isinstance(action, ex.Close):
            await self._close()
        elif isinstance(action, ex.Respond):
            self.head_out = self.body_out = True
            reply = Response(
                action.body, status_code=action.status, headers=action.headers, media_type="application/json"
            )
            await reply(self.scope, self.receive, self.send)
        elif isinstance(action, ex.Reject):
            self.head_out = self.body_out = True
            await hooks.error(action.status, action.code, action.message, action.headers)(
                self.scope, self.receive, self.send
            )
        elif isinstance(action, ex.Probe):
            clock = hooks.clock
            await probe(lambda: machine.beat(clock()), self._write, PROBE_GAP)
        elif isinstance(action, ex.Resume):
            response = await hooks.resume(action.upstream, action.response_id, action.cursor)
            if response is not None and self.reader is not None:
                await self.reader.swap(response)
                self.response = response
            await self._carry(machine.resumed(response is not None, hooks.clock()))
        elif isinstance(action, ex.Settle):  # the body has ended: the summary catches up, a part at a time
            rs = machine.rs
            await flushed(self.scope)  # the client's last bytes leave the process first: the parse would hold them
            await asyncio.sleep(SETTLE_GRACE)  # and the client reads them before the parse takes a CPU
            while rs.catch_up_part():
                await asyncio.sleep(0)
            await self._carry(machine.settle(hooks.clock()))
        elif isinstance(action, ex.Drain):
            self.drain = action.timeout

    async def _write(self, data: bytes) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": True})

    async def _connect(self, name: str) -> list[ex.Action]:
        """Ask one upstream (its breaker first); what happened, fed to the machine."""
        hooks, machine = self.hooks, self.machine
        permit = hooks.allow(name)
        if permit is None:
            return machine.refused(hooks.clock(), retry_in=hooks.retry_in())
        self.permit = permit
        sending = asyncio.ensure_future(hooks.client.send(hooks.request(name), stream=True))
        done, _ = await asyncio.wait(
            {sending, self.watch, self.stop}, timeout=hooks.read_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        now = hooks.clock()
        if sending not in done:
            await cancel_all(sending)
            if self.watch in done:
                return machine.client_left(now, "before the upstream answered")
            if self.stop in done:
                machine.stopping = True
                return machine.failed(Failure(name, Ending.STOPPED, f"the {hooks.label} is stopping"), now)
            return machine.failed(Failure(name, Ending.READ_TIMEOUT, f"no status within {hooks.read_timeout:g} s"), now)
        try:
            response = sending.result()
        except httpx.HTTPError as exc:
            return machine.failed(Failure(name, *connect_failure(exc)), now)
        self.response = response
        if response.status_code < 300 and is_event_stream(response.headers.get("content-type")):
            probe_on = None if self.probed else half_closed(self.scope)
            self.reader = UpstreamReader(response, watch=self.watch, stop=self.stop, clock=hooks.clock, probe=probe_on)
            return machine.stream_head(response.status_code, hooks.response_headers(response), now)
        return await self._reply(name, response)

    async def _reply(self, name: str, response: httpx.Response) -> list[ex.Action]:
        """A reply that is not a stream, read under its bound: an error status to pass on, or an answer."""
        hooks, machine = self.hooks, self.machine
        reply = await read_reply(response, timeout=hooks.read_timeout)
        headers = hooks.response_headers(response)
        now = hooks.clock()
        if response.status_code >= 300 or reply.status is not None:
            failure = Failure(
                name,
                Ending.HTTP_ERROR,
                f"HTTP {response.status_code}" + (f": {reply.problem[:200]}" if reply.status else ""),
                status=reply.status or response.status_code,
                body=reply.payload,
                headers=headers,
                retry_after=hooks.retry_after(response),
            )
            return machine.failed(failure, now)
        hooks.replied(name, reply.obj)
        return machine.reply(response.status_code, reply.payload, headers, now)

    async def _close(self) -> None:
        """Close the current upstream response (and its reader): the upstream sees its client go."""
        reader, response = self.reader, self.response
        self.reader = self.response = None
        if reader is not None:
            await reader.close()
        elif response is not None:
            await response.aclose()
