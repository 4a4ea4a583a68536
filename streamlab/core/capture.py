"""Real captured streams as values: a capture's bytes, its record and the time of every read (sans-IO core).

`streamlab.net.capture` records what a real server sends (`data/captures/<server>-<version>-<model>/`): per
stream, `NAME.sse` holds the body as received and `NAME.json` the request, the response's status and headers,
the time of every read, the server's flags and CPU time, and the quirk the stream shows. This module reads them
back as `Capture` values, so every tool can use real bytes with their real pacing, offline:

* the stand-in replays them (`streamlab.core.standin.replay`): each read becomes one HTTP chunk of exactly those
  bytes, after the recorded gap;
* the split harness takes one as a fixture (`fixture_from_capture`), so lab 02's parsers meet a real body;
* the accumulators and the metrics read them (`Capture.events`, `Capture.arrivals`, `Capture.timing`).

The reads' times are seconds from the moment the request was sent. A stored body may be shorter than the bytes
received (`record["redacted"]`: file paths in a traceback replaced); `Capture.chunks` then cuts the stored body
where the reads fell, the last chunk taking what is left, so the chunks always join to the stored body.
Reading the packaged files is all the I/O here: no sockets, no clocks.

A capture folder may come from anyone (`streamlab standin --replay DIR`), so loading one checks what it would
make the stand-in send: every name is a plain file name (`CAPTURE_NAME`: no `..`, no `/`), every file is a
regular file inside the folder (no symlink out of it, none to /dev/zero) of at most `MAX_CAPTURE_BYTES`, the
status is a final one (200 to 599), every header value is printable (no CR or LF to inject a header), every
time is a finite number of seconds from 0 to `MAX_SECONDS` (no infinite, NaN or negative pause) and every read
a whole number of bytes (`validate_record`). A capture's values are computed once (`Capture.reads`,
`Capture.chunks`): loading had been quadratic in reads, 8.8-34 s for 4,000.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from streamlab.core.endings import Ending
from streamlab.core.harness.fixtures import Expected, Fixture, data_dir
from streamlab.core.metrics import Timing, timing_from_arrivals
from streamlab.core.sse import SSEEvent, SSEParser, is_event_stream

__all__ = [
    "Read",
    "Capture",
    "DEFAULT_CAPTURES",
    "captures_folder",
    "load_capture",
    "load_captures",
    "fixture_from_capture",
    "validate_record",
    "CAPTURE_NAME",
    "MAX_CAPTURE_BYTES",
    "MAX_SECONDS",
]

CAPTURE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
"""A capture's name: a plain file name (no path, no `..` ahead), also sent as a header value on replay."""
MAX_CAPTURE_BYTES = 64 * 1024 * 1024
"""The largest `NAME.sse` or `NAME.json` (or `index.json`) a folder may hold."""
MAX_SECONDS = 3600.0
"""The latest moment a capture may record (seconds after its request): a replay never pauses longer."""
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\U0010ffff]*")  # no CR, LF or other control character

DEFAULT_CAPTURES = "llama-cpp-python-0.3.36-gemma3-270m-q4_k_m"
"""The packaged folder of llama-cpp-python 0.3.36 serving Gemma 3 270M, the captures lab 11 replays."""


@dataclass(frozen=True)
class Read:
    """One read of the response body: `at` seconds after the request was sent, `size` bytes."""

    at: float
    size: int


