"""Partial JSON: what a prefix of a JSON document holds, and the verdict on a streamed structured answer (sans-IO core).

A structured answer (`response_format: {"type": "json_schema", ...}`, or a tool call's arguments) streams as
pieces of one JSON document that end anywhere: inside a key, a string, a number, between the letters of `true`.
`json.loads` refuses every prefix but the last, so a UI that waits for it shows nothing until the end, and a
client that parses a cut answer reports a parse error where the truth is "the answer stopped early"
(openai-python#3263, vercel/ai#8631). This module reads prefixes:

* `parse_partial(text)` returns the value the prefix already holds: open objects and arrays closed, a string
  cut in the middle kept as far as it came (`trailing_strings=False` drops it), a key with no value yet, a
  number that cannot end where it stops (`1.`, `-`, `2e`) and a literal cut inside (`tr`) left out. A number
  that can (`12`, which may still become `123`) is kept, as the SDK's parser keeps it. Text that no JSON
  document starts with raises `PartialJSONError` (a `ValueError`).
* `structured_answer(text, outcome)` is the verdict a client should give: "complete" (the stream ended
  complete and the text is one whole JSON document), "incomplete" (the stream did not end complete, or the
  document is not finished: the value is what arrived, never a parse error), or "invalid" (what arrived is not
  JSON, or a complete stream ended with text that is not one document).

Why a parser of our own, not one from the package index: the core imports only the standard library
(`tests/project/test_layers.py` holds that), and the one well-kept incremental parser there is, `jiter` (pydantic's,
which the official SDK itself calls with `partial_mode` on every chunk), comes only with the optional `peers`
extra. `parse_partial` follows jiter's `partial_mode="trailing-strings"` (and `partial_mode=True` without
trailing strings), and tests/library/test_structured.py compares the two on every prefix of several documents.

Cost: each call reads the whole prefix (as the SDK's does), so calling it on every delta of an answer of n
characters costs O(n^2) in all: nothing for answers of a few kilobytes; for long ones, call it once a repaint
(`streamlab.core.batching`), not once a delta. Whole values inside the prefix are read by the standard library's C
scanner (`json.JSONDecoder.raw_decode`), only the unfinished path down to the cut by Python code. Nesting is bounded
(`MAX_DEPTH`), so no input reaches Python's recursion limit.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from streamlab.core.endings import Outcome

__all__ = ["PartialJSONError", "parse_partial", "StructuredAnswer", "structured_answer", "MAX_DEPTH"]

MAX_DEPTH = 200
"""How deeply the unfinished objects and arrays of a prefix may nest before `parse_partial` refuses the text (whole
values inside it are read by the standard library's scanner, which has its own bound)."""


class PartialJSONError(ValueError):
    """The text is not the beginning of any JSON document (not merely unfinished)."""


class _End(Exception):
    """The text ended inside a value; `value` is what of it is usable (`_NOTHING` when nothing is)."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


_NOTHING: Any = object()
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_CHARS = re.compile(r"[-+0-9.eE]*")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_WHOLE = json.JSONDecoder(parse_constant=_no_constant)  # NaN and Infinity are Python's, not JSON's
_STRING_STOP = re.compile(r'["\\]')
_LITERALS = (("true", True), ("false", False), ("null", None))


def _escape_end(text: str, j: int) -> int | None:
    """Where the escape starting at `text[j]` (a backslash) ends, or None when the text stops inside it. A high
    surrogate (`\\ud83d`) is not finished until its low half could have come: the two make one character."""
    if j + 1 >= len(text):
        return None
    if text[j + 1] != "u":
        return j + 2
    if j + 6 > len(text):
        return None
    high = text[j + 2 : j + 4].lower() in ("d8", "d9", "da", "db")
    if high and (text[j + 6 : j + 8] in ("", "\\") or (text[j + 6 : j + 8] == "\\u" and j + 12 > len(text))):
        return None
    return j + 6


class _Reader:
    def __init__(self, text: str, trailing_strings: bool) -> None:
        self.text = text
        self.trailing = trailing_strings

    def ws(self, i: int) -> int:
        m = _WS.match(self.text, i)
        assert m is not None  # the pattern matches the empty string
        return m.end()

    def fail(self, i: int, what: str) -> PartialJSONError:
        return PartialJSONError(f"not JSON at character {i}: {what} (found {self.text[i : i + 10]!r})")

    def value(self, i: int, depth: int) -> tuple[Any, int]:
        i = self.ws(i)
        if i == len(self.text):
            raise _End(_NOTHING)
        c = self.text[i]
        if c in '{["':  # a value that is whole is read by the standard library's C scanner, at C speed
            try:
                return _WHOLE.raw_decode(self.text, i)
            except (ValueError, RecursionError):
                pass  # cut (or not JSON): read it here, piece by piece
        if c in "{[":
            if depth >= MAX_DEPTH:
                raise PartialJSONError(f"nested deeper than {MAX_DEPTH} levels")
            return self.container(i, depth + 1)
        if c == '"':
            return self.string(i)
        if c == "-" or c.isdigit():
            return self.number(i)
        for word, value in _LITERALS:
            if self.text.startswith(word, i):
                return value, i + len(word)
            if word.startswith(self.text[i:]):
                raise _End(_NOTHING)  # `tr`: the text stops inside a literal
        raise self.fail(i, "expected a value")

    def string(self, i: int) -> tuple[str, int]:
        j, text = i + 1, self.text
        while True:
            stop = _STRING_STOP.search(text, j)  # the next quote or backslash: the rest is the string's text
            if stop is None:
                j = len(text)
                break
            j = stop.start()
            if text[j] == '"':
                try:
                    return json.loads(text[i : j + 1]), j + 1
                except ValueError as exc:
                    raise self.fail(i, f"a bad string ({exc})") from None
            after = _escape_end(text, j)
            if after is None:
                break  # the text ends inside an escape, which says nothing yet
            j = after
        if not self.trailing:
            raise _End(_NOTHING)
        kept = text[i:j]
        try:
            raise _End(json.loads(kept + '"'))
        except ValueError as exc:
            raise self.fail(i, f"a bad string ({exc})") from None

    def number(self, i: int) -> tuple[int | float, int]:
        run = _NUMBER_CHARS.match(self.text, i)
        assert run is not None
        whole = _NUMBER.fullmatch(self.text, i, run.end())
        if run.end() == len(self.text):  # the number may go on: keep it only if it can end here
            if whole:
                raise _End(json.loads(self.text[i:]))
            if _NUMBER.fullmatch(self.text[i:] + "0"):  # `-`, `1.`, `2e`: a digit more makes a number
                raise _End(_NOTHING)
        if not whole:
            raise self.fail(i, "a bad number")
        return json.loads(self.text[i : run.end()]), run.end()

    def container(self, i: int, depth: int) -> tuple[Any, int]:
        is_object = self.text[i] == "{"
        out: Any = {} if is_object else []
        close = "}" if is_object else "]"
        i = self.ws(i + 1)
        if i < len(self.text) and self.text[i] == close:
            return out, i + 1
        while True:
            try:
                i = self.member(out, i, depth) if is_object else self.element(out, i, depth)
            except _End:
                raise _End(out) from None
            i = self.ws(i)
            if i == len(self.text):
                raise _End(out)
            if self.text[i] == close:
                return out, i + 1
            if self.text[i] != ",":
                raise self.fail(i, f"expected ',' or '{close}'")
            i += 1

    def element(self, out: list[Any], i: int, depth: int) -> int:
        try:
            value, i = self.value(i, depth)
        except _End as end:
            if end.value is not _NOTHING:
                out.append(end.value)
            raise
        out.append(value)
        return i

    def member(self, out: dict[str, Any], i: int, depth: int) -> int:
        i = self.ws(i)
        if i == len(self.text):
            raise _End(_NOTHING)
        if self.text[i] != '"':
            raise self.fail(i, "expected a key")
        try:
            key, i = self.string(i)
        except _End:
            raise _End(_NOTHING) from None  # a key cut in the middle: no member yet
        i = self.ws(i)
        if i == len(self.text):
            raise _End(_NOTHING)
        if self.text[i] != ":":
            raise self.fail(i, "expected ':'")
        try:
            value, i = self.value(i + 1, depth)
        except _End as end:
            if end.value is not _NOTHING:
                out[key] = end.value
            raise
        out[key] = value
        return i


def _read(text: str, trailing_strings: bool) -> tuple[Any, bool]:
    """(the value, whether the text holds one whole document)."""
    reader = _Reader(text, trailing_strings)
    try:
        value, i = reader.value(0, 0)
    except _End as end:
        return (None if end.value is _NOTHING else end.value), False
    i = reader.ws(i)
    if i != len(text):
        raise reader.fail(i, "text after the document")
    return value, True


def parse_partial(text: str, *, trailing_strings: bool = True) -> Any:
    """The value the prefix `text` of a JSON document already holds (None when it holds nothing yet, as for ""
    or "  "). Raises `PartialJSONError` when no JSON document starts with `text`. See the module docstring."""
    return _read(text, trailing_strings)[0]


@dataclass(frozen=True)
class StructuredAnswer:
    """The verdict on a streamed structured answer: `status` "complete", "incomplete" or "invalid", the `value`
    (whole, as far as it came, or None when invalid), and `why` in one line."""

    status: str
    value: Any
    why: str

    @property
    def complete(self) -> bool:
        return self.status == "complete"


def structured_answer(text: str, outcome: Outcome | str) -> StructuredAnswer:
    """Judge the text of a structured answer whose stream ended with `outcome` (the accumulator's `outcome()`).

    A cut answer (`incomplete`: finish_reason "length", `response.incomplete`; `truncated`; `cancelled`) is
    reported "incomplete" with the value that arrived, never as a parse error; so is a stream that ended complete
    with an unfinished document. "invalid" is kept for text that is not JSON at all, or for a complete stream
    whose text is not exactly one document."""
    outcome = Outcome(outcome)
    try:
        value, whole = _read(text, True)
    except PartialJSONError as exc:
        return StructuredAnswer("invalid", None, f"{exc} (the stream ended {outcome})")
    if outcome is Outcome.COMPLETE and whole:
        return StructuredAnswer("complete", value, "the stream ended complete with one whole JSON document")
    if outcome is Outcome.COMPLETE:
        return StructuredAnswer("incomplete", value, "the stream ended complete, but the document is unfinished")
    state = "a whole document" if whole else f"{len(text)} characters of an unfinished document"
    return StructuredAnswer("incomplete", value, f"the stream ended {outcome}: {state} arrived")
