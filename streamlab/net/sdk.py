"""The official openai SDK's stream, seen through the library: outcome, text, tool calls, usage, ending (I/O layer).

The SDK hands you typed objects (`ChatCompletionChunk`s, Responses events) and hides the wire: it drops
keep-alive comments, swallows `data: [DONE]`, and ends its loop the same quiet way whether the server sent
`[DONE]` or simply closed the body half-way through. So from the SDK alone you cannot tell a complete answer
from a truncated one. `SDKStreamView` wraps an SDK stream and watches *the same bytes the SDK parses*:

    stream = client.chat.completions.create(model=..., messages=..., stream=True,
                                            stream_options={"include_usage": True})
    with SDKStreamView(stream, idle_timeout=10) as view:
        for chunk in view:                        # exactly the SDK's objects, unchanged
            ...
    print(view.outcome, view.ending)              # Outcome.COMPLETE, Ending.COMPLETE
    result = read_sdk_stream(stream)              # or read it all at once: an `SDKResult`

Theory of operation:

* Before the first read, the view wraps the SDK response's `iter_bytes` (`aiter_bytes` for `AsyncStream`),
  the one method the SDK's `Stream` reads the body through (in the openai version pinned by constraints.txt;
  tests/labs/test_sdk_lab.py fails if that changes). Every decoded chunk goes through the library's `SSEParser`
  before the SDK sees it; nothing is changed, dropped or re-ordered.
* Each object the SDK yields stands for one parsed event (the SDK yields one object per event and none for
  `[DONE]`). The view feeds that event to the library's `ChatAccumulator` / `ResponsesAccumulator`, so the
  accumulator holds exactly what the caller was handed; `[DONE]` and anything after it are fed when the loop
  ends quietly.
* How the bytes stopped is an `Ending` (`streamlab.core.endings`), mapped from what ended the loop:

      the SDK's loop ended quietly        COMPLETE (INCOMPLETE_EVENT if the body ended inside an event)
      close() / leaving `with` / break    CANCELLED
      openai.APITimeoutError              READ_TIMEOUT   (no byte for the SDK's read timeout)
      openai.APIConnectionError           BROKEN         (the connection died mid-body)
      IdleTimeout (raised by the view)    IDLE_TIMEOUT   (bytes, keep-alives say, but no content event)
      openai.APIError (error object)      COMPLETE       (the server's last word was an error: failed)
      anything else the SDK raised        BROKEN         (the stream could not be read to its end)

  The outcome is `outcome_of(ending, accumulator verdict)`, and an error reported by the server wins, as in
  the accumulators. A Chat stream is complete only if `[DONE]` really arrived, so a cut stream is never
  reported complete, however quietly the SDK's loop ended.
* `idle_timeout` is the library client's content-idle rule (`streamlab.net.client`): checked whenever bytes
  arrive, it raises `IdleTimeout` out of the SDK's loop when no content event came for that long. It is
  what a per-read timeout cannot do on a stream that stalls while keep-alive comments keep arriving.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import openai

from streamlab.core.accumulate import INCOMPLETE_FINISH_REASONS, ChatAccumulator, ResponsesAccumulator
from streamlab.core.endings import Ending, Outcome, outcome_of
from streamlab.core.errors import (
    ErrorInStream,
    FrameError,
    IdleTimeout,
    SequenceError,
    SSELimitError,
    StreamEndError,
)
from streamlab.core.partialjson import StructuredAnswer, structured_answer
from streamlab.core.resume import is_content_event
from streamlab.core.sse import SSEEvent, SSEParser

__all__ = [
    "SDKToolCall",
    "SDKResult",
    "SDKStreamView",
    "AsyncSDKStreamView",
    "read_sdk_stream",
    "aread_sdk_stream",
    "ending_of_exception",
    "SDKStructured",
    "sdk_structured_stream",
]


@dataclass(frozen=True)
class SDKToolCall:
    """One tool call as the library rebuilt it. `problem` says why it must not run (None: safe to run)."""

    index: int  # Chat: the call's `index`; Responses: its `output_index`
    call_id: str | None
    name: str
    arguments: str
    problem: str | None

    @property
    def complete(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class SDKResult:
    """What an SDK stream amounted to, in the library's words (a snapshot taken when it ended)."""

    dialect: str  # "chat" or "responses"
    outcome: Outcome
    ending: Ending
    text: str  # Chat: choice 0's content; Responses: every output text part, in order
    tool_calls: tuple[SDKToolCall, ...]
    usage: dict[str, Any] | None
    finish_reason: str | None  # Chat, choice 0 (None for Responses)
    status: str | None  # Responses: completed / incomplete / failed (None for Chat)
    saw_done: bool | None  # Chat: whether `data: [DONE]` arrived (None for Responses)
    objects: int  # objects the SDK handed to the caller
    bytes_received: int
    error: str | None  # what ended the loop, when it was an exception ("APIConnectionError: ...")
    explain: str  # one line: the outcome and the evidence for it


