"""A real proxy as a child process: its folder, its configuration, its start, readiness and stop (I/O layer).

`ProxyProcess` is what `NginxProxy` and `CaddyProxy` share; each adds only how to find its program, how to render
its configuration (`streamlab.core.proxy`) and its command line. One start, in order:

1. find the program (`binary=`, else the usual places); missing, it raises `ProxyUnavailable` with the install
   hint for this platform (`streamlab.core.proxy.base.install_hint`);
2. make a temporary folder (`streamlab-nginx-...`) that holds everything the proxy writes: its configuration, pid
   file, logs, temporary files, certificates;
3. choose the port (the one given, or a free loopback port the OS picks, bound and released: a proxy is told a
   number, it cannot report one), write the configuration, start the program in a session of its own (a Ctrl-C
   meant for a notebook kernel does not reach it behind the helper's back), its output going to a log file in
   the folder;
4. wait until `READY_PATH` answers with the token written into this configuration, so a reply from another program
   that happens to hold the port is never taken for it. A program that exits first is a `ProxyUnavailable` quoting
   the end of its log; with an ephemeral port taken in between, the start is tried again on another.

`stop()` sends SIGTERM (nginx's fast shutdown; Caddy's shutdown, with the one-second grace period its configuration
sets), kills the process if it has not exited after `grace` seconds, reaps it and removes the folder. It is
idempotent, and every proxy still running when the interpreter exits is stopped then.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO, TypeVar

import httpx

from streamlab.core.errors import ProxyUnavailable
from streamlab.core.proxy.base import LOOPBACK, READY_PATH, Upstream, install_hint, upstream_of
from streamlab.net.child import StopAtExit, end_process

__all__ = ["ProxyProcess", "free_loopback_port", "find_program", "program_says", "STARTUP_TIMEOUT", "GRACE"]

STARTUP_TIMEOUT = 15.0
"""Seconds a proxy has to answer its readiness path after it was started."""
GRACE = 3.0
"""Seconds a proxy has to exit after SIGTERM before it is killed."""
_LOG = "output.log"
_PORT_TRIES = 3


def free_loopback_port() -> int:
    """A loopback port nothing listens on right now (bound, then released; the proxy binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def find_program(name: str, places: list[Path]) -> str | None:
    """The first of `places` that is an executable file, else `name` on PATH, else None."""
    for place in places:
        if place.is_file() and os.access(place, os.X_OK):
            return str(place)
    return shutil.which(name)


_P = TypeVar("_P", bound="ProxyProcess")
_live: StopAtExit[ProxyProcess] = StopAtExit()


def program_says(*command: str) -> str:
    """What a short-lived command prints, its standard output and error together, stripped ("" when it cannot run):
    how each proxy reports its version (`caddy version` on stdout, `nginx -v` on stderr)."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout + done.stderr).strip()


class ProxyProcess:
    """One real proxy (nginx, Caddy) as a child process on 127.0.0.1, in front of `upstream`, as a context manager.

    `port` 0 picks a free port; `binary` is the program's path (default: found where it is usually installed).
    After `start()`: `url` (`http://127.0.0.1:PORT`), `base_url` (that plus the upstream URL's path, e.g. `/v1`:
    what a client is given), `config` (the configuration text it runs with), `folder`, `version`; `log()` is what
    it wrote. Subclasses set `kind` and implement `locate`, `render` and `command`.
    """

    kind = "proxy"

    def __init__(
        self,
        upstream: str,
        *,
        port: int = 0,
        binary: str | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        grace: float = GRACE,
    ) -> None:
        self.upstream: Upstream = upstream_of(upstream)
        self.requested_port = port
        self.binary = binary
        self.startup_timeout = startup_timeout
        self.grace = grace
        self.port = 0
        self.folder: Path | None = None
        self.config = ""
        self.version = ""
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()

    # -- what a subclass says --------------------------------------------------------------------------------

    def locate(self) -> str | None:
        """The program's path, or None when it is not installed."""
        raise NotImplementedError

    def render(self, *, port: int, folder: str, token: str) -> str:
        """The configuration text for this start."""
        raise NotImplementedError

    def command(self, binary: str, folder: str) -> list[str]:
        """The command line that runs the program in the foreground on `folder`'s configuration."""
        raise NotImplementedError

    def prepare(self, folder: Path, config: str) -> dict[str, str]:
        """Write `config` (and any folder the program needs) into `folder`; the environment variables to add."""
        raise NotImplementedError

    def read_version(self, binary: str) -> str:
        """The program's version as it reports it ("" when it does not say)."""
        return ""

    @property
    def scheme(self) -> str:
        return "http"

    # -- lifecycle ---------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT` (https with TLS)."""
        if self.process is None:
            raise RuntimeError(f"the {self.kind} proxy is not running; call start() or use it as a context manager")
        return f"{self.scheme}://{LOOPBACK}:{self.port}"

    @property
    def base_url(self) -> str:
        """What a client is given: `url` plus the upstream URL's path (`http://127.0.0.1:PORT/v1`)."""
        return self.url + self.upstream.path

    def start(self: _P) -> _P:
        """Write the configuration, start the program and wait until it answers. Returns self."""
        with self._lock:
            if self.process is not None:
                raise RuntimeError(f"this {self.kind} proxy is already started")
            binary = self.binary or self.locate()
            if binary is None or not Path(binary).is_file():
                raise ProxyUnavailable(self.kind, install_hint(self.kind))
            self.version = self.read_version(binary)
            self.folder = Path(tempfile.mkdtemp(prefix=f"streamlab-{self.kind}-"))
            try:
                self._start_on_a_port(binary)
            except BaseException:
                self.stop()
                raise
            _live.add(self)
            return self

    def _start_on_a_port(self, binary: str) -> None:
        assert self.folder is not None
        for attempt in range(1 if self.requested_port else _PORT_TRIES):
            self.port = self.requested_port or free_loopback_port()
            token = secrets.token_hex(12)
            self.config = self.render(port=self.port, folder=str(self.folder), token=token)
            env = self.prepare(self.folder, self.config)
            self._spawn(self.command(binary, str(self.folder)), env)
            try:
                self._wait_ready(token)
                return
            except ProxyUnavailable:
                taken = "address already in use" in self.log().lower()
                self._end_process()
                if not taken or self.requested_port or attempt == _PORT_TRIES - 1:
                    raise

    def _spawn(self, command: list[str], env: dict[str, str]) -> None:
        assert self.folder is not None
        log: IO[bytes] = open(self.folder / _LOG, "wb")  # the child keeps its own copy; ours is closed below
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                start_new_session=True,
            )
        except OSError as exc:
            raise ProxyUnavailable(self.kind, f"{self.kind} could not be started ({command[0]}): {exc}") from exc
        finally:
            log.close()

    def _wait_ready(self, token: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        ready = f"{self.scheme}://{LOOPBACK}:{self.port}{READY_PATH}"
        with httpx.Client(trust_env=False, verify=False, timeout=1.0) as client:  # loopback; the token is the proof
            while True:
                if self.process is None or self.process.poll() is not None:
                    code = None if self.process is None else self.process.returncode
                    raise ProxyUnavailable(self.kind, f"{self.kind} exited ({code}) before it answered.{self._tail()}")
                try:
                    if client.get(ready).text == token:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise ProxyUnavailable(
                        self.kind,
                        f"{self.kind} did not answer {ready} within {self.startup_timeout:g} s.{self._tail()}",
                    )
                time.sleep(0.05)

    def log(self) -> str:
        """Everything the proxy wrote to its log files so far ("" once it is stopped: the folder is gone)."""
        if self.folder is None:
            return ""
        texts = [p.read_text(errors="replace") for p in sorted(self.folder.glob("*.log")) if p.is_file()]
        return "".join(texts)

    def _tail(self, lines: int = 12) -> str:
        tail = self.log().strip().splitlines()[-lines:]
        return "\nIts last output:\n    " + "\n    ".join(tail) if tail else ""

    def _end_process(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        end_process(process, grace=self.grace)

    def stop(self) -> None:
        """Terminate the proxy (SIGTERM), kill it after `grace` seconds if it lingers, reap it, remove its folder.
        Idempotent."""
        with self._lock:
            self._end_process()
            _live.discard(self)
            folder, self.folder = self.folder, None
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)

    def __enter__(self: _P) -> _P:
        return self if self.process is not None else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f"{self.url} -> {self.upstream.origin}" if self.running else "stopped"
        return f"<{type(self).__name__} {where}>"
