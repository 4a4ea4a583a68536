"""Checks for lab 07 (the capstone relay): the exercises' plumbing for a learner's relay, and one check per stage.

The learner writes the heart of a streaming relay: an async generator `body(upstream, stream)` that yields the
bytes to send downstream. `upstream` is the upstream's streaming `httpx.Response`; `stream` is a `StreamInfo`
(the request's model and dialect, when it started, the keep-alive interval and read timeout to honour, and
the list its summary line goes to). Everything else is the same at every stage and is given: `relay_app`
builds a Starlette app that forwards the request with `httpx.AsyncClient`, passes error statuses through, and
streams whatever the body yields with the headers that stop proxy buffering. `learner_relay` serves it under
uvicorn (`streamlab.net.relay.serving.AppServer`) for the relay checker.

Each stage is graded by the relay checker (`streamlab.net.relaycheck.run.check_relay`) on the requirements it adds
(`streamlab.core.relay.stream.REQUIREMENTS`), and a verdict names the first failing check and its evidence:

* 07.1 `pass_through`: forward the bytes as they arrive (requirement 1).
* 07.2 `with_summary`: and write one summary line per stream (1 and 5).
* 07.3 `with_cancel`: and close the upstream when the client goes away, saying so in the summary (2 and 5).
* 07.4 `with_keepalives`: and send keep-alives that never change the events (3, with 2 and 5 again: the
  reader task this stage introduces is where cancel propagation usually breaks).
* 07.5 `with_marked_end`: and end with a marked final event when the upstream dies (4 and 5).

A stub (a body that raises NotImplementedError before doing anything) is found by a quick probe against a
fake upstream, in a thread of its own, so an untouched notebook prints "not attempted yet" at once.
`grade_my_relay` runs the whole checker on the learner's last stage for the lab's final section.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from streamlab.core.relay.grade import RelayReport
from streamlab.core.relay.stream import dialect_of
from streamlab.core.safejson import json_or_none
from streamlab.core.shapes import error_body
from streamlab.core.sse import is_event_stream
from streamlab.exercises import NotAttempted, exercise, function_answer
from streamlab.net.relay.serving import AppServer
from streamlab.net.relaycheck.run import RelayUnderTest, check_relay

__all__ = [
    "StreamInfo",
    "Body",
    "relay_app",
    "learner_relay",
    "between_events",
    "KEEPALIVE",
    "READ_TIMEOUT",
    "DEADLINE",
    "CHECKER",
    "STAGES",
    "attempted",
    "grade_my_relay",
]

KEEPALIVE = 0.2
"""Seconds of upstream silence after which the learner's relay sends a keep-alive (the checker stalls 4 x this)."""
READ_TIMEOUT = 1.5
"""Seconds of upstream silence after which the learner's relay gives up (above the checker's 1 s mid-event pause)."""
DEADLINE = 6.0
"""Seconds after which the plumbing ends any stream (cleanly, adding nothing). The checker's streams last about
two seconds; without a deadline, a relay that answers a stalled upstream with keep-alives forever would keep the
check waiting forever. Production relays have one too, in minutes."""
CHECKER: dict[str, Any] = {
    "keepalive": KEEPALIVE,
    "read_timeout": READ_TIMEOUT,
    "fuzz_runs": 4,
    "ttft_bound": 1.0,
    "disconnect_bound": 2.0,
}
"""The relay checker's options in this lab: the relay's intervals, four fuzz runs, and time bounds loosened from
the defaults (250 ms of added time to first token, 1 s to see a departure) so a busy shared machine cannot turn
a pass into a fail; every other verdict is about bytes and records, not speed."""

STAGES: dict[str, tuple[str, tuple[int, ...]]] = {
    "07.1": ("pass_through", (1,)),
    "07.2": ("with_summary", (1, 5)),
    "07.3": ("with_cancel", (2, 5)),
    "07.4": ("with_keepalives", (2, 3, 5)),
    "07.5": ("with_marked_end", (4, 5)),
}
"""Each stage's exercise id -> (the function the learner writes, the requirements its check runs)."""

_FORWARD = ("authorization", "content-type", "accept")
_STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


@dataclass
class StreamInfo:
    """What the plumbing tells the body about one stream.

    `model` and `dialect` ("chat" or "responses") come from the request; `started` is the `time.perf_counter()`
    reading when it arrived (`elapsed()` is the time since); `keepalive` and `read_timeout` are the relay's
    intervals in seconds; `summaries` is the list the stream's summary line (a dict) is appended to.
    """

    model: str | None
    dialect: str
    started: float
    keepalive: float = KEEPALIVE
    read_timeout: float = READ_TIMEOUT
    summaries: list[dict[str, Any]] = field(default_factory=list)

    def elapsed(self) -> float:
        """Seconds since the request arrived."""
        return time.perf_counter() - self.started


