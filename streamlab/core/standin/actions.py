"""What the stand-in's planner tells its socket handler to do (sans-IO core: plain values, no I/O).

The planner (`streamlab.core.standin.plan`) decides; the handler (`streamlab.net.standin.server`) only does. Between
them travel the values here:

* `Reply`: one JSON response (status, headers, body), optionally after a pause during which the handler
  watches the socket so a client that hangs up is noticed at once.
* `Stream`: a 200 event stream: its headers and the actions to play on it, `Pause`, `Write` and `Close`,
  plus the key the handler asks about between actions to learn whether a cancel request stopped it.
* `Note`: what the request record learns from the decision (model, episode, resumed_after...).

A reply's ending follows from its status (`reply_ending`); a stream's from how its play stopped
(`stream_ending`). Both are `streamlab.core.endings.Ending` members, the one vocabulary of endings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamlab.core.endings import Ending

__all__ = [
    "Reply",
    "Pause",
    "Write",
    "Close",
    "Action",
    "Stream",
    "Note",
    "Decision",
    "reply_ending",
    "stream_ending",
    "EVENT_STREAM_HEADERS",
]

EVENT_STREAM_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Type", "text/event-stream; charset=utf-8"),
    ("Cache-Control", "no-cache"),
)
"""The headers every stream starts with (the handler adds the chunked transfer coding)."""


@dataclass(frozen=True)
class Reply:
    """One response: a JSON `body`, or bytes sent as they are: as text/plain (like a framework's plain-text
    error page), or under the Content-Type that `headers` name (as a replayed capture's). `wait` seconds pass
    first (watching the client). `close` ends the connection after it; `drain` first reads and drops whatever
    request bytes are still arriving, so that closing does not reset the connection under the reply."""

    status: int
    body: Any
    headers: tuple[tuple[str, str], ...] = ()
    wait: float = 0.0
    close: bool = False
    drain: bool = False


@dataclass(frozen=True)
class Pause:
    """Write nothing for `seconds` (None: until the client leaves or the server stops), watching the client."""

    seconds: float | None


@dataclass(frozen=True)
class Write:
    """Write `data` as one HTTP chunk. `frame` says it is a whole scripted step (counted in frames_written);
    the remainder of a step partly skipped on resume is written with `frame=False`."""

    data: bytes
    frame: bool = True


@dataclass(frozen=True)
class Close:
    """End the connection without the terminating chunk: FIN, or RST with `reset` (a scripted cut)."""

    reset: bool = False


Action = Pause | Write | Close


@dataclass(frozen=True)
class Stream:
    """A 200 event stream: `headers` after the standard ones, then `actions` in order.

    When every action has run (no `Close`), the body ends cleanly. `cancel_key` is `(learner, response id)`
    for a stream a cancel request can stop; the handler asks the planner about it before each action.
    `timeline`: each pause counts from the script's schedule, not from the write before it (`Episode.timeline`).
    """

    headers: tuple[tuple[str, str], ...]
    actions: tuple[Action, ...]
    cancel_key: tuple[str, str] | None = None
    timeline: bool = False


@dataclass(frozen=True)
class Note:
    """What the request's record learns from the decision. None leaves a field as it is."""

    learner: str | None = None
    json: Any = None
    model: str | None = None
    episode: int | None = None
    stream: bool | None = None
    resumed_after: str | None = None


@dataclass(frozen=True)
class Decision:
    """The planner's answer to one request: what to do, and what to record."""

    action: Reply | Stream
    note: Note = Note()


def reply_ending(status: int) -> Ending:
    """The ending recorded for a JSON reply: complete below 400, an HTTP error from 400 on."""
    return Ending.COMPLETE if status < 400 else Ending.HTTP_ERROR


def stream_ending(*, cut: bool, cancelled: bool, stopping: bool) -> Ending:
    """The ending recorded when a stream's play stops: the server stopping wins (it never ends a body
    cleanly on its way down), then a scripted cut, then a cancel request, else a clean end."""
    if stopping:
        return Ending.STOPPED
    if cut:
        return Ending.CUT
    return Ending.CANCELLED if cancelled else Ending.COMPLETE
