"""Client memory benchmark: peak memory while streaming 200,000 Chat Completions events (~46 MB) on loopback.

Three readers of the same bytes, served by the stand-in (`streamlab.net.standin.server.StandIn`) in its own
process, each reader in a fresh process of its own so that one's heap cannot flatter or burden another:

* `streamlab keep=all`  - `stream_chat(...)`, the default: every byte and every event is kept
                           (`stream.raw`, `stream.events`), as the labs need;
* `streamlab keep=none` - `stream_chat(..., keep="none")`: only counts and times are kept;
* `openai SDK`          - the official SDK, `client.chat.completions.create(..., stream=True)`.

Each reader iterates the whole stream and drops every event. The figure that matters is the growth of the
resident set (peak RSS minus RSS before the request, from `getrusage` and /proc): the memory the stream
itself cost. Ratios are against the SDK measured in the same run. `--tracemalloc` adds the peak of the
Python heap as tracemalloc sees it (much slower: about 15 us per allocation on a 2-core VM).

    .venv/bin/python benchmarks/bench_client_memory.py
    .venv/bin/python benchmarks/bench_client_memory.py --events 20000 --tracemalloc

Not a test: memory figures depend on the allocator and the machine; tests/library/test_client.py holds the
measured (tracemalloc) regression test that keep="none" stays flat as the stream grows.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc

MODEL = "gpt-4o-mini-2024-07-18"  # a realistic model name: a realistic chunk size (~230 bytes)
CONTENDERS = ("streamlab keep=all", "streamlab keep=none", "openai SDK")
MESSAGES = [{"role": "user", "content": "Count."}]


# -- the server process -----------------------------------------------------------------------------------


def serve(n_events: int) -> None:
    """Serve the stream in 64 KiB HTTP chunks until stdin closes; print the base URL and the body size first."""
    from streamlab.core import shapes
    from streamlab.core.standin.script import Episode, Send
    from streamlab.net.standin.server import StandIn

    frames = shapes.chat_text_stream([f"tok{i} " for i in range(n_events)], model=MODEL)
    body = b"".join(frames)
    sends = [Send(body[i : i + 65536]) for i in range(0, len(body), 65536)]
    with StandIn({MODEL: Episode(sends)}) as server:
        print(json.dumps({"base_url": server.base_url, "bytes": len(body), "frames": len(frames)}), flush=True)
        sys.stdin.read()


# -- the measuring processes ------------------------------------------------------------------------------


def _rss_kib() -> int:
    """The current resident set in KiB (Linux /proc; elsewhere the peak so far, a conservative baseline)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _read_streamlab(base_url: str, keep: str) -> int:
    from streamlab.net.client import stream_chat

    count = 0
    body = {"model": MODEL, "messages": MESSAGES, "stream_options": {"include_usage": True}}
    with stream_chat(base_url, body, keep=keep, read_timeout=60) as stream:  # type: ignore[arg-type]
        for _ in stream:
            count += 1
    assert stream.end_reason == "complete", stream.end_reason
    return count


def _read_openai(base_url: str) -> int:
    import httpx
    import openai

    count = 0
    with httpx.Client(trust_env=False, timeout=60) as http:
        client = openai.OpenAI(base_url=base_url, api_key="not-needed", http_client=http, max_retries=0)
        for _chunk in client.chat.completions.create(
            model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        ):
            count += 1
    return count


def measure(name: str, base_url: str, trace: bool) -> None:
    """Run one contender in this (fresh) process and print its figures as one JSON line."""
    import httpx  # noqa: F401  (imported before the baseline, as every contender needs it)
    import openai  # noqa: F401

    import streamlab.net.client  # noqa: F401

    before = _rss_kib()
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    if name == "openai SDK":
        count = _read_openai(base_url)
    else:
        count = _read_streamlab(base_url, name.split("=")[1])
    seconds = time.perf_counter() - started
    heap = tracemalloc.get_traced_memory()[1] if trace else None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "name": name,
                "count": count,
                "seconds": seconds,
                "rss_before_kib": before,
                "rss_peak_kib": peak,
                "heap_peak": heap,
            }
        ),
        flush=True,
    )


# -- the driver -------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="text deltas in the stream (200,000)")
    parser.add_argument("--tracemalloc", action="store_true", help="also report the Python heap's peak (slow)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--contender", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.events)
        return 0
    if args.contender:
        measure(args.contender, args.url, args.tracemalloc)
        return 0

    me = [sys.executable, os.path.abspath(__file__)]
    server = subprocess.Popen(
        me + ["--serve", "--events", str(args.events)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        info = json.loads(server.stdout.readline())
        print(
            f"stream: {info['frames']:,} events ({args.events:,} text deltas), {info['bytes'] / 1e6:.1f} MB, "
            f"served by the stand-in in another process; each reader in a fresh process"
        )
        rows = []
        for name in CONTENDERS:
            extra = ["--tracemalloc"] if args.tracemalloc else []
            out = subprocess.run(
                me + ["--contender", name, "--url", info["base_url"]] + extra,
                capture_output=True,
                text=True,
                check=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(30)
    sdk = next(r for r in rows if r["name"] == "openai SDK")
    sdk_growth = max(1, sdk["rss_peak_kib"] - sdk["rss_before_kib"])
    print(
        f"{'reader':<22}{'events':>9}{'peak RSS':>11}{'vs SDK':>8}{'growth':>11}{'vs SDK':>8}{'seconds':>9}"
        + (f"{'heap peak':>12}" if args.tracemalloc else "")
    )
    for r in rows:
        growth = r["rss_peak_kib"] - r["rss_before_kib"]
        line = (
            f"{r['name']:<22}{r['count']:>9,}{r['rss_peak_kib'] / 1024:>7.1f} MiB"
            f"{r['rss_peak_kib'] / sdk['rss_peak_kib']:>7.2f}x{growth / 1024:>7.1f} MiB"
            f"{growth / sdk_growth:>7.2f}x{r['seconds']:>9.2f}"
        )
        if args.tracemalloc:
            line += f"{r['heap_peak'] / 2**20:>8.1f} MiB"
        print(line)
    print(
        "peak RSS: the whole process (interpreter, httpx, openai and streamlab imported in each); growth: peak\n"
        "RSS minus RSS just before the request, i.e. what the stream itself cost; vs SDK: the same column's\n"
        "ratio to the openai SDK in this run. seconds: wall time, for information only (the machine is shared)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
