"""Checks for lab 06 (the official SDK over the same bytes): the exercises of section 9.

* 06.1 `sdk_outcome(stream, stop_after=None)`: read an SDK Chat stream (usage requested) and return one of the
  five outcomes; never "complete" for a stream that was cut, however quietly the SDK's loop ended.
* 06.2 `retry_story(records)`: from the stand-in's records, how many attempts the SDK made for its last call,
  and why it stopped ("succeeded", "not retryable", "out of retries", "stream broke").
* 06.3 `safe_read(stream, idle_timeout)`: an SDK loop that survives the usage chunk (`choices == []`) and a
  stream that stalls while keep-alives keep arriving; returns `(text, usage, outcome)`.
* 06.4 `read_structured(stream)`: read a structured answer (one JSON object) from an SDK Chat stream and return
  `(status, value)`: "complete" with the whole object, "incomplete" with what arrived (a cut answer is never a
  parse error), or "invalid" with None for text that is not JSON.

Every check runs the learner's code on real SDK streams from its own stand-in (never the notebook's server)
and compares with the library: `streamlab.net.sdk.read_sdk_stream` on the same bytes for 06.1 and 06.3, and
the scripted story (the SDK's exception and the records) for 06.2, and for 06.4
`streamlab.core.partialjson.structured_answer` on the text and outcome the library rebuilds from the same frames.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import openai

from streamlab.core import shapes
from streamlab.core.accumulate import ChatAccumulator
from streamlab.core.errors import IdleTimeout
from streamlab.core.partialjson import structured_answer
from streamlab.core.sse import parse
from streamlab.core.standin.script import Cut, End, Episode, KeepAlive, Send, Wait, error_episode, paced
from streamlab.exercises import NotAttempted, exercise, function_answer
from streamlab.net.sdk import SDKStreamView, read_sdk_stream
from streamlab.net.standin.server import StandIn

OUTCOMES = ("complete", "incomplete", "failed", "truncated", "cancelled")
REASONS = ("succeeded", "not retryable", "out of retries", "stream broke")
KEY = "lab06-check"  # the stand-in keeps episode counts per API key
WORDS = ["The ", "answer ", "is ", "forty-", "two."]
ASK: dict[str, Any] = {
    "messages": [{"role": "user", "content": "What is the answer?"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}


def _sends(frames: Sequence[bytes]) -> list[Send]:
    return [Send(frame) for frame in frames]


def _call(fn: Callable[..., Any], label: str, *args: Any, **kwargs: Any) -> Any:
    """Run the learner's function; a stub stays "not attempted", a crash names the case."""
    try:
        return fn(*args, **kwargs)
    except (NotImplementedError, NotAttempted):
        raise
    except Exception as exc:  # say which case crashed the learner's code
        raise AssertionError(f"{label}: your code raised {type(exc).__name__}: {exc}") from exc


@contextmanager
def _sdk(scripts: dict[str, Any], **options: Any) -> Iterator[tuple[StandIn, openai.OpenAI]]:
    with StandIn(scripts) as server, openai.OpenAI(base_url=server.base_url, api_key=KEY, **options) as client:
        yield server, client


def _outcome_text(value: Any, name: str, label: str) -> str:
    text = str(value) if isinstance(value, str) else None  # Outcome members are str too
    if text not in OUTCOMES:
        raise AssertionError(f"{label}: {name} should return one of {OUTCOMES}, got {value!r}")
    return text


# -- 06.1 ---------------------------------------------------------------------------------------------

FULL = shapes.chat_text_stream(WORDS, model="check")  # role, 5 pieces, finish, usage, [DONE]
OUTCOME_CASES: list[tuple[str, list[Any], int | None, str]] = [
    # (what happens, steps, stop_after, hint when the answer is wrong)
    ("a complete answer", _sends(FULL), None, ""),
    (
        "finish_reason 'length'",
        _sends(shapes.chat_text_stream(WORDS[:3], finish_reason="length")),
        None,
        "the server stopped the answer on purpose at the token limit",
    ),
    (
        "finish_reason 'content_filter'",
        _sends(shapes.chat_text_stream(WORDS[:2], finish_reason="content_filter")),
        None,
        "the server stopped the answer on purpose",
    ),
    (
        "an error object inside the 200 stream",
        _sends(shapes.chat_error_stream(WORDS[:2])),
        None,
        "the SDK raises openai.APIError for it",
    ),
    (
        "the connection is reset after three pieces",
        _sends(FULL[:4]) + [Cut(reset=True)],
        None,
        "the SDK raises openai.APIConnectionError out of the loop",
    ),
    (
        "the body ends cleanly after three pieces (no finish_reason, no [DONE])",
        _sends(FULL[:4]) + [End()],
        None,
        "the SDK's loop ends without an exception, yet no finish_reason ever came",
    ),
    (
        "the body ends cleanly right after the finish chunk (no usage chunk, no [DONE])",
        _sends(FULL[:7]) + [End()],
        None,
        "the usage chunk that stream_options.include_usage asked for never came: the stream stopped before its end",
    ),
    (
        "you stop after 2 chunks",
        paced(shapes.chat_text_stream([f"t{i:03d} " for i in range(200)]), gap=0.02),
        2,
        "you stopped reading on purpose",
    ),
]


