"""Every exception streamlab raises, in one tree (sans-IO core: no module here does any I/O).

    StreamlabError                    root: `except StreamlabError` catches anything the library raises
    ├── SSELimitError (ValueError)    a line or an event outgrew the parser's configured bounds
    ├── FrameError (ValueError)       an event's data is not what the dialect promises (not JSON, field missing)
    ├── SequenceError (ValueError)    a Responses sequence_number was replayed, went backwards or skipped
    ├── ToolCallError (ValueError)    a tool call is not safe to run (incomplete, unnamed, arguments not JSON)
    ├── FaultSpecError (ValueError)   a chaos proxy option is malformed or out of range (`.option` names it)
    ├── EncodingError (ValueError)    a body's Content-Encoding cannot be undone (unknown coding, corrupt bytes)
    ├── ProxyConfigError (ValueError) a real proxy's option is malformed or out of range (`.option` names it)
    ├── ErrorInStream                 the server sent an error object *inside* a 200 stream
    ├── StreamEndError                the transport ended a stream abnormally (client side); `.ending` names how
    │   ├── BadStatus                 a non-2xx status before any stream (`.status`, `.headers`, `.body`)
    │   │   └── NotAnEventStream      a 2xx that is not text/event-stream (JSON, an HTML proxy page)
    │   ├── RequestNotSent            the request could not be sent as built (bad scheme, invalid header)
    │   ├── ConnectFailed             no response: refused, reset or closed before the status line
    │   ├── ConnectionBroken          the connection died after the response started
    │   ├── ReadStalled               no byte arrived for the read timeout
    │   ├── IdleTimeout               bytes arrived (keep-alives) but no content event for the idle timeout
    │   ├── DeadlineExceeded          the whole request outlasted its deadline
    │   ├── IncompleteEvent           the body ended cleanly but inside an event
    │   └── EventTooLarge             the parser's limit was hit mid-stream (`__cause__` is the SSELimitError)
    ├── RetryError                    every attempt failed, or one failed in a way that must not be retried
    ├── InternalError                 a streamlab server met an exception it did not expect on one request
    ├── ResumeError                   a stream could not be resumed
    └── ProxyUnavailable              nginx or Caddy is not installed here, or did not start (`.proxy` names which)

Why one tree: a caller can catch everything the library raises with one `except`, the classes that describe
bad *input* are also `ValueError` (what callers already catch for bad data), and no name collides with
httpx's own exceptions (`HTTPStatusError`, `ConnectError`, `ReadTimeout`, `StreamError`...), which the
client translates into this tree through one table (`streamlab.net.client.TRANSLATE`), the way httpx maps
httpcore's exceptions at a single seam.

Each `StreamEndError` subclass carries its `Ending` (`streamlab.core.endings`), so a stream's ending is the
same word whether it is read from `stream.end_reason`, from the exception, or from a retry or resume log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from streamlab.core.endings import Ending

__all__ = [
    "StreamlabError",
    "SSELimitError",
    "FrameError",
    "SequenceError",
    "ToolCallError",
    "FaultSpecError",
    "EncodingError",
    "ProxyConfigError",
    "ErrorInStream",
    "StreamEndError",
    "BadStatus",
    "NotAnEventStream",
    "RequestNotSent",
    "ConnectFailed",
    "ConnectionBroken",
    "ReadStalled",
    "IdleTimeout",
    "DeadlineExceeded",
    "IncompleteEvent",
    "EventTooLarge",
    "RetryError",
    "InternalError",
    "ResumeError",
    "ProxyUnavailable",
    "ENDING_ERRORS",
]


class StreamlabError(Exception):
    """The root of every exception streamlab raises."""


class _Event(Protocol):
    """What these exceptions read of an event (`streamlab.core.sse.SSEEvent` is one). The parser raises them, so
    this module names the event's shape rather than importing the parser's class: no errors <-> sse cycle."""

    @property
    def event(self) -> str: ...

    @property
    def data(self) -> str: ...


# --- bad input (also ValueError) -------------------------------------------------------------------


class SSELimitError(StreamlabError, ValueError):
    """A line or an event grew past a configured bound.

    `limit` names the bound ("max_line_bytes" or "max_event_bytes"), `offset` is the stream byte offset
    at which the offending line starts (for the event limit: the data line that took the data past it),
    and `events` holds the events completed earlier in the same `feed` call, so nothing that was already
    parsed is lost.
    """

    def __init__(self, limit: str, value: int, offset: int, events: list[Any]) -> None:  # list[SSEEvent]
        if limit == "max_line_bytes":
            what = f"the line starting at stream byte offset {offset} is longer than {value} bytes"
        else:
            what = f"the data line at stream byte offset {offset} takes an event's data past {value} bytes"
        super().__init__(
            f"SSE {limit}={value} exceeded: {what} ({len(events)} complete event(s) from this chunk are in .events)"
        )
        self.limit = limit
        self.value = value
        self.offset = offset
        self.events = events


class FrameError(StreamlabError, ValueError):
    """An event's `data` is not what the dialect promises (not JSON, not an object, a field missing)."""

    def __init__(self, problem: str, event: _Event, event_number: int) -> None:
        self.event = event
        self.event_number = event_number
        self.text = event.data
        shown = event.data if len(event.data) <= 120 else event.data[:117] + "..."
        super().__init__(f"event #{event_number} (event type {event.event!r}): {problem}; its data: {shown!r}")


