"""Room benchmark: a room of learners streaming the `ttft` scenario at once, the stand-in beside uvicorn + Starlette.

A workshop room is one stand-in (`streamlab standin --host 0.0.0.0`) and a room of learners who all press
"run" within the same second. This benchmark plays that room on loopback:

* each server runs alone in a child process (its CPU time and memory are its own: psutil reads them from
  outside): the stand-in serving `scenario("ttft")`, and the same steps as a Starlette app under uvicorn
  (`bench_burst.serve_starlette`), so every figure has the usual way of writing such a server beside it;
* directly, and through the reference relay (`streamlab relay --upstream ...`, its own process) in front of
  each server: a room whose learners reach the model through a relay;
* the clients run in another child process, one asyncio task each, on plain sockets: a small HTTP/1.1 and
  chunked-coding reader that timestamps every chunk with `time.perf_counter()` as it arrives, so the
  client adds as little as possible to what is measured (an httpx client per learner would measure httpx);
* every client opens its connection first (and the servers get 0.5 s plus 1.5 ms a client to take them); then all
  send their request at the same instant (`--spread S`
  spreads the sends over S seconds instead) with their own API key, as learners in a room do (`_request`
  builds every request: the one place to change when a room wants a credential);
* the stand-in's dashboard feed (`/dashboard/events`) is open throughout, read by one more task, which
  notes when the room totals first say that every request has finished (`--no-dashboard` leaves it closed).

The scenario schedules the first token 0.30 s after the request and the 19 others 0.05 s apart. For each
client the benchmark reports the TTFT error (first content chunk's arrival, measured from sending the request,
minus 0.30 s) and each inter-token gap error (gap between consecutive content chunks minus 0.05 s), at p50,
p95 and p99 over all clients, plus the server's CPU (seconds of CPU per second of wall time, 1.0 = one core
busy) and resident memory, how the relay's streams ended (its summary lines), and how long after the last
stream ended the dashboard said so. It checks that every stream arrived whole and in order. Rounds alternate
the servers (the stand-in first in odd rounds), each with fresh processes; the table at the end puts each
server's p95 beside the other's, from the same run.

    .venv/bin/python benchmarks/bench_room.py --clients 1000         # issue 34's room: direct and relayed
    .venv/bin/python benchmarks/bench_room.py --rounds 3 --via direct
    .venv/bin/python benchmarks/bench_room.py --servers stand-in,sketch   # a bare asyncio loop instead

`sketch` serves the same scripted steps from a single asyncio event loop (no records, no dashboard, no
limits: a lower bound on the work a server must do).

Goal (issue 34): the stand-in's p95 TTFT error within `--target` ms (100), every stream of every server whole,
directly and through the relay. Exit status 1 when a stream fails or the goal is missed. Timings depend on the
machine and on what else runs on it: the load average is printed with every round, and only figures of the
same run are compared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psutil

from streamlab.core.standin.scenarios import scenario
from streamlab.net.standin.server import StandIn

TTFT = 0.30  # the ttft scenario's schedule (streamlab.core.standin.scenarios): first token after 0.30 s,
GAP = 0.05  # then one every 0.05 s,
TOKENS = 20  # 20 tokens in all
TEXT = "".join(f"w{i:02d} " for i in range(TOKENS))


# --- the server process ------------------------------------------------------------------------------


def serve_room(n: int, conn: Any) -> None:
    """Child process: serve the ttft scenario to n clients; send (port, pid); on "stop", send the records."""
    with StandIn(scenario("ttft"), max_connections=max(256, n + 16), max_records=max(1000, n)) as server:
        conn.send((server.port, os.getpid()))
        conn.recv()
        server.wait_idle(timeout=30)
        conn.send([(r.learner, r.started_at, r.write_times, str(r.ending)) for r in server.records()])


def _sketch_steps() -> tuple[Any, ...]:
    return scenario("ttft")["scheduled"][0].steps


async def _sketch_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    from streamlab.core.standin.script import Send, Wait

    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for step in _sketch_steps():
            if isinstance(step, Wait):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, Send):
                writer.write(b"%x\r\n%s\r\n" % (len(step.data), step.data))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    finally:
        writer.close()


def serve_sketch(n: int, conn: Any) -> None:
    """Child process: the same steps from one asyncio event loop; no records to send back."""

    async def main() -> None:
        server = await asyncio.start_server(_sketch_stream, "127.0.0.1", 0, backlog=max(256, n + 16))
        conn.send((server.sockets[0].getsockname()[1], os.getpid()))
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        conn.send([])
        server.close()

    asyncio.run(main())


def serve_uvicorn(n: int, conn: Any) -> None:
    """Child process: the same steps as a Starlette streaming endpoint under uvicorn (`bench_burst`'s)."""
    from bench_burst import serve_starlette

    serve_starlette(n, conn)


SERVERS = {"stand-in": serve_room, "uvicorn": serve_uvicorn, "sketch": serve_sketch}
"""What `--servers` names: each a child-process target that sends (port, pid), then serves until told to stop."""


class RelayProcess:
    """`streamlab relay` in its own process in front of `upstream`; keeps the summary line of every stream."""

    def __init__(self, upstream: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlab", "relay", "--upstream", upstream, "--port", "0", "--keepalive", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline().strip().rsplit(":", 1)[1].split("/")[0])
        self.summaries: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.summaries.append(json.loads(line))

    def stop(self) -> list[dict[str, Any]]:
        """Stop the relay (as Ctrl-C does) and return its summaries."""
        self.proc.terminate()
        self.proc.wait(20)
        self._reader.join(5)
        return self.summaries


# --- the client process --------------------------------------------------------------------------------


@dataclass
class Stream:
    """What one client saw: when it sent, each content chunk's arrival time, the text, how it ended."""

    client: int
    sent: float = 0.0
    content: list[float] | None = None
    text: str = ""
    ending: str = "?"
    ended: float = 0.0


def _request(port: int, client: int) -> bytes:
    """Client number `client`'s request: the one place that builds it (a room with a join code wants a learner's
    credential here), with the learner's own API key."""
    body = json.dumps(
        {"model": "scheduled", "stream": True, "messages": [{"role": "user", "content": "Count to twenty."}]}
    ).encode()
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer learner-{client:03d}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


class _Reader:
    """Incremental chunked-coding and SSE reader: feed raw bytes with their arrival time."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.raw = bytearray()
        self.head_done = False
        self.payload = bytearray()
        self.finished = False
        stream.content = []

    def feed(self, data: bytes, at: float) -> None:
        self.raw += data
        if not self.head_done:
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return
            if not self.raw.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"client {self.stream.client}: {bytes(self.raw[:200])!r}")
            del self.raw[: end + 4]
            self.head_done = True
        while True:  # chunked coding: size line, data, CRLF
            line_end = self.raw.find(b"\r\n")
            if line_end < 0:
                return
            size = int(self.raw[:line_end], 16)
            if len(self.raw) < line_end + 2 + size + 2:
                return
            self.payload += self.raw[line_end + 2 : line_end + 2 + size]
            del self.raw[: line_end + 2 + size + 2]
            if size == 0:
                self.finished = True
                return
            self._frames(at)

    def _frames(self, at: float) -> None:
        while (end := self.payload.find(b"\n\n")) >= 0:
            frame = bytes(self.payload[:end])
            del self.payload[: end + 2]
            if not frame.startswith(b"data: {"):
                continue
            for choice in json.loads(frame[6:])["choices"]:
                piece = choice["delta"].get("content")
                if piece:
                    self.stream.text += piece
                    self.stream.content.append(at)


async def _one(port: int, client: int, go: asyncio.Event, delay: float, cold: bool = False) -> Stream:
    """One learner: connect (at once, or with `cold` only when the others send too), wait for the signal, send
    the request, read the stream, timestamping each content chunk as it arrives."""
    stream = Stream(client)
    if cold:
        await go.wait()
        stream.sent = time.perf_counter()  # a cold client's wait starts before its connection is made
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        await go.wait()
        if delay:
            await asyncio.sleep(delay)
        request = _request(port, client)
        stream.sent = stream.sent or time.perf_counter()
        writer.write(request)
        parse = _Reader(stream)
        while not parse.finished:
            data = await asyncio.wait_for(reader.read(65536), timeout=30)
            at = time.perf_counter()
            if not data:
                stream.ending = "broken"
                return stream
            parse.feed(data, at)
        stream.ending, stream.ended = "complete", at
    except Exception as exc:  # noqa: BLE001 - reported per client
        stream.ending = f"{type(exc).__name__}: {exc}"
    finally:
        writer.close()
    return stream


async def _dashboard(port: int, n: int, done: asyncio.Event) -> tuple[int, float | None]:
    """Read the dashboard's feed until `done`: how many events came, and when the totals first said that
    all n requests had finished."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /dashboard/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    raw, events, settled = b"", 0, None
    try:
        while not done.is_set():
            try:
                data = await asyncio.wait_for(reader.read(65536), timeout=0.2)
            except asyncio.TimeoutError:
                continue
            if not data:
                break
            at, raw = time.perf_counter(), raw + data
            for line in raw.split(b"\n")[:-1]:  # chunk sizes and SSE lines alike; only data lines matter
                if line.startswith(b"data: {"):
                    events += 1
                    totals = json.loads(line[6:])["totals"]
                    if settled is None and totals["requests"] == n and totals["active"] == 0:
                        settled = at
            raw = raw[raw.rfind(b"\n") + 1 :]
    finally:
        writer.close()
    return events, settled


async def _room(
    port: int, n: int, spread: float, ready: Any, dashboard: bool, cold: bool = False, via: int | None = None
) -> tuple[list[Stream], tuple]:
    go, done = asyncio.Event(), asyncio.Event()
    watcher = asyncio.ensure_future(_dashboard(port, n, done)) if dashboard else None
    tasks = [asyncio.ensure_future(_one(via or port, i, go, spread * i / n, cold)) for i in range(n)]
    # let every connection open, and the server take each one, before anyone sends (a learner's notebook has its
    # connection from an earlier request): 0.5 s had left a thread-per-connection server still accepting the last
    # fifth of 1,000 connections when the requests came, and those waited seconds for it
    await asyncio.sleep(0.5 + 0.0015 * n)
    ready.send("sending")
    go.set()
    streams = list(await asyncio.gather(*tasks))
    ready.send("streamed")  # the server's CPU is measured up to here
    if watcher is None:
        return streams, (0, None)
    await asyncio.sleep(2.0)  # time for the dashboard to catch up, if it is slow
    done.set()
    return streams, await watcher


def run_clients(
    port: int, n: int, spread: float, dashboard: bool, conn: Any, cold: bool = False, via: int | None = None
) -> None:
    """Child process: n clients (and the dashboard's reader), then send back what each saw. The clients' streams
    go to port `via` (a relay in front of the server) when it is given, the dashboard's feed to `port`."""
    streams, board = asyncio.run(_room(port, n, spread, conn, dashboard, cold, via))
    conn.send(([(s.client, s.sent, s.content, s.text, s.ending, s.ended) for s in streams], board))


# --- figures ---------------------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def ms(values: list[float]) -> str:
    v = [1000 * x for x in values]
    return (
        f"p50 {percentile(v, 50):6.1f}  p95 {percentile(v, 95):6.1f}  p99 {percentile(v, 99):6.1f}  "
        f"max {max(v):6.1f} ms"
    )


@dataclass
class Round:
    streams: list[tuple[int, float, list[float], str, str, float]]
    board: tuple[int, float | None]
    records: list[tuple[str, float, tuple[float, ...], str]]
    cpu: float
    wall: float
    rss_before: int
    rss_peak: int
    relayed: list[dict[str, Any]] | None = None  # the relay's summary lines, when the round went through one


def _sample(proc: psutil.Process, pipe: Any, until: float) -> tuple[int, float]:
    """Sample the server's RSS every 50 ms until the clients report (or `until`); its peak and the CPU time."""
    peak = proc.memory_info().rss
    while not pipe.poll(0.05) and time.monotonic() < until:
        peak = max(peak, proc.memory_info().rss)
    times = proc.cpu_times()
    return peak, times.user + times.system


def run_round(
    n: int,
    spread: float,
    dashboard: bool,
    sketch: bool = False,
    *,
    serve: Any = None,
    cold: bool = False,
    relay: bool = False,
) -> Round:
    """One round with a fresh server process: `serve` (a child-process target like `serve_room`; by default
    the stand-in, or the asyncio sketch with `sketch`) and the clients in another process; with `relay`, the
    clients' streams go through `streamlab relay` in a third (the dashboard's feed still goes to the server)."""
    ctx = multiprocessing.get_context("spawn")
    server_end, server_child = ctx.Pipe()
    target = serve if serve is not None else serve_sketch if sketch else serve_room
    server = ctx.Process(target=target, args=(n, server_child))
    server.start()
    port, pid = server_end.recv()
    proc = psutil.Process(pid)
    rss_before = proc.memory_info().rss
    front = RelayProcess(f"http://127.0.0.1:{port}/v1") if relay else None
    client_end, client_child = ctx.Pipe()
    args = (port, n, spread, dashboard, client_child, cold, front.port if front else None)
    clients = ctx.Process(target=run_clients, args=args)
    clients.start()
    client_end.recv()  # "sending": every connection is open
    times = proc.cpu_times()
    cpu0, t0 = times.user + times.system, time.perf_counter()
    peak, cpu1 = _sample(proc, client_end, time.monotonic() + 120)
    wall = time.perf_counter() - t0
    client_end.recv()  # "streamed"
    streams, board = client_end.recv()
    clients.join()
    relayed = front.stop() if front else None
    server_end.send("stop")
    records = server_end.recv()
    server.join()
    return Round(streams, board, records, cpu1 - cpu0, wall, rss_before, peak, relayed)


def whole(rnd: Round) -> tuple[list[float], list[tuple[int, str]]]:
    """Each whole stream's TTFT error (seconds), and the clients whose stream was not whole, with why."""
    errors, failed = [], []
    for c, sent, times, text, ending, _ in rnd.streams:
        if ending == "complete" and text == TEXT and len(times) == TOKENS:
            errors.append(times[0] - sent - TTFT)
        else:
            failed.append((c, ending if ending != "complete" else f"text {text[:40]!r}..."))
    return errors, failed


def report(rnd: Round, label: str) -> None:
    """Print one round's figures."""
    good = [
        (c, sent, times) for c, sent, times, text, ending, _ in rnd.streams if ending == "complete" and text == TEXT
    ]
    good = [(c, sent, times) for c, sent, times in good if len(times) == TOKENS]
    ttft, failed = whole(rnd)
    gaps = [b - a - GAP for _, _, times in good for a, b in zip(times, times[1:])]
    by_learner = {learner: (start, writes) for learner, start, writes, _ in rnd.records}
    overshoot = []  # the server's own lateness: first content write after the request was read, minus 0.30 s
    arrival = []  # from the client sending its request to the server reading it (perf_counter is system-wide)
    for c, sent, _ in good:
        start, writes = by_learner.get(f"learner-{c:03d}", (None, ()))
        if start is not None and len(writes) > 1:
            overshoot.append(writes[1] - start - TTFT)
            arrival.append(start - sent)
    print(
        f"{label}: {len(good)}/{len(rnd.streams)} streams whole and in order; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    if good:
        print(f"  TTFT error (measured - 300 ms)     {ms(ttft)}")
        print(f"  gap error  (measured - 50 ms)      {ms(gaps)}")
        if overshoot and rnd.relayed is None:
            print(f"    of which: request sent -> read   {ms(arrival)}")
            print(f"    of which: server's own overshoot {ms(overshoot)}")
    print(
        f"  server CPU {rnd.cpu:.2f} s over {rnd.wall:.2f} s ({100 * rnd.cpu / rnd.wall:.0f}% of one core); "
        f"RSS {rnd.rss_before / 2**20:.1f} MiB before, peak {rnd.rss_peak / 2**20:.1f} MiB"
    )
    if rnd.relayed is not None:
        ends = Counter(f"{line.get('status')} {line.get('outcome', line.get('ending'))}" for line in rnd.relayed)
        print(f"  the relay's summaries: {len(rnd.relayed)}; {', '.join(f'{k}: {v}' for k, v in ends.most_common())}")
    events, settled = rnd.board
    if events:
        last_end = max(ended for *_, ended in rnd.streams)
        lag = "never" if settled is None else f"{1000 * (settled - last_end):.0f} ms after the last stream ended"
        print(f"  dashboard feed: {events} events; the totals said every request had finished {lag}")
    for c, why in failed[:5]:
        print(f"  client {c} failed: {why[:300]}")


def table(pooled: dict[tuple[str, str], list[Round]], target: float) -> bool:
    """Print each server's p50/p95 TTFT error over its rounds, by path, the stand-in's beside the others'; True
    when every stream was whole and the stand-in's p95 is within `target` seconds on every path."""
    print("\nTTFT error over all rounds (ms), same run      p50      p95      max   whole   stand-in p95 / this")
    ok = True
    for (via, name), rounds in pooled.items():
        errors = [e for rnd in rounds for e in whole(rnd)[0]]
        failed = sum(len(whole(rnd)[1]) for rnd in rounds)
        total = sum(len(rnd.streams) for rnd in rounds)
        ours = [e for rnd in pooled.get((via, "stand-in"), []) for e in whole(rnd)[0]]
        ratio = percentile(ours, 95) / percentile(errors, 95) if ours and errors else float("nan")
        p = [1000 * percentile(errors, q) if errors else float("nan") for q in (50, 95, 100)]
        print(
            f"  {via:7} {name:10}                          {p[0]:7.1f}  {p[1]:7.1f}  {p[2]:7.1f}  "
            f"{total - failed:>5}/{total}  {ratio:6.2f}x"
        )
        ok &= failed == 0 and (name != "stand-in" or (bool(errors) and percentile(errors, 95) <= target))
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1, help="rounds of each server on each path, fresh processes each")
    ap.add_argument(
        "--spread", type=float, default=0.0, help="spread the requests over this many seconds (default 0: all at once)"
    )
    ap.add_argument("--no-dashboard", action="store_true", help="leave the stand-in's dashboard feed closed")
    ap.add_argument(
        "--servers",
        default="stand-in,uvicorn",
        help=f"which servers, comma-separated, of {', '.join(SERVERS)} (default stand-in,uvicorn)",
    )
    ap.add_argument("--via", default="direct,relay", help="direct, relay or both (default direct,relay)")
    ap.add_argument("--target", type=float, default=100.0, help="the stand-in's p95 TTFT error goal, ms (100)")
    ap.add_argument("--asyncio-sketch", action="store_true", help="the same as --servers sketch --via direct")
    args = ap.parse_args(argv)
    names = ["sketch"] if args.asyncio_sketch else [name.strip() for name in args.servers.split(",")]
    paths = ["direct"] if args.asyncio_sketch else [via.strip() for via in args.via.split(",")]
    if set(names) - set(SERVERS) or set(paths) - {"direct", "relay"}:
        ap.error(f"--servers takes {', '.join(SERVERS)}; --via takes direct, relay")
    spread = f"spread over {args.spread:g} s" if args.spread else "sent at the same instant"
    print(
        f"{args.clients} clients streaming the ttft scenario from {', '.join(names)}, {' and '.join(paths)}, each "
        f"server in its own process ({os.cpu_count()} CPUs, Python {sys.version.split()[0]}); requests {spread}"
    )
    pooled: dict[tuple[str, str], list[Round]] = {(via, name): [] for via in paths for name in names}
    for number in range(1, args.rounds + 1):
        for via in paths:
            for name in names if number % 2 else reversed(names):
                dashboard = name == "stand-in" and not args.no_dashboard
                rnd = run_round(args.clients, args.spread, dashboard, serve=SERVERS[name], relay=via == "relay")
                report(rnd, f"round {number}, {name}, {via}")
                pooled[via, name].append(rnd)
    ok = table(pooled, args.target / 1000)
    if "stand-in" not in names:
        print(f"(no stand-in in this run: only whether every stream was whole is judged: {'yes' if ok else 'no'})")
        return 0 if ok else 1
    print(
        f"goal (the stand-in's p95 TTFT error <= {args.target:g} ms, every stream whole): {'met' if ok else 'NOT met'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
