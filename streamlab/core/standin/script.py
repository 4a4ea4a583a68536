"""The stand-in's script data model: steps, episodes, stored responses (sans-IO core: plain data, no I/O).

A *script* maps a request's `model` name to a list of *episodes*; request n for that model plays episode n
and the last episode repeats. An `Episode` is a list of steps played on a 200 event stream; an
`ErrorEpisode` is an HTTP error returned before any stream starts. A step either spends time (`Wait`,
`Stall`), writes bytes (`Send`, `KeepAlive`) or ends the body (`Cut`, `End`). The bytes are whatever the
script says: nothing here builds SSE frames on its own, so a broken stream is as easy to script as a good
one (`streamlab.core.shapes` builds the documented shapes when you want them).

Everything here is a frozen value: the planner (`streamlab.core.standin.plan`) reads scripts and never changes
them, so one script can serve many learners at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamlab.core.shapes import error_body
from streamlab.core.sse import parse

__all__ = [
    "Wait",
    "Send",
    "KeepAlive",
    "Stall",
    "Cut",
    "End",
    "Step",
    "STEP_TYPES",
    "Episode",
    "ErrorEpisode",
    "error_episode",
    "paced",
    "split_frames",
    "frame_json",
    "StoredResponse",
    "ScriptValue",
    "Script",
    "normalise_script",
    "normalise_scripts",
]


# --- steps ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wait:
    """Pause before the next step (the model "thinking"). The pause ends early if the client hangs up."""

    seconds: float


@dataclass(frozen=True)
class Send:
    """Write these bytes as one HTTP chunk. Empty data writes nothing (an empty chunk would end the body)."""

    data: bytes


@dataclass(frozen=True)
class KeepAlive:
    """Write an SSE comment frame, `: {comment}` and a blank line, as servers do to keep idle proxies open."""

    comment: str = "ping"

    @property
    def data(self) -> bytes:
        return b": " + self.comment.encode("utf-8") + b"\n\n"


@dataclass(frozen=True)
class Stall:
    """Send nothing for `seconds`, or (None) until the client gives up or the server stops.

    Unlike `Wait` it does not count towards the time a non-streaming request waits: it models a stream
    that hangs, not a model that thinks.
    """

    seconds: float | None = None


@dataclass(frozen=True)
class Cut:
    """Close the connection without the terminating zero-length chunk: the client sees a broken body.

    By default the server closes politely (FIN: the client reads end-of-file mid-body). With `reset=True`
    it aborts the connection (RST: the client gets "connection reset by peer"), as a crashed process or
    a load balancer that gave up would.
    """

    reset: bool = False


@dataclass(frozen=True)
class End:
    """End the body cleanly now (terminating chunk), ignoring any later steps. Implied after the last step."""


Step = Wait | Send | KeepAlive | Stall | Cut | End
STEP_TYPES = (Wait, Send, KeepAlive, Stall, Cut, End)


# --- episodes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Episode:
    """One answer played as a 200 event stream.

    `steps` are played in order. `body` is the JSON object a non-streaming request gets (None: derive it
    from the frames, see `streamlab.core.standin.plan.derive_body`). `headers` are extra response headers.
    `store_as` names a response id: the server then keeps that response, so
    `GET /v1/responses/{id}?stream=true` can resume it (background mode) and
    `POST /v1/responses/{id}/cancel` can stop the playing stream. Each learner has their own copy of what
    is stored under that name. What it keeps is `stored` when given (the whole answer, typically, while
    this episode is cut early), else the episode's own frames.
    `timeline` (off by default) counts every `Wait` from where the script's own schedule says the step before
    it should have happened, not from when it did: a late write then takes its lateness out of the next pause,
    so the stream keeps a recorded timeline on a busy machine instead of adding every delay up (a replayed
    capture, `streamlab.core.standin.replay`). Off, each pause counts from the write before it, so no gap is ever
    shorter than scripted (what a stall against a read timeout needs).
    """

    steps: tuple[Step, ...] = ()
    body: Mapping[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    store_as: str | None = None
    stored: StoredResponse | None = None
    timeline: bool = False

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        store_as: str | None = None,
        stored: StoredResponse | None = None,
        timeline: bool = False,
    ) -> None:
        steps = tuple(steps)
        if stored is not None and store_as is None:
            raise ValueError("Episode(stored=...) needs store_as=<response id> to say where to keep it")
        for i, step in enumerate(steps):
            if not isinstance(step, STEP_TYPES):
                raise TypeError(f"Episode step {i} is {step!r}; expected Wait, Send, KeepAlive, Stall, Cut or End")
            if isinstance(step, Send) and not isinstance(step.data, (bytes, bytearray)):
                raise TypeError(f"Episode step {i}: Send.data must be bytes, got {type(step.data).__name__}")
        pairs = tuple(headers.items()) if isinstance(headers, Mapping) else tuple(headers)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "headers", pairs)
        object.__setattr__(self, "store_as", store_as)
        object.__setattr__(self, "stored", stored)
        object.__setattr__(self, "timeline", timeline)

    @property
    def payload(self) -> bytes:
        """All the bytes the episode sends, concatenated (what an uncut client would receive)."""
        return b"".join(s.data for s in self.steps if isinstance(s, (Send, KeepAlive)))

    @property
    def thinking_time(self) -> float:
        """Total of the `Wait` steps: how long a non-streaming request waits before its body."""
        return sum(s.seconds for s in self.steps if isinstance(s, Wait))


@dataclass(frozen=True)
class ErrorEpisode:
    """An HTTP error before any stream: `status`, a JSON `body` (bytes: a plain-text body), extra `headers`,
    after `wait` seconds."""

    status: int
    body: Mapping[str, Any] | bytes
    headers: tuple[tuple[str, str], ...] = ()
    wait: float = 0.0


def error_episode(
    status: int,
    message: str,
    *,
    type: str = "server_error",
    code: str | None = None,
    param: str | None = None,
    retry_after: float | str | None = None,
    retry_after_ms: int | None = None,
    wait: float = 0.0,
) -> ErrorEpisode:
    """An OpenAI-shaped error reply: `{"error": {"message", "type", "param", "code"}}`.

    `retry_after` becomes the `Retry-After` header (seconds, or an HTTP date given as a string) and
    `retry_after_ms` the `retry-after-ms` header that the official SDKs read first.
    """
    headers: list[tuple[str, str]] = []
    if retry_after_ms is not None:
        headers.append(("retry-after-ms", str(int(retry_after_ms))))
    if retry_after is not None:
        value = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
        headers.append(("Retry-After", value))
    return ErrorEpisode(status, error_body(message, type, code, param), tuple(headers), wait)


def paced(frames: Iterable[bytes], *, first: float = 0.0, gap: float = 0.0) -> list[Step]:
    """Steps that send `frames` on a schedule: the first after `first` seconds, then one every `gap`."""
    steps: list[Step] = []
    for i, frame in enumerate(frames):
        delay = first if i == 0 else gap
        if delay > 0:
            steps.append(Wait(delay))
        steps.append(Send(frame))
    return steps


# --- frames ---------------------------------------------------------------------------------------

_LINE_END = re.compile(rb"\r\n|\r|\n")


def split_frames(raw: bytes) -> list[bytes]:
    """Cut a byte stream into SSE frames, each ending with its blank line (any of CRLF, CR, LF).

    An unfinished tail (no blank line yet) is returned as the last item. Concatenating the result gives
    back `raw` exactly.
    """
    frames: list[bytes] = []
    start = line_start = 0
    for m in _LINE_END.finditer(raw):
        if m.start() == line_start:  # an empty line ends the frame
            frames.append(raw[start : m.end()])
            start = m.end()
        line_start = m.end()
    if start < len(raw):
        frames.append(raw[start:])
    return frames


def frame_json(frame: bytes) -> Any:
    """The JSON value of the first event in `frame`, or None when it has no event or its data is not JSON."""
    events, _ = parse(frame)
    for ev in events:
        try:
            return json.loads(ev.data)
        except (ValueError, RecursionError):
            return None
    return None


@dataclass(frozen=True)
class StoredResponse:
    """A background response kept by the server, replayed by `GET /v1/responses/{id}?stream=true`.

    `frames` are `(sequence_number, frame bytes)`; a frame without one (a comment, a keep-alive) has None
    and is replayed only when it comes after the resume point. GET connection n (0-based, counted per
    learner) is cut after `cuts[n]` payload bytes (None or past the end: sent whole), which lets tests
    break the resumed stream again, anywhere. `gap` spaces the replayed frames. `response` is the JSON
    object for a plain GET and for cancel (None: taken from the frames' terminal event, or a minimal object).
    """

    frames: tuple[tuple[int | None, bytes], ...]
    cuts: tuple[int | None, ...] = ()
    gap: float = 0.0
    response: Mapping[str, Any] | None = None

    @classmethod
    def from_frames(
        cls,
        frames: Iterable[bytes],
        *,
        cuts: Sequence[int | None] = (),
        gap: float = 0.0,
        response: Mapping[str, Any] | None = None,
    ) -> StoredResponse:
        """Build from SSE bytes (whole frames or any pieces), reading each frame's `sequence_number`."""
        pairs = []
        for frame in split_frames(b"".join(frames)):
            obj = frame_json(frame)
            seq = obj.get("sequence_number") if isinstance(obj, dict) else None
            pairs.append((seq if isinstance(seq, int) else None, frame))
        return cls(tuple(pairs), tuple(cuts), gap, response)

    def response_object(self, response_id: str) -> dict[str, Any]:
        """The response as `GET /v1/responses/{id}` returns it (without a stream)."""
        if self.response is not None:
            return dict(self.response)
        last: dict[str, Any] | None = None
        for _, frame in self.frames:
            obj = frame_json(frame)
            if isinstance(obj, dict) and isinstance(obj.get("response"), dict):
                last = obj["response"]
        return dict(last) if last else {"id": response_id, "object": "response", "status": "in_progress"}


# --- scripts --------------------------------------------------------------------------------------

ScriptValue = Episode | ErrorEpisode | Sequence[Episode | ErrorEpisode]
Script = dict[str, tuple[Episode | ErrorEpisode, ...]]


def normalise_script(model: str, value: ScriptValue) -> tuple[Episode | ErrorEpisode, ...]:
    """One model's episodes as a non-empty tuple; a clear TypeError or ValueError says what is wrong."""
    episodes = (value,) if isinstance(value, (Episode, ErrorEpisode)) else tuple(value)
    if not episodes:
        raise ValueError(f"script for model {model!r} has no episodes")
    for i, ep in enumerate(episodes):
        if not isinstance(ep, (Episode, ErrorEpisode)):
            raise TypeError(f"script for model {model!r}, episode {i}: expected Episode or ErrorEpisode, got {ep!r}")
    return episodes


def normalise_scripts(
    scripts: Mapping[str, ScriptValue], stored: Mapping[str, StoredResponse] | None = None
) -> tuple[Script, dict[str, StoredResponse]]:
    """Every model's episodes, and the stored responses: those given plus each `store_as` episode's own."""
    normal = {str(m): normalise_script(str(m), v) for m, v in scripts.items()}
    kept = dict(stored or {})
    for episodes in normal.values():
        for ep in episodes:
            if isinstance(ep, Episode) and ep.store_as and ep.store_as not in kept:
                kept[ep.store_as] = ep.stored or StoredResponse.from_frames([ep.payload])
    return normal, kept