def ending_of_exception(exc: BaseException) -> Ending:
    """The `Ending` an exception that came out of an SDK stream's loop stands for (table in the module doc)."""
    if isinstance(exc, StreamEndError):
        return exc.ending
    if isinstance(exc, SSELimitError):
        return Ending.LIMIT_EXCEEDED
    if isinstance(exc, openai.APITimeoutError):  # a subclass of APIConnectionError: test it first
        return Ending.READ_TIMEOUT
    if isinstance(exc, openai.APIConnectionError):
        return Ending.BROKEN
    if isinstance(exc, openai.APIError):  # an error object inside the 200 stream (status errors come earlier)
        return Ending.COMPLETE
    return Ending.BROKEN


def _dialect(response: Any) -> str:
    path = response.request.url.path
    if path.rstrip("/").endswith("/chat/completions"):
        return "chat"
    if "/responses" in path:
        return "responses"
    raise ValueError(f"SDKStreamView reads Chat Completions and Responses streams, not {path!r}")


class _Tap:
    """Every decoded body chunk the SDK reads goes through here first: parsed, queued, timed."""

    def __init__(self, idle_timeout: float | None, is_content: Callable[[SSEEvent], bool]) -> None:
        if idle_timeout is not None and idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be positive or None, got {idle_timeout!r}")
        self.idle_timeout = idle_timeout
        self.is_content = is_content
        self.parser = SSEParser()
        self.pending: deque[SSEEvent] = deque()  # parsed, not yet matched with an object the SDK yielded
        self.events = 0
        self.bytes = 0
        self.eof = False  # the body ended cleanly (the SDK read it to the end)
        self.mid_event = False  # ... inside an unfinished event
        self.started = self.last_content = time.monotonic()

    def take(self, chunk: bytes) -> None:
        """Parse one chunk; raise IdleTimeout when bytes keep coming but content does not."""
        now = time.monotonic()
        self.bytes += len(chunk)
        events = self.parser.feed(chunk)
        self.events += len(events)
        self.pending.extend(events)
        if any(self.is_content(e) for e in events):
            self.last_content = now
        elif self.idle_timeout is not None and now - self.last_content > self.idle_timeout:
            raise IdleTimeout(
                f"no content event for {now - self.last_content:.3f} s (idle_timeout={self.idle_timeout:g} s) "
                f"although bytes kept arriving",
                events_received=self.events,
                bytes_received=self.bytes,
                elapsed=now - self.started,
            )

    def finish(self) -> None:
        self.eof = True
        self.mid_event = self.parser.close()

    def wrap(self, iter_bytes: Callable[..., Iterator[bytes]]) -> Callable[..., Iterator[bytes]]:
        def tapped(*args: Any, **kwargs: Any) -> Iterator[bytes]:
            inner = iter_bytes(*args, **kwargs)
            try:
                for chunk in inner:
                    self.take(chunk)
                    yield chunk
                self.finish()
            finally:
                inner.close()  # type: ignore[attr-defined]  # a generator: closing it releases the response

        return tapped

    def awrap(self, aiter_bytes: Callable[..., AsyncIterator[bytes]]) -> Callable[..., AsyncIterator[bytes]]:
        async def tapped(*args: Any, **kwargs: Any) -> AsyncIterator[bytes]:
            inner = aiter_bytes(*args, **kwargs)
            try:
                async for chunk in inner:
                    self.take(chunk)
                    yield chunk
                self.finish()
            finally:
                await inner.aclose()  # type: ignore[attr-defined]

        return tapped


