"""Load benchmark: many concurrent streaming clients against one stand-in on loopback.

Each client gets its own scripted model with its own schedule (time to first token between 0.20 s and
0.69 s, then one token every 20 ms), so a client that measured somebody else's stream would show it. The
benchmark checks that every stream completes with exactly the scripted text, and compares each client's
measured TTFT (first non-empty content delta, measured from sending the request) with its schedule.

    .venv/bin/python benchmarks/bench_load.py                 # 50 async clients on one event loop
    .venv/bin/python benchmarks/bench_load.py --threads       # 50 sync clients, one thread each
    .venv/bin/python benchmarks/bench_load.py --clients 200 --rounds 3

Not a unit test: timings depend on the machine. It exits 1 if a stream fails or the p95 error exceeds
--tolerance (default 50 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time

import httpx

from streamlab import shapes
from streamlab.client import AsyncEventStream, EventStream, TimedEvent, astream_chat, stream_chat
from streamlab.standin import Episode, Send, StandIn, Wait

TOKENS = 30
GAP = 0.02


def schedule(i: int) -> float:
    """Client i's scheduled time to first token, in seconds."""
    return 0.20 + 0.01 * (i % 50)


def words(i: int) -> list[str]:
    return [f"c{i:03d}w{k:02d} " for k in range(TOKENS)]


def script(n: int) -> dict[str, Episode]:
    out = {}
    for i in range(n):
        frames = shapes.chat_text_stream(words(i), model=f"client{i:03d}")
        # role chunk and first content chunk after the TTFT; then one content chunk per gap; then the rest
        steps = [Wait(schedule(i)), Send(frames[0]), Send(frames[1])]
        for frame in frames[2:TOKENS + 1]:
            steps += [Wait(GAP), Send(frame)]
        steps += [Send(f) for f in frames[TOKENS + 1:]]
        out[f"client{i:03d}"] = Episode(steps)
    return out


def first_content(events: list[TimedEvent]) -> tuple[float | None, str]:
    """Elapsed time of the first non-empty content delta, and the whole text."""
    first, text = None, []
    for ev in events:
        if ev.data == "[DONE]":
            continue
        for choice in ev.json()["choices"]:
            piece = choice["delta"].get("content")
            if piece:
                text.append(piece)
                if first is None:
                    first = ev.elapsed
    return first, "".join(text)


Result = tuple[int, float | None, str, str]  # client, measured TTFT, text, end reason or error


async def run_async(base_url: str, n: int) -> list[Result]:
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as shared:
        async def one(i: int) -> Result:
            stream: AsyncEventStream = astream_chat(base_url, {"model": f"client{i:03d}"}, client=shared,
                                                    read_timeout=10, deadline=30)
            try:
                async with stream:
                    await stream.read_all()
            except Exception as exc:  # noqa: BLE001 - reported per client, not hidden
                return i, None, "", f"{type(exc).__name__}: {exc}"
            first, text = first_content(stream.events)
            return i, first, text, stream.end_reason or "?"

        return list(await asyncio.gather(*(one(i) for i in range(n))))


def run_threads(base_url: str, n: int) -> list[Result]:
    results: list[Result] = []
    lock = threading.Lock()
    start = threading.Barrier(n)

    def one(i: int) -> None:
        stream: EventStream = stream_chat(base_url, {"model": f"client{i:03d}"}, read_timeout=10, deadline=30)
        start.wait()
        try:
            with stream:
                stream.read_all()
            first, text = first_content(stream.events)
            res: Result = (i, first, text, stream.end_reason or "?")
        except Exception as exc:  # noqa: BLE001
            res = (i, None, "", f"{type(exc).__name__}: {exc}")
        with lock:
            results.append(res)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(results)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=1, help="repeat the whole run (fresh server each time)")
    ap.add_argument("--threads", action="store_true", help="sync clients in threads instead of async")
    ap.add_argument("--tolerance", type=float, default=0.050, help="allowed p95 TTFT error in seconds")
    args = ap.parse_args(argv)
    ok = True
    for rnd in range(1, args.rounds + 1):
        with StandIn(script(args.clients)) as server:
            t0 = time.perf_counter()
            if args.threads:
                results = run_threads(server.base_url, args.clients)
            else:
                results = asyncio.run(run_async(server.base_url, args.clients))
            wall = time.perf_counter() - t0
            server.wait_idle()
            records = server.records()
        failed = [(i, why) for i, first, text, why in results
                  if why != "complete" or first is None or text != "".join(words(i))]
        errors = [first - schedule(i) for i, first, _, why in results if first is not None and why == "complete"]
        early = [e for e in errors if e < 0]
        mode = "threads" if args.threads else "async"
        print(f"round {rnd}: {args.clients} {mode} clients, wall {wall:.2f} s, "
              f"completed {len(results) - len(failed)}/{args.clients}, "
              f"server records complete: {sum(r.outcome == 'complete' for r in records)}/{len(records)}")
        if errors:
            ms = [1000 * e for e in errors]
            p95 = percentile(errors, 95)
            print(f"  TTFT error (measured - scheduled): p50 {percentile(ms, 50):.1f} ms, p95 {1000 * p95:.1f} ms, "
                  f"max {max(ms):.1f} ms, mean {statistics.fmean(ms):.1f} ms; before schedule: {len(early)}")
            ok &= p95 <= args.tolerance and not early
        for i, why in failed[:5]:
            print(f"  client {i} failed: {why}")
        ok &= not failed
    print("PASS" if ok else "FAIL", f"(tolerance: p95 TTFT error <= {1000 * args.tolerance:.0f} ms, every stream whole)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
