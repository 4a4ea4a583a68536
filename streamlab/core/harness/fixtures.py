"""Byte-exact SSE fixtures from `data/fixtures/`, loaded by the sans-IO core.

Each case is two files side by side:

* `NAME.sse`: the raw bytes of the stream, exactly as a server would send them;
* `NAME.json`: what a standard-conforming parser must report: the events, the final `retry` value, whether
  the stream stopped mid-event (`truncated`), the final last event ID, plus a description, its source and
  the WHATWG rules it exercises.

Bytes are kept in files, never as Python string literals an editor could normalise.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from streamlab.core.sse import SSEEvent

__all__ = ["Fixture", "Expected", "RULES", "data_dir", "load_fixtures", "load_fixture"]

# The rules of WHATWG HTML 9.2.6 "Interpreting an event stream", as short ids used in the fixtures.
RULES: dict[str, str] = {
    "bom": "One leading U+FEFF byte-order mark is dropped, and only one.",
    "eol-crlf": "CRLF ends a line, even when CR and LF arrive in different chunks.",
    "eol-cr": "A lone CR ends a line.",
    "eol-lf": "A lone LF ends a line.",
    "eol-only-cr-lf": "Nothing else ends a line: not U+2028, U+2029, U+0085, form feed or vertical tab.",
    "utf8": "The stream is UTF-8; multi-byte characters survive any cut.",
    "utf8-invalid": "Invalid UTF-8 decodes to U+FFFD instead of failing.",
    "comment": "A line starting with ':' is a comment and is ignored.",
    "field-split": "A line splits at its first colon into field name and value.",
    "space-once": "One space after the colon is removed, and only one.",
    "field-no-colon": "A line without a colon is a field name with an empty value.",
    "data-join": "data lines are joined with LF.",
    "data-empty": "`data:` alone adds an empty line of data and still dispatches.",
    "event-type": "`event` sets the type of the event being built; empty means 'message'.",
    "event-type-reset": "The event type resets at every blank line, even one that dispatches nothing.",
    "id-persists": "`id` sets the last event ID, which persists across events and is committed at the blank line.",
    "id-empty-resets": "An empty `id` resets the last event ID to empty.",
    "id-nul": "An `id` value containing NUL is ignored.",
    "retry": "`retry` counts only when its value is ASCII digits; otherwise it is ignored.",
    "unknown-field": "Other field names (case-sensitive) are ignored.",
    "dispatch-blank-line": "An event is dispatched by a blank line, never by a packet boundary.",
    "no-dispatch-without-data": "A block without data lines dispatches nothing.",
    "unfinished-discarded": "An event not ended by a blank line when the stream ends is discarded.",
}


@dataclass(frozen=True)
class Expected:
    """What a conforming parser reports for a whole stream."""

    events: tuple[SSEEvent, ...]
    retry_ms: int | None
    truncated: bool
    last_event_id: str


@dataclass(frozen=True)
class Fixture:
    """One byte-exact test stream and its expected result."""

    name: str
    raw: bytes
    expected: Expected
    description: str
    source: str
    rules: tuple[str, ...]

    def __repr__(self) -> str:
        return f"Fixture({self.name!r}, {len(self.raw)} bytes, {len(self.expected.events)} events)"


def data_dir() -> Path:
    """The data set's folder: fixtures, recorded timings, quizzes (override with STREAMLAB_DATA).

    The repository's top-level `data/` folder *is* the package `streamlab.data` (pyproject.toml maps one to
    the other), so a checkout, an editable install and a wheel all read the same files through
    `importlib.resources`: one source of truth, found from any working directory.
    """
    override = os.environ.get("STREAMLAB_DATA")
    if override:
        return Path(override)
    return Path(str(resources.files("streamlab.data")))


def load_fixture(name: str, folder: Path | None = None) -> Fixture:
    """Load one fixture by name (the file stem)."""
    folder = folder or data_dir() / "fixtures"
    raw = (folder / f"{name}.sse").read_bytes()
    try:
        meta = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
        events = tuple(SSEEvent(e["event"], e["data"], e["id"]) for e in meta["events"])
        expected = Expected(events, meta["retry"], bool(meta["truncated"]), meta["last_event_id"])
        rules = tuple(meta["rules"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"fixture {name!r} in {folder}: malformed expectation file: {exc}") from exc
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        raise ValueError(f"fixture {name!r} names unknown rule(s) {unknown}; known: {sorted(RULES)}")
    return Fixture(name, raw, expected, meta.get("description", ""), meta.get("source", ""), rules)


def load_fixtures(folder: Path | None = None) -> list[Fixture]:
    """Load every fixture in the folder, sorted by name."""
    folder = folder or data_dir() / "fixtures"
    names = sorted(p.stem for p in folder.glob("*.sse"))
    if not names:
        raise FileNotFoundError(f"no *.sse fixtures in {folder}")
    return [load_fixture(n, folder) for n in names]
