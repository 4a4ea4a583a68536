"""How a stream ended: one vocabulary for the whole library (sans-IO core).

A stream's ending is told from two sides. The client sees the transport (a clean end of body, a reset, a
timeout); the stand-in's records see the server's side (it played everything, it cut on purpose, the client
went away); the accumulators see the content (a terminal event, a `finish_reason`, an error object). Before
this module each side had its own strings. Now every layer names an ending with one `Ending` member, and
the five *outcomes* a user cares about (`Outcome`) are derived from it by one table, `OUTCOME_OF`.

    ending (transport or server)          outcome (what the user got)
    ----------------------------          ---------------------------
    COMPLETE                         ->   decided by the content: complete, incomplete, failed or truncated
    CANCELLED, CLIENT_GONE           ->   cancelled
    HTTP_ERROR, NOT_EVENT_STREAM,
    CONNECT_ERROR, INVALID_REQUEST   ->   failed (no stream ever started)
    BROKEN, CUT, STOPPED, READ_TIMEOUT,
    IDLE_TIMEOUT, DEADLINE,
    INCOMPLETE_EVENT, LIMIT_EXCEEDED ->   truncated (a stream started and did not reach its end)
    IN_PROGRESS                      ->   no outcome yet

`Ending` and `Outcome` are `str` enums, so `Ending.COMPLETE == "complete"` and they print as their value.
"""

from __future__ import annotations

from streamlab.core.words import Word

__all__ = ["Ending", "Outcome", "OUTCOME_OF", "outcome_of", "TRANSPORT_FAILURES"]


class Outcome(Word):
    """The five ways a stream ends, as a user sees it (see `streamlab.core.accumulate` for each rule)."""

    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    TRUNCATED = "truncated"
    CANCELLED = "cancelled"


class Ending(Word):
    """How a stream's bytes stopped, named once for the client, the stand-in, retry, resume and relay."""

    IN_PROGRESS = "in_progress"  # server side: still being written
    COMPLETE = "complete"  # the body ended cleanly, on an event boundary
    CANCELLED = "cancelled"  # the reader closed early (client), or a cancel request (server)
    CLIENT_GONE = "client_gone"  # server side: the client closed or reset the connection
    HTTP_ERROR = "http_error"  # a non-2xx status before any stream
    NOT_EVENT_STREAM = "not_event_stream"  # a 2xx that is not text/event-stream
    CONNECT_ERROR = "connect_error"  # no response at all
    INVALID_REQUEST = "invalid_request"  # the request could not be sent as built
    BROKEN = "broken"  # the connection died after the response started
    CUT = "cut"  # server side: a scripted cut
    STOPPED = "stopped"  # server side: the server shut down mid-stream
    READ_TIMEOUT = "read_timeout"  # no byte for the read timeout
    IDLE_TIMEOUT = "idle_timeout"  # bytes (keep-alives) but no content event for the idle timeout
    DEADLINE = "deadline"  # the whole request outlasted its deadline
    INCOMPLETE_EVENT = "incomplete_event"  # the body ended cleanly in the middle of an event
    LIMIT_EXCEEDED = "limit_exceeded"  # a line or event outgrew the parser's bounds

    @property
    def outcome(self) -> Outcome | None:
        """The outcome this ending implies on its own; None when the content decides (or nothing ended yet)."""
        return OUTCOME_OF[self]


OUTCOME_OF: dict[Ending, Outcome | None] = {
    Ending.IN_PROGRESS: None,
    Ending.COMPLETE: None,
    Ending.CANCELLED: Outcome.CANCELLED,
    Ending.CLIENT_GONE: Outcome.CANCELLED,
    Ending.HTTP_ERROR: Outcome.FAILED,
    Ending.NOT_EVENT_STREAM: Outcome.FAILED,
    Ending.CONNECT_ERROR: Outcome.FAILED,
    Ending.INVALID_REQUEST: Outcome.FAILED,
    Ending.BROKEN: Outcome.TRUNCATED,
    Ending.CUT: Outcome.TRUNCATED,
    Ending.STOPPED: Outcome.TRUNCATED,
    Ending.READ_TIMEOUT: Outcome.TRUNCATED,
    Ending.IDLE_TIMEOUT: Outcome.TRUNCATED,
    Ending.DEADLINE: Outcome.TRUNCATED,
    Ending.INCOMPLETE_EVENT: Outcome.TRUNCATED,
    Ending.LIMIT_EXCEEDED: Outcome.TRUNCATED,
}
"""Each ending's outcome when the content has no say (see the module docstring's table)."""

TRANSPORT_FAILURES = frozenset(e for e, o in OUTCOME_OF.items() if o is Outcome.TRUNCATED)
"""Endings where bytes stopped before the stream's proper end."""


def outcome_of(ending: Ending | str, content: Outcome | None = None) -> Outcome | None:
    """The user-visible outcome of a stream that ended with `ending`, given the accumulator's verdict.

    A clean end of body (`COMPLETE`) leaves the verdict to the content (`content`; a stream with no terminal
    marker is truncated, which the accumulator already says). Every other ending decides on its own.
    """
    ending = Ending(ending)
    if ending is Ending.COMPLETE:
        return content
    return OUTCOME_OF[ending]
