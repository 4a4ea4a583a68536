"""Text grown from pieces and event JSON read safely: what both accumulators share (sans-IO core).

Two things go wrong when an answer is rebuilt from thousands of deltas, and this module holds the cure for each:

* Growing a string with `s = s + piece` copies the whole string on every delta (quadratic: 200,000 deltas
  took 10-36 s). Here text is kept as a list of pieces and joined when read; the list then keeps just the
  joined string, so reading again costs nothing (`joined`, `add_piece`, and `GrownText` for a dataclass field).
* `json.loads` fails in more ways than `JSONDecodeError`: Python refuses integers of more than 4,300 digits
  (a plain `ValueError`) and nesting deeper than its recursion limit (`RecursionError`). `loads` turns every
  one of them into a problem description, and `EventReader` turns that, or a field of the wrong type, into
  the documented `FrameError`, so no other exception escapes an accumulator whatever the JSON.
"""

from __future__ import annotations

import json
from typing import Any

from streamlab.core.errors import FrameError, ToolCallError
from streamlab.core.sse import SSEEvent

__all__ = ["joined", "add_piece", "GrownText", "short", "loads", "json_problem", "parse_arguments", "EventReader"]


def joined(pieces: list[str]) -> str:
    """The pieces as one string; the list is left holding just that string, so the next read is free."""
    if len(pieces) != 1:
        pieces[:] = ["".join(pieces)]
    return pieces[0]


def add_piece(store: dict[Any, list[str]], key: Any, piece: str) -> None:
    """Append one piece to the text kept under `key` (linear: no string is copied)."""
    pieces = store.get(key)
    if pieces is None:
        store[key] = [piece]
    else:
        pieces.append(piece)


class GrownText:
    """A dataclass field holding text that grows piece by piece: stored as a list of pieces (`add` is linear),
    read as a plain string (joined once, then kept), and set like any field (the dataclass `__init__`,
    `repr` and `==` go through it, so they see the joined string)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}_pieces"

    def __get__(self, obj: Any, owner: type | None = None) -> str:
        return "" if obj is None else joined(obj.__dict__[self.slot])  # no instance: the dataclass default

    def __set__(self, obj: Any, value: str) -> None:
        obj.__dict__[self.slot] = [value]

    def add(self, obj: Any, piece: str) -> None:
        """Append `piece` to this field of `obj`."""
        obj.__dict__[self.slot].append(piece)


def short(text: str, width: int = 40) -> str:
    """`repr(text)`, cut to about `width` characters for an error message."""
    return repr(text) if len(text) <= width else repr(text[: width - 3] + "...")


def loads(text: str, malformed: str) -> tuple[Any, str | None]:
    """`json.loads`, with every way it can fail turned into a problem description (never an exception);
    `malformed` words the common one (text that is not JSON at all)."""
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        return None, json_problem(exc, malformed)


def json_problem(exc: ValueError | RecursionError, malformed: str) -> str:
    """What a failed `json.loads` means, in words (`malformed` for text that is not JSON at all)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{malformed} ({exc})"
    if isinstance(exc, RecursionError):
        return "JSON nested deeper than Python's recursion limit"
    return f"JSON that Python cannot read ({exc})"  # e.g. "Exceeds the limit (4300 digits) for integer ..."


def parse_arguments(arguments: str, what: str) -> dict[str, Any]:
    """A tool call's arguments as a dict, or ToolCallError saying why they cannot be (`what` names the call)."""
    value, problem = loads(arguments, "not valid JSON")
    if problem is not None:
        raise ToolCallError(f"{what}: arguments are {problem}: {short(arguments, 60)}")
    if not isinstance(value, dict):
        raise ToolCallError(f"{what}: arguments must be a JSON object, got {type(value).__name__}: {short(arguments)}")
    return value


class EventReader:
    """What both accumulators share: event counting, decoding an event's JSON, type checks, cancel()."""

    def __init__(self) -> None:
        self.events = 0  # events fed so far (numbering for error messages starts at 1)
        self.late_events = 0  # events fed after the stream had ended (terminal marker or error); ignored
        self.cancelled = False
        self.error: Any = None  # the error object, once the server reported one

    def cancel(self) -> None:
        """Tell the accumulator that the caller stopped reading (closed the stream on purpose)."""
        self.cancelled = True

    def _decode(self, event: SSEEvent) -> dict[str, Any]:
        try:
            obj = json.loads(event.data)
        except (ValueError, RecursionError) as exc:  # see json_problem: more than JSONDecodeError can happen
            raise FrameError(f"data is {json_problem(exc, 'not JSON')}", event, self.events) from None
        if not isinstance(obj, dict):
            raise FrameError(f"data is JSON but not an object (a {type(obj).__name__})", event, self.events)
        return obj

    def _typed(self, value: Any, typ: type, event: SSEEvent, what: str, *where: object) -> Any:
        """`value` when it is null or of type `typ`; else a FrameError naming `what.format(*where)` (formatted only
        then: this runs for every field of every event)."""
        if value is None or isinstance(value, typ):
            return value
        raise FrameError(f"{what.format(*where)} must be {typ.__name__} or null, got {type(value).__name__}",
                         event, self.events)
