"""Text grown from pieces and event JSON read safely: what both accumulators share (sans-IO core).

Two things go wrong when an answer is rebuilt from thousands of deltas, and this module holds the cure for each:

* Growing a string with `s = s + piece` copies the whole string on every delta (quadratic: 200,000 deltas
  took 10-36 s). Here text is kept as a list of pieces and joined when read; the list then keeps just the
  joined string, so reading again costs nothing (`joined`, `add_piece`, and `GrownText` for a dataclass field).
* `json.loads` fails in more ways than `JSONDecodeError` (too many digits, too deep: `streamlab.core.safejson`
  turns each into a problem description), and `EventReader` turns that, or a field of the wrong type, into
  the documented `FrameError`, so no other exception escapes an accumulator whatever the JSON.

And one thing makes them fast: a stream's chunks are nearly all the same JSON text but for one string (a Chat
chunk's `delta.content`). `OneHole` is that text learned from one chunk, with a hole where the string goes;
a chunk that matches it is read by comparing its two ends and scanning the one string, without decoding the
whole object, and reads as exactly what `json.loads` would give (`learn_hole` proves the hole first).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]  # public at run time; typeshed omits it
from typing import Any

from streamlab.core.errors import FrameError, ToolCallError
from streamlab.core.safejson import json_problem, loads
from streamlab.core.sse import SSEEvent

__all__ = [
    "joined",
    "add_piece",
    "GrownText",
    "short",
    "parse_arguments",
    "EventReader",
    "OneHole",
    "learn_hole",
    "LearnedShape",
]


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


def parse_arguments(arguments: str, what: str) -> dict[str, Any]:
    """A tool call's arguments as a dict, or ToolCallError saying why they cannot be (`what` names the call)."""
    value, problem = loads(arguments, "not valid JSON")
    if problem is not None:
        raise ToolCallError(f"{what}: arguments are {problem}: {short(arguments, 60)}")
    if not isinstance(value, dict):
        raise ToolCallError(f"{what}: arguments must be a JSON object, got {type(value).__name__}: {short(arguments)}")
    return value


class OneHole:
    """A JSON text with a hole for one string value: `read(text)` is that string when `text` is the learned text
    with another string token in the hole, else None.

    Why this is exact: the JSON grammar does not look inside a string token, so when `prefix` ends and `suffix`
    starts at token boundaries, `prefix + S + suffix` for any string token `S` decodes to the learned object
    with the value at the hole replaced by the string `S` encodes. `learn_hole` checks those boundaries by
    decoding the text with a sentinel in the hole; `read` checks the two ends and that what lies between them
    is one whole string token (the C scanner `json.loads` uses, strict as it is). `hits` counts the reads.
    """

    __slots__ = ("prefix", "suffix", "hits", "_start", "_tail")

    def __init__(self, prefix: str, suffix: str) -> None:
        self.prefix = prefix
        self.suffix = suffix
        self.hits = 0
        self._start = len(prefix)
        self._tail = len(suffix)

    def read(self, text: str) -> str | None:
        """The string in the hole of `text`, or None when `text` does not have this shape."""
        if not (text.startswith(self.prefix) and text.endswith(self.suffix)):
            return None
        start = self._start
        if text[start : start + 1] != '"':
            return None
        try:
            value, end = scanstring(text, start + 1)
        except ValueError:  # not one valid string token (a control character, a bad escape, no closing quote)
            return None
        if end != len(text) - self._tail:
            return None
        self.hits += 1
        return value


_SENTINEL = "\x00hole\x00"
_SENTINEL_TOKEN = json.dumps(_SENTINEL)


def _at(obj: Any, path: Sequence[str | int]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def learn_hole(text: str, obj: Any, path: Sequence[str | int]) -> OneHole | None:
    """The `OneHole` of `text` (which decodes to `obj`) at `path` (keys and indices down to a string value whose
    last step is a key), or None when no token in `text` provably is that value. A candidate is the string after
    `"KEY":`; it is accepted only if `text` with a sentinel string in its place decodes to `obj` with the sentinel
    at `path` and nothing else changed."""
    value = _at(obj, path)
    key = re.escape(json.dumps(path[-1]))
    for match in re.finditer(key + r"[ \t\n\r]*:[ \t\n\r]*\"", text):
        start = match.end() - 1
        try:
            found, end = scanstring(text, start + 1)
        except ValueError:
            continue
        if found != value:
            continue
        prefix, suffix = text[:start], text[end:]
        try:
            probe = json.loads(prefix + _SENTINEL_TOKEN + suffix)
            if _at(probe, path) != _SENTINEL:
                continue
            _at(probe, path[:-1])[path[-1]] = value
        except (ValueError, RecursionError, LookupError, TypeError):
            continue
        if probe == obj:
            return OneHole(prefix, suffix)
    return None


class LearnedShape:
    """The shape of a stream's latest chunks: a `OneHole` (`hole`, None until one is learned) and the `key` its
    text goes to. `learn` is told of each chunk that was read the slow way although it could have had a
    shape: the shape changed, so it is learned again; a stream whose shapes keep changing (a field that differs
    in every chunk) is tried less and less often, so learning never costs more than a fraction of the reads."""

    __slots__ = ("hole", "key", "_wait", "_backoff")

    def __init__(self) -> None:
        self.hole: OneHole | None = None
        self.key: Any = None
        self._wait = 0  # chunks to let pass before learning again
        self._backoff = 1

    def learn(self, text: str, obj: Any, path: Sequence[str | int], key: Any) -> None:
        """Learn the shape of `text` (which decodes to `obj`) with its hole at `path`, for text that goes to `key`."""
        old, self.hole = self.hole, None
        if old is not None and old.hits >= 4:  # it served, then the shape changed: learn the new one now
            self._wait, self._backoff = 0, 1
        elif old is not None:
            self._later()
        if self._wait:
            self._wait -= 1
            return
        self.hole, self.key = learn_hole(text, obj, path), key
        if self.hole is None:
            self._later()

    def _later(self) -> None:
        self._backoff = min(self._backoff * 2, 1024)
        self._wait = self._backoff


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
        raise FrameError(
            f"{what.format(*where)} must be {typ.__name__} or null, got {type(value).__name__}", event, self.events
        )
