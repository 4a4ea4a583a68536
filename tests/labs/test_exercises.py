"""Exercise checks give useful verdicts: stubs are "not attempted yet", crashes name the input that caused
them, and typical wrong answers are told apart from right ones. (tests/labs/test_solutions.py proves that every
hidden solution passes.)"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

import streamlab.exercises
from streamlab.core.sse import SSEParser
from streamlab.exercises import check, labs_with_exercises, load_lab, registry, verdict

LABS = tuple(labs_with_exercises())  # every lab that has an exercises module: 01 to 05, and 06 on as they come
for _lab in LABS:
    importlib.import_module(f"streamlab.exercises.lab{_lab}")

VALUE_ANSWERS = {
    "answer_1",
    "answer_2",
    "answer_3",
    "answer_4",
    "retry_or_not",
    "total_600",
    "blank_screen",
    "tokens_at_close",
    "diagnosis",
    "breaker_table",
    "fail_over_or_not",
    "interval_ms",
    "fixes",
}
"""Exercises answered with a value (`name = ...`), not a function: a function stub is simply a wrong value."""


def _checks_open_sockets(lab: str) -> bool:
    """Whether lab NN's checks start a server (a stand-in, a relay): their tests are then `net`."""
    source = (Path(streamlab.exercises.__file__).parent / f"lab{lab}.py").read_text(encoding="utf-8")
    return bool(re.search(r"\b(?:StandIn|AppServer|serve)\(", source))


EXERCISES = [
    pytest.param(ex_id, marks=[pytest.mark.net] if _checks_open_sockets(ex_id[:2]) else [])
    for ex_id in sorted(registry())
]


def _stub(*args: object) -> object:
    raise NotImplementedError


def _crash(*args: object) -> object:
    raise KeyError("boom")


@pytest.mark.parametrize("ex_id", EXERCISES)
def test_untouched_stubs_are_not_attempted(ex_id: str) -> None:
    """Both stub shapes the labs use: `answer = ...` and a function whose body raises NotImplementedError."""
    assert verdict(ex_id, ...) == f"Exercise {ex_id}: not attempted yet"
    if registry()[ex_id].name not in VALUE_ANSWERS:
        assert verdict(ex_id, _stub) == f"Exercise {ex_id}: not attempted yet"


@pytest.mark.parametrize("ex_id", ["01.5", "01.6", "03.1", "04.5", "05.2", "05.3", "11.3"])
def test_a_crash_is_reported_with_the_input_that_caused_it(ex_id: str) -> None:
    text = verdict(ex_id, _crash)
    assert text.startswith(f"Exercise {ex_id}: not yet:")
    assert "KeyError" in text
    # the message names the case: a call with its arguments, a fixture, or a labelled scenario
    assert any(mark in text for mark in ("(", "fixture", ":")), text.split("not yet:")[1]


def test_parse_by_hand_hints_at_the_rule() -> None:
    assert verdict("01.2", [("x", "1"), ("message", "2")]).endswith("the last block never got its blank line.")
    assert verdict("01.3", [("message", "two spaces")]).startswith("Exercise 01.3: not yet: the number of events")
    assert verdict("01.1", [("message", "a\nb")]) == "Exercise 01.1: passed"


def test_split_lines_check_names_the_cut_and_the_wrong_line() -> None:
    def naive(chunks):  # right on whole streams, wrong when a CR and its LF arrive apart
        buffer = b""
        for chunk in chunks:
            buffer += chunk
            *lines, buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
            yield from lines

    text = verdict("01.6", naive)
    assert "\\r | \\n" in text  # the cut between CR and LF, shown byte by byte
    assert "an empty line" in text


def test_retry_or_not_explains_the_failed_stream_case() -> None:
    answer = {"a": "retry", "b": "restart", "c": "resume", "d": "report", "e": "restart"}
    text = verdict("05.1", answer)
    assert text.startswith("Exercise 05.1: not yet:") and "separate product decision" in text


