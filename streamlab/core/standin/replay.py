"""Replay a real capture on the stand-in: its bytes, read by read, after the recorded gaps (sans-IO core).

A capture (`streamlab.core.capture.Capture`) holds what a real server sent and when each read arrived. As a
stand-in episode it plays the same bytes with the same pacing, offline and deterministically:

* a 200 stream becomes an `Episode`: for each read, a `Wait` of the recorded gap (the first one counted from
  the request) and a `Send` of exactly the bytes of that read, so the HTTP chunks are the server's reads; the
  episode keeps the recorded timeline (`Episode(timeline=True)`): a write a busy machine made late takes its
  lateness out of the next gap, so the replay ends when the capture did instead of adding every delay up;
* a body the server broke (`transport_error`: it closed the connection without HTTP's last chunk) ends with a
  `Cut` at the recorded moment; a body the capturing client closed ends with a `Cut` where it left, since what
  the server would have sent next was never received; a clean body ends cleanly, an empty one too;
* any other status becomes an `ErrorEpisode` with the recorded status, the body's exact bytes under the
  recorded Content-Type, after the time the headers took.

Every reply carries `X-Streamlab-Capture: NAME`, so a client can tell which capture played. A capture is
checked first (`streamlab.core.capture.validate_record`: a plain name, a final status, header values without
CR or LF, finite pauses from 0 s): a name or a Content-Type with CR LF had injected response headers, and an
infinite, NaN or negative pause or a 1xx status had written a second HTTP response inside a 200 stream. `replay_script`
serves a whole folder: each capture under its own name as the model, and the real model's name playing the
default capture, so code written for the real server runs unchanged against the replay. Serve it with
`usage="scripted"` (play every byte as recorded) and `require_input=False` (the requests that made some captures,
such as one without `messages`, are ones the stand-in would otherwise refuse):

    from streamlab.core.capture import load_captures
    from streamlab.net.standin.server import serve

    server = serve(replay_script(load_captures()), usage="scripted", require_input=False)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from streamlab.core.capture import Capture, validate_record
from streamlab.core.endings import Ending
from streamlab.core.standin.script import Cut, Episode, ErrorEpisode, Send, Step, Wait

__all__ = ["CAPTURE_HEADER", "episode_from_capture", "replay_steps", "replay_script", "DEFAULT_REPLAY"]

CAPTURE_HEADER = "X-Streamlab-Capture"
"""The response header that names the capture a reply replays."""

DEFAULT_REPLAY = "chat-plain"
"""The capture the real model's own name plays in `replay_script`."""


def replay_steps(capture: Capture) -> list[Step]:
    """The steps that play a 200 capture: Wait(gap) and Send(bytes) per read, then a Cut if the body was cut."""
    steps: list[Step] = []
    gaps = capture.gaps
    for i, chunk in enumerate(capture.chunks):
        gap = gaps[i] if i < len(gaps) else 0.0
        if gap > 0:
            steps.append(Wait(gap))
        steps.append(Send(chunk))
    if capture.ending is Ending.BROKEN:
        last = capture.reads[-1].at if capture.reads else capture.headers_at
        if capture.end_at > last:
            steps.append(Wait(capture.end_at - last))
        steps.append(Cut())
    elif capture.ending is Ending.CANCELLED:
        steps.append(Cut())
    return steps


def episode_from_capture(capture: Capture) -> Episode | ErrorEpisode:
    """The stand-in episode that replays `capture` (see the module docstring); ValueError for a capture that
    would make the stand-in send what no server sends (`validate_record`)."""
    validate_record(capture.name, capture.record)
    named = ((CAPTURE_HEADER, capture.name),)
    if capture.status != 200:
        content_type = capture.content_type or "application/octet-stream"
        return ErrorEpisode(
            capture.status, capture.body, (("Content-Type", content_type), *named), wait=capture.headers_at
        )
    return Episode(replay_steps(capture), headers=named, timeline=True)


def replay_script(
    captures: Mapping[str, Capture] | Iterable[Capture], *, default: str | None = DEFAULT_REPLAY
) -> dict[str, Episode | ErrorEpisode]:
    """A stand-in script that replays every capture under its own name as the model; the model name the
    captures were made with plays `default` (None: it plays nothing)."""
    items = list(captures.values()) if isinstance(captures, Mapping) else list(captures)
    script: dict[str, Episode | ErrorEpisode] = {c.name: episode_from_capture(c) for c in items}
    chosen = next((c for c in items if c.name == default), None)
    if chosen is not None:
        model = str(chosen.record.get("model", {}).get("name") or "")
        if model and model not in script:
            script[model] = script[chosen.name]
    return script