class SequenceError(StreamlabError, ValueError):
    """A Responses `sequence_number` was not the one expected.

    `kind` is "replayed" (a number already handled came again), "went backwards" (a smaller one came), or
    "skipped" (a larger one came: events were lost); `expected` is the number that should have come next
    (one more than `previous`, the last one handled), `got` the number that came, `event_type` the offending
    event's type. Everything handled before it is intact. The rule is one for every reader:
    `streamlab.core.resume.sequence_verdict`.
    """

    def __init__(self, kind: str, *, expected: int, got: int, event_type: str, previous: int | None = None) -> None:
        self.kind = kind
        self.expected = expected
        self.got = got
        self.event_type = event_type
        self.previous = expected - 1 if previous is None else previous
        if kind == "skipped":  # numbers follow one another: a larger one means events were lost
            message = f"sequence_number {got} ({event_type}) skips {got - expected} event(s): expected {expected} next"
        elif previous is not None:  # an accumulator's words: it cites the last number it handled
            message = (
                f"sequence_number {kind}: {event_type!r} has sequence_number {got}, "
                f"but {previous} was already handled (numbers must strictly increase)"
            )
        else:
            message = f"sequence_number {got} ({event_type}) was already handled (a replay): expected {expected} next"
        super().__init__(message)


class ToolCallError(StreamlabError, ValueError):
    """A tool call is not safe to run: incomplete, cut off, unnamed, or its arguments are not a JSON object."""


class FaultSpecError(StreamlabError, ValueError):
    """A chaos proxy option is malformed or out of range. `option` names it as the caller wrote it (a keyword
    parameter such as "cut_after", or a command-line option such as "--slice"), `value` is what was given."""

    def __init__(self, option: str, value: object, problem: str) -> None:
        super().__init__(f"{option}={value!r}: {problem}")
        self.option = option
        self.value = value
        self.problem = problem


class EncodingError(StreamlabError, ValueError):
    """A body's Content-Encoding cannot be undone: a coding streamlab does not decode, or bytes that are not
    valid in the coding declared (`streamlab.core.decompress`)."""


class ProxyConfigError(StreamlabError, ValueError):
    """A real proxy's option is malformed or out of range (`streamlab.core.proxy`): `option` names it as the caller
    wrote it (a keyword such as "read_timeout"), `value` is what was given."""

    def __init__(self, option: str, value: object, problem: str) -> None:
        super().__init__(f"{option}={value!r}: {problem}")
        self.option = option
        self.value = value
        self.problem = problem


class ErrorInStream(StreamlabError):
    """The server reported an error inside a stream whose HTTP status was already 200.

    `error` is the error object exactly as received (for Chat, the value of the `"error"` key; for a
    Responses `error` event, the event itself). Its `code` may be a string, an integer or null.
    """

    def __init__(self, error: Any, *, event_number: int | None = None) -> None:
        self.error = error
        self.event_number = event_number
        where = f" (event #{event_number})" if event_number is not None else ""
        if isinstance(error, dict):
            bits = [str(error[k]) for k in ("type", "code") if error.get(k) not in (None, "", "error")]
            label = "/".join(dict.fromkeys(bits)) or "error"
            message = f"{label}: {error.get('message', '(no message)')}"
        else:
            message = repr(error)
        super().__init__(f"error inside the stream{where}: {message}")


# --- how a transport ends a stream ------------------------------------------------------------------


class StreamEndError(StreamlabError):
    """The stream did not end cleanly. Carries what was received before the failure.

    `ending` is the `Ending` member naming how (also `end_reason`, its string value); `events_received` and
    `bytes_received` count what arrived, `mid_event` tells whether it stopped inside an unfinished event,
    `elapsed` is seconds since the request was sent.
    """

    ending: Ending = Ending.BROKEN

    def __init__(
        self,
        message: str,
        *,
        events_received: int = 0,
        bytes_received: int = 0,
        mid_event: bool = False,
        elapsed: float = 0.0,
    ) -> None:
        super().__init__(message)
        self.events_received = events_received
        self.bytes_received = bytes_received
        self.mid_event = mid_event
        self.elapsed = elapsed

    @property
    def end_reason(self) -> str:
        """The ending as a plain string (`self.ending.value`)."""
        return self.ending.value