@dataclass(frozen=True)
class Capture:
    """One captured response: its `name`, the stored `body` and the `record` (the parsed `NAME.json`).

    Everything else is read from the record: `status`, `headers`, `reads`, how the body ended (`ending`), the
    request that was sent, the server's flags and CPU time, and the `quirk` it shows.
    """

    name: str
    body: bytes
    record: Mapping[str, Any]

    def __repr__(self) -> str:
        return f"Capture({self.name!r}, {self.status}, {len(self.body)} bytes, {len(self.reads)} reads)"

    # -- the response -------------------------------------------------------------------------------

    @property
    def status(self) -> int:
        return int(self.record["response"]["status"])

    @property
    def headers(self) -> tuple[tuple[str, str], ...]:
        """The response headers as received, names as the server spelled them."""
        return tuple((str(k), str(v)) for k, v in self.record["response"]["headers"])

    def header(self, name: str) -> str | None:
        """The first header called `name` (any case), or None."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    @property
    def content_type(self) -> str:
        return self.header("content-type") or ""

    @property
    def headers_at(self) -> float:
        """When the response headers arrived, in seconds after the request was sent."""
        return float(self.record["response"].get("headers_at") or 0.0)

    @cached_property
    def reads(self) -> tuple[Read, ...]:
        """Every read of the body (computed once: each caller had rebuilt it, per read)."""
        return tuple(Read(float(r["at"]), int(r["bytes"])) for r in self.record["reads"])

    @cached_property
    def chunks(self) -> tuple[bytes, ...]:
        """The stored body cut where the reads fell: one chunk per read, joined they give `body` exactly."""
        out: list[bytes] = []
        start = 0
        reads = self.reads
        for i, read in enumerate(reads):
            end = len(self.body) if i == len(reads) - 1 else min(start + read.size, len(self.body))
            out.append(self.body[start:end])
            start = end
        if start < len(self.body):  # a body with no reads recorded: one chunk
            out.append(self.body[start:])
        return tuple(out)

    @cached_property
    def gaps(self) -> tuple[float, ...]:
        """Seconds before each read: the first counted from the request, each later one from the read before."""
        times = [r.at for r in self.reads]
        return tuple(max(0.0, b - a) for a, b in zip([0.0, *times], times))

    @property
    def ending(self) -> Ending:
        """How the body ended for the client that captured it: HTTP_ERROR (not a 2xx), BROKEN (the server broke
        the HTTP framing: `transport_error`), CANCELLED (the client closed it: `client.closed_after_reads`), or
        COMPLETE (the body ended cleanly)."""
        if not 200 <= self.status < 300:
            return Ending.HTTP_ERROR
        if self.record.get("transport_error"):
            return Ending.BROKEN
        if (self.record.get("client") or {}).get("closed_after_reads") is not None:
            return Ending.CANCELLED
        return Ending.COMPLETE

    @property
    def end_at(self) -> float:
        """When the capture's body ended for its client: the transport error, the client's close, or the last
        read (the headers' arrival for an empty body)."""
        error = self.record.get("transport_error") or {}
        closed = (self.record.get("client") or {}).get("closed_at")
        last = self.reads[-1].at if self.reads else self.headers_at
        return max(last, float(error.get("at") or 0.0), float(closed or 0.0))

    # -- the request and the server -------------------------------------------------------------------

    @property
    def request(self) -> dict[str, Any] | None:
        """The JSON body that was sent (a copy), or None when the body sent was not JSON (`request_text`)."""
        body = self.record["request"].get("body")
        return json.loads(json.dumps(body)) if body is not None else None

    @property
    def request_text(self) -> str | None:
        """The exact text sent when it was not a JSON value."""
        return self.record["request"].get("body_text")

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt's length in tokens as the server counted it, when the capture recorded it."""
        value = self.record["request"].get("prompt_tokens")
        return int(value) if value is not None else None

    @property
    def quirk(self) -> str:
        return str(self.record.get("quirk", ""))

    @property
    def flags(self) -> tuple[str, ...]:
        """The server's command-line settings when this was captured."""
        return tuple(self.record.get("server", {}).get("flags", ()))

    def flag(self, name: str) -> str | None:
        """The value given to the server flag `name` (e.g. "--chat_format"); the last one counts, as in argparse."""
        values = [b for a, b in zip(self.flags, self.flags[1:]) if a == name]
        return values[-1] if values else None

    @property
    def server_cpu_seconds(self) -> float | None:
        """The server process's CPU time (user + system) over the capture, about a second after it ended."""
        value = self.record.get("server_cpu_seconds")
        return float(value) if value is not None else None

    # -- as events and timings ---------------------------------------------------------------------

    def arrivals(self) -> list[tuple[float, SSEEvent]]:
        """Every event of the body with the time of the read that completed it (for `streamlab.core.metrics`)."""
        parser = SSEParser()
        return [(read.at, event) for read, chunk in zip(self.reads, self.chunks) for event in parser.feed(chunk)]

    def events(self) -> list[SSEEvent]:
        """The body's events, parsed whole."""
        return [event for _, event in self.arrivals()]

    def timing(self, label: str | None = None) -> Timing:
        """What a streaming client made visible over time, from the recorded reads (`streamlab.core.metrics`)."""
        return timing_from_arrivals(label or self.name, self.arrivals(), 0.0, self.end_at)

    def content_times(self) -> list[float]:
        """The time of every read that added visible text: the first is the TTFT, the spacing the decode."""
        return [t for t, _ in self.timing().points]


def captures_folder(name: str = DEFAULT_CAPTURES) -> Path:
    """A packaged capture folder, `data/captures/NAME/` (found through `streamlab.core.harness.fixtures.data_dir`)."""
    return data_dir() / "captures" / name


def _inside(where: Path, name: str) -> bytes:
    """The bytes of file `name` in folder `where`: a regular file inside it (after every symlink is followed),
    of at most `MAX_CAPTURE_BYTES`; anything else is refused with a ValueError."""
    path = where / name
    real, folder = path.resolve(), where.resolve()
    if not real.is_relative_to(folder):
        raise ValueError(f"{path} leads out of the capture folder (to {real})")
    if not real.is_file():  # a device (/dev/zero), a folder, a pipe: never read
        if not real.exists():
            raise FileNotFoundError(f"no file {path}")
        raise ValueError(f"{path} is not a regular file")
    with real.open("rb") as handle:
        data = handle.read(MAX_CAPTURE_BYTES + 1)
    if len(data) > MAX_CAPTURE_BYTES:
        raise ValueError(f"{path} holds more than {MAX_CAPTURE_BYTES} bytes")
    return data


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} is not a finite number of seconds: {value!r}")
    if not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{what} is {value!r} s: not between 0 and {MAX_SECONDS:g}")
    return float(value)


