"""Checks for lab 11 (a real model): its four exercises (sections 4, 7 and 8), on the real captured streams.

* 11.1 `decode_rate(times)`: from the times of the reads that added visible text, the TTFT and the decode rate
  in tokens per second.
* 11.2 `prefill_per_token(points)`: from `(prompt tokens, TTFT)` pairs, the seconds each prompt token adds to the
  TTFT (the slope of the least-squares line).
* 11.3 `how_it_ended(body)`: how a Chat Completions body ended: "empty", "truncated", "interrupted" or choice 0's
  finish reason.
* 11.4 `tool_name(fragments, offered)`: the function a call names, from its name fragments, or None.

Every case comes from the packaged captures of llama-cpp-python serving Gemma 3 270M
(`streamlab.core.capture`) plus a few written here; the expected answers come from the reference functions below,
computed at check time, never typed in.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from streamlab.core.capture import Capture, load_captures
from streamlab.core.pieces import short
from streamlab.core.shapes import chat_multi_choice_stream, chat_text_stream, chat_tool_call_stream
from streamlab.core.sse import SSEParser
from streamlab.exercises import NotAttempted, exercise, function_answer

__all__ = [
    "reference_decode_rate",
    "reference_prefill_per_token",
    "reference_how_it_ended",
    "reference_tool_name",
    "ENDINGS",
]

ENDINGS = ("empty", "truncated", "interrupted", "stop", "length", "tool_calls")
"""What `how_it_ended` may answer (a finish reason the server invents is passed through as it is)."""


@functools.lru_cache(maxsize=1)
def _captures() -> dict[str, Capture]:
    return load_captures()


# -- the reference answers ----------------------------------------------------------------------------


def reference_decode_rate(times: Sequence[float]) -> tuple[float, float]:
    """(TTFT, tokens per second): the first time, and the reads after it over the time they took."""
    return times[0], (len(times) - 1) / (times[-1] - times[0])


def reference_prefill_per_token(points: Sequence[tuple[int, float]]) -> float:
    """The slope of the least-squares line of TTFT against prompt tokens, in seconds per token."""
    slope, _ = statistics.linear_regression([float(n) for n, _ in points], [t for _, t in points])
    return slope


def reference_how_it_ended(body: bytes) -> str:
    """ "empty" (no event), "truncated" (no [DONE]), "interrupted" ([DONE] but choice 0 never finished), or the
    finish reason of choice 0."""
    events = SSEParser().feed(body)
    if not events:
        return "empty"
    if events[-1].data != "[DONE]":
        return "truncated"
    reason = None
    for event in events[:-1]:
        for choice in json.loads(event.data).get("choices") or []:
            if choice.get("index", 0) == 0 and choice.get("finish_reason"):
                reason = choice["finish_reason"]
    return reason or "interrupted"


def reference_tool_name(fragments: Sequence[str | None], offered: set[str] | frozenset[str]) -> str | None:
    """The joined name when it names an offered function; else the one name every fragment repeats, when it is
    offered; else None (never guess a function)."""
    pieces = [p for p in fragments if p]
    joined = "".join(pieces)
    if joined in offered:
        return joined
    if len(pieces) > 1 and len(set(pieces)) == 1 and pieces[0] in offered:
        return pieces[0]
    return None


# -- 11.1 decode rate ------------------------------------------------------------------------------------


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise AssertionError(f"{what} should be a finite number, got {value!r}")
    return float(value)


def _rate_cases() -> list[tuple[str, list[float]]]:
    cases = [("three reads 0.1 s apart", [0.5, 0.6, 0.7]), ("two reads", [1.0, 1.25])]
    for name in ("chat-plain", "chat-200-tokens", "prompt-1440", "flags-defaults"):
        capture = _captures().get(name)
        if capture is not None:
            cases.append((name, capture.content_times()))
    return cases


@exercise("11.1", "decode_rate")
def check_decode_rate(answer: Any) -> None:
    fn = function_answer(answer, "decode_rate")
    for label, times in _rate_cases():
        got = fn(list(times))
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise AssertionError(f"{label}: return a pair (ttft, tokens_per_second), got {got!r}")
        ttft, rate = _number(got[0], "the TTFT"), _number(got[1], "the rate")
        want_ttft, want_rate = reference_decode_rate(times)
        if not math.isclose(ttft, want_ttft, rel_tol=1e-9, abs_tol=1e-12):
            raise AssertionError(f"{label}: the TTFT is the first time, {want_ttft:g} s, not {ttft:g}")
        if math.isclose(rate, want_rate, rel_tol=1e-6):
            continue
        if math.isclose(rate, len(times) / (times[-1] - times[0]), rel_tol=1e-9):
            raise AssertionError(
                f"{label}: {len(times)} reads span {len(times) - 1} gaps: count the tokens after the first"
            )
        if math.isclose(rate, len(times) / times[-1], rel_tol=1e-9):
            raise AssertionError(f"{label}: that rate includes the prefill; measure from the first token")
        raise AssertionError(f"{label}: expected {want_rate:.4g} tokens per second, got {rate:.4g}")


# -- 11.2 prefill per token --------------------------------------------------------------------------------


def _prefill_cases() -> list[tuple[str, list[tuple[int, float]]]]:
    prompts = sorted(
        (c for c in _captures().values() if c.prompt_tokens is not None), key=lambda c: c.prompt_tokens or 0
    )
    cases = [
        ("a straight line: 2 ms a token from 0.1 s", [(100, 0.3), (200, 0.5), (400, 0.9)]),
        ("three points off the line", [(100, 0.4), (300, 0.8), (500, 1.6)]),
    ]
    real = [
        (tokens, ttft)
        for c in prompts
        if (tokens := c.prompt_tokens) is not None and (ttft := c.timing().ttft) is not None
    ]
    if len(real) >= 2:
        cases.append(("the prompt-N captures", real))
    return cases


@exercise("11.2", "prefill_per_token")
def check_prefill(answer: Any) -> None:
    fn = function_answer(answer, "prefill_per_token")
    for label, points in _prefill_cases():
        got = _number(fn(list(points)), "the seconds per token")
        want = reference_prefill_per_token(points)
        (n0, t0), (n1, t1) = points[0], points[-1]
        if math.isclose(got, want, rel_tol=1e-6):
            continue
        if math.isclose(got, t1 / n1, rel_tol=1e-9):
            raise AssertionError(f"{label}: TTFT / tokens counts the fixed cost in every token; take the slope")
        if math.isclose(got, want * 1000, rel_tol=1e-6):
            raise AssertionError(f"{label}: give seconds per token, not milliseconds")
        ends = (t1 - t0) / (n1 - n0)
        hint = " (that is the line through the first and last points only)" if math.isclose(got, ends) else ""
        raise AssertionError(f"{label}: expected {want:.6g} s per token (least squares), got {got:.6g}{hint}")


# -- 11.3 how a body ended ------------------------------------------------------------------------------------


def _ending_cases() -> list[tuple[str, bytes]]:
    cases = [(f"capture {name}", c.body) for name, c in _captures().items() if c.status == 200]
    frames = chat_text_stream(["Hel", "lo"], include_usage=True)
    # n=2: choice 0 stops at the limit, then choice 1 finishes with "stop" (its finish chunk comes last)
    two = chat_multi_choice_stream([["Hi"], ["Hel", "lo"]], finish_reasons=["length", "stop"])
    cases += [
        ("a documented stream with a usage chunk", b"".join(frames)),
        ("a documented stream cut before its finish chunk", b"".join(frames[:3])),
        ("a tool call, finished", b"".join(chat_tool_call_stream())),
        ("two choices: choice 0 cut at the limit, choice 1 finished after it", b"".join(two)),
        ("two choices: only choice 1 finished", b"".join(f for f in two if b'"length"' not in f)),
    ]
    return cases


def _crash_hint(exc: Exception) -> str:
    """What usually makes how_it_ended crash, for the verdict: the exception's name alone says too little."""
    if isinstance(exc, json.JSONDecodeError):
        return "; `data: [DONE]` is not JSON: test for it before json.loads"
    if isinstance(exc, IndexError):
        return (
            "; a body may have no event at all, and a chunk may have no choice (the usage chunk's `choices` is "
            "empty): check before taking [0] or [-1]"
        )
    if isinstance(exc, (KeyError, TypeError, AttributeError)):
        return "; a chunk may lack a field or hold null in it: read with .get() and check for None"
    return ""


