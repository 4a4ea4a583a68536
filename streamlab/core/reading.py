"""The state of reading one event stream: what arrived, when, and how it ended (sans-IO core).

The HTTP client (`streamlab.net.client`) does the I/O: it sends the request, reads network chunks and
stamps each one with `time.perf_counter()`. Everything it *decides* about those chunks is here, fed
`(chunk, now)` pairs, with no socket and no clock: the parser is fed, events are stamped and counted, the
idle timeout and the deadline are checked against the `now` given, and every ending is named with one
`Ending` and, when abnormal, one exception from `streamlab.core.errors` (`ENDING_ERRORS`).

What is kept is a choice, `keep`:

* `"all"` (the default, what the labs use): every body byte (`raw`), every event (`events`) and the time
  and size of every network read (`chunks`), so nothing is lost when an error is raised;
* `"none"`: nothing but the running state: counts (`events_received`, `bytes_received`, `chunks_received`),
  the parser's `last_event_id` and `retry_ms`, and the times of the first and last byte and event. A stream
  of any length is then read in constant memory (bounded by the parser's limits); the events are only
  those the caller takes from the iteration. Reading `raw`, `events` or `chunks` raises `RuntimeError`
  rather than pretend that nothing arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, TypeVar

from streamlab.core.endings import Ending
from streamlab.core.errors import (
    DeadlineExceeded,
    EventTooLarge,
    IdleTimeout,
    IncompleteEvent,
    SSELimitError,
    StreamEndError,
)
from streamlab.core.safejson import read_json
from streamlab.core.sse import SSEEvent, SSEParser

__all__ = ["TimedEvent", "Reading", "Keep", "KEEP_MODES"]

Keep = Literal["all", "none"]
KEEP_MODES: tuple[Keep, ...] = ("all", "none")
"""`keep="all"`: raw bytes, events and chunk times are kept; `keep="none"`: only counts and the last times."""

_E = TypeVar("_E", bound=StreamEndError)


class _Counts(TypedDict):
    """What a `StreamEndError` carries of the stream so far: the keyword arguments every ending error takes."""

    events_received: int
    bytes_received: int
    mid_event: bool
    elapsed: float


@dataclass(frozen=True, slots=True)
class TimedEvent:
    """One SSE event and when it arrived.

    `at` is the `time.perf_counter()` value when the network chunk that completed the event was
    received (events completed by the same chunk share it); `elapsed` is `at` minus the moment the
    request was sent, i.e. the time a user would have waited for this event.
    """

    event: SSEEvent
    at: float
    elapsed: float

    @property
    def type(self) -> str:
        """The SSE event type ("message" when the frame had no `event:` line)."""
        return self.event.event

    @property
    def data(self) -> str:
        return self.event.data

    @property
    def id(self) -> str:
        """The stream's last event ID when this event was dispatched."""
        return self.event.last_event_id

    def json(self) -> Any:
        """The data parsed as JSON (raises ValueError for non-JSON data such as `[DONE]`, or too deep)."""
        return read_json(self.event.data)