@exercise("06.1", "sdk_outcome")
def check_sdk_outcome(answer: Any) -> None:
    fn = function_answer(answer, "sdk_outcome")
    scripts = {f"case{n}": Episode(steps) for n, (_, steps, _, _) in enumerate(OUTCOME_CASES)}
    with _sdk(scripts, max_retries=0, timeout=10) as (server, client):
        for n, (label, _, stop_after, hint) in enumerate(OUTCOME_CASES):
            model = f"case{n}"
            first = client.chat.completions.create(model=model, **ASK)
            want = str(read_sdk_stream(first, stop_after=stop_after).outcome)
            stream = client.chat.completions.create(model=model, **ASK)
            try:
                args = (stream,) if stop_after is None else (stream, stop_after)
                got = _outcome_text(_call(fn, label, *args), "sdk_outcome", label)
                if got != want:
                    raise AssertionError(f"{label}: you said {got!r}, but it is {want!r} ({hint})")
                if stop_after is not None and not _server_saw_client_go(server, model):
                    raise AssertionError(
                        f"{label}: you returned 'cancelled' but the stand-in is still writing: "
                        "close the stream (stream.close()) so the server sees you go"
                    )
            finally:
                stream.close()


def _server_saw_client_go(server: StandIn, model: str) -> bool:
    """Whether the stand-in's record of the latest request for `model` ends with the client gone (2 s at most;
    the uncancelled stream would play for 4 s)."""
    server.wait_until(lambda rs: [r for r in rs if r.model == model][-1].finished, timeout=2.0)
    return server.records(model)[-1].ending == "client_gone"


def solution_sdk_outcome(stream: Any, stop_after: int | None = None) -> str:
    """The solution shown in the notebook: exceptions first, then demand every sign of a proper end."""
    finish, usage, chunks = None, None, 0
    try:
        for chunk in stream:
            chunks += 1
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
            if stop_after is not None and chunks >= stop_after:
                stream.close()
                return "cancelled"
    except openai.APIConnectionError:  # also APITimeoutError: the bytes stopped
        return "truncated"
    except openai.APIError:  # an error object inside the 200 stream
        return "failed"
    if finish is None or usage is None:  # the loop ended quietly, but the end never came
        return "truncated"
    return "incomplete" if finish in ("length", "content_filter") else "complete"


# -- 06.2 ---------------------------------------------------------------------------------------------

_OK = Episode(_sends(shapes.chat_text_stream(["Hi"], include_usage=False)))
_CUT = Episode(_sends(shapes.chat_text_stream(["Hi", " there"], include_usage=False)[:2]) + [Cut()])
RETRY_CASES: list[tuple[str, str, list[Any], list[dict[str, Any]], tuple[int, str]]] = [
    # (model, what happens, episodes, one dict of client options per SDK call, (attempts, why))
    (
        "bad",
        "HTTP 400 (max_retries=2)",
        [error_episode(400, "bad", type="invalid_request_error")],
        [{"max_retries": 2}],
        (1, "not retryable"),
    ),
    (
        "flaky",
        "503, then 429, then a stream (max_retries=2)",
        [error_episode(503, "busy", retry_after_ms=1), error_episode(429, "slow down", retry_after_ms=1), _OK],
        [{"max_retries": 2}],
        (3, "succeeded"),
    ),
    (
        "down",
        "503 every time (max_retries=2)",
        [error_episode(503, "down", retry_after_ms=1)],
        [{"max_retries": 2}],
        (3, "out of retries"),
    ),
    (
        "never",
        "503 with max_retries=0",
        [error_episode(503, "down", retry_after_ms=1)],
        [{"max_retries": 0}],
        (1, "out of retries"),
    ),
    (
        "gone",
        "429, then 404 (max_retries=3)",
        [
            error_episode(429, "slow down", retry_after_ms=1),
            error_episode(404, "no such model", code="model_not_found"),
        ],
        [{"max_retries": 3}],
        (2, "not retryable"),
    ),
    (
        "broke",
        "two calls: the first gets 503 twice (max_retries=1), the second a 200 whose stream is cut",
        [error_episode(503, "busy", retry_after_ms=1), error_episode(503, "busy", retry_after_ms=1), _CUT],
        [{"max_retries": 1}, {"max_retries": 1}],
        (1, "stream broke"),
    ),
    (
        "slow",
        "the server does not answer within timeout=0.2 s (max_retries=1)",
        [error_episode(503, "too late", wait=2.0)],
        [{"max_retries": 1, "timeout": 0.2}],
        (2, "out of retries"),
    ),
]


