"""Checks for lab 09 (troubleshooting streams): the exercises of section 15.

* 09.1 `diagnosis`: six captured streams (`CAPTURES`), each with a user's complaint; for each, the cause, one
  of the keys of `CAUSES`. Two captures share each complaint, so the bytes decide, not the complaint.
* 09.2 `read_answer(chunks)`: repair the buggy loop the lab shows. Given the network chunks of a
  Chat Completions stream (one choice), return `(text, complete)`; `complete` is True only when `[DONE]`
  arrived and the choice finished with "stop".

The expected answers come from the library: every capture is shown to have its cause by the tests
(tests/labs/test_troubleshooting.py), and 09.2 compares with `SSEParser` + `ChatAccumulator` on the same bytes,
under every way of cutting them the check tries. Nothing here opens a socket.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamlab.core import shapes
from streamlab.core.accumulate import ChatAccumulator, replay
from streamlab.core.endings import Outcome
from streamlab.core.harness.fuzz import chunks_at
from streamlab.exercises import NotAttempted, exercise, function_answer

__all__ = ["Capture", "CAPTURES", "CAUSES", "EXPECTED", "READ_CASES", "expected_answer"]


# -- 09.1: captured streams ---------------------------------------------------------------------------

CAUSES: dict[str, str] = {
    "crlf": "every line ends with CRLF, and the loop only looks for LF LF between events",
    "no-space": "the fields are written `data:` without a space, and the loop only matches `data: `",
    "truncated": "the bytes stop before the end: no finish_reason and no [DONE]",
    "length": "the model hit the token limit: finish_reason 'length', then [DONE]",
    "done-marker": "the last event is the literal [DONE], which is not JSON",
    "usage-chunk": "the usage chunk (requested with include_usage) has an empty choices list",
    "html": "the body is an HTML page, not an event stream",
    "keep-alive": "comment lines (`: ping`) between the events",
}
"""The causes to choose from (key -> what it means); two of them fit none of the captures."""


@dataclass(frozen=True)
class Capture:
    """One captured response body and what the user said about it."""

    complaint: str
    raw: bytes


def _chunk(content: str | None = None, finish: str | None = None, *, usage: bool = False) -> bytes:
    """A short Chat chunk (only the fields the exercise needs), as one SSE frame."""
    if usage:
        return shapes.sse_frame(shapes.to_json({"choices": [], "usage": shapes.chat_usage(9, 3)}))
    delta = {} if content is None else {"content": content}
    return shapes.sse_frame(shapes.to_json({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))


_HI = [_chunk("Hi "), _chunk("there"), _chunk(finish="stop"), shapes.chat_done()]
_NO_EVENTS = "My loop finds no events at all in this stream."
_STOPS = "The answer stops in the middle of a sentence, and nothing was raised."
_CRASH = (
    "This loop crashes at the very end: "
    "for event in events: text += json.loads(event.data)['choices'][0]['delta'].get('content') or ''"
)

CAPTURES: dict[str, Capture] = {
    "a": Capture(_NO_EVENTS, b"".join(_HI).replace(b"\n", b"\r\n")),
    "b": Capture(_NO_EVENTS, b"".join(_HI).replace(b"data: ", b"data:")),
    "c": Capture(_STOPS, b"".join([_chunk("The answer "), _chunk("is")])),
    "d": Capture(_STOPS, b"".join([_chunk("The answer "), _chunk("is"), _chunk(finish="length"), shapes.chat_done()])),
    "e": Capture(_CRASH, b"".join(_HI)),
    "f": Capture(_CRASH, b"".join([*_HI[:3], _chunk(usage=True), shapes.chat_done()])),
}
"""The captured streams of exercise 09.1 (the lab prints them with `repr`)."""

EXPECTED = {"a": "crlf", "b": "no-space", "c": "truncated", "d": "length", "e": "done-marker", "f": "usage-chunk"}

HINTS = {
    "a": "look at the line endings: repr shows \\r\\n after every line",
    "b": "look right after each field name: is there a space after the colon?",
    "c": "look for a finish_reason and for [DONE] at the end",
    "d": "look at the last chunk before [DONE]: which finish_reason does it carry?",
    "e": "which event does the loop reach last, and is its data JSON?",
    "f": "which chunk comes before [DONE] here, and what is in its choices list?",
}


@exercise("09.1", "diagnosis")
def check_diagnosis(answer: Any) -> None:
    if answer is Ellipsis:
        raise NotAttempted
    if not isinstance(answer, dict):
        raise AssertionError(f"diagnosis should be a dict like {{'a': 'crlf', ...}}, got {type(answer).__name__}")
    if all(value is Ellipsis for value in answer.values()):
        raise NotAttempted
    if sorted(answer) != sorted(EXPECTED):
        raise AssertionError(f"give one cause for each of {sorted(EXPECTED)}; you gave {sorted(answer)}")
    for key in sorted(EXPECTED):
        if answer[key] is Ellipsis:
            raise AssertionError(f"({key}) is still `...`")
        if answer[key] not in CAUSES:
            raise AssertionError(f"({key}) should be one of {sorted(CAUSES)}, got {answer[key]!r}")
    wrong = [key for key in sorted(EXPECTED) if answer[key] != EXPECTED[key]]
    if wrong:
        first = wrong[0]
        raise AssertionError(
            f"{len(wrong)} of {len(EXPECTED)} not right yet. ({first}) is not {answer[first]!r}: {HINTS[first]}"
        )


# -- 09.2: repair the buggy loop ----------------------------------------------------------------------

_PIECES = ["Grüße ", "aus ", "Köln, ", "東京 ", "und 🙂"]


def _lines(frames: Sequence[bytes], old: bytes, new: bytes) -> list[bytes]:
    return [frame.replace(old, new) for frame in frames]


def _two_data_lines(frames: Sequence[bytes]) -> list[bytes]:
    """The first content chunk's JSON written over two `data:` lines (joined again with LF by a parser)."""
    out = list(frames)
    out[1] = out[1].replace(b',"choices":', b',\ndata: "choices":', 1)
    return out


