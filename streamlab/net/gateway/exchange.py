"""One request through the gateway: its machine and the hooks that reach the gateway's state (I/O layer).

The gateway decides nothing here. `streamlab.core.relay.exchange.Exchange` decides every request (upstreams
in order of preference, a breaker each, the first event held, fail-over before the commit, resume or the
marked final event after it), and `streamlab.net.relay.wire.ExchangeWire` carries its actions out, for the
relay as for the gateway. `exchange(...)` wires one request to what the gateway's requests share, passed in as
callables (`GatewayCalls`: the breakers, the homes of stored responses, the upstream client, the log):

    upstreams (a stored response's home only)   -> Exchange(upstreams, hold=True, resumable=..., max_resumes=...)
    Connect / Record / Resume / Commit          -> allow, record, the resume request, request id and home
    the end                                     -> finished(wire): the log line, metrics and capture
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import httpx
from starlette.requests import Request
from starlette.responses import Response

from streamlab.core.gateway.breaker import Health, Permit
from streamlab.core.gateway.log import request_id_of
from streamlab.core.relay.exchange import Exchange, Failure
from streamlab.core.relay.stream import RelayedStream
from streamlab.core.safejson import json_or_none
from streamlab.core.sse import is_event_stream
from streamlab.net.relay.upstream import json_reply, request_facts
from streamlab.net.relay.wire import ExchangeWire, Hooks

__all__ = ["GatewayCalls", "exchange", "gateway_error"]


def gateway_error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> Response:
    """An error of the gateway's own, in the OpenAI shape."""
    body = {"error": {"message": f"gateway: {message}", "type": "gateway_error", "param": None, "code": code}}
    return json_reply(body, status, dict(headers) if headers else None)


@dataclass(frozen=True)
class GatewayCalls:
    """What one request needs of the running gateway, as callables (no import of the gateway's state)."""

    upstreams: Sequence[Any]  # `Upstream`s in order of preference (name, url, key)
    client: httpx.AsyncClient
    stopping: asyncio.Event
    perf: Callable[[], float]
    keepalive: float | None
    read_timeout: float
    max_resumes: int
    allow: Callable[[str], Permit | None]
    record: Callable[[str, Permit, Failure | Health, str], None]
    retry_in: Callable[[], float]
    remember: Callable[[str | None, str], None]
    home_of: Callable[[str | None], str | None]
    headers_for: Callable[[Any, dict[str, bytes]], dict[str, bytes]]
    forward_headers: Callable[[Request], dict[str, bytes]]
    response_headers: Callable[[httpx.Response], dict[str, str]]
    retry_after: Callable[[httpx.Response], float | None]
    new_stream: Callable[..., RelayedStream]
    finished: Callable[[ExchangeWire], None]


def _resumable_request(request: Request, body: bytes) -> bool:
    """A Responses stream that can be continued from a cursor: created with background and stream, or a
    retrieve with stream=true."""
    if "/responses" not in request.url.path or request.url.path.endswith("/cancel"):
        return False
    if request.method == "GET":
        return request.query_params.get("stream", "").lower() == "true"
    obj = json_or_none(body)
    return isinstance(obj, dict) and obj.get("background") is True and obj.get("stream") is True


def exchange(calls: GatewayCalls, request: Request, body: bytes, started: float) -> ExchangeWire:
    """The ASGI response that runs one client request through the gateway."""
    model = request_facts(request, body)[0]
    rest = request.url.path[len("/v1") :] + (f"?{request.url.query}" if request.url.query else "")
    headers_up = calls.forward_headers(request)
    by_name = {u.name: u for u in calls.upstreams}
    home = calls.home_of(request.path_params.get("response_id"))
    names = [home] if home is not None and home in by_name else list(by_name)  # a stored response lives there
    first = calls.new_stream(request, model, started)
    machine = Exchange(
        upstreams=names,
        stream=first,
        new_stream=lambda: calls.new_stream(request, model, started, stream_id=first.stream_id),
        keepalive=calls.keepalive,
        read_timeout=calls.read_timeout,
        hold=True,
        label="gateway",
        resumable=_resumable_request(request, body),
        response_id=request.path_params.get("response_id") if request.method == "GET" else None,
        max_resumes=calls.max_resumes,
    )

    def build(name: str) -> httpx.Request:
        upstream = by_name[name]
        headers = cast("dict[str, str]", calls.headers_for(upstream, headers_up))  # bytes values: httpx takes them
        return calls.client.build_request(
            request.method, upstream.url.rstrip("/") + rest, content=body, headers=headers
        )

    def committed(wire: ExchangeWire, name: str) -> None:
        response = wire.response
        wire.request_id = request_id_of(response.headers if response is not None else {}, wire.machine.first)
        calls.remember(wire.machine.response_id, name)

    def replied(name: str, obj: Any) -> None:
        if isinstance(obj, dict) and obj.get("object") == "response" and isinstance(obj.get("id"), str):
            calls.remember(obj["id"], name)

    hooks = Hooks(
        client=calls.client,
        request=build,
        clock=calls.perf,
        stopping=calls.stopping,
        read_timeout=calls.read_timeout,
        error=gateway_error,
        finished=calls.finished,
        label="gateway",
        allow=calls.allow,
        record=calls.record,
        retry_in=calls.retry_in,
        resume=_resumer(calls, by_name, headers_up),
        response_headers=calls.response_headers,
        retry_after=calls.retry_after,
        committed=committed,
        replied=replied,
    )
    return ExchangeWire(machine, hooks)


def _resumer(
    calls: GatewayCalls, by_name: Mapping[str, Any], headers_up: dict[str, bytes]
) -> Callable[[str, str, int], Awaitable[httpx.Response | None]]:
    """Ask the same upstream for the rest of the same response, after the last event handled."""

    async def resume(name: str, response_id: str, cursor: int) -> httpx.Response | None:
        upstream = by_name[name]
        kept = {k: v for k, v in calls.headers_for(upstream, headers_up).items() if k != "content-type"}
        headers = cast("dict[str, str]", kept)  # bytes values: httpx takes them
        url = f"{upstream.url.rstrip('/')}/responses/{response_id}?stream=true&starting_after={cursor}"
        try:
            response = await asyncio.wait_for(
                calls.client.send(calls.client.build_request("GET", url, headers=headers), stream=True),
                calls.read_timeout,
            )
        except (httpx.HTTPError, asyncio.TimeoutError):
            return None
        if response.status_code == 200 and is_event_stream(response.headers.get("content-type")):
            return response
        await response.aclose()
        return None

    return resume
