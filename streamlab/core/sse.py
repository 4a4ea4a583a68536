"""A sans-IO Server-Sent Events parser: bytes in, events out.

It implements "Interpreting an event stream" (WHATWG HTML Living Standard, 9.2.6) rule for rule, and
gives the same events however the network cuts the bytes: inside a UTF-8 character, between the CR and
the LF of a CRLF, inside the byte-order mark, or into empty chunks.

Three design decisions carry almost all of the weight:

1. Work on bytes. Lines are cut at CR and LF. Every byte of a multi-byte UTF-8 character is 0x80 or above,
   so a complete line always holds whole characters and decodes by itself: no incremental decoder needed.
2. Remember a CR that ends a chunk: an LF at the start of the next chunk belongs to the same terminator.
3. Never rescan. Each byte is looked at a constant number of times, so the cost is linear in the bytes fed
   whatever the chunk size and line length; an unfinished line is kept as a list of pieces, not a growing
   buffer that is searched again on every feed.

The parser does no I/O, keeps no clock and starts no thread: the HTTP client, the stand-in server, the
relay and the conformance checker all wrap this one class.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SSELimitError

__all__ = ["SSEEvent", "SSEParser", "SSELimitError", "parse", "DEFAULT_MAX_LINE_BYTES", "DEFAULT_MAX_EVENT_BYTES"]

BOM = b"\xef\xbb\xbf"
DEFAULT_MAX_LINE_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_EVENT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event, as an EventSource would hand it to a listener."""

    event: str = "message"
    """The `event:` field of the block, or "message" when it had none."""
    data: str = ""
    """The block's `data:` values joined by "\\n" (no trailing newline)."""
    last_event_id: str = ""
    """The stream's last event ID when this event was dispatched; it persists across events."""


# The hot loop builds events with these instead of SSEEvent(...): the frozen dataclass __init__ goes
# through object.__setattr__ once per field and costs about twice as much. The result is the same
# frozen, equal, hashable event (tests/test_sse.py checks it).
_new = object.__new__
_set_event = SSEEvent.__dict__["event"].__set__
_set_data = SSEEvent.__dict__["data"].__set__
_set_id = SSEEvent.__dict__["last_event_id"].__set__


