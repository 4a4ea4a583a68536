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
   between feeds is packed: an unfinished line that spans chunks lives in one `bytearray` that grows in
   place (not a list of pieces, where a 2-byte piece costs some 40 bytes of object overhead), and the data
   lines of an unfinished event are packed into one `bytearray` at the end of each feed. A chunk longer
   than `WINDOW` is parsed a window at a time (cuts never change the result), so the lists one split makes
   stay small. Memory therefore stays within about twice the configured limits plus a constant (what one
   window's lines cost: at most some 20 x WINDOW, for a window of 2-byte lines), whatever the chunk sizes
   and line shapes; a long line that spans chunks is interpreted on its own, so that its bytes are held at
   most twice (as received, then as the event's text).

Speed comes from doing per line and per event as little Python as possible, measured with
benchmarks/bench_parsers.py: lines are found by `io.BytesIO.readlines()`, which looks for LF with `memchr`, where
`bytes.split` walks byte by byte (four times the instructions), so each line keeps its LF (a blank line is
b"\n"). The shape nearly every stream has, one `data: ` line per event, takes a fast path (`_pairs`): when the
lines of a chunk alternate a `data: ` line and a blank line and no event is being built, one short loop turn
builds each event straight from its line, instead of two turns of the rule-by-rule loop (`_lines`) and a list of
data lines; any other line sends the whole chunk through `_lines`, so the fast path only skips work whose
outcome is already known. A CRLF stream takes the same path with its CRLFs kept (its CRs are counted by deleting
them, a `memchr` pass, and each line is checked to end in CRLF); only other CRs are turned into LFs by
`bytes.replace`, whose two-byte search costs more than finding the lines. In `_lines` the per-block state lives
in locals of one loop and `data: ` is tested first. An event is built without the frozen dataclass's `__init__`
(see `_Blank`), and data is decoded as strict UTF-8 first, with "replace" only when that fails. Against
httpx-sse on a Chat Completions stream that is 2.2x to 2.5x the throughput in 1 KiB writes and 2.5x to 2.7x in
64 KiB ones, LF or CRLF (medians of interleaved rounds; benchmarks/README.md has the numbers).

Errors: `feed` either returns events or raises `SSELimitError` (a line or an event outgrew its limit); the
error carries the events completed earlier in that call, and the parser stays failed afterwards rather than
guess where to resume. A `retry:` value of absurd length sets the reconnection time to `MAX_RETRY_MS`; bytes,
bytearray and memoryview are accepted alike, anything else is a TypeError raised before any state changes.

The parser does no I/O, keeps no clock and starts no thread: the HTTP client, the stand-in server, the
relay and the conformance checker all wrap this one class.
"""

from __future__ import annotations

from dataclasses import dataclass
from io import BytesIO

from streamlab.core.errors import SSELimitError

__all__ = [
    "SSEEvent",
    "SSEParser",
    "parse",
    "is_event_stream",
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
_Where = tuple[bytes, int, int]  # for error offsets: a chunk's raw bytes, its stream offset, that of its first line
_LONG_LINE = 4 * 1024  # a line longer than this that spans chunks is interpreted on its own (_long_line)


def _lf(lines: list[bytes | bytearray]) -> list[bytes | bytearray]:
    """Lines that all end in CRLF, ending in LF instead (what `SSEParser._lines` reads)."""
    return [line[:-2] + b"\n" for line in lines]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event, as an EventSource would hand it to a listener."""

    event: str = "message"
    """The `event:` field of the block, or "message" when it had none."""
    data: str = ""
    """The block's `data:` values joined by "\\n" (no trailing newline)."""
    last_event_id: str = ""
    """The stream's last event ID when this event was dispatched; it persists across events."""


class _Blank:
    """A plain object with SSEEvent's slots. The hot loop fills one and then gives it the class SSEEvent, which
    Python allows between classes of identical layout: the same frozen, equal, hashable event as
    `SSEEvent(...)` builds (tests/library/test_sse.py checks it), for a fraction of the cost of the frozen
    dataclass's `__init__`, which sets every field through `object.__setattr__`."""

    __slots__ = SSEEvent.__slots__
    event: str  # the fields, declared for the type checker (annotations only: the slots hold the values)
    data: str
    last_event_id: str


def _retry_ms(digits: bytes | bytearray) -> int:
    """The value of a `retry:` field made of ASCII digits, clamped to MAX_RETRY_MS (never converts more
    digits than that needs, so any length is cheap and nothing can overflow)."""
    digits = digits.lstrip(b"0")
    if len(digits) > _RETRY_DIGITS:
        return MAX_RETRY_MS
    return min(int(digits or b"0"), MAX_RETRY_MS)


def _packed(pieces: list[bytes | bytearray]) -> bytearray:
    """Pack the data lines of one event into one bytearray joined by LF (extending the first piece in place
    when it already is one); `pieces` is left holding just that bytearray, which is also returned.

    A loop rather than `bytes.join`, which holds an 80-byte buffer record per piece while it works."""
    first = pieces[0]
    buf = first if type(first) is bytearray else bytearray(first)
    for piece in pieces[1:]:
        buf += b"\n"
        buf += piece
    pieces[:] = [buf]
    return buf


def _joined(pieces: list[bytes | bytearray]) -> bytes | bytearray:
    """The data lines of one event joined by LF; a packed first piece is extended, not copied once more."""
    return b"\n".join(pieces) if len(pieces) < 64 and type(pieces[0]) is bytes else _packed(pieces)


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
        # the data values of the event being built (packed into one at the end of each feed)
        self._data: list[bytes | bytearray] = []
        self._data_len = 0
        self._in_block = False  # a field line was seen since the last blank line
        self._tail: bytes | bytearray = b""  # the unfinished last line (contains no CR or LF)
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
        if 0x0D in chunk:  # a CR (an int operand tests for one byte without a bytes search)
            return self._feed_cr(chunk, start)
        # Each line keeps its LF. readlines() gives list[bytes], but lines[0] may become a bytearray below (a tail
        # grown in place, plus the line's end): the list is ours alone, so widening it is safe, and a cast() would
        # cost a call on every feed.
        return self._take(BytesIO(chunk).readlines(), chunk, start)  # type: ignore[arg-type]

    def _feed_cr(self, chunk: bytes, start: int) -> list[SSEEvent]:
        """`feed` for a chunk holding a CR. A CRLF stream's chunk is tried on the fast path (_pairs) with its lines
        cut at LF, each ending in CRLF: its CRs must number its lines (a CR deleted is a `memchr`, where counting or
        replacing the two bytes CRLF takes a slower search), and _pairs checks that each line ends in CRLF, so that
        no CR is left anywhere else. Any other chunk has its CRLFs and lone CRs turned into LFs first."""
        if chunk[-1] == 0x0D:  # an LF at the start of the next chunk completes this CRLF
            self._pending_cr = True
            self._ready = False
        lines: list[bytes | bytearray] = BytesIO(chunk).readlines()  # type: ignore[assignment]
        rest = lines.pop() if lines[-1][-1] != 0x0A else b""
        tail = self._tail
        if (
            lines
            and len(lines) == len(chunk) - len(chunk.replace(b"\r", b""))
            and len(tail) + len(chunk) <= self.max_line_bytes
            and len(tail) + len(lines[0]) <= _LONG_LINE
        ):
            if tail:
                lines[0] = tail + lines[0]  # self._tail itself is only replaced if the fast path succeeds
            out: list[SSEEvent] = []
            if self._pairs(lines, out, b"\r\n", True):
                self._tail = rest
                return out
        lf = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return self._take(BytesIO(lf).readlines(), chunk, start)  # type: ignore[arg-type]

    def _take(self, lines: list[bytes | bytearray], raw: bytes, start: int) -> list[SSEEvent]:
        """The rest of `feed`: finish the unfinished line with the first one, check the limits, interpret the lines.
        `lines` are the chunk's lines, each ending in LF; `raw` is the chunk as fed, from stream offset `start`."""
        rest = lines.pop() if lines and lines[-1][-1] != 0x0A else b""
        tail = self._tail
        if not lines:  # no line ended in this chunk: the unfinished line grows (in place, see _grow_tail)
            if rest:
                self._grow_tail(rest)
            return []
        out: list[SSEEvent] = []
        where = (raw, start, start - len(tail))  # for error offsets: lines[0] may have begun in earlier chunks
        if tail:
            if len(tail) + len(lines[0]) <= _LONG_LINE:
                lines[0] = tail + lines[0]
                self._tail = b""
            else:
                self._long_line(lines, out, where[2])
        if len(tail) + len(raw) > self.max_line_bytes:  # rare: only then look for an over-long line
            self._check_line_lengths(lines, rest, out, where)
        if not self._pairs(lines, out, b"\n", False):
            self._lines(lines, out, where)
        self._tail = rest
        return out

    def close(self) -> bool:
        """End of stream. Returns True when it stopped inside an unfinished line or event.

        The unfinished event is discarded, as the standard requires ("the incomplete event is not
        dispatched"); `last_event_id` keeps the value of the last dispatched block.
        """
        truncated = bool(self._tail) or bool(self._head) or self._in_block
        self._tail, self._head = b"", b""
        self._reset_block()
        self._closed = True
        self._ready = False
        return truncated

    @property
    def bytes_fed(self) -> int:
        """How many bytes have been fed so far."""
        return self._fed

    # Where the bytes fed so far stop, for code that adds its own bytes to the same stream (the relay's
    # keep-alives and final event must not change the events a client parses; see streamlab.core.relay.stream).

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
        with view:  # released on the way out, so the caller may resize a bytearray it passed
            if view.nbytes <= WINDOW:
                return self.feed(view.tobytes())
            flat = view if view.ndim == 1 and view.itemsize == 1 else memoryview(view.tobytes())
            out: list[SSEEvent] = []
            for pos in range(0, len(flat), WINDOW):
                try:
                    out += self.feed(flat[pos : pos + WINDOW].tobytes())
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

    def _grow_tail(self, piece: bytes | bytearray) -> None:
        """Append to the unfinished line. It is kept as the bytes object a split returned until a second piece
        arrives; from then on it is a bytearray that grows in place (amortised linear, ~12% spare room)."""
        tail = self._tail
        if type(tail) is bytes:
            self._tail = tail = bytearray(tail)
        tail += piece
        if len(tail) > self.max_line_bytes:
            self._fail("max_line_bytes", self._fed - len(tail), [])

    def _long_line(self, lines: list[bytes | bytearray], out: list[SSEEvent], first_start: int) -> None:
        """Finish the unfinished line with `lines[0]` and interpret it by itself, holding its bytes at most
        twice: the buffer is copied once and emptied before the line is read, and once read the line is
        dropped (kept in `lines`, a data line would still be held when its event's text is decoded)."""
        tail, self._tail = self._tail, b""
        if len(tail) + len(lines[0]) - 1 > self.max_line_bytes:
            self._fail("max_line_bytes", first_start, out)
        line = [tail + lines[0]]
        if type(tail) is bytearray:
            tail.clear()  # frees its buffer now, although the caller still holds the object
        self._lines(line, out, (b"", first_start, first_start))
        lines[0] = b":\n"  # already interpreted: a comment line is ignored, and keeps the others' indices

    def _check_line_lengths(
        self, lines: list[bytes | bytearray], rest: bytes | bytearray, out: list[SSEEvent], where: _Where
    ) -> None:
        """Fail at the first line longer than max_line_bytes, after interpreting the lines before it."""
        for i, line in enumerate(lines):
            if len(line) - 1 > self.max_line_bytes:
                self._lines(lines[:i], out, where)  # keep what came before it
                self._fail("max_line_bytes", self._line_offset(lines, i, where), out)
        if len(rest) > self.max_line_bytes:  # the unfinished last line
            self._lines(lines, out, where)
            self._fail("max_line_bytes", self._fed - len(rest), out)

    def _reset_block(self) -> None:
        self._data = []
        self._data_len = 0
        self._event_type = ""
        self._in_block = False

    def _pairs(self, lines: list[bytes | bytearray], out: list[SSEEvent], blank: bytes, crlf: bool) -> bool:
        """The fast path: `lines` (each ending in `blank`, LF or CRLF) alternate a `data: ` line and a blank line,
        the shape of nearly every stream (one `data: ` line per event: Chat Completions, most relays), and no event
        is being built. Then every event is `message` with that one value and the current last event ID: one
        short loop per event, where `_lines` takes two turns of a longer one and keeps a list of data lines. A
        last `data: ` line whose blank line has not arrived yet is left to `_lines`.

        All or nothing: for any other shape, an invalid UTF-8 value or a value past max_event_bytes it returns
        False having changed nothing (the events built so far are dropped), and `_lines` reads the lines, decodes
        with "replace" and raises the limit error where it struck."""
        pairs = len(lines) >> 1
        if self._in_block or not pairs or lines[1::2].count(blank) != pairs:  # blank lines: compared by identity
            return False
        cut = -len(blank)
        longest = self.max_event_bytes + 6 - cut  # a longer `data: ` line holds a value past the event limit
        last_id, cls = self._id_buffer, SSEEvent  # not in a block: the id buffer is the last event ID
        events: list[SSEEvent] = []
        push = events.append
        try:
            for line in lines[::2]:
                if line[:6] != b"data: " or len(line) > longest or (crlf and line[-2] != 0x0D):
                    return False
                ev = _Blank()  # becomes an SSEEvent (see _Blank)
                ev.event = "message"
                ev.data = line[6:cut].decode()
                ev.last_event_id = last_id
                ev.__class__ = cls  # type: ignore[assignment]
                push(ev)  # type: ignore[arg-type]
        except UnicodeDecodeError:
            return False
        if len(events) > pairs:  # the last line: a data line, within the limits (tested above), so no error
            events.pop()  # offset is needed; _lines starts the event with it
            out += events
            self._lines([lines[-1]] if cut == -1 else _lf(lines[-1:]), out, (b"", 0, 0))
        else:
            out += events
        return True

    def _lines(self, lines: list[bytes | bytearray], out: list[SSEEvent], where: _Where) -> None:
        """Interpret complete lines (each ends in LF) into `out`: the rules of the standard.

        This is the hot loop, so the per-block state lives in locals and is written back once at the end
        (and before raising a limit error). `where` only serves error offsets.
        """
        push = out.append
        data = self._data
        data_len = self._data_len
        in_block = self._in_block
        event_type = self._event_type
        id_buffer = self._id_buffer
        last_id = self.last_event_id
        max_event = self.max_event_bytes + 1  # data_len counts a "\n" after every data line, the last included
        blank, cls = _Blank, SSEEvent
        for line in lines:
            if line == b"\n":  # blank line: dispatch (or just end the block), commit the id, reset the type
                last_id = id_buffer
                if data:
                    ev = blank()  # becomes an SSEEvent below (see _Blank)
                    ev.event = event_type or "message"
                    try:  # strict UTF-8 first: the default codec and error handler need no name lookups
                        ev.data = (data[0] if len(data) == 1 else _joined(data)).decode()
                    except UnicodeDecodeError:  # invalid bytes become U+FFFD, as the standard decodes them
                        ev.data = (data[0] if len(data) == 1 else _joined(data)).decode("utf-8", "replace")
                    ev.last_event_id = last_id
                    # The class swap described at _Blank, which a type checker cannot follow: from here on ev
                    # is an SSEEvent (a cast() would cost a call per event in the hot loop).
                    ev.__class__ = cls  # type: ignore[assignment]
                    push(ev)  # type: ignore[arg-type]
                    data = []
                    data_len = 0
                event_type = ""
                in_block = False
                continue
            if line[:6] == b"data: ":  # the common case first; "data:" without the space is handled below
                data.append(line[6:-1])
                in_block = True
                data_len += len(line) - 6  # the value and one LF
                if data_len > max_event:
                    self._too_big(lines, line, last_id, out, where)
                continue
            if line[0] == 0x3A:  # ":" starts a comment
                continue
            in_block = True
            name, colon, value = line[:-1].partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if name == b"event":
                event_type = value.decode("utf-8", "replace")
            elif name == b"data":  # "data:value" without the space, or "data" alone: an empty value
                data.append(value)
                data_len += len(value) + 1
                if data_len > max_event:
                    self._too_big(lines, line, last_id, out, where)
            elif name == b"id":
                if 0 not in value:  # an id with NUL is ignored
                    id_buffer = value.decode("utf-8", "replace")
            elif name == b"retry":
                if value and value.isdigit():  # bytes.isdigit() accepts ASCII 0-9 only
                    self.retry_ms = _retry_ms(value)
            # every other field name (including "Data", "ID", ...) is ignored
        if len(data) > 1:  # between feeds an event's data is one piece (bounded memory, see the docstring)
            _packed(data)
        self._data = data
        self._data_len = data_len
        self._in_block = in_block
        self._event_type = event_type
        self._id_buffer = id_buffer
        self.last_event_id = last_id

    def _fail(self, limit: str, offset: int, events: list[SSEEvent]) -> None:
        value = self.max_line_bytes if limit == "max_line_bytes" else self.max_event_bytes
        self._error = SSELimitError(limit, value, offset, events)
        self._ready = False
        self._tail = b""
        self._reset_block()
        raise self._error

    def _too_big(
        self, lines: list[bytes | bytearray], line: bytes | bytearray, last_id: str, out: list[SSEEvent], where: _Where
    ) -> None:
        """The data line `line` took the event past max_event_bytes: fail at it (the hot loop's error path),
        keeping the id of the last event delivered."""
        self.last_event_id = last_id
        i = next(k for k, candidate in enumerate(lines) if candidate is line)  # data lines are distinct objects
        self._fail("max_event_bytes", self._line_offset(lines, i, where), out)

    @staticmethod
    def _line_offset(lines: list[bytes | bytearray], i: int, where: _Where) -> int:
        """Stream offset where lines[i] starts (error path only; lines[0] may begin in earlier chunks)."""
        raw, start, first_start = where
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


_HTTP_WHITESPACE = " \t\r\n"


def is_event_stream(content_type: str | None) -> bool:
    """True when a `Content-Type` header value names `text/event-stream`, by the WHATWG MIME type rules.

    The media type's essence is what comes before the first ";" (parameters such as `charset=utf-8` do not
    count), with HTTP whitespace trimmed, compared ASCII case-insensitively: `Text/Event-Stream; charset=UTF-8`
    is an event stream, `text/event-stream-x` and a missing header are not. The standard's EventSource fails
    the connection on anything else; every reader in the library (client, relay, gateway, checker) asks this
    one function, so they cannot disagree about the same response.
    """
    if not content_type:
        return False
    essence = content_type.split(";", 1)[0].strip(_HTTP_WHITESPACE)
    return essence.encode("ascii", "replace").lower() == b"text/event-stream"
