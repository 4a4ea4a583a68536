"""Exercise checks for Lab 01 (SSE by hand).

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

from streamlab.core.harness.fixtures import load_fixtures
from streamlab.core.harness.fuzz import chunks_at, show_split, visible_bytes
from streamlab.core.sse import SSEParser
from streamlab.exercises import exercise

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


def _pairs_checker(ex_id: str) -> Callable[[Any], None]:
    """The checker of one practice exercise: `_check_pairs` with its id bound."""
    return lambda answer: _check_pairs(ex_id, answer)


for _id in PRACTICE_1:
    exercise(_id, f"answer_{_id[-1]}")(_pairs_checker(_id))


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
        try:
            got = field(line)
        except Exception as exc:  # say which input broke it
            raise AssertionError(f"field({line!r}) raised {type(exc).__name__}: {exc}") from exc
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
        n = len(fixture.raw)
        splits: list[tuple[int, ...]] = [(), *((i,) for i in range(n + 1))]
        splits += [tuple(sorted(rng.randint(0, n) for _ in range(rng.randint(2, 8)))) for _ in range(20)]
        splits.append(tuple(range(1, n)))  # byte at a time
        for cuts in splits:
            try:
                got = list(split_lines(iter(chunks_at(fixture.raw, cuts))))
            except Exception as exc:
                raise AssertionError(
                    f"fixture {fixture.name!r}, {_where(fixture.raw, cuts)}: your code raised "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            if got != want:
                k = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                mine = _show_line(got[k]) if k < len(got) else "missing"
                right = _show_line(want[k]) if k < len(want) else "not there at all"
                raise AssertionError(
                    f"fixture {fixture.name!r}, {_where(fixture.raw, cuts)}: {len(got)} line(s) instead of "
                    f"{len(want)}; line {k} is {mine} but should be {right}"
                )


def _show_line(line: bytes, width: int = 40) -> str:
    if not line:
        return "an empty line"
    shown = visible_bytes(line)
    return repr(shown if len(shown) <= width else shown[: width - 3] + "...")


def _where(raw: bytes, cuts: tuple[int, ...]) -> str:
    """Where the cuts fall, on one line: the bytes either side of each (at most three shown)."""
    if not cuts:
        return "whole (no cut)"
    if len(cuts) > 3:
        return f"byte at a time ({len(cuts)} cuts)" if cuts == tuple(range(1, len(raw))) else f"{len(cuts)} cuts"
    return show_split(raw, cuts, context=6).replace("\n", "; ")
