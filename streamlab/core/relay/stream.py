"""What a streaming relay must do, and the pure half of doing it: bytes in, decisions out (sans-IO core).

A relay sits between a client and an SSE upstream (a backend in front of a model API). Its five rules,
`REQUIREMENTS`, are stated here once: the reference relay (`streamlab.net.relay.app`) documents itself with them,
the `streamlab relay` help prints them, and the relay checker (`streamlab.net.relaycheck.run`) grades each one.

`RelayedStream` is everything about one stream that needs no socket and no clock (timestamps are passed in):
it is fed the upstream's bytes, answers with the bytes to send downstream, keeps the running summary
(outcome, characters of text, usage, TTFT, total time) by running the bytes through `SSEParser` and the
dialect's accumulator, and decides when a keep-alive may be written and what the final bytes are when the
upstream dies. The I/O layer only moves bytes and reads the clock.

Theory of operation: the parser is fed exactly the upstream's bytes, so its state says where the client's
parser stands too (the relay's own comment lines do not move it):

* Forwarding: bytes go downstream as they arrive, unchanged. The one exception: when a keep-alive went out
  before the upstream's first byte, a byte-order mark the upstream then sends is dropped (a BOM only counts
  at the very start of a stream; after our comment it would become part of the first field name).
  Parsing comes after: `forward` returns the bytes to send and keeps the chunk, `catch_up` parses what was
  kept, a burst of chunks 64 KiB at a time (the same events: results never depend on chunk boundaries; until the
  first token each chunk is parsed with its own arrival time, the TTFT). Every method that reads the
  parse catches up first; `upstream` is the two at once. After the first token a loop may leave the parse
  for whoever reads it next (`follow`: up to `MAX_UNPARSED_BYTES`), so a fast stream's bytes never
  wait for its summary; a Chat stream whose bytes end with a `[DONE]` event of its own says so without a
  parse (`at_done`).
* Keep-alive (`keepalive`): a comment line, and only at a line boundary. Inside a line it would become part
  of that line (corrupting it), so nothing is written while `parser.line_open`. Between two lines of one
  event a comment line is legal and changes nothing, but a blank line there would dispatch the event early,
  so inside an event the comment gets no blank line; between events it gets the usual one. After a CR the
  client cannot yet know whether an LF follows (CRLF is one line break), so the comment ends with CR too: an
  LF the upstream sends next then pairs with our CR exactly as it would have paired with its own.
* Death (`upstream_ended`): if the answer reached its terminal marker, or an error the official SDK raises
  on (a JSON object with an `"error"` key) already went downstream, nothing is added. Otherwise the relay
  ends what the upstream left open and adds one marked event (`marker_frame`): for Chat a data frame
  `{"error": {...}}`, for Responses an `event: error` frame whose JSON is an `error` event that also carries
  an `"error"` object; on both the official SDK raises `APIError`. Ending what was left open: a partial line
  is completed with LF; then, inside an event, a blank line ends that event. There is no way to withdraw
  bytes a client already holds, and every continuation of a started event dispatches its data, so the least
  bad choice is to let the partial event go out on its own (a client that decodes it fails loudly: the SDK
  raises `JSONDecodeError` on a data line cut in half) and to put the marker after it, parsed on its own as
  the last event. A block that holds no data yet (only `event:` or `id:` lines) dispatches nothing at its
  blank line, so the marker is then the only event. Two costs remain and are accepted: a cut `id:` line
  commits the cut ID, a cut `retry:` line sets the cut value.
* Summary (`summary`): one JSON-ready dict per stream; `SUMMARY_FIELDS` are the keys every relay's summary
  line must have (the checker matches lines to its streams by `model`).
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamlab.core.accumulate import ChatAccumulator, ResponsesAccumulator
from streamlab.core.endings import Ending, Outcome
from streamlab.core.errors import ErrorInStream, FrameError, SequenceError, SSELimitError
from streamlab.core.resume import SequenceCursor, is_content_event
from streamlab.core.safejson import json_or_none
from streamlab.core.sse import SSEEvent, SSEParser
from streamlab.core.untrusted import json_text

__all__ = [
    "Requirement",
    "REQUIREMENTS",
    "requirement",
    "SUMMARY_FIELDS",
    "KEEPALIVE_COMMENT",
    "MARKER_CODES",
    "MAX_UNPARSED",
    "MAX_UNPARSED_BYTES",
    "TOKEN_SLICE",
    "dialect_of",
    "marker_frame",
    "raises_in_sdk",
    "RelayedStream",
    "summary_line",
    "capture_record",
    "capture_name",
]


SUMMARY_FIELDS: dict[str, str] = {
    "model": "the request's model (the checker matches summary lines to its streams by it)",
    "outcome": "complete, incomplete, failed, truncated or cancelled (streamlab.core.endings.Outcome)",
    "text_chars": "characters of answer text forwarded",
    "usage": "the usage object if the upstream sent one, else null",
    "ttft_s": "seconds from the request to the first token forwarded (null if none came)",
    "total_s": "seconds from the request to the end of the stream",
}
"""The keys every summary line must have, and what each holds."""


@dataclass(frozen=True)
class Requirement:
    """One rule a relay must keep: its number (1-5), a short key, a title, and the rule in full."""

    number: int
    key: str
    title: str
    rule: str

    def __str__(self) -> str:
        return f"({self.number}) {self.title}"


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement(
        1,
        "forward",
        "forward as bytes arrive, keeping a running summary",
        "Forward the upstream's bytes as they arrive, never holding back a whole event, while parsing "
        "them to keep a running summary: outcome, characters of text, usage if present, time to first "
        "token, total time.",
    ),
    Requirement(
        2,
        "disconnect",
        "close the upstream when the client goes away",
        "When the downstream client goes away, close the upstream connection promptly; the upstream's "
        "own record shows it (the stand-in's request outcome becomes 'client_gone').",
    ),
    Requirement(
        3,
        "keepalive",
        "keep-alive comments that never change the events",
        "When the upstream has been silent for the keep-alive interval, send an SSE comment. A "
        "keep-alive never changes the events a client parses: only at a line boundary, no blank line "
        "inside an event, and after a CR the comment ends with CR.",
    ),
    Requirement(
        4,
        "marked-end",
        "a marked final event when the upstream dies",
        "When the upstream dies mid-stream (cut, reset, an error after the 200, a stall past the "
        "deadline), end the downstream stream with a clearly marked final event, on which the "
        "official SDK raises, then end the body cleanly; never a silent end.",
    ),
    Requirement(
        5,
        "summary",
        "one JSON summary line per stream",
        "Write one summary line (a JSON object) per stream, with at least the keys " + ", ".join(SUMMARY_FIELDS) + ".",
    ),
)
"""The five rules of the capstone relay, in the order the lab builds them."""


def requirement(key: str | int) -> Requirement:
    """The requirement with this key ("forward"...) or number (1-5)."""
    for req in REQUIREMENTS:
        if key in (req.key, req.number):
            return req
    raise KeyError(f"no relay requirement {key!r}; known: {[r.key for r in REQUIREMENTS]}")


KEEPALIVE_COMMENT = "keep-alive"
"""The text of the relay's keep-alive comment (`: keep-alive`)."""

