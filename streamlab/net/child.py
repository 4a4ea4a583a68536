"""Child processes the library starts (the model server, nginx, Caddy): stopped politely, then for sure (I/O layer).

Two things every such helper needs, written once: `end_process` (SIGTERM, a grace period, then SIGKILL, and the
process reaped, so no zombie and no port left held), and `StopAtExit`, the set of helpers still running that the
interpreter stops when it exits, so a script or a kernel that forgot to stop one leaves no orphan behind.
"""

from __future__ import annotations

import atexit
import subprocess
import threading
from typing import Generic, Protocol, TypeVar

__all__ = ["end_process", "StopAtExit"]


def end_process(process: subprocess.Popen[bytes] | subprocess.Popen[str], *, grace: float) -> None:
    """Terminate `process` (SIGTERM), kill it if it is still running `grace` seconds later, and reap it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class _Stoppable(Protocol):
    def stop(self) -> None: ...


S = TypeVar("S", bound=_Stoppable)


class StopAtExit(Generic[S]):
    """The running helpers of one kind; each one's `stop()` is called when the interpreter exits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[S] = set()
        atexit.register(self.stop_all)

    def add(self, helper: S) -> None:
        with self._lock:
            self._live.add(helper)

    def discard(self, helper: S) -> None:
        with self._lock:
            self._live.discard(helper)

    def stop_all(self) -> None:
        """Stop every helper still running (each `stop()` discards itself)."""
        with self._lock:
            live = list(self._live)
        for helper in live:
            helper.stop()
