"""The relay checker: drive any relay through a scripted upstream and a chaos proxy, grade its five rules (I/O layer).

The checker plays both ends of a relay. Upstream, it runs a stand-in (`streamlab.net.standin.server`) behind a chaos
proxy (`streamlab.net.chaos.proxy`) that listens on one fixed address, the *upstream URL*; downstream, it is the
client, with httpx (raw bytes, arrival times) and with the official openai SDK. Every check scripts one kind of
upstream behaviour under its own model name, and grades the evidence with `streamlab.core.relay.grade`.

The handshake, or how a relay written with any framework gets pointed at the checker's upstream: a relay only
connects upstream when a request arrives, so the relay can be started before the checker listens. The
upstream URL is fixed for the whole run (`http://127.0.0.1:8765/v1` by default); between checks the checker
restarts the chaos proxy on that same port with other faults. Three ways to hand the checker a relay:

* `check_relay(start_relay)`: a factory called with the upstream URL, returning a context manager that
  yields the relay (a URL string, or an object with `base_url` and, optionally, `summaries`). The reference
  `streamlab.net.relay.app.Relay` is such a factory as it stands: `check_relay(lambda up: Relay(up, keepalive=0.25))`.
* `relay_command("python my_relay.py --upstream {upstream} --port {port}")` makes such a factory from a
  command line (`streamlab check-relay --relay-cmd ...`): the checker fills in the placeholders, starts the
  process, waits for the port, and reads summary lines from its stdout (every line that is a JSON object).
* `check_relay(relay_url=..., summary_file=...)` for a relay the user started themselves with its upstream set
  to the upstream URL (`streamlab check-relay RELAY_URL`); summary lines are read from the file the relay's
  stdout goes to (lines written before the check started are ignored).

The relay must be configured with the keep-alive interval and the read timeout the checker assumes
(`keepalive`, `read_timeout`: placeholders `{keepalive}` and `{read_timeout}` in a command).

What a relay prints is kept as a bounded tail (`SummaryTail`): only lines that may be summaries (a JSON object
on one line of at most `MAX_LINE_CHARS`), the last of them up to `MAX_TAIL_CHARS` in all; everything else is
counted and let go. A relay under test that printed without end had grown the checker by 4.1 GB in 24 s.
"""

from __future__ import annotations

import collections
import contextlib
import random
import shlex
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from streamlab.core.relay.grade import RelayReport
from streamlab.core.safejson import json_or_none
from streamlab.net.relaycheck.checks import run_checks
from streamlab.net.relaycheck.probe import CheckOptions
from streamlab.net.standin.server import StandIn

__all__ = [
    "DEFAULT_UPSTREAM_PORT",
    "MAX_LINE_CHARS",
    "MAX_TAIL_CHARS",
    "RelayUnderTest",
    "SummaryTail",
    "check_relay",
    "relay_command",
    "summaries_from_file",
]

DEFAULT_UPSTREAM_PORT = 8765
"""The port of the checker's upstream when the user starts the relay themselves (the upstream URL is then
http://127.0.0.1:8765/v1)."""

RelayFactory = Callable[[str], contextlib.AbstractContextManager[Any]]

MAX_LINE_CHARS = 16 * 1024
"""The longest line of a relay's output kept as a possible summary (a real one is a few hundred characters)."""
MAX_TAIL_CHARS = 4 * 1024 * 1024
"""The characters of summary lines kept in all: past it, the oldest go (and are counted)."""


class SummaryTail:
    """The bounded tail of what a relay prints: the last lines that may be summaries (JSON objects, each at
    most `max_line_chars`), `max_chars` of them in all. `seen` counts every line, `dropped` those let go (too
    long, not an object, or pushed out of the tail). Fed by one thread, read by another."""

    def __init__(self, *, max_line_chars: int = MAX_LINE_CHARS, max_chars: int = MAX_TAIL_CHARS) -> None:
        self.max_line_chars = max_line_chars
        self.max_chars = max_chars
        self.seen = self.dropped = 0
        self._lines: collections.deque[str] = collections.deque()
        self._chars = 0
        self._lock = threading.Lock()

    def add(self, line: str) -> None:
        """Keep one whole line (its newline stripped) if it may be a summary."""
        line = line.strip()
        with self._lock:
            self.seen += 1
            if not line.startswith("{") or len(line) > self.max_line_chars:
                self.dropped += 1
                return
            self._lines.append(line)
            self._chars += len(line)
            while self._chars > self.max_chars:
                self._chars -= len(self._lines.popleft())
                self.dropped += 1

    def read(self, stream: IO[str]) -> None:
        """Feed every line of `stream` until its end, reading at most `max_line_chars` + 1 characters at a time:
        a longer line is counted and let go piece by piece, never held whole."""
        inside_long_line = False
        while piece := stream.readline(self.max_line_chars + 1):
            if not inside_long_line:
                self.add(piece)  # the first piece of a line too long is longer than `max_line_chars`: let go
            inside_long_line = not piece.endswith("\n")

    def summaries(self) -> list[dict[str, Any]]:
        """The kept lines that are JSON objects, in order."""
        with self._lock:
            lines = list(self._lines)
        return _json_objects(lines)


