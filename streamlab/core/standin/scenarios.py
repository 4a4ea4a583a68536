"""Named stand-in scenarios, the scripts `streamlab standin` serves to a room (sans-IO core: scripts are plain data).

Each scenario is a script under its own model name, so `scenario("all")` serves every one at once and a
learner picks one by naming its model. Every learner (API key) plays them from the start: the first request
of each learner to `flaky` gets the 429, the first to `cutoff` gets the cut, and so on.

`ROOM_SCENARIOS` is the table: for each scenario its model, its route (Chat Completions or Responses), what
it plays and which labs use it (`LABS` names the labs), so an instructor can point a room at the case the
lab in front of them teaches (`streamlab standin --list` prints it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from streamlab.core import shapes
from streamlab.core.standin.script import (
    Cut,
    End,
    Episode,
    ErrorEpisode,
    KeepAlive,
    Send,
    Step,
    StoredResponse,
    Wait,
    error_episode,
    paced,
)

__all__ = [
    "SCENARIOS",
    "REASONING_PIECES",
    "QUEUED_SECONDS",
    "STRUCTURED_ANSWER",
    "ROOM_SCENARIOS",
    "RoomScenario",
    "LABS",
    "MARKDOWN_TOKENS",
    "PREFILL_SECONDS",
    "scenario",
    "scenario_of",
    "markdown_pieces",
]

PREFILL_SECONDS = 3.0
"""How long the `prefill` and `prefill-ping` scenarios keep the answer back (lab 13 puts a shorter idle timeout in
front)."""

QUEUED_SECONDS = 0.5
"""How long the `queued` scenario's background response waits between `response.queued` and
`response.in_progress`."""

LABS: dict[str, str] = {
    "01": "SSE by hand",
    "02": "broken parsers",
    "03": "dialects and deltas",
    "04": "time to first token",
    "05": "cancel, retry, resume",
    "06": "the official SDK",
    "07": "capstone: a relay",
    "08": "verify an endpoint",
    "09": "troubleshooting",
    "10": "a gateway",
    "12": "TypeScript and the browser",
    "13": "between the server and the screen",
}
"""The labs by number, as the room scenarios refer to them."""


@dataclass(frozen=True)
class RoomScenario:
    """One named scenario: the `model` to ask for, its `route` ("chat/completions" or "responses"), what it
    plays, and the labs (numbers, see `LABS`) whose cases it serves."""

    name: str
    model: str
    route: str
    description: str
    labs: tuple[str, ...]


ROOM_SCENARIOS: tuple[RoomScenario, ...] = (
    RoomScenario(
        "ttft",
        "scheduled",
        "chat/completions",
        "a Chat Completions answer, first token after 0.30 s, then one every 0.05 s (20 tokens)",
        ("01", "04", "07", "08", "10", "12", "13"),
    ),
    RoomScenario(
        "responses", "responses", "responses", "the same schedule as a Responses stream", ("01", "03", "06", "08")
    ),
    RoomScenario(
        "flaky",
        "flaky",
        "chat/completions",
        "HTTP 429 with retry-after-ms: 200 on the first request, the answer on the next",
        ("05", "06", "09", "10"),
    ),
    RoomScenario(
        "cutoff",
        "cutoff",
        "chat/completions",
        "the connection is cut inside a UTF-8 character on the first request; whole later",
        ("02", "05", "07", "09", "12"),
    ),
    RoomScenario(
        "stall",
        "stall",
        "chat/completions",
        "two tokens, then only ': ping' keep-alive comments every second, forever",
        ("05", "06", "07", "09", "12", "13"),
    ),
    RoomScenario(
        "background",
        "bg",
        "responses",
        "a background Responses stream cut after 7 events; each learner "
        "resumes their own copy with GET /v1/responses/resp_demo?stream=true&starting_after=N",
        ("05", "06"),
    ),
    RoomScenario(
        "tools",
        "tools",
        "chat/completions",
        "two parallel tool calls (get_weather, get_time) whose argument fragments interleave",
        ("03", "06", "09", "12"),
    ),
    RoomScenario(
        "tools-cut",
        "tools-cut",
        "chat/completions",
        "the same two tool calls, the connection cut in the middle of the second call's arguments (every time)",
        ("03", "06", "09", "12"),
    ),
    RoomScenario(
        "error",
        "error-200",
        "chat/completions",
        "HTTP 200, two tokens, then an error object inside the stream and no [DONE]",
        ("03", "06", "07", "09", "12"),
    ),
    RoomScenario(
        "length",
        "length",
        "chat/completions",
        'five tokens, then finish_reason "length": an incomplete answer that ends cleanly',
        ("03", "06", "12"),
    ),
    RoomScenario(
        "splits",
        "splits",
        "chat/completions",
        "an answer with CRLF line endings and a comment, written "
        "5 bytes at a time (chunks end inside UTF-8 characters and between CR and LF)",
        ("01", "02", "09", "12"),
    ),
    RoomScenario(
        "reset",
        "reset",
        "chat/completions",
        "three of five words, then the connection reset (RST) in the middle of the answer",
        ("12", "13"),
    ),
    RoomScenario(
        "clean-end",
        "clean-end",
        "chat/completions",
        "three of five words, then a clean end of the body: no finish reason, no usage, no [DONE]",
        ("12",),
    ),
    RoomScenario(
        "no-done",
        "no-done",
        "chat/completions",
        "the whole answer with its finish reason and usage, then a clean end without data: [DONE]",
        ("12",),
    ),
    RoomScenario(
        "long",
        "long",
        "chat/completions",
        "200 tokens, one every 0.02 s (four seconds in all): long enough to cancel or abort in the middle",
        ("12",),
    ),
    RoomScenario(
        "markdown",
        "markdown",
        "chat/completions",
        "a long Markdown answer from a fast model: 800 small tokens 2 ms apart (render every token, or once a frame)",
        ("12",),
    ),
    RoomScenario(
        "prefill",
        "prefill",
        "chat/completions",
        f"a long prefill: the headers, then no byte for {PREFILL_SECONDS:g} s, then five tokens 0.05 s apart "
        "(a proxy's idle timeout shorter than that cuts it)",
        ("13",),
    ),
    RoomScenario(
        "prefill-ping",
        "prefill-ping",
        "chat/completions",
        f"the same {PREFILL_SECONDS:g} s prefill with a ': ping' keep-alive comment at once and every second, then "
        "the five tokens",
        ("13",),
    ),
    RoomScenario(
        "reasoning",
        "reasoning",
        "chat/completions",
        "a reasoning model: 10 pieces of thinking in delta.reasoning_content (DeepSeek, llama.cpp, older vLLM) from "
        "0.20 s, then the answer's 6 pieces, 0.05 s apart",
        ("03", "04"),
    ),
    RoomScenario(
        "reasoning-field",
        "reasoning-field",
        "chat/completions",
        "the same thinking in delta.reasoning (newer vLLM, Ollama, OpenRouter)",
        ("03", "04"),
    ),
    RoomScenario(
        "reasoning-both",
        "reasoning-both",
        "chat/completions",
        "the same thinking with the same text in both fields of every delta (vllm-project/vllm#43933): count it once",
        ("03",),
    ),
    RoomScenario(
        "responses-reasoning",
        "responses-reasoning",
        "responses",
        "a Responses reasoning summary (response.reasoning_summary_text.delta) before the answer's output_text deltas",
        ("03", "04"),
    ),
    RoomScenario(
        "responses-reasoning-text",
        "responses-reasoning-text",
        "responses",
        "raw reasoning text (response.reasoning_text.delta, as vLLM serves open-weight models) before the answer",
        ("03", "04"),
    ),
    RoomScenario(
        "queued",
        "queued",
        "responses",
        f"a background response: response.created, response.queued, {QUEUED_SECONDS:g} s in the queue, then a "
        "reasoning summary and the answer",
        ("04", "05", "10"),
    ),
    RoomScenario(
        "structured",
        "structured",
        "chat/completions",
        "a structured answer (one JSON object) streamed in 6-character pieces that end inside keys, strings, numbers",
        ("03", "06"),
    ),
    RoomScenario(
        "structured-cut",
        "structured-cut",
        "chat/completions",
        'the same JSON answer stopped half-way by finish_reason "length": incomplete, never a parse error',
        ("03", "06"),
    ),
    RoomScenario(
        "logprobs",
        "logprobs",
        "chat/completions",
        "five tokens, each chunk with its logprobs (logprobs.content), to be concatenated like the text",
        ("03",),
    ),
)
"""Every named scenario, in the order `--list` prints them."""

SCENARIOS: dict[str, str] = {s.name: f"model {s.model!r}: {s.description}" for s in ROOM_SCENARIOS}
"""Named scripts and what they play; `scenario("all")` serves every one of them at once."""

Scenario = dict[str, list[Episode | ErrorEpisode]]
_WORDS = [f"w{i:02d} " for i in range(20)]
_BY_NAME = {s.name: s for s in ROOM_SCENARIOS}
_BY_MODEL = {s.model: s for s in ROOM_SCENARIOS}


def _ttft() -> Scenario:
    frames = shapes.chat_text_stream(_WORDS, model="scheduled")
    steps = paced(frames[:2], first=0.30) + paced(frames[2 : len(_WORDS) + 1], first=0.05, gap=0.05)
    return {"scheduled": [Episode(steps + [Send(f) for f in frames[len(_WORDS) + 1 :]])]}


def _responses() -> Scenario:
    frames = shapes.responses_text_stream(_WORDS, model="responses")
    head = 4  # created, in_progress, output_item.added, content_part.added come with the first delta
    steps = paced(frames[: head + 1], first=0.30) + paced(frames[head + 1 : head + len(_WORDS)], first=0.05, gap=0.05)
    return {"responses": [Episode(steps + [Send(f) for f in frames[head + len(_WORDS) :]])]}


def _flaky() -> Scenario:
    frames = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"], model="flaky")
    return {
        "flaky": [
            error_episode(
                429,
                "stand-in: slow down",
                type="rate_limit_exceeded",
                code="rate_limit_exceeded",
                retry_after_ms=200,
                retry_after=1,
            ),
            Episode(paced(frames, gap=0.05)),
        ]
    }


def _cutoff() -> Scenario:
    frames = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"], model="cutoff")
    inside = frames[3][: frames[3].index(b"\xc3") + 1]  # stop after 0xC3, the lead byte of the two-byte "\u00f6"
    first: list[Step] = [*(Send(f) for f in frames[:3]), Send(inside), Cut()]
    return {"cutoff": [Episode(first), Episode([Send(f) for f in frames])]}


def _stall() -> Scenario:
    frames = shapes.chat_text_stream(["still ", "here"], model="stall")
    return {"stall": [Episode([Send(frames[0]), Send(frames[1]), Send(frames[2])] + [Wait(1.0), KeepAlive()] * 3600)]}


def _background() -> Scenario:
    frames = shapes.responses_text_stream(["alpha ", "beta ", "gamma ", "delta"], model="bg")
    whole = StoredResponse.from_frames(frames)
    return {"bg": [Episode([Send(f) for f in frames[:7]] + [Cut()], store_as="resp_demo", stored=whole)]}


def _tools() -> Scenario:
    frames = shapes.chat_tool_call_stream(model="tools")
    return {"tools": [Episode(paced(frames, gap=0.05))]}


def _tools_cut() -> Scenario:
    frames = shapes.chat_tool_call_stream(model="tools-cut", interleave=False)
    # role + call 0's opening, its 3 fragments, call 1's opening and its first fragment ('{"city":'); the
    # connection then dies inside the frame that would finish call 1's arguments
    middle = frames[6][: frames[6].index(b"Oslo")]
    return {"tools-cut": [Episode(paced(frames[:6], gap=0.05) + [Wait(0.05), Send(middle), Cut()])]}


def _error() -> Scenario:
    frames = shapes.chat_error_stream(["Hel", "lo "], model="error-200")
    return {"error-200": [Episode(paced(frames, gap=0.05))]}


def _length() -> Scenario:
    frames = shapes.chat_text_stream(
        ["The ", "answer ", "is ", "forty-", "two"], model="length", finish_reason="length"
    )
    return {"length": [Episode(paced(frames, gap=0.05))]}


def _splits() -> Scenario:
    frames = shapes.chat_text_stream(
        ["Gr\u00fc\u00dfe ", "aus ", "K\u00f6ln ", "\U0001f642"], model="splits", include_usage=False
    )  # no usage chunk: it could not be left out of 5-byte pieces
    payload = b"".join(f.replace(b"\n", b"\r\n") for f in frames[:2]) + b": still there\r\n\r\n"
    payload += b"".join(f.replace(b"\n", b"\r\n") for f in frames[2:])
    steps: list[Step] = []
    for at in range(0, len(payload), 5):
        steps += [Send(payload[at : at + 5]), Wait(0.005)]
    return {"splits": [Episode(steps[:-1])]}


_ANSWER = ["The ", "answer ", "is ", "forty-", "two."]


def _reset() -> Scenario:
    frames = shapes.chat_text_stream(_ANSWER, model="reset")
    return {"reset": [Episode([*paced(frames[:4], gap=0.02), Cut(reset=True)])]}


def _clean_end() -> Scenario:
    frames = shapes.chat_text_stream(_ANSWER, model="clean-end")
    return {"clean-end": [Episode([*paced(frames[:4], gap=0.02), End()])]}


def _no_done() -> Scenario:
    frames = shapes.chat_text_stream(_ANSWER, model="no-done")
    return {"no-done": [Episode([*paced(frames[:-1], gap=0.02), End()])]}


def _long() -> Scenario:
    frames = shapes.chat_text_stream([f"t{i:03d} " for i in range(200)], model="long")
    return {"long": [Episode(paced(frames, gap=0.02))]}


MARKDOWN_TOKENS = 800
"""How many content tokens the `markdown` scenario streams."""


def markdown_pieces(count: int = MARKDOWN_TOKENS) -> list[str]:
    """`count` small pieces of a Markdown answer (headings, paragraphs, lists, bold, inline code, fenced code),
    each a word with the white space before it, as a tokenizer cuts text: what a renderer that re-parses the
    whole text on every token chokes on (vercel/ai#3440)."""
    sections = (
        f"## Step {n}\n\nThe stream sends **small pieces** of text, and the page renders `each` of them as it "
        f"comes; a long answer makes that *expensive*.\n\n- a list item with `code`\n- another item, **bold** "
        f"this time\n\n```js\nconst step = {n};\n```\n\n"
        for n in range(1, count // 30 + 2)  # 36 pieces a section: always enough
    )
    return re.findall(r"\s*\S+", "".join(sections))[:count]


def _markdown() -> Scenario:
    pieces = markdown_pieces()
    frames = shapes.chat_text_stream(pieces, model="markdown")
    steps = paced(frames[:2], first=0.05) + paced(frames[2 : len(pieces) + 1], first=0.002, gap=0.002)
    return {"markdown": [Episode(steps + [Send(f) for f in frames[len(pieces) + 1 :]])]}


_PREFILL_WORDS = ["After ", "a ", "long ", "pre", "fill."]


def _prefill() -> Scenario:
    frames = shapes.chat_text_stream(_PREFILL_WORDS, model="prefill")
    return {"prefill": [Episode(paced(frames, first=PREFILL_SECONDS, gap=0.05))]}


def _prefill_ping() -> Scenario:
    frames = shapes.chat_text_stream(_PREFILL_WORDS, model="prefill-ping")
    pings: list[Step] = []
    for _ in range(int(PREFILL_SECONDS)):
        pings += [KeepAlive(), Wait(1.0)]
    return {"prefill-ping": [Episode(pings + paced(frames, gap=0.05))]}


REASONING_PIECES = [
    "The user ",
    "wants ",
    "a count ",
    "to five. ",
    "Words, ",
    "not digits, ",
    "on one ",
    "line. ",
    "Easy: ",
    "write it.",
]
"""The thinking of the reasoning scenarios, one piece per chunk."""
_COUNT = ["One", ", two", ", three", ", four", ", five", "."]
STRUCTURED_ANSWER = {
    "city": "Paris",
    "temperature_c": 18.5,
    "conditions": ["cloudy", "light rain"],
    "umbrella": True,
    "advice": "Take an umbrella \u2602.",
}
"""The structured answer of the `structured` scenarios (what a model asked for this JSON schema would send)."""


def _reasoning_chat(model: str, field: str) -> Scenario:
    frames = shapes.chat_reasoning_stream(REASONING_PIECES, _COUNT, field=field, model=model)
    thinking = 1 + len(REASONING_PIECES)  # the role chunk and the thinking
    steps = paced(frames[:2], first=0.20) + paced(frames[2:thinking], first=0.05, gap=0.05)
    steps += paced(frames[thinking : thinking + len(_COUNT)], first=0.05, gap=0.05)
    return {model: [Episode(steps + [Send(f) for f in frames[thinking + len(_COUNT) :]])]}


def _responses_reasoning(model: str, *, raw: bool = False, background: bool = False) -> Scenario:
    events = shapes.responses_reasoning_events(REASONING_PIECES, _COUNT, raw=raw, background=background, model=model)
    steps: list[Step] = []
    first = True
    for event, frame in zip(events, shapes.responses_frames(events)):
        if event["type"] == "response.in_progress" and background:
            steps.append(Wait(QUEUED_SECONDS))  # created and queued went out at once: the wait for a worker
        if event["type"].endswith(".delta"):
            steps.append(Wait(0.20 if first else 0.05))
            first = False
        steps.append(Send(frame))
    return {model: [Episode(steps)]}


def _structured(model: str, *, cut: bool) -> Scenario:
    pieces = shapes.json_pieces(STRUCTURED_ANSWER)
    if cut:
        pieces = pieces[: len(pieces) // 2]
    frames = shapes.chat_text_stream(pieces, model=model, finish_reason="length" if cut else "stop")
    return {model: [Episode(paced(frames, first=0.10, gap=0.03))]}


def _logprobs() -> Scenario:
    frames = shapes.with_logprobs(shapes.chat_text_stream(_ANSWER, model="logprobs"))
    return {"logprobs": [Episode(paced(frames, gap=0.02))]}


_BUILDERS: dict[str, Callable[[], Scenario]] = {
    "ttft": _ttft,
    "responses": _responses,
    "flaky": _flaky,
    "cutoff": _cutoff,
    "stall": _stall,
    "background": _background,
    "tools": _tools,
    "tools-cut": _tools_cut,
    "error": _error,
    "length": _length,
    "splits": _splits,
    "reset": _reset,
    "clean-end": _clean_end,
    "no-done": _no_done,
    "long": _long,
    "markdown": _markdown,
    "prefill": _prefill,
    "prefill-ping": _prefill_ping,
    "reasoning": lambda: _reasoning_chat("reasoning", "reasoning_content"),
    "reasoning-field": lambda: _reasoning_chat("reasoning-field", "reasoning"),
    "reasoning-both": lambda: _reasoning_chat("reasoning-both", "both"),
    "responses-reasoning": lambda: _responses_reasoning("responses-reasoning"),
    "responses-reasoning-text": lambda: _responses_reasoning("responses-reasoning-text", raw=True),
    "queued": lambda: _responses_reasoning("queued", background=True),
    "structured": lambda: _structured("structured", cut=False),
    "structured-cut": lambda: _structured("structured-cut", cut=True),
    "logprobs": _logprobs,
}


def scenario(name: str) -> Scenario:
    """The script of a named scenario (see `SCENARIOS`), or of all of them for "all"."""
    if name == "all":
        merged: Scenario = {}
        for each in SCENARIOS:
            merged.update(_BUILDERS[each]())
        return merged
    builder = _BUILDERS.get(name)
    if builder is None:
        known = ", ".join(["all", *SCENARIOS])
        raise ValueError(f"unknown scenario {name!r}; known: {known}")
    return builder()


def scenario_of(model: str | None) -> RoomScenario | None:
    """The room scenario that answers `model` (its model name), or None for a model of another script."""
    return None if model is None else _BY_MODEL.get(model)
