"""Hostile-room memory benchmark (issue 25 items 4 and 5): the peak memory each attack costs, against its bound.

Every attack of the issue that made a server or a tool hold what a client or an upstream chose, replayed on
loopback. The process under attack runs alone in a subprocess (a server started with `--role serve-...`, or a
tool run with `--role tool-...`), its helpers (an upstream, a bomb) in others, the attacker here. For a server
the figure is its peak resident set (`VmHWM` in /proc, reset through `/proc/PID/clear_refs` just before the
attack) minus its resident set just before; for a tool, its own `getrusage` peak minus its resident set after
its imports. Each row prints that growth beside the bound the server's limits imply, and what the issue had
measured before the fix.

    .venv/bin/python benchmarks/bench_hostile_memory.py
    .venv/bin/python benchmarks/bench_hostile_memory.py --only relay --scale 0.5

Linux only (/proc). `--scale` shrinks every attack's count (the sizes stay); the 60 KiB-key attack runs at
`--keys-scale` of the 10,000-key learner cap (default 0.25: the full cap took over a minute on a loaded 2-core
VM), and the bombs decode to `--bomb-mib` (1,024 MiB) where the issue used 2 GiB. Not a test: the tests in
tests/hostile/test_hostile.py pin each bound on a smaller scale.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

MIB = 1 << 20
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


# -- the processes under attack and their helpers ------------------------------------------------------------------


def _rss_kib(pid: int | str = "self") -> int:
    return _status(pid, "VmRSS")


def _status(pid: int | str, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def _serve(kind: str, upstream: str | None) -> None:
    """A server under attack: print its base URL, serve until stdin closes."""
    from streamlab.core import shapes
    from streamlab.core.standin.script import Episode, Send
    from streamlab.net.gateway.app import Gateway
    from streamlab.net.relay.app import Relay
    from streamlab.net.standin.server import StandIn

    if kind == "standin":
        server = StandIn({"m": Episode([Send(f) for f in shapes.chat_text_stream(["Hel", "lo"], model="m")])})
    elif kind == "relay":
        server = Relay(str(upstream))
    else:
        server = Gateway([str(upstream)])
    with server:
        print(server.base_url, flush=True)
        sys.stdin.read()


def _gzip_twice(size: int) -> bytes:
    """`size` zero bytes gzipped, then gzipped again (made a megabyte at a time): a decompression bomb."""

    def gz(chunks: Iterator[bytes]) -> Iterator[bytes]:
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        for chunk in chunks:
            yield c.compress(chunk)
        yield c.flush()

    return b"".join(gz(iter([b"".join(gz(b"\0" * MIB for _ in range(size // MIB)))])))


def _raw_upstream(kind: str, size: int) -> None:
    """A hostile upstream: `bomb-200`/`bomb-500` (a gzip,gzip body), `error-body` (a 500 whose body is `size`
    bytes), `endless` (an event stream that never ends). Prints its base URL, serves until stdin closes."""
    sock = socket.create_server(("127.0.0.1", 0))
    bomb = _gzip_twice(size) if kind.startswith("bomb") else b""
    status, kind_of = (b"200 OK", b"text/event-stream") if kind == "bomb-200" else (b"500 Oops", b"application/json")
    chunk = b'data: {"choices":[{"index":0,"delta":{"content":"word "}}]}\n\n' * 1000

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                head = b""
                while b"\r\n\r\n" not in head:
                    got = conn.recv(65536)
                    if not got:
                        return
                    head += got
                if kind.startswith("bomb"):
                    conn.sendall(
                        b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Encoding: gzip, gzip\r\nContent-Length: %d\r\n"
                        b"Connection: close\r\n\r\n%s" % (status, kind_of, len(bomb), bomb)
                    )
                elif kind == "error-body":
                    conn.sendall(
                        b"HTTP/1.1 500 Oops\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                        b"Connection: close\r\n\r\n" % size
                    )
                    block = b" " * MIB
                    for _ in range(size // MIB):
                        conn.sendall(block)
                else:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
                    while True:
                        conn.sendall(chunk)
            except OSError:
                pass

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    sys.stdin.read()
    sock.close()


def _tool(kind: str, url: str) -> None:
    """A tool under attack, in this fresh process: print its baseline and peak resident set as JSON."""
    import httpx  # noqa: F401  (imported before the baseline: every tool needs them)
    import openai  # noqa: F401

    from streamlab.core.errors import StreamlabError
    from streamlab.net import check, eventstream
    from streamlab.net.relaycheck import probe

    before = _rss_kib()
    outcome = ""
    if kind == "check":
        report = check.check_endpoint(url, model="m", deadline=60.0)
        outcome = f"{len(report.findings)} findings"
    elif kind == "client":
        try:
            with eventstream.EventStream(url + "/chat/completions", {"model": "m"}, keep="none") as stream:
                list(stream)
        except StreamlabError as exc:
            outcome = type(exc).__name__
    else:
        raw = probe.raw_stream(url, "m", "chat", timeout=2.0)
        sdk, _ = probe.sdk_stream(url, "m", "chat", timeout=2.0)
        outcome = f"raw kept {len(raw.body) / MIB:.1f} MiB ({raw.error}); sdk raised: {bool(sdk.raised)}"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"before_kib": before, "peak_kib": peak, "outcome": outcome}), flush=True)


# -- the driver ------------------------------------------------------------------------------------------------


class Child:
    """A subprocess of this script, started with `--role`; its first stdout line, and its stop."""

    def __init__(self, *role: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--role", *role],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        self.line = self.proc.stdout.readline().strip()

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Row:
    attack: str
    target: str
    growth_mib: float
    bound_mib: float
    before_fix: str
    note: str = ""

    @property
    def held(self) -> bool:
        return self.growth_mib <= self.bound_mib


def attack_server(kind: str, upstream: str | None, attack: Callable[[str], str]) -> tuple[float, str]:
    """Start server `kind`, run `attack(base_url)` on it; its peak growth in MiB and what the attack saw."""
    server = Child("serve", kind, upstream or "-")
    try:
        pid = server.proc.pid
        time.sleep(0.5)  # let it settle after start
        before = _rss_kib(pid)
        with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")  # reset VmHWM to the current resident set
        seen = attack(server.line)
        return (_status(pid, "VmHWM") - before) / 1024, seen
    finally:
        server.stop()


def attack_tool(kind: str, url: str) -> tuple[float, str]:
    tool = Child("tool", kind, url)
    tool.proc.wait(300)
    figures = json.loads(tool.line)
    return (figures["peak_kib"] - figures["before_kib"]) / 1024, figures["outcome"]


def _statuses(replies: list[int]) -> str:
    counts: dict[int, int] = {}
    for status in replies:
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} x {status}" for status, n in sorted(counts.items()))


def posts(url: str, bodies: Iterator[bytes], headers: Callable[[int], dict[str, str]] | None = None) -> str:
    import httpx

    got = []
    with httpx.Client(timeout=120, trust_env=False) as client:
        for i, body in enumerate(bodies):
            extra = {} if headers is None else headers(i)
            reply = client.post(url + "/chat/completions", content=body, headers=extra)
            got.append(reply.status_code)
    return _statuses(got)


def upload(url: str, size: int) -> str:
    """POST `size` bytes as one chunked body on a raw socket; the status line of the answer."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        block = b"%x\r\n%s\r\n" % (MIB, b" " * MIB)
        try:
            for _ in range(size // MIB):
                sock.sendall(block)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # refused and closed before the end: what a 413 does
        reply = b""
        try:
            while b"\r\n" not in reply and (data := sock.recv(65536)):
                reply += data
        except OSError:
            pass
    return reply.split(b"\r\n")[0].decode() or "connection closed"


def standin_rows(scale: float, keys_scale: float) -> list[Row]:
    from streamlab.core.standin.room import DEFAULT_MAX_LEARNERS
    from streamlab.net.standin.records import DEFAULT_MAX_RECORDS, DEFAULT_MAX_TOTAL_BYTES

    kept = DEFAULT_MAX_TOTAL_BYTES / MIB  # what all records together may hold

    rows = []
    n = max(1, int(1000 * scale))
    pad = b" " * (64 * 1024 - 200)
    body = json.dumps(ASK).encode()[:-1] + b', "pad": "' + pad + b'"}'
    growth, seen = attack_server("standin", None, lambda url: posts(url, (body for _ in range(n))))
    held = min(kept, min(n, DEFAULT_MAX_RECORDS) * len(body) * 2 / MIB)  # each body, and its parsed JSON
    rows.append(Row(f"{n} requests, 64 KiB bodies", "stand-in", growth, held + 32, "1.57 GB", seen))
    n = max(1, int(400 * scale))
    long_model = json.dumps({**ASK, "model": "m" * 1_000_000}).encode()  # under the 1 MiB body limit
    growth, seen = attack_server("standin", None, lambda url: posts(url, (long_model for _ in range(n))))
    rows.append(Row(f"{n} model names of 1 MB", "stand-in", growth, kept + 32, "555 MB", seen))
    n = max(1, int(DEFAULT_MAX_LEARNERS * keys_scale))
    key = "k" * (60 * 1024)
    small = json.dumps(ASK).encode()
    growth, seen = attack_server(
        "standin",
        None,
        lambda url: posts(url, (small for _ in range(n)), lambda i: {"Authorization": f"Bearer {i}{key}"}),
    )
    rows.append(Row(f"{n} new 60 KiB keys", "stand-in", growth, 32 + n * 0.002, "about 0.9 GB at 10,000", seen))
    return rows


def relay_rows(kind: str, scale: float) -> list[Row]:
    from streamlab.net.relay.upstream import MAX_REPLY_BYTES, MAX_REQUEST_BYTES

    rows = []
    upstream = Child("serve", "standin", "-")
    try:
        n = max(1, int(40 * scale))
        big = json.dumps({**ASK, "model": "m" * (5 * MIB)}).encode()
        growth, seen = attack_server(kind, upstream.line, lambda url: posts(url, (big for _ in range(n))))
        bound = 10 * 5 + 32  # one body in flight and its copies (tracemalloc: ~8); summaries keep 256 characters
        rows.append(Row(f"{n} model names of 5 MiB", kind, growth, bound, "+247 MB (40)", seen))
        growth, seen = attack_server(kind, upstream.line, lambda url: upload(url, 300 * MIB))
        rows.append(Row("a 300 MiB upload", kind, growth, MAX_REQUEST_BYTES / MIB * 2 + 32, "994 MB", seen))
    finally:
        upstream.stop()
    bad = Child("upstream", "error-body", str(300 * MIB))
    try:
        growth, seen = attack_server(kind, bad.line, lambda url: posts(url, iter([json.dumps(ASK).encode()])))
        rows.append(Row("a 300 MB error body", kind, growth, MAX_REPLY_BYTES / MIB * 3 + 32, "1.5 GB", seen))
    finally:
        bad.stop()
    return rows


def tool_rows(bomb_mib: int) -> list[Row]:
    from streamlab.core.conformance.checks import probes_for
    from streamlab.net.check import MAX_BODY_BYTES
    from streamlab.net.eventstream import MAX_ERROR_BODY_BYTES
    from streamlab.net.relaycheck.probe import MAX_STREAM_BYTES

    rows = []
    for status in ("200", "500"):
        bomb = Child("upstream", f"bomb-{status}", str(bomb_mib * MIB))
        try:
            if status == "200":  # every probe of `streamlab check` meets the bomb; each keeps at most its cap
                growth, seen = attack_tool("check", bomb.line)
                bound = len(probes_for("chat", "m")) * MAX_BODY_BYTES / MIB + 32
                rows.append(Row(f"gzip,gzip bomb ({bomb_mib} MiB)", "check", growth, bound, "2.1 GB", seen))
            growth, seen = attack_tool("client", bomb.line)
            bound = (MAX_ERROR_BODY_BYTES if status == "500" else 64 * MIB) * 2 / MIB + 32  # error cap / event cap
            rows.append(Row(f"gzip,gzip bomb ({bomb_mib} MiB), {status}", "client", growth, bound, "about 1 GB", seen))
        finally:
            bomb.stop()
    endless = Child("upstream", "endless", "0")
    try:
        growth, seen = attack_tool("checkrelay", endless.line)
        rows.append(Row("an endless relay", "check-relay", growth, 3 * MAX_STREAM_BYTES / MIB + 32,
                        "MemoryError in 21 s", seen))  # fmt: skip
    finally:
        endless.stop()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("standin", "relay", "gateway", "tools"), action="append")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each attack's request count (1)")
    parser.add_argument("--keys-scale", type=float, default=0.25, help="fraction of the learner cap (0.25)")
    parser.add_argument("--bomb-mib", type=int, default=1024, help="what each bomb decodes to, in MiB (1024)")
    parser.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        role, kind, extra = args.role
        if role == "serve":
            _serve(kind, None if extra == "-" else extra)
        elif role == "upstream":
            _raw_upstream(kind, int(extra))
        else:
            _tool(kind, extra)
        return 0
    parts = args.only or ["standin", "relay", "gateway", "tools"]
    print(f"hostile-room memory: each attack against a fresh process; --scale {args.scale:g}, "
          f"--keys-scale {args.keys_scale:g}, --bomb-mib {args.bomb_mib}", flush=True)  # fmt: skip
    print(f"{'attack':34} {'target':12} {'growth':>10} {'bound':>10}  {'held':5} {'before the fix':22} seen")
    ok = True
    for part in parts:
        started = time.monotonic()
        if part == "standin":
            rows = standin_rows(args.scale, args.keys_scale)
        elif part == "tools":
            rows = tool_rows(args.bomb_mib)
        else:
            rows = relay_rows(part, args.scale)
        for row in rows:
            ok &= row.held
            print(
                f"{row.attack:34} {row.target:12} {row.growth_mib:7.1f} MiB {row.bound_mib:6.0f} MiB  "
                f"{'yes' if row.held else 'NO':5} {row.before_fix:22} {row.note}",
                flush=True,
            )
        print(f"  ({part}: {time.monotonic() - started:.0f} s)", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONIOENCODING", "utf-8")
    sys.exit(main())
