"""Checks for lab 08 (verify an endpoint): the two exercises of section 11 (exercises layer).

* 08.1 `defensive_read(chunks)`: read a Chat stream from raw network chunks and return what it said,
  `{"text", "tool_calls", "usage", "complete"}`, whatever provider profile sent it. The check feeds it the
  text answer (usage asked for) and the tool-call answer of every profile in `streamlab.core.standin.profiles`, cut
  into random network chunks, plus llama-server's refusal written as an `error:` line and an error object
  inside a 200 stream, and compares each result with what the bytes say.
* 08.2 `ci_gate(doc, depends_on=())`: the exit code a CI job should take from `streamlab check --json`'s
  document: 2 when the endpoint could not be checked, 1 when a check failed or when a check the application
  depends on warned, else 0.

Every case is computed from the profiles themselves (no server is started), so the checks are quick and the
same on every run.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from streamlab.core import shapes
from streamlab.core.conformance.checks import TOOL, ProbeResult, Report, probes_for
from streamlab.core.conformance.grade import grade
from streamlab.core.sse import parse
from streamlab.core.standin.profiles import ANSWER_PIECES, PROFILES, answer_episode, apply_profile
from streamlab.core.standin.script import ErrorEpisode
from streamlab.exercises import NotAttempted, exercise, function_answer

ANSWER = "".join(ANSWER_PIECES)
CALL = ("get_weather", {"location": "Paris, France"})
TEXT_REQUEST: dict[str, Any] = {
    "model": "any",
    "messages": [{"role": "user", "content": "Count to five."}],
    "stream": True,
    "stream_options": {"include_usage": True},
}
TOOL_REQUEST: dict[str, Any] = {
    "model": "any",
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "stream": True,
    "tools": [{"type": "function", "function": TOOL}],
}
REFUSAL = ErrorEpisode(400, shapes.error_body("invalid type for 'messages'", "invalid_request_error"))
DOCUMENTED_REFUSAL = {
    "error": REFUSAL,
    "not_json": ErrorEpisode(
        400, shapes.error_body("We could not parse the JSON body of your request.", "invalid_request_error")
    ),
    "too_long": ErrorEpisode(
        400,
        shapes.error_body(
            "This model's maximum context length is 32768 tokens.", "invalid_request_error", "context_length_exceeded"
        ),
    ),
}
"""The stand-in's own refusal of each kind of probe the API must refuse (before a profile reshapes it)."""
LAB_PROFILES = ("openai", "vllm", "ollama", "litellm", "llamacpp", "broken")
"""The profiles this lab's exercises read (lab 11 meets the real servers' own)."""
HINTS = {
    "ollama": "Ollama repeats the role on every delta and sends tool calls without an index (group them by id)",
    "vllm": "vLLM leaves finish_reason out instead of sending null (read it with .get)",
    "litellm": "LiteLLM's usage chunk carries a choice with an empty delta, and its tool calls end with "
    'finish_reason "stop"',
    "llamacpp": "llama-server puts the usage on the finish chunk, even unasked",
    "broken": "the broken profile never sends [DONE], changes ids, repeats the call id on every fragment and "
    "sends : ping comments",
}


@dataclass(frozen=True)
class ReadCase:
    """One stream for 08.1: a `label`, its raw bytes, and what a defensive reader must return for it."""

    label: str
    payload: bytes
    expected: dict[str, Any]
    hint: str = ""

    def chunks(self, seed: int) -> Iterator[bytes]:
        """The payload cut at random places (seeded), as a network might deliver it."""
        rng = random.Random(f"{self.label}/{seed}")
        cuts = sorted(rng.sample(range(1, len(self.payload)), min(len(self.payload) - 1, rng.randrange(3, 40))))
        edges = [0, *cuts, len(self.payload)]
        return (self.payload[a:b] for a, b in zip(edges, edges[1:]))


def last_usage(payload: bytes) -> dict[str, Any] | None:
    """The reference: the last usage object any event of the stream carried (None when none did)."""
    found = None
    for event in parse(payload)[0]:
        try:
            obj = json.loads(event.data)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("usage"), dict):
            found = obj["usage"]
    return found


@cache
def read_cases() -> tuple[ReadCase, ...]:
    """Every 08.1 case: each profile's text and tool-call answers, a refusal as an error: line, an error object."""
    cases = []
    for name in LAB_PROFILES:
        complete = name != "broken"
        for kind, request, expected in (
            ("text with usage", TEXT_REQUEST, {"text": ANSWER, "tool_calls": []}),
            ("a tool call", TOOL_REQUEST, {"text": "", "tool_calls": [CALL]}),
        ):
            sent = apply_profile(PROFILES[name], answer_episode("chat", request), dialect="chat", request=request)
            assert not isinstance(sent, ErrorEpisode), f"{name} answers a chat request with a stream"
            payload = sent.payload
            cases.append(
                ReadCase(
                    f"{name}, {kind}",
                    payload,
                    {**expected, "usage": last_usage(payload), "complete": complete},
                    HINTS.get(name, ""),
                )
            )
    refused = apply_profile(PROFILES["llamacpp"], REFUSAL, dialect="chat", request={"stream": True})
    cases.append(
        ReadCase(
            "llamacpp, a refusal sent as an error: line",
            refused.payload,  # type: ignore[union-attr]
            {"text": "", "tool_calls": [], "usage": None, "complete": False},
            "the parser ignores the error: line, so only [DONE] arrives: no choice ever finished",
        )
    )
    failed = b"".join(shapes.chat_error_stream(ANSWER_PIECES[:2]))
    cases.append(
        ReadCase(
            "an error object inside the stream",
            failed,
            {"text": "".join(ANSWER_PIECES[:2]), "tool_calls": [], "usage": None, "complete": False},
            'data: {"error": ...} means the answer failed, whatever came before',
        )
    )
    return tuple(cases)


