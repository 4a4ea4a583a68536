"""Relay and gateway against a plain pass-through under the same uvicorn: throughput and the TTFT each adds.

Four paths to the same scripted stand-in (its own process), each server in a process of its own, measured in
the same run, interleaved, and printed as ratios:

* direct:       the client talks to the stand-in;
* pass-through: a minimal Starlette + httpx app under the same uvicorn settings as the relay (`AppServer`):
                it forwards the raw bytes and does nothing else. This is the floor a relay is judged against;
* relay:        `streamlab relay --upstream URL` (parses every event for its summary, watches the client,
                keeps the upstream's silence, writes one JSON summary line per stream);
* gateway:      `streamlab relay --upstream a=URL --upstream b=URL` (the same, plus a breaker and fallback).

The client only reads bytes (`iter_raw`, or `aiter_raw` for the concurrent runs): a client that parsed every
event would cap the direct path and hide the servers' own cost. Workloads:

Throughput is the median of `--repeat` interleaved rounds (every path once in each round, the order rotated from
round to round, so that no path always follows the same one).

* one frame per write: N chunk frames, each its own write (the shape of a model's stream); events per second;
* 64 KiB writes: the same bytes in large writes; MB/s;
* 100 streams at once: 100 concurrent one-frame-per-write streams; events per second over all of them;
* TTFT: the first token is scripted 0.2 s after the request; the time to the first content bytes, each path's
  p50, and what each adds over direct (p50 of the pairwise differences).

First, in this process and without sockets, what the relay's summary of the 64 KiB-write stream costs beside the
SSE parser alone and beside feeding every event one by one (`summary_cost`).

    .venv/bin/python benchmarks/bench_relay.py            # 10,000 frames, 100 x 400 frames, 30 TTFT rounds
    .venv/bin/python benchmarks/bench_relay.py --quick    # 3,000 frames, 100 x 100 frames, 10 rounds

Not a test: it exits 1 only if a relayed body differs from the direct one (keep-alives are off, so the bytes
must be identical).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx

from streamlab.core import shapes
from streamlab.core.standin.script import Episode, Send, Wait
from streamlab.net.standin.server import StandIn

TTFT = 0.2
BIG_WRITE = 64 * 1024
FIRST_CONTENT = b'"content":"w'


def script(frames: int, each: int) -> dict[str, Episode]:
    short = shapes.chat_text_stream([f"w{i} " for i in range(20)], model="ttft")
    many = shapes.chat_text_stream([f"f{i % 1000:03d} " for i in range(frames)], model="frames")
    blob = b"".join(many)
    small = shapes.chat_text_stream([f"c{i % 1000:03d} " for i in range(each)], model="concurrent")
    return {
        "ttft": Episode([Send(short[0]), Wait(TTFT)] + [Send(f) for f in short[1:]]),
        "frames": Episode([Send(f) for f in many]),
        "bulk": Episode([Send(blob[i : i + BIG_WRITE]) for i in range(0, len(blob), BIG_WRITE)]),
        "concurrent": Episode([Send(f) for f in small]),
    }


def _serve_standin(frames: int, each: int, conn: Any) -> None:
    with StandIn(script(frames, each), max_records=16, usage="scripted", max_connections=512) as server:
        conn.send(server.port)
        conn.recv()


def _serve_passthrough(upstream: str, conn: Any) -> None:
    """The pass-through contender: the least a Starlette + httpx relay can do (same uvicorn set-up as ours)."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from streamlab.net.relay.serving import AppServer

    state: dict[str, httpx.AsyncClient] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):  # type: ignore[no-untyped-def]
        state["client"] = httpx.AsyncClient(
            timeout=None, trust_env=False, limits=httpx.Limits(max_connections=None, max_keepalive_connections=200)
        )
        yield
        await state["client"].aclose()

    async def handle(request: Request) -> StreamingResponse:
        client = state["client"]
        up = client.build_request(
            "POST",
            upstream + "/chat/completions",
            content=await request.body(),
            headers={"content-type": "application/json", "accept-encoding": "identity"},
        )
        response = await client.send(up, stream=True)
        return StreamingResponse(
            response.aiter_raw(),
            status_code=response.status_code,
            media_type=response.headers.get("content-type"),
            background=BackgroundTask(response.aclose),
        )

    app = Starlette(routes=[Route("/v1/chat/completions", handle, methods=["POST"])], lifespan=lifespan)
    with AppServer(app, name="passthrough") as server:
        conn.send(server.port)
        conn.recv()


@contextmanager
def child(target: Any, *args: Any) -> Iterator[str]:
    parent, end = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(target=target, args=(*args, end))
    proc.start()
    try:
        yield f"http://127.0.0.1:{parent.recv()}/v1"
    finally:
        parent.send("stop")
        proc.join(20)


