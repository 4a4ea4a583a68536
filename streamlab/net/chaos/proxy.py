"""The chaos proxy: a TCP proxy that delays, slices, cuts, resets and stalls what passes (I/O layer).

It sits between any client and any server, and uses asyncio and the standard library only.

    with StandIn(scenario("ttft")) as server, \\
            ChaosProxy(upstream=("127.0.0.1", server.port), slice_sizes=(1, 8), seed=1) as proxy:
        client = openai.OpenAI(base_url=proxy.url("/v1"), api_key="stand-in")  # every byte crosses the faults
        ...
    proxy.records()  # one ConnectionRecord per connection: bytes each way, which fault fired, how it ended

Every decision about the bytes (how many pass, where writes are cut, when each is due) is made by the
sans-IO `streamlab.core.chaos`; this module carries them out and is the same whatever the options.

Theory of operation. Each accepted connection is a `_Link` with two directions, "up" (client -> server)
and "down" (server -> client). A direction is a reader task and a writer task joined by a bounded queue:
the reader reads a chunk, notes when it arrived, asks the direction's `DirectionFaults` what to do and
queues the answer; the writer makes each write when it is due and waits until the kernel has taken it
(write buffer high-water mark 0), so one planned write is one `send`, and `TCP_NODELAY` (asyncio's default)
keeps it one segment. The queue is what lets latency be a shift in time rather than a pause per chunk, and
its bound passes back-pressure to the sender.

How a connection ends is decided once (`_Link.finish`), then carried out (`_Link._teardown`):

    event                                            end            what the peers see
    both peers closed their side, all bytes passed   CLOSED         each end of stream passed on in order
    a cut fired in direction D                       CUT            FIN to both; D's receiver got exactly N bytes
    a reset fired in direction D                     RESET          RST to both, once D's N bytes were acknowledged
    a peer reset its connection                      *_GONE         RST passed on to the other peer
    a write to a peer failed                         *_GONE         the other peer's connection closed
    a peer closed while waiting on a stalled dir.    *_GONE         (it gave up) the other peer's connection closed
    the proxy stopped                                STOPPED        both connections closed at once

A stalled direction keeps reading and dropping what its sender writes, so the sender never blocks, and it
passes nothing on, not even the sender's end of stream: its receiver hears silence until it gives up.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from enum import Enum
from typing import Any, cast

from streamlab.core.chaos import (
    Action,
    Batch,
    ConnectionEnd,
    ConnectionRecord,
    Direction,
    FaultSpec,
    Fired,
    parse_hostport,
)
from streamlab.core.errors import FaultSpecError
from streamlab.net.chaos.book import ChaosBook, Tally
from streamlab.net.slot import Slot

try:  # unacknowledged bytes of a socket's send queue (Linux); elsewhere a reset waits a moment instead
    import fcntl
    import termios

    _TIOCOUTQ: int | None = termios.TIOCOUTQ
except (ImportError, AttributeError):
    _TIOCOUTQ = None

__all__ = ["ChaosProxy", "serve_chaos", "stop_chaos"]

UP, DOWN = Direction.UP, Direction.DOWN
READ_SIZE = 16 * 1024
QUEUE_DEPTH = 64  # chunks queued per direction before the reader stops reading (back-pressure)
CONNECT_TIMEOUT = 10.0  # seconds to reach the upstream server
LINGER = 2.0  # seconds a cut connection keeps reading both peers so that both get a clean FIN
ACK_WAIT = 2.0  # seconds a reset waits for the peer to acknowledge the last bytes before the RST
_EOF = object()


class _Teardown(Enum):
    """How `_Link._teardown` closes the two connections once their end is decided."""

    CLOSE = "close"  # close both (each gets a FIN, or a RST from its own kernel if it sent bytes not yet read)
    CUT = "cut"  # FIN to both, then read both until they close, so that neither gets a RST
    RESET = "reset"  # once the faulted direction's bytes are acknowledged, RST to both
    ABORT = "abort"  # close both at once, without waiting for anything (the proxy is stopping)


# --- one connection -------------------------------------------------------------------------------------------


def _source_gone(way: Direction) -> ConnectionEnd:
    return ConnectionEnd.CLIENT_GONE if way is UP else ConnectionEnd.SERVER_GONE


def _destination_gone(way: Direction) -> ConnectionEnd:
    return ConnectionEnd.SERVER_GONE if way is UP else ConnectionEnd.CLIENT_GONE


def _unacknowledged(writer: asyncio.StreamWriter) -> int | None:
    """Bytes in the socket's send queue not yet acknowledged by the peer (None when the OS cannot tell)."""
    sock = writer.get_extra_info("socket")
    if _TIOCOUTQ is None or sock is None:
        return None
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), _TIOCOUTQ, b"\0\0\0\0"))[0]
    except OSError:
        return None


