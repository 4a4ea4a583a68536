"""The broken parsers that read their lines through httpx (I/O layer), and the whole gallery in teaching order.

Two parsers of lab 02's gallery get their lines from a real `httpx.Response` (built in memory by
`streamlab.net.harness.peers.response_from_chunks`, no socket): the usual loop over `response.iter_lines()`, and a
sample parser fed by it. They need httpx, so they live here, beside the peers, and not in the sans-IO
`streamlab.core.harness.broken`, which holds every other gallery parser.

`GALLERY` here is the whole gallery: the core's parsers with these two in their teaching places (the order
lab 02 prints). `gallery()`, `gallery_contender()`, `bug_of()`, `found_in()` and `SHOWCASE` work like the
core's, over all of it.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamlab.core.harness import broken
from streamlab.core.harness.broken import GalleryEntry, TextLineParser, bug_line, entry_contender, found_in_text
from streamlab.core.harness.fuzz import Contender, ParseResult
from streamlab.core.sse import SSEEvent
from streamlab.net.harness.peers import response_from_chunks

__all__ = [
    "HttpxIterLines",
    "HttpxLinesSample",
    "HTTP_GALLERY",
    "TEACHING_ORDER",
    "GALLERY",
    "SHOWCASE",
    "gallery",
    "gallery_contender",
    "bug_of",
    "found_in",
]


class HttpxIterLines(TextLineParser):
    """Uses httpx's `response.iter_lines()` for the lines: splits JSON text at U+2028, U+0085, form feed...

    httpx's line iterator follows `str.splitlines()`, not the SSE rules: it ends a line at U+2028,
    U+2029, U+0085, form feed, vertical tab and the separators \\x1c-\\x1e, so a data line whose JSON
    contains one of them arrives in two pieces, even on the whole stream. (It does handle a CRLF cut
    between chunks.) The byte-order mark is dropped here so that only the line-splitting bug shows.
    This adapter needs a real `httpx.Response`, so it only runs through `gallery_contender`, not `feed`.

    Found in: `for line in response.iter_lines(): if line.startswith("data:")` — the usual way to read
    SSE with httpx without a library.
    """

    def feed(self, chunk: bytes) -> list[SSEEvent]:  # pragma: no cover - guidance only
        raise TypeError("HttpxIterLines reads lines from an httpx.Response; use gallery_contender()")

    @staticmethod
    def run(chunks: Sequence[bytes]) -> ParseResult:
        """Read the chunks as httpx's line iterator cuts them, then interpret the lines correctly."""
        parser = HttpxIterLines()
        events: list[SSEEvent] = []
        for k, line in enumerate(response_from_chunks(chunks).iter_lines()):
            if k == 0 and line.startswith("\ufeff"):
                line = line[1:]
            events += parser.feed_lines([line])
        return ParseResult(tuple(events), parser.retry_ms, None, parser.last_event_id)


class HttpxLinesSample:
    """A sample parser waiting for a "\\n" line, fed by httpx's `iter_lines()`: yields nothing at all.

    `sample_parse_sse_lines(response.iter_lines())` with a real `httpx.Response`. Since httpx strips line
    endings, the blank-line test `line == "\\n"` never matches and no event is ever produced: the parser
    fails every fixture that has an event, whole or cut, and its other bugs never get a chance to show.
    A mocked test with hand-written lines ending in "\\n" would have passed.

    Found in: sample code for streaming chat completions with httpx that tests `line == "\\n"` for the end
    of an event while reading `response.iter_lines()`, which never yields a line ending.
    """

    @staticmethod
    def run(chunks: Sequence[bytes]) -> ParseResult:
        """What `sample_parse_sse_lines` yields from httpx's lines, as events."""
        lines = response_from_chunks(chunks).iter_lines()
        return ParseResult(tuple(SSEEvent("message", data) for data in broken.sample_parse_sse_lines(lines)))


HTTP_GALLERY: dict[str, GalleryEntry] = {
    "httpx-iter-lines": GalleryEntry(
        HttpxIterLines, frozenset({"events", "retry_ms", "last_event_id"}), "unicode-line-separators"
    ),
    "httpx-lines-sample": GalleryEntry(HttpxLinesSample, frozenset({"events"}), "spec-three-messages"),
}
"""The gallery parsers that read their lines through httpx."""

TEACHING_ORDER: tuple[str, ...] = (
    "decode-each-chunk",
    "decoder+splitlines",
    "blank-line-is-LFLF",
    "data-needs-space",
    "dispatch-at-end",
    "keeps-bom",
    "phantom-events",
    "retry-with-int",
    "strips-values",
    "chunk-ends-line",
    "httpx-iter-lines",
    "find-the-bugs-snippet",
    "requests-lines-sample",
    "httpx-lines-sample",
)
"""Every gallery parser, in the order lab 02 shows them: one-method bugs first, whole sample parsers last."""

GALLERY: dict[str, GalleryEntry] = {name: (broken.GALLERY | HTTP_GALLERY)[name] for name in TEACHING_ORDER}
"""The whole gallery: `streamlab.core.harness.broken.GALLERY` and `HTTP_GALLERY`, in TEACHING_ORDER."""

SHOWCASE: dict[str, str] = {name: entry.showcase for name, entry in GALLERY.items()}
"""For each gallery parser, the fixture whose smallest failing cut shows its bug best."""


def bug_of(name: str) -> str:
    """The one-line description of a gallery parser's bug (its docstring's first line)."""
    return bug_line(GALLERY[name].parser)


def found_in(name: str) -> str:
    """Where code with this bug is found (the docstring's "Found in:" paragraph)."""
    return found_in_text(GALLERY[name].parser)


def gallery_contender(name: str) -> Contender:
    """One gallery parser (any of the whole gallery) as a harness contender."""
    return entry_contender(name, GALLERY[name])


def gallery() -> list[Contender]:
    """Every broken parser of the gallery, in teaching order."""
    return [gallery_contender(name) for name in GALLERY]