@contextmanager
def cli(*upstreams: str) -> Iterator[str]:
    args = [a for u in upstreams for a in ("--upstream", u)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlab", "relay", *args, "--port", "0", "--keepalive", "0", "--read-timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    drain = subprocess.Popen(["cat"], stdin=proc.stdout, stdout=subprocess.DEVNULL)  # summaries never block it
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        drain.wait(10)
        proc.stdout.close()


BODY = {"stream": True, "messages": [{"role": "user", "content": "hi"}]}


def read(client: httpx.Client, base_url: str, model: str) -> tuple[float | None, float, bytes]:
    """One stream read as bytes: seconds to the first content bytes, total seconds, the body."""
    first, body = None, bytearray()
    t0 = time.perf_counter()
    with client.stream("POST", f"{base_url}/chat/completions", json={**BODY, "model": model}) as r:
        for chunk in r.iter_raw():
            body += chunk
            if first is None and FIRST_CONTENT in chunk:
                first = time.perf_counter() - t0
    return first, time.perf_counter() - t0, bytes(body)


async def concurrent(base_url: str, streams: int) -> tuple[float, int]:
    """`streams` one-frame-per-write streams at once: seconds for all of them, and their total bytes."""
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    async with httpx.AsyncClient(timeout=120, trust_env=False, limits=limits) as client:

        async def one() -> int:
            n = 0
            async with client.stream("POST", f"{base_url}/chat/completions", json={**BODY, "model": "concurrent"}) as r:
                async for chunk in r.aiter_raw():
                    n += len(chunk)
            return n

        t0 = time.perf_counter()
        sizes = await asyncio.gather(*(one() for _ in range(streams)))
        return time.perf_counter() - t0, sum(sizes)


def measure(paths: dict[str, str], args: argparse.Namespace) -> bool:
    bad = False
    frames_events = args.frames + 3  # role chunk, the content chunks, the finish chunk, [DONE]
    with httpx.Client(timeout=120, trust_env=False) as client:
        for url in paths.values():
            read(client, url, "ttft")  # warm up: connections, imports, caches
        ttft: dict[str, list[float]] = {p: [] for p in paths}
        for _ in range(args.rounds):
            for path, url in paths.items():
                first = read(client, url, "ttft")[0]
                assert first is not None
                ttft[path].append(first)
        rates: dict[str, dict[str, float]] = {p: {} for p in paths}
        bodies: dict[str, bytes] = {}
        order = list(paths.items())
        for model in ("frames", "bulk"):
            times: dict[str, list[float]] = {p: [] for p in paths}
            for i in range(args.repeat):  # interleaved: every path in each round, which goes first in turn
                k = i % len(order)
                for path, url in order[k:] + order[:k]:
                    time.sleep(args.settle)  # the server before finishes what it does after a stream (a summary)
                    _, seconds, body = read(client, url, model)
                    times[path].append(seconds)
                    if model == "frames":
                        bodies.setdefault(path, body)
            bad |= any(body != bodies["direct"] for body in bodies.values())
            for path in paths:
                size, seconds = len(bodies["direct"]), statistics.median(times[path])
                rates[path][model] = frames_events / seconds if model == "frames" else size / 1e6 / seconds
    each_events = args.each + 3
    for path in paths:
        rates[path]["concurrent"] = 0.0
    concurrent_times: dict[str, list[float]] = {p: [] for p in paths}
    for _ in range(args.repeat):
        for path, url in paths.items():
            concurrent_times[path].append(asyncio.run(concurrent(url, args.streams))[0])
    for path in paths:
        rates[path]["concurrent"] = args.streams * each_events / statistics.median(concurrent_times[path])
    report(paths, rates, ttft, args)
    if bad:
        print("a relayed body differs from the direct one")
    return bad


def summary_cost(frames: int, repeat: int = 20) -> None:
    """The summary's own cost for the 64 KiB-write stream, in this process (no sockets): the SSE parser alone (the
    floor), `RelayedStream` as the relay runs it, and the same with every event fed one by one (runs of text chunks
    of the learned shape no longer in one call: `ChatAccumulator.feed_shaped` switched off); then `RelayedStream`
    on the same bytes in one write per frame, so a cost per byte that grows with the write size shows. Best of
    `repeat`."""
    from streamlab.core.accumulate import ChatAccumulator
    from streamlab.core.endings import Ending
    from streamlab.core.relay.stream import RelayedStream
    from streamlab.core.sse import SSEParser

    episodes = script(frames, 1)
    chunks = [step.data for step in episodes["bulk"].steps if isinstance(step, Send)]
    frame_chunks = [step.data for step in episodes["frames"].steps if isinstance(step, Send)]

    def parser_alone() -> None:
        parser = SSEParser()
        for chunk in chunks:
            parser.feed(chunk)

    def relayed(writes: list[bytes] = chunks) -> None:
        rs = RelayedStream(dialect="chat", started=0.0)
        for chunk in writes:
            rs.forward(chunk, 1.0)
            rs.follow()
        rs.upstream_ended(Ending.COMPLETE, 2.0)

    def best(fn: Any) -> float:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    floor, fast = best(parser_alone), best(relayed)
    small = best(lambda: relayed(frame_chunks))  # the same bytes, one frame per write
    shaped = ChatAccumulator.feed_shaped
    ChatAccumulator.feed_shaped = lambda self, events, start=0: start  # type: ignore[method-assign]
    try:
        slow = best(relayed)
    finally:
        ChatAccumulator.feed_shaped = shaped  # type: ignore[method-assign]
    size = sum(map(len, chunks)) / 1e6
    print(f"the summary of the 64 KiB-write stream ({size:.1f} MB, {frames:,} events), in-process, best of {repeat}:")
    print(f"  SSE parser alone               {1000 * floor:6.2f} ms   1.00x")
    print(f"  RelayedStream (as the relay)   {1000 * fast:6.2f} ms   {fast / floor:.2f}x")
    print(f"  RelayedStream, one by one      {1000 * slow:6.2f} ms   {slow / floor:.2f}x")
    per_frame = f"{1000 * small:.2f} ms (64 KiB writes: {fast / small:.2f}x that)"
    print(f"  the same bytes, one frame per write, as the relay: {per_frame}")


def report(
    paths: dict[str, str], rates: dict[str, dict[str, float]], ttft: dict[str, list[float]], args: argparse.Namespace
) -> None:
    rows = (
        ("frames", f"{args.frames:,} frames, one write each", "events/s"),
        ("bulk", "the same bytes, 64 KiB writes", "MB/s"),
        ("concurrent", f"{args.streams} streams x {args.each} frames", "events/s"),
    )
    print(f"{'workload':<34}" + "".join(f"{p:>14}" for p in paths) + f"{'relay/pass':>12}{'gateway/pass':>14}")
    for key, label, unit in rows:
        cells = "".join(f"{rates[p][key]:>14,.1f}" for p in paths)
        floor = rates["pass-through"][key]
        print(
            f"{label + ' (' + unit + ')':<34}{cells}{rates['relay'][key] / floor:>11.2f}x"
            f"{rates['gateway'][key] / floor:>13.2f}x"
        )
    print(
        f"TTFT (first token scheduled at {1000 * TTFT:.0f} ms), {args.rounds} rounds; p50 and the p50 of what each "
        "path adds over direct:"
    )
    for path in paths:
        added = [t - d for t, d in zip(ttft[path], ttft["direct"])]
        print(
            f"  {path:<14} p50 {1000 * statistics.median(ttft[path]):7.1f} ms   added "
            f"{1000 * statistics.median(added):6.2f} ms"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=10_000, help="frames of the one-write-per-frame stream")
    ap.add_argument("--streams", type=int, default=100, help="concurrent streams (default 100)")
    ap.add_argument("--each", type=int, default=400, help="frames in each concurrent stream (default 400)")
    ap.add_argument("--rounds", type=int, default=30, help="TTFT requests on each path (default 30)")
    ap.add_argument(
        "--repeat",
        type=int,
        default=21,
        help="throughput rounds on each path, interleaved; the median counts (default 21: with 7 a 64 KiB-write "
        "ratio moved between 0.72x and 1.10x from run to run on a quiet machine, with 21 between 0.87x and 0.93x)",
    )
    ap.add_argument(
        "--settle",
        type=float,
        default=0.05,
        help="seconds between two paths' streams (default 0.05): the relay and the gateway write a stream's summary "
        "after its body has ended, and without a pause that work landed on the next path's measurement",
    )
    ap.add_argument("--quick", action="store_true", help="3,000 frames, 100 x 100 frames, 10 TTFT rounds")
    args = ap.parse_args(argv)
    if args.quick:
        args.frames, args.each, args.rounds = 3_000, 100, 10
    print(
        "relay and gateway against a plain pass-through: each server in its own process, the stand-in in "
        "another, a bytes-only client here"
    )
    summary_cost(args.frames)
    with ExitStack() as stack:
        upstream = stack.enter_context(child(_serve_standin, args.frames, args.each))
        paths = {
            "direct": upstream,
            "pass-through": stack.enter_context(child(_serve_passthrough, upstream)),
            "relay": stack.enter_context(cli(upstream)),
            "gateway": stack.enter_context(cli(f"a={upstream}", f"b={upstream}")),
        }
        return 1 if measure(paths, args) else 0


if __name__ == "__main__":
    sys.exit(main())
