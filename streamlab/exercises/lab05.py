"""Exercises of lab 05 (cancel, retry, truncation and resume): the checkers behind its check cells.

* 05.1 `retry_or_not`: "Retry or not?". For each of five situations, the right move:
  "retry" (an automatic retry is safe), "restart" (discard the partial output, then start again on
  purpose), "resume" (reconnect with a cursor; nothing is lost or repeated) or "report" (no retry:
  record the outcome and keep the partial output, marked).
* 05.2 `should_retry(status, events_delivered)`: the retry rule as a function.
* 05.3 `resume_cursor(payloads)`: the `starting_after` value after the events handled so far.

The checkers compare with `streamlab.core.retry.RetryPolicy` and `streamlab.core.resume.SequenceCursor`, the same
code the lab runs against the stand-in.
"""

from __future__ import annotations

from typing import Any

from streamlab.core.errors import SequenceError
from streamlab.core.resume import SequenceCursor
from streamlab.core.retry import AttemptResult, RetryPolicy
from streamlab.exercises import NotAttempted, exercise, function_answer

ACTIONS = ("retry", "restart", "resume", "report")

SITUATIONS = {
    "a": "HTTP 429 before any event",
    "b": "the connection is reset after 40 text deltas (an ordinary, foreground stream)",
    "c": "a background response stream drops after sequence_number 118",
    "d": 'the stream ends with finish_reason: "length"',
    "e": "a response.failed event arrives",
}

EXPECTED = {"a": "retry", "b": "restart", "c": "resume", "d": "report", "e": "report"}

WHY = {
    ("a", "restart"): "(a) nothing was shown yet, so there is nothing to discard: it is a plain, safe retry",
    ("a", "resume"): "(a) there is no stream to resume: the 429 came before any event",
    ("a", "report"): "(a) a 429 before any event is the textbook safe retry (after the server's Retry-After)",
    ("b", "retry"): "(b) 40 deltas already reached the user: an automatic retry glues a new answer onto the old one",
    ("b", "resume"): "(b) an ordinary stream has no cursor to resume from: only background responses do",
    ("b", "report"): "(b) the answer is truncated, not finished: the user still needs a whole answer",
    ("c", "retry"): "(c) a new request starts a new answer; the old one is still being generated",
    ("c", "restart"): "(c) a background response can be resumed: nothing needs to be thrown away",
    ("c", "report"): "(c) the response is still there on the server: pick it up where you left off",
    ("d", "retry"): "(d) the same request hits the same token limit again; the stream itself did not fail",
    ("d", "restart"): "(d) the output is real and complete up to the limit; restarting gives the same cut",
    ("d", "resume"): "(d) nothing was lost in transit: the server ended the answer on purpose",
    ("e", "retry"): "(e) the server reported a failure inside a 200 stream; events already reached the caller",
    ("e", "restart"): (
        "(e) the server itself ended the answer with a failure: first report it and keep the partial text marked "
        "as failed; whether to start again is a separate product decision"
    ),
    ("e", "resume"): "(e) the response is over (failed); there is nothing left to resume",
}


@exercise("05.1", "retry_or_not")
def check_retry_or_not(answer: Any) -> None:
    if answer is Ellipsis:
        raise NotAttempted
    if not isinstance(answer, dict):
        raise AssertionError(f"retry_or_not should be a dict like {{'a': 'retry', ...}}, got {type(answer).__name__}")
    if all(v is Ellipsis for v in answer.values()):
        raise NotAttempted
    keys = sorted(answer)
    if keys != sorted(EXPECTED):
        raise AssertionError(f"give one answer for each of {sorted(EXPECTED)}; you gave {keys}")
    for key in sorted(EXPECTED):
        value = answer[key]
        if value is Ellipsis:
            raise AssertionError(f"({key}) is still `...`")
        if value not in ACTIONS:
            raise AssertionError(f"({key}) should be one of {ACTIONS}, got {value!r}")
    wrong = [WHY[(k, answer[k])] for k in sorted(EXPECTED) if answer[k] != EXPECTED[k]]
    if wrong:
        raise AssertionError(f"{len(wrong)} of 5 not right yet. First: {wrong[0]}")


@exercise("05.2", "should_retry")
def check_should_retry(answer: Any) -> None:
    fn = function_answer(answer, "should_retry")
    policy = RetryPolicy(max_attempts=100, seed=0)
    # 505, 507 and 529 (an "overloaded" some providers send): every 5xx is retried, not only the familiar 500-504
    cases = [(s, 0) for s in (None, 400, 401, 403, 404, 408, 409, 422, 429, 500, 502, 503, 504, 505, 507, 529)]
    cases += [(None, 1), (None, 40), (503, 2), (429, 1)]
    for status, delivered in cases:
        if status is None:
            want = policy.decide(1, AttemptResult(error="connection reset", events_delivered=delivered)).retry
        else:
            want = policy.decide(1, AttemptResult(status=status, events_delivered=delivered)).retry
        try:
            got = fn(status, delivered)
        except (NotImplementedError, NotAttempted):
            raise
        except Exception as exc:  # say which input crashed the learner's code
            raise AssertionError(f"should_retry({status!r}, {delivered}) raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(got, bool):
            raise AssertionError(f"should_retry({status!r}, {delivered}) should return True or False, got {got!r}")
        if got != want:
            what = "a connection error" if status is None else f"HTTP {status}"
            after = f" after {delivered} event(s) reached the caller" if delivered else " before any event"
            hint = (
                " (every 5xx status is a server error worth retrying, not only 500-504)"
                if want and status is not None and status >= 505
                else ""
            )
            raise AssertionError(f"{what}{after}: should_retry returned {got}, but the rule says {want}{hint}")


def _payload(seq: int | None, kind: str = "response.output_text.delta") -> dict[str, Any]:
    return {"type": kind} if seq is None else {"type": kind, "sequence_number": seq}


@exercise("05.3", "resume_cursor")
def check_resume_cursor(answer: Any) -> None:
    fn = function_answer(answer, "resume_cursor")
    cases: list[tuple[str, list[dict[str, Any]]]] = [
        ("nothing handled yet", []),
        ("events 0..5", [_payload(n) for n in range(6)]),
        ("events 0..3 then a keep-alive", [_payload(n) for n in range(4)] + [_payload(None, "keepalive")]),
        (
            "keep-alives in between",
            [_payload(0), _payload(None, "keepalive"), _payload(1), _payload(None, "keepalive")],
        ),
        ("a replayed event", [_payload(0), _payload(1), _payload(1)]),
        ("a skipped event", [_payload(0), _payload(2)]),
    ]
    for label, payloads in cases:
        cursor = SequenceCursor()
        try:
            for p in payloads:
                cursor.admit(p)
            want: Any = cursor.value
        except SequenceError:
            want = ValueError
        try:
            got = fn([dict(p) for p in payloads])
        except (NotImplementedError, NotAttempted):
            raise
        except ValueError:
            got = ValueError
        except Exception as exc:  # say which input crashed the learner's code
            raise AssertionError(f"{label}: resume_cursor raised {type(exc).__name__}: {exc}") from exc
        if got != want:
            shown = "raise ValueError" if want is ValueError else f"return {want!r}"
            gave = "raised ValueError" if got is ValueError else f"returned {got!r}"
            raise AssertionError(f"{label}: resume_cursor should {shown}, but it {gave}")
