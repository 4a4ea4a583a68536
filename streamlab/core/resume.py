"""The resume cursor: which events of a resumable stream are new, and where to resume after (sans-IO core).

Every Responses event carries a `sequence_number` counting up from 0. `SequenceCursor` keeps the number of
the last event that was handled, so that after a dropped connection the rest can be asked for with
`starting_after=<cursor>`: nothing is replayed and nothing is skipped. Keep-alive events (JSON `type`
"keepalive", or anything without a `sequence_number`) never move the cursor. A number that goes backwards
(a replay) or jumps forward (a skip) raises `SequenceError`, because either one silently corrupts the text
the user sees.

Also here, because the cursor and the reconnecting streams both need them: `is_keepalive` (a payload that
must not move a cursor), `is_content_event` (the content test for the client's `idle_timeout`: keep-alive
events are not content) and `RESPONSES_TERMINAL_TYPES` (event types after which no reconnect follows).
The streams that reconnect with this cursor live in `streamlab.net.resume`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamlab.core.errors import SequenceError
from streamlab.core.shapes import RESPONSES_TERMINALS
from streamlab.core.sse import SSEEvent

__all__ = [
    "SequenceCursor",
    "is_keepalive",
    "is_content_event",
    "is_terminal_event",
    "RESPONSES_TERMINAL_TYPES",
]

RESPONSES_TERMINAL_TYPES = frozenset(RESPONSES_TERMINALS) | {"error"}
"""Event types after which a Responses stream is over: the documented terminal events (`shapes`), and `error`."""


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
        if keepalive and got < expected:
            return False  # a keep-alive sent again after a reconnect: nothing was lost
        if got != expected:
            kind = "replayed" if got < expected else "skipped"
            raise SequenceError(kind, expected=expected, got=got, event_type=str(payload.get("type", "?")))
        self.seen = got
        if keepalive:
            return False
        self.value = got
        return True

    def admit_data(self, data: str) -> tuple[bool, dict[str, Any] | None]:
        """`admit` for an event's raw `data` text; non-JSON data is treated as a keep-alive (not counted)."""
        try:
            payload = json.loads(data)
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
        payload = json.loads(event.data)
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
        payload = json.loads(event.data)
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("type") in RESPONSES_TERMINAL_TYPES
