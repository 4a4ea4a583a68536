"""The HTTP client for the two OpenAI streaming dialects: one call per route, sync and async (I/O layer).

    from streamlab.net.client import stream_chat

    ask = {"model": "demo", "messages": [{"role": "user", "content": "Hi?"}]}
    with stream_chat(server.base_url, ask) as stream:
        for timed in stream:                    # TimedEvent(event=SSEEvent(...), at=perf_counter value)
            print(timed.elapsed, timed.data)
    print(stream.end_reason)                    # Ending.COMPLETE, which == "complete"

`stream_chat` (`POST /chat/completions`), `stream_responses` (`POST /responses`) and `resume_response`
(`GET /responses/{id}?stream=true&starting_after=N`), with their async twins `astream_*` /
`aresume_response`, each return an `EventStream` (`AsyncEventStream`) from `streamlab.net.eventstream`,
which holds the table of endings and the errors each one raises, and documents the keyword parameters
(`client`, `headers`, `last_event_id`, `read_timeout`, `connect_timeout`, `deadline`, `idle_timeout`,
`is_content`, `parser`, `keep`) once for all of them. Everything a caller needs from the client is
importable from here: the stream classes, `TimedEvent`, `TRANSLATE`, `RETRYABLE_TRANSPORT_ERRORS` and the
`StreamEndError` family (defined in `streamlab.core.errors`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from streamlab.core.reading import Keep
from streamlab.core.sse import SSEEvent, SSEParser
from streamlab.net.eventstream import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    AsyncEventStream,
    EventStream,
)

__all__ = [
    "stream_chat",
    "stream_responses",
    "resume_response",
    "astream_chat",
    "astream_responses",
    "aresume_response",
]

# --- one shortcut per route (keywords: see streamlab.net.eventstream) -------------------------------


def _join(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")


def _streaming(body: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(body)
    out["stream"] = True
    return out


def _resume_url(base_url: str, response_id: str, starting_after: int | None) -> str:
    url = _join(base_url, f"responses/{response_id}") + "?stream=true"
    return url if starting_after is None else f"{url}&starting_after={int(starting_after)}"


def stream_chat(
    base_url: str,
    body: Mapping[str, Any],
    *,
    client: httpx.Client | None = None,
    headers: Mapping[str, str] | None = None,
    last_event_id: str | None = None,
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    deadline: float | None = None,
    idle_timeout: float | None = None,
    is_content: Callable[[SSEEvent], bool] | None = None,
    parser: SSEParser | None = None,
    keep: Keep = "all",
) -> EventStream:
    """`POST {base_url}/chat/completions` with `"stream": true` added."""
    return EventStream(
        _join(base_url, "chat/completions"),
        _streaming(body),
        client=client,
        headers=headers,
        last_event_id=last_event_id,
        read_timeout=read_timeout,
        connect_timeout=connect_timeout,
        deadline=deadline,
        idle_timeout=idle_timeout,
        is_content=is_content,
        parser=parser,
        keep=keep,
    )


def stream_responses(
    base_url: str,
    body: Mapping[str, Any],
    *,
    client: httpx.Client | None = None,
    headers: Mapping[str, str] | None = None,
    last_event_id: str | None = None,
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    deadline: float | None = None,
    idle_timeout: float | None = None,
    is_content: Callable[[SSEEvent], bool] | None = None,
    parser: SSEParser | None = None,
    keep: Keep = "all",
) -> EventStream:
    """`POST {base_url}/responses` with `"stream": true` added."""
    return EventStream(
        _join(base_url, "responses"),
        _streaming(body),
        client=client,
        headers=headers,
        last_event_id=last_event_id,
        read_timeout=read_timeout,
        connect_timeout=connect_timeout,
        deadline=deadline,
        idle_timeout=idle_timeout,
        is_content=is_content,
        parser=parser,
        keep=keep,
    )


def resume_response(
    base_url: str,
    response_id: str,
    starting_after: int | None = None,
    *,
    client: httpx.Client | None = None,
    headers: Mapping[str, str] | None = None,
    last_event_id: str | None = None,
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    deadline: float | None = None,
    idle_timeout: float | None = None,
    is_content: Callable[[SSEEvent], bool] | None = None,
    parser: SSEParser | None = None,
    keep: Keep = "all",
) -> EventStream:
    """`GET {base_url}/responses/{id}?stream=true[&starting_after=N]`: re-attach to a background response."""
    return EventStream(
        _resume_url(base_url, response_id, starting_after),
        None,
        method="GET",
        client=client,
        headers=headers,
        last_event_id=last_event_id,
        read_timeout=read_timeout,
        connect_timeout=connect_timeout,
        deadline=deadline,
        idle_timeout=idle_timeout,
        is_content=is_content,
        parser=parser,
        keep=keep,
    )


def astream_chat(
    base_url: str,
    body: Mapping[str, Any],
    *,
    client: httpx.AsyncClient | None = None,
    headers: Mapping[str, str] | None = None,
    last_event_id: str | None = None,
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    deadline: float | None = None,
    idle_timeout: float | None = None,
    is_content: Callable[[SSEEvent], bool] | None = None,
    parser: SSEParser | None = None,
    keep: Keep = "all",
) -> AsyncEventStream:
    """Async `stream_chat`."""
    return AsyncEventStream(
        _join(base_url, "chat/completions"),
        _streaming(body),
        client=client,
        headers=headers,
        last_event_id=last_event_id,
        read_timeout=read_timeout,
        connect_timeout=connect_timeout,
        deadline=deadline,
        idle_timeout=idle_timeout,
        is_content=is_content,
        parser=parser,
        keep=keep,
    )


def astream_responses(
    base_url: str,
    body: Mapping[str, Any],
    *,
    client: httpx.AsyncClient | None = None,
    headers: Mapping[str, str] | None = None,
    last_event_id: str | None = None,
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    deadline: float | None = None,
    idle_timeout: float | None = None,
    is_content: Callable[[SSEEvent], bool] | None = None,
    parser: SSEParser | None = None,
    keep: Keep = "all",
) -> AsyncEventStream:
    """Async `stream_responses`."""
    return AsyncEventStream(
        _join(base_url, "responses"),
        _streaming(body),
        client=client,
        headers=headers,
        last_event_id=last_event_id,
        read_timeout=read_timeout,
        connect_timeout=connect_timeout,
        deadline=deadline,
        idle_timeout=idle_timeout,
        is_content=is_content,
        parser=parser,
        keep=keep,
    )


def aresume_response(
    base_url: str,
    response_id: str,
    starting_after: int | None = None,
    *,
    client: httpx.AsyncClient | None = None,
    headers: Mapping[str, str] | None = None,
    last_event_id: str | None = None,
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    deadline: float | None = None,
    idle_timeout: float | None = None,
    is_content: Callable[[SSEEvent], bool] | None = None,
    parser: SSEParser | None = None,
    keep: Keep = "all",
) -> AsyncEventStream:
    """Async `resume_response`."""
    return AsyncEventStream(
        _resume_url(base_url, response_id, starting_after),
        None,
        method="GET",
        client=client,
        headers=headers,
        last_event_id=last_event_id,
        read_timeout=read_timeout,
        connect_timeout=connect_timeout,
        deadline=deadline,
        idle_timeout=idle_timeout,
        is_content=is_content,
        parser=parser,
        keep=keep,
    )