def validate_record(name: str, record: Any) -> None:
    """Refuse (ValueError) a capture whose replay would send what no server sends: a name that is not a plain
    file name, a status outside 200-599, a header value with a control character (CR LF injects headers), a
    time that is not finite or is negative or past `MAX_SECONDS`, a read that is not a whole number of bytes."""
    if not isinstance(name, str) or not CAPTURE_NAME.fullmatch(name):
        raise ValueError(f"capture name {name!r} is not a plain name (letters, digits, . _ -; at most 100)")
    if not isinstance(record, dict):
        raise ValueError(f"capture {name!r}: its record is not a JSON object")
    for key in ("request", "response", "reads"):
        if key not in record:
            raise ValueError(f"capture {name!r}: its record has no {key!r}")
    response, reads = record["response"], record["reads"]
    status = response.get("status") if isinstance(response, dict) else None
    if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
        raise ValueError(f"capture {name!r}: status {status!r} is not a final HTTP status (200 to 599)")
    headers = response.get("headers", [])
    if not isinstance(headers, list) or not all(
        isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) and _HEADER_VALUE.fullmatch(x) for x in h)
        for h in headers
    ):
        raise ValueError(f"capture {name!r}: its headers are not [name, value] pairs of printable text")
    _seconds(response.get("headers_at") or 0.0, f"capture {name!r}: headers_at")
    if not isinstance(reads, list) or not isinstance(record["request"], dict):
        raise ValueError(f"capture {name!r}: its reads are not a list")
    for i, read in enumerate(reads):
        size = read.get("bytes") if isinstance(read, dict) else None
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"capture {name!r}: read {i} has no whole number of bytes")
        _seconds(read.get("at"), f"capture {name!r}: read {i}'s time")
    for where, field in ((record.get("transport_error"), "at"), (record.get("client"), "closed_at")):
        if isinstance(where, dict) and where.get(field) is not None:
            _seconds(where[field], f"capture {name!r}: {field}")


