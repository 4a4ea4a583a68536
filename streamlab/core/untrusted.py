"""Text a client chose, made safe to print or log: escaped, capped, one line (sans-IO core).

A model name, a path, an API key or an error message comes from whoever sent the request. Printed as it is,
it can stop a server or take over the terminal of the person running it:

* a lone surrogate (`{"model": "\\ud800"}` is valid JSON) cannot be encoded at all, and `模型` cannot be
  encoded where stdout is not UTF-8: the print raises `UnicodeEncodeError`;
* an escape sequence clears the screen, retitles the window or writes the clipboard (OSC 52);
* a newline forges a second line, and U+2028, U+2029 or U+0085 split a JSON log line for every reader that
  splits on Unicode line boundaries (`str.splitlines`, JavaScript).

So nothing a client sent reaches a terminal or a log line through anything but these functions:

* `printable(text)` for text lines: every character `str.isprintable` rejects (controls, C1 controls such
  as CSI, format characters such as bidi overrides, separators, surrogates, unassigned code points) and the
  backslash become Python-style escapes (`\\x1b`, `\\u2028`, `\\ud800`); `limit` caps the length.
* `json_text(obj)` for JSON lines: the same characters as JSON `\\uXXXX` escapes, so the line stays valid JSON,
  has no line break of any kind, and can always be encoded as UTF-8; printable non-ASCII stays readable.
* `ascii_json(line)`: a JSON text with every non-ASCII character escaped, for a stream that is not UTF-8.
* `terminal_text(text)` for a report of many lines that quotes what a server sent (`streamlab check`,
  `check-relay`): the same characters escaped, except that its line breaks (`\n`) and tabs stay, and its
  backslashes too (a report's own `\n` stays readable as two characters).
* `clip(text, limit)`: a string field capped before it is stored (a 5 MiB model name is kept as its first
  `limit` characters and the count of the rest).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["printable", "terminal_text", "json_text", "ascii_json", "clip", "MAX_FIELD_CHARS"]

MAX_FIELD_CHARS = 256
"""How many characters of a client-chosen string (a model name, a key) a record or a printed line keeps."""

_SUSPECT = re.compile(r"[^\x20-\x5b\x5d-\x7e]")  # anything but printable ASCII, and the backslash
_JSON_SUSPECT = re.compile(r"[^\x00-\x7e]")  # json.dumps already escapes the C0 controls, quote and backslash
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_TERMINAL_SUSPECT = re.compile(r"[^\t\n\x20-\x7e]")  # printable ASCII, tabs and line breaks pass


def _escape(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    if ch.isprintable():
        return ch
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def terminal_text(text: object) -> str:
    """`text` with everything a terminal could act on escaped as `printable` does (escape sequences, C1
    controls, carriage returns, Unicode line separators, bidi overrides, surrogates), but its `\n` line breaks,
    tabs and backslashes kept: a multi-line report that quotes a server's bytes prints as it reads, and only
    as it reads. Printable non-ASCII stays; no length cap (the report's own limits apply)."""
    return _TERMINAL_SUSPECT.sub(lambda m: m.group() if m.group().isprintable() else _escape(m.group()), str(text))


def printable(text: object, *, limit: int | None = MAX_FIELD_CHARS, spaces: bool = True) -> str:
    """`text` (made a `str`) with everything a terminal could act on escaped, at most `limit` characters of it
    (None: no cap) with `...(+N)` saying how many were left out. `spaces=False` escapes spaces too (`\\x20`),
    so a field of a space-separated line stays one field."""
    text = str(text)
    cut = 0
    if limit is not None and len(text) > limit:
        text, cut = text[:limit], len(text) - limit
    out = _SUSPECT.sub(lambda m: _escape(m.group()), text)
    if not spaces:
        out = out.replace(" ", "\\x20")
    return out + (f"...(+{cut})" if cut else "")


def _json_escape(ch: str) -> str:
    if ch.isprintable() and ch != "\x7f":
        return ch
    n = ord(ch)
    if n < 0x10000:
        return f"\\u{n:04x}"
    n -= 0x10000
    return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"


def json_text(obj: Any, *, separators: tuple[str, str] = (", ", ": ")) -> str:
    """`obj` as one line of JSON that a terminal cannot act on and no reader splits: what `json.dumps` leaves
    unescaped and `str.isprintable` rejects (C1 controls, U+2028, U+0085, lone surrogates...) is escaped too."""
    return _JSON_SUSPECT.sub(
        lambda m: _json_escape(m.group()), json.dumps(obj, ensure_ascii=False, separators=separators)
    )


def ascii_json(line: str) -> str:
    """A JSON text with every non-ASCII character as a `\\uXXXX` escape (the same value, in pure ASCII)."""
    return _NON_ASCII.sub(lambda m: json.dumps(m.group())[1:-1], line)


def clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """`text`, or its first `limit` characters and `...(+N)` when it is longer: a bound on what is kept."""
    return text if len(text) <= limit else f"{text[:limit]}...(+{len(text) - limit})"