MARKER_CODES: dict[str, tuple[str, str]] = {
    Ending.BROKEN.value: ("upstream_broken", "the upstream connection broke mid-stream (closed or reset)"),
    Ending.READ_TIMEOUT.value: ("upstream_stalled", "the upstream sent nothing for longer than the deadline"),
    Ending.INCOMPLETE_EVENT.value: ("upstream_incomplete", "the upstream ended its body inside an event"),
    Ending.COMPLETE.value: ("upstream_ended_early", "the upstream ended its body before the answer's last event"),
    Ending.STOPPED.value: ("relay_stopped", "the relay shut down mid-stream"),
    "error": ("upstream_error", "the upstream reported an error inside the stream"),
}
"""The marked final event's `code` and message for each way an upstream dies (keyed by `Ending` value)."""

BOM = b"\xef\xbb\xbf"
DONE = b"[DONE]"
_IN_PROGRESS = Ending.IN_PROGRESS  # (a module constant: an enum member read through its class costs 0.2 us)

MAX_UNPARSED = 64
"""Chunks forwarded and not parsed yet past which a loop has `RelayedStream.catch_up` parse them (with
`MAX_UNPARSED_BYTES`: what one stream can hold unparsed)."""
MAX_UNPARSED_BYTES = 4 << 20
"""Bytes forwarded and not parsed yet past which a loop has `RelayedStream.catch_up` parse them. Until then the
parse waits: the bytes go out first, and the summary is caught up when something reads it (a keep-alive, the
end), so a fast stream's summary costs its client nothing (`RelayedStream.follow`)."""
TOKEN_SLICE = 4096
"""Bytes parsed at a time while looking for the first token in a large chunk (`RelayedStream.follow`)."""
OWN_PIECE = 1024
"""A chunk of at least this many bytes waits for the parse as it came (no copy); smaller ones are gathered into
one buffer (a bytes object per 20-byte chunk would cost more than its bytes). Copying each 64 KiB write into a
growing buffer had cost the relay a fifth of its throughput with 64 KiB writes (`RelayedStream.forward`)."""
_DONE_TAILS = (
    b"\n\ndata: [DONE]\n\n",
    b"\n\ndata:[DONE]\n\n",
    b"\r\n\r\ndata: [DONE]\r\n\r\n",
    b"\r\n\r\ndata:[DONE]\r\n\r\n",
)
"""How a Chat stream's bytes end when their last event is a `[DONE]` of its own (a blank line before it)."""


