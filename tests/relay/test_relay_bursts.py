"""The relay's fast path, held to the slow one: bytes forwarded before they are parsed, bursts parsed in one go,
`answered` without a parse where none can change it, and the reader's one timer.

`RelayedStream.forward` + `catch_up` must give exactly what `upstream` chunk by chunk gives: the same bytes
downstream, the same keep-alives, the same final bytes, the same summary (TTFT included, each chunk keeping
its own arrival time). `answered` is compared at every byte with what a full parse says.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from streamlab.core import shapes
from streamlab.core.endings import Ending, Outcome
from streamlab.core.harness.fuzz import chunks_at
from streamlab.core.relay.stream import RelayedStream, marker_frame
from streamlab.net.relay.upstream import Read, UpstreamReader

CHAT = b"".join(shapes.chat_text_stream(["Hel", "lo ", "w\u00f6rld ", "\U0001f600"] * 5, model="m"))
RESP = b"".join(shapes.responses_text_stream(["Hel", "lo ", "w\u00f6rld"] * 5, model="r"))
ODD = (
    b': hi\r\n\r\nevent: x\r\ndata: [DON\r\nE]\r\n\r\ndata: {"choices": []}\r\r'  # CR line ends, no [DONE] yet
    + CHAT
)
BROKEN = CHAT.replace(b'"content":"lo "', b'"content":"lo \x01"', 1) + b"data: [DONE]\n\n"  # a frame error


def cuts(data: bytes, rng: random.Random) -> list[bytes]:
    points = sorted(rng.sample(range(1, len(data)), k=min(len(data) - 1, rng.randint(1, 40))))
    return chunks_at(data, points)


def slow_run(chunks: list[bytes], dialect: str, beats: set[int], end: Ending) -> tuple[bytes, dict]:
    rs = RelayedStream(dialect=dialect, model="m", started=0.0)
    out = bytearray()
    for i, chunk in enumerate(chunks):
        out += rs.upstream(chunk, 1.0 + i)
        if i in beats:
            out += rs.keepalive(1.5 + i)
    out += rs.upstream_ended(end, 99.0)
    return bytes(out), rs.summary()


def fast_run(chunks: list[bytes], dialect: str, beats: set[int], end: Ending, rng: random.Random) -> tuple[bytes, dict]:
    rs = RelayedStream(dialect=dialect, model="m", started=0.0)
    out = bytearray()
    for i, chunk in enumerate(chunks):
        out += rs.forward(chunk, 1.0 + i)
        if rng.random() < 0.3:  # a burst ends here
            rs.catch_up()
            assert rs.unparsed == 0
        if i in beats:
            out += rs.keepalive(1.5 + i)  # catches up by itself
    out += rs.upstream_ended(end, 99.0)
    return bytes(out), rs.summary()


@pytest.mark.parametrize(
    "dialect, data",
    [("chat", CHAT), ("responses", RESP), ("chat", ODD), ("chat", BROKEN), ("chat", CHAT[: len(CHAT) // 2])],
)
@pytest.mark.parametrize("end", [Ending.COMPLETE, Ending.BROKEN])
def test_bursts_give_the_same_bytes_and_summary_as_chunk_by_chunk(dialect: str, data: bytes, end: Ending) -> None:
    rng = random.Random(f"{dialect}{len(data)}{end}")
    for _ in range(60):
        chunks = cuts(data, rng)
        beats = {i for i in range(len(chunks)) if rng.random() < 0.2}
        slow = slow_run(chunks, dialect, beats, end)
        assert fast_run(chunks, dialect, beats, end, rng) == slow
        assert slow[1]["ttft_s"] is not None or data is BROKEN


def test_forward_returns_the_bytes_before_any_parse() -> None:
    rs = RelayedStream(dialect="chat", model="m")
    first = CHAT[: CHAT.index(b"\n\n") + 2]  # the first event, whole
    assert rs.forward(first, 1.0) == first
    assert rs.unparsed == 1 and rs.events == 0  # nothing parsed yet
    assert rs.summary()["events"] >= 1 and rs.unparsed == 0  # reading the summary catches up


def reference_answered(rs: RelayedStream) -> bool:
    """What `answered` must say: the full parse's outcome is terminal and no event is open."""
    rs.catch_up()
    parser = rs.parser
    boundary = parser is not None and not (parser.line_open or parser.in_event)
    return boundary and rs.accumulator.outcome() in (Outcome.COMPLETE, Outcome.INCOMPLETE)


