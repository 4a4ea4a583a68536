"""Read an HTTP/1.x request head and decide whether to take its body (sans-IO core: bytes in, values out).

The stand-in's handler feeds the bytes it received; the functions here say what they are and what to do:

* `request_line_reply(line)`: as soon as the first line is in, whether it is so wrong that the request
  must be answered now (an HTTP/0.9-style line has no headers to wait for: it gets its 400 at once).
* `head_end(buffer)`: where the head ends (the first blank line), if it has arrived.
* `parse_head(raw)`: the `RequestHead`, or the `Reply` that refuses it.
* `admit(head, max_body_bytes=...)`: `ReadBody` (how many bytes to read, and whether to say
  `100 Continue` first), or the refusal. The size is checked *before* `100 Continue`, so a client that
  asked first never uploads a body that would be refused.

Every refusal is an OpenAI-shaped JSON error (`shapes.error_body`) that closes the connection, because after
a malformed head the server cannot know where the next request would start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from streamlab.core.shapes import error_body
from streamlab.core.standin.actions import Reply

__all__ = [
    "RequestHead",
    "Request",
    "ReadBody",
    "MAX_HEAD_BYTES",
    "request_line_reply",
    "head_end",
    "parse_head",
    "admit",
    "refusal",
]

MAX_HEAD_BYTES = 64 * 1024
"""The most bytes a request head may take (request line and headers); more gets 431."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VERSION = re.compile(r"HTTP/(\d)\.(\d)")
_HEAD_END = re.compile(rb"\r?\n\r?\n")


def refusal(
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: tuple[tuple[str, str], ...] = (),
) -> Reply:
    """An OpenAI-shaped `invalid_request_error` that closes the connection after unread input is drained."""
    return Reply(status, error_body(message, "invalid_request_error", code, param), headers, close=True, drain=True)


@dataclass(frozen=True)
class RequestHead:
    """A parsed request head. Header names are lower-cased; values are the Latin-1 text of their bytes."""

    method: str
    target: str
    version: str
    headers: tuple[tuple[str, str], ...]

    def get(self, name: str) -> str | None:
        """The first value of header `name` (any case), or None."""
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    def get_all(self, name: str) -> list[str]:
        """Every value of header `name`, in arrival order."""
        name = name.lower()
        return [v for k, v in self.headers if k == name]

    @property
    def keep_alive(self) -> bool:
        """Whether the client lets the connection carry another request after this one."""
        tokens = {t.strip().lower() for v in self.get_all("connection") for t in v.split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens

    @property
    def path(self) -> str:
        """The target's path without its query string."""
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        """The target's query string, parsed."""
        return parse_qs(urlsplit(self.target).query)

    def as_dict(self) -> dict[str, str]:
        """The headers as one dict (a repeated header keeps its last value), as request records show them."""
        return dict(self.headers)


@dataclass(frozen=True)
class Request:
    """A whole request: its head and its body bytes. What the planner decides on. `peer` is the client's
    address and `now` the time it is decided at (seconds on a monotonic clock): the I/O layer fills both in,
    for a room's per-address limits (`streamlab.core.standin.door`)."""

    head: RequestHead
    body: bytes = b""
    peer: str = ""
    now: float = 0.0


@dataclass(frozen=True)
class ReadBody:
    """Read `length` body bytes, after sending `100 Continue` when `send_continue`."""

    length: int
    send_continue: bool = False


def request_line_reply(line: bytes) -> Reply | None:
    """A refusal for a request line that is wrong on its own, else None (the rest of the head may follow)."""
    text = line.rstrip(b"\r\n").decode("latin-1")
    words = text.split(" ")
    if len(words) == 2 and words[0] == "GET":
        return refusal(
            400,
            "HTTP/0.9 requests are not supported: send an HTTP/1.1 request line "
            "(method, target and version), then headers",
        )
    if len(words) != 3 or not all(words):
        return refusal(400, f"malformed request line {_short(text)!r}: expected METHOD TARGET HTTP/1.1")
    method, target, version = words
    if not _TOKEN.fullmatch(method):
        return refusal(400, f"malformed method {_short(method)!r} in the request line")
    match = _VERSION.fullmatch(version)
    if match is None:
        return refusal(400, f"malformed HTTP version {_short(version)!r} in the request line")
    if match.group(1) != "1":
        return refusal(505, f"HTTP version {version} is not supported: this stand-in speaks HTTP/1.1")
    if not (target.startswith("/") or target == "*" or "://" in target):
        return refusal(400, f"malformed request target {_short(target)!r}")
    return None


def head_end(buffer: bytes | bytearray, start: int = 0) -> int | None:
    """The offset just after the blank line that ends the head in `buffer`, or None if it has not arrived.

    Lines may end with CRLF or a bare LF (accepted, as most servers do). `start` skips bytes already
    searched (less the three a line end could straddle), so a head arriving a byte at a time costs linear time."""
    match = _HEAD_END.search(buffer, start)
    return None if match is None else match.end()


def parse_head(raw: bytes) -> RequestHead | Reply:
    """Parse the head `raw` (request line, header lines, blank line) into a `RequestHead`, or refuse it."""
    lines = raw.decode("latin-1").split("\n")
    line = lines[0].rstrip("\r")
    problem = request_line_reply(line.encode("latin-1"))
    if problem is not None:
        return problem
    method, target, version = line.split(" ")
    headers: list[tuple[str, str]] = []
    for number, text in enumerate(lines[1:], start=2):
        text = text.rstrip("\r")
        if not text:
            break
        if text[0] in " \t":
            return refusal(400, f"header line {number} starts with whitespace (obsolete line folding is refused)")
        name, colon, value = text.partition(":")
        if not colon or not _TOKEN.fullmatch(name):
            return refusal(400, f"malformed header line {number}: {_short(text)!r}")
        headers.append((name.lower(), value.strip(" \t")))
    return RequestHead(method, target, version, tuple(headers))


def admit(head: RequestHead, *, max_body_bytes: int) -> ReadBody | Reply:
    """Decide how to take the body: its length (checked against the limit before any `100 Continue`)."""
    if head.get("transfer-encoding") is not None:
        return refusal(411, "chunked request bodies are not supported: send Content-Length")
    values = [v.strip() for text in head.get_all("content-length") for v in text.split(",")]
    if not values:
        length = 0
    else:
        if len(set(values)) > 1:
            return refusal(400, f"conflicting Content-Length headers: {', '.join(values)}")
        if not values[0].isdigit() or not values[0].isascii():
            return refusal(400, f"invalid Content-Length {values[0]!r}")
        if len(values[0]) > 18:  # int() refuses 4,300 digits and more: a 5,000-digit length was a 500
            return refusal(
                413,
                f"request body of {_short(values[0], 30)} bytes exceeds the stand-in's limit of {max_body_bytes} bytes",
            )
        length = int(values[0])
    if length > max_body_bytes:
        return refusal(413, f"request body of {length} bytes exceeds the stand-in's limit of {max_body_bytes} bytes")
    expect = head.get("expect")
    if expect is not None and expect.lower() != "100-continue":
        return refusal(417, f"unsupported Expect header {expect!r}: only 100-continue is understood")
    return ReadBody(length, send_continue=expect is not None and length > 0 and head.version == "HTTP/1.1")


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[:width] + "..."
