"""A gallery of broken SSE parsers (sans-IO core): one realistic bug each, ready for the split harness.

Every parser here is wrong in exactly one way that real code gets wrong, and right in every other way, so
when the harness (`streamlab.core.harness.fuzz`) catches it, the failure is that bug and nothing else. Most of them are
`TextLineParser`, a correct text-level parser, with one method replaced: the docstring of each says what
the replacement does wrong, which fixtures and cuts expose it, and where such code is found. The last two
are whole small parsers written the way such code is commonly written, bugs included: a typical first-attempt
loop (the find-the-bugs snippet of lab 02) and a sample parser fed by `requests`' line iterator.

Two kinds of bug show up, and the lab is about telling them apart:

* chunking bugs: right on every whole stream, wrong when the network cuts the bytes somewhere unlucky
  (`fuzz.HarnessResult.whole_ok_split_wrong` lists them); a local test server that sends each event in one
  packet never finds them;
* gaps: wrong on the whole stream too, so any fixture that exercises the rule finds them.

`GALLERY` registers these parsers and `gallery()` returns them as `fuzz.Contender`s. Two more parsers read
their lines through httpx, so they live on the I/O side, in `streamlab.net.harness.broken_http`, whose `gallery()` is
the whole gallery in teaching order (the one lab 02 runs). Describing cuts (`cut_kind`, `split_kinds`, the
split explorer's text) is the harness's job: those live in `streamlab.core.harness.fuzz`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from streamlab.core.harness.fuzz import ALL_FIELDS, Contender, ParseResult
from streamlab.core.sse import MAX_RETRY_MS, SSEEvent

__all__ = [
    "TextLineParser",
    "DecodeEachChunk",
    "SplitlinesAfterDecoder",
    "BlankLineIsLFLF",
    "DataNeedsSpace",
    "DispatchAtEnd",
    "KeepsBOM",
    "PhantomEvents",
    "RetryWithInt",
    "StripsValues",
    "ChunkEndsLine",
    "FindTheBugsSnippet",
    "RequestsLinesSample",
    "sample_parse_sse_lines",
    "GalleryEntry",
    "GALLERY",
    "SHOWCASE",
    "gallery",
    "gallery_contender",
    "entry_contender",
    "run_parser",
    "bug_of",
    "found_in",
    "bug_line",
    "found_in_text",
]

_EOL = re.compile(r"\r\n|\r|\n")
_BOM_BYTES = b"\xef\xbb\xbf"


# =====================================================================================================
# The correct base: a text-level parser with every step in its own method, so a bug can replace one.
# =====================================================================================================


class TextLineParser:
    """A correct SSE parser that works on decoded text: the healthy body the gallery's bugs are planted in.

    Steps, each a method a subclass may replace: `_decode` (bytes to text, incrementally, dropping one
    leading BOM), `_split` (text to complete lines at CR, LF or CRLF, even when CR and LF arrive in
    different chunks), `_line` (one line: blank, comment or field), `_value` (drop one leading space),
    `_field`, `_retry`, `_blank` (dispatch), `_flush` (end of stream). Same interface as `SSEParser`
    (`feed`, `close`, `retry_ms`, `last_event_id`), plus `events_at_close`, the events a parser emits when
    the stream ends (always none for a correct one).
    """

    def __init__(self) -> None:
        self.retry_ms: int | None = None
        self.last_event_id = ""
        self.events_at_close: list[SSEEvent] = []
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._started = False  # some text has been decoded (the BOM can only come first)
        self._skip_lf = False  # the last text ended with CR: an LF next is the rest of that CRLF
        self._tail = ""  # the unfinished last line
        self._id_buffer = ""
        self._type = ""
        self._data: list[str] = []
        self._in_block = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Add the next chunk; return the events it completed."""
        return self.feed_lines(self._split(self._decode(chunk)))

    def feed_lines(self, lines: Iterable[str]) -> list[SSEEvent]:
        """Interpret complete lines (terminators removed); return the events they dispatched."""
        out = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                out.append(event)
        return out

    def close(self) -> bool:
        """End of stream: True if it stopped inside an unfinished line or event (which is discarded)."""
        truncated = self._truncated()
        self.events_at_close = self._flush()
        self._tail, self._data, self._type, self._in_block = "", [], "", False
        return truncated

    # -- the steps ---------------------------------------------------------------------------------

    def _decode(self, chunk: bytes) -> str:
        return self._drop_bom(self._decoder.decode(chunk))

    def _drop_bom(self, text: str) -> str:
        if not self._started and text:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        return text

    def _split(self, text: str) -> list[str]:
        if not text:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        self._skip_lf = text[-1] == "\r"
        lines = _EOL.split(self._tail + text)
        self._tail = lines.pop()
        return lines

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._blank()
        if line[0] == ":":
            return None
        self._in_block = True
        name, colon, value = line.partition(":")
        self._field(name, self._value(value) if colon else "")
        return None

    def _value(self, value: str) -> str:
        return value[1:] if value[:1] == " " else value

    def _field(self, name: str, value: str) -> None:
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value
        elif name == "id":
            if "\0" not in value:
                self._id_buffer = value
        elif name == "retry":
            self._retry(value)

    def _retry(self, value: str) -> None:
        if value and value.isascii() and value.isdigit():  # clamped like SSEParser's (int() refuses 4,301 digits)
            digits = value.lstrip("0")
            self.retry_ms = MAX_RETRY_MS if len(digits) > 10 else min(int(digits or "0"), MAX_RETRY_MS)

    def _blank(self) -> SSEEvent | None:
        self._in_block = False
        self.last_event_id = self._id_buffer
        if not self._data:
            self._type = ""
            return None
        event = SSEEvent(self._type or "message", "\n".join(self._data), self.last_event_id)
        self._data, self._type = [], ""
        return event

    def _truncated(self) -> bool:
        leftover = self._decoder.decode(b"", final=True)  # bytes of an unfinished character
        return bool(self._tail or leftover or self._in_block)

    def _flush(self) -> list[SSEEvent]:
        return []