@pytest.mark.parametrize(
    "dialect, data",
    [
        ("chat", CHAT + b": after\n"),
        ("chat", CHAT.replace(b"[DONE]", b"[DONE]  ")),
        ("chat", ODD),
        ("chat", CHAT.replace(b'"finish_reason":"stop"', b'"finish_reason":"length"')),  # incomplete, by length
        ("responses", RESP + b"\n"),
    ],
)
@pytest.mark.parametrize("size", [1, 2, 5, 7, 64])
def test_answered_agrees_with_a_full_parse_at_every_cut(dialect: str, data: bytes, size: int) -> None:
    rs, twin = RelayedStream(dialect=dialect, model="m"), RelayedStream(dialect=dialect, model="m")
    seen = []
    for at in range(0, len(data), size):
        piece = data[at : at + size]
        rs.forward(piece, 1.0)
        twin.upstream(piece, 1.0)
        got = rs.answered
        assert got == reference_answered(twin), (at, piece)
        seen.append(got)
    assert seen[-1]  # every one of these answers ends


def test_a_chat_answer_never_parses_for_answered_before_done_bytes() -> None:
    rs = RelayedStream(dialect="chat", model="m")
    body = CHAT[: CHAT.index(b"[DONE]")]
    for i in range(0, len(body), 50):
        rs.forward(body[i : i + 50], 1.0)
        assert not rs.answered
    assert rs.unparsed > 1  # `answered` left them for the burst's end
    rs.forward(CHAT[len(body) :], 2.0)
    assert rs.answered


def test_the_marker_is_the_same_after_a_burst() -> None:
    rs = RelayedStream(dialect="chat", model="m")
    rs.forward(CHAT[:300], 1.0)
    rs.forward(CHAT[300:333], 2.0)
    tail = rs.upstream_ended(Ending.BROKEN, 3.0)
    assert tail.endswith(
        marker_frame("chat", "upstream_broken", "the upstream connection broke mid-stream (closed or reset)")
    )


# -- the reader's one timer ---------------------------------------------------------------------------------


def test_the_reader_ends_each_wait_on_time_with_one_timer() -> None:
    """A long wait then a short one: the short one ends on time (the timer moves sooner); a short one then a
    long one: the long one is not cut short by the earlier timer (it waits on to its own deadline)."""

    async def body():
        yield b"a"
        await asyncio.sleep(3600)
        yield b""

    async def run() -> list[tuple[Read, float]]:
        import httpx

        loop = asyncio.get_running_loop()
        watch, stop = loop.create_future(), loop.create_future()
        reader = UpstreamReader(httpx.Response(200, content=body()), watch=watch, stop=stop)
        out = []
        for timeout in (5.0, 0.05, 0.3, 0.02):
            t0 = time.perf_counter()
            item = await reader.next(timeout)
            out.append((item.kind, time.perf_counter() - t0))
        await reader.close()
        return out

    got = asyncio.run(run())
    assert [k for k, _ in got] == [Read.CHUNK, Read.IDLE, Read.IDLE, Read.IDLE]
    assert got[1][1] < 2.0  # not the 5 s timer of the first wait
    assert got[2][1] >= 0.29  # not woken for good by an earlier, shorter timer
    assert got[3][1] < got[2][1]


def test_chunks_queued_behind_one_go_out_with_it_in_order_up_to_the_limit_and_never_past_the_end() -> None:
    """A relay that fell behind its upstream sends what queued up in one write (`UpstreamReader.coalesce`): the
    same bytes in the same order, about `limit` of them at most, never joined with what is not a chunk, and the
    arrival time is the last joined chunk's (None when nothing was joined)."""
    parts = [bytes([65 + i]) * 10 for i in range(10)]

    async def body():  # type: ignore[no-untyped-def]
        for part in parts:
            yield part

    async def run() -> tuple[list[tuple[bytes, float | None]], Read]:
        import httpx

        loop = asyncio.get_running_loop()
        watch, stop = loop.create_future(), loop.create_future()
        reader = UpstreamReader(httpx.Response(200, content=body()), watch=watch, stop=stop)
        while reader.queued < len(parts) + 1:  # every chunk and the end, read ahead
            await asyncio.sleep(0.01)
        got = []
        while (item := await reader.next(1.0)).kind is Read.CHUNK:
            got.append(reader.coalesce(item.data, limit=35))
        await reader.close()
        return got, item.kind

    got, end = asyncio.run(run())
    assert [data for data, _ in got] == [b"".join(parts[0:4]), b"".join(parts[4:8]), b"".join(parts[8:10])]
    assert all(at is not None for _, at in got) and end is Read.END


