"""Named stand-in scenarios, the scripts `streamlab standin` serves (sans-IO core: scripts are plain data).

Each scenario is a script under its own model name, so `scenario("all")` can serve every one at once.
Every learner (API key) plays them from the start: the first request of each learner to `flaky` gets the
429, the first to `cutoff` gets the cut, and so on.
"""

from __future__ import annotations

from collections.abc import Callable

from . import shapes
from .script import Cut, Episode, ErrorEpisode, KeepAlive, Send, StoredResponse, Wait, error_episode, paced

__all__ = ["SCENARIOS", "scenario"]

SCENARIOS: dict[str, str] = {
    "ttft": "model 'scheduled': a Chat Completions answer, first token after 0.30 s, then one every 0.05 s "
            "(20 tokens)",
    "responses": "model 'responses': the same schedule as a Responses stream",
    "flaky": "model 'flaky': HTTP 429 with retry-after-ms: 200 on the first request, the answer on the next",
    "cutoff": "model 'cutoff': the connection is cut inside a UTF-8 character on the first request; whole later",
    "stall": "model 'stall': two tokens, then only ': ping' keep-alive comments every second, forever",
    "background": "model 'bg': a background Responses stream cut after 7 events; resume it with "
                  "GET /v1/responses/resp_demo?stream=true&starting_after=N",
}
"""Named scripts; `scenario("all")` serves every one of them at once (each under its own model name)."""

Scenario = dict[str, list[Episode | ErrorEpisode]]
_WORDS = [f"w{i:02d} " for i in range(20)]


def _ttft() -> Scenario:
    frames = shapes.chat_text_stream(_WORDS, model="scheduled")
    steps = paced(frames[:2], first=0.30) + paced(frames[2:len(_WORDS) + 1], first=0.05, gap=0.05)
    return {"scheduled": [Episode(steps + [Send(f) for f in frames[len(_WORDS) + 1:]])]}


def _responses() -> Scenario:
    frames = shapes.responses_text_stream(_WORDS, model="responses")
    head = 4  # created, in_progress, output_item.added, content_part.added come with the first delta
    steps = paced(frames[:head + 1], first=0.30) + paced(frames[head + 1:head + len(_WORDS)], first=0.05, gap=0.05)
    return {"responses": [Episode(steps + [Send(f) for f in frames[head + len(_WORDS):]])]}


def _flaky() -> Scenario:
    frames = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"], model="flaky")
    return {"flaky": [error_episode(429, "stand-in: slow down", type="rate_limit_exceeded",
                                    code="rate_limit_exceeded", retry_after_ms=200, retry_after=1),
                      Episode(paced(frames, gap=0.05))]}


def _cutoff() -> Scenario:
    frames = shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld"], model="cutoff")
    inside = frames[3][:frames[3].index(b"\xc3") + 1]  # stop after 0xC3, the lead byte of the two-byte "\u00f6"
    first = [Send(f) for f in frames[:3]] + [Send(inside), Cut()]
    return {"cutoff": [Episode(first), Episode([Send(f) for f in frames])]}


def _stall() -> Scenario:
    frames = shapes.chat_text_stream(["still ", "here"], model="stall")
    return {"stall": [Episode([Send(frames[0]), Send(frames[1]), Send(frames[2])] + [Wait(1.0), KeepAlive()] * 3600)]}


def _background() -> Scenario:
    frames = shapes.responses_text_stream(["alpha ", "beta ", "gamma ", "delta"], model="bg")
    whole = StoredResponse.from_frames(frames)
    return {"bg": [Episode([Send(f) for f in frames[:7]] + [Cut()], store_as="resp_demo", stored=whole)]}


_BUILDERS: dict[str, Callable[[], Scenario]] = {
    "ttft": _ttft,
    "responses": _responses,
    "flaky": _flaky,
    "cutoff": _cutoff,
    "stall": _stall,
    "background": _background,
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
