"""What the user sees, and when: time to first token, inter-token gaps and total time.

Streaming does not make a model faster. It changes *when* text becomes visible: a streaming client shows
the first words after the time to first token (TTFT); a client that buffers the body, or a request without
`stream: true`, shows nothing until the whole answer is there. This module measures exactly that.

The measuring core is pure: it works on lists of `(arrival time, event)` pairs, the arrival times taken
with `time.perf_counter()` by whoever read the bytes, so it can be tested on made-up data and reused for
recorded runs. Definitions used throughout (all in seconds, relative to when the request was sent):

* TTFT: the arrival of the first event that adds *visible* text. A Chat Completions stream usually opens
  with a role chunk (`"delta": {"role": "assistant", "content": ""}`); that chunk proves the connection
  works but shows the user nothing, so it does not end the wait.
* inter-token gaps: the times between successive events that add visible text (a "token" here is one
  content delta, which may hold more than one model token).
* total: when the response ended (the last byte read), whether or not text arrived.
* blank-screen share: TTFT / total, the part of the whole wait spent looking at nothing.

`illustrative_*` functions do the arithmetic with round made-up numbers (total = TTFT + (n - 1) x gap);
they are labelled ILLUSTRATIVE wherever they are printed or plotted, because they measure no real model.

The I/O part, `run_three_clients`, reads one scheduled stand-in answer three ways (streaming, buffering
the whole body, and not streaming at all) so a lab can show that the same bytes arrive while what the user
sees differs. `save_timings` / `load_timings` keep one such run in `data/timings/` so its numbers can be
quoted and plotted without changing from run to run.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.sse import SSEEvent, SSEParser

__all__ = [
    "Timing",
    "Schedule",
    "chat_text_timeline",
    "responses_text_timeline",
    "timing_from_arrivals",
    "timing_from_points",
    "first_visible_time",
    "illustrative_total",
    "illustrative_blank_share",
    "illustrative_tokens_by",
    "illustrative_table",
    "illustrative_timing",
    "RecordedRun",
    "save_timings",
    "load_timings",
    "scheduled_chat_episode",
    "run_three_clients",
    "stream_timing",
    "astream_timing",
    "CLIENT_LABELS",
]

Point = tuple[float, int]
"""(seconds since the request was sent, visible characters so far)."""


# -- measured timings -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """What one client made visible over time.

    `points` holds one `(seconds since request, cumulative visible characters)` pair per moment the
    visible text grew, in time order; `total` is when the response ended. Everything else is derived.
    """

    label: str
    points: tuple[Point, ...]
    total: float
    notes: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        last_t, last_c = -math.inf, 0
        for i, (t, c) in enumerate(self.points):
            if t < last_t:
                raise ValueError(f"Timing {self.label!r}: point {i} at {t!r} s comes before the previous one")
            if c <= last_c:
                raise ValueError(f"Timing {self.label!r}: point {i} does not add visible text ({c} <= {last_c})")
            last_t, last_c = t, c
        if self.points and self.total < self.points[-1][0]:
            raise ValueError(f"Timing {self.label!r}: total {self.total!r} s is before the last text arrived")

    @property
    def ttft(self) -> float | None:
        """Seconds until the first visible text, or None if no text was ever shown."""
        return self.points[0][0] if self.points else None

    @property
    def chars(self) -> int:
        """Visible characters at the end."""
        return self.points[-1][1] if self.points else 0

    @property
    def gaps(self) -> tuple[float, ...]:
        """Seconds between successive moments the visible text grew (empty with fewer than two)."""
        return tuple(b[0] - a[0] for a, b in zip(self.points, self.points[1:]))

    @property
    def blank_share(self) -> float:
        """TTFT / total: the share of the wait with nothing on screen (1.0 if nothing was ever shown)."""
        if not self.points or self.total <= 0:
            return 1.0
        return self.points[0][0] / self.total

    def chars_at(self, t: float) -> int:
        """Visible characters at `t` seconds after the request."""
        seen = 0
        for pt, c in self.points:
            if pt > t:
                break
            seen = c
        return seen

    def summary(self) -> str:
        """One line with the raw numbers (not deterministic: print it only in cells nbval ignores)."""
        ttft = "never" if self.ttft is None else f"{self.ttft:.3f} s"
        return (
            f"{self.label}: TTFT {ttft} | total {self.total:.3f} s | {self.chars} chars in "
            f"{len(self.points)} update(s) | blank screen {100 * self.blank_share:.0f}% of the wait"
        )


def _chat_visible(acc: Any) -> int:
    """Visible characters held by a ChatAccumulator: the content (and any refusal) of every choice."""
    return sum(len(t) for t in acc.text.values()) + sum(len(t) for t in getattr(acc, "refusal", {}).values())


def _pairs(arrivals: Iterable[Any]) -> Iterator[tuple[float, SSEEvent]]:
    """Accept `(time, SSEEvent)` pairs or objects with `.at` and `.event` (the client's `TimedEvent`)."""
    for i, item in enumerate(arrivals):
        if isinstance(item, tuple):
            t, event = item
        elif hasattr(item, "at") and hasattr(item, "event"):
            t, event = item.at, item.event
        else:
            raise TypeError(f"arrival {i} is {item!r}: expected a (time, SSEEvent) pair or a TimedEvent")
        if not isinstance(event, SSEEvent):
            raise TypeError(f"arrival {i} holds {type(event).__name__}, not an SSEEvent")
        yield float(t), event


def chat_text_timeline(
    arrivals: Iterable[Any],
    start: float,
    *,
    accumulator: Any = None,
    visible: Callable[[Any], int] = _chat_visible,
) -> list[Point]:
    """Turn timed Chat Completions events into the points at which visible text grew.

    `arrivals` are `(perf_counter time, SSEEvent)` pairs (or the client's `TimedEvent`s) in arrival order
    and `start` is the time the request was sent. Each event goes through a `ChatAccumulator` (or the
    `accumulator` given), and a point is recorded only when the visible text got longer, so role chunks,
    empty contents, keep-alives, the usage chunk and `[DONE]` add no point. Events with the same arrival
    time (a buffered body) collapse into one point.
    """
    if accumulator is None:
        from ..core.accumulate import ChatAccumulator

        accumulator = ChatAccumulator()
    points: list[Point] = []
    last_t = -math.inf
    for i, (t, event) in enumerate(_pairs(arrivals)):
        if t < last_t:
            raise ValueError(f"arrival {i} at {t!r} comes before the previous arrival at {last_t!r}")
        last_t = t
        accumulator.feed(event)
        chars = visible(accumulator)
        if chars > (points[-1][1] if points else 0):
            rel = t - start
            if points and points[-1][0] == rel:
                points[-1] = (rel, chars)
            else:
                points.append((rel, chars))
    return points


def responses_text_timeline(arrivals: Iterable[Any], start: float) -> list[Point]:
    """`chat_text_timeline` for a Responses stream: visible text grows on `response.output_text.delta`
    (and refusal deltas); `response.created`, `response.in_progress` and the other lifecycle events show
    nothing, like the role chunk in Chat Completions."""
    from ..core.accumulate import ResponsesAccumulator

    return chat_text_timeline(arrivals, start, accumulator=ResponsesAccumulator())


def timing_from_points(label: str, points: Sequence[Point], total: float, **notes: Any) -> Timing:
    """A `Timing` from ready-made points (used for the non-streaming client and for recorded data)."""
    return Timing(label, tuple((float(t), int(c)) for t, c in points), float(total), notes)


def timing_from_arrivals(
    label: str, arrivals: Iterable[Any], start: float, end: float, *, dialect: str = "chat", **notes: Any
) -> Timing:
    """Measure a stream: `arrivals` as `(perf_counter, SSEEvent)` pairs or `TimedEvent`s, request sent at
    `start`, response finished at `end` (the last byte read). `dialect` is "chat" or "responses"."""
    if end < start:
        raise ValueError(f"end {end!r} is before start {start!r}")
    if dialect == "chat":
        points = chat_text_timeline(arrivals, start)
    elif dialect == "responses":
        points = responses_text_timeline(arrivals, start)
    else:
        raise ValueError(f"dialect must be 'chat' or 'responses', got {dialect!r}")
    return Timing(label, tuple(points), end - start, notes)


def first_visible_time(arrivals: Iterable[Any], start: float = 0.0) -> float | None:
    """Seconds from `start` to the first event with visible text (the TTFT), or None if there was none."""
    points = chat_text_timeline(arrivals, start)
    return points[0][0] if points else None


# -- the scripted schedule ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """When a scripted server sends its text: the first piece after `ttft`, then one every `gap` seconds."""

    ttft: float
    gap: float
    pieces: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.ttft < 0 or self.gap < 0:
            raise ValueError(f"Schedule needs ttft >= 0 and gap >= 0, got ttft={self.ttft!r}, gap={self.gap!r}")
        if not self.pieces or any(not p for p in self.pieces):
            raise ValueError("Schedule needs at least one piece of text, and no empty piece")

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def total(self) -> float:
        """When the last piece is due: ttft + (n - 1) x gap."""
        return illustrative_total(self.ttft, self.gap, len(self.pieces))

    def piece_times(self) -> list[float]:
        """When each piece is due, in seconds after the request."""
        return [self.ttft + i * self.gap for i in range(len(self.pieces))]

    def timing(self, label: str = "schedule") -> Timing:
        """The ideal streaming client: each piece visible the moment it is due."""
        points, chars = [], 0
        for t, p in zip(self.piece_times(), self.pieces):
            chars += len(p)
            points.append((t, chars))
        return Timing(label, tuple(points), self.total)


# -- ILLUSTRATIVE arithmetic ----------------------------------------------------------------------------


def _check_args(ttft: float, gap: float, n_tokens: int) -> None:
    if ttft < 0 or gap < 0:
        raise ValueError(f"ttft and gap must be >= 0, got ttft={ttft!r}, gap={gap!r}")
    if n_tokens < 1 or int(n_tokens) != n_tokens:
        raise ValueError(f"n_tokens must be a whole number >= 1, got {n_tokens!r}")


def illustrative_total(ttft: float, gap: float, n_tokens: int) -> float:
    """Total time of an answer: the first token at `ttft`, then one every `gap`: ttft + (n - 1) x gap."""
    _check_args(ttft, gap, n_tokens)
    return ttft + (n_tokens - 1) * gap


def illustrative_blank_share(ttft: float, gap: float, n_tokens: int, *, streaming: bool = True) -> float:
    """Share of the total wait spent on a blank screen: ttft / total when streaming, 1.0 when not."""
    total = illustrative_total(ttft, gap, n_tokens)
    if not streaming:
        return 1.0
    return 1.0 if total == 0 else ttft / total


def illustrative_tokens_by(t: float, ttft: float, gap: float) -> int:
    """How many tokens exist `t` seconds after the request: 0 before `ttft`, then one more per `gap`.

    A token due exactly at `t` counts (a tiny tolerance absorbs float rounding, so 4.5 s at 30 tokens/s
    gives 135 gaps, not 134.99...).
    """
    if ttft < 0 or gap <= 0:
        raise ValueError(f"need ttft >= 0 and gap > 0, got ttft={ttft!r}, gap={gap!r}")
    if t < ttft:
        return 0
    return 1 + math.floor((t - ttft) / gap + 1e-9)


def illustrative_table(ttft: float, gap: float, lengths: Iterable[int]) -> list[dict[str, float]]:
    """Rows of the ILLUSTRATIVE blank-screen table: tokens, total, blank share with and without streaming."""
    return [
        {
            "tokens": n,
            "total": illustrative_total(ttft, gap, n),
            "blank_streaming": illustrative_blank_share(ttft, gap, n),
            "blank_buffered": illustrative_blank_share(ttft, gap, n, streaming=False),
        }
        for n in lengths
    ]


def illustrative_timing(
    ttft: float, gap: float, n_tokens: int, *, chars_per_token: int = 4, streaming: bool = True
) -> Timing:
    """An ILLUSTRATIVE `Timing`: `n_tokens` of `chars_per_token` characters each, on the ideal schedule.

    With `streaming=False` all the text appears at once at the total time, as a buffering client shows it.
    """
    _check_args(ttft, gap, n_tokens)
    total = illustrative_total(ttft, gap, n_tokens)
    if not streaming:
        return Timing("without streaming (illustrative)", ((total, n_tokens * chars_per_token),), total)
    points = tuple((ttft + i * gap, (i + 1) * chars_per_token) for i in range(n_tokens))
    return Timing("streaming (illustrative)", points, total)


# -- recorded runs (data/timings/) ----------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRun:
    """Timings saved from one run, so a lab can plot and quote real numbers that do not change."""

    timings: dict[str, Timing]
    schedule: Schedule | None
    note: str


def save_timings(path: str | Path, timings: Iterable[Timing], *, schedule: Schedule | None = None,
                 note: str = "") -> None:
    """Write timings (label, total, points; not the notes) and the schedule as readable JSON."""
    def dump(obj: Any) -> str:
        return json.dumps(obj, ensure_ascii=False)

    lines = ["{", f' "note": {dump(note)},']
    if schedule is not None:
        sch = {"ttft": schedule.ttft, "gap": schedule.gap, "pieces": list(schedule.pieces)}
        lines.append(f' "schedule": {dump(sch)},')
    entries = []
    for tm in timings:  # one line per point, so a diff of two recordings reads well
        points = ",\n".join(f"    {dump([round(t, 6), c])}" for t, c in tm.points)
        entries.append(f'  {{"label": {dump(tm.label)}, "total": {round(tm.total, 6)}, "points": [\n{points}\n  ]}}')
    lines += [' "timings": [', ",\n".join(entries), " ]", "}"]
    text = "\n".join(lines) + "\n"
    json.loads(text)  # it must stay valid JSON
    Path(path).write_text(text, encoding="utf-8")


def load_timings(path: str | Path) -> RecordedRun:
    """Read a file written by `save_timings`; a malformed file raises ValueError naming the file and entry."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        schedule = None
        if doc.get("schedule") is not None:
            sch = doc["schedule"]
            schedule = Schedule(float(sch["ttft"]), float(sch["gap"]), tuple(sch["pieces"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a timings file ({type(exc).__name__}: {exc})") from exc
    timings: dict[str, Timing] = {}
    for i, entry in enumerate(doc.get("timings", [])):
        try:
            tm = timing_from_points(entry["label"], [tuple(p) for p in entry["points"]], entry["total"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: timings[{i}] is malformed: {exc}") from exc
        timings[tm.label] = tm
    return RecordedRun(timings, schedule, str(doc.get("note", "")))


# -- the scheduled experiment (I/O: the stand-in and httpx) ---------------------------------------------


def scheduled_chat_episode(schedule: Schedule, *, role_at: float = 0.05, include_usage: bool = True) -> Any:
    """A stand-in `Episode` that streams `schedule` as Chat Completions chunks.

    The role chunk leaves early, at `role_at` seconds (it shows nothing, so a client that takes the first
    event as the TTFT is visibly wrong), the first content chunk at `schedule.ttft`, then one content chunk
    every `schedule.gap`; the finish chunk, the usage chunk (with `include_usage`) and `[DONE]` follow the
    last piece at once. A non-streaming request gets the same text as one JSON body after the same total
    waiting time (the stand-in sums the waits).
    """
    from ..core.shapes import chat_completion_body, chat_text_stream
    from .standin import Episode, Send, Wait

    if not 0 <= role_at <= schedule.ttft:
        raise ValueError(f"role_at must be between 0 and the TTFT {schedule.ttft!r}, got {role_at!r}")
    n = len(schedule.pieces)
    frames = chat_text_stream(list(schedule.pieces), include_usage=include_usage)
    steps: list[Any] = [Wait(role_at), Send(frames[0]), Wait(schedule.ttft - role_at), Send(frames[1])]
    for frame in frames[2 : n + 1]:
        steps += [Wait(schedule.gap), Send(frame)]
    steps += [Send(f) for f in frames[n + 1 :]]
    return Episode([s for s in steps if not (isinstance(s, Wait) and s.seconds == 0)],
                   body=chat_completion_body(schedule.text))


CLIENT_LABELS = ("streaming", "buffered body", "non-streaming")
"""The three ways `run_three_clients` reads the same answer, in the order it runs them."""


def _chat_body(model: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "Say something."}]}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _text_of(acc: Any) -> str:
    return "".join(acc.text[i] for i in sorted(acc.text))


def stream_timing(base_url: str, model: str, *, label: str = CLIENT_LABELS[0], **kwargs: Any) -> Timing:
    """Read one streamed chat answer with `streamlab.client` and time it (keywords go to `stream_chat`).

    The TTFT counts from when the request was sent (`stream.started_at`) to the first visible text; the
    total runs to the last byte. `notes` holds the rebuilt `text`, the `raw` bytes, the `arrivals`
    (`TimedEvent`s) and `first_event`, the elapsed time of the first event of any kind (the role chunk).
    """
    from .client import stream_chat

    with stream_chat(base_url, _chat_body(model, True), **kwargs) as stream:
        events = stream.read_all()
    return _timing_of(label, stream, events)


async def astream_timing(base_url: str, model: str, *, label: str = "streaming (async)", **kwargs: Any) -> Timing:
    """`stream_timing` with the async client (`astream_chat`); `await` it, e.g. at a notebook's top level."""
    from .client import astream_chat

    async with astream_chat(base_url, _chat_body(model, True), **kwargs) as stream:
        events = await stream.read_all()
    return _timing_of(label, stream, events)


def _timing_of(label: str, stream: Any, events: Sequence[Any]) -> Timing:
    """A Timing from a finished client stream (sync or async): points at each visible-text event."""
    from ..core.accumulate import ChatAccumulator

    end = stream.last_byte_at if stream.last_byte_at is not None else stream.started_at
    acc = ChatAccumulator()
    points = chat_text_timeline(events, stream.started_at, accumulator=acc)
    return Timing(label, tuple(points), end - stream.started_at,
                  {"text": _text_of(acc), "raw": stream.raw, "arrivals": tuple(events),
                   "first_event": events[0].elapsed if events else None})


def _buffered_timing(client: Any, url: str, model: str, label: str) -> Timing:
    """Ask for a stream but read the whole body before looking at it (what a buffering proxy amounts to)."""
    from ..core.accumulate import ChatAccumulator

    start = time.perf_counter()
    response = client.post(url, json=_chat_body(model, True))
    end = time.perf_counter()  # httpx has read the whole body by now
    response.raise_for_status()
    parser = SSEParser()
    events = parser.feed(response.content)
    if parser.close():
        raise ValueError(f"{label}: the body from {url} stopped in the middle of an event")
    acc = ChatAccumulator()
    points = chat_text_timeline(((end, ev) for ev in events), start, accumulator=acc)
    return Timing(label, tuple(points), end - start, {"text": _text_of(acc), "raw": response.content})


def _non_streaming_timing(client: Any, url: str, model: str, label: str) -> Timing:
    """No `stream` flag: one `chat.completion` JSON body when the whole answer is ready."""
    start = time.perf_counter()
    response = client.post(url, json=_chat_body(model, False))
    end = time.perf_counter()
    response.raise_for_status()
    body = response.json()
    try:
        text = "".join(c["message"]["content"] or "" for c in sorted(body["choices"], key=lambda c: c["index"]))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{label}: {url} returned no choices[].message.content: {body!r:.200}") from exc
    points = ((end - start, len(text)),) if text else ()
    return Timing(label, points, end - start, {"text": text, "raw": response.content})


def run_three_clients(base_url: str, model: str, *, timeout: float = 30.0) -> dict[str, Timing]:
    """Read the same scripted answer three ways, one after the other, and time what each makes visible.

    * "streaming": `streamlab.client.stream_chat`, events handled as their bytes arrive;
    * "buffered body": the same streamed request (`"stream": true`) read whole with `httpx.Client.post`,
      then parsed, as happens behind a buffering proxy or with a client that reads the full body;
    * "non-streaming": no `stream` flag; one JSON body after the same total time.

    `base_url` ends in `/v1` (the stand-in's `base_url`); `model` names the script to play. Returns the
    `Timing`s keyed by `CLIENT_LABELS`. Each run is a new request, so the script should repeat the same
    episode (the stand-in repeats the last one).
    """
    import httpx

    url = base_url.rstrip("/") + "/chat/completions"
    out = {CLIENT_LABELS[0]: stream_timing(base_url, model, read_timeout=timeout, deadline=timeout)}
    with httpx.Client(trust_env=False, timeout=timeout) as client:
        out[CLIENT_LABELS[1]] = _buffered_timing(client, url, model, CLIENT_LABELS[1])
        out[CLIENT_LABELS[2]] = _non_streaming_timing(client, url, model, CLIENT_LABELS[2])
    return out
