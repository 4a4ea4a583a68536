"""One running server of a kind per process, for notebooks: the helper behind every `serve_x()` (I/O layer).

A notebook cell that starts a server is re-run: the server it started before must stop first, or its
thread and socket leak. `Slot.put` does that in one place for the relay, the gateway, the chaos proxy, the
gateway bench and the model server (the stand-in's `serve()` keeps its own, older twin of the same rule,
with the same helper below): it stops the server it holds, starts the new one and holds it; `clear`
stops it; the last one is also stopped when the interpreter exits.

`interrupts_held()`: Ctrl-C (a `KeyboardInterrupt`) that lands while the old server stops or the new one
  starts is held until both are done, then raised. Raised in the middle, it had left a half-stopped server
  holding its port, which the slot no longer knew about: every later `serve(port=N)` failed (13 of 13). A
  second Ctrl-C while one is held is raised at once, for a start that really hangs.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Slot", "interrupts_held"]


class _Stoppable(Protocol):
    def stop(self) -> None: ...


_S = TypeVar("_S", bound=_Stoppable)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) for the duration of the block and raise `KeyboardInterrupt` after it, so that a
    server is never left half-stopped or started and unheld. A second Ctrl-C is raised at once. Outside the
    main thread (where no signal arrives) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        if held:
            raise KeyboardInterrupt
        held.append(signum)

    try:
        previous = signal.signal(signal.SIGINT, hold)
    except ValueError:  # an embedding program that keeps signals to itself
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        raise KeyboardInterrupt


class Slot(Generic[_S]):
    """At most one running server of a kind in this process, for notebooks: `put` stops the previous one first.

    `serve_relay`, `serve_gateway`, `serve_chaos`, `serve_bench` and `serve_model` are each a `Slot`'s `put`
    with a new server, and their `stop_x` is its `clear`; the last server is also stopped at exit. Ctrl-C
    during `put` or `clear` is held until they are done (`interrupts_held`).
    """

    def __init__(self) -> None:
        self._current: _S | None = None
        self._lock = threading.Lock()
        atexit.register(self.clear)

    def put(self, start: Callable[[], _S]) -> _S:
        """Stop the server held now (if any), then start a new one with `start()` and hold it."""
        with interrupts_held(), self._lock:
            if self._current is not None:
                old, self._current = self._current, None
                old.stop()
            self._current = start()
            return self._current

    def clear(self) -> None:
        """Stop the server held now, if any."""
        with interrupts_held(), self._lock:
            if self._current is not None:
                old, self._current = self._current, None
                old.stop()

    @property
    def current(self) -> _S | None:
        return self._current