# =====================================================================================================
# The gallery: one bug each.
# =====================================================================================================


class DecodeEachChunk(TextLineParser):
    """Decodes every network chunk to text on its own, so a character cut in two turns into U+FFFD.

    `chunk.decode("utf-8", errors="replace")` inside the read loop looks harmless, and passes every test
    that sends whole lines. But a cut inside a multi-byte character (é is 2 bytes, 世 3, 🙂 4) leaves each
    half invalid on its own: the text silently turns into replacement characters (with the default
    `errors="strict"` the loop raises `UnicodeDecodeError` instead). A cut inside the byte-order mark spoils
    the first line the same way.

    Found in: countless hand-written loops over `response.iter_bytes()` / `resp.iter_content()` and JS
    code calling `new TextDecoder().decode(value)` without `{stream: true}`.
    """

    def _decode(self, chunk: bytes) -> str:
        return self._drop_bom(chunk.decode("utf-8", errors="replace"))


class SplitlinesAfterDecoder(TextLineParser):
    """Splits lines with `str.splitlines()`: ends lines inside JSON text, and splits a CRLF cut in two.

    The text is decoded correctly (an incremental decoder), but `str.splitlines()` ends a line at ten
    different characters where SSE knows two (CR and LF): U+2028, U+2029 and U+0085 (legal, unescaped,
    inside JSON strings), form feed, vertical tab and the file/group/record separators cut a data line in
    two, even on the whole stream. And a chunk that ends with the CR of a CRLF ends a line there; the LF
    at the start of the next chunk then ends an empty line, a blank line the server never sent, which
    dispatches the event early.

    Found in: `requests`' `iter_lines(decode_unicode=True)` (the same two steps), and code that keeps
    a text buffer and calls `buffer.splitlines()`.
    """

    def _split(self, text: str) -> list[str]:
        pieces = (self._tail + text).splitlines(keepends=True)
        self._tail = ""
        if pieces and pieces[-1].splitlines()[0] == pieces[-1]:  # no line break at its end yet
            self._tail = pieces.pop()
        return [p.splitlines()[0] for p in pieces]


