"""Checks for lab 04 (TTFT against total time): section 7, "Exercises: the arithmetic of waiting".

The scenario (ILLUSTRATIVE numbers): the first token appears 0.5 s after the request, then one more token
every 1/30 s (30 tokens per second), so an answer of n tokens ends at 0.5 + (n - 1) / 30 seconds.

* 04.1 `total_600`: the total time of a 600-token answer, in seconds.
* 04.2 `blank_screen`: `(with streaming, without streaming)`, seconds of blank screen for that answer.
* 04.3 `tokens_at_close`: `(tokens generated when the user leaves at 5 s, tokens generated in all if the
  server is never told)`.
* 04.4 `blank_share(ttft, gap, n_tokens)`: the share of the wait spent on a blank screen when streaming.
* 04.5 `first_visible(arrivals)`: the TTFT of a timed Chat Completions stream, role chunk not counted.

Checkers compare with `streamlab.core.metrics`, computed here, never with numbers typed in by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from streamlab.core.metrics import (
    first_visible_time,
    illustrative_blank_share,
    illustrative_tokens_by,
    illustrative_total,
)
from streamlab.core.shapes import chat_choice, chat_chunk, chat_text_stream, sse_comment, sse_frame, to_json
from streamlab.core.sse import SSEEvent, SSEParser
from streamlab.exercises import NotAttempted, exercise

TTFT = 0.5
RATE = 30  # tokens per second after the first
GAP = 1 / RATE
N_TOKENS = 600
CLOSE_AT = 5.0


def _pair(answer: Any, name: str, shape: str) -> tuple[Any, Any]:
    """Unpack a two-value answer; `...` in both is "not attempted", `...` in one asks for the other."""
    if answer is Ellipsis:
        raise NotAttempted
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise AssertionError(f"{name} should be a pair: {shape}")
    first, second = answer
    if first is Ellipsis and second is Ellipsis:
        raise NotAttempted
    if first is Ellipsis:
        raise AssertionError("fill in the first value too")
    if second is Ellipsis:
        raise AssertionError("fill in the second value too")
    return first, second


def _number(value: Any, what: str) -> float:
    if value is Ellipsis:
        raise NotAttempted
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AssertionError(f"{what} should be a number of seconds, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise AssertionError(f"{what} should be a finite number, got {value!r}")
    return float(value)


@exercise("04.1", "total_600")
def check_total(answer: Any) -> None:
    got = _number(answer, "total_600")
    want = illustrative_total(TTFT, GAP, N_TOKENS)
    # 0.5 + 600/30 = 20.5 (counting one gap too many) is within a single gap: accepted, the solution explains.
    if abs(got - want) <= GAP + 1e-9:
        return
    if abs(got - N_TOKENS * GAP) <= GAP + 1e-9:
        raise AssertionError(f"{got:g} s leaves out the {TTFT} s before the first token")
    if abs(got - N_TOKENS / RATE / 60) < 0.01 or abs(got - want / 60) < 0.01:
        raise AssertionError("give the answer in seconds, not minutes")
    raise AssertionError(f"{got:g} s is not right: the first token comes at TTFT, then 599 gaps of 1/30 s follow")


@exercise("04.2", "blank_screen")
def check_blank(answer: Any) -> None:
    first, second = _pair(answer, "blank_screen", "(seconds with streaming, seconds without streaming)")
    streaming = _number(first, "the first value (with streaming)")
    buffered = _number(second, "the second value (without streaming)")
    total = illustrative_total(TTFT, GAP, N_TOKENS)
    if abs(streaming - total) <= GAP and abs(buffered - TTFT) <= 0.01:
        raise AssertionError("the two values are swapped: (with streaming, without streaming)")
    if abs(streaming - TTFT) > 0.01:
        raise AssertionError(f"with streaming, the screen is blank until the first token: {streaming:g} s is not it")
    if abs(buffered - total) > GAP + 1e-9:
        raise AssertionError(
            f"without streaming, nothing shows until the whole answer is there: {buffered:g} s is not it"
        )


@exercise("04.3", "tokens_at_close")
def check_tokens(answer: Any) -> None:
    at_close, in_all = _pair(answer, "tokens_at_close", "(tokens by the time the user leaves, tokens in all)")
    for v, what in ((at_close, "the first value"), (in_all, "the second value")):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
            raise AssertionError(f"{what} should be a whole number of tokens, got {v!r}")
    want = illustrative_tokens_by(CLOSE_AT, TTFT, GAP)
    # want - 1 is what you get counting 4.5 s x 30 tokens/s and forgetting the token at exactly 0.5 s.
    if int(at_close) not in (want, want - 1):
        raise AssertionError(
            f"{int(at_close)} tokens by {CLOSE_AT:g} s is not right: the first token comes at {TTFT} s, "
            f"then {RATE} per second"
        )
    if int(in_all) != N_TOKENS:
        raise AssertionError(
            "if nobody tells the server the user left, it does not know: how many tokens does the whole answer have?"
        )


@exercise("04.4", "blank_share")
def check_blank_share(fn: Any) -> None:
    if fn is Ellipsis:
        raise NotAttempted
    if not callable(fn):
        raise AssertionError("blank_share should be a function blank_share(ttft, gap, n_tokens)")
    for ttft, gap, n in ((0.4, 0.02, 50), (0.4, 0.02, 5000), (TTFT, GAP, N_TOKENS), (1.0, 0.05, 1), (2.0, 0.0, 10)):
        got = fn(ttft, gap, n)
        want = illustrative_blank_share(ttft, gap, n)
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            raise AssertionError(f"blank_share{(ttft, gap, n)} returned {got!r}, not a number")
        if abs(got - 100 * want) < 1e-6 and want not in (0.0, 1.0):
            raise AssertionError("return a share between 0 and 1, not a percentage")
        if abs(got - want) > 1e-9:
            raise AssertionError(
                f"blank_share{(ttft, gap, n)} returned {got!r}, expected {want!r}: total = ttft + (n_tokens - 1) × gap"
            )


def _arrivals(frames: list[bytes], times: list[float]) -> list[tuple[float, SSEEvent]]:
    """Parse each frame with the real parser and stamp its events with the given arrival time."""
    parser, out = SSEParser(), []
    for frame, t in zip(frames, times):
        out += [(t, ev) for ev in parser.feed(frame)]
    parser.close()
    return out


def lab04_streams() -> list[tuple[str, list[tuple[float, SSEEvent]]]]:
    """The timed streams 04.5 is checked on (public so a learner can try their function on them)."""
    plain = chat_text_stream(["Hel", "lo"])
    times = [0.21, 0.47, 0.52, 0.53, 0.53, 0.54]
    empty_first = [plain[0], sse_frame(to_json(chat_chunk([chat_choice({"content": ""})])))] + plain[1:]
    null_content = [
        sse_frame(to_json(chat_chunk([chat_choice({"role": "assistant", "content": None})]))),
        sse_comment("keep-alive"),
    ] + plain[1:]
    no_text = chat_text_stream([], include_usage=True)
    return [
        ("role chunk, then text", _arrivals(plain, times)),
        ("an empty content chunk before the text", _arrivals(empty_first, [0.2, 0.3, 0.65, 0.7, 0.7, 0.7, 0.7])),
        ('"content": null and a keep-alive first', _arrivals(null_content, [0.1, 0.2, 0.9, 1.0, 1.0, 1.0, 1.0])),
        ("no text at all (returns None)", _arrivals(no_text, [0.3, 0.4, 0.4, 0.4])),
    ]


def _crash_hint(exc: Exception) -> str:
    """What usually makes first_visible crash, for the verdict: the exception's name alone says too little."""
    if isinstance(exc, ValueError):  # json.JSONDecodeError is one
        return "; `data: [DONE]` is not JSON: test for it before json.loads"
    if isinstance(exc, IndexError):
        return '; the usage chunk\'s `choices` is an empty list: check `chunk["choices"]` before taking [0]'
    if isinstance(exc, (KeyError, TypeError, AttributeError)):
        return '; a delta may lack "content" or hold null in it: read it with .get() and check for None'
    return ""


@exercise("04.5", "first_visible")
def check_first_visible(fn: Callable[[list[tuple[float, SSEEvent]]], float | None]) -> None:
    if fn is Ellipsis:
        raise NotAttempted
    if not callable(fn):
        raise AssertionError("first_visible should be a function first_visible(arrivals)")
    for name, arrivals in lab04_streams():
        want = first_visible_time(arrivals)
        try:
            got = fn(list(arrivals))
        except (NotImplementedError, NotAttempted):
            raise
        except Exception as exc:  # say on which stream, and what usually causes it
            problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise AssertionError(f"on the stream with {name}, your code raised {problem}{_crash_hint(exc)}") from exc
        if got != want:
            hint = ""
            if arrivals and got == arrivals[0][0]:
                hint = " (that is the role chunk: it shows the user nothing)"
            raise AssertionError(f"on the stream with {name}: returned {got!r}, expected {want!r}{hint}")