class _ViewBase:
    """The bookkeeping shared by the sync and async views (no reading here)."""

    def __init__(
        self,
        stream: Any,
        idle_timeout: float | None,
        is_content: Callable[[SSEEvent], bool],
        kind: type[Any],
        method: str,
    ) -> None:
        if not isinstance(stream, kind):
            raise TypeError(
                f"{type(self).__name__} reads an openai.{kind.__name__} (what create(..., stream=True) and "
                f"retrieve(..., stream=True) return), got {type(stream).__name__}; the .stream() helpers wrap "
                "one of those and are not supported"
            )
        response = stream.response
        if response.is_stream_consumed or response.is_closed:
            raise ValueError(
                f"{type(self).__name__} must see the stream from its first byte: this one was already read or closed"
            )
        self.stream: Any = stream  # an openai.Stream or AsyncStream (checked above)
        self.dialect = _dialect(response)
        self.accumulator: ChatAccumulator | ResponsesAccumulator = (
            ChatAccumulator() if self.dialect == "chat" else ResponsesAccumulator()
        )
        self._tap = _Tap(idle_timeout, is_content)
        wrap = self._tap.awrap if method == "aiter_bytes" else self._tap.wrap
        setattr(response, method, wrap(getattr(response, method)))  # see "Theory of operation"
        self.ending: Ending | None = None
        self.error: BaseException | None = None  # the exception that ended the loop, if one did
        self.problem: Exception | None = None  # the first malformed event the accumulator refused, if any
        self.objects = 0

    # -- feeding the accumulator, one event per object the SDK yielded --

    def _feed(self, event: SSEEvent) -> None:
        try:
            self.accumulator.feed(event)
        except ErrorInStream:
            pass  # recorded by the accumulator itself (its .error)
        except (FrameError, SequenceError) as exc:
            if self.problem is None:
                self.problem = exc

    def _matched(self) -> None:
        """The SDK yielded an object: feed its event (and any [DONE] the SDK stepped over before it)."""
        self.objects += 1
        pending = self._tap.pending
        while pending:
            event = pending.popleft()
            self._feed(event)
            if not event.data.startswith("[DONE]"):
                return

    def _drain(self) -> None:
        while self._tap.pending:
            self._feed(self._tap.pending.popleft())

    def _ended_quietly(self) -> None:
        if self.ending is None:
            self._drain()
            self.ending = Ending.INCOMPLETE_EVENT if self._tap.mid_event else Ending.COMPLETE

    def _ended_by(self, exc: BaseException) -> None:
        if self.ending is None:
            self.error = exc
            self._drain()  # an error object is the next queued event; otherwise the queue is already empty
            self.ending = ending_of_exception(exc)

    def _cancelled(self) -> None:
        if self.ending is None:
            self.ending = Ending.CANCELLED
            self.accumulator.cancel()

    # -- verdicts --

    @property
    def outcome(self) -> Outcome | None:
        """One of the five outcomes once the stream ended (None while it is still being read)."""
        if self.ending is None:
            return None
        if self.accumulator.error is not None:
            return Outcome.FAILED
        verdict = outcome_of(self.ending, self.accumulator.outcome())
        return Outcome.TRUNCATED if verdict is None else verdict

    @property
    def bytes_received(self) -> int:
        return self._tap.bytes

    def result(self) -> SDKResult:
        """A snapshot in the library's words. Call it after the stream ended."""
        if self.ending is None or self.outcome is None:
            raise RuntimeError("the stream has not ended yet: read it to the end or close() it first")
        acc = self.accumulator
        error = _describe(self.error) if self.error is not None else None
        if isinstance(acc, ChatAccumulator):
            calls = tuple(
                SDKToolCall(i, c.id, c.name, c.arguments, acc.tool_call_problem(0, i))
                for (choice, i), c in sorted(acc.tool_calls.items())
                if choice == 0
            )
            return SDKResult(
                "chat",
                self.outcome,
                self.ending,
                acc.text.get(0, ""),
                calls,
                acc.usage,
                acc.finish_reason.get(0),
                None,
                acc.saw_done,
                self.objects,
                self.bytes_received,
                error,
                self._explain(),
            )
        calls = tuple(
            SDKToolCall(
                oi, item.get("call_id"), item.get("name") or "", acc.arguments.get(oi, ""), acc.call_problem(oi)
            )
            for oi, item in acc.function_calls().items()
        )
        text = "".join(acc.text[key] for key in sorted(acc.text))
        return SDKResult(
            "responses",
            self.outcome,
            self.ending,
            text,
            calls,
            acc.usage,
            None,
            acc.status,
            None,
            self.objects,
            self.bytes_received,
            error,
            self._explain(),
        )

    def _explain(self) -> str:
        assert self.ending is not None
        if self.accumulator.error is not None or self.ending is Ending.COMPLETE:
            why = self.accumulator.explain()
            if self.accumulator.error is None and self.outcome is Outcome.TRUNCATED:
                why += " (the body ended cleanly, so the SDK's loop ended without an exception)"
            return why
        if self.ending is Ending.CANCELLED:
            return f"cancelled: the caller closed the stream after {self.objects} object(s)"
        if self.ending is Ending.INCOMPLETE_EVENT:
            return (
                "truncated: the body ended cleanly inside an unfinished event, which was discarded "
                "(the SDK's loop ended without an exception)"
            )
        detail = f" ({_describe(self.error)})" if self.error is not None else ""
        return f"{self.outcome}: the stream ended with {self.ending}{detail}"


