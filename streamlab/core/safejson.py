"""JSON from the network read under one guard: every failure a ValueError, never a RecursionError (sans-IO core).

`json.loads` fails in more ways than `JSONDecodeError`: Python refuses integers of more than 4,300 digits (a
plain `ValueError`), and text nested deeper than the interpreter's recursion limit raises `RecursionError`,
which is not a `ValueError` at all. A body of 5,000 `[` is enough: an error page, an event's data, a tool
call's arguments. Every reader of bytes that came off a socket (the client's error bodies, the resume cursor,
the scanner, the checkers, the stand-in's planner, the relay and the gateway) reads JSON through this module,
so `except ValueError` is always enough and no `RecursionError` escapes a public entry point.

* `read_json(text)` is `json.loads` whose only failure is `ValueError` (the depth failure says so in words).
* `json_or_none(text)` is the value, or None for anything that is not JSON (for "is this an object with...").
* `loads(text, malformed)` is the value and None, or None and the problem in words (for reports and errors).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["read_json", "json_or_none", "loads", "json_problem", "TOO_DEEP"]

TOO_DEEP = "JSON nested deeper than Python's recursion limit"
"""What a `RecursionError` from `json.loads` means, in words."""


def read_json(text: str | bytes | bytearray) -> Any:
    """`json.loads(text)`, failing only with `ValueError` (a `RecursionError` becomes one, saying why)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


def json_or_none(text: str | bytes | bytearray) -> Any:
    """The JSON value of `text`, or None when it is not JSON (malformed, too deep, bytes that are not UTF-8)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def loads(text: str | bytes | bytearray, malformed: str) -> tuple[Any, str | None]:
    """`json.loads`, with every way it can fail turned into a problem description (never an exception);
    `malformed` words the common one (text that is not JSON at all)."""
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        return None, json_problem(exc, malformed)


def json_problem(exc: ValueError | RecursionError, malformed: str) -> str:
    """What a failed `json.loads` means, in words (`malformed` for text that is not JSON at all)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{malformed} ({exc})"
    if isinstance(exc, RecursionError) or str(exc) == TOO_DEEP:
        return TOO_DEEP
    return f"JSON that Python cannot read ({exc})"  # e.g. "Exceeds the limit (4300 digits) for integer ..."