def _arm_reset(writer: asyncio.StreamWriter | None) -> None:
    """SO_LINGER on, timeout 0: closing the socket now sends RST instead of FIN."""
    sock = writer.get_extra_info("socket") if writer is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


async def _read_to_end(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(OSError):
        while await reader.read(READ_SIZE):
            pass


class _Link:
    """One client connection and its upstream connection, with a reader and a writer task per direction."""

    def __init__(
        self, proxy: ChaosProxy, rec: Tally, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.proxy, self.book, self.rec = proxy, proxy._book, rec
        self.readers: dict[Direction, asyncio.StreamReader | None] = {UP: reader, DOWN: None}
        self.writers: dict[Direction, asyncio.StreamWriter | None] = {UP: None, DOWN: writer}  # by way written
        self.faults = {way: proxy.faults.for_connection(rec.number, way) for way in (UP, DOWN)}
        self.queues: dict[Direction, asyncio.Queue[object]] = {way: asyncio.Queue(QUEUE_DEPTH) for way in (UP, DOWN)}
        self.source_closed = {UP: False, DOWN: False}
        self.passed_eof = {UP: False, DOWN: False}
        self.decided: asyncio.Future[tuple[_Teardown, Direction | None]] = asyncio.get_running_loop().create_future()
        self.abort = asyncio.Event()
        self.error: BaseException | None = None
        self.book.plans(rec, {way: f.slices for way, f in self.faults.items()})

    def finish(self, end: ConnectionEnd, how: _Teardown = _Teardown.CLOSE, way: Direction | None = None) -> None:
        """Decide how the connection ends (the first decision wins); `run` carries it out."""
        if self.decided.done():
            return
        self.decided.set_result((how, way))
        self.book.ended(self.rec, end)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[None]] = []
        try:
            if await self._connect():
                for way in (UP, DOWN):
                    tasks += [loop.create_task(self._read(way)), loop.create_task(self._write(way))]
                    action = self.faults[way].at_start()
                    if action is not None:
                        self._fire(way, action)
                for task in tasks:
                    task.add_done_callback(self._task_done)
            how, side = await self.decided
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._teardown(how, side)
            if self.error is not None:
                raise self.error  # a bug in the proxy: asyncio logs it with its traceback
        finally:
            for task in tasks:
                task.cancel()
            await self._close_all()
            duration = loop.time() - self.rec.started
            self.book.closed(self.rec, duration)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None and self.error is None:
            self.error = task.exception()
            self.finish(ConnectionEnd.PROXY_ERROR, _Teardown.ABORT)

    async def _connect(self) -> bool:
        """Open the upstream connection; False when it failed (or the proxy stopped meanwhile)."""
        host, port = self.proxy.upstream
        connect = asyncio.ensure_future(asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT))
        either: set[asyncio.Future[Any]] = {connect, self.decided}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not connect.done():
            connect.cancel()
            await asyncio.wait({connect})
        if connect.cancelled():
            return False
        if connect.exception() is not None:
            self.finish(ConnectionEnd.CONNECT_ERROR)
            return False
        self.readers[DOWN], self.writers[UP] = connect.result()
        for writer in self.writers.values():
            assert writer is not None
            writer.transport.set_write_buffer_limits(high=0)  # drain() returns once the kernel has every byte
        return not self.decided.done()

    async def _read(self, way: Direction) -> None:
        """Read what the sender of `way` writes, ask the faults what to do with it, queue the answer."""
        reader, faults, queue = self.readers[way], self.faults[way], self.queues[way]
        assert reader is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await reader.read(READ_SIZE)
            except OSError:  # the sender reset its connection: pass the reset on
                self.finish(_source_gone(way), _Teardown.RESET)
                return
            if not data:
                await self._source_closed(way)
                return
            batch: Batch = faults.feed(data)
            if batch.dropped:
                self.book.dropped(self.rec, way, batch.dropped)
            if batch.pieces or batch.then is not None:
                await queue.put((loop.time(), batch))
            if batch.then in (Action.CUT, Action.RESET):
                return  # nothing more will pass; the teardown reads whatever else comes

    async def _source_closed(self, way: Direction) -> None:
        self.source_closed[way] = True
        self.book.sender_closed(self.rec, way)
        if self.faults[way.opposite].stalled:  # it was waiting on a stalled direction: it gave up
            self.finish(_source_gone(way))
        elif not self.faults[way].stalled:  # a stalled direction passes nothing, not even the end of stream
            await self.queues[way].put(_EOF)

    async def _write(self, way: Direction) -> None:
        """Make each queued write when it is due, then take the action that follows it, if any."""
        writer, queue = self.writers[way], self.queues[way]
        assert writer is not None
        loop = asyncio.get_running_loop()
        floor = 0.0  # no write before this time: keeps order under jitter, and the bandwidth's gaps
        while True:
            item = await queue.get()
            if item is _EOF:
                self._pass_eof(way, writer)
                return
            arrived, batch = cast("tuple[float, Batch]", item)  # what _read queues, besides _EOF
            for piece in batch.pieces:
                due = max(arrived + piece.delay, floor)
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
                if writer.transport.is_closing():
                    self.finish(_destination_gone(way))
                    return
                self.book.wrote(self.rec, way, len(piece.data))  # counted first: a reader may be quicker than us
                writer.write(piece.data)
                try:
                    await writer.drain()
                except OSError:
                    self.finish(_destination_gone(way))
                    return
                floor = max(due, loop.time() + piece.gap)
            if batch.then is not None:
                self._fire(way, batch.then)

    def _pass_eof(self, way: Direction, writer: asyncio.StreamWriter) -> None:
        if not writer.transport.is_closing() and writer.can_write_eof():
            with contextlib.suppress(OSError):
                writer.write_eof()
        self.passed_eof[way] = True
        if all(self.passed_eof.values()):
            self.finish(ConnectionEnd.CLOSED)

    def _fire(self, way: Direction, action: Action) -> None:
        """The limit of `way` was reached and its last byte delivered: record it and act."""
        fired = Fired(way, action, self.faults[way].passed)
        self.book.fired(self.rec, fired)
        if action is Action.CUT:
            self.finish(ConnectionEnd.CUT, _Teardown.CUT, way)
        elif action is Action.RESET:
            self.finish(ConnectionEnd.RESET, _Teardown.RESET, way)
        elif self.source_closed[way.opposite]:  # a stall whose receiver has already closed its side
            self.finish(_destination_gone(way))

    async def _teardown(self, how: _Teardown, way: Direction | None) -> None:
        writers = [w for w in self.writers.values() if w is not None]
        if how is _Teardown.CUT:
            for writer in writers:
                if not writer.transport.is_closing() and writer.can_write_eof():
                    with contextlib.suppress(OSError):
                        writer.write_eof()
            await self._linger()
        elif how is _Teardown.RESET:
            if way is not None:
                await self._wait_acknowledged(self.writers[way])
            for writer in writers:
                _arm_reset(writer)
                writer.transport.abort()
        elif how is _Teardown.ABORT:
            for writer in writers:
                writer.transport.abort()

    async def _linger(self) -> None:
        readers = [r for r in self.readers.values() if r is not None]
        both = asyncio.ensure_future(asyncio.gather(*(_read_to_end(r) for r in readers)))
        stop = asyncio.ensure_future(self.abort.wait())
        either: set[asyncio.Future[Any]] = {both, stop}
        await asyncio.wait(either, timeout=LINGER, return_when=asyncio.FIRST_COMPLETED)
        for task in (both, stop):
            task.cancel()
        await asyncio.gather(both, stop, return_exceptions=True)

    async def _wait_acknowledged(self, writer: asyncio.StreamWriter | None) -> None:
        """Wait until the peer has acknowledged every byte sent, so that the RST cannot overtake them."""
        if writer is None or writer.transport.is_closing():
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ACK_WAIT
        if _unacknowledged(writer) is None:  # the OS cannot tell: give the bytes a moment instead
            await asyncio.sleep(0.05)
        while (_unacknowledged(writer) or 0) > 0 and loop.time() < deadline and not self.abort.is_set():
            await asyncio.sleep(0.001)

    async def _close_all(self) -> None:
        for writer in (w for w in self.writers.values() if w is not None):
            if writer.transport.get_write_buffer_size():
                writer.transport.abort()  # a peer that does not read must not hold the proxy open
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