@dataclass
class RelayUnderTest:
    """The relay as the checker sees it: the base URL a client uses, and how to read its summary lines (a
    callable returning the lines so far, or None when the relay's summaries cannot be read)."""

    base_url: str
    read_summaries: Callable[[], list[dict[str, Any]] | None]


def _normalise_url(url: str) -> str:
    """A relay URL as the SDK's base URL: `http://HOST:PORT` gets `/v1` added; any other path is kept."""
    url = url.rstrip("/")
    after_scheme = url.split("://", 1)[-1]
    return url + "/v1" if "/" not in after_scheme else url


def _as_relay(value: Any, summary_file: Path | None) -> RelayUnderTest:
    """Whatever a factory yielded (a URL, a `Relay`, a `RelayUnderTest`) as a RelayUnderTest."""
    if isinstance(value, RelayUnderTest):
        return value
    url = value if isinstance(value, str) else getattr(value, "base_url", None)
    if not isinstance(url, str):
        raise TypeError(f"start_relay yielded {value!r}: expected a URL or an object with a base_url")
    if summary_file is not None:
        return RelayUnderTest(_normalise_url(url), summaries_from_file(summary_file))
    if not hasattr(value, "summaries"):
        return RelayUnderTest(_normalise_url(url), lambda: None)

    def read() -> list[dict[str, Any]]:  # read the attribute each time: a property may return a fresh copy
        source = value.summaries
        return list(source() if callable(source) else source)

    return RelayUnderTest(_normalise_url(url), read)


def summaries_from_file(path: str | Path) -> Callable[[], list[dict[str, Any]]]:
    """A reader of JSON summary lines appended to `path` from now on (what is already there is skipped), kept
    as a `SummaryTail`: each call reads only the whole lines added since the last one, never the whole file."""
    path = Path(path)
    position = path.stat().st_size if path.exists() else 0
    inside_long_line = False
    tail = SummaryTail()
    limit = tail.max_line_chars * 4 + 1  # bytes: a character is at most four

    def read() -> list[dict[str, Any]]:
        nonlocal position, inside_long_line
        if not path.exists():
            return tail.summaries()
        with path.open("rb") as f:
            f.seek(position)
            while piece := f.readline(limit):
                whole = piece.endswith(b"\n")
                if not whole and len(piece) < limit and not inside_long_line:
                    break  # a line still being written: taken whole next time
                position += len(piece)
                if not inside_long_line:
                    tail.add(piece.decode("utf-8", "replace"))
                inside_long_line = not whole
        return tail.summaries()

    return read