# -- the relay process keeps the heap a stream freed (streamlab.net.relay.serving.keep_freed_heap) --

_ROUNDS = """
import resource, sys
from streamlab.net.relay.serving import keep_freed_heap
took = keep_freed_heap() if sys.argv[1] == "keep" else None
faults = []
for _ in range(6):  # a fast stream's bytes, kept until its summary has parsed them, then freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    kept = [bytes(65345) for _ in range(36)]
    del kept
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(took, max(faults[2:]))
"""


def _rounds(mode: str) -> tuple[str, int]:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _ROUNDS, mode], capture_output=True, text=True, timeout=60, check=True)
    took, faults = out.stdout.split()
    return took, int(faults)


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_a_relay_process_keeps_the_heap_a_stream_freed() -> None:
    took, kept_faults = _rounds("keep")
    if took != "True":
        pytest.skip("this C library does not take M_TRIM_THRESHOLD (not glibc)")
    _, plain_faults = _rounds("plain")
    if plain_faults < 100:
        pytest.skip(f"this system's allocator keeps freed heap anyway ({plain_faults} faults a round without it)")
    # without it: 2.3 MB freed, then touched afresh, a fault per page (about 370 of 4 KiB on x86-64 Linux)
    assert kept_faults < 20, f"{kept_faults} page faults a round with the freed heap kept"