def _play_calls(client: openai.OpenAI, model: str, calls: list[dict[str, Any]]) -> None:
    for options in calls:
        try:
            stream = client.with_options(**options).chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}], stream=True
            )
            for _ in stream:
                pass
        except openai.APIError:  # every way the story ends; the records tell it
            pass


@exercise("06.2", "retry_story")
def check_retry_story(answer: Any) -> None:
    fn = function_answer(answer, "retry_story")
    scripts = {model: episodes for model, _, episodes, _, _ in RETRY_CASES}
    with _sdk(scripts, timeout=10) as (server, client):
        for model, label, _, calls, want in RETRY_CASES:
            _play_calls(client, model, calls)
            server.wait_idle()
            records = server.records(model)
            got = _call(fn, label, list(records))
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                raise AssertionError(f"{label}: retry_story should return a pair (attempts, why), got {got!r}")
            attempts, why = got
            if why not in REASONS:
                raise AssertionError(f"{label}: why should be one of {REASONS}, got {why!r}")
            if attempts != want[0]:
                raise AssertionError(
                    f"{label}: the SDK made {want[0]} attempt(s) for its last call, you said {attempts!r} "
                    "(a call starts at the record whose x-stainless-retry-count is '0')"
                )
            if why != want[1]:
                raise AssertionError(f"{label}: it stopped because {_WHY[want[1]]}; you said {why!r}")


_WHY = {
    "succeeded": "the last attempt got a 200 and its stream reached its end (record outcome 'complete')",
    "not retryable": "the last status is one the SDK never retries (only 408, 409, 429 and 5xx are)",
    "out of retries": "the last attempt failed in a retryable way (a 5xx, a 429, or no answer at all: status "
    "None) and max_retries was used up",
    "stream broke": "the last attempt got a 200 and the stream then broke; the SDK never retries a started stream",
}


def solution_retry_story(records: Sequence[Any]) -> tuple[int, str]:
    """The solution shown in the notebook: find the last call by its retry-count header, read its last record."""
    first = max(i for i, r in enumerate(records) if r.headers.get("x-stainless-retry-count") == "0")
    call = records[first:]
    last = call[-1]
    if last.status == 200:
        return len(call), "succeeded" if last.ending == "complete" else "stream broke"
    if last.status is None or last.status in (408, 409, 429) or last.status >= 500:
        return len(call), "out of retries"
    return len(call), "not retryable"


# -- 06.3 ---------------------------------------------------------------------------------------------

HELLO = ["Hel", "lo ", "w\u00f6rld"]
_STALL = shapes.chat_text_stream(["still ", "here"], include_usage=False)[:3]  # role chunk and two pieces
SAFE_CASES: list[tuple[str, list[Any], bool]] = [
    # (what happens, steps, whether the client must hang up before the server gives up)
    ("an ordinary answer with its usage chunk", _sends(shapes.chat_text_stream(HELLO)), False),
    ("usage on every chunk (a vLLM option)", _sends(shapes.chat_variant_stream(HELLO, "vllm-continuous-usage")), False),
    (
        "the usage chunk keeps a choice with an empty delta (LiteLLM)",
        _sends(shapes.chat_variant_stream(HELLO, "litellm-usage-in-choice")),
        False,
    ),
    (
        "the connection is reset before the usage chunk",
        _sends(shapes.chat_text_stream(HELLO)[:4]) + [Cut(reset=True)],
        False,
    ),
    (
        "two pieces, then only keep-alive comments for 3 s",
        _sends(_STALL) + [Wait(0.05), KeepAlive()] * 60 + [Cut()],
        True,
    ),
]
IDLE = 0.3


def _tokens(usage: Any) -> Any:
    if usage is None:
        return None
    if isinstance(usage, dict):
        return usage.get("completion_tokens")
    return getattr(usage, "completion_tokens", usage)