def _describe(exc: BaseException) -> str:
    """`Type: message`, plus the underlying cause the SDK wraps (its "Connection error." says little)."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__
    if cause is not None and str(cause):
        text += f" <- {type(cause).__name__}: {cause}"
    return text


class SDKStreamView(_ViewBase):
    """Iterate an `openai.Stream` unchanged while the library watches its bytes (see the module docstring).

    Iteration yields the SDK's own objects and raises what the SDK raises (plus `IdleTimeout` when
    `idle_timeout` is set). `close()` (or leaving `with`, or `break` followed by `close()`) cancels.
    Afterwards: `outcome`, `ending`, `error`, `accumulator`, `objects`, `bytes_received`, `result()`.
    `is_content(event)` decides what resets the idle clock (default: any event but a Responses keep-alive).
    """

    def __init__(
        self,
        stream: openai.Stream[Any],
        *,
        idle_timeout: float | None = None,
        is_content: Callable[[SSEEvent], bool] = is_content_event,
    ) -> None:
        super().__init__(stream, idle_timeout, is_content, openai.Stream, "iter_bytes")

    def __iter__(self) -> SDKStreamView:
        return self

    def __next__(self) -> Any:
        if self.ending is not None:
            raise StopIteration
        try:
            obj = next(self.stream)
        except StopIteration:
            self._ended_quietly()
            raise
        except Exception as exc:
            self._ended_by(exc)
            self.stream.close()
            raise
        except BaseException:  # KeyboardInterrupt and the like: the caller stops reading
            self.close()
            raise
        self._matched()
        return obj

    def close(self) -> None:
        """Close the connection (the server sees the client go); an unfinished stream ends as cancelled."""
        self._cancelled()
        self.stream.close()

    def __enter__(self) -> SDKStreamView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSDKStreamView(_ViewBase):
    """The same view over an `openai.AsyncStream`: `async for`, `await aclose()`, `async with`."""

    def __init__(
        self,
        stream: openai.AsyncStream[Any],
        *,
        idle_timeout: float | None = None,
        is_content: Callable[[SSEEvent], bool] = is_content_event,
    ) -> None:
        super().__init__(stream, idle_timeout, is_content, openai.AsyncStream, "aiter_bytes")

    def __aiter__(self) -> AsyncSDKStreamView:
        return self

    async def __anext__(self) -> Any:
        if self.ending is not None:
            raise StopAsyncIteration
        try:
            obj = await self.stream.__anext__()
        except StopAsyncIteration:
            self._ended_quietly()
            raise
        except Exception as exc:
            self._ended_by(exc)
            await self.stream.close()
            raise
        except BaseException:  # a cancelled task: the caller stops reading
            await self.aclose()
            raise
        self._matched()
        return obj

    async def aclose(self) -> None:
        """Close the connection; an unfinished stream ends as cancelled."""
        self._cancelled()
        await self.stream.close()

    async def __aenter__(self) -> AsyncSDKStreamView:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def read_sdk_stream(
    stream: openai.Stream[Any], *, idle_timeout: float | None = None, stop_after: int | None = None
) -> SDKResult:
    """Read an SDK stream to its end (or `stop_after` objects, then cancel) and say what it amounted to.

    Never raises for the way a stream ends: a dropped connection, a timeout, an error object are all in the
    result (`outcome`, `ending`, `error`). The connection is always closed on return.
    """
    view = SDKStreamView(stream, idle_timeout=idle_timeout)
    try:
        if stop_after is None or stop_after > 0:
            for _ in view:
                if stop_after is not None and view.objects >= stop_after:
                    break
    except Exception:  # recorded by the view (ending, error)
        pass
    finally:
        view.close()
    return view.result()


async def aread_sdk_stream(
    stream: openai.AsyncStream[Any], *, idle_timeout: float | None = None, stop_after: int | None = None
) -> SDKResult:
    """`read_sdk_stream` for an `openai.AsyncStream`."""
    view = AsyncSDKStreamView(stream, idle_timeout=idle_timeout)
    try:
        if stop_after is None or stop_after > 0:
            async for _ in view:
                if stop_after is not None and view.objects >= stop_after:
                    break
    except Exception:  # recorded by the view (ending, error)
        pass
    finally:
        await view.aclose()
    return view.result()


# -- structured output: the SDK's helpers on the same bytes as the library ------------------------------------------


@dataclass(frozen=True)
class SDKStructured:
    """What `client.chat.completions.stream(response_format=...)` made of a structured answer, beside the library's
    verdict on the same bytes.

    `partials`: the SDK's `parsed` value on each `content.delta` event (its partial JSON, jiter's `partial_mode`);
    `parsed`: the final parsed object (None when the SDK raised); `raised`: the exception that ended the SDK's
    loop, as "ClassName: message" (None when it ended quietly), `raised_type` its class name; `content`: the text
    the SDK had when it stopped; `finish_reason` (choice 0); `verdict`: `streamlab.core.partialjson.structured_answer`
    on the text and outcome the library's `ChatAccumulator` rebuilt from the bytes the SDK read."""

    partials: tuple[Any, ...]
    parsed: Any
    raised: str | None
    raised_type: str | None
    content: str
    finish_reason: str | None
    verdict: StructuredAnswer


