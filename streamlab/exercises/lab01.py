"""Checks for Lab 01 (SSE by hand).

01.1-01.4: Practice 1 "Parse by hand": the learner writes the events of four byte strings as
           (event type, data) pairs. The expected answer is computed by streamlab's parser, which the
           fixture suite holds to the standard.
01.5:      `field(line)`: split one decoded line into (name, value) the way the standard does.
01.6:      `split_lines(chunks)`: the byte-level line splitter at the heart of a parser, written by hand and
           run under every 2-way split and seeded random splits of real fixtures.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..fixtures import load_fixtures
from ..fuzz import chunks_at, visible_bytes
from ..sse import SSEParser
from . import exercise

PRACTICE_1: dict[str, bytes] = {
    "01.1": b"data: a\r\ndata: b\r\n\r\n",
    "01.2": b"event: x\ndata: 1\n\n: note\n\ndata: 2",
    "01.3": b"data:  two spaces\n\n",
    "01.4": b"id: 5\ndata\n\n",
}

_HINTS = {
    "01.1": "CRLF is one line ending, and two data lines in one block are joined with a line feed.",
    "01.2": "a comment dispatches nothing, and the last block never got its blank line.",
    "01.3": "exactly one space after the colon is removed, not all of them.",
    "01.4": "a line `data` with no colon is a data field with an empty value, and it still dispatches.",
}


def expected_pairs(raw: bytes) -> list[tuple[str, str]]:
    """(event type, data) for each event streamlab's parser dispatches from `raw`."""
    parser = SSEParser()
    events = parser.feed(raw)
    parser.close()
    return [(e.event, e.data) for e in events]


def _check_pairs(ex_id: str, answer: Any) -> None:
    if not isinstance(answer, (list, tuple)):
        raise AssertionError(f"give a list of (event type, data) tuples, not {type(answer).__name__}")
    got = [tuple(x) if isinstance(x, (list, tuple)) else x for x in answer]
    for item in got:
        if not (isinstance(item, tuple) and len(item) == 2 and all(isinstance(v, str) for v in item)):
            raise AssertionError(f"each event is a pair of strings (event type, data); got {item!r}")
    want = expected_pairs(PRACTICE_1[ex_id])
    if got != want:
        if len(got) != len(want):
            raise AssertionError(f"expected {len(want)} event(s), you wrote {len(got)}. Hint: {_HINTS[ex_id]}")
        raise AssertionError(f"the number of events is right but not their contents. Hint: {_HINTS[ex_id]}")


for _id in PRACTICE_1:
    exercise(_id, f"answer_{_id[-1]}")(lambda answer, _id=_id: _check_pairs(_id, answer))


FIELD_CASES: list[tuple[str, tuple[str, str]]] = [
    ("data: hello", ("data", "hello")),
    ("data:hello", ("data", "hello")),
    ("data:  two", ("data", " two")),
    ("data", ("data", "")),
    ("data:", ("data", "")),
    ("event: a: b", ("event", "a: b")),
    ("id:\t7", ("id", "\t7")),
    ("retry: 3000", ("retry", "3000")),
    (" data: x", (" data", "x")),
    ("Data:x", ("Data", "x")),
    ("x:", ("x", "")),
]


@exercise("01.5", "field")
def _check_field(field: Callable[[str], tuple[str, str]]) -> None:
    for line, want in FIELD_CASES:
        got = field(line)
        if tuple(got) != want:
            raise AssertionError(f"field({line!r}) returned {got!r}; expected {want!r}")


def reference_lines(raw: bytes) -> list[bytes]:
    """The complete lines of `raw` (terminators removed), cut at CRLF, lone CR or lone LF only."""
    parts = re.split(rb"\r\n|\r|\n", raw)
    return parts[:-1]  # the last part is an unfinished line (or empty after a final terminator)


@exercise("01.6", "split_lines")
def _check_split_lines(split_lines: Callable[[Iterable[bytes]], Iterator[bytes]]) -> None:
    rng = random.Random(101)
    fixtures = [f for f in load_fixtures() if not f.raw.startswith(b"\xef\xbb\xbf")]
    for fixture in fixtures:
        want = reference_lines(fixture.raw)
        splits = [(i,) for i in range(len(fixture.raw) + 1)]
        splits += [tuple(sorted(rng.randint(0, len(fixture.raw)) for _ in range(rng.randint(2, 8)))) for _ in range(20)]
        for cuts in splits:
            got = list(split_lines(iter(chunks_at(fixture.raw, cuts))))
            if got != want:
                where = ", ".join(str(c) for c in cuts)
                around = visible_bytes(fixture.raw[max(0, cuts[0] - 6) : cuts[0] + 6])
                raise AssertionError(
                    f"fixture {fixture.name!r} cut at byte(s) {where} (around the first cut: {around}): "
                    f"got {len(got)} line(s), expected {len(want)}; first difference at line "
                    f"{next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))}"
                )