def dialect_of(path: str) -> str:
    """ "chat" for a Chat Completions path, "responses" for a Responses path (create or retrieve)."""
    return "responses" if "/responses" in path else "chat"


def marker_frame(dialect: str, code: str, message: str, *, sequence_number: int | None = None) -> bytes:
    """The relay's marked final event: an error the official SDK raises `APIError` on, in the dialect's shape.

    Chat: `data: {"error": {...}}`. Responses: `event: error` and an `error` event (type, code, message,
    param, sequence_number), which the SDK alone would hand over as an ordinary event, plus an `"error"`
    object, which makes it raise.
    """
    error = {"message": f"relay: {message}", "type": "relay_error", "param": None, "code": code}
    if dialect == "chat":
        return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
    obj: dict[str, Any] = {"type": "error", "code": code, "message": error["message"], "param": None}
    if sequence_number is not None:
        obj["sequence_number"] = sequence_number
    obj["error"] = error
    return b"event: error\ndata: " + json.dumps(obj).encode() + b"\n\n"


def raises_in_sdk(event: SSEEvent) -> bool:
    """True when the official SDK raises on this event: its data is a JSON object with a truthy `"error"`."""
    if '"error"' not in event.data:
        return False
    obj = json_or_none(event.data)  # None past the recursion limit too: the SDK cannot read it either
    return isinstance(obj, dict) and bool(obj.get("error"))


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


