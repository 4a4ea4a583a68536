"""A sans-IO Server-Sent Events parser (core layer): bytes in, events out.

It implements "Interpreting an event stream" (WHATWG HTML Living Standard, 9.2.6) rule for rule, and
gives the same events however the network cuts the bytes: inside a UTF-8 character, between the CR and
the LF of a CRLF, inside the byte-order mark, or into empty chunks.

Three design decisions carry almost all of the weight:

1. Work on bytes. Lines are cut at CR and LF. Every byte of a multi-byte UTF-8 character is 0x80 or above,
   so a complete line always holds whole characters and decodes by itself: no incremental decoder needed.
2. Remember a CR that ends a chunk: an LF at the start of the next chunk belongs to the same terminator.
3. Never rescan, and hold no more than the limits allow. Each byte is looked at a constant number of
   times, so the cost is linear in the bytes fed whatever the chunk size and line length. What is kept
   between feeds is packed: an unfinished line lives in one `bytearray` that grows in place (not a list of
   pieces, where a 2-byte piece costs some 40 bytes of object overhead), and the data lines of an
   unfinished event are packed into one `bytearray` at the end of each feed. A chunk longer than `WINDOW`
   is parsed a window at a time (cuts never change the result), so the lists one split makes stay small.
   Memory therefore stays within about twice the configured limits plus a constant (a window's worth),
   whatever the chunk sizes and line shapes; a line longer than a window is interpreted on its own, so
   that its bytes are held at most twice (as received, then as the event's text).

Errors: `feed` either returns events or raises `SSELimitError` (a line or an event outgrew its limit); the
error carries the events completed earlier in that call, and the parser stays failed afterwards rather than
guess where to resume. A `retry:` value of absurd length sets the reconnection time to `MAX_RETRY_MS`.

The parser does no I/O, keeps no clock and starts no thread: the HTTP client, the stand-in server, the
relay and the conformance checker all wrap this one class.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SSELimitError

__all__ = [
    "SSEEvent",
    "SSEParser",
    "SSELimitError",
    "parse",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_EVENT_BYTES",
    "MAX_RETRY_MS",
    "WINDOW",
]

BOM = b"\xef\xbb\xbf"
DEFAULT_MAX_LINE_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_EVENT_BYTES = 64 * 1024 * 1024
MAX_RETRY_MS = 2**31 - 1
"""The largest reconnection time (`retry:`, in ms) the parser reports: about 24.8 days, the longest delay a
browser timer accepts. The standard sets the reconnection time to any run of ASCII digits; a larger value
(even one of 5,000 digits, which `int()` refuses to convert) is clamped to this one, never an error."""
WINDOW = 64 * 1024
"""A chunk longer than this is parsed this many bytes at a time (same events, bounded working memory)."""

_RETRY_DIGITS = len(str(MAX_RETRY_MS))


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


def _retry_ms(digits: bytes) -> int:
    """The value of a `retry:` field made of ASCII digits, clamped to MAX_RETRY_MS (never converts more
    digits than that needs, so any length is cheap and nothing can overflow)."""
    digits = digits.lstrip(b"0")
    if len(digits) > _RETRY_DIGITS:
        return MAX_RETRY_MS
    return min(int(digits or b"0"), MAX_RETRY_MS)


def _packed(pieces: list[bytes]) -> bytearray:
    """The data lines of one event joined by LF, as one bytearray (extended in place when it already is one)."""
    first = pieces[0]
    buf = first if type(first) is bytearray else bytearray(first)
    buf += b"\n"
    buf += b"\n".join(pieces[1:])
    return buf


def _joined(pieces: list[bytes]) -> bytes | bytearray:
    """The data lines of one event joined by LF; a packed first piece is extended, not copied once more."""
    return _packed(pieces) if type(pieces[0]) is bytearray else b"\n".join(pieces)


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
        """`max_line_bytes` bounds one line, `max_event_bytes` the data of one event (both in bytes).
        `last_event_id` starts the stream with a known last event ID: on a reconnect the standard keeps
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
        self._data: list[bytes] = []  # data values of the event being built (packed into one at each feed's end)
        self._data_len = 0
        self._in_block = False  # a field line was seen since the last blank line
        self._tail = bytearray()  # the unfinished last line (contains no CR or LF)
        self._head = b""  # bytes held back at the very start while they may still be a BOM
        self._started = False
        self._pending_cr = False  # the previous chunk ended in CR; a leading LF is the same terminator
        self._fed = 0  # bytes fed so far, for error offsets
        self._error: SSELimitError | None = None
        self._closed = False
        self._ready = False  # True once nothing special is pending: feed() takes its short path

    # -- public API ----------------------------------------------------------------------------

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[SSEEvent]:
        """Add the next bytes of the stream; return the events they completed (possibly none).

        `chunk` is bytes, a bytearray or a memoryview (anything else raises TypeError before any state
        changes). A line or an event past its limit raises SSELimitError, whose `.events` holds the events
        completed earlier in this call; the parser then stays failed.
        """
        if type(chunk) is not bytes or len(chunk) > WINDOW:
            return self._feed_other(chunk)
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
        tail = self._tail
        if not lines:  # no line ended in this chunk
            if rest:
                tail += rest
                if len(tail) > self.max_line_bytes:
                    self._fail("max_line_bytes", self._fed - len(tail), [])
            return []
        out: list[SSEEvent] = []
        first_start = start - len(tail)  # stream offset of lines[0], which may have begun in earlier chunks
        longest_possible = len(tail) + len(chunk)
        if tail:
            if len(tail) + len(lines[0]) > WINDOW:  # a long line: interpreted on its own, see _long_line
                self._long_line(lines, out, first_start)
            else:
                tail += lines[0]
                lines[0] = bytes(tail)
                tail.clear()
        if longest_possible > self.max_line_bytes:  # rare: only then look for an over-long line
            self._check_line_lengths(lines, out, raw, start, first_start)
        self._lines(lines, out, raw, start, first_start)
        if rest:
            tail += rest
            if len(tail) > self.max_line_bytes:
                self._fail("max_line_bytes", self._fed - len(rest), out)
        return out

    def close(self) -> bool:
        """End of stream. Returns True when it stopped inside an unfinished line or event.

        The unfinished event is discarded, as the standard requires ("the incomplete event is not
        dispatched"); `last_event_id` keeps the value of the last dispatched block.
        """
        truncated = bool(self._tail) or bool(self._head) or self._in_block
        self._tail, self._head = bytearray(), b""
        self._reset_block()
        self._closed = True
        self._ready = False
        return truncated

    @property
    def bytes_fed(self) -> int:
        """How many bytes have been fed so far."""
        return self._fed

    # Where the bytes fed so far stop, for code that adds its own bytes to the same stream (the relay's
    # keep-alives and final event must not change the events a client parses; see streamlab.core.relaysummary).

    @property
    def line_open(self) -> bool:
        """True when the bytes fed so far stop inside a line (no CR or LF has ended it yet)."""
        return bool(self._tail) or bool(self._head)

    @property
    def cr_pending(self) -> bool:
        """True when the last byte fed was a CR: an LF arriving next belongs to that same line break."""
        return self._pending_cr

    @property
    def in_event(self) -> bool:
        """True when a field line (not a comment) arrived since the last blank line: an event is being built."""
        return self._in_block

    @property
    def data_pending(self) -> bool:
        """True when the event being built already holds data lines: the next blank line dispatches it."""
        return bool(self._data)

    # -- internals -----------------------------------------------------------------------------

    def _feed_other(self, chunk: object) -> list[SSEEvent]:
        """`feed` for anything but bytes of at most WINDOW: check the type, then feed one window at a time.

        Cuts never change the result, so windows give the same events as one big feed; an error still
        carries every event completed before it in this call.
        """
        try:
            view = memoryview(chunk)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(
                f"SSEParser.feed() takes bytes, bytearray or memoryview, not {type(chunk).__name__}"
            ) from None
        with view:
            if view.nbytes <= WINDOW:
                return self.feed(view.tobytes())
            data = view if view.ndim == 1 and view.itemsize == 1 else view.tobytes()
            out: list[SSEEvent] = []
            for pos in range(0, len(data), WINDOW):
                piece = data[pos : pos + WINDOW]
                try:
                    out += self.feed(piece if type(piece) is bytes else piece.tobytes())
                except SSELimitError as exc:
                    raise SSELimitError(exc.limit, exc.value, exc.offset, out + exc.events) from None
            return out

    def _prepare(self, chunk: bytes) -> tuple[bytes, int]:
        """The slow start of `feed`: returns the bytes left to parse and their stream offset."""
        if self._error is not None:
            raise SSELimitError(self._error.limit, self._error.value, self._error.offset, [])
        if self._closed:
            raise RuntimeError("SSEParser.feed() called after close()")
        start = self._fed
        self._fed += len(chunk)
        if not self._started:
            chunk = self._head + chunk
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

    def _long_line(self, lines: list[bytes], out: list[SSEEvent], first_start: int) -> None:
        """Finish the unfinished line with `lines[0]` and interpret it by itself, holding its bytes at most
        twice: the buffer is copied once and emptied before the line is read, and once read the line is
        dropped (kept in `lines`, a data line would still be held when its event's text is decoded)."""
        tail = self._tail
        if len(tail) + len(lines[0]) > self.max_line_bytes:
            self._fail("max_line_bytes", first_start, out)
        tail += lines[0]
        line = [bytes(tail)]
        tail.clear()
        self._lines(line, out, b"", first_start, first_start)
        lines[0] = b":"  # already interpreted: a comment line is ignored, and keeps the others' indices

    def _check_line_lengths(self, lines: list[bytes], out: list[SSEEvent], raw: bytes, start: int,
                            first_start: int) -> None:
        """Fail at the first complete line longer than max_line_bytes, after the lines before it."""
        for i, line in enumerate(lines):
            if len(line) > self.max_line_bytes:
                self._lines(lines[:i], out, raw, start, first_start)  # keep what came before it
                self._fail("max_line_bytes", self._line_offset(lines, i, raw, start, first_start), out)

    def _reset_block(self) -> None:
        self._data = []
        self._data_len = 0
        self._event_type = ""
        self._in_block = False

    def _lines(self, lines: list[bytes], out: list[SSEEvent], raw: bytes, start: int, first_start: int) -> None:
        """Interpret complete lines (terminators already removed) into `out`: the rules of the standard.

        This is the hot loop, so the per-block state lives in locals and is written back once at the end
        (and before raising a limit error). `raw`, `start` and `first_start` only serve error offsets.
        """
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
                    set_data(ev, (data[0] if len(data) == 1 else _joined(data)).decode("utf-8", "replace"))
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
                    self._fail("max_event_bytes", self._line_offset(lines, i, raw, start, first_start), out)
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
                    self._fail("max_event_bytes", self._line_offset(lines, i, raw, start, first_start), out)
            elif name == b"id":
                if b"\x00" not in value:
                    id_buffer = value.decode("utf-8", "replace")
            elif name == b"retry":
                if value and value.isdigit():  # bytes.isdigit() accepts ASCII 0-9 only
                    self.retry_ms = _retry_ms(value)
            # every other field name (including "Data", "ID", ...) is ignored
        self._data = data if len(data) < 2 else [_packed(data)]  # one piece per event between feeds
        self._data_len = data_len
        self._in_block = in_block
        self._event_type = event_type
        self._id_buffer = id_buffer
        self.last_event_id = last_id

    def _fail(self, limit: str, offset: int, events: list[SSEEvent]) -> None:
        value = self.max_line_bytes if limit == "max_line_bytes" else self.max_event_bytes
        self._error = SSELimitError(limit, value, offset, events)
        self._ready = False
        self._tail = bytearray()
        self._reset_block()
        raise self._error

    @staticmethod
    def _line_offset(lines: list[bytes], i: int, raw: bytes, start: int, first_start: int) -> int:
        """Stream offset where lines[i] starts (error path only; lines[0] may begin in earlier chunks)."""
        if i == 0:
            return first_start
        pos = 0
        for _ in range(i):  # step over i terminators in the raw bytes
            lf, cr = raw.find(b"\n", pos), raw.find(b"\r", pos)
            if cr != -1 and (lf == -1 or cr < lf):
                pos = cr + (2 if raw[cr + 1 : cr + 2] == b"\n" else 1)
            else:
                pos = lf + 1
        return start + pos


def parse(data: bytes | bytearray | memoryview) -> tuple[list[SSEEvent], bool]:
    """Parse a whole byte string; return (events, truncated). Handy in notebooks and tests."""
    parser = SSEParser()
    events = parser.feed(data)
    return events, parser.close()
