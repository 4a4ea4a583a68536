"""Relay overhead: the time to first token the reference relay adds, and throughput through it against direct.

The stand-in serves from a child process and the relay runs as `streamlab relay` in another (as in production:
no shared GIL); the client here reads the same scripted streams directly from the stand-in and through the relay,
alternating request by request, so both sides are measured in the same run and compared as ratios.

    .venv/bin/python benchmarks/bench_relay.py                 # 30 TTFT pairs; 4 MB bulk and 20,000 frames, best of 3
    .venv/bin/python benchmarks/bench_relay.py --quick         # 10 pairs; 1 MB and 5,000 frames
    .venv/bin/python benchmarks/bench_relay.py --bulk-mb 24    # a very long answer (see below)
    .venv/bin/python benchmarks/bench_relay.py --relay-thread  # the relay on a thread of this process instead

What is measured:

* TTFT: the first token is scripted 0.2 s after the request; the time from sending the request to holding the
  first content event (streamlab's parser over the raw bytes as they arrive). Medians and p90 of direct,
  relayed, and the difference of each pair.
* Bulk throughput: a Chat Completions stream of about 4 MB (some 20,000 content chunks, a very long answer)
  written in 64 KiB writes; MB/s. The relay's cost is per event: its summary decodes every event's JSON and
  feeds the accumulator, like the SDK does on the client. On much longer answers it falls further, because
  `ChatAccumulator` builds the text by concatenation, which copies the text so far for every delta.
* Frame throughput: 20,000 frames, each written on its own (the shape of a real model stream, one write per
  token); events per second.

Not a test: it exits 1 only if a relayed stream differs from the direct one (keep-alives are off, so the bytes
must be identical) or its summary line does not say "complete".
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from streamlab.core import shapes
from streamlab.core.sse import SSEParser
from streamlab.core.standin.script import Episode, Send, Wait
from streamlab.net.relay.app import Relay
from streamlab.net.standin.server import StandIn

TTFT = 0.2
BULK_WRITE = 64 * 1024


def script(bulk_mb: float, frames: int) -> dict[str, Episode]:
    """The three streams: a short answer whose first token comes after TTFT, a bulk one in 64 KiB writes, and
    one frame per write."""
    short = shapes.chat_text_stream([f"w{i} " for i in range(20)], model="ttft")
    tokens = int(bulk_mb * 1_000_000 / 185)  # a content chunk frame is about 185 bytes
    blob = b"".join(shapes.chat_text_stream([f"t{i % 1000:03d} " for i in range(tokens)], model="bulk"))
    many = shapes.chat_text_stream([f"f{i % 1000:03d} " for i in range(frames)], model="frames")
    return {
        "ttft": Episode([Send(short[0]), Wait(TTFT)] + [Send(f) for f in short[1:]]),
        "bulk": Episode([Send(blob[i:i + BULK_WRITE]) for i in range(0, len(blob), BULK_WRITE)]),
        "frames": Episode([Send(f) for f in many]),
    }


def serve_in_child(bulk_mb: float, frames: int, conn) -> None:
    with StandIn(script(bulk_mb, frames), max_records=16, usage="scripted") as server:
        conn.send(server.port)
        conn.recv()


@contextmanager
def standin_process(bulk_mb: float, frames: int) -> Iterator[str]:
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("fork").Process(target=serve_in_child, args=(bulk_mb, frames, child))
    proc.start()
    try:
        yield f"http://127.0.0.1:{parent.recv()}/v1"
    finally:
        parent.send("stop")
        proc.join()


@contextmanager
def relay_process(upstream: str, summaries: list[dict]) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "streamlab", "relay", "--upstream", upstream, "--port", "0",
                             "--keepalive", "0", "--read-timeout", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()

    def drain() -> None:
        for line in proc.stdout:
            summaries.append(json.loads(line))

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        reader.join(5)
        proc.stdout.close()


@contextmanager
def relay_thread(upstream: str, summaries: list[dict]) -> Iterator[str]:
    with Relay(upstream, keepalive=None, read_timeout=60, on_summary=summaries.append) as relay:
        yield relay.base_url


def read(client: httpx.Client, base_url: str, model: str) -> tuple[float | None, float, bytes, int]:
    """One streaming request: seconds to the first content event, total seconds, the body, events parsed."""
    parser = SSEParser()
    first, events, body = None, 0, bytearray()
    t0 = time.perf_counter()
    body_json = {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with client.stream("POST", f"{base_url}/chat/completions", json=body_json) as r:
        for chunk in r.iter_raw():
            body += chunk
            got = parser.feed(chunk)
            events += len(got)
            if first is None and any('"content":"w' in e.data for e in got):
                first = time.perf_counter() - t0
    return first, time.perf_counter() - t0, bytes(body), events


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[max(0, round(0.9 * (len(ordered) - 1)))]
    return f"p50 {1000 * statistics.median(values):7.1f} ms  p90 {1000 * p90:7.1f} ms"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=30, help="TTFT requests on each path (default 30)")
    ap.add_argument("--bulk-mb", type=float, default=4.0, help="size of the bulk stream (default 4 MB)")
    ap.add_argument("--frames", type=int, default=20_000, help="frames in the one-write-per-frame stream")
    ap.add_argument("--repeat", type=int, default=3, help="throughput runs on each path; the best counts")
    ap.add_argument("--quick", action="store_true", help="10 pairs, 1 MB, 5,000 frames")
    ap.add_argument("--relay-thread", action="store_true", help="run the relay on a thread of this process")
    args = ap.parse_args(argv)
    if args.quick:
        args.pairs, args.bulk_mb, args.frames = 10, 1.0, 5_000
    summaries: list[dict] = []
    where = "a thread of the client's process" if args.relay_thread else "its own process"
    print(f"relay overhead: the relay in {where}, the stand-in in another process, the client here")
    with standin_process(args.bulk_mb, args.frames) as upstream, \
            (relay_thread if args.relay_thread else relay_process)(upstream, summaries) as relayed, \
            httpx.Client(timeout=120, trust_env=False) as client:
        bad = measure(client, upstream, relayed, args)
        deadline = time.monotonic() + 10
        expected = 1 + args.pairs + 2 * args.repeat  # the relayed streams, the warm-up included
        while len(summaries) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
    wrong = [s for s in summaries if s.get("outcome") != "complete"]
    if wrong or len(summaries) != expected:
        print(f"summary lines: {len(summaries)} for {expected} streams; not complete: {len(wrong)}")
        bad = True
    return 1 if bad else 0


def measure(client: httpx.Client, upstream: str, relayed: str, args: argparse.Namespace) -> bool:
    read(client, upstream, "ttft"), read(client, relayed, "ttft")  # warm up: connections, imports, caches
    direct, through, added = [], [], []
    for _ in range(args.pairs):
        d, r = read(client, upstream, "ttft")[0], read(client, relayed, "ttft")[0]
        direct.append(d)
        through.append(r)
        added.append(r - d)
    print(f"TTFT (first token scheduled at {1000 * TTFT:.0f} ms), {args.pairs} pairs:")
    print(f"  direct    {ms(direct)}")
    print(f"  relayed   {ms(through)}")
    print(f"  added     {ms(added)}")
    print(f"{'throughput':<32}{'direct':>21}{'relayed':>21}{'ratio':>9}")
    bad = False
    for model, unit in (("bulk", "MB/s"), ("frames", "events/s")):
        best = {}
        bodies = {}
        for path, url in (("direct", upstream), ("relayed", relayed)):
            runs = [read(client, url, model) for _ in range(args.repeat)]
            _, seconds, body, events = min(runs, key=lambda run: run[1])
            bodies[path] = body
            best[path] = (len(body) / 1e6 if unit == "MB/s" else events) / seconds
        bad |= bodies["direct"] != bodies["relayed"]
        label = (f"bulk {len(bodies['direct']) / 1e6:.1f} MB, 64 KiB writes" if model == "bulk" else
                 f"{args.frames:,} frames, one write each")
        ratio = best["relayed"] / best["direct"]
        print(f"{label:<32}{best['direct']:>12,.1f} {unit:<8}{best['relayed']:>12,.1f} {unit:<8}{ratio:>8.2f}x")
    if bad:
        print("a relayed stream differs from the direct one")
    return bad


if __name__ == "__main__":
    sys.exit(main())
