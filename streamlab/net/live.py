"""Live timing runs: read one scheduled stand-in answer as a user's client would, and time it (I/O layer).

The arithmetic (TTFT, gaps, blank-screen share, the ILLUSTRATIVE numbers, recorded runs) is pure and lives
in `streamlab.core.metrics`; this module only produces arrival times from real sockets and hands them to
it. `run_three_clients` reads the same scripted answer three ways (streaming, buffering the whole body, and
not streaming at all) so a lab can show that the same bytes arrive while what the user sees differs;
`stream_timing` / `astream_timing` time one streamed answer with `streamlab.net.client`;
`scheduled_chat_episode` scripts the stand-in to send text on a `Schedule`; `save_timings` writes a run
to `data/timings/` so its numbers can be quoted and plotted without changing from run to run.

The metrics themselves (`Timing`, the illustrative model) are pure and live in `streamlab.core.metrics`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from streamlab.core.accumulate import ChatAccumulator
from streamlab.core.metrics import (
    Schedule,
    Timing,
    chat_text_timeline,
    timings_json,
)
from streamlab.core.shapes import chat_completion_body, chat_text_stream
from streamlab.core.sse import SSEParser
from streamlab.core.standin.script import Episode, Send, Wait
from streamlab.net.client import astream_chat, stream_chat
from streamlab.net.eventstream import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT

__all__ = [
    "CLIENT_LABELS",
    "scheduled_chat_episode",
    "run_three_clients",
    "stream_timing",
    "astream_timing",
    "save_timings",
]


def save_timings(
    path: str | Path, timings: Iterable[Timing], *, schedule: Schedule | None = None, note: str = ""
) -> None:
    """Write timings and the schedule to `path` as `streamlab.core.metrics.timings_json` text."""
    Path(path).write_text(timings_json(timings, schedule=schedule, note=note), encoding="utf-8")


# -- the scheduled experiment (I/O: the stand-in and httpx) ---------------------------------------------


def scheduled_chat_episode(schedule: Schedule, *, role_at: float = 0.05, include_usage: bool = True) -> Episode:
    """A stand-in `Episode` that streams `schedule` as Chat Completions chunks.

    The role chunk leaves early, at `role_at` seconds (it shows nothing, so a client that takes the first
    event as the TTFT is visibly wrong), the first content chunk at `schedule.ttft`, then one content chunk
    every `schedule.gap`; the finish chunk, the usage chunk (with `include_usage`) and `[DONE]` follow the
    last piece at once. A non-streaming request gets the same text as one JSON body after the same total
    waiting time (the stand-in sums the waits).
    """
    if not 0 <= role_at <= schedule.ttft:
        raise ValueError(f"role_at must be between 0 and the TTFT {schedule.ttft!r}, got {role_at!r}")
    n = len(schedule.pieces)
    frames = chat_text_stream(list(schedule.pieces), include_usage=include_usage)
    steps: list[Any] = [Wait(role_at), Send(frames[0]), Wait(schedule.ttft - role_at), Send(frames[1])]
    for frame in frames[2 : n + 1]:
        steps += [Wait(schedule.gap), Send(frame)]
    steps += [Send(f) for f in frames[n + 1 :]]
    return Episode(
        [s for s in steps if not (isinstance(s, Wait) and s.seconds == 0)], body=chat_completion_body(schedule.text)
    )


CLIENT_LABELS = ("streaming", "buffered body", "non-streaming")
"""The three ways `run_three_clients` reads the same answer, in the order it runs them."""


def _chat_body(model: str, stream: bool, fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The request every client sends: `fields` (messages, max_tokens...) over a short default question."""
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "Say something."}]}
    body.update({k: v for k, v in (fields or {}).items() if k not in ("model", "stream", "stream_options")})
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _text_of(acc: Any) -> str:
    return "".join(acc.text[i] for i in sorted(acc.text))


def stream_timing(
    base_url: str,
    model: str,
    *,
    label: str = CLIENT_LABELS[0],
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    deadline: float | None = None,
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    client: httpx.Client | None = None,
    fields: Mapping[str, Any] | None = None,
) -> Timing:
    """Read one streamed chat answer with `streamlab.net.client.stream_chat` and time it.

    The TTFT counts from when the request was sent (`stream.started_at`) to the first visible text; the
    total runs to the last byte. `notes` holds the rebuilt `text`, the `raw` bytes, the `arrivals`
    (`TimedEvent`s) and `first_event`, the elapsed time of the first event of any kind (the role chunk).
    `read_timeout`, `deadline`, `connect_timeout` and `client` mean what they mean for `EventStream`; `fields`
    go into the request body (`messages`, `max_tokens`: a real model must be bounded).
    """
    with stream_chat(
        base_url,
        _chat_body(model, True, fields),
        read_timeout=read_timeout,
        deadline=deadline,
        connect_timeout=connect_timeout,
        client=client,
    ) as stream:
        events = stream.read_all()
    return _timing_of(label, stream, events)