class BlankLineIsLFLF(TextLineParser):
    """Finds the end of an event by searching for b"\\n\\n", so CRLF and CR-only streams never dispatch.

    The standard's blank line may end in CRLF, CR or LF: an event ends at `\\r\\n\\r\\n`, `\\r\\r`,
    `\\n\\n` or any mix. Searching the buffer for `\\n\\n` only finds the LF form; a server (or proxy)
    that writes CRLF, as many HTTP stacks do by habit, produces no events at all, and the whole stream
    sits in the buffer until the connection ends. It is not a chunking bug: the whole stream fails too.

    Found in: most "parse SSE in 20 lines" answers, and JavaScript or TypeScript loops that look for the end
    of an event with `buffer.indexOf("\\n\\n")` or `buffer.split("\\n\\n")`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._buf = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buf += chunk
        if not self._started:  # drop one BOM, even when it arrives in pieces
            if len(self._buf) < 3 and _BOM_BYTES.startswith(self._buf):
                return []
            self._started = True
            if self._buf.startswith(_BOM_BYTES):
                self._buf = self._buf[3:]
        out: list[SSEEvent] = []
        while (end := self._buf.find(b"\n\n")) != -1:
            block, self._buf = self._buf[:end], self._buf[end + 2 :]
            out += self.feed_lines([*block.decode("utf-8", errors="replace").split("\n"), ""])
        return out

    def _truncated(self) -> bool:
        return bool(self._buf.strip(b"\n"))


class DataNeedsSpace(TextLineParser):
    """Recognises a field only when written `name: value`, with the space: `data:x` and `data` are lost.

    The space after the colon is optional; one space is removed if present. Matching
    `line.startswith("data: ")` drops `data:x` (the standard's own example), `data` alone (an empty data
    line, which still dispatches an event) and `id` alone (which resets the last event ID). Servers that
    write compact frames, such as some proxies and non-OpenAI providers, lose every event.

    Found in: most tutorials and sample parsers, in Python and TypeScript alike: any code that tests
    `line.startswith("data: ")` and then takes `line[6:]`.
    """

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._blank()
        for name in ("data", "event", "id", "retry"):
            if line.startswith(name + ": "):
                self._in_block = True
                self._field(name, line[len(name) + 2 :])
                return None
        return None  # comments, unknown fields, and also "data:x" and "data"


class DispatchAtEnd(TextLineParser):
    """Dispatches the unfinished last event when the stream ends, instead of discarding it.

    The standard is explicit: an event not ended by a blank line when the stream closes is not
    dispatched. A connection cut mid-event (a crash, a proxy timeout) leaves half an event in the
    buffer; "flush whatever is left" hands it over as if complete, for example half a JSON object, and
    commits its `id`, so a reconnect would claim an event it never got.

    Found in: parsers with a final `if buffer: yield parse(buffer)` after the read loop, usually under a
    comment about handling the residual buffer once the socket closes.
    """

    def _flush(self) -> list[SSEEvent]:
        return self.feed_lines([*([self._tail] if self._tail else []), ""])


class KeepsBOM(TextLineParser):
    """Keeps a leading byte-order mark, so the first line reads "\\ufeffdata: x" and its field is unknown.

    The standard drops one U+FEFF at the very start of the stream. Decoding with plain "utf-8" keeps it
    as a character, the first field name becomes "\\ufeffdata" and the first event silently disappears.
    (Stripping every BOM, or one at the start of every chunk, is the opposite bug.)

    Found in: parsers behind servers or files written by Windows tools; any decoder set to "utf-8"
    rather than "utf-8-sig" with no BOM handling of its own.
    """

    def _decode(self, chunk: bytes) -> str:
        return self._decoder.decode(chunk)


class PhantomEvents(TextLineParser):
    """Dispatches at every blank line that ends a non-empty block, even one without data: phantom events.

    A block with no `data` line dispatches nothing; it still sets the last event ID (`id: 5`), the
    reconnection time (`retry:`) or nothing at all (a `: keep-alive` comment). Dispatching an empty
    message there hands the application events with `data == ""`, and every keep-alive comment becomes
    one, which `json.loads("")` then rejects.

    Found in: httpx-sse (0.4.3 dispatches a block that sets only `id`, `event` or `retry`, and since its
    last event ID is sticky, after any event with an `id` even a `: ping` keep-alive block becomes an empty
    event: florimondmanca/httpx-sse issue #35), and the openai SDK's decoder, which has the same condition.
    """

    def __init__(self) -> None:
        super().__init__()
        self._had_lines = False

    def _line(self, line: str) -> SSEEvent | None:
        if line:
            self._had_lines = True
            return super()._line(line)
        had_lines, self._had_lines = self._had_lines, False
        if had_lines and not self._data:
            self._in_block = False
            self.last_event_id = self._id_buffer
            event = SSEEvent(self._type or "message", "", self.last_event_id)
            self._type = ""
            return event
        return self._blank()


class RetryWithInt(TextLineParser):
    """Reads `retry` with `int()`, which accepts "+5", " 7", "-1", "1_000" and Arabic-Indic digits.

    The standard accepts a `retry` value only when it consists of ASCII digits 0-9, and ignores the
    field otherwise. Python's `int()` is far more generous: a sign, surrounding whitespace, underscores
    between digits, and any Unicode decimal digit (`int("٣") == 3`). A negative or odd value then reaches
    the reconnect timer.

    Found in: the openai SDK's and httpx-sse's decoders (`try: int(value) except ValueError`), and most
    hand-written parsers that handle `retry` at all.
    """

    def _retry(self, value: str) -> None:
        try:
            self.retry_ms = int(value)
        except ValueError:
            pass


class StripsValues(TextLineParser):
    """Calls `.strip()` on field values, instead of removing one leading space, and only one.

    `data:  two` carries " two" (the second space is data) and a tab after the colon is data too; so is
    trailing whitespace. Stripping changes the text of the event, which matters for streamed tokens: a
    delta of " " or a code block's indentation disappears.

    Found in: TypeScript samples that call `.trim()` on every line or value, and Python parsers that
    "clean up" lines with `line.strip()`.
    """

    def _value(self, value: str) -> str:
        return value.strip()


class ChunkEndsLine(TextLineParser):
    """Treats the end of every chunk as the end of a line: a line cut by the network becomes two lines.

    Splitting each chunk into lines on its own, without keeping the unfinished last line for the next
    chunk, works as long as every chunk ends at a line end, which a local server writing one event per
    `write()` guarantees. On a real network the first half of `data: hello` may end a chunk: it is
    interpreted as a complete line, and `lo` arrives as an unknown field.

    Found in: `for chunk in response.iter_text(): for line in chunk.split("\\n"): ...` loops, and
    WebSocket-minded code that assumes one message per read.
    """

    def _split(self, text: str) -> list[str]:
        lines = super()._split(text)
        if self._tail:
            lines.append(self._tail)
            self._tail = ""
        return lines


class FindTheBugsSnippet:
    """A typical first-attempt loop (the find-the-bugs snippet), as an event source: many bugs at once.

    The snippet appends `chunk.decode("utf-8")` to a text buffer, then, after every chunk, splits the
    whole buffer on "\\n\\n" and handles every block that starts with "data: ". Its bugs: (1) it decodes
    each chunk separately (a cut inside a character raises `UnicodeDecodeError`); (2) it never removes
    the blocks it has handled, so every chunk replays all earlier events, and (3) it handles the
    unfinished last block too, so half an event is dispatched (and `json.loads` would fail on it);
    (4) only "\\n\\n" ends an event (CRLF and CR streams never do); (5) "data:" needs the space; (6) a
    block with several data lines keeps "\\ndata: " inside its value; (7) a block that starts with
    `event:`, `id:` or a comment is skipped whole (every Responses API event); (8) it never strips a BOM;
    and in the full loop, (9) `json.loads("[DONE]")` raises at the end of every chat stream. The adapter
    reports the value handed to `json.loads` as the event data, without parsing it.

    Found in: first attempts at reading a stream: a text buffer, `split("\\n\\n")` after every chunk,
    and `startswith("data: ")`.
    """

    def __init__(self) -> None:
        self.pending = ""
        self.retry_ms: int | None = None
        self.last_event_id = ""
        self.events_at_close: list[SSEEvent] = []

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self.pending += chunk.decode("utf-8")
        frames = self.pending.split("\n\n")
        return [SSEEvent("message", frame[len("data: ") :]) for frame in frames if frame.startswith("data: ")]

    def close(self) -> bool:
        return False


class RequestsLinesSample:
    """A sample `parse_sse(lines)` over `requests`' `iter_lines()`: joins data lines with "", flushes at the end.

    Its bugs: data lines are joined with "" instead of "\\n"; only "data: " with the space counts; the
    unfinished last event is dispatched when the stream ends; event types and ids are ignored; and the
    line iterator it relies on splits with `str.splitlines()`, so U+2028 and U+0085 inside JSON end a
    line. The line iterator is re-implemented here the way `requests` does it (an incremental decoder,
    then `splitlines()` with the last piece kept back when it may be unfinished); it assumes the server
    declares `charset=utf-8` (without it, `requests` decodes any text/* body as ISO-8859-1).

    Found in: sample code that collects `line[6:]` for every "data: " line in a list, yields
    `"".join(...)` at each blank line and once more after the loop, and gets its lines from
    `response.iter_lines(decode_unicode=True)`.
    """

    def __init__(self) -> None:
        self.retry_ms: int | None = None
        self.last_event_id = ""
        self.events_at_close: list[SSEEvent] = []
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending: str | None = None
        self._event_lines: list[str] = []

    def _iter_lines(self, text: str) -> list[str]:
        if not text:
            return []
        if self._pending is not None:
            text = self._pending + text
        lines = text.splitlines()
        if lines and lines[-1] and lines[-1][-1] == text[-1]:  # the last piece may continue
            self._pending = lines.pop()
        else:
            self._pending = None
        return lines

    def _parse_sse(self, lines: Iterable[str]) -> list[SSEEvent]:
        out = []
        for line in lines:
            if line.startswith("data: "):
                self._event_lines.append(line[6:])
            elif line == "" and self._event_lines:
                out.append(SSEEvent("message", "".join(self._event_lines)))
                self._event_lines = []
        return out

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return self._parse_sse(self._iter_lines(self._decoder.decode(chunk)))

    def close(self) -> bool:
        lines = self._iter_lines(self._decoder.decode(b"", final=True))
        if self._pending is not None:
            lines.append(self._pending)
            self._pending = None
        events = self._parse_sse(lines)
        if self._event_lines:  # "if event_lines: yield ..." after the loop
            events.append(SSEEvent("message", "".join(self._event_lines)))
            self._event_lines = []
        self.events_at_close = events
        return False


def sample_parse_sse_lines(lines: Iterable[str]) -> Iterator[str]:
    """A sample `parse_sse_lines` that expects lines with their endings, with its bugs (without the JSON step).

    It collects "data: " values and yields the collected text when it sees the line "\\n". But
    `response.iter_lines()`, which its callers pass in, removes line endings: the blank line is "", the
    comparison never matches, and nothing is ever yielded. Had it been fed lines with their endings, it
    would still join data lines with "" instead of "\\n", need the space after "data:", drop events whose
    data is empty, and fail on CRLF lines ("\\r\\n" is not "\\n"); its `[DONE]` check can never run,
    because that line already matched `startswith("data: ")`.
    """
    buffer = ""
    for line in lines:
        if line.startswith("data: "):
            buffer += line[6:]
        elif line == "data: [DONE]\n":  # unreachable: the branch above took it
            break
        elif line == "\n" and buffer:
            yield buffer
            buffer = ""


# =====================================================================================================
# As contenders.
# =====================================================================================================

_EVENTS_ONLY = frozenset({"events"})


class GalleryEntry(NamedTuple):
    """One gallery parser: its class (a parser class, or an adapter with a static `run(chunks)`), the fields it
    reports (only those are judged), and the fixture whose smallest failing cut shows its bug best."""

    parser: type
    exposes: frozenset[str]
    showcase: str


GALLERY: dict[str, GalleryEntry] = {
    "decode-each-chunk": GalleryEntry(DecodeEachChunk, ALL_FIELDS, "multibyte-utf8"),
    "decoder+splitlines": GalleryEntry(SplitlinesAfterDecoder, ALL_FIELDS, "crlf-two-data-lines"),
    "blank-line-is-LFLF": GalleryEntry(BlankLineIsLFLF, ALL_FIELDS, "crlf-endings"),
    "data-needs-space": GalleryEntry(DataNeedsSpace, ALL_FIELDS, "spec-space-optional"),
    "dispatch-at-end": GalleryEntry(DispatchAtEnd, ALL_FIELDS, "unfinished-final-event"),
    "keeps-bom": GalleryEntry(KeepsBOM, ALL_FIELDS, "bom-first"),
    "phantom-events": GalleryEntry(PhantomEvents, ALL_FIELDS, "id-without-data"),
    "retry-with-int": GalleryEntry(RetryWithInt, ALL_FIELDS, "retry-invalid-values"),
    "strips-values": GalleryEntry(StripsValues, ALL_FIELDS, "space-removed-once"),
    "chunk-ends-line": GalleryEntry(ChunkEndsLine, ALL_FIELDS, "spec-stock-ticker"),
    "find-the-bugs-snippet": GalleryEntry(FindTheBugsSnippet, _EVENTS_ONLY, "multibyte-utf8"),
    "requests-lines-sample": GalleryEntry(RequestsLinesSample, _EVENTS_ONLY, "spec-stock-ticker"),
}
"""The gallery parsers that need no HTTP library, in teaching order (streamlab.net.harness.broken_http has the rest)."""

SHOWCASE: dict[str, str] = {name: entry.showcase for name, entry in GALLERY.items()}
"""For each parser of GALLERY, the fixture whose smallest failing cut shows its bug best."""


def run_parser(factory: Callable[[], Any]) -> Callable[[Sequence[bytes]], ParseResult]:
    """A contender's `run` for a parser class: feed, close, report, including the events emitted at close.

    Like `fuzz.contender_from_class`, except that events a parser hands over in `close()` (its
    `events_at_close` list) are reported too; a parser that flushes its buffer at the end needs that.
    """

    def run(chunks: Sequence[bytes]) -> ParseResult:
        parser = factory()
        events: list[SSEEvent] = []
        for chunk in chunks:
            events.extend(parser.feed(chunk))
        truncated = parser.close()
        events.extend(parser.events_at_close)
        return ParseResult(tuple(events), parser.retry_ms, truncated, parser.last_event_id)

    return run


def bug_line(cls: type) -> str:
    """The one-line description of a gallery parser's bug (its class docstring's first line)."""
    return (cls.__doc__ or "").strip().split("\n")[0]


def found_in_text(cls: type) -> str:
    """Where code with this bug is found (the class docstring's "Found in:" paragraph)."""
    doc = cls.__doc__ or ""
    text = doc.split("Found in:", 1)[1] if "Found in:" in doc else ""
    return " ".join(text.split())


def entry_contender(name: str, entry: GalleryEntry) -> Contender:
    """A gallery entry as a harness contender (its own `run` when it has one, else `run_parser`)."""
    run = entry.parser.run if hasattr(entry.parser, "run") else run_parser(entry.parser)
    return Contender(name, run, entry.exposes, bug_line(entry.parser))


def bug_of(name: str) -> str:
    """`bug_line` of the GALLERY parser called `name`."""
    return bug_line(GALLERY[name].parser)


def found_in(name: str) -> str:
    """`found_in_text` of the GALLERY parser called `name`."""
    return found_in_text(GALLERY[name].parser)


def gallery_contender(name: str) -> Contender:
    """One GALLERY parser as a harness contender."""
    return entry_contender(name, GALLERY[name])


def gallery() -> list[Contender]:
    """Every parser of GALLERY, in teaching order (`streamlab.net.harness.broken_http.gallery()` adds two more)."""
    return [gallery_contender(name) for name in GALLERY]
