"""One running server of a kind per process, for notebooks: the helper behind every `serve_x()` (I/O layer).

A notebook cell that starts a server is re-run: the server it started before must stop first, or its
thread and socket leak. `Slot.put` does that in one place for the relay, the gateway, the chaos proxy, the
gateway bench and the model server (the stand-in's `serve()` keeps its own, older twin of the same rule):
it stops the server it holds, starts the new one and holds it; `clear` stops it; the last one is also
stopped when the interpreter exits.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["Slot"]


class _Stoppable(Protocol):
    def stop(self) -> None: ...


_S = TypeVar("_S", bound=_Stoppable)


class Slot(Generic[_S]):
    """At most one running server of a kind in this process, for notebooks: `put` stops the previous one first.

    `serve_relay`, `serve_gateway`, `serve_chaos`, `serve_bench` and `serve_model` are each a `Slot`'s `put`
    with a new server, and their `stop_x` is its `clear`; the last server is also stopped at exit.
    """

    def __init__(self) -> None:
        self._current: _S | None = None
        self._lock = threading.Lock()
        atexit.register(self.clear)

    def put(self, start: Callable[[], _S]) -> _S:
        """Stop the server held now (if any), then start a new one with `start()` and hold it."""
        with self._lock:
            if self._current is not None:
                self._current.stop()
                self._current = None
            self._current = start()
            return self._current

    def clear(self) -> None:
        """Stop the server held now, if any."""
        with self._lock:
            if self._current is not None:
                self._current.stop()
                self._current = None

    @property
    def current(self) -> _S | None:
        return self._current