class BadStatus(StreamEndError):
    """The server answered with a non-2xx status before any stream.

    `status` is the code, `headers` the response headers (case-insensitive, e.g. `retry-after-ms`),
    `body` the parsed JSON body (or the text when it is not JSON), `error` the OpenAI error object
    (`body["error"]`) when there is one.
    """

    ending = Ending.HTTP_ERROR

    def __init__(self, status: int, headers: Mapping[str, str], body: Any, *, elapsed: float = 0.0) -> None:
        error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
        detail = error.get("message") if error else (body if isinstance(body, str) else json.dumps(body))
        super().__init__(f"HTTP {status}: {str(detail)[:300]}", elapsed=elapsed)
        self.status = status
        self.headers = headers
        self.body = body
        self.error = error


class NotAnEventStream(BadStatus):
    """A 2xx answer that is not `text/event-stream`: a JSON body (typically `"stream": true` was not sent),
    or an HTML page from a proxy. The standard fails such a connection instead of parsing it."""

    ending = Ending.NOT_EVENT_STREAM


class RequestNotSent(StreamEndError):
    """The request cannot be sent as built (an unsupported URL scheme, an invalid header...). Never retried."""

    ending = Ending.INVALID_REQUEST


class ConnectFailed(StreamEndError):
    """No response arrived: the connection was refused, reset or closed before the status line."""

    ending = Ending.CONNECT_ERROR


class ConnectionBroken(StreamEndError):
    """The connection died after the response started: closed without the end of the body, or reset."""

    ending = Ending.BROKEN


class ReadStalled(StreamEndError):
    """No byte arrived for `read_timeout` seconds (the gap between bytes, not the total)."""

    ending = Ending.READ_TIMEOUT


class IdleTimeout(StreamEndError):
    """Bytes kept arriving (keep-alive comments, say) but no content event for `idle_timeout` seconds."""

    ending = Ending.IDLE_TIMEOUT


class DeadlineExceeded(StreamEndError):
    """The whole request, from sending it to the last byte, took longer than `deadline` seconds."""

    ending = Ending.DEADLINE


class IncompleteEvent(StreamEndError):
    """The body ended cleanly (terminating chunk) but inside an event, which is therefore discarded."""

    ending = Ending.INCOMPLETE_EVENT


class EventTooLarge(StreamEndError):
    """A line or an event outgrew the parser's bounds mid-stream; the connection was closed.

    The parser's `SSELimitError` (limit, offset) is chained as `__cause__` and kept as `limit_error`.
    """

    ending = Ending.LIMIT_EXCEEDED

    def __init__(self, message: str, *, limit_error: SSELimitError | None = None, **counts: Any) -> None:
        super().__init__(message, **counts)
        self.limit_error = limit_error


ENDING_ERRORS: dict[Ending, type[StreamEndError]] = {
    cls.ending: cls
    for cls in (
        BadStatus,
        NotAnEventStream,
        RequestNotSent,
        ConnectFailed,
        ConnectionBroken,
        ReadStalled,
        IdleTimeout,
        DeadlineExceeded,
        IncompleteEvent,
        EventTooLarge,
    )
}
"""The exception a client raises for each abnormal ending (COMPLETE and CANCELLED raise nothing)."""


# --- higher-level runners ---------------------------------------------------------------------------


class RetryError(StreamlabError):
    """Every attempt failed, or one failed in a way that must not be retried.

    `attempts` holds each attempt (objects with a `line()` and a `result`); `last_error` is the exception of the
    final attempt (also chained as `__cause__`), so nothing already known is lost.
    """

    def __init__(self, attempts: list[Any], last_error: BaseException | None = None) -> None:
        lines = [a.line() for a in attempts]
        super().__init__(f"request failed after {len(attempts)} attempt(s):\n  " + "\n  ".join(lines))
        self.attempts = attempts
        self.last_error = last_error

    @property
    def status(self) -> int | None:
        """The HTTP status of the last attempt, if it ended with one."""
        return self.attempts[-1].result.status if self.attempts else None


class InternalError(StreamlabError):
    """A streamlab server (the stand-in, the relay, the gateway) met an exception it did not expect while serving
    one request. It is never raised to a client: the server answers that request with an error (a 5xx before
    the head, the marked final event after it), records the outcome (releasing a circuit breaker's permit
    too) and serves the next; its message names the original exception, which is its `__cause__`."""


class ResumeError(StreamlabError):
    """The stream could not be resumed: no response id yet, too many reconnects without progress, or an
    HTTP error on the reconnect. `connections` lists every connection made (objects with a `line()`); the
    events handled before the failure were already yielded and stay handled."""

    def __init__(self, message: str, connections: list[Any]) -> None:
        lines = "\n  ".join(c.line() for c in connections)
        super().__init__(f"{message}\n  {lines}" if connections else message)
        self.connections = connections


class ProxyUnavailable(StreamlabError):
    """A real proxy (nginx, Caddy) cannot run here: its program is not installed (the message says how to install
    it), or it exited or did not answer before it was ready (the message quotes its log). `proxy` names which."""

    def __init__(self, proxy: str, message: str) -> None:
        super().__init__(message)
        self.proxy = proxy
