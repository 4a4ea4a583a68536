"""Timing metrics: what a user sees of a stream, and when (sans-IO core: arrival times in, numbers out).

Streaming does not make a model faster. It changes *when* text becomes visible: a streaming client shows
the first words after the time to first token (TTFT); a client that buffers the body, or a request without
`stream: true`, shows nothing until the whole answer is there. This module does that arithmetic.

Everything here works on lists of `(arrival time, event)` pairs, the arrival times taken by whoever read the
bytes (the client stamps them with `time.perf_counter()`), so it can be tested on made-up data and reused
for recorded runs; it reads no clock itself. Definitions used throughout (all in seconds, relative to when
the request was sent):

* TTFT: the arrival of the first event that adds *visible* text. A Chat Completions stream usually opens
  with a role chunk (`"delta": {"role": "assistant", "content": ""}`); that chunk proves the connection
  works but shows the user nothing, so it does not end the wait.
* inter-token gaps: the times between successive events that add visible text (a "token" here is one
  content delta, which may hold more than one model token).
* total: when the response ended (the last byte read), whether or not text arrived.
* blank-screen share: TTFT / total, the part of the whole wait spent looking at nothing.
* first reasoning: a reasoning model streams its thinking (`delta.reasoning_content` / `delta.reasoning`,
  Responses reasoning events) before the answer. That text is kept apart from the answer, so it never ends the
  TTFT wait; `reasoning_timelines` and `first_outputs` time it separately (first reasoning, first answer text).

`illustrative_*` functions do the arithmetic with round made-up numbers (total = TTFT + (n - 1) x gap);
they are labelled ILLUSTRATIVE wherever they are printed or plotted, because they measure no real model.

Recorded runs: `timings_json` writes timings in a readable, diffable JSON text; `load_timings(path)` reads
one back and `recorded_run(name)` reads one of the data set's recordings (`data/timings/NAME.json`, found
through `streamlab.core.harness.fixtures.data_dir`), so a lab can quote and plot numbers that do not change from run
to run. The live runs that produce them are in `streamlab.net.live`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamlab.core.accumulate import ChatAccumulator, ResponsesAccumulator
from streamlab.core.harness.fixtures import data_dir
from streamlab.core.sse import SSEEvent

__all__ = [
    "Point",
    "Timing",
    "Schedule",
    "chat_text_timeline",
    "responses_text_timeline",
    "timing_from_arrivals",
    "timing_from_points",
    "first_visible_time",
    "reasoning_timelines",
    "FirstOutput",
    "first_outputs",
    "illustrative_total",
    "illustrative_blank_share",
    "illustrative_tokens_by",
    "illustrative_table",
    "illustrative_timing",
    "RecordedRun",
    "timings_json",
    "load_timings",
    "recorded_run",
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
    """Accept `(time, SSEEvent)` pairs or objects with `.at` and `.event` (the client's `TimedEvent`), in arrival
    order (a time before the previous one is a ValueError)."""
    last_t = -math.inf
    for i, item in enumerate(arrivals):
        if isinstance(item, tuple):
            t, event = item
        elif hasattr(item, "at") and hasattr(item, "event"):
            t, event = item.at, item.event
        else:
            raise TypeError(f"arrival {i} is {item!r}: expected a (time, SSEEvent) pair or a TimedEvent")
        if not isinstance(event, SSEEvent):
            raise TypeError(f"arrival {i} holds {type(event).__name__}, not an SSEEvent")
        if t < last_t:
            raise ValueError(f"arrival {i} at {t!r} comes before the previous arrival at {last_t!r}")
        last_t = t
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
        accumulator = ChatAccumulator()
    points: list[Point] = []
    for t, event in _pairs(arrivals):
        accumulator.feed(event)
        _grow(points, t - start, visible(accumulator))
    return points


def responses_text_timeline(arrivals: Iterable[Any], start: float) -> list[Point]:
    """`chat_text_timeline` for a Responses stream: visible text grows on `response.output_text.delta`
    (and refusal deltas); `response.created`, `response.in_progress` and the other lifecycle events show
    nothing, like the role chunk in Chat Completions."""
    return chat_text_timeline(arrivals, start, accumulator=ResponsesAccumulator())


def timing_from_points(
    label: str, points: Sequence[Point], total: float, *, notes: Mapping[str, Any] | None = None
) -> Timing:
    """A `Timing` from ready-made points (used for the non-streaming client and for recorded data).

    `notes` is free-form context kept with the timing (rebuilt text, raw bytes...); it is never compared."""
    return Timing(label, tuple((float(t), int(c)) for t, c in points), float(total), dict(notes or {}))


def timing_from_arrivals(
    label: str,
    arrivals: Iterable[Any],
    start: float,
    end: float,
    *,
    dialect: str = "chat",
    notes: Mapping[str, Any] | None = None,
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
    return Timing(label, tuple(points), end - start, dict(notes or {}))


def first_visible_time(arrivals: Iterable[Any], start: float = 0.0) -> float | None:
    """Seconds from `start` to the first event with visible text (the TTFT), or None if there was none."""
    points = chat_text_timeline(arrivals, start)
    return points[0][0] if points else None


# -- reasoning before the answer --------------------------------------------------------------------------


def _reasoning_chars(acc: ChatAccumulator | ResponsesAccumulator) -> int:
    """Reasoning characters an accumulator holds (kept apart from the answer: see `ChatAccumulator.reasoning`)."""
    if isinstance(acc, ResponsesAccumulator):
        return len(acc.reasoning)
    return sum(len(t) for t in acc.reasoning.values())


def _grow(points: list[Point], rel: float, chars: int) -> None:
    if chars > (points[-1][1] if points else 0):
        if points and points[-1][0] == rel:
            points[-1] = (rel, chars)
        else:
            points.append((rel, chars))


def reasoning_timelines(
    arrivals: Iterable[Any], start: float, *, dialect: str = "chat"
) -> tuple[list[Point], list[Point]]:
    """(reasoning points, answer points) of one stream of a reasoning model, read once: when the thinking grew
    and when the answer's visible text grew, as `chat_text_timeline` counts it. A UI that shows the thinking
    shows something at the first reasoning point; one that shows only the answer waits for the first answer
    point, which is the TTFT of this module (reasoning is not the answer)."""
    if dialect not in ("chat", "responses"):
        raise ValueError(f"dialect must be 'chat' or 'responses', got {dialect!r}")
    acc: ChatAccumulator | ResponsesAccumulator = ChatAccumulator() if dialect == "chat" else ResponsesAccumulator()
    thinking: list[Point] = []
    answer: list[Point] = []
    for t, event in _pairs(arrivals):
        acc.feed(event)
        _grow(thinking, t - start, _reasoning_chars(acc))
        _grow(answer, t - start, _chat_visible(acc))
    return thinking, answer


@dataclass(frozen=True)
class FirstOutput:
    """When a reasoning model's stream first showed something: `reasoning` (the first reasoning text) and
    `answer` (the first answer text, the TTFT), in seconds since the request; None when none came."""

    reasoning: float | None
    answer: float | None

    @property
    def thinking(self) -> float | None:
        """Seconds between the first reasoning and the first answer text (None unless both came)."""
        if self.reasoning is None or self.answer is None:
            return None
        return self.answer - self.reasoning


def first_outputs(arrivals: Iterable[Any], start: float = 0.0, *, dialect: str = "chat") -> FirstOutput:
    """The first reasoning and the first answer text of one stream (see `reasoning_timelines`)."""
    thinking, answer = reasoning_timelines(arrivals, start, dialect=dialect)
    return FirstOutput(thinking[0][0] if thinking else None, answer[0][0] if answer else None)


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


def timings_json(timings: Iterable[Timing], *, schedule: Schedule | None = None, note: str = "") -> str:
    """Timings (label, total, points; not the notes) and the schedule as readable JSON text, one point a line,
    so a diff of two recordings reads well. `streamlab.net.live.save_timings` writes it to a file."""

    def dump(obj: Any) -> str:
        return json.dumps(obj, ensure_ascii=False)

    lines = ["{", f' "note": {dump(note)},']
    if schedule is not None:
        sch = {"ttft": schedule.ttft, "gap": schedule.gap, "pieces": list(schedule.pieces)}
        lines.append(f' "schedule": {dump(sch)},')
    entries = []
    for tm in timings:
        points = ",\n".join(f"    {dump([round(t, 6), c])}" for t, c in tm.points)
        entries.append(f'  {{"label": {dump(tm.label)}, "total": {round(tm.total, 6)}, "points": [\n{points}\n  ]}}')
    lines += [' "timings": [', ",\n".join(entries), " ]", "}"]
    text = "\n".join(lines) + "\n"
    json.loads(text)  # it must stay valid JSON
    return text


def load_timings(path: str | Path) -> RecordedRun:
    """Read a file written by `streamlab.net.live.save_timings` (the `timings_json` text).

    A malformed file raises ValueError naming the file and the entry."""
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


def recorded_run(name: str = "three-clients") -> RecordedRun:
    """One of the data set's recordings, `data/timings/NAME.json` (lab 04 plots "three-clients")."""
    return load_timings(data_dir() / "timings" / f"{name}.json")