@pytest.mark.net
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc/PID/stat")
def test_the_relay_command_touches_no_fresh_heap_per_fast_stream() -> None:
    """`streamlab relay` between a stand-in that writes 2.3 MB in 64 KiB writes and a client: after two
    streams, each further stream costs the relay process a handful of page faults (it had cost about 430)."""
    import httpx
    from support import streamlab_cli

    from streamlab.core.standin.script import Episode, Send
    from streamlab.net.standin.server import StandIn

    blob = b"".join(shapes.chat_text_stream([f"f{i % 1000:03d} " for i in range(10_000)], model="bulk"))
    script = {"bulk": Episode([Send(blob[i : i + 65536]) for i in range(0, len(blob), 65536)])}
    with StandIn(script, usage="scripted") as upstream, streamlab_cli("relay", "--upstream", upstream.base_url) as proc:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()  # then one summary line a stream: six fit in the pipe unread

        def faults() -> int:
            with open(f"/proc/{proc.pid}/stat") as f:
                return int(f.read().rsplit(")", 1)[1].split()[7])  # minflt

        def stream(client: httpx.Client) -> None:
            body = {"model": "bulk", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
            with client.stream("POST", f"{url}/chat/completions", json=body) as r:
                assert r.status_code == 200
                assert sum(len(c) for c in r.iter_raw()) == len(blob)
            time.sleep(0.3)  # the summary catches up after the client's last byte

        with httpx.Client(timeout=30, trust_env=False) as client:
            for _ in range(2):
                stream(client)
            before = faults()
            for _ in range(4):
                stream(client)
            per_stream = (faults() - before) / 4
    assert per_stream < 100, f"{per_stream:.0f} page faults per stream in the relay process"


# -- a run of text chunks of the learned shape in one call (ChatAccumulator.feed_shaped), held to one by one --


def _text(content: str, **extra: object) -> bytes:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": None}
    return shapes.sse_frame(shapes.to_json({**shapes.chat_chunk([choice]), **extra}))


_TRICKY = ["error", "keepalive", '"error"', '"keepalive"', 'say "hi"', "\\", "\u2028", "\U0001f600", ""]
SHAPED_STREAMS = {
    "plain": b"".join(shapes.chat_text_stream([f"w{i} " for i in range(60)])),
    "tricky texts": b"".join(shapes.chat_text_stream([_TRICKY[i % len(_TRICKY)] for i in range(60)])),
    "an error mid-way": b"".join(
        [_text(f"a{i}") for i in range(20)]
        + [shapes.sse_frame('{"error": {"message": "overloaded", "type": "server_error"}}')]
        + [_text(f"b{i}") for i in range(10)]
    ),
    "a keep-alive shape": b"".join(
        [_text(f"a{i}") for i in range(10)]
        + [_text(f"k{i}", type="keepalive") for i in range(10)]  # the slow path takes these for keep-alives
        + [_text(f"c{i}") for i in range(10)]
        + [shapes.chat_done()]
    ),
    "text after [DONE]": b"".join(
        [_text(f"a{i}") for i in range(10)] + [shapes.chat_done()] + [_text(f"late{i}") for i in range(10)]
    ),
    "the shape changes": b"".join(
        [_text(f"a{i}") for i in range(15)]
        + [_text(f"b{i}", model_extra=i) for i in range(15)]  # a field that differs in every chunk
        + [_text(f"c{i}", service_tier="x") for i in range(15)]
        + [shapes.chat_done()]
    ),
}


def _state(rs: RelayedStream) -> dict:
    acc = rs.accumulator
    return {
        **rs.summary(),
        "text": acc.text,
        "chunks": acc.chunks,
        "acc_events": acc.events,
        "late": acc.late_events,
        "sdk_raises": rs.sdk_raises,
        "keepalive_seq": rs._keepalive_seq,
    }


@pytest.mark.parametrize("name", list(SHAPED_STREAMS))
def test_text_chunks_in_one_call_give_what_one_by_one_gives(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlab.core.accumulate import ChatAccumulator

    data = SHAPED_STREAMS[name]
    rng = random.Random(name)
    for _ in range(20):
        chunks = cuts(data, rng)
        fast = RelayedStream(dialect="chat", model="m", started=0.0)
        for i, chunk in enumerate(chunks):
            fast.upstream(chunk, 1.0 + i)
        fast.upstream_ended(Ending.COMPLETE, 99.0)
        with monkeypatch.context() as m:
            m.setattr(ChatAccumulator, "feed_shaped", lambda self, events, start=0: start)
            slow = RelayedStream(dialect="chat", model="m", started=0.0)
            for i, chunk in enumerate(chunks):
                slow.upstream(chunk, 1.0 + i)
            slow.upstream_ended(Ending.COMPLETE, 99.0)
        assert _state(fast) == _state(slow)


def test_a_fast_streams_text_chunks_go_in_one_call_each_burst() -> None:
    """The point of it: a burst of text chunks of one shape costs one call, not one per chunk."""
    from streamlab.core.accumulate import ChatAccumulator

    calls = {"feed": 0}
    acc = ChatAccumulator()
    feed = acc.feed

    def counted(event: object) -> None:
        calls["feed"] += 1
        feed(event)  # type: ignore[arg-type]

    rs = RelayedStream(dialect="chat", model="m", started=0.0)
    rs.accumulator = acc
    acc.feed = counted  # type: ignore[method-assign]
    rs.upstream(SHAPED_STREAMS["plain"], 1.0)
    assert acc.chunks == 63 and rs.text_chars == sum(len(f"w{i} ") for i in range(60))
    assert calls["feed"] < 10  # the role chunk, the first text chunk (it teaches the shape), the finish, usage


# -- the stream loop runs in a task of its own (streamlab.net.relay.wire.ExchangeWire.__call__) --


class _Resumes:
    """An ASGI app around another that counts how often its coroutine is resumed: each resume of the request's
    task passes through every frame above the app (uvicorn, the middleware, the router)."""

    def __init__(self, app: Any) -> None:
        self.app, self.count = app, 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await _Counted(self.app(scope, receive, send), self)


class _Counted:
    def __init__(self, coro: Any, into: _Resumes) -> None:
        self.coro, self.into = coro, into

    def __await__(self) -> Any:
        gen = self.coro.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = gen.throw(error) if error is not None else gen.send(value)
            except StopIteration as stop:
                return stop.value
            self.into.count += 1
            try:
                value, error = (yield step), None
            except BaseException as exc:  # (thrown in by the loop: passed on to the app)
                value, error = None, exc


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_a_streams_chunks_do_not_wake_the_requests_whole_asgi_chain(kind: str, no_leaked_threads: Any) -> None:
    """The wire's loop wakes at least once per upstream chunk. Run in the request's own task, each wake-up had
    resumed the whole ASGI chain above it as well: 66 resumes for a 60-chunk stream. In a task of its own, the
    request's task is resumed twice for the whole stream."""
    import httpx

    from streamlab.core.standin.script import Episode, paced
    from streamlab.net.gateway.app import GatewayConfig, build_gateway_app
    from streamlab.net.relay.app import RelayConfig, build_app
    from streamlab.net.relay.serving import AppServer
    from streamlab.net.standin.server import StandIn

    frames = shapes.chat_text_stream([f"w{i} " for i in range(58)], model="m")  # 60 frames with the role and end
    with StandIn({"m": Episode(paced(frames, gap=0.002))}, usage="scripted") as upstream:
        if kind == "relay":
            app: Any = build_app(RelayConfig(upstream.base_url, keepalive=None))
        else:
            app = build_gateway_app(GatewayConfig((upstream.base_url,), keepalive=None))
        counted = _Resumes(app)
        with AppServer(counted, name=kind) as server, httpx.Client(timeout=10, trust_env=False) as client:
            ask = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
            reply = client.post(f"{server.url}/v1/chat/completions", json=ask)
    assert reply.status_code == 200 and reply.content == b"".join(frames)
    assert counted.count < 10, f"the request's ASGI chain was resumed {counted.count} times for 60 chunks"


def test_a_cancelled_request_waits_for_its_streams_clean_up(no_leaked_threads: Any) -> None:
    """Cancelling the request's task (a server shutting down hard) cancels the task the wire's loop runs in and
    waits for its clean-up: once the request's task has finished, the upstream response is closed, the stream's
    summary says it was stopped (not a final event it never sent), and no task of the stream is left."""
    from streamlab.core.standin.script import Episode, paced
    from streamlab.net.relay.app import RelayConfig, build_app
    from streamlab.net.standin.server import StandIn

    frames = shapes.chat_text_stream([f"w{i} " for i in range(200)], model="m")
    summaries: list[dict[str, Any]] = []

    async def run(base_url: str) -> tuple[int, list[asyncio.Task[Any]]]:
        app = build_app(RelayConfig(base_url, keepalive=None, on_summary=summaries.append))
        relay = app.state.relay
        async with relay.lifespan(app):
            body = b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
            scope = {
                "type": "http",
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": "POST",
                "scheme": "http",
                "path": "/v1/chat/completions",
                "raw_path": b"/v1/chat/completions",
                "root_path": "",
                "query_string": b"",
                "headers": [(b"content-type", b"application/json"), (b"host", b"relay")],
                "client": ("127.0.0.1", 1),
                "server": ("127.0.0.1", 2),
            }
            parts = [{"type": "http.request", "body": body, "more_body": False}]
            forever = asyncio.get_running_loop().create_future()

            async def receive() -> dict[str, Any]:
                return parts.pop(0) if parts else await forever  # the client never leaves

            writes: list[dict[str, Any]] = []
            enough = asyncio.Event()

            async def send(message: dict[str, Any]) -> None:
                writes.append(message)
                if sum(m["type"] == "http.response.body" for m in writes) >= 3:
                    enough.set()

            request = asyncio.ensure_future(app(scope, receive, send))
            await asyncio.wait_for(enough.wait(), 10)
            request.cancel()
            with pytest.raises(asyncio.CancelledError):
                await request
            left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            forever.cancel()
            return sum(m["type"] == "http.response.body" for m in writes), left

    with StandIn({"m": Episode(paced(frames, gap=0.02))}, usage="scripted") as upstream:
        sent, left = asyncio.run(run(upstream.base_url))
        upstream.wait_until(lambda records: [r.ending for r in records] == ["client_gone"], 5)
        gone = [r.ending for r in upstream.records("m")]
    assert sent >= 3 and left == [], f"{len(left)} task(s) of the stream outlived its request: {left}"
    (summary,) = summaries
    assert (summary["ending"], summary["marked"]) == ("stopped", False)
    assert summary["detail"] == "the relay task was cancelled"
    assert gone == ["client_gone"], f"the upstream saw {gone}"