async def astream_timing(
    base_url: str,
    model: str,
    *,
    label: str = "streaming (async)",
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    deadline: float | None = None,
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    client: httpx.AsyncClient | None = None,
) -> Timing:
    """`stream_timing` with the async client (`astream_chat`); `await` it, e.g. at a notebook's top level."""
    async with astream_chat(
        base_url,
        _chat_body(model, True),
        read_timeout=read_timeout,
        deadline=deadline,
        connect_timeout=connect_timeout,
        client=client,
    ) as stream:
        events = await stream.read_all()
    return _timing_of(label, stream, events)


def _timing_of(label: str, stream: Any, events: Sequence[Any]) -> Timing:
    """A Timing from a finished client stream (sync or async): points at each visible-text event."""
    end = stream.last_byte_at if stream.last_byte_at is not None else stream.started_at
    acc = ChatAccumulator()
    points = chat_text_timeline(events, stream.started_at, accumulator=acc)
    return Timing(
        label,
        tuple(points),
        end - stream.started_at,
        {
            "text": _text_of(acc),
            "raw": stream.raw,
            "arrivals": tuple(events),
            "first_event": events[0].elapsed if events else None,
        },
    )


def _buffered_timing(
    client: httpx.Client, url: str, model: str, label: str, fields: Mapping[str, Any] | None = None
) -> Timing:
    """Ask for a stream but read the whole body before looking at it (what a buffering proxy amounts to)."""
    start = time.perf_counter()
    response = client.post(url, json=_chat_body(model, True, fields))
    end = time.perf_counter()  # httpx has read the whole body by now
    response.raise_for_status()
    parser = SSEParser()
    events = parser.feed(response.content)
    if parser.close():
        raise ValueError(f"{label}: the body from {url} stopped in the middle of an event")
    acc = ChatAccumulator()
    points = chat_text_timeline(((end, ev) for ev in events), start, accumulator=acc)
    return Timing(label, tuple(points), end - start, {"text": _text_of(acc), "raw": response.content})


def _non_streaming_timing(
    client: httpx.Client, url: str, model: str, label: str, fields: Mapping[str, Any] | None = None
) -> Timing:
    """No `stream` flag: one `chat.completion` JSON body when the whole answer is ready."""
    start = time.perf_counter()
    response = client.post(url, json=_chat_body(model, False, fields))
    end = time.perf_counter()
    response.raise_for_status()
    body = response.json()
    try:
        text = "".join(c["message"]["content"] or "" for c in sorted(body["choices"], key=lambda c: c["index"]))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{label}: {url} returned no choices[].message.content: {body!r:.200}") from exc
    points = ((end - start, len(text)),) if text else ()
    return Timing(label, points, end - start, {"text": text, "raw": response.content})


def run_three_clients(
    base_url: str, model: str, *, timeout: float = 30.0, fields: Mapping[str, Any] | None = None
) -> dict[str, Timing]:
    """Read the same scripted answer three ways, one after the other, and time what each makes visible.

    * "streaming": `streamlab.net.client.stream_chat`, events handled as their bytes arrive;
    * "buffered body": the same streamed request (`"stream": true`) read whole with `httpx.Client.post`,
      then parsed, as happens behind a buffering proxy or with a client that reads the full body;
    * "non-streaming": no `stream` flag; one JSON body after the same total time.

    `base_url` ends in `/v1` (the stand-in's `base_url`, or a real server's); `model` names the script to play
    (or the real model). `fields` go into every request body (`messages`, `max_tokens`, `temperature`: bound
    a real model, and make it answer the same three times). Returns the `Timing`s keyed by `CLIENT_LABELS`.
    Each run is a new request, so the script should repeat the same episode (the stand-in repeats the last one).
    """
    url = base_url.rstrip("/") + "/chat/completions"
    out = {CLIENT_LABELS[0]: stream_timing(base_url, model, read_timeout=timeout, deadline=timeout, fields=fields)}
    with httpx.Client(trust_env=False, timeout=timeout) as client:
        out[CLIENT_LABELS[1]] = _buffered_timing(client, url, model, CLIENT_LABELS[1], fields)
        out[CLIENT_LABELS[2]] = _non_streaming_timing(client, url, model, CLIENT_LABELS[2], fields)
    return out