class SSEParser:
    """Incremental SSE parser.

    Call `feed(chunk)` with each network chunk as it arrives; it returns the events that became
    complete. Call `close()` when the connection ends. `retry_ms` holds the last valid `retry:` value
    and `last_event_id` the stream's last event ID string (what a client sends as `Last-Event-ID`
    when it reconnects).
    """

    def __init__(
        self,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        last_event_id: str = "",
    ) -> None:
        """`last_event_id` starts the stream with a known last event ID: on a reconnect the standard keeps
        the ID across connections, and the server resumes after it (the client sent it as Last-Event-ID)."""
        if max_line_bytes < 1 or max_event_bytes < 1:
            raise ValueError("max_line_bytes and max_event_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self.max_event_bytes = max_event_bytes
        self.retry_ms: int | None = None
        if "\x00" in last_event_id:
            raise ValueError("last_event_id must not contain NUL (the standard ignores such ids)")
        self.last_event_id: str = last_event_id
        self._id_buffer = last_event_id  # the standard's "last event ID buffer"; committed at dispatch
        self._event_type = ""
        self._data: list[bytes] = []
        self._data_len = 0
        self._in_block = False  # a field line was seen since the last blank line
        self._tail: list[bytes] = []  # pieces of the unfinished last line (contain no CR or LF)
        self._tail_len = 0
        self._head = b""  # bytes held back at the very start while they may still be a BOM
        self._started = False
        self._pending_cr = False  # the previous chunk ended in CR; a leading LF is the same terminator
        self._fed = 0  # bytes fed so far, for error offsets
        self._error: SSELimitError | None = None
        self._closed = False
        self._ready = False  # True once nothing special is pending: feed() takes its short path

    # -- public API ----------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Add the next bytes of the stream; return the events they completed (possibly none)."""
        start = self._fed  # stream offset of chunk[0]
        if self._ready:
            self._fed = start + len(chunk)
        else:  # the first bytes (BOM), a CR left at the end of the last chunk, or a closed/failed parser
            chunk, start = self._prepare(chunk)
            if not chunk:
                return []
        raw = chunk
        if b"\r" in chunk:
            if chunk[-1] == 0x0D:  # an LF at the start of the next chunk completes this CRLF
                self._pending_cr = True
                self._ready = False
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        rest = lines.pop()
        if not lines:  # no line ended in this chunk
            if not rest:
                return []
            self._tail.append(rest)
            self._tail_len += len(rest)
            if self._tail_len > self.max_line_bytes:
                self._fail("max_line_bytes", self._fed - self._tail_len, [])
            return []
        longest_possible = self._tail_len + len(chunk)
        if self._tail:
            lines[0] = b"".join(self._tail) + lines[0]
            self._tail = [rest] if rest else []
        elif rest:
            self._tail = [rest]
        self._tail_len = len(rest)
        if longest_possible > self.max_line_bytes:  # rare: only then look for an over-long line
            for i, line in enumerate(lines):
                if len(line) > self.max_line_bytes:
                    events = self._lines(lines[:i], raw, start)  # keep what came before it
                    self._fail("max_line_bytes", self._line_offset(lines, i, raw, start), events)
        events = self._lines(lines, raw, start)
        if self._tail_len > self.max_line_bytes:
            self._fail("max_line_bytes", self._fed - self._tail_len, events)
        return events

    def _prepare(self, chunk: bytes) -> tuple[bytes, int]:
        """The slow start of `feed`: returns the bytes left to parse and their stream offset."""
        if self._error is not None:
            raise SSELimitError(self._error.limit, self._error.value, self._error.offset, [])
        if self._closed:
            raise RuntimeError("SSEParser.feed() called after close()")
        start = self._fed
        self._fed += len(chunk)
        if not self._started:
            chunk = self._head + bytes(chunk)
            start -= len(self._head)
            if len(chunk) < 3 and BOM.startswith(chunk):
                self._head = chunk
                return b"", start
            self._head = b""
            self._started = True
            if chunk.startswith(BOM):
                chunk = chunk[3:]
                start += 3
        if self._pending_cr and chunk:
            self._pending_cr = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
                start += 1
        self._ready = self._started and not self._pending_cr
        return chunk, start

    def close(self) -> bool:
        """End of stream. Returns True when it stopped inside an unfinished line or event.

        The unfinished event is discarded, as the standard requires ("the incomplete event is not
        dispatched"); `last_event_id` keeps the value of the last dispatched block.
        """
        truncated = bool(self._tail) or bool(self._head) or self._in_block
        self._tail, self._tail_len, self._head = [], 0, b""
        self._reset_block()
        self._closed = True
        self._ready = False
        return truncated

    @property
    def bytes_fed(self) -> int:
        """How many bytes have been fed so far."""
        return self._fed

    # -- internals -----------------------------------------------------------------------------

    def _reset_block(self) -> None:
        self._data = []
        self._data_len = 0
        self._event_type = ""
        self._in_block = False

    def _lines(self, lines: list[bytes], raw: bytes, start: int) -> list[SSEEvent]:
        """Interpret complete lines (terminators already removed): the rules of the standard, line by line.

        This is the hot loop, so the per-block state lives in locals and is written back once at the end
        (and before raising a limit error).
        """
        out: list[SSEEvent] = []
        push = out.append
        data = self._data
        data_len = self._data_len
        in_block = self._in_block
        event_type = self._event_type
        id_buffer = self._id_buffer
        last_id = self.last_event_id
        max_event = self.max_event_bytes + 1  # data_len counts a "\n" after every data line, the last included
        new, set_event, set_data, set_id, cls = _new, _set_event, _set_data, _set_id, SSEEvent
        for i, line in enumerate(lines):
            if not line:  # blank line: dispatch (or just end the block), commit the id, reset the type
                last_id = id_buffer
                if data:
                    ev = new(cls)  # an SSEEvent, built without the slow frozen __init__ (see _new above)
                    set_event(ev, event_type or "message")
                    set_data(ev, (data[0] if len(data) == 1 else b"\n".join(data)).decode("utf-8", "replace"))
                    set_id(ev, last_id)
                    push(ev)
                    data = []
                    data_len = 0
                event_type = ""
                in_block = False
                continue
            if line[:6] == b"data: ":  # the common case first; "data:" without the space is handled below
                value = line[6:]
                data.append(value)
                in_block = True
                data_len += len(value) + 1
                if data_len > max_event:
                    self.last_event_id = last_id  # keep the id of the last event delivered
                    self._fail("max_event_bytes", self._line_offset(lines, i, raw, start), out)
                continue
            if line[0] == 0x3A:  # ":" starts a comment
                continue
            in_block = True
            name, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if name == b"event":
                event_type = value.decode("utf-8", "replace")
            elif name == b"data":  # "data:value" without the space, or "data" alone: an empty value
                data.append(value)
                data_len += len(value) + 1
                if data_len > max_event:
                    self.last_event_id = last_id
                    self._fail("max_event_bytes", self._line_offset(lines, i, raw, start), out)
            elif name == b"id":
                if b"\x00" not in value:
                    id_buffer = value.decode("utf-8", "replace")
            elif name == b"retry":
                if value and value.isdigit():  # bytes.isdigit() accepts ASCII 0-9 only
                    self.retry_ms = int(value)
            # every other field name (including "Data", "ID", ...) is ignored
        self._data = data
        self._data_len = data_len
        self._in_block = in_block
        self._event_type = event_type
        self._id_buffer = id_buffer
        self.last_event_id = last_id
        return out

    def _fail(self, limit: str, offset: int, events: list[SSEEvent]) -> None:
        value = self.max_line_bytes if limit == "max_line_bytes" else self.max_event_bytes
        self._error = SSELimitError(limit, value, offset, events)
        self._ready = False
        self._tail, self._tail_len = [], 0
        self._reset_block()
        raise self._error

    def _line_offset(self, lines: list[bytes], i: int, raw: bytes, start: int) -> int:
        """Stream offset where lines[i] starts (error path only; lines[0] may begin in earlier chunks)."""
        if i == 0:
            first_in_raw = len(raw.split(b"\n", 1)[0].split(b"\r", 1)[0])
            return start - (len(lines[0]) - first_in_raw)
        pos = 0
        for _ in range(i):  # step over i terminators in the raw bytes
            lf, cr = raw.find(b"\n", pos), raw.find(b"\r", pos)
            if cr != -1 and (lf == -1 or cr < lf):
                pos = cr + (2 if raw[cr + 1 : cr + 2] == b"\n" else 1)
            else:
                pos = lf + 1
        return start + pos


def parse(data: bytes) -> tuple[list[SSEEvent], bool]:
    """Parse a whole byte string; return (events, truncated). Handy in notebooks and tests."""
    parser = SSEParser()
    events = parser.feed(data)
    return events, parser.close()