Body = Callable[[httpx.Response, StreamInfo], AsyncIterator[bytes]]
"""The learner's part: an async generator function yielding the bytes to send downstream."""


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(error_body(f"relay: {message}", "relay_error", code), status_code=status)


def _model(content: bytes) -> str | None:
    obj = json_or_none(content)
    model = obj.get("model") if isinstance(obj, dict) else None
    return model if isinstance(model, str) else None


async def _within(chunks: AsyncIterator[bytes], deadline: float) -> AsyncIterator[bytes]:
    """The body's bytes, until the body ends or `deadline` seconds have passed (checked after each yield)."""
    end = time.perf_counter() + deadline
    try:
        async for chunk in chunks:
            yield chunk
            if time.perf_counter() > end:
                return
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]  # an async generator: its own finally runs now


def relay_app(
    body: Body,
    upstream: str,
    *,
    keepalive: float = KEEPALIVE,
    read_timeout: float = READ_TIMEOUT,
    summaries: list[dict[str, Any]] | None = None,
    deadline: float = DEADLINE,
) -> Starlette:
    """A relay's plumbing around `body`: a Starlette app for POST /v1/chat/completions and /v1/responses.

    It forwards the request body and its Authorization / Content-Type / Accept headers to `upstream` (a base URL
    ending in /v1) with one `httpx.AsyncClient` (no read timeout of its own: the body decides how long silence
    may last), answers 502 if the upstream cannot be reached, passes any answer that is not a 200 event stream
    through as it came, and otherwise streams what `body(upstream_response, StreamInfo(...))` yields, with
    `Cache-Control: no-cache` and `X-Accel-Buffering: no`. The body owns the upstream response from then on.
    A stream still running after `deadline` seconds is ended after the body's next bytes.
    """
    sink: list[dict[str, Any]] = [] if summaries is None else summaries
    state: dict[str, httpx.AsyncClient] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=None), trust_env=False) as client:
            state["client"] = client
            yield

    async def handle(request: Request) -> Response:
        started = time.perf_counter()
        content = await request.body()
        client = state["client"]
        url = upstream.rstrip("/") + request.url.path[len("/v1") :]
        headers = {k: v for k, v in request.headers.items() if k in _FORWARD}
        try:
            response = await client.send(
                client.build_request("POST", url, content=content, headers=headers), stream=True
            )
        except httpx.HTTPError as exc:
            return _error(502, "upstream_unreachable", f"cannot reach the upstream: {type(exc).__name__}")
        if response.status_code != 200 or not is_event_stream(response.headers.get("content-type")):
            try:
                raw = await response.aread()
            except httpx.HTTPError as exc:
                return _error(502, "upstream_broken", f"the upstream's answer broke: {type(exc).__name__}")
            finally:
                await response.aclose()
            return Response(raw, status_code=response.status_code, media_type=response.headers.get("content-type"))
        info = StreamInfo(_model(content), dialect_of(request.url.path), started, keepalive, read_timeout, sink)
        return StreamingResponse(
            _within(body(response, info), deadline), media_type="text/event-stream", headers=_STREAM_HEADERS
        )

    routes = [Route("/v1/chat/completions", handle, methods=["POST"]), Route("/v1/responses", handle, methods=["POST"])]
    return Starlette(routes=routes, lifespan=lifespan)


@contextlib.contextmanager
def learner_relay(
    body: Body, upstream: str, *, keepalive: float = KEEPALIVE, read_timeout: float = READ_TIMEOUT
) -> Iterator[RelayUnderTest]:
    """Serve `relay_app(body, upstream)` on 127.0.0.1 (a free port) for as long as the block runs, as the relay
    checker sees a relay: its base URL and a reader of its summary lines."""
    summaries: list[dict[str, Any]] = []
    app = relay_app(body, upstream, keepalive=keepalive, read_timeout=read_timeout, summaries=summaries)
    # Plain uvicorn's rule, as the learner's own relay would be deployed: a client's FIN is its departure, so a
    # stage without keep-alives still notices a client gone during an upstream stall (check-hang).
    with AppServer(app, name="learner-relay", half_close=False) as server:
        yield RelayUnderTest(f"{server.url}/v1", lambda: list(summaries))


def between_events(frames: list[bytes], wire_total: int, count: int) -> int:
    """The wire offset just after the first `count` frames of a chunked answer that the stand-in sent one HTTP
    chunk per frame (`size in hex CRLF frame CRLF`), given the answer's whole length on the wire (its status
    line and headers, every chunk, and the closing `0 CRLF CRLF`): a chaos-proxy fault set there lands
    between two events."""
    if not 0 <= count <= len(frames):
        raise ValueError(f"count must be between 0 and {len(frames)}, got {count}")
    framed = [len(f"{len(frame):x}") + 2 + len(frame) + 2 for frame in frames]
    head = wire_total - sum(framed) - len(b"0\r\n\r\n")
    if head <= 0:
        raise ValueError(f"{wire_total} bytes on the wire cannot hold these {len(frames)} frames")
    return head + sum(framed[:count])


