"""Any ASGI app under uvicorn on a background thread, and what the relay and the gateway share (I/O layer).

`AppServer` serves one ASGI app on a socket bound in the caller's thread; `ServedApp` is the base of `Relay` and
`Gateway` (start, stop running streams with their marked final event, keep the last `MAX_RECORDS` finished
records in order for callers: a ring, since a server that runs all day must not keep every summary).
The notebook helpers around them (`serve_relay`, `serve_gateway`) hold their server in a
`streamlab.net.slot.Slot`.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import uvicorn

__all__ = ["AppServer", "ServedApp", "MAX_RECORDS"]

MAX_RECORDS = 10_000
"""Finished records (summaries, log lines) a relay or gateway keeps for callers; older ones are forgotten."""


class AppServer:
    """Any ASGI app under uvicorn on a background thread, as a context manager (the reference relay runs on
    one; so do the checker's tests' deliberately broken relays).

    It binds in `start()`, in the caller's thread, so a busy port fails there; `port` and `url` say where it
    listens. `stop()` asks uvicorn to exit (streams still running get `graceful` seconds, then are
    cancelled), joins the thread and closes the socket.
    """

    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int = 0, graceful: float = 2.0, name: str = "asgi"
    ) -> None:
        self.app = app
        self.host = host
        self._requested_port = port
        self._graceful = graceful
        self._name = name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    def start(self) -> AppServer:
        if self._server is not None:
            raise RuntimeError("this server is already started")
        # IPPROTO_TCP, not 0: accepted sockets inherit the protocol, and asyncio turns Nagle's algorithm off
        # (TCP_NODELAY) only on sockets whose proto says TCP. With proto 0 a head and a chunk written back to back
        # waited for the client's delayed ACK: tens of milliseconds added to the time to first token.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._requested_port))
            sock.listen(256)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level="critical",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=int(self._graceful) or 1,
            http="h11",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"{self._name}:{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the {self._name} server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving and join the thread. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def __enter__(self) -> AppServer:
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("the server is not running; call start() or use it as a context manager")
        return int(self._sock.getsockname()[1])

    @property
    def url(self) -> str:
        """`http://HOST:PORT` (a wildcard host is given as 127.0.0.1)."""
        host = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}"


_Served = TypeVar("_Served", bound="ServedApp")


class ServedApp:
    """What the relay and the gateway share: an ASGI app served by `AppServer` on a background thread, as a
    context manager, and the finished streams' records (summaries, log lines) kept in order for callers.

    A subclass builds its app, then calls `_serve(app, state, ...)`, where `state` carries the app's event loop
    and `stopping` event once it runs; `_record` is what the app calls with each finished stream's record.
    """

    def _serve(
        self,
        app: Any,
        state: Any,
        *,
        host: str,
        port: int,
        name: str,
        on_record: Callable[[dict[str, Any]], None] | None,
        max_records: int = MAX_RECORDS,
    ) -> None:
        self._app = app
        self._state = state
        self._on_record = on_record
        self._records: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_records)
        self._count = 0  # records ever written (the ring forgets, this does not)
        self._cond = threading.Condition()
        self._server = AppServer(app, host=host, port=port, name=name)

    def _record(self, record: dict[str, Any]) -> None:
        with self._cond:
            self._records.append(record)
            self._count += 1
            self._cond.notify_all()
        if self._on_record is not None:
            self._on_record(record)

    def _recorded(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._records)

    def _wait_for_records(self, count: int, timeout: float) -> bool:
        """Block until at least `count` records were ever written (forgotten ones count); False on timeout."""
        end = time.monotonic() + timeout
        with self._cond:
            while self._count < count:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def start(self: _Served) -> _Served:
        """Bind (a busy port fails here, in the caller's thread) and serve on a background thread."""
        self._server.start()
        return self

    def stop(self) -> None:
        """End running streams (each gets its marked final event), stop serving, join the thread. Idempotent."""
        if not self._server.running:
            return
        state = self._state
        if state.loop is not None and state.stopping is not None and not state.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop may close between the check and the call
                state.loop.call_soon_threadsafe(state.stopping.set)
        self._server.stop()

    def __enter__(self: _Served) -> _Served:
        if not self._server.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def base_url(self) -> str:
        """What a client uses as its base URL: `http://HOST:PORT/v1`."""
        return f"{self._server.url}/v1"