@exercise("11.3", "how_it_ended")
def check_how_it_ended(answer: Any) -> None:
    fn = function_answer(answer, "how_it_ended")
    wrong = []
    for label, body in _ending_cases():
        want = reference_how_it_ended(body)
        try:
            got = fn(body)
        except (NotImplementedError, NotAttempted):
            raise
        except Exception as exc:  # say on which body, and what usually causes it
            problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise AssertionError(f"on the body of {label}, your code raised {problem}{_crash_hint(exc)}") from exc
        if got != want:
            hint = (
                " (read choice 0's finish_reason only: other choices finish on their own)"
                if label.startswith("two choices")
                else ""
            )
            wrong.append(f"{label}: {want!r}, not {got!r}{hint}")
    if wrong:
        raise AssertionError(f"{len(wrong)} of {len(_ending_cases())} wrong; " + "; ".join(wrong[:3]))


# -- 11.4 the function a call names ---------------------------------------------------------------------------


def _named_fragments() -> list[str | None]:
    capture = _captures().get("tool-named")
    if capture is None:
        return ["get_weather"] * 6
    names: list[str | None] = []
    for event in capture.events():
        if event.data == "[DONE]":
            continue
        for choice in json.loads(event.data).get("choices") or []:
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                names.append((call.get("function") or {}).get("name"))
    return names