@exercise("06.3", "safe_read")
def check_safe_read(answer: Any) -> None:
    fn = function_answer(answer, "safe_read")
    scripts = {f"case{n}": Episode(steps) for n, (_, steps, _) in enumerate(SAFE_CASES)}
    with _sdk(scripts, max_retries=0, timeout=10) as (server, client):
        for n, (label, _, must_leave) in enumerate(SAFE_CASES):
            model = f"case{n}"
            want = read_sdk_stream(client.chat.completions.create(model=model, **ASK), idle_timeout=IDLE)
            stream = client.chat.completions.create(model=model, **ASK)
            try:
                got = _call(fn, label, stream, IDLE)
            finally:
                stream.close()
            if not isinstance(got, (tuple, list)) or len(got) != 3:
                raise AssertionError(f"{label}: safe_read should return (text, usage, outcome), got {got!r}")
            text, usage, outcome = got
            if text != want.text:
                raise AssertionError(f"{label}: the text should be {want.text!r}, you returned {text!r}")
            if _tokens(usage) != _tokens(want.usage):
                have = "no usage (None)" if want.usage is None else f"completion_tokens={_tokens(want.usage)}"
                raise AssertionError(f"{label}: the usage should be {have}, you returned {usage!r}")
            got_outcome = _outcome_text(outcome, "safe_read", label)
            if got_outcome != want.outcome:
                raise AssertionError(f"{label}: the outcome is {str(want.outcome)!r}, you said {got_outcome!r}")
            if must_leave:
                server.wait_idle(timeout=10)
                record = server.records(model)[-1]
                if record.ending != "client_gone":
                    raise AssertionError(
                        f"{label}: your loop waited until the server gave up (the stand-in's record says "
                        f"{str(record.ending)!r}); leave once no content came for idle_timeout seconds"
                    )


def solution_safe_read(stream: Any, idle_timeout: float) -> tuple[str, Any, str]:
    """The solution shown in the notebook: guard the empty choices, and read through the library's view."""
    text, usage = "", None
    view = SDKStreamView(stream, idle_timeout=idle_timeout)
    try:
        with view:
            for chunk in view:
                if chunk.usage is not None:
                    usage = chunk.usage
                if chunk.choices:  # [] on the usage chunk
                    text += chunk.choices[0].delta.content or ""
    except (openai.APIError, IdleTimeout):
        pass  # the view recorded how the stream ended
    return text, usage, str(view.outcome)


# -- 06.4 ---------------------------------------------------------------------------------------------

WEATHER = {"city": "Oslo", "temperature_c": -3.5, "conditions": ["snow"], "umbrella": False}
_JSON = shapes.json_pieces(WEATHER, size=7)
_HALF = len(_JSON) // 2
STRUCTURED_CASES: list[tuple[str, list[bytes], list[Any], str]] = [
    # (what happens, the frames the server sends, steps after them, hint when the answer is wrong)
    ("the whole answer", shapes.chat_text_stream(_JSON), [], "the stream ended with finish_reason 'stop'"),
    (
        "cut half-way by the token limit",
        shapes.chat_text_stream(_JSON[:_HALF], finish_reason="length"),
        [],
        "finish_reason 'length' cut the answer: it is incomplete, and what arrived is parse_partial's value",
    ),
    (
        "cut inside a string by the token limit",
        shapes.chat_text_stream([_JSON[0], ':"Os'], finish_reason="length"),
        [],
        "a string cut in the middle is kept as far as it came (parse_partial's default)",
    ),
    (
        "the connection reset half-way",
        shapes.chat_text_stream(_JSON)[: 1 + _HALF],
        [Cut(reset=True)],
        "the SDK raises openai.APIConnectionError: catch it, the answer is incomplete",
    ),
    (
        "the model answered in prose, not JSON",
        shapes.chat_text_stream(["Sure! ", "It is ", "snowing."]),
        [],
        "text that is not JSON at all is 'invalid', with None as its value",
    ),
]


def expected_structured(frames: list[bytes]) -> tuple[str, Any]:
    """The reference answer for 06.4: the library's verdict on the text and outcome of `frames`."""
    acc = ChatAccumulator()
    for event in parse(b"".join(frames))[0]:
        acc.feed(event)
    verdict = structured_answer(acc.text.get(0, ""), acc.outcome())
    return verdict.status, verdict.value


@exercise("06.4", "read_structured")
def check_read_structured(answer: Any) -> None:
    fn = function_answer(answer, "read_structured")
    scripts = {f"case{n}": Episode(_sends(frames) + steps) for n, (_, frames, steps, _) in enumerate(STRUCTURED_CASES)}
    with _sdk(scripts, max_retries=0, timeout=10) as (_server, client):
        for n, (label, frames, _, hint) in enumerate(STRUCTURED_CASES):
            want = expected_structured(frames)
            stream = client.chat.completions.create(model=f"case{n}", **ASK)
            try:
                got = fn(stream)
            except (NotImplementedError, NotAttempted):
                raise
            except Exception as exc:  # a parse error is the typical wrong answer: say what the case was
                raise AssertionError(f"{label}: your code raised {type(exc).__name__}: {exc}; {hint}") from exc
            finally:
                stream.close()
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                raise AssertionError(f"{label}: read_structured should return (status, value), got {got!r}")
            if tuple(got) != want:
                raise AssertionError(f"{label}: expected {want!r}, you returned {tuple(got)!r}; {hint}")