# -- is it still the stub? ---------------------------------------------------------------------------------------


class _ProbeUpstream:
    """Just enough of a streaming httpx.Response for a body's first step: one whole Chat chunk, then the end."""

    status_code = 200
    headers = {"content-type": "text/event-stream"}

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        yield b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": null}]}\n\n'

    aiter_bytes = aiter_raw

    async def aclose(self) -> None:
        return None


async def _first_step(body: Body) -> None:
    info = StreamInfo(model="probe", dialect="chat", started=time.perf_counter())
    result: Any = body(_ProbeUpstream(), info)  # type: ignore[arg-type]
    if inspect.isasyncgen(result):
        try:
            await result.__anext__()
        finally:
            await result.aclose()
    elif inspect.isawaitable(result):
        await result


def attempted(body: Any) -> bool:
    """False while `body` is the stub: calling it, or taking its first step against a fake upstream, raises
    NotImplementedError. Runs in a thread with its own event loop (a notebook's loop is already running) and
    gives up after 5 s; anything else the body does there is left for the real check to judge."""
    verdict = {"stub": False}

    def run() -> None:
        try:
            asyncio.run(asyncio.wait_for(_first_step(body), 5.0))
        except (NotImplementedError, NotAttempted):
            verdict["stub"] = True
        except BaseException:  # noqa: BLE001 - whatever else happens is the real check's business
            pass

    thread = threading.Thread(target=run, name="lab07-probe", daemon=True)
    thread.start()
    thread.join(10.0)
    return not verdict["stub"]


def _body(answer: Any, name: str) -> Body:
    function_answer(answer, name)
    if not attempted(answer):
        raise NotAttempted
    if not inspect.isasyncgenfunction(answer):
        raise AssertionError(
            f"{name} should be an async generator function (`async def` with `yield` in it): "
            "the relay sends every bytes object it yields"
        )
    return answer


# -- the checks -------------------------------------------------------------------------------------------------


def _clip(text: str, width: int) -> str:
    """`text` cut to at most `width` characters at the end of a word, marked with "..." (a verdict cut mid-word
    reads as a typo), or whole when it has no word end in the second half of the width to cut at."""
    if len(text) <= width:
        return text
    end = text.rfind(" ", width // 2, width - 2)  # the cut, then "...", fits in width
    if end < 0:
        return text
    return text[:end].rstrip(" ,;:") + "..."


def _grade(answer: Any, ex_id: str) -> RelayReport:
    name, requirements = STAGES[ex_id]
    body = _body(answer, name)
    report = check_relay(lambda upstream: learner_relay(body, upstream), requirements=requirements, **CHECKER)
    if not report.results:
        raise AssertionError("the checker could not run: " + "; ".join(report.notes[1:] or report.notes))
    failures = report.failures
    if failures:
        first = failures[0]
        more = f" (and {len(failures) - 1} more failing checks)" if len(failures) > 1 else ""
        evidence = _clip(first.evidence, 220)
        raise AssertionError(f"({first.requirement}) {first.name}: {evidence}{more}")
    for number in requirements:
        if report.holds(number) is None:
            raise AssertionError(f"no check of requirement ({number}) ran")
    return report


@exercise("07.1", "pass_through")
def check_pass_through(answer: Any) -> None:
    _grade(answer, "07.1")


@exercise("07.2", "with_summary")
def check_with_summary(answer: Any) -> None:
    _grade(answer, "07.2")


@exercise("07.3", "with_cancel")
def check_with_cancel(answer: Any) -> None:
    _grade(answer, "07.3")


@exercise("07.4", "with_keepalives")
def check_with_keepalives(answer: Any) -> None:
    _grade(answer, "07.4")


@exercise("07.5", "with_marked_end")
def check_with_marked_end(answer: Any) -> None:
    _grade(answer, "07.5")


def grade_my_relay(body: Any) -> RelayReport | None:
    """The relay checker on the learner's last stage, every requirement: prints its report and returns it, or
    prints "not attempted yet" (and returns None) while `body` is still the stub."""
    name = STAGES["07.5"][0]
    try:
        checked = _body(body, name)
    except NotAttempted:
        print(f"Your relay: not attempted yet (fill in {name}, exercise 07.5, then run this cell again)")
        return None
    except AssertionError as exc:
        print(f"Your relay: not yet: {exc}")
        return None
    report = check_relay(lambda upstream: learner_relay(checked, upstream), **CHECKER)
    print(report.render())
    return report
