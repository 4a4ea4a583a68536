"""Burst benchmark: 100 streaming requests in the same instant, the stand-in against uvicorn + Starlette.

Issue 23 item 4: when a room's 100 learners press "run" in the same millisecond, every stream's first token
is due at the same instant, and a server that makes one stream's first write wait behind the others' work
shows it as TTFT error. This benchmark serves the one script (`scenario("ttft")`: first token 0.30 s after
the request, then one every 0.05 s, 20 tokens) from two servers on the same machine in the same run:

* the stand-in (`StandIn`, a thread per connection, its records and room state as a room runs it);
* the same steps as a Starlette app under uvicorn with its default options (h11, asyncio; access log off,
  since the stand-in never logs): an async generator that sleeps and yields, the way such a server is written.

Each server runs alone in a child process and the clients (`bench_room`'s: one asyncio task each on plain
sockets, timestamping every chunk as it arrives) in another. Warm: the connections are open before the burst
and the 100 requests leave at the same instant; cold: each client also connects at that instant
(so the accept loop, the listen backlog and thread start-up are part of the burst). Rounds alternate the
servers (stand-in first in odd rounds), each with a fresh process. TTFT error is the first content chunk's
arrival, measured from the client sending its request (cold: starting to connect), minus 0.30 s.

    python3 dev.py bench burst                    # cold, then warm: 3 rounds of each server, 100 clients
    python3 dev.py bench burst --rounds 5 --mode cold

For each way of arriving it prints each round's TTFT error p50/p95 and, over all rounds, each server's p50/p95
and the ratio of the stand-in's to uvicorn's; it exits 1 if a stream failed or the stand-in's pooled p95 is
worse than uvicorn's (issue 23's bar: "no worse than uvicorn + Starlette's in the same run"). Timings depend on
the machine and on what else runs on it: the load average is printed with each round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import threading
from typing import Any

import bench_room
from bench_room import TEXT, TOKENS, TTFT, percentile, run_round, serve_room

from streamlab.core.standin.scenarios import scenario
from streamlab.core.standin.script import Send, Wait


def serve_starlette(n: int, conn: Any) -> None:
    """Child process: the ttft scenario's steps as a Starlette streaming endpoint under uvicorn."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    steps = scenario("ttft")["scheduled"][0].steps

    async def play() -> Any:
        for step in steps:
            if isinstance(step, Wait):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, Send):
                yield step.data

    async def chat(request: Request) -> StreamingResponse:
        await request.json()  # read and parse the body, as any endpoint must
        return StreamingResponse(play(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))

    def stop_on_request() -> None:
        conn.send((sock.getsockname()[1], os.getpid()))
        conn.recv()  # "stop"
        conn.send([])  # no server-side records
        server.should_exit = True

    threading.Thread(target=stop_on_request, daemon=True).start()
    server.run(sockets=[sock])


SERVERS = {"stand-in": serve_room, "uvicorn+Starlette": serve_starlette}


def ttft_errors(rnd: bench_room.Round) -> tuple[list[float], int]:
    """Each whole stream's TTFT error (seconds), and how many streams were not whole and in order."""
    errors, failed = [], 0
    for _, sent, times, text, ending, _ in rnd.streams:
        if ending == "complete" and text == TEXT and len(times) == TOKENS:
            errors.append(times[0] - sent - TTFT)
        else:
            failed += 1
    return errors, failed


def p(values: list[float], q: float) -> float:
    return 1000 * percentile(values, q) if values else float("nan")


def run_mode(clients: int, rounds: int, cold: bool, dashboard: bool) -> tuple[float, int]:
    """Alternating rounds of both servers, one way of arriving; print the figures. The p95 ratio and the number
    of streams that failed."""
    how = "each on a new connection made at that instant" if cold else "on connections opened before"
    print(f"\n{clients} requests in the same instant, {how}")
    pooled: dict[str, list[float]] = {name: [] for name in SERVERS}
    failures = 0
    for number in range(1, rounds + 1):
        order = list(SERVERS) if number % 2 else list(reversed(SERVERS))
        for name in order:
            rnd = run_round(clients, 0.0, dashboard and name == "stand-in", serve=SERVERS[name], cold=cold)
            errors, failed = ttft_errors(rnd)
            pooled[name] += errors
            failures += failed
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(
                f"  round {number} {name:18} TTFT error p50 {p(errors, 50):6.1f}  p95 {p(errors, 95):6.1f}  "
                f"max {1000 * max(errors, default=float('nan')):6.1f} ms  "
                f"{len(errors)}/{len(rnd.streams)} whole; load {load}"
            )
    print(f"  all {rounds} rounds                        p50       p95")
    for name, errors in pooled.items():
        print(f"    {name:30} {p(errors, 50):6.1f} ms {p(errors, 95):6.1f} ms")
    ours, theirs = pooled["stand-in"], pooled["uvicorn+Starlette"]
    ratio95 = p(ours, 95) / p(theirs, 95)
    print(f"    stand-in / uvicorn+Starlette   {p(ours, 50) / p(theirs, 50):6.2f}x   {ratio95:6.2f}x")
    return ratio95, failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3, help="rounds per server, alternating (a fresh process each)")
    ap.add_argument(
        "--mode",
        choices=("cold", "warm", "both"),
        default="both",
        help="cold: each client connects at the instant of the burst; warm: connections opened before (both: each)",
    )
    ap.add_argument("--dashboard", action="store_true", help="keep the stand-in's dashboard feed open (a room's)")
    args = ap.parse_args(argv)
    print(
        f"TTFT error of the ttft scenario (first token at {1000 * TTFT:.0f} ms) under a same-instant burst; "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    modes = {"cold": [True], "warm": [False], "both": [True, False]}[args.mode]
    ok = True
    for cold in modes:
        ratio95, failures = run_mode(args.clients, args.rounds, cold, args.dashboard)
        good = failures == 0 and ratio95 <= 1.0
        ok &= good
        print(
            f"  {'PASS' if good else 'FAIL'}  ({'cold' if cold else 'warm'}) stand-in p95 TTFT error no worse than "
            f"uvicorn+Starlette's: {ratio95:.2f}x; streams not whole: {failures}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
