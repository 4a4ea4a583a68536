"""The resume cursor: which events of a resumable stream are new, and where to resume after (sans-IO core).

Every Responses event carries a `sequence_number` counting up from 0. `SequenceCursor` keeps the number of
the last event that was handled, so that after a dropped connection the rest can be asked for with
`starting_after=<cursor>`: nothing is replayed and nothing is skipped. Keep-alive events (JSON `type`
"keepalive", or anything without a `sequence_number`) never move the cursor. A number that goes backwards
(a replay) or jumps forward (a skip) raises `SequenceError`, because either one silently corrupts the text
the user sees.

One rule for every reader of the numbers (`sequence_verdict`): the cursor, the accumulator
(`streamlab.core.accumulate`) and through them the relay and the gateway, and `streamlab check`'s grade. The API
reference says only that `sequence_number` is "the sequence number of this event", and resuming asks for the
events after one: a number names one event, in order. So a content event numbered at or below the last one seen
is a replay (or went backwards); a keep-alive carries no content, and one that repeats an earlier number (a
resumed stream sends it again; the live API numbers keep-alives like any other event) is a harmless repeat, never
an error (the accumulator's "strictly increasing", which rejected it, was an inference the reference does not
make). A gap means lost events only to a reader that sees every event: the cursor reads the connection itself,
while an accumulator may be fed a stream with its keep-alives taken out (`ResumableResponseStream` does), so only
the cursor asks for numbers that follow one another (`contiguous`).

Also here, because the cursor and the reconnecting streams both need them: `is_keepalive` (a payload that
must not move a cursor), `is_content_event` (the content test for the client's `idle_timeout`: keep-alive
events are not content) and `RESPONSES_TERMINAL_TYPES` (event types after which no reconnect follows).
The streams that reconnect with this cursor live in `streamlab.net.resume`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from streamlab.core.errors import SequenceError
from streamlab.core.safejson import read_json
from streamlab.core.shapes import RESPONSES_TERMINALS
from streamlab.core.sse import SSEEvent

__all__ = [
    "SequenceCursor",
    "sequence_verdict",
    "SequenceVerdict",
    "is_keepalive",
    "is_content_event",
    "is_terminal_event",
    "RESPONSES_TERMINAL_TYPES",
]

RESPONSES_TERMINAL_TYPES = frozenset(RESPONSES_TERMINALS) | {"error"}
"""Event types after which a Responses stream is over: the documented terminal events (`shapes`), and `error`."""


SequenceVerdict = Literal["new", "repeat", "replayed", "went backwards", "skipped"]
"""What one numbered event is to a reader: new, a keep-alive's harmless repeat, a replay (or one that went
backwards), or a skip (`sequence_verdict`)."""


def sequence_verdict(last: int | None, got: int, *, keepalive: bool, contiguous: bool = False) -> SequenceVerdict:
    """The one sequence-number rule (module docstring): what number `got` is after `last`, the highest number
    seen so far (None: none yet). `contiguous`: the reader sees every event, so the next number is `last + 1`.

    "new": a number above `last` (with `contiguous`, exactly `last + 1`); "repeat": a keep-alive at or below
    `last` (ignore it, not an error); "replayed": a content event numbered `last` (or, with `contiguous`, any
    number at or below it: each was handled); "went backwards": a content event below `last` that a reader
    which skips keep-alives cannot know it handled; "skipped": with `contiguous`, above `last + 1` (lost).
    """
    if last is None or got > last:
        return "skipped" if contiguous and last is not None and got > last + 1 else "new"
    if keepalive:
        return "repeat"
    return "replayed" if got == last or contiguous else "went backwards"


def is_keepalive(payload: Mapping[str, Any]) -> bool:
    """A keep-alive carries no content and must not move a cursor: JSON type "keepalive" or no number."""
    return payload.get("type") == "keepalive" or not isinstance(payload.get("sequence_number"), int)


@dataclass
class SequenceCursor:
    """The last handled `sequence_number` of a Responses stream (None: nothing handled yet).

    `admit(payload)` says whether an event is new content to handle (True, and the cursor moves to its
    number), a keep-alive to skip over (False, the cursor stays), or a replay / skip (`SequenceError`).
    A fresh cursor expects 0 next: the stream starts with `response.created` at number 0.

    Keep-alives never move the cursor, the number to resume after (`value`). The live API numbers them
    all the same (`{"type": "keepalive", "sequence_number": 466}`), so the cursor also remembers the
    highest number it has seen (`seen`): the next event must follow that one. A resumed stream may send
    such a keep-alive again; one numbered below what is expected is a harmless repeat and is ignored.
    """

    value: int | None = None
    seen: int | None = None

    @property
    def expected(self) -> int:
        """The sequence number that must come next."""
        last = max((n for n in (self.value, self.seen) if n is not None), default=None)
        return 0 if last is None else last + 1

    def admit(self, payload: Mapping[str, Any]) -> bool:
        """Check one event's JSON payload against the cursor and advance it. See the class docstring."""
        got = payload.get("sequence_number")
        if not isinstance(got, int):
            return False  # nothing to check and nothing to move (an unnumbered keep-alive, say)
        expected = self.expected
        keepalive = payload.get("type") == "keepalive"
        verdict = sequence_verdict(expected - 1, got, keepalive=keepalive, contiguous=True)  # -1: expect 0 first
        if verdict == "repeat":
            return False  # a keep-alive sent again after a reconnect: nothing was lost
        if verdict != "new":
            raise SequenceError(verdict, expected=expected, got=got, event_type=str(payload.get("type", "?")))
        self.seen = got
        if keepalive:
            return False
        self.value = got
        return True

    def admit_data(self, data: str) -> tuple[bool, dict[str, Any] | None]:
        """`admit` for an event's raw `data` text; non-JSON data is treated as a keep-alive (not counted)."""
        try:
            payload = read_json(data)
        except ValueError:
            return False, None
        if not isinstance(payload, dict):
            return False, None
        return self.admit(payload), payload


def is_content_event(event: SSEEvent) -> bool:
    """For the client's `idle_timeout`: an event is content unless it is a Responses keep-alive.

    SSE comments (`: ping`) never become events at all, so a stream that only sends those looks idle too.
    """
    if event.event == "keepalive":
        return False
    if '"keepalive"' not in event.data:  # cheap test first: most events are not keep-alives
        return True
    try:
        payload = read_json(event.data)
    except ValueError:
        return True
    return not (isinstance(payload, dict) and payload.get("type") == "keepalive")


def is_terminal_event(event: SSEEvent) -> bool:
    """A Chat `[DONE]`, or a Responses terminal event (by SSE event type or by JSON `type`)."""
    if event.data == "[DONE]":
        return True
    if event.event in RESPONSES_TERMINAL_TYPES:
        return True
    try:
        payload = read_json(event.data)
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("type") in RESPONSES_TERMINAL_TYPES