TOOLS = frozenset({"get_weather", "get_time"})


def _name_cases() -> list[tuple[str, list[str | None], frozenset[str]]]:
    return [
        ("the documented way: the name once, then None", ["get_weather", None, None, None], TOOLS),
        ("a name sent in two pieces", ["get_", "weather", "", None], TOOLS),
        ("llama-cpp-python's named call (capture tool-named)", _named_fragments(), TOOLS),
        ("a function nobody offered", ["delete_everything"], TOOLS),
        ("a name split in pieces, then repeated", ["get_", "weather", "get_", "weather"], TOOLS),
        ("a repeated name nobody offered", ["rm", "rm", "rm"], TOOLS),
        ("an offered name, then a piece that makes it another name", ["get_weather", "_v2"], TOOLS),
        ("two different offered names", ["get_weather", "get_time"], TOOLS),
        ("where the joined name is itself offered", ["a", "a"], frozenset({"a", "aa"})),
        ("no name at all", [None, None], TOOLS),
    ]


@exercise("11.4", "tool_name")
def check_tool_name(answer: Any) -> None:
    fn: Callable[..., Any] = function_answer(answer, "tool_name")
    for label, fragments, offered in _name_cases():
        want = reference_tool_name(fragments, offered)
        got = fn(list(fragments), set(offered))
        if got != want:
            shown = short(got) if isinstance(got, str) else repr(got)
            pieces = [p for p in fragments if p]
            if want is None and pieces and got == pieces[0] and got in offered:
                raise AssertionError(
                    f"{label}: the fragments join to {short(''.join(pieces))} and do not all repeat {shown}, so "
                    "the first fragment alone names nothing; answer None rather than guess"
                )
            if want is None:
                raise AssertionError(f"{label}: {shown} was never offered as such; answer None rather than guess")
            raise AssertionError(f"{label}: expected {want!r}, got {shown}")