class RelayedStream:
    """One stream through a relay, sans-IO: upstream bytes in, downstream bytes and a summary out.

    `started` is the clock reading when the request arrived; every method that moves the stream takes `now`
    from the same clock. Call `upstream(chunk, now)` for each upstream chunk and send what it returns (or
    `forward(chunk, now)`, send, and `catch_up()` when no chunk is waiting: the bytes go out before the parse);
    `keepalive(now)` when the upstream has been silent for the interval (send it unless empty);
    `upstream_ended(ending, now, detail)` when the upstream's bytes stop (send what it returns, then end
    the body); `client_gone(now)` when the client left; `failed(ending, status, now, detail)` when no stream
    started (an error status, no connection). `summary()` is the summary line's dict.
    """

    def __init__(
        self,
        *,
        dialect: str,
        model: str | None = None,
        started: float = 0.0,
        stream_id: int = 0,
        route: str = "",
        status: int | None = None,
        keepalive_comment: str = KEEPALIVE_COMMENT,
    ) -> None:
        if dialect not in ("chat", "responses"):
            raise ValueError(f"dialect must be 'chat' or 'responses', got {dialect!r}")
        self.dialect = dialect
        self.model = model
        self.started = started
        self.stream_id = stream_id
        self.route = route
        self.status = status
        self.parser: SSEParser | None = SSEParser()
        self.accumulator: ChatAccumulator | ResponsesAccumulator = (
            ChatAccumulator() if dialect == "chat" else ResponsesAccumulator()
        )
        self._keepalive = b": " + keepalive_comment.encode("utf-8")
        self._accumulating = True
        self.raw = bytearray()  # the upstream's bytes, for --capture (kept only when `keep_raw`)
        self.keep_raw = False
        self.bytes_in = self.bytes_out = self.events = self.keepalives = 0
        self.ttft: float | None = None
        self.ended_at: float | None = None
        self.ending = Ending.IN_PROGRESS
        self.outcome: Outcome | None = None
        self.marked = False
        self.sdk_raises = False  # an event the official SDK raises on already went downstream
        self.detail = ""
        self.problem = ""  # why the summary stopped following the content (a malformed frame...), if it did
        self._strip_bom = False
        self._held = b""
        self._unparsed: list[tuple[bytes, float]] = []  # forwarded, not parsed yet (see `forward`)
        self._terminal = False  # the accumulator's outcome is complete or incomplete (as of `_terminal_at` events)
        self._terminal_at = 0
        # Whether the answer may have ended: a Chat answer cannot before the bytes "[DONE]" came (`answered`)
        self._may_end = dialect != "chat"
        self._last = b""  # the last bytes of the stream so far, for a "[DONE]" split across two chunks
        self._unparsed_bytes = 0
        # forwarded after the first token, not parsed yet, in order: large chunks as they came, small ones gathered
        self._later: collections.deque[bytes | bytearray | memoryview] = collections.deque()
        self._later_size = 0  # their bytes
        self._later_at = 0.0  # when its last bytes came
        # A Chat stream's bytes end with a `[DONE]` event of its own, read from the bytes, nothing parsed: every
        # client stops reading there, so the body may end now and the summary catch up after. `data: [DONE]` is
        # that event only with a blank line before its line and after it (`_DONE_TAILS`).
        self.at_done = False
        self._cursor: SequenceCursor | None = None  # the resume cursor, when `track_cursor` asked for one
        self._keepalive_seq: int | None = None  # the highest number a skipped keep-alive carried

    def track_cursor(self) -> None:
        """Keep a resume cursor (`SequenceCursor`) over the events: `cursor` is the last content event's number."""
        self._cursor = SequenceCursor()

    @property
    def cursor(self) -> int | None:
        """The `sequence_number` to resume after (`starting_after`): None when none is tracked, no content event
        came yet, or the numbers went wrong (a replay or a skip: resuming after them would corrupt the text)."""
        self.catch_up()
        return None if self._cursor is None else self._cursor.value

    # -- the stream --

    @property
    def done(self) -> bool:
        """True once the stream has ended one way or another (nothing more will be sent)."""
        return self.ending is not _IN_PROGRESS

    def upstream(self, chunk: bytes, now: float) -> bytes:
        """Take an upstream chunk; return the bytes to send downstream now (the chunk itself, as a rule).
        The same as `forward` then `catch_up`: the summary has taken the chunk in when this returns."""
        out = self.forward(chunk, now)
        self.catch_up()
        return out

    def forward(self, chunk: bytes, now: float) -> bytes:
        """Take an upstream chunk and return the bytes to send downstream now, leaving the parsing for
        `catch_up` (so the bytes go out first; several chunks can be parsed in one go). Every method here
        catches up first; call `catch_up()` before reading `parser`, `accumulator` or `events` directly."""
        if self.ending is not _IN_PROGRESS or not chunk:
            return b""
        self.bytes_in += len(chunk)
        if self.keep_raw:
            self.raw += chunk
        out = chunk
        if self._strip_bom:  # a keep-alive went out first: the upstream's BOM would no longer be at the start
            buf = self._held + chunk
            if len(buf) < 3 and BOM.startswith(buf):
                self._held, out = buf, b""
            else:
                self._strip_bom, self._held = False, b""
                out = buf[3:] if buf.startswith(BOM) else buf
        if self.ttft is None:  # each chunk with its own arrival time, for the TTFT
            self._unparsed.append((chunk, now))
        else:  # after it, the bytes alone: however they came, they are parsed in one go (`OWN_PIECE`)
            later = self._later
            tail = later[-1] if later else None
            if len(chunk) >= OWN_PIECE:
                later.append(chunk)
            elif isinstance(tail, bytearray):
                tail += chunk  # (in place: the buffer in `_later` grows)
            else:
                later.append(bytearray(chunk))
            self._later_size += len(chunk)
            self._later_at = now
        self._unparsed_bytes += len(chunk)
        last = self._last
        self._last = chunk[-24:] if len(chunk) >= 24 else (last + chunk)[-24:]
        if not self._may_end:  # "[DONE]" in this chunk, or across its start (the stream's last bytes before it)
            if 0x44 in chunk or 0x44 in last:  # a "D" first: a byte test costs a tenth of a bytes search
                self._may_end = DONE in chunk or DONE in last[-5:] + chunk[:5]
        if self._may_end and self.dialect == "chat":
            self.at_done = self._last.endswith(_DONE_TAILS)
        self.bytes_out += len(out)
        return out

    @property
    def unparsed(self) -> int:
        """Chunks forwarded but not parsed yet (see `forward`; after the first token they count as one)."""
        return len(self._unparsed) + (1 if self._later else 0)

    def follow(self) -> None:
        """Parse what may not wait: until the first token, the bytes up to it (a large chunk in `TOKEN_SLICE`
        slices, the rest left for later: its arrival is the TTFT, the rest is not needed yet); past
        `MAX_UNPARSED` chunks or `MAX_UNPARSED_BYTES` bytes, everything. The rest waits for whoever reads the
        parse next (a keep-alive, the end, the summary), so a fast stream's bytes never wait for its summary."""
        if self.ttft is None and self._unparsed:
            self._to_first_token()
        if self._unparsed_bytes >= MAX_UNPARSED_BYTES or len(self._unparsed) >= MAX_UNPARSED:
            self.catch_up()

    def _to_first_token(self) -> None:
        pending = self._unparsed
        while self.ttft is None and pending and self.parser is not None:
            chunk, at = pending.pop(0)
            self._unparsed_bytes -= len(chunk)
            for start in range(0, len(chunk), TOKEN_SLICE):
                self._parse(chunk[start : start + TOKEN_SLICE], at)
                if self.ttft is not None:
                    rest = chunk[start + TOKEN_SLICE :]
                    if rest:
                        pending.insert(0, (rest, at))
                        self._unparsed_bytes += len(rest)
                    break
        if self.ttft is not None and pending:
            self._behind_first_token()

    def _behind_first_token(self) -> None:
        """Chunks that came before the first token and are still unparsed once it is known wait with the later
        ones, ahead of them: from here on the bytes alone count, parsed a part at a time like the rest (a 64 KiB
        first write had made the whole body's summary one parse, 10,000 events alive at once, and the garbage
        collector's slowest pass run in one stream out of ten)."""
        pending, self._unparsed = self._unparsed, []
        later = self._later
        if not later:
            self._later_at = pending[-1][1]
        for chunk, _ in reversed(pending):
            later.appendleft(chunk)
            self._later_size += len(chunk)

    def catch_up_part(self, limit: int = 1 << 16) -> bool:
        """Parse about `limit` bytes of what waits (and first, one by one, the chunks from before the first
        token); True while more waits. An executor yields to its event loop between parts: a 4 MiB parse in one
        go would hold every other stream up, and the client's last bytes still in the server's write buffer."""
        pending = self._unparsed
        while self.ttft is None and pending:  # each with its own arrival time: that is the TTFT
            chunk, at = pending.pop(0)
            self._unparsed_bytes -= len(chunk)
            self._parse(chunk, at)
        if pending:
            self._behind_first_token()
        later = self._later
        if not later:
            return False
        parts: list[bytes | bytearray | memoryview] = []
        size = 0
        while later and size < limit:
            piece = later.popleft()
            if size + len(piece) > limit:  # cut: the rest waits, as a view (a large chunk is not copied each part)
                view, cut = memoryview(piece), limit - size
                later.appendleft(view[cut:])
                piece = view[:cut]
            parts.append(piece)
            size += len(piece)
        self._later_size -= size
        self._unparsed_bytes -= size
        first = parts[0]
        self._parse(first if len(parts) == 1 and isinstance(first, bytes) else b"".join(parts), self._later_at)
        return bool(later)

    def catch_up(self) -> None:
        """Parse the chunks `forward` passed on. Until the first token each is parsed on its own, with its own
        arrival time (that is the TTFT); after it, the bytes alone, a part at a time (`catch_up_part`: however
        they are cut, they give the same events)."""
        if self._unparsed or self._later:
            while self.catch_up_part():
                pass

    def _parse(self, chunk: bytes, now: float) -> None:
        if self.parser is None:
            return
        try:
            events = self.parser.feed(chunk)
        except SSELimitError as exc:
            events = exc.events
            self.parser = None
            self.problem = f"stopped parsing: {exc}"
        if events:
            self._events(events, now)

    def _events(self, events: list[SSEEvent], now: float) -> None:
        """Count the events, note one the official SDK raises on, and feed the accumulator (and, until the first
        token, watch for it: its arrival is the TTFT). Past the first token, a run of Chat text chunks of the shape
        the accumulator has learned goes in one call (`ChatAccumulator.feed_shaped`; they had cost a quarter of a
        fast stream's summary one by one). `_event`'s checks would change nothing for them: such a chunk is the
        learned chunk with other text, and the learned chunk was fed, so it was no keep-alive (those are never
        fed) and carried no error (an error is never learned); and the SDK raises only on an `"error"` key."""
        self.events += len(events)
        acc = self.accumulator
        shaped = acc.feed_shaped if isinstance(acc, ChatAccumulator) else None
        i, end = 0, len(events)
        while i < end:
            if shaped is not None and self.ttft is not None and self._cursor is None and self._accumulating:
                i = shaped(events, i)
                if i == end:
                    return
            self._event(events[i], now)
            i += 1

    def _event(self, event: SSEEvent, now: float) -> None:
        data = event.data
        if not self.sdk_raises and '"error"' in data and raises_in_sdk(event):
            self.sdk_raises = True
        if self._cursor is not None:
            try:
                self._cursor.admit_data(data)
            except SequenceError:
                self._cursor = None
        if not self._accumulating:
            return
        if (event.event == "keepalive" or '"keepalive"' in data) and not is_content_event(event):
            self._note_keepalive(data)  # nothing to summarise, and it may repeat a number (`SequenceCursor`)
            return
        before = self._progress() if self.ttft is None else -1
        try:
            self.accumulator.feed(event)
        except ErrorInStream:
            pass  # the accumulator keeps the error; its outcome is "failed"
        except (FrameError, SequenceError) as exc:
            self._accumulating = False
            self.problem = f"stopped following the content: {exc}"
        if before >= 0 and self._progress() > before:
            self.ttft = now - self.started

    def _note_keepalive(self, data: str) -> None:
        """Remember the highest number a Responses keep-alive carried (the marked final event's comes after it)."""
        obj = json_or_none(data)
        seq = obj.get("sequence_number") if isinstance(obj, dict) else None
        if isinstance(seq, int) and not isinstance(seq, bool):
            self._keepalive_seq = seq if self._keepalive_seq is None else max(seq, self._keepalive_seq)

    def _progress(self) -> int:
        acc = self.accumulator
        if isinstance(acc, ChatAccumulator):
            return (
                sum(map(len, acc.text.values()))
                + sum(map(len, acc.refusal.values()))
                + sum(len(c.arguments) for c in acc.tool_calls.values())
            )
        return (
            sum(map(len, acc.text.values()))
            + sum(map(len, acc.refusal.values()))
            + sum(map(len, acc.arguments.values()))
        )

    @property
    def answered(self) -> bool:
        """True when the answer reached its terminal event (complete, or incomplete by `length`...) and the
        bytes stop at an event boundary: the client holds the whole answer, the rest of the body adds nothing.
        Cheap enough to ask after every chunk, and it parses nothing it need not: a Chat answer ends only with
        `[DONE]`, whose bytes must have come first (the parser decodes strict UTF-8 and a data line holds no
        line break, so the text "[DONE]" comes only from those six bytes in a row); until they do, the answer
        has not ended whatever the parse would say. The outcome is looked at again only when an event came."""
        if not self._may_end:
            return False
        self.catch_up()
        if self.events != self._terminal_at:
            self._terminal_at = self.events
            self._terminal = self.accumulator.outcome() in (Outcome.COMPLETE, Outcome.INCOMPLETE)
        parser = self.parser
        return self._terminal and parser is not None and not (parser.line_open or parser.in_event)

    def keepalive(self, now: float) -> bytes:
        """The keep-alive to send now, or b"" when one would change what the client parses (see the module
        docstring: only at a line boundary; no blank line inside an event; CR after a CR)."""
        self.catch_up()
        parser = self.parser
        if self.done or parser is None or parser.line_open or self._held:
            return b""
        eol = b"\r" if parser.cr_pending else b"\n"
        frame = self._keepalive + eol + (b"" if parser.in_event else eol)
        if parser.bytes_fed == 0:
            self._strip_bom = True
        self.keepalives += 1
        self.bytes_out += len(frame)
        return frame

    def upstream_ended(self, ending: Ending | str, now: float, detail: str = "") -> bytes:
        """The upstream's bytes stopped (`Ending.COMPLETE` for a clean end of body, `BROKEN` for a cut or a
        reset, `READ_TIMEOUT` for a stall past the deadline, `STOPPED` when the relay shuts down). Returns
        the final bytes to send before ending the body: nothing when the answer reached its end, else the
        termination of what was left open and the marked final event."""
        if self.done:
            return b""
        self.catch_up()
        ending = Ending(ending)
        parser = self.parser
        open_event = parser is not None and (parser.line_open or parser.in_event)
        if ending is Ending.COMPLETE and open_event:
            ending = Ending.INCOMPLETE_EVENT
        self._finish(ending, now, detail)
        content = self.accumulator.outcome()
        if content in (Outcome.COMPLETE, Outcome.INCOMPLETE) or (content is Outcome.FAILED and self.sdk_raises):
            return b""
        key = "error" if content is Outcome.FAILED else ending.value
        code, message = MARKER_CODES.get(key, (f"upstream_{ending.value}", f"the upstream stream ended: {ending}"))
        if detail:
            message = f"{message} ({detail})"
        numbers = (getattr(self.accumulator, "last_sequence_number", None), self._keepalive_seq)
        seq = max((n for n in numbers if n is not None), default=None)
        out = self._close_open_event() + marker_frame(
            self.dialect, code, message, sequence_number=None if seq is None else seq + 1
        )
        self.marked = True
        self.bytes_out += len(out)
        return out

    def _close_open_event(self) -> bytes:
        """Bytes that end a partial line and an unfinished event, so the marker is parsed on its own."""
        parser = self.parser
        if parser is None:
            return b"\r\n\r\n"  # state unknown after a limit error: end a line, then a blank line, whatever CR came
        out = b""
        if parser.line_open:
            out += b"\n"  # the last byte is neither CR nor LF: an LF ends the line
            parser.feed(b"\n")
        if parser.in_event:
            blank = b"\r\n" if parser.cr_pending else b"\n"  # after a CR a lone LF would only finish its CRLF
            out += blank
            self.events += len(parser.feed(blank))  # the partial event (if it had data) goes out on its own
        return out

    def client_gone(self, now: float, detail: str = "") -> None:
        """The downstream client went away; the upstream is being closed. Outcome: cancelled, unless the
        answer had already reached its end."""
        if not self.done:
            self.catch_up()
            self.accumulator.cancel()
            self._finish(Ending.CLIENT_GONE, now, detail)

    def failed(self, ending: Ending | str, now: float, *, status: int | None = None, detail: str = "") -> None:
        """No stream started: the upstream answered with an error status (`HTTP_ERROR`, passed through), or
        could not be reached (`CONNECT_ERROR`, `READ_TIMEOUT`)."""
        if not self.done:
            self.catch_up()
            self.status = status
            self._finish(Ending(ending), now, detail)
            self.outcome = Outcome.FAILED

    def _finish(self, ending: Ending, now: float, detail: str) -> None:
        self.ending = ending
        self.ended_at = now
        self.detail = detail
        self.outcome = self.accumulator.outcome()

    # -- the summary --

    @property
    def text_chars(self) -> int:
        """Characters of answer text received so far (all choices, all content parts)."""
        self.catch_up()
        return sum(map(len, self.accumulator.text.values()))

    def summary(self) -> dict[str, Any]:
        """The summary line as a dict: `SUMMARY_FIELDS` first, then the details."""
        self.catch_up()
        total = None if self.ended_at is None else self.ended_at - self.started
        return {
            "model": self.model,
            "outcome": None if self.outcome is None else self.outcome.value,
            "text_chars": self.text_chars,
            "usage": self.accumulator.usage,
            "ttft_s": _seconds(self.ttft),
            "total_s": _seconds(total),
            "id": self.stream_id,
            "route": self.route,
            "status": self.status,
            "ending": self.ending.value,
            "marked": self.marked,
            "events": self.events,
            "keepalives": self.keepalives,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "detail": self.detail,
            "problem": self.problem,
        }


