"""Real captures replayed (streamlab.core.capture, streamlab.core.standin.replay, `streamlab standin --replay`).

The pure half: every packaged capture loads, its chunks join to its body, and its episode sends exactly those
chunks after exactly the recorded gaps (an error capture: its status, type and bytes). The split harness takes a
capture as a fixture, and the accumulators see each capture's quirk. The socket half: the stand-in replays
every capture byte for byte, no read earlier than recorded, and the official SDK streams from the replay.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from streamlab.core.accumulate import ChatAccumulator
from streamlab.core.capture import Capture, captures_folder, fixture_from_capture, load_capture, load_captures
from streamlab.core.endings import Ending, Outcome
from streamlab.core.harness.broken import gallery
from streamlab.core.harness.fuzz import run_harness, streamlab_contender
from streamlab.core.standin.replay import CAPTURE_HEADER, episode_from_capture, replay_script, replay_steps
from streamlab.core.standin.script import Cut, Episode, ErrorEpisode, Send, Wait
from streamlab.net.standin.server import StandIn
from streamlab.tools.cli.main import main

CAPTURES = load_captures()
NAMES = list(CAPTURES)
STREAMS = [n for n in NAMES if CAPTURES[n].status == 200]
ERRORS = [n for n in NAMES if CAPTURES[n].status != 200]
QUICK = [n for n in NAMES if CAPTURES[n].end_at < 3.0]  # replayed over a socket in well under a second or two


def _made(name: str, body: bytes, reads: list[tuple[float, int]], **record: Any) -> Capture:
    """A capture written by hand, in the record format `streamlab.net.capture` writes."""
    full = {
        "request": {"body": {"model": "m"}},
        "reads": [{"at": at, "bytes": n} for at, n in reads],
        "response": {"status": 200, "headers": [["content-type", "text/event-stream"]], "headers_at": 0.01},
        **record,
    }
    return Capture(name, body, full)


# -- the pure half --------------------------------------------------------------------------------------


def test_the_packaged_folder_loads_in_index_order() -> None:
    index = json.loads((captures_folder() / "index.json").read_text(encoding="utf-8"))
    assert NAMES == [c["name"] for c in index["captures"]]
    assert load_capture("chat-plain").body == (captures_folder() / "chat-plain.sse").read_bytes()
    with pytest.raises(FileNotFoundError, match="no capture 'absent'"):
        load_capture("absent")


@pytest.mark.parametrize("name", NAMES)
def test_chunks_join_to_the_body_one_per_read(name: str) -> None:
    capture = CAPTURES[name]
    assert b"".join(capture.chunks) == capture.body
    assert len(capture.chunks) == len(capture.reads)
    if not capture.record.get("redacted"):
        assert [len(c) for c in capture.chunks] == [r.size for r in capture.reads]
    assert sum(capture.gaps) == pytest.approx(capture.reads[-1].at if capture.reads else 0.0)


@pytest.mark.parametrize("name", STREAMS)
def test_a_stream_episode_sends_each_read_after_its_recorded_gap(name: str) -> None:
    capture = CAPTURES[name]
    episode = episode_from_capture(capture)
    assert isinstance(episode, Episode) and episode.payload == capture.body
    assert (CAPTURE_HEADER, name) in episode.headers
    sends = [s.data for s in episode.steps if isinstance(s, Send)]
    assert sends == list(capture.chunks)
    waited, due = 0.0, []
    for step in episode.steps:  # the time each Send is due, from the request
        if isinstance(step, Wait):
            waited += step.seconds
        elif isinstance(step, Send):
            due.append(waited)
    assert due == pytest.approx([r.at for r in capture.reads], abs=1e-9)
    cut = isinstance(episode.steps[-1], Cut) if episode.steps else False
    assert cut == (capture.ending in (Ending.BROKEN, Ending.CANCELLED))


def test_a_body_the_server_broke_is_cut_when_it_broke_and_a_cancelled_one_where_the_client_left() -> None:
    # made by hand: the packaged interrupted-first once ended so, but its recapture ends cleanly (issue 36)
    first = _made(
        "broken",
        b"data: 1\n\ndata: [DONE]\n\n",
        [(0.1, 9), (0.2, 14)],
        transport_error={"at": 0.3, "error": "RemoteProtocolError: incomplete chunked read"},
    )
    assert first.ending is Ending.BROKEN
    steps = replay_steps(first)
    assert isinstance(steps[-1], Cut) and isinstance(steps[-2], Wait)
    assert steps[-2].seconds == pytest.approx(first.record["transport_error"]["at"] - first.reads[-1].at)
    cancelled = replay_steps(CAPTURES["cancelled"])
    assert CAPTURES["cancelled"].ending is Ending.CANCELLED and isinstance(cancelled[-1], Cut)
    assert CAPTURES["chat-plain"].ending is Ending.COMPLETE
    assert not isinstance(replay_steps(CAPTURES["chat-plain"])[-1], Cut)


@pytest.mark.parametrize("name", ERRORS)
def test_an_error_capture_is_an_error_episode_with_its_status_type_and_bytes(name: str) -> None:
    capture = CAPTURES[name]
    episode = episode_from_capture(capture)
    assert isinstance(episode, ErrorEpisode)
    assert episode.status == capture.status == 500 and episode.body == capture.body
    assert dict(episode.headers)["Content-Type"] == capture.content_type
    assert episode.wait == capture.headers_at


def test_a_redacted_body_is_cut_where_the_reads_fell_the_last_chunk_taking_the_rest() -> None:
    made = _made("made", b"abcdefgh", [(0.1, 3), (0.2, 4), (0.5, 5)], redacted="paths replaced")
    assert made.chunks == (b"abc", b"defg", b"h")
    assert made.gaps == pytest.approx((0.1, 0.1, 0.3))
    steps = replay_steps(made)
    assert steps == [Wait(0.1), Send(b"abc"), Wait(made.gaps[1]), Send(b"defg"), Wait(made.gaps[2]), Send(b"h")]


def test_the_script_names_every_capture_and_the_real_model_plays_chat_plain() -> None:
    script = replay_script(CAPTURES)
    model = CAPTURES["chat-plain"].record["model"]["name"]
    assert set(script) == {*NAMES, model}
    assert script[model] is script["chat-plain"]
    assert set(replay_script(CAPTURES.values(), default=None)) == set(NAMES)


def test_the_capture_reads_its_request_flags_and_cpu_time() -> None:
    plain = CAPTURES["chat-plain"]
    assert plain.request is not None and plain.request["max_tokens"] == 40
    plain.request["max_tokens"] = 1  # a copy: the record is not changed
    assert plain.request["max_tokens"] == 40
    assert plain.flag("--chat_format") == "gemma" and plain.flag("--n_threads") == "2"
    assert CAPTURES["error-not-json"].request is None
    assert CAPTURES["error-not-json"].request_text == "this body is not JSON"
    assert CAPTURES["cancelled"].server_cpu_seconds is not None


# -- lab 02: the split harness on real bytes ----------------------------------------------------------


@pytest.mark.parametrize("name", STREAMS)
def test_a_captured_stream_is_a_harness_fixture_with_the_standards_events(name: str) -> None:
    fixture = fixture_from_capture(CAPTURES[name])
    assert fixture.raw == CAPTURES[name].body
    blocks = [b for b in fixture.raw.split(b"\n\n") if b and not b.startswith(b":")]  # a `: ping` is no event
    assert [e.data.encode() for e in fixture.expected.events] == [b.removeprefix(b"data: ") for b in blocks]
    assert not fixture.expected.truncated and all(e.event == "message" for e in fixture.expected.events)


def test_fixtures_are_refused_for_error_bodies_and_for_bodies_of_another_shape() -> None:
    with pytest.raises(ValueError, match="not an event stream"):
        fixture_from_capture(CAPTURES["error-not-json"])
    crlf = _made("crlf", b"data: 1\r\n\r\n", [(0.1, 11)])
    with pytest.raises(ValueError, match="by hand"):
        fixture_from_capture(crlf)
    with pytest.raises(ValueError, match="blank line"):
        fixture_from_capture(_made("cut", b"data: 1\n\ndata: 2", [(0.1, 16)]))


def test_a_live_stream_with_keep_alive_comments_is_a_fixture_and_the_comments_are_no_events() -> None:
    """A slow live stream carries sse-starlette's `: ping - <time>` comments (every 15 s); lab 11 live turns such
    a stream into a fixture, so a comment block must give no event (and the parser must agree)."""
    body = b'data: {"a":1}\n\n: ping - 2026-12-01 23:50:00\n\ndata: [DONE]\n\n'
    fixture = fixture_from_capture(_made("pinged", body, [(0.1, len(body))]))
    assert [e.data for e in fixture.expected.events] == ['{"a":1}', "[DONE]"]
    assert {"comment", "no-dispatch-without-data"} <= set(fixture.rules)
    result = run_harness([streamlab_contender()], [fixture], strategies=("whole", "random splits"), random_runs=20)
    assert result.share("streamlab", fixture.name) == 1.0
    with pytest.raises(ValueError, match="by hand"):  # a comment and data in one block is not read off by eye
        fixture_from_capture(_made("mixed", b": hi\ndata: 1\n\n", [(0.1, 16)]))


def test_the_split_harness_passes_the_library_and_catches_broken_parsers_on_a_real_capture() -> None:
    fixture = fixture_from_capture(CAPTURES["interrupted-first"])
    contenders = [streamlab_contender(), *gallery()]
    result = run_harness(contenders, [fixture], strategies=("whole", "random splits"), random_runs=40)
    assert result.share("streamlab", fixture.name) == 1.0
    failing = [c.name for c in contenders[1:] if result.share(c.name, fixture.name) < 1.0]
    assert "chunk-ends-line" in failing  # a read ends mid-line somewhere in 40 random splits of 2,542 bytes
    assert all(result.cell(c.name, fixture.name, "whole").share == 1.0 for c in contenders)
    assert result.whole_ok_split_wrong("chunk-ends-line") == [fixture.name]


# -- lab 03: each quirk, as the accumulator sees it ----------------------------------------------------


def _accumulated(name: str) -> ChatAccumulator:
    acc = ChatAccumulator()
    for event in CAPTURES[name].events():
        acc.feed(event)
    return acc


def test_the_accumulator_over_each_capture_shows_its_quirk() -> None:
    plain = _accumulated("chat-plain")
    assert plain.outcome() is Outcome.INCOMPLETE and plain.finish_reason == {0: "length"} and plain.text[0]
    assert _accumulated("include-usage").usage is None and _accumulated("include-usage").saw_done
    required = _accumulated("tool-choice-required")
    assert not required.tool_calls and required.finish_reason == {0: "length"}
    named = _accumulated("tool-named")
    call = named.tool_calls[(0, 0)]
    assert named.outcome() is Outcome.COMPLETE and call.name_repeated == "get_weather"
    assert call.name == "get_weather" * call.name_fragments and call.name_fragments > 3
    assert "no function has that name" in (named.tool_call_problem() or "")
    interrupted = _accumulated("interrupted-first")
    assert interrupted.saw_done and interrupted.finish_reason == {} and interrupted.outcome() is Outcome.INCOMPLETE
    assert _accumulated("cancelled").outcome() is Outcome.TRUNCATED
    empty = _accumulated("prompt-over-context")
    assert empty.chunks == 0 and empty.outcome() is Outcome.TRUNCATED
    assert _accumulated("no-messages").text[0]


def test_the_timing_of_a_capture_starts_at_its_first_content_read() -> None:
    plain = CAPTURES["chat-plain"]
    timing = plain.timing()
    role_read = plain.reads[0].at
    assert timing.ttft is not None and timing.ttft > role_read  # the role chunk shows nothing
    assert timing.total == plain.end_at and len(plain.content_times()) == len(timing.points)


# -- the socket half: the stand-in replays them -------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[StandIn]:
    with StandIn(replay_script(CAPTURES), usage="scripted", require_input=False) as standin:
        yield standin


def _read(server: StandIn, model: str) -> tuple[httpx.Response, list[tuple[float, bytes]], str | None]:
    """POST a chat request for `model` and read the body raw: (response, [(seconds, bytes)], transport error)."""
    got: list[tuple[float, bytes]] = []
    error = None
    start = time.perf_counter()
    with httpx.Client(timeout=10, trust_env=False) as client:
        with client.stream(
            "POST",
            server.url("chat/completions"),
            json={"model": model, "messages": [{"role": "user", "content": "x"}], "stream": True},
        ) as r:
            try:
                for chunk in r.iter_raw():
                    got.append((time.perf_counter() - start, chunk))
            except httpx.TransportError as exc:
                error = type(exc).__name__
    return r, got, error


@pytest.mark.parametrize("name", QUICK)
def test_the_replay_sends_the_capture_byte_for_byte(server: StandIn, name: str) -> None:
    capture = CAPTURES[name]
    response, got, error = _read(server, name)
    assert response.status_code == capture.status
    assert response.headers["content-type"] == capture.content_type
    assert response.headers[CAPTURE_HEADER] == name
    assert b"".join(chunk for _, chunk in got) == capture.body
    assert (error is not None) == (capture.ending in (Ending.BROKEN, Ending.CANCELLED))


def test_the_replay_keeps_the_recorded_pacing(server: StandIn) -> None:
    capture = CAPTURES["chat-plain"]
    _, got, _ = _read(server, "chat-plain")
    received, arrived = 0, []
    for at, chunk in got:  # when the client held the first n bytes, for every n a read ended at
        received += len(chunk)
        arrived.append((received, at))
    ends = [sum(r.size for r in capture.reads[: i + 1]) for i in range(len(capture.reads))]
    for i, end in enumerate(ends):
        held_at = next(at for n, at in arrived if n >= end)
        assert held_at >= capture.reads[i].at - 0.002, f"read {i} arrived before its recorded time"
    assert arrived[-1][1] < capture.end_at + 2.0  # generous: a busy machine is late, never early
    server.wait_idle()
    record = server.records("chat-plain")[-1]
    # From the request's arrival, which the schedule counts from: the head is read (started_at) after it, later
    # on a busy machine, and a chunk on time had looked a few milliseconds early against that.
    assert record.arrived_at is not None and record.arrived_at <= record.write_times[0]
    writes = [at - record.arrived_at for at in record.write_times]
    assert len(writes) == len(capture.reads)  # one HTTP chunk per recorded read
    for i, at in enumerate(writes):  # each chunk left no earlier than its read arrived at the real client
        assert at >= capture.reads[i].at - 0.002, f"chunk {i} was written {capture.reads[i].at - at:.3f} s early"
    late = writes[0] - capture.reads[0].at  # a late first chunk: the timeline takes it out of the next gap
    spread = capture.reads[-1].at - capture.reads[0].at
    assert writes[-1] - writes[0] >= spread - late - 0.002  # spread out, not a burst


def test_a_replayed_capture_keeps_its_timeline_and_a_scripted_episode_its_gaps() -> None:
    # A write that leaves late (here: 32 MB to a client that reads nothing for 1.5 s) must not push the rest of
    # a replay back: a timeline episode takes the lateness out of the next gap, and never writes before its
    # schedule. A scripted episode keeps every gap whole instead (a stall must stay as long as its script says).
    # Replays had added every scheduler delay up, so a busy machine ended them seconds late.
    assert all(episode_from_capture(CAPTURES[n]).timeline for n in STREAMS)
    steps = [Send(b"x" * (32 << 20)), Wait(0.5), Send(b"a"), Wait(1.0), Send(b"b")]
    script = {"timeline": Episode(steps, timeline=True), "gaps": Episode(steps)}
    with StandIn(script, usage="scripted", require_input=False) as standin:
        for model in ("timeline", "gaps"):
            body = {"model": model, "messages": [{"role": "user", "content": "x"}], "stream": True}
            with httpx.Client(timeout=30, trust_env=False) as client:
                with client.stream("POST", standin.url("chat/completions"), json=body) as r:
                    time.sleep(1.5)  # the 32 MB write blocks until this client reads
                    assert sum(len(c) for c in r.iter_raw()) == (32 << 20) + 2
            standin.wait_idle()
            first, a, b = standin.records(model)[-1].write_times
            assert a - first >= 1.5 - 0.01 and b - first >= 1.5 - 0.002, model  # never before its schedule
            if model == "timeline":
                assert b - a < 0.5, f"a timeline replay waited {b - a:.3f} s after a late write instead of ~0"
            else:
                assert b - a >= 1.0 - 0.002, f"a scripted gap of 1.0 s was {b - a:.3f} s"


def test_the_official_sdk_streams_from_a_replayed_capture(server: StandIn) -> None:
    openai = pytest.importorskip("openai")
    from streamlab.net.sdk import read_sdk_stream

    ask = [{"role": "user", "content": "x"}]
    with openai.OpenAI(base_url=server.base_url, api_key="learner", max_retries=0) as client:
        plain = read_sdk_stream(client.chat.completions.create(model="chat-plain", messages=ask, stream=True))
        interrupted = read_sdk_stream(
            client.chat.completions.create(model="interrupted-first", messages=ask, stream=True)
        )
        with client.chat.completions.stream(model="tool-named", messages=ask) as stream:
            for _ in stream:
                pass
            final = stream.get_final_completion()
    assert plain.text == _accumulated("chat-plain").text[0] and plain.finish_reason == "length"
    assert interrupted.ending is Ending.COMPLETE and interrupted.saw_done and interrupted.finish_reason is None
    assert interrupted.outcome is Outcome.INCOMPLETE  # the SDK's loop ended quietly; no choice ever finished
    fragments = _accumulated("tool-named").tool_calls[(0, 0)].name_fragments
    assert final.choices[0].message.tool_calls[0].function.name == "get_weather" * fragments


def test_the_real_models_name_plays_chat_plain(server: StandIn) -> None:
    model = CAPTURES["chat-plain"].record["model"]["name"]
    _, got, _ = _read(server, model)
    assert b"".join(c for _, c in got) == CAPTURES["chat-plain"].body


def test_the_command_line_refuses_a_folder_without_captures(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["standin", "--replay", str(tmp_path), "--port", "0"]) == 2
    assert "no captures in" in capsys.readouterr().err
