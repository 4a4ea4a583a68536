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

`stream_chat` and `astream_chat` return a `ChatEventStream` / `AsyncChatEventStream`: the same stream, plus one
provider fix. A server that does not know `stream_options` refuses the whole request with a 400 naming it (Groq,
Bedrock through LiteLLM); the stream then sends the request once more without the field, before any byte of a
stream was read (the decision is `streamlab.core.retry.without_stream_options`), and says so: a line in the
stream's `notes` and an INFO record on the `streamlab.client` logger. The answer then streams without usage.
`retry_stream_options=False` turns that off (the 400 is raised as `BadStatus`, as for any refusal).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from streamlab.core.errors import BadStatus
from streamlab.core.reading import Keep
from streamlab.core.retry import without_stream_options
from streamlab.core.sse import SSEEvent, SSEParser
from streamlab.net.eventstream import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    AsyncEventStream,
    EventStream,
)

__all__ = [
    "ChatEventStream",
    "AsyncChatEventStream",
    "stream_chat",
    "stream_responses",
    "resume_response",
    "astream_chat",
    "astream_responses",
    "aresume_response",
]

_log = logging.getLogger("streamlab.client")


class _StreamOptionsFix:
    """What the two chat streams share: whether to re-send a request refused for `stream_options`, the `notes`
    saying it was done, and the reset of what the refused attempt recorded (no byte of a stream was read)."""

    body: Any
    url: str
    notes: list[str]
    retry_stream_options: bool
    end_reason: Any
    error: Any
    status: Any
    headers: Any
    _response: Any

    def _without_stream_options(self, exc: BadStatus) -> bool:
        """True when the refusal is one to answer by sending the request again without `stream_options` (once)."""
        if not self.retry_stream_options or self.notes or not isinstance(self.body, Mapping):
            return False
        again = without_stream_options(exc.status, exc.body, self.body)
        if again is None:
            return False
        said = exc.error.get("message") if exc.error else exc.body
        note = (
            f"HTTP 400 named stream_options ({str(said)[:120]!r}): sent once more without it, before any byte of a "
            "stream; no usage will be streamed"
        )
        self.notes.append(note)
        _log.info("%s: %s", self.url, note)
        self.body = again
        self.end_reason = self.error = self.status = self.headers = self._response = None
        return True


class ChatEventStream(_StreamOptionsFix, EventStream):
    """`EventStream` for `POST /chat/completions` that re-sends a request refused for `stream_options` once
    without it (module docstring); `notes` says when it did."""

    def __init__(self, url: str, json: Any = None, *, retry_stream_options: bool = True, **options: Any) -> None:
        super().__init__(url, json, **options)
        self.notes = []
        self.retry_stream_options = retry_stream_options

    def open(self) -> ChatEventStream:
        try:
            super().open()
        except BadStatus as exc:
            if not self._without_stream_options(exc):
                raise
            super().open()
        return self


class AsyncChatEventStream(_StreamOptionsFix, AsyncEventStream):
    """Async `ChatEventStream`."""

    def __init__(self, url: str, json: Any = None, *, retry_stream_options: bool = True, **options: Any) -> None:
        super().__init__(url, json, **options)
        self.notes = []
        self.retry_stream_options = retry_stream_options

    async def open(self) -> AsyncChatEventStream:
        try:
            await super().open()
        except BadStatus as exc:
            if not self._without_stream_options(exc):
                raise
            await super().open()
        return self


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
    retry_stream_options: bool = True,
) -> ChatEventStream:
    """`POST {base_url}/chat/completions` with `"stream": true` added; a 400 that names `stream_options` is
    answered by sending the request once more without it (`retry_stream_options`; see the module docstring)."""
    return ChatEventStream(
        _join(base_url, "chat/completions"),
        _streaming(body),
        retry_stream_options=retry_stream_options,
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
    retry_stream_options: bool = True,
) -> AsyncChatEventStream:
    """Async `stream_chat`."""
    return AsyncChatEventStream(
        _join(base_url, "chat/completions"),
        _streaming(body),
        retry_stream_options=retry_stream_options,
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
