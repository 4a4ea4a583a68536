"""The popular Python SSE libraries as split-harness contenders, driven as their users drive them (I/O).

Each adapter turns a list of network chunks into what the library reports, so `streamlab.fuzz` can cut
the fixtures in every way and compare the libraries with the standard on equal terms:

* `openai`: the official SDK's `openai._streaming.SSEDecoder`, fed `response.iter_bytes()` exactly as
  the SDK's `Stream` does before it looks for `[DONE]`;
* `httpx-sse`: `httpx_sse.EventSource(response).iter_sse()`;
* `sseclient-py`: `sseclient.SSEClient(response.iter_bytes()).events()`.

The "response" is a real `httpx.Response` whose body stream yields the chunks one by one
(`response_from_chunks`): no socket, no mock, the library's own code path from the first byte.

A library is judged only on what it exposes (`Contender.exposes`): none of them reports whether the stream
stopped mid-event, so `truncated` is never compared; sseclient-py hands `retry` over as an unparsed string
and keeps no stream-level last event ID, so for it only the events are compared (with each event's own
`id` standing in for the event's last event ID, which is what a sseclient-py user would reconnect with).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import httpx

from streamlab.core.harness.fuzz import Contender, ParseResult
from streamlab.core.sse import SSEEvent

__all__ = [
    "SSE_CONTENT_TYPE",
    "ChunkStream",
    "response_from_chunks",
    "openai_contender",
    "httpx_sse_contender",
    "sseclient_contender",
    "peers",
]

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
"""The content type an OpenAI-compatible server sends with a stream."""


class ChunkStream(httpx.SyncByteStream):
    """An httpx response body that yields the given chunks, in order, as if they came off the network."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = list(chunks)

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks


def response_from_chunks(chunks: Iterable[bytes], content_type: str = SSE_CONTENT_TYPE) -> httpx.Response:
    """A real, unread `httpx.Response` (status 200) whose body arrives as exactly these chunks.

    httpx itself drops empty chunks before any library sees them, as it does on a real connection.
    """
    return httpx.Response(200, headers={"content-type": content_type}, stream=ChunkStream(chunks))


def _result(events: list[SSEEvent], retries: list[int | None]) -> ParseResult:
    """Events plus the stream-level values a user can read off them: the last retry, the last event's id."""
    known = [r for r in retries if r is not None]
    return ParseResult(
        tuple(events),
        retry_ms=known[-1] if known else None,
        last_event_id=events[-1].last_event_id if events else "",
    )


def _run_openai(chunks: Sequence[bytes]) -> ParseResult:
    from openai._streaming import SSEDecoder  # the decoder `OpenAI()._make_sse_decoder()` returns

    events: list[SSEEvent] = []
    retries: list[int | None] = []
    for sse in SSEDecoder().iter_bytes(response_from_chunks(chunks).iter_bytes()):
        events.append(SSEEvent(sse.event or "message", sse.data, sse.id or ""))
        retries.append(sse.retry)
    return _result(events, retries)


def _run_httpx_sse(chunks: Sequence[bytes]) -> ParseResult:
    from httpx_sse import EventSource

    events: list[SSEEvent] = []
    retries: list[int | None] = []
    for sse in EventSource(response_from_chunks(chunks)).iter_sse():
        events.append(SSEEvent(sse.event, sse.data, sse.id))
        retries.append(sse.retry)
    return _result(events, retries)


def _run_sseclient(chunks: Sequence[bytes]) -> ParseResult:
    from sseclient import SSEClient

    client = SSEClient(response_from_chunks(chunks).iter_bytes())
    events = [SSEEvent(e.event, e.data, e.id or "") for e in client.events()]
    return ParseResult(tuple(events))


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:  # pragma: no cover - all three are project dependencies
        return "?"


def openai_contender() -> Contender:
    """The official openai SDK's SSE decoder (events, per-event retry and id)."""
    return Contender(
        "openai",
        _run_openai,
        frozenset({"events", "retry_ms", "last_event_id"}),
        f"openai {_version('openai')}: openai._streaming.SSEDecoder().iter_bytes(response.iter_bytes())",
    )


def httpx_sse_contender() -> Contender:
    """httpx-sse's EventSource over an httpx.Response (events, per-event retry and id)."""
    return Contender(
        "httpx-sse",
        _run_httpx_sse,
        frozenset({"events", "retry_ms", "last_event_id"}),
        f"httpx-sse {_version('httpx-sse')}: httpx_sse.EventSource(response).iter_sse()",
    )


def sseclient_contender() -> Contender:
    """sseclient-py's SSEClient over the response's byte chunks (events only)."""
    return Contender(
        "sseclient-py",
        _run_sseclient,
        frozenset({"events"}),
        f"sseclient-py {_version('sseclient-py')}: sseclient.SSEClient(response.iter_bytes()).events()",
    )


def peers() -> list[Contender]:
    """The three libraries, in a fixed order: openai, httpx-sse, sseclient-py."""
    return [openai_contender(), httpx_sse_contender(), sseclient_contender()]
