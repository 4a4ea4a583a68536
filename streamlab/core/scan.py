"""Locate every line, block and event of a raw SSE body, with byte offsets (sans-IO core).

The conformance checker must show *where* a stream goes wrong: the event number, the byte offset, the bytes
themselves. `SSEParser` gives events, not positions, so `scan(body)` cuts the body into blocks first (a block
is the lines up to and including a blank line, cut at CR, LF or CRLF exactly as the standard cuts them) and
feeds the parser one block at a time. Each feed completes at most one event, so every event the parser
dispatches is pinned to the block that carried it: the events are the parser's own (every rule of the
standard applies), and the positions come from the block they completed in.

Nothing here judges: `streamlab.core.conformance.grade` does. A parser limit (a line over `max_line_bytes`, say) stops
the scan where it struck and is recorded, with everything found before it kept.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from streamlab.core.errors import SSELimitError
from streamlab.core.safejson import json_or_none
from streamlab.core.sse import SSEEvent, SSEParser

__all__ = ["Line", "Block", "Scan", "scan", "quote", "KNOWN_FIELDS", "SCAN_MAX_LINE", "SCAN_MAX_EVENT"]

KNOWN_FIELDS = frozenset({"data", "event", "id", "retry"})
"""The field names the standard acts on; any other field line is ignored by every conforming parser."""

SCAN_MAX_LINE = 1024 * 1024
SCAN_MAX_EVENT = 4 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class Line:
    """One line: where it starts, its bytes without the terminator, and the terminator (b"" at the end of an
    unterminated body)."""

    offset: int
    text: bytes
    ending: bytes

    @property
    def is_comment(self) -> bool:
        return self.text.startswith(b":")

    @property
    def field(self) -> str:
        """The field name: the bytes before the first colon (the whole line when there is none)."""
        name = self.text.split(b":", 1)[0]
        return name.decode("utf-8", "replace")


@dataclass
class Block:
    """The lines from `start` up to `end` (the blank line included when `terminated`); `event` is what the
    parser dispatched at its blank line (None for a block of comments, or one with no data), `number` its
    1-based event number in the stream, and `obj` the event's data decoded as JSON (None when it is not)."""

    start: int
    end: int
    lines: list[Line]
    terminated: bool
    event: SSEEvent | None = None
    number: int | None = None
    obj: Any = None

    @property
    def comment_only(self) -> bool:
        return bool(self.lines) and all(line.is_comment for line in self.lines)

    @property
    def event_line(self) -> str | None:
        """The value of the block's last `event:` field line (what the parser used), if it has one."""
        value = None
        for line in self.lines:
            if not line.is_comment and line.field == "event":
                value = line.text[6:].decode("utf-8", "replace")
                value = value[1:] if value.startswith(" ") else value
        return value


@dataclass
class Scan:
    """A body cut into blocks: `endings` counts the line terminators used (b"\\n", b"\\r\\n", b"\\r"),
    `limit` is (offset, message) when a parser limit stopped the scan, `bom` whether the body began with one."""

    body: bytes
    blocks: list[Block] = field(default_factory=list)
    endings: Counter[bytes] = field(default_factory=Counter)
    limit: tuple[int, str] | None = None
    bom: bool = False

    @property
    def events(self) -> list[Block]:
        """The blocks that dispatched an event, in order."""
        return [b for b in self.blocks if b.event is not None]

    @property
    def tail(self) -> Block | None:
        """The unterminated last block (the body stopped inside it), if any."""
        return self.blocks[-1] if self.blocks and not self.blocks[-1].terminated else None

    def line_endings(self) -> str:
        """ "LF", "CRLF", "CR", "mixed (...)" or "none"."""
        names = {b"\n": "LF", b"\r\n": "CRLF", b"\r": "CR"}
        used = [names[e] for e, n in sorted(self.endings.items(), key=lambda kv: -kv[1]) if n]
        if not used:
            return "none"
        if len(used) == 1:
            return used[0]
        return "mixed (" + ", ".join(f"{names[e]} x{n}" for e, n in self.endings.most_common()) + ")"


def _split(body: bytes, start: int) -> tuple[list[Block], Counter[bytes]]:
    """Cut `body[start:]` into blocks at blank lines."""
    blocks: list[Block] = []
    endings: Counter[bytes] = Counter()
    lines: list[Line] = []
    block_start = line_start = start
    for m in _LINE_END.finditer(body, start):
        ending = m.group()
        endings[ending] += 1
        if m.start() == line_start:  # an empty line ends the block
            blocks.append(Block(block_start, m.end(), lines, True))
            lines, block_start = [], m.end()
        else:
            lines.append(Line(line_start, body[line_start : m.start()], ending))
        line_start = m.end()
    if line_start < len(body):
        lines.append(Line(line_start, body[line_start:], b""))
    if lines:
        blocks.append(Block(block_start, len(body), lines, False))
    return blocks, endings


def _decode(data: str) -> Any:
    return json_or_none(data)


def scan(body: bytes, *, max_line_bytes: int = SCAN_MAX_LINE, max_event_bytes: int = SCAN_MAX_EVENT) -> Scan:
    """Cut `body` into blocks and pin each event the parser dispatches to its block."""
    bom = body.startswith(_BOM)
    blocks, endings = _split(body, 3 if bom else 0)
    result = Scan(body, blocks, endings, None, bom)
    parser = SSEParser(max_line_bytes=max_line_bytes, max_event_bytes=max_event_bytes)
    number = 0
    for i, block in enumerate(blocks):
        begin = 0 if i == 0 else block.start  # the first feed carries the BOM, which the parser strips
        try:
            events = parser.feed(body[begin : block.end])
        except SSELimitError as exc:
            result.limit = (exc.offset, str(exc))
            del result.blocks[i:]
            return result
        if not block.terminated:
            parser.close()  # an unfinished event is discarded, as the standard says
            continue
        if events:
            number += 1
            block.event, block.number = events[-1], number
            block.obj = _decode(events[-1].data)
    return result


def quote(body: bytes, start: int, end: int, *, needle: bytes | None = None, width: int = 96) -> tuple[int, str]:
    """The bytes worth showing from `body[start:end]`: a window of about `width` bytes around the first
    `needle` in it (or its beginning), as a bytes literal, with the window's offset."""
    part = body[start:end]
    at = part.find(needle) if needle else -1
    lo = 0 if at < 0 else max(0, at - width // 3)
    hi = min(len(part), lo + width)
    shown = repr(part[lo:hi])
    return start + lo, ("..." if lo else "") + shown + ("..." if hi < len(part) else "")