class Reading:
    """Everything known about one event stream being read. Fed `take(chunk, now)`; decides every ending.

    `parser` is the `SSEParser` to feed (its limits bound one line and one event); `keep` is "all" or
    "none" (module docstring); `idle_timeout` and `is_content` bound the time without a content event while
    bytes still arrive (`is_content(event)` decides what counts; default: every event); `deadline` bounds
    the whole request, from `started_at` (which the I/O layer sets when it sends the request).
    """

    def __init__(
        self,
        *,
        parser: SSEParser,
        keep: Keep = "all",
        deadline: float | None = None,
        idle_timeout: float | None = None,
        is_content: Callable[[SSEEvent], bool] | None = None,
    ) -> None:
        if keep not in KEEP_MODES:
            raise ValueError(f'keep must be "all" or "none", got {keep!r}')
        self.parser = parser
        self.keep: Keep = keep
        self.deadline = deadline
        self.idle_timeout = idle_timeout
        self.is_content = is_content
        self.started_at: float | None = None
        self.headers_at: float | None = None
        self.first_byte_at: float | None = None
        self.last_byte_at: float | None = None
        self.last_content_at: float | None = None
        self.first_event_at: float | None = None
        self.last_event_at: float | None = None
        self.events_received = 0
        self.bytes_received = 0
        self.chunks_received = 0
        self.end_reason: Ending | None = None
        self.mid_event = False
        self.error: StreamEndError | None = None
        self.pending: StreamEndError | None = None  # raised after the events of the current chunk are handed out
        self._events: list[TimedEvent] | None = [] if keep == "all" else None
        self._chunks: list[tuple[float, int]] | None = [] if keep == "all" else None
        self._raw: bytearray | None = bytearray() if keep == "all" else None
        self._parser_closed = False

    # -- what was received ---------------------------------------------------------------------------

    def _kept(self, what: str, value: Any) -> Any:
        if value is None:
            raise RuntimeError(
                f'stream.{what} is not kept: this stream was read with keep="none" (it received '
                f"{self.events_received} event(s) and {self.bytes_received} byte(s))"
            )
        return value

    @property
    def events(self) -> list[TimedEvent]:
        """Every event received, in order (keep="all" only)."""
        return self._kept("events", self._events)

    @property
    def chunks(self) -> list[tuple[float, int]]:
        """Arrival time and size of each network read (keep="all" only)."""
        return self._kept("chunks", self._chunks)

    @property
    def raw(self) -> bytes:
        """Every body byte received so far, exactly as it arrived (keep="all" only)."""
        return bytes(self._kept("raw", self._raw))

    @property
    def last_event_id(self) -> str:
        """The stream's last event ID: what to send as `Last-Event-ID` when reconnecting."""
        return self.parser.last_event_id

    @property
    def retry_ms(self) -> int | None:
        """The server's last valid `retry:` field, if any."""
        return self.parser.retry_ms

    @property
    def ended(self) -> bool:
        return self.end_reason is not None

    def elapsed(self, now: float) -> float:
        """Seconds from sending the request to `now` (0 before it was sent)."""
        return 0.0 if self.started_at is None else now - self.started_at

    def where(self) -> str:
        """How far the stream got, for messages: "after 3 event(s) and 412 byte(s)"."""
        return f"after {self.events_received} event(s) and {self.bytes_received} byte(s)"

    # -- feeding -------------------------------------------------------------------------------------

    def take(self, chunk: bytes, now: float) -> list[TimedEvent]:
        """Record one network chunk received at `now` and parse it; return its events, stamped.

        A parser limit or the idle timeout sets `pending` (the error to raise once these events are
        handed out) and ends the stream. Nothing is taken once the stream was cancelled.
        """
        if self.end_reason is Ending.CANCELLED:  # close() from another thread or task won the race
            return []
        if self.first_byte_at is None:
            self.first_byte_at = now
        self.last_byte_at = now
        self.chunks_received += 1
        self.bytes_received += len(chunk)
        if self._raw is not None and self._chunks is not None:
            self._chunks.append((now, len(chunk)))
            self._raw += chunk
        limit_error = None
        try:
            parsed = self.parser.feed(chunk)
        except SSELimitError as exc:  # hand out the events completed before the oversized line, then end
            parsed, limit_error = exc.events, exc
        except RuntimeError:  # the parser was closed by a concurrent close() between the check and the feed
            if self.end_reason is Ending.CANCELLED:
                return []
            raise
        out = self._stamp(parsed, now)
        if limit_error is not None:
            self._parser_closed = True
            self.mid_event = True  # the oversized line belongs to an event that never completed
            self.pending = self.fail(
                EventTooLarge,
                f"{limit_error.limit}={limit_error.value} exceeded at stream "
                f"byte offset {limit_error.offset}, {self.where()}: the connection was closed",
                now,
                cause=limit_error,
            )
        else:
            self._check_idle(out, now)
        return out

    def _stamp(self, parsed: list[SSEEvent], now: float) -> list[TimedEvent]:
        elapsed = self.elapsed(now)
        out = [TimedEvent(ev, now, elapsed) for ev in parsed]
        if out:
            self.events_received += len(out)
            if self.first_event_at is None:
                self.first_event_at = now
            self.last_event_at = now
            if self._events is not None:
                self._events.extend(out)
        return out

    def _check_idle(self, out: list[TimedEvent], now: float) -> None:
        if self.last_content_at is None:
            self.last_content_at = self.headers_at or now
        if any(self.is_content is None or self.is_content(t.event) for t in out):
            self.last_content_at = now
        elif self.idle_timeout is not None and now - self.last_content_at > self.idle_timeout:
            self.pending = self.fail(
                IdleTimeout,
                f"no content event for {now - self.last_content_at:.3f} s "
                f"(idle_timeout={self.idle_timeout:g} s) although bytes kept arriving",
                now,
            )

    # -- endings -------------------------------------------------------------------------------------

    def fail(
        self, cls: type[StreamEndError], message: str, now: float, *, cause: BaseException | None = None
    ) -> StreamEndError:
        """End the stream abnormally: build the `cls` error with what was received, record and return it."""
        counts: _Counts = {
            "events_received": self.events_received,
            "bytes_received": self.bytes_received,
            "mid_event": self.mid_event,
            "elapsed": self.elapsed(now),
        }
        if cls is EventTooLarge:
            exc: StreamEndError = EventTooLarge(
                message, limit_error=cause if isinstance(cause, SSELimitError) else None, **counts
            )
        else:
            exc = cls(message, **counts)
        if cause is not None:
            exc.__cause__ = cause
        self.end_reason = cls.ending
        self.error = exc
        return exc

    def record_error(self, exc: _E) -> _E:
        """End the stream with an error built elsewhere (a `BadStatus` needs the response)."""
        self.end_reason = exc.ending
        self.error = exc
        return exc

    def deadline_passed(self, now: float) -> bool:
        return self.deadline is not None and self.elapsed(now) >= self.deadline

    def deadline_error(self, now: float, *, before_response: bool = False) -> StreamEndError:
        """End the stream as DEADLINE (the parser is told the stream ended)."""
        if not before_response:
            self.close_parser()
        where = "before the response" if before_response else self.where()
        return self.fail(DeadlineExceeded, f"deadline of {self.deadline:g} s exceeded {where}", now)

    def close_parser(self) -> None:
        """Tell the parser the stream ended (once); remember whether it stopped inside an event."""
        if not self._parser_closed:
            self._parser_closed = True
            self.mid_event = self.parser.close()

    def finish_clean(self, now: float) -> None:
        """The body ended with its proper terminator: COMPLETE, unless it stopped inside an event."""
        self.close_parser()
        if self.mid_event:
            raise self.fail(
                IncompleteEvent,
                "the body ended inside an unfinished event after "
                f"{self.events_received} complete event(s); the unfinished event was discarded",
                now,
            )
        self.end_reason = Ending.COMPLETE

    def cancel(self) -> None:
        """The reader stopped early: CANCELLED, unless the stream had already ended."""
        if self.end_reason is None:
            self.end_reason = Ending.CANCELLED
            self.close_parser()