_PLAIN = shapes.chat_text_stream(_PIECES, include_usage=False)  # role, pieces, finish, [DONE]
_STREAMS: dict[str, list[bytes]] = {
    "documented": _PLAIN,
    "with the usage chunk": shapes.chat_text_stream(_PIECES),
    "CRLF line endings": _lines(_PLAIN, b"\n", b"\r\n"),
    "CR line endings": _lines(_PLAIN, b"\n", b"\r"),
    "data: without the space": _lines(_PLAIN, b"data: ", b"data:"),
    "keep-alive comments": [part for frame in _PLAIN for part in (shapes.sse_comment("ping"), frame)],
    "one chunk over two data lines": _two_data_lines(_PLAIN),
    "finish_reason length": shapes.chat_text_stream(_PIECES[:3], include_usage=False, finish_reason="length"),
    "cut before [DONE]": _PLAIN[:-1],
    "cut inside an event": [*_PLAIN[:4], _PLAIN[4][:40]],
}


def _splits(raw: bytes, seed: int) -> list[tuple[str, list[bytes]]]:
    """Ways to cut `raw`: whole, one byte at a time, inside every multi-byte character, seeded random cuts."""
    rng = random.Random(seed)
    n = len(raw)
    cr_lf = [i + 1 for i in range(n - 1) if raw[i : i + 2] == b"\r\n"]  # between a CR and its LF
    out = [("whole", [raw]), ("a byte at a time", chunks_at(raw, range(1, n)))]
    out.append(("cut inside every multi-byte character", _inside_characters(raw)))
    if cr_lf:
        out.append(("cut between every CR and its LF", chunks_at(raw, cr_lf)))
    for k in range(3):
        cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(3, 30))))
        out.append((f"random cuts #{k + 1}", chunks_at(raw, cuts)))
    return out


def _inside_characters(raw: bytes) -> list[bytes]:
    return chunks_at(raw, [i for i in range(1, len(raw)) if raw[i] & 0xC0 == 0x80])


READ_CASES: dict[str, list[bytes]] = {name: [b"".join(frames)] for name, frames in _STREAMS.items()}
READ_CASES["documented, cut inside characters"] = _inside_characters(b"".join(_PLAIN))
"""The streams of the 09.2 check as network chunks: each one whole, and one cut inside its characters (the
check also cuts every stream many more ways)."""


def expected_answer(chunks: Sequence[bytes]) -> tuple[str, bool]:
    """What `read_answer` must return: the library's text of choice 0, and whether the outcome is complete."""
    acc = ChatAccumulator()
    replay(chunks, acc)
    return acc.text.get(0, ""), acc.outcome() is Outcome.COMPLETE


@exercise("09.2", "read_answer")
def check_read_answer(answer: Any) -> None:
    fn = function_answer(answer, "read_answer")
    for k, (name, frames) in enumerate(_STREAMS.items()):
        raw = b"".join(frames)
        want = expected_answer([raw])
        for how, chunks in _splits(raw, seed=900 + k):
            label = f"{name}, {how}"
            try:
                got = fn(list(chunks))
            except (NotImplementedError, NotAttempted):
                raise
            except Exception as exc:  # say which stream and which cut crashed the learner's code
                raise AssertionError(f"{label}: your code raised {type(exc).__name__}: {exc}") from exc
            if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], str) and isinstance(got[1], bool)):
                raise AssertionError(f"{label}: read_answer should return (text, complete), got {got!r}")
            if got[0] != want[0]:
                raise AssertionError(f"{label}: text {got[0]!r}, expected {want[0]!r}")
            if got[1] != want[1]:
                why = (
                    "[DONE] arrived and the choice finished with 'stop'"
                    if want[1]
                    else "no [DONE] or no finish_reason 'stop': the answer is not complete"
                )
                raise AssertionError(f"{label}: complete={got[1]}, expected {want[1]} ({why})")