# --- the proxy ------------------------------------------------------------------------------------------------


class ChaosProxy:
    """A TCP proxy on `host:port` (default 127.0.0.1, a free port) forwarding to `upstream` with faults.

    `upstream` is (host, port) or "HOST:PORT". The fault options are those of `FaultSpec` (and of
    `streamlab chaos`): `direction` ("down" = server -> client, "up", "both"), `seed`, `latency_ms`,
    `jitter_ms`, `bandwidth` (bytes/s), `slice_sizes` (MIN, MAX), `slice_delay_ms`, and one of `cut_after`,
    `reset_after`, `stall_after` (bytes). Each connection gets its own counters and its own generators,
    seeded from (seed, connection number). Bad options raise `FaultSpecError` naming the option.

    Sync use (a notebook, a test): `with ChaosProxy(...) as proxy:` or `start()` / `stop()`; the proxy runs
    its own event loop in a background thread. Async use: `async with ChaosProxy(...) as proxy:` or
    `await astart()` / `await astop()`, in the running loop. Stopping closes every connection through it.
    """

    def __init__(
        self,
        upstream: tuple[str, int] | str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        direction: Direction | str = Direction.DOWN,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        bandwidth: int | None = None,
        slice_sizes: tuple[int, int] | None = None,
        slice_delay_ms: float = 0.0,
        cut_after: int | None = None,
        reset_after: int | None = None,
        stall_after: int | None = None,
    ) -> None:
        if isinstance(upstream, str):
            upstream = parse_hostport(upstream, option="upstream")
        elif not (
            isinstance(upstream, tuple)
            and len(upstream) == 2
            and isinstance(upstream[1], int)
            and 0 < upstream[1] < 65536
        ):
            raise FaultSpecError("upstream", upstream, "expected (host, port) or 'HOST:PORT'")
        self.upstream: tuple[str, int] = (str(upstream[0]), upstream[1])
        self.host = host
        self._wanted_port = port
        self.faults = FaultSpec(
            direction=cast(Direction, direction),  # a str is validated by FaultSpec (FaultSpecError if wrong)
            seed=seed,
            latency_ms=latency_ms,
            jitter_ms=jitter_ms,
            bandwidth=bandwidth,
            slice_sizes=slice_sizes,
            slice_delay_ms=slice_delay_ms,
            cut_after=cut_after,
            reset_after=reset_after,
            stall_after=stall_after,
        )
        self._book = ChaosBook()
        self._server: asyncio.AbstractServer | None = None
        self._address: tuple[str, int] | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[object]] = set()
        self._stopping = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._failure: BaseException | None = None

    def __repr__(self) -> str:
        where = f"{self._address[0]}:{self._address[1]}" if self._address else "not running"
        return f"<ChaosProxy {where} -> {self.upstream[0]}:{self.upstream[1]} ({self.faults.describe()})>"

    # -- where it listens --

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the proxy listens on."""
        if self._address is None:
            raise RuntimeError("the ChaosProxy is not running; use `with ChaosProxy(...)` or start()")
        return self._address

    @property
    def port(self) -> int:
        return self.address[1]

    def url(self, path: str = "", *, scheme: str = "http") -> str:
        """A URL through the proxy, e.g. `proxy.url("/v1")` as an OpenAI client's base_url."""
        host, port = self.address
        host = f"[{host}]" if ":" in host else host
        return f"{scheme}://{host}:{port}{path}"

    # -- records --

    def records(self) -> list[ConnectionRecord]:
        """A snapshot of every connection's record, in accept order."""
        return self._book.snapshot()

    def wait_until(self, predicate: Callable[[list[ConnectionRecord]], bool], timeout: float = 5.0) -> bool:
        """Block until `predicate(records)` holds (True) or `timeout` seconds pass (False). For sync callers:
        in the proxy's own event loop it would block the loop; poll `records()` there instead."""
        return self._book.wait_until(predicate, timeout)

    # -- async lifecycle (in the running loop) --

    async def astart(self) -> ChaosProxy:
        """Start listening in the running event loop. Returns self."""
        if self._server is not None:
            return self
        self._stopping = False
        self._server = await asyncio.start_server(self._on_client, self.host, self._wanted_port)
        self._address = tuple(self._server.sockets[0].getsockname()[:2])
        self._loop = asyncio.get_running_loop()
        return self

    async def astop(self) -> None:
        """Stop listening, close every connection through the proxy (ending STOPPED) and wait for them."""
        server = self._server
        if server is None:
            return
        self._stopping = True
        server.close()
        while self._tasks:
            for link in list(self._links):
                link.finish(ConnectionEnd.STOPPED, _Teardown.ABORT)
                link.abort.set()
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await server.wait_closed()
        self._server = None

    async def __aenter__(self) -> ChaosProxy:
        return await self.astart()

    async def __aexit__(self, *exc: object) -> None:
        await self.astop()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if self._stopping:
                writer.transport.abort()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
                return
            peer = writer.get_extra_info("peername") or ("?", 0)
            rec = self._book.open((str(peer[0]), int(peer[1])), asyncio.get_running_loop().time())
            link = _Link(self, rec, reader, writer)
            self._links.add(link)
            try:
                await link.run()
            except Exception as exc:  # a bug in the proxy: say so loudly, keep serving the other connections
                asyncio.get_running_loop().call_exception_handler(
                    {"message": f"streamlab chaos proxy: connection #{rec.number} failed", "exception": exc}
                )
            finally:
                self._links.discard(link)
        finally:
            self._tasks.discard(task)

    # -- sync lifecycle (an event loop in a background thread) --

    def start(self) -> ChaosProxy:
        """Start the proxy in a background thread with its own event loop; returns once it listens."""
        with self._lock:
            if self._thread is not None:
                return self
            if self._server is not None:
                raise RuntimeError("this ChaosProxy was started with `await astart()`; it already runs")
            ready = threading.Event()
            self._failure = None
            thread = threading.Thread(
                target=asyncio.run, args=(self._serve_in_thread(ready),), name="streamlab-chaos", daemon=True
            )
            thread.start()
            ready.wait()
            if self._failure is not None:
                thread.join()
                raise self._failure
            self._thread = thread
        return self

    async def _serve_in_thread(self, ready: threading.Event) -> None:
        self._wake = asyncio.Event()
        try:
            await self.astart()
        except Exception as exc:  # handed to start(), which raises it in the caller's thread
            self._failure = exc
            ready.set()
            return
        ready.set()
        await self._wake.wait()
        await self.astop()

    def stop(self) -> None:
        """Stop the background proxy: close every connection and join its thread. Idempotent."""
        with self._lock:
            thread = self._thread
            if thread is None:
                if self._server is not None:
                    raise RuntimeError("this ChaosProxy was started with `await astart()`; use `await astop()`")
                return
            if threading.current_thread() is thread:
                raise RuntimeError("stop() called from the proxy's own thread; use `await astop()` there")
            assert self._loop is not None and self._wake is not None
            self._loop.call_soon_threadsafe(self._wake.set)
            thread.join()
            self._thread = None
            self._loop = None

    def __enter__(self) -> ChaosProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- the notebook helper --------------------------------------------------------------------------------------

_SLOT: Slot[ChaosProxy] = Slot()


def serve_chaos(proxy: ChaosProxy) -> ChaosProxy:
    """Start `proxy` for a notebook, first stopping the one a previous call started, and return it:

        proxy = serve_chaos(ChaosProxy(upstream=("127.0.0.1", server.port), cut_after=2000))

    Re-running the cell therefore never leaks a proxy (at most one per process), and it is stopped when the
    interpreter exits.
    """
    return _SLOT.put(proxy.start)


def stop_chaos() -> None:
    """Stop the proxy `serve_chaos()` started, if any."""
    _SLOT.clear()