def sdk_structured_stream(client: openai.OpenAI, *, response_format: Any, **request: Any) -> SDKStructured:
    """Stream a structured answer through the SDK's helper, `client.chat.completions.stream(response_format=...,
    **request)` (a pydantic model as `response_format`), and read the same bytes with the library.

    What it shows (openai 3.57.0, `lib/streaming/chat/_completions.py`): each `content.delta` event carries the
    partial JSON parsed so far; an answer cut by finish_reason "length" (or "content_filter") makes the helper
    raise `LengthFinishReasonError` ("Could not parse response content as the length limit was reached") in the
    middle of the loop: a parse error, where the library says "incomplete" and keeps what arrived
    (openai-python#3263). Exceptions other than those two propagate (a connection error, an HTTP error)."""
    tap = _Tap(None, is_content_event)
    partials: list[Any] = []
    parsed: Any = None
    raised: BaseException | None = None
    content, finish = "", None
    with client.chat.completions.stream(response_format=response_format, **request) as stream:
        response = stream._response  # the one seam: the SDK reads the body through response.iter_bytes
        response.iter_bytes = tap.wrap(response.iter_bytes)  # type: ignore[method-assign]
        try:
            for event in stream:
                if event.type == "content.delta":
                    partials.append(event.parsed)
            final = stream.get_final_completion()
            parsed, content = final.choices[0].message.parsed, final.choices[0].message.content or ""
            finish = final.choices[0].finish_reason
        except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
            raised = exc
            cut = exc.completion  # the snapshot when the helper raised (typed Optional by the SDK)
            content = (cut.choices[0].message.content or "") if cut is not None and cut.choices else ""
            finish = cut.choices[0].finish_reason if cut is not None and cut.choices else None
    return SDKStructured(
        tuple(partials),
        parsed,
        None if raised is None else _describe(raised),
        None if raised is None else type(raised).__name__,
        content,
        finish,
        _library_verdict(tap),
    )


def _library_verdict(tap: _Tap) -> StructuredAnswer:
    """The library's verdict on the events the SDK's bytes held: a finish_reason "length" or "content_filter" is
    an incomplete answer even when the SDK stopped reading there (before `[DONE]`)."""
    acc = ChatAccumulator()
    try:
        for event in tap.pending:
            acc.feed(event)
    except (ErrorInStream, FrameError):
        pass  # kept in the accumulator: its outcome says failed
    outcome = acc.outcome()
    if outcome in (Outcome.TRUNCATED, Outcome.CANCELLED) and acc.finish_reason.get(0) in INCOMPLETE_FINISH_REASONS:
        outcome = Outcome.INCOMPLETE
    return structured_answer(acc.text.get(0, ""), outcome)
