"""A bench for breaking a gateway on purpose: two scripted upstreams, a chaos proxy, a gateway (I/O layer).

    primary stand-in  <-  chaos proxy  <-  gateway  ->  backup stand-in
                                              ^
                                        your client (the SDK)

The primary is reached through a chaos proxy (`streamlab.net.chaos.proxy.ChaosProxy`), so its bytes can be cut,
reset or stalled anywhere (`set_faults` restarts the proxy on the same port with new faults; the gateway never
notices the swap); both stand-ins follow their scripts (`streamlab.net.standin.server`: 429 storms, resets, stalls,
all per model and per API key). The gateway's breakers read `clock`, a `ManualClock` by default, so a
cool-down passes when you say so (`bench.clock.advance(30)`), not after thirty real seconds.

`response_offsets(frames)` says where, in the bytes the proxy passes down, the response head ends and the
first event is complete, so a fault can be aimed on either side of the gateway's commit point.
In a notebook use `serve_bench(...)`: it stops the bench the previous call started.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from streamlab.core.standin.room import UsagePolicy
from streamlab.core.standin.script import ScriptValue
from streamlab.net.chaos.proxy import ChaosProxy
from streamlab.net.gateway.app import Gateway, ManualClock
from streamlab.net.slot import Slot
from streamlab.net.standin.server import StandIn

__all__ = ["GatewayBench", "serve_bench", "stop_bench", "Offsets", "response_offsets"]


@dataclass(frozen=True)
class Offsets:
    """Byte offsets in a stand-in's HTTP response as it crosses the wire: `head` bytes of status line and
    headers; frame k is complete after `frames[k]` bytes (the first event after `first_event`); `total` bytes
    in all."""

    head: int
    frames: tuple[int, ...]
    total: int

    @property
    def first_event(self) -> int:
        return self.frames[0]


def response_offsets(frames: Sequence[bytes], total: int) -> Offsets:
    """Where the head ends and each frame is complete in a response of `total` bytes whose body is `frames`,
    each sent as one HTTP chunk (`Send`: size line, data, CRLF), then the terminating zero-length chunk."""

    def chunk(frame: bytes) -> int:
        return len(f"{len(frame):x}") + 2 + len(frame) + 2

    body = sum(chunk(f) for f in frames) + len(b"0\r\n\r\n")
    head = total - body
    if head <= 0 or not frames:
        raise ValueError(f"{total} bytes cannot hold a head and a chunked body of {len(frames)} frame(s)")
    ends, at = [], head
    for frame in frames:
        ends.append(at + chunk(frame) - 2)  # the frame's last byte; its chunk's CRLF follows
        at += chunk(frame)
    return Offsets(head, tuple(ends), total)


class GatewayBench:
    """Two stand-ins (`primary` through a chaos proxy, `backup` direct) and a gateway over them.

    `primary` and `backup` are stand-in scripts. `keepalive`, `read_timeout`, `failure_threshold`,
    `cooldown` go to the gateway, `clock` is its breakers' clock (default: a new `ManualClock`, also at
    `bench.clock`). `usage` is the stand-ins' usage policy. Use as a context manager or start()/stop().
    """

    def __init__(
        self,
        primary: Mapping[str, ScriptValue],
        backup: Mapping[str, ScriptValue],
        *,
        keepalive: float | None = 0.25,
        read_timeout: float = 1.0,
        failure_threshold: int = 3,
        cooldown: float = 30.0,
        clock: Callable[[], float] | None = None,
        usage: UsagePolicy = "scripted",
    ) -> None:
        self.clock = ManualClock() if clock is None else clock
        self._scripts = (primary, backup)
        self.keepalive, self.read_timeout = keepalive, read_timeout
        self.failure_threshold, self.cooldown = failure_threshold, cooldown
        self._usage: UsagePolicy = usage
        self.primary: StandIn | None = None
        self.backup: StandIn | None = None
        self.proxy: ChaosProxy | None = None
        self.gateway: Gateway | None = None

    def start(self) -> GatewayBench:
        try:
            self.primary = StandIn(self._scripts[0], usage=self._usage).start()
            self.backup = StandIn(self._scripts[1], usage=self._usage).start()
            self.proxy = ChaosProxy(("127.0.0.1", self.primary.port)).start()
            self.gateway = Gateway(
                [f"primary={self.proxy.url('/v1')}", f"backup={self.backup.base_url}"],
                keepalive=self.keepalive,
                read_timeout=self.read_timeout,
                failure_threshold=self.failure_threshold,
                cooldown=self.cooldown,
                clock=self.clock,
            ).start()
        except BaseException:
            self.stop()
            raise
        return self

    def set_faults(
        self,
        *,
        cut_after: int | None = None,
        reset_after: int | None = None,
        stall_after: int | None = None,
        latency_ms: float = 0.0,
        slice_sizes: tuple[int, int] | None = None,
        direction: str = "down",
        seed: int = 0,
    ) -> ChaosProxy:
        """Restart the chaos proxy in front of the primary, on the same port, with these faults (none: a clean
        path). Options as `ChaosProxy`'s; each connection gets its own byte counts."""
        if self.proxy is None or self.primary is None:
            raise RuntimeError("the bench is not running; call start() or use `with GatewayBench(...)`")
        port = self.proxy.port
        self.proxy.stop()
        self.proxy = ChaosProxy(
            ("127.0.0.1", self.primary.port),
            port=port,
            cut_after=cut_after,
            reset_after=reset_after,
            stall_after=stall_after,
            latency_ms=latency_ms,
            slice_sizes=slice_sizes,
            direction=direction,
            seed=seed,
        ).start()
        return self.proxy

    def stop(self) -> None:
        """Stop the gateway, the proxy and both stand-ins. Idempotent."""
        for part in ("gateway", "proxy", "backup", "primary"):
            server = getattr(self, part)
            if server is not None:
                server.stop()
                setattr(self, part, None)

    def __enter__(self) -> GatewayBench:
        return self.start() if self.gateway is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_SLOT: Slot[GatewayBench] = Slot()


def serve_bench(
    primary: Mapping[str, ScriptValue],
    backup: Mapping[str, ScriptValue],
    *,
    keepalive: float | None = 0.25,
    read_timeout: float = 1.0,
    failure_threshold: int = 3,
    cooldown: float = 30.0,
    clock: Callable[[], float] | None = None,
    usage: UsagePolicy = "scripted",
) -> GatewayBench:
    """Start a bench for a notebook, first stopping the one a previous call started (at most one per process,
    also stopped when the interpreter exits)."""
    return _SLOT.put(
        lambda: GatewayBench(
            primary,
            backup,
            keepalive=keepalive,
            read_timeout=read_timeout,
            failure_threshold=failure_threshold,
            cooldown=cooldown,
            clock=clock,
            usage=usage,
        ).start()
    )


def stop_bench() -> None:
    """Stop the bench `serve_bench()` started, if any."""
    _SLOT.clear()