def load_capture(name: str, folder: str | Path | None = None) -> Capture:
    """Load `NAME.sse` and `NAME.json` from `folder` (default: the packaged llama-cpp-python folder), checked
    (`validate_record`; both files regular files inside the folder, neither over `MAX_CAPTURE_BYTES`)."""
    where = Path(folder) if folder is not None else captures_folder()
    if not isinstance(name, str) or not CAPTURE_NAME.fullmatch(name):
        raise ValueError(f"capture name {name!r} is not a plain name (letters, digits, . _ -; at most 100)")
    try:
        record = json.loads(_inside(where, f"{name}.json").decode("utf-8"))
        body = _inside(where, f"{name}.sse")
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"no capture {name!r} in {where} (NAME.sse and NAME.json)") from exc
    except (UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"capture {name!r} in {where}: its record is not JSON ({exc})") from None
    validate_record(name, record)
    return Capture(name, body, record)


def load_captures(folder: str | Path | None = None) -> dict[str, Capture]:
    """Every capture in `folder` by name, in the order of its `index.json` (sorted by name without one)."""
    where = Path(folder) if folder is not None else captures_folder()
    if (where / "index.json").is_file():
        index = json.loads(_inside(where, "index.json").decode("utf-8"))
        listed = index.get("captures") if isinstance(index, dict) else None
        if not isinstance(listed, list) or not all(isinstance(c, dict) for c in listed):
            raise ValueError(f"{where / 'index.json'} has no list of captures")
        names = [c.get("name") for c in listed]
    else:
        names = sorted(p.stem for p in where.glob("*.sse"))
    if not names:
        raise FileNotFoundError(f"no captures in {where}")
    return {name: load_capture(name, where) for name in names}


def fixture_from_capture(capture: Capture) -> Fixture:
    """A split-harness fixture (`streamlab.core.harness.fixtures.Fixture`) of a captured event stream.

    The expectation is not taken from any parser: it holds only for a body made of plain `data: VALUE` lines
    and one-line comments (the keep-alive pings a slow live stream carries), each followed by one blank line,
    with LF line ends (what llama-cpp-python sends), where the standard's result can be read off directly: one
    "message" event per data block, its data the text after "data: ", nothing for a comment. A body of any
    other shape is refused (ValueError): write its expectation by hand, as for the other fixtures.
    """
    if capture.status != 200 or not is_event_stream(capture.content_type):
        raise ValueError(f"capture {capture.name!r} is not an event stream ({capture.status} {capture.content_type})")
    text = capture.body.decode("utf-8")
    blocks = text.split("\n\n")
    if blocks[-1]:
        raise ValueError(f"capture {capture.name!r} does not end with a blank line: write its expectation by hand")
    events = []
    comments = False
    for i, block in enumerate(blocks[:-1]):
        one_line = "\n" not in block and "\r" not in block and not block.startswith("\ufeff")
        if one_line and block.startswith(":"):  # a keep-alive comment (sse-starlette's ping): no event
            comments = True
            continue
        if not one_line or not block.startswith("data: "):
            raise ValueError(
                f"capture {capture.name!r}, block {i}: not one plain `data: ` line or comment; write its "
                "expectation by hand"
            )
        events.append(SSEEvent("message", block[len("data: ") :], ""))
    rules: tuple[str, ...] = ("eol-lf", "field-split", "space-once", "dispatch-blank-line")
    if comments:
        rules += ("comment", "no-dispatch-without-data")
    if any(b > 0x7F for b in capture.body):
        rules += ("utf8",)
    server = capture.record.get("server", {})
    source = (
        f"captured from {server.get('name', 'a real server')} {server.get('version', '')}".rstrip()
        + f" on {capture.record.get('captured', '?')} (streamlab.net.capture)"
    )
    return Fixture(
        f"capture:{capture.name}", capture.body, Expected(tuple(events), None, False, ""), capture.quirk, source, rules
    )
