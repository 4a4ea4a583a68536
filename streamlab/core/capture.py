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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamlab.core.endings import Ending
from streamlab.core.harness.fixtures import Expected, Fixture, data_dir
from streamlab.core.metrics import Timing, timing_from_arrivals
from streamlab.core.sse import SSEEvent, SSEParser

__all__ = [
    "Read",
    "Capture",
    "DEFAULT_CAPTURES",
    "captures_folder",
    "load_capture",
    "load_captures",
    "fixture_from_capture",
]

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

    @property
    def reads(self) -> tuple[Read, ...]:
        return tuple(Read(float(r["at"]), int(r["bytes"])) for r in self.record["reads"])

    @property
    def chunks(self) -> tuple[bytes, ...]:
        """The stored body cut where the reads fell: one chunk per read, joined they give `body` exactly."""
        out: list[bytes] = []
        start = 0
        for i, read in enumerate(self.reads):
            end = len(self.body) if i == len(self.reads) - 1 else min(start + read.size, len(self.body))
            out.append(self.body[start:end])
            start = end
        if start < len(self.body):  # a body with no reads recorded: one chunk
            out.append(self.body[start:])
        return tuple(out)

    @property
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


def load_capture(name: str, folder: str | Path | None = None) -> Capture:
    """Load `NAME.sse` and `NAME.json` from `folder` (default: the packaged llama-cpp-python folder)."""
    where = Path(folder) if folder is not None else captures_folder()
    try:
        record = json.loads((where / f"{name}.json").read_text(encoding="utf-8"))
        body = (where / f"{name}.sse").read_bytes()
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"no capture {name!r} in {where} (NAME.sse and NAME.json)") from exc
    for key in ("request", "response", "reads"):
        if key not in record:
            raise ValueError(f"capture {name!r} in {where}: its record has no {key!r}")
    return Capture(name, body, record)


def load_captures(folder: str | Path | None = None) -> dict[str, Capture]:
    """Every capture in `folder` by name, in the order of its `index.json` (sorted by name without one)."""
    where = Path(folder) if folder is not None else captures_folder()
    index = where / "index.json"
    if index.is_file():
        names = [c["name"] for c in json.loads(index.read_text(encoding="utf-8"))["captures"]]
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
    if capture.status != 200 or not capture.content_type.startswith("text/event-stream"):
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