def test_the_labs_with_exercises_are_found() -> None:
    assert LABS[:6] == ("01", "02", "03", "04", "05", "06")
    assert {ex_id.split(".")[0] for ex_id in registry()} == set(LABS)


@pytest.mark.parametrize(
    ("ex_id", "hint"),
    [
        ("99.9", 'an id is "NN.K", lab NN and exercise K; the labs with exercises are 01, 02, 03'),
        ("01.9", "lab 01 has 01.1, 01.2, 01.3, 01.4, 01.5, 01.6"),
        ("1.1", "the labs with exercises are 01"),
        ("", "the labs with exercises are 01"),
        (3.1, "the labs with exercises are 01"),
    ],
)
def test_an_unknown_exercise_gets_a_verdict_line_not_an_exception(
    ex_id: object, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    check(ex_id, 42)  # a typo in a check cell must not stop "Restart & Run All"
    out = capsys.readouterr().out
    assert out.startswith(f"Exercise {ex_id}: no such exercise (") and hint in out
    assert out.count("\n") == 1
    with pytest.raises(KeyError, match="no exercise"):
        load_lab(ex_id)


@pytest.mark.parametrize(("seconds", "right_in_ms"), [(0.04, True), (0.05, True), (0.035, True), (0.5, False)])
def test_an_interval_typed_in_seconds_is_told_it_looks_like_seconds(seconds: float, right_in_ms: bool) -> None:
    text = verdict("10.3", seconds)
    assert text.startswith("Exercise 10.3: not yet: interval_ms is in milliseconds"), text
    assert f"would be interval_ms = {seconds * 1000:g}" in text, text
    assert (verdict("10.3", seconds * 1000) == "Exercise 10.3: passed") is right_in_ms  # 500 ms waits too long


def test_an_interval_in_milliseconds_is_judged_on_the_budgets_not_the_unit() -> None:
    assert verdict("10.3", 40) == "Exercise 10.3: passed"
    for ms in (0, 1, 10, 100):
        text = verdict("10.3", ms)
        assert text.startswith("Exercise 10.3: not yet: at ") and "looks like seconds" not in text, text


# --- typical wrong answers that used to pass, and verdicts that said too little (issue 36) ----------------------


def test_retrying_only_500_to_504_is_not_the_rule() -> None:
    def familiar_five(status, delivered):  # every status the lab's stand-in sends is in 500-504
        return delivered == 0 and (status is None or status in (408, 409, 429) or 500 <= status <= 504)

    text = verdict("05.2", familiar_five)
    assert text.startswith("Exercise 05.2: not yet: HTTP 505 before any event"), text
    assert "every 5xx" in text


def _finish_of_any_choice(body: bytes) -> str:
    """11.3 written as if a stream had one choice: the last finish_reason of any choice."""
    events = SSEParser().feed(body)
    if not events:
        return "empty"
    if events[-1].data != "[DONE]":
        return "truncated"
    reason = None
    for event in events[:-1]:
        for choice in json.loads(event.data).get("choices") or []:
            reason = choice.get("finish_reason") or reason
    return reason or "interrupted"


def test_reading_the_finish_reason_of_any_choice_is_wrong() -> None:
    text = verdict("11.3", _finish_of_any_choice)
    assert text.startswith("Exercise 11.3: not yet: 2 of "), text
    assert "'length', not 'stop'" in text and "'interrupted', not 'stop'" in text and "choice 0" in text


def test_a_crash_in_how_it_ended_says_on_which_body_and_why() -> None:
    def every_chunk_has_a_choice(body: bytes) -> str:
        reason = "interrupted"
        for event in SSEParser().feed(body):
            if event.data != "[DONE]":
                reason = json.loads(event.data)["choices"][0].get("finish_reason") or reason
        return reason

    text = verdict("11.3", every_chunk_has_a_choice)
    assert "your code raised IndexError: list index out of range;" in text, text
    assert "on the body of a documented stream with a usage chunk" in text and "`choices` is empty" in text

    def no_done_test(body: bytes) -> str:
        return [json.loads(e.data) for e in SSEParser().feed(body)] and "stop"

    text = verdict("11.3", no_done_test)
    assert "JSONDecodeError" in text and "`data: [DONE]` is not JSON" in text, text


def test_a_crash_in_first_visible_says_on_which_stream_and_why() -> None:
    def every_chunk_has_a_choice(arrivals):
        for at, event in arrivals:
            if event.data != "[DONE]" and json.loads(event.data)["choices"][0]["delta"].get("content"):
                return at
        return None

    text = verdict("04.5", every_chunk_has_a_choice)
    assert text.startswith("Exercise 04.5: not yet: on the stream with no text at all"), text
    assert "IndexError: list index out of range;" in text and "usage chunk's `choices` is an empty list" in text


def test_the_first_fragment_is_not_the_name_when_the_pieces_say_otherwise() -> None:
    def first_if_offered(fragments, offered):
        pieces = [p for p in fragments if p]
        joined = "".join(pieces)
        if joined in offered:
            return joined
        return pieces[0] if pieces and pieces[0] in offered else None

    text = verdict("11.4", first_if_offered)
    assert text.startswith("Exercise 11.4: not yet: an offered name, then a piece"), text
    assert "join to 'get_weather_v2'" in text and "the first fragment alone names nothing" in text


@pytest.mark.net
def test_a_long_relay_verdict_is_cut_at_the_end_of_a_word() -> None:
    """07.1's verdict quotes the checker's evidence, cut to 220 characters: at a word's end, never mid-word."""
    from streamlab.exercises import lab07
    from streamlab.exercises.lab07 import _clip

    async def whole_body(upstream, stream):  # the typical wrong answer: wait for the whole body
        yield b"".join([chunk async for chunk in upstream.aiter_bytes()])

    report = lab07.check_relay(
        lambda upstream: lab07.learner_relay(whole_body, upstream), requirements=(1,), **lab07.CHECKER
    )
    evidence = report.failures[0].evidence
    assert len(evidence) > 220, evidence  # long enough to be cut
    clipped = _clip(evidence, 220)
    assert len(clipped) <= 220 and clipped.endswith("...")
    kept = clipped[:-3]
    assert evidence.startswith(kept) and evidence[len(kept)] in " ,;:", (kept[-20:], evidence[len(kept) :][:20])
    assert _clip("x" * 300, 220) == "x" * 300  # no word end to cut at: whole, never mid-word
    assert _clip("short", 220) == "short"


def _chunk_deltas(chunks):
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            yield choice.get("delta") or {}


def test_split_reasoning_tells_one_field_only_and_a_doubled_mirror_apart_from_right() -> None:
    """03.3: reading only `reasoning_content`, or appending both fields of a mirrored delta, fails with the
    case and the rule it broke; thinking appended to the answer fails too."""

    def one_field(chunks):
        deltas = list(_chunk_deltas(chunks))
        return "".join(d.get("reasoning_content") or "" for d in deltas), "".join(
            d.get("content") or "" for d in deltas
        )

    def both_fields(chunks):
        deltas = list(_chunk_deltas(chunks))
        thinking = "".join((d.get("reasoning_content") or "") + (d.get("reasoning") or "") for d in deltas)
        return thinking, "".join(d.get("content") or "" for d in deltas)

    def thinking_in_the_answer(chunks):
        reasoning, answer = both_fields(chunks)
        return reasoning, reasoning + answer

    text = verdict("03.3", one_field)
    assert text.startswith("Exercise 03.3: not yet: thinking in delta.reasoning (") and "two field names" in text
    text = verdict("03.3", both_fields)
    assert "the same thinking in both fields" in text and "keep it once" in text
    assert "the answer is" in verdict("03.3", thinking_in_the_answer)
    assert verdict("03.3", lambda chunks: "just text").endswith("return a pair (reasoning, answer), got 'just text'")