def _json_objects(lines: list[str]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        line = line.strip()
        if line.startswith("{") and isinstance(obj := json_or_none(line), dict):
            out.append(obj)
    return out


def free_port() -> int:
    """A loopback port nothing listens on right now (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


EPHEMERAL_FLOOR = 32768
"""Linux's default first ephemeral port (macOS and Windows start theirs at 49152)."""


def ephemeral_floor() -> int:
    """The lowest port this machine hands out for outgoing connections (Linux: ip_local_port_range)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return EPHEMERAL_FLOOR
    return min(low, EPHEMERAL_FLOOR)


def steady_port(*, span: int = 12_000) -> int:
    """A loopback port nothing listens on now, chosen below the ephemeral range.

    The checker binds its upstream (the chaos proxy) on one port again for every check. A port from
    `free_port()` comes from the ephemeral range, so between two checks it can become the local end of any
    outgoing connection on the machine (the checker's own clients included), and the next bind fails with
    "address already in use". Below the range only another program that binds that very port can take it."""
    floor = ephemeral_floor()
    low = max(1024, floor - span)
    pick = random.SystemRandom()
    for _ in range(100):
        port = pick.randrange(low, floor)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    return free_port()  # a crowded machine: fall back to what the kernel offers


def _wait_for_port(port: int, proc: subprocess.Popen[str] | None, timeout: float) -> None:
    end = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the relay command exited with status {proc.returncode} before listening")
        if time.monotonic() > end:
            raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s")
        time.sleep(0.05)


def relay_command(template: str, *, keepalive: float, read_timeout: float, start_timeout: float = 30.0) -> RelayFactory:
    """A relay factory that runs a command line: `{upstream}`, `{port}`, `{keepalive}` and `{read_timeout}` are
    filled in; the relay's URL is `http://127.0.0.1:{port}/v1`; its stdout's JSON lines are its summaries."""
    if "{upstream}" not in template or "{port}" not in template:
        raise ValueError(
            "the relay command needs the placeholders {upstream} and {port}, e.g. "
            "'python my_relay.py --upstream {upstream} --port {port}'"
        )

    @contextlib.contextmanager
    def start(upstream: str) -> Iterator[RelayUnderTest]:
        port = free_port()
        argv = shlex.split(
            template.format(upstream=upstream, port=port, keepalive=f"{keepalive:g}", read_timeout=f"{read_timeout:g}")
        )
        tail = SummaryTail()
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=errors,
                stdin=subprocess.DEVNULL,
                text=True,
                encoding="utf-8",
                errors="replace",
            )
            stdout = proc.stdout
            assert stdout is not None
            reader = threading.Thread(target=tail.read, args=(stdout,), name="relay-stdout", daemon=True)
            reader.start()
            try:
                _wait_for_port(port, proc, start_timeout)
            except RuntimeError as exc:
                _stop(proc, reader)
                errors.seek(0)
                said = errors.read()[-1500:].decode("utf-8", "replace").strip()
                raise RuntimeError(
                    f"{exc}: {' '.join(argv)}" + (f"\nits stderr ends with:\n{said}" if said else "")
                ) from None
            try:
                yield RelayUnderTest(f"http://127.0.0.1:{port}/v1", tail.summaries)
            finally:
                _stop(proc, reader)

    return start


def _stop(proc: subprocess.Popen[str], reader: threading.Thread) -> None:
    """Stop a relay process (SIGTERM, then SIGKILL after 10 s) and the thread reading its stdout."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    reader.join(5)
    if proc.stdout is not None:
        proc.stdout.close()


@contextlib.contextmanager
def _given_url(url: str, summary_file: Path | None) -> Iterator[RelayUnderTest]:
    reader = summaries_from_file(summary_file) if summary_file is not None else (lambda: None)
    yield RelayUnderTest(_normalise_url(url), reader)


def check_relay(
    start_relay: RelayFactory | None = None,
    *,
    relay_url: str | None = None,
    summary_file: str | Path | None = None,
    upstream_port: int = 0,
    keepalive: float = 0.25,
    read_timeout: float = 2.0,
    seed: int = 1,
    fuzz_runs: int = 16,
    requirements: tuple[int, ...] = (1, 2, 3, 4, 5),
    disconnect_bound: float = 1.0,
    ttft_bound: float = 0.25,
    log: Callable[[str], None] | None = None,
) -> RelayReport:
    """Run the relay through every check of the chosen `requirements` and return the report.

    Give either `start_relay` (a factory: upstream URL -> context manager yielding the relay) or `relay_url` (a
    relay already running, pointed at `http://127.0.0.1:{upstream_port}/v1`; `upstream_port` 0 picks a free port
    below the ephemeral range (`steady_port`), which only a factory can learn). `summary_file` is where the relay's
    summary lines go, when the relay itself cannot say. `keepalive` and `read_timeout` are what the relay was
    configured with; `disconnect_bound` is how soon (seconds) the upstream must see a client's departure,
    `ttft_bound` how much time to first token the relay may add. `fuzz_runs` seeded chaos runs (from `seed`) cut or
    reset either direction. `log` gets one line per check as it finishes.
    """
    options = CheckOptions(
        keepalive=keepalive,
        read_timeout=read_timeout,
        seed=seed,
        fuzz_runs=fuzz_runs,
        requirements=tuple(requirements),
        disconnect_bound=disconnect_bound,
        ttft_bound=ttft_bound,
    )
    if (start_relay is None) == (relay_url is None):
        raise ValueError("give exactly one of start_relay (a factory) and relay_url (a running relay)")
    if relay_url is not None and upstream_port == 0:
        upstream_port = DEFAULT_UPSTREAM_PORT
    port = upstream_port or steady_port()
    upstream_url = f"http://127.0.0.1:{port}/v1"
    summaries = None if summary_file is None else Path(summary_file)
    factory = start_relay if start_relay is not None else (lambda _: _given_url(relay_url or "", summaries))
    with StandIn({}, usage="scripted") as standin, factory(upstream_url) as given:
        relay = _as_relay(given, summaries)
        report = RelayReport(relay.base_url)
        report.notes.append(f"upstream: the checker's stand-in behind a chaos proxy at {upstream_url}")
        problem = _unreachable(relay.base_url)
        if problem:
            report.notes.append(problem)
            return report
        run_checks(report, relay, standin, port, options, log or (lambda line: None))
    return report


def _unreachable(base_url: str, timeout: float = 5.0) -> str | None:
    """Why the relay cannot be reached, or None when something answers HTTP at its address."""
    url = httpx.URL(base_url)
    end = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((url.host, url.port or 80), timeout=1):
                return None
        except OSError as exc:
            if time.monotonic() > end:
                return f"the relay does not answer at {base_url}: {exc}"
            time.sleep(0.1)
