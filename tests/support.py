"""What the tests share: small streams, request bodies, socket helpers, a CLI runner (test support, not a layer).

Import them by name, `from support import ASK, free_port` (pytest puts tests/ on sys.path). Fixtures stay in
conftest.py. `ASK` is the smallest Chat `messages` list the real API accepts; streams a test needs it names for itself.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

from streamlab.core.standin.actions import Reply
from streamlab.core.standin.request import Request, parse_head

ASK = [{"role": "user", "content": "hi"}]  # the smallest Chat request body the real API accepts


def free_port() -> int:
    """A loopback port that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def raw_request(port: int, request: bytes, *, timeout: float = 2.0) -> bytes:
    """Send raw bytes to 127.0.0.1:port; return everything sent back until the server closes (or it has
    been quiet for `timeout` seconds)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        sock.settimeout(timeout)
        out = bytearray()
        try:
            while data := sock.recv(65536):
                out += data
        except TimeoutError:
            pass
        return bytes(out)


def dechunk(body: bytes) -> tuple[list[bytes], bool]:
    """Split an HTTP/1.1 chunked body into its chunks; the bool says whether the terminating chunk came."""
    chunks, pos = [], 0
    while pos < len(body):
        eol = body.index(b"\r\n", pos)
        size = int(body[pos:eol], 16)
        if size == 0:
            return chunks, True
        chunks.append(body[eol + 2 : eol + 2 + size])
        pos = eol + 2 + size + 2
    return chunks, False


def http_response(
    body: bytes,
    *,
    status: str = "200 OK",
    content_type: str | None = "text/event-stream",
    content_length: int | None = None,
) -> bytes:
    """The bytes of a whole HTTP/1.1 response (Content-Length defaults to the body's real length)."""
    head = f"HTTP/1.1 {status}\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n"
    head += f"Content-Length: {len(body) if content_length is None else content_length}\r\n\r\n"
    return head.encode() + body


@contextlib.contextmanager
def one_shot_server(reply: bytes) -> Iterator[int]:
    """A raw server on 127.0.0.1 that answers one connection with `reply` and closes it; yields the port.

    On exit the serving thread is joined and the listener closed, so nothing leaks into the next test."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(reply)
                # A FIN, then what is left of the request read to its end: closing with unread bytes (a body that
                # came in a second segment) sends an RST, and the client would see a reset, not a close.
                conn.shutdown(socket.SHUT_WR)
                conn.settimeout(5)
                while conn.recv(65536):
                    pass

    thread = threading.Thread(target=serve, name="one-shot-server", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        if thread.is_alive():  # nobody connected: wake accept() so the thread ends
            with contextlib.suppress(OSError), socket.create_connection(listener.getsockname(), timeout=1):
                pass
        thread.join(5)
        listener.close()


@contextlib.contextmanager
def streamlab_cli(*args: str) -> Iterator[subprocess.Popen[str]]:
    """`python -m streamlab ARGS` with text pipes; killed and reaped on the way out if it is still running."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlab", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def standin_base(proc: subprocess.Popen[str]) -> str:
    """Read a `streamlab standin` banner up to its "Ctrl-C" line; the base URL it serves at (".../v1")."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("Ctrl-C"):
            break
    return next(line for line in lines if " at http://" in line).split(" at ")[1].split()[0]


def until(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Wait for a state (a safety net for a hung test, never a measurement)."""
    import pytest

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


class LoopbackServer:
    """A raw TCP server on 127.0.0.1 for hostile-peer tests: one thread accepts, `handle(conn)` (a subclass's)
    serves each connection in turn; `stopping` is set by `close()`, which joins the thread."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                self.handle(conn)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.sock.close()


def planned_request(
    method: str, target: str, body: object = None, *, key: str | None = None, headers: dict[str, str] | None = None
) -> Request:
    """A parsed request as the stand-in's handler would build it, for the planner's tests (`plan(room, ...)`)."""
    raw = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
    lines = [f"{method} {target} HTTP/1.1", "Host: x"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    head = parse_head(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    assert not isinstance(head, Reply), head
    return Request(head, raw)