def summary_line(summary: Mapping[str, Any]) -> str:
    """One summary as one line of JSON: printable UTF-8 kept as is; what a terminal could act on or a reader
    could split the line at (escape sequences, C1 controls, U+2028, U+0085, lone surrogates: a client
    chooses the model name) escaped, so the line always encodes and stays one line
    (`streamlab.core.untrusted.json_text`)."""
    return json_text(dict(summary))


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def capture_name(stream_id: int, model: str | None) -> str:
    """A file stem for a captured stream: `relay-0003-MODEL`, with anything but letters, digits, `.`, `_`, `-`
    replaced."""
    return f"relay-{stream_id:04d}-{_UNSAFE.sub('_', model or 'unknown')[:60]}"


def capture_record(raw: bytes, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The `NAME.json` of a captured stream, in the fixture format (`streamlab.core.harness.fixtures`).

    Unlike the hand-written fixtures in `data/fixtures`, the expectation here comes from streamlab's own
    parser, and the description says so: review it against the standard before adding it to the data set.
    """
    parser = SSEParser()
    try:
        events = parser.feed(raw)
        truncated = parser.close()
        note = ""
    except SSELimitError as exc:
        events, truncated, note = exc.events, True, f" Parsing stopped: {exc}."
    return {
        "events": [{"event": e.event, "data": e.data, "id": e.last_event_id} for e in events],
        "retry": parser.retry_ms,
        "truncated": truncated,
        "last_event_id": parser.last_event_id,
        "rules": [],
        "description": (
            f"Captured by streamlab relay: stream {summary.get('id')} for model {summary.get('model')!r} "
            f"on {summary.get('route')}, outcome {summary.get('outcome')}, ending "
            f"{summary.get('ending')}.{note} Expectation written by streamlab's parser: review "
            "it by hand before adding it to data/fixtures."
        ),
        "source": "streamlab relay --capture",
    }
