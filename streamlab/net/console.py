"""A server's console: lines written without ever blocking the server, and the signals that stop it (I/O layer).

A server that prints a line per request (`streamlab standin`, `streamlab relay`) or logs one (the gateway)
must not wait on whoever reads those lines. Written straight from the serving loop, a terminal scrolled
back, a pipe nobody drains or a stalled log handler freezes every client once the pipe's buffer (64 KiB on
Linux) is full: the relay stopped at request 210, the gateway at 114, and SIGTERM could not stop them.

* `Outlet(write)` queues lines for `write` and calls it on a writer thread of its own. The queue is bounded
  (`max_lines`): when it is full, `put` drops the line and counts it, and the writer says how many were
  dropped (through `notice`) when it next gets to write. So a serving loop only ever appends to a deque,
  and memory stays at most `max_lines` lines (callers cap each line's length).
* `stream_writer(stream)` is the `write` for stdout or stderr: it encodes each line itself (a character
  the stream's encoding lacks becomes an escape instead of a `UnicodeEncodeError`; JSON lines pass
  `fallback=ascii_json` to stay valid JSON) and writes the bytes to the file descriptor, bypassing the
  stream's buffer, so a writer thread stuck on a full pipe never holds a lock the exiting interpreter needs.
* `stop_signals(event)` makes SIGINT, SIGTERM and SIGHUP set `event`, explicitly: under `nohup` or `&` a
  shell starts a program with SIGINT ignored, and Python then installs no handler of its own, so Ctrl-C and
  `kill -INT` did nothing; SIGHUP (the terminal closed, `kill -HUP`) had killed every server without its
  final lines.
* `route_logging(stream)` sends every log record (asyncio's own warnings included) and every Python warning
  through an `Outlet` to `stream` instead of writing them from the thread that logs. asyncio logs from the
  serving loop itself (a warning for each write to a client that has left a fast stream): with stderr an
  unread pipe, those writes filled it and froze the relay after 7,383 streams and the gateway after 3,197,
  `/metrics` and SIGTERM included. Now a full stderr costs dropped lines, counted, never a frozen loop.

The writer thread is a daemon: one stuck for ever on an unread pipe does not keep the process alive.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["Outlet", "stream_writer", "stop_signals", "route_logging", "DEFAULT_MAX_LINES", "STOP_SIGNALS"]

DEFAULT_MAX_LINES = 10_000
"""Lines an outlet holds for a reader that does not keep up; more are dropped, and counted."""


class Outlet:
    """Lines for `write`, written in order by a writer thread so that `put` never blocks (module docstring).

    `notice(count)` makes the line that reports `count` dropped lines (None: no report); it goes through
    `notice_write` (default: `write`). `write` must not raise for a line it cannot write; if it does, the line
    counts as dropped. The thread starts at the first `put`; `close` writes what is queued (waiting at most
    `timeout`) and ends it.
    """

    def __init__(
        self,
        write: Callable[[str], None],
        *,
        max_lines: int = DEFAULT_MAX_LINES,
        name: str = "outlet",
        notice: Callable[[int], str] | None = None,
        notice_write: Callable[[str], object] | None = None,
    ) -> None:
        if max_lines < 1:
            raise ValueError(f"max_lines must be at least 1, got {max_lines!r}")
        self.write = write
        self.max_lines = max_lines
        self.name = name
        self.notice = notice
        self.notice_write = notice_write or write
        self.dropped = 0  # every line dropped so far
        self.written = 0
        self._unreported = 0
        self._lines: collections.deque[str] = collections.deque()
        self._cond = threading.Condition()
        self._closing = False
        self._busy = False
        self._thread: threading.Thread | None = None

    def put(self, line: str) -> bool:
        """Queue one line; False when it was dropped (the queue is full, or the outlet closed)."""
        with self._cond:
            if self._closing or len(self._lines) >= self.max_lines:
                self.dropped += 1
                self._unreported += 1
                return False
            self._lines.append(line)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()
            return True

    def pending(self) -> int:
        """Lines queued or being written."""
        with self._cond:
            return len(self._lines) + self._busy

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every line queued so far is written; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._lines and not self._busy, timeout)

    def close(self, timeout: float = 2.0) -> bool:
        """Write what is queued (for at most `timeout` seconds), report drops, and end the writer thread. True
        when everything queued was written; a writer stuck on an unread stream is left behind (a daemon)."""
        with self._cond:
            done = self._cond.wait_for(lambda: not self._lines and not self._busy, timeout)
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout if done else 0.05)
        elif self._unreported and self.notice is not None:
            self._report()
        return done

    def _run(self) -> None:
        while True:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
                while not self._lines and not self._closing:
                    self._cond.wait()
                if not self._lines:
                    break
                line = self._lines.popleft()
                self._busy = True
            self._emit(line)
        self._report()

    def _emit(self, line: str) -> None:
        try:
            self.write(line)
            self.written += 1
        except Exception:  # a write that fails loses its line, never the thread
            with self._cond:
                self.dropped += 1
                self._unreported += 1
        self._report()

    def _report(self) -> None:
        with self._cond:
            count, self._unreported = self._unreported, 0
        if count and self.notice is not None:
            with contextlib.suppress(Exception):
                self.notice_write(self.notice(count))


def stream_writer(stream: TextIO, *, fallback: Callable[[str], str] | None = None) -> Callable[[str], None]:
    """A `write(line)` for a text stream (stdout, stderr): the line and a newline, encoded in the stream's
    encoding, written whole to its file descriptor (or, for a stream without one, such as a test's capture,
    through the stream). A line the encoding cannot hold is first passed through `fallback` (default: none),
    then anything still unencodable becomes a backslash escape."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        fd: int | None = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None

    def encode(line: str) -> bytes:
        try:
            return (line + "\n").encode(encoding)
        except UnicodeEncodeError:
            text = fallback(line) if fallback is not None else line
            return (text + "\n").encode(encoding, "backslashreplace")

    def write(line: str) -> None:
        data = encode(line)
        if fd is None:
            stream.write(data.decode(encoding))
            stream.flush()
            return
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    return write


STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that stop a server politely, with its final lines (SIGHUP does not exist on Windows)."""
_MAX_RECORD_CHARS = 4000  # a log record's text past this is cut: the outlet's memory stays bounded


def stop_signals(event: threading.Event) -> Callable[[], None]:
    """Make SIGINT (Ctrl-C), SIGTERM and SIGHUP set `event`, whatever handlers were installed before (a
    program started with SIGINT ignored gets no handler from Python). Returns the function that puts the
    previous handlers back. Outside the main thread, where handlers cannot be set, it changes nothing.

    The handler only writes a byte to a pipe; a thread of its own reads it and sets `event`. A handler runs in
    the main thread between two bytecodes, possibly while that thread holds the event's lock inside
    `event.wait()`: setting the event from there had deadlocked the gateway when signals came in a burst."""
    previous: dict[int, Any] = {}
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)

    def handler(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):  # a full pipe: a wake-up is already on its way
            os.write(wake_write, b"s")

    def wake() -> None:
        while (got := os.read(wake_read, 64)) and b"q" not in got:
            event.set()
        if b"s" in got:
            event.set()

    watcher = threading.Thread(target=wake, name="stop-signals", daemon=True)
    watcher.start()
    for sig in STOP_SIGNALS:
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            break
    restored = False

    def restore() -> None:
        nonlocal restored
        if restored:
            return
        restored = True
        for sig, old in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
        os.write(wake_write, b"q")  # the watcher's last read (no handler writes any more)
        watcher.join()
        os.close(wake_read)
        os.close(wake_write)

    return restore


class _OutletHandler(logging.Handler):
    """A logging handler that formats a record and queues it on an `Outlet`: `emit` never blocks."""

    def __init__(self, outlet: Outlet) -> None:
        super().__init__()
        self.outlet = outlet

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is lost, never the caller
            text = f"{record.levelname}:{record.name}: (a log record that could not be formatted)"
        if len(text) > _MAX_RECORD_CHARS:
            text = text[:_MAX_RECORD_CHARS] + f"... ({len(text) - _MAX_RECORD_CHARS} more characters)"
        self.outlet.put(text)


def route_logging(
    stream: TextIO, *, max_lines: int = 1000, name: str = "log-console"
) -> tuple[Outlet, Callable[[], None]]:
    """Send every log record (of any logger that propagates to the root, asyncio's included) and every Python
    warning to `stream` through an `Outlet`: the thread that logs only queues the line, so an unread stderr
    never blocks a server's event loop; past `max_lines` waiting, lines are dropped and their count reported.

    Returns the outlet (for lines of one's own, so they stay in order with the log) and the function that
    puts things back (the root logger's handlers, `logging.lastResort`, warnings' capture) and closes it."""
    write = stream_writer(stream)
    outlet = Outlet(
        write,
        max_lines=max_lines,
        name=name,
        notice=lambda n: f"{n} log line(s) dropped: nobody was reading them",
    )
    handler = _OutletHandler(outlet)
    handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
    root = logging.getLogger()
    before = (root.handlers[:], logging.lastResort)
    root.handlers[:] = [handler]  # a handler that writes to the stream itself would block as before
    logging.lastResort = handler  # for records of loggers that do not propagate and have no handler
    logging.captureWarnings(True)  # warnings.showwarning wrote straight to stderr

    def restore(timeout: float = 1.0) -> None:
        logging.captureWarnings(False)
        root.handlers[:], logging.lastResort = before
        outlet.close(timeout)

    return outlet, restore