def _call(fn: Callable[..., Any], label: str, *args: Any) -> Any:
    try:
        return fn(*args)
    except (NotImplementedError, NotAttempted):
        raise
    except Exception as exc:  # say which stream crashed the learner's code
        raise AssertionError(f"{label}: your code raised {type(exc).__name__}: {exc}") from exc


def _normalised(result: Any, label: str) -> dict[str, Any]:
    if not isinstance(result, dict) or not {"text", "tool_calls", "usage", "complete"} <= set(result):
        raise AssertionError(
            f"{label}: return a dict with the keys text, tool_calls, usage and complete; got {result!r:.80}"
        )
    try:
        calls = [(name, args) for name, args in result["tool_calls"]]
    except (TypeError, ValueError):
        raise AssertionError(
            f"{label}: tool_calls should be a list of (name, arguments dict) pairs, got {result['tool_calls']!r:.80}"
        ) from None
    return {"text": result["text"], "tool_calls": calls, "usage": result["usage"], "complete": result["complete"]}


@exercise("08.1", "defensive_read")
def check_defensive_read(answer: Any) -> None:
    fn = function_answer(answer, "defensive_read")
    for case in read_cases():
        for seed in range(2):
            got = _normalised(_call(fn, case.label, case.chunks(seed)), case.label)
            for key in ("text", "tool_calls", "usage", "complete"):
                if got[key] != case.expected[key]:
                    hint = f" ({case.hint})" if case.hint else ""
                    raise AssertionError(
                        f"{case.label}: {key} is {got[key]!r}, but the stream says {case.expected[key]!r}{hint}"
                    )


# -- 08.2 --------------------------------------------------------------------------------------------------------


def _simulated(name: str) -> dict[str, Any]:
    """The `--json` document `streamlab check --dialect both` gives for the stand-in in profile `name`."""
    results = []
    for probe in probes_for("both", "any"):
        answer = DOCUMENTED_REFUSAL.get(probe.kind) or answer_episode(probe.dialect, probe.body)
        not_json = probe.kind == "not_json"
        sent = apply_profile(
            PROFILES[name], answer, dialect=probe.dialect, request={} if not_json else probe.body, not_json=not_json
        )
        if isinstance(sent, ErrorEpisode):
            body = sent.body if isinstance(sent.body, bytes) else json.dumps(sent.body).encode()
            results.append(
                ProbeResult(
                    probe,
                    sent.status,
                    (("content-type", "text/plain" if isinstance(sent.body, bytes) else "application/json"),),
                    body,
                )
            )
        else:
            results.append(ProbeResult(probe, 200, (("content-type", "text/event-stream"),), sent.payload))
    return Report(f"stand-in --profile {name}", "any", "both", grade(results)).as_dict()


def _with(doc: dict[str, Any], check: str, status: str) -> dict[str, Any]:
    changed = json.loads(json.dumps(doc))
    for entry in changed["checks"]:
        if entry["id"] == check:
            entry["status"] = status
    return changed


@cache
def gate_cases() -> tuple[tuple[str, dict[str, Any], tuple[str, ...], int], ...]:
    """(label, document, depends_on, the exit code the gate must give)."""
    exact, vllm = _simulated("openai"), _simulated("vllm")
    usage_warn = _with(exact, "usage.choices", "warn")
    finish_warn = _with(exact, "chat.finish_null", "warn")
    gone = Report("http://127.0.0.1:9/v1", "any", "chat", unreachable="cannot connect: connection refused").as_dict()
    return (
        ("the openai profile", exact, (), 0),
        ("vllm (error.shape fails)", vllm, (), 1),
        ("vllm, and you depend on usage", vllm, ("usage.",), 1),
        ("a usage.choices warning, and you depend on nothing", usage_warn, (), 0),
        ("a usage.choices warning, and you bill on usage (depends_on ('usage.',))", usage_warn, ("usage.",), 1),
        ("a chat.finish_null warning, and you depend on usage", finish_warn, ("usage.",), 0),
        ("a chat.finish_null warning, and you depend on exactly that check", finish_warn, ("chat.finish_null",), 1),
        (
            "a warning on chat.finish_null, and you depend on 'chat.finish' (an id, not a prefix)",
            finish_warn,
            ("chat.finish",),
            0,
        ),
        ("an endpoint that could not be checked", gone, ("usage.",), 2),
    )


@exercise("08.2", "ci_gate")
def check_ci_gate(answer: Any) -> None:
    fn = function_answer(answer, "ci_gate")
    for label, doc, depends_on, want in gate_cases():
        got = _call(fn, label, json.loads(json.dumps(doc)), depends_on)
        if got != want:
            raise AssertionError(f"{label}: ci_gate returned {got!r}, the pipeline should exit {want}")
