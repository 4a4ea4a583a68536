"""Chaos faults decided without I/O: what happens to the bytes of one direction of one TCP connection (sans-IO core).

Theory of operation
-------------------
The chaos proxy (`streamlab.net.chaos.proxy`) reads bytes from one peer and writes them to the other. This module
makes every decision about those bytes; the proxy only carries them out with sockets and a clock. A
`FaultSpec` holds the options (the same ones as `streamlab chaos`). Each direction of each connection gets its
own `DirectionFaults`, fed every chunk the proxy reads and answering with a `Batch`: the writes to make
(`Piece`s, each with its delay and the gap that must follow it), how many bytes it dropped, and the action
(`Action`: cut, reset, stall) to take once those writes are delivered.

Directions are named from the client's side, as toxiproxy does: "up" is client -> server (the request),
"down" is server -> client (the response, where the SSE stream travels), "both" applies the faults to each
direction independently, with its own byte counter and its own random generator.

The faults compose in one fixed order (`ORDER`), applied to each chunk as it is read:

    1. limit      cut / reset / stall after N bytes: how many of the chunk's bytes will ever pass. Once N bytes
                  have passed, every later byte is dropped, and the action fires after the Nth byte is delivered.
    2. slice      the passing bytes are cut into writes of MIN..MAX bytes. The sizes come from a seeded
                  generator and are laid over the stream, not over each chunk, so the cuts fall at the same
                  stream offsets whatever the timing (a chunk boundary can only add a cut). MIN=1 puts cuts
                  inside UTF-8 characters, between CR and LF, anywhere.
    3. bandwidth  a write longer than a tenth of a second's worth of bytes is split further, and each write
                  reserves len/rate seconds before the next one may start (plus the slice delay, if any).
    4. latency    each write is due `latency ± jitter` after its bytes arrived at the proxy. This is a shift
                  in time, as on a long cable, not a pause per write: it does not accumulate, and order is kept.

Determinism: every random decision comes from a `random.Random` seeded with (seed, connection number,
direction, purpose), so the same seed and the same bytes give the same slice sizes and jitter draws, and
connection 3 of a run decides the same way as connection 3 of the next run. Nothing here reads a clock.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from streamlab.core.errors import FaultSpecError
from streamlab.core.words import Word

__all__ = [
    "Direction",
    "Action",
    "ConnectionEnd",
    "ORDER",
    "Fired",
    "ConnectionRecord",
    "FaultSpec",
    "Piece",
    "Batch",
    "SlicePlan",
    "DirectionFaults",
    "parse_hostport",
    "parse_latency",
    "parse_slice",
    "parse_byte_count",
    "parse_bandwidth",
]

ORDER = ("limit", "slice", "bandwidth", "latency")
"""The fixed order in which the faults act on each chunk (see the module docstring)."""

BANDWIDTH_QUANTUM = 0.1
"""Seconds' worth of bytes in one write under a bandwidth limit: large chunks are paced, not sent in one go."""


class Direction(Word):
    """Which bytes a fault touches, named from the client's side."""

    UP = "up"  # client -> server: the request
    DOWN = "down"  # server -> client: the response (the SSE stream)
    BOTH = "both"  # each direction, independently

    @property
    def ways(self) -> tuple[Direction, ...]:
        """The one-way directions this covers: (UP,), (DOWN,) or (UP, DOWN)."""
        return (Direction.UP, Direction.DOWN) if self is Direction.BOTH else (self,)

    @property
    def opposite(self) -> Direction:
        """DOWN for UP and UP for DOWN (BOTH has no opposite)."""
        if self is Direction.BOTH:
            raise ValueError("Direction.BOTH has no opposite")
        return Direction.DOWN if self is Direction.UP else Direction.UP


class Action(Word):
    """What happens when a direction's byte limit is reached."""

    CUT = "cut"  # a clean close (FIN) after exactly N bytes, like toxiproxy's limit_data
    RESET = "reset"  # a TCP reset (RST) after exactly N bytes, like toxiproxy's reset_peer
    STALL = "stall"  # nothing more passes, the connection stays open, like toxiproxy's timeout with 0


class ConnectionEnd(Word):
    """How a TCP connection through the chaos proxy ended (a connection, not an SSE stream: a stream's ending
    is `streamlab.core.endings.Ending`; the words are the same where the meaning is)."""

    OPEN = "open"  # still running
    CLOSED = "closed"  # both peers closed their side; every byte passed
    CUT = "cut"  # a cut fault fired: both peers got a FIN
    RESET = "reset"  # a reset fault fired: both peers got a RST
    CLIENT_GONE = "client_gone"  # the client closed or reset while the proxy still had a job to do
    SERVER_GONE = "server_gone"  # the server did
    STOPPED = "stopped"  # the proxy was stopped with the connection open
    CONNECT_ERROR = "connect_error"  # the upstream server could not be reached; the client was closed
    PROXY_ERROR = "proxy_error"  # the proxy itself failed (a bug): both closed, the exception raised and logged


@dataclass(frozen=True)
class Fired:
    """A fault that fired on a connection: which direction, which action, after how many bytes delivered."""

    way: Direction
    action: Action
    at: int

    def __str__(self) -> str:
        return f"{self.action} {self.way} after {self.at} bytes"


@dataclass(frozen=True)
class ConnectionRecord:
    """What happened to one connection through the chaos proxy (a snapshot: `ChaosProxy.records()` makes them).

    `bytes_up` / `bytes_down` count bytes handed to the server's / the client's socket (counted just before
    each write, so a record never lags behind what a peer has read), `dropped_*` bytes the faults
    held back for good; `writes_*` are the sizes of the first writes made, `slices_*` the first slice sizes
    the seeded plan drew; `fired` lists the faults that fired; `client_closed` / `server_closed` say that the
    proxy saw that peer end its sending side (whether or not the end was passed on); `end` says how the
    connection ended (OPEN while it runs); `closed` turns True once both sockets are closed; `duration` is
    seconds from accept to close.
    """

    number: int
    client: tuple[str, int]
    bytes_up: int = 0
    bytes_down: int = 0
    dropped_up: int = 0
    dropped_down: int = 0
    writes_up: tuple[int, ...] = ()
    writes_down: tuple[int, ...] = ()
    slices_up: tuple[int, ...] = ()
    slices_down: tuple[int, ...] = ()
    fired: tuple[Fired, ...] = ()
    client_closed: bool = False
    server_closed: bool = False
    end: ConnectionEnd = ConnectionEnd.OPEN
    closed: bool = False
    duration: float | None = None

    @property
    def finished(self) -> bool:
        """True once the proxy has decided how the connection ends."""
        return self.end is not ConnectionEnd.OPEN

    def line(self) -> str:
        """One line for a log: number, client, bytes each way, faults fired, ending."""
        fired = ", ".join(str(f) for f in self.fired) or "no fault fired"
        return (
            f"#{self.number} {self.client[0]}:{self.client[1]}  up {self.bytes_up} B  down {self.bytes_down} B"
            f"  {fired}  -> {self.end}"
        )


# --- the options --------------------------------------------------------------------------------------------


def _check_count(name: str, value: int | None, *, minimum: int = 0) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise FaultSpecError(name, value, "must be a whole number (int)")
    if value < minimum:
        raise FaultSpecError(name, value, f"must be {minimum} or more")


def _check_ms(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FaultSpecError(name, value, "must be a number of milliseconds")
    if not value >= 0 or value == float("inf"):  # also refuses NaN
        raise FaultSpecError(name, value, "must be a finite number of milliseconds, 0 or more")


@dataclass(frozen=True)
class FaultSpec:
    """The faults a chaos proxy applies: the same options as `streamlab chaos`, validated once.

    `direction` ("down", "up" or "both") says which bytes they touch; `latency_ms` and `jitter_ms` delay each
    write by latency ± jitter milliseconds; `bandwidth` caps bytes per second; `slice_sizes=(MIN, MAX)` cuts
    the bytes into writes of MIN..MAX bytes, `slice_delay_ms` apart; `cut_after`, `reset_after` and
    `stall_after` end a direction after that many bytes (at most one of the three: each ends the direction).
    `seed` makes every random decision repeatable. Bad values raise `FaultSpecError` naming the parameter.
    """

    direction: Direction = Direction.DOWN
    seed: int = 0
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    bandwidth: int | None = None
    slice_sizes: tuple[int, int] | None = None
    slice_delay_ms: float = 0.0
    cut_after: int | None = None
    reset_after: int | None = None
    stall_after: int | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "direction", Direction(self.direction))
        except ValueError:
            raise FaultSpecError("direction", self.direction, "must be 'down', 'up' or 'both'") from None
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise FaultSpecError("seed", self.seed, "must be a whole number (int)")
        _check_ms("latency_ms", self.latency_ms)
        _check_ms("jitter_ms", self.jitter_ms)
        _check_ms("slice_delay_ms", self.slice_delay_ms)
        _check_count("bandwidth", self.bandwidth, minimum=1)
        if self.slice_sizes is not None:
            sizes = tuple(self.slice_sizes)
            if len(sizes) != 2:
                raise FaultSpecError("slice_sizes", self.slice_sizes, "must be a pair (MIN, MAX)")
            _check_count("slice_sizes", sizes[0], minimum=1)
            _check_count("slice_sizes", sizes[1], minimum=1)
            if sizes[0] > sizes[1]:
                raise FaultSpecError("slice_sizes", self.slice_sizes, "MIN must not be larger than MAX")
            object.__setattr__(self, "slice_sizes", sizes)
        elif self.slice_delay_ms:
            raise FaultSpecError("slice_delay_ms", self.slice_delay_ms, "needs slice_sizes")
        limits = [name for name in ("cut_after", "reset_after", "stall_after") if getattr(self, name) is not None]
        for name in limits:
            _check_count(name, getattr(self, name))
        if len(limits) > 1:
            raise FaultSpecError(
                limits[1],
                getattr(self, limits[1]),
                f"only one of cut_after, reset_after, stall_after may be set (also got {limits[0]})",
            )

    @property
    def limit(self) -> tuple[Action, int] | None:
        """The terminal fault and its byte count, or None."""
        for action, value in (
            (Action.CUT, self.cut_after),
            (Action.RESET, self.reset_after),
            (Action.STALL, self.stall_after),
        ):
            if value is not None:
                return action, value
        return None

    @property
    def active(self) -> bool:
        """True when any fault is set (a spec with none makes a plain proxy)."""
        return bool(self.latency_ms or self.jitter_ms or self.bandwidth or self.slice_sizes or self.limit)

    def describe(self) -> str:
        """One line naming every fault that is set, e.g. "down: slices of 1-8 bytes, cut after 1000 bytes; seed 1"."""
        parts = []
        if self.latency_ms or self.jitter_ms:
            parts.append(f"latency {self.latency_ms:g} ms ± {self.jitter_ms:g} ms")
        if self.bandwidth:
            parts.append(f"bandwidth {self.bandwidth} bytes/s")
        if self.slice_sizes:
            low, high = self.slice_sizes
            delay = f", {self.slice_delay_ms:g} ms apart" if self.slice_delay_ms else ""
            parts.append(f"slices of {low}-{high} bytes{delay}")
        if self.limit:
            action, count = self.limit
            parts.append(f"{action} after {count} bytes")
        if not parts:
            return "no faults"
        return f"{self.direction}: {', '.join(parts)}; seed {self.seed}"

    def rng(self, connection: int, way: Direction, purpose: str) -> random.Random:
        """The generator for one purpose ("slice", "latency") of one direction of one connection."""
        return random.Random(f"streamlab.chaos/{self.seed}/{connection}/{Direction(way).value}/{purpose}")

    def slice_plan(self, connection: int, way: Direction) -> SlicePlan | None:
        """A fresh slice plan for that connection and direction (None when slicing is off or not for `way`)."""
        if self.slice_sizes is None or way not in self.direction.ways:
            return None
        return SlicePlan(*self.slice_sizes, rng=self.rng(connection, way, "slice"))

    def for_connection(self, connection: int, way: Direction) -> DirectionFaults:
        """The decision maker for one direction (`Direction.UP` or `DOWN`) of connection number `connection`."""
        return DirectionFaults(self, connection=connection, way=way)


# --- the decisions --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """One write: its bytes, when it is due (seconds after its bytes arrived), and how long the next write
    must wait after it (seconds: bandwidth and slice delay)."""

    data: bytes
    delay: float = 0.0
    gap: float = 0.0


@dataclass(frozen=True)
class Batch:
    """What to do with one chunk read: the writes, the bytes dropped, the action to take after the writes."""

    pieces: tuple[Piece, ...] = ()
    dropped: int = 0
    then: Action | None = None

    @property
    def size(self) -> int:
        """Bytes that pass (the sum of the pieces)."""
        return sum(len(p.data) for p in self.pieces)


@dataclass
class SlicePlan:
    """Where the writes of one direction are cut: sizes drawn from MIN..MAX, laid end to end over the stream.

    `split(n)` answers the write sizes for the next n bytes. A slice that a chunk ends inside is finished by
    the next chunk, so the cut offsets depend on the seed alone, never on how the bytes arrived. `planned`
    keeps every size drawn so far (the last one may still be unfinished).
    """

    low: int
    high: int
    rng: random.Random
    planned: list[int] = field(default_factory=list)
    _left: int = field(default=0, repr=False)  # bytes still to come in the current slice

    def split(self, n: int) -> list[int]:
        sizes = []
        while n > 0:
            if self._left == 0:
                self._left = self.rng.randint(self.low, self.high)
                self.planned.append(self._left)
            step = min(self._left, n)
            sizes.append(step)
            self._left -= step
            n -= step
        return sizes

    def offsets(self, total: int) -> list[int]:
        """The stream offsets (0 < offset < total) where writes are cut in the first `total` bytes, from a
        fresh copy of this plan's generator state (this plan is not advanced)."""
        twin = SlicePlan(self.low, self.high, random.Random())
        twin.rng.setstate(self.rng.getstate())
        twin._left = self._left
        cuts, at = [], 0
        for size in twin.split(total):
            at += size
            if at < total:
                cuts.append(at)
        return cuts


class DirectionFaults:
    """The faults of one direction of one connection: fed each chunk read, answers a `Batch`.

    Counters: `passed` (bytes let through), `dropped` (bytes held back for good), `fired` (the action, once
    the limit is reached). Inert for a direction the spec does not cover: every chunk passes as one piece.
    """

    def __init__(self, spec: FaultSpec, *, connection: int, way: Direction) -> None:
        way = Direction(way)
        if way is Direction.BOTH:
            raise ValueError("DirectionFaults is for one direction: Direction.UP or Direction.DOWN")
        self.spec = spec
        self.connection = connection
        self.way = way
        self.applies = way in spec.direction.ways
        self.passed = 0
        self.dropped = 0
        self.fired: Action | None = None
        self._limit = spec.limit if self.applies else None
        self.slices = spec.slice_plan(connection, way)
        self._latency_rng = spec.rng(connection, way, "latency")
        self._rate = spec.bandwidth if self.applies else None

    @property
    def stalled(self) -> bool:
        """True once a stall has fired: nothing more passes, not even the end of the stream."""
        return self.fired is Action.STALL

    def at_start(self) -> Action | None:
        """The action to take before any byte, for a limit of 0 bytes (None otherwise)."""
        if self._limit is not None and self._limit[1] == 0 and self.fired is None:
            self.fired = self._limit[0]
            return self.fired
        return None

    def feed(self, chunk: bytes) -> Batch:
        """Decide what happens to `chunk`, the next bytes read in this direction (see `ORDER`)."""
        if self.fired is not None:
            self.dropped += len(chunk)
            return Batch(dropped=len(chunk))
        take, then = len(chunk), None
        if self._limit is not None:  # 1. limit
            action, count = self._limit
            if take >= count - self.passed:
                take, then = count - self.passed, action
        sizes = self.slices.split(take) if self.slices is not None else ([take] if take else [])  # 2. slice
        if self._rate:  # 3. bandwidth: at most a quantum's worth per write
            quantum = max(1, int(self._rate * BANDWIDTH_QUANTUM))
            sizes = [min(quantum, size - at) for size in sizes for at in range(0, size, quantum)]
        pieces, at = [], 0
        for size in sizes:
            pieces.append(Piece(chunk[at : at + size], delay=self._delay(), gap=self._gap(size)))  # 4. latency
            at += size
        self.passed += take
        self.dropped += len(chunk) - take
        self.fired = then
        return Batch(tuple(pieces), len(chunk) - take, then)

    def _delay(self) -> float:
        if not self.applies or not (self.spec.latency_ms or self.spec.jitter_ms):
            return 0.0
        jitter = self._latency_rng.uniform(-self.spec.jitter_ms, self.spec.jitter_ms) if self.spec.jitter_ms else 0.0
        return max(0.0, self.spec.latency_ms + jitter) / 1000.0

    def _gap(self, size: int) -> float:
        gap = size / self._rate if self._rate else 0.0
        if self.slices is not None:
            gap += self.spec.slice_delay_ms / 1000.0
        return gap


# --- the command line's option strings ---------------------------------------------------------------------------

_NUMBER = r"[0-9]+(?:\.[0-9]+)?"


def parse_hostport(text: str, *, option: str = "--upstream") -> tuple[str, int]:
    """ "HOST:PORT" (or "[IPv6]:PORT") -> (host, port), e.g. "127.0.0.1:8000" -> ("127.0.0.1", 8000)."""
    match = re.fullmatch(r"\[([^\]]+)\]:([0-9]+)|([^:\[\]\s]+):([0-9]+)", text.strip())
    if not match:
        raise FaultSpecError(option, text, "expected HOST:PORT, e.g. 127.0.0.1:8000 (or [::1]:8000)")
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4))
    if not 0 < port < 65536:
        raise FaultSpecError(option, text, "the port must be between 1 and 65535")
    return host, port


def parse_latency(text: str, *, option: str = "--latency") -> tuple[float, float]:
    """ "MS" or "MS:JITTER" (milliseconds) -> (latency_ms, jitter_ms), e.g. "100:20" -> (100.0, 20.0)."""
    match = re.fullmatch(rf"({_NUMBER})(?::({_NUMBER}))?", text.strip())
    if not match:
        raise FaultSpecError(option, text, "expected MS or MS:JITTER in milliseconds, e.g. 100 or 100:20")
    return float(match.group(1)), float(match.group(2) or 0)


def parse_slice(text: str, *, option: str = "--slice") -> tuple[tuple[int, int], float]:
    """ "MIN:MAX" or "MIN:MAX:DELAY_MS" -> ((min, max), delay_ms), e.g. "1:8" -> ((1, 8), 0.0)."""
    match = re.fullmatch(rf"([0-9]+):([0-9]+)(?::({_NUMBER}))?", text.strip())
    if not match:
        raise FaultSpecError(option, text, "expected MIN:MAX or MIN:MAX:DELAY_MS, e.g. 1:8 or 1:8:2")
    low, high = int(match.group(1)), int(match.group(2))
    if low < 1 or low > high:
        raise FaultSpecError(option, text, "MIN must be 1 or more and not larger than MAX")
    return (low, high), float(match.group(3) or 0)


def parse_byte_count(text: str, *, option: str) -> int:
    """A whole number of bytes, 0 or more ("1000", "1_000")."""
    cleaned = text.strip().replace("_", "")
    if not re.fullmatch(r"[0-9]+", cleaned):
        raise FaultSpecError(option, text, "expected a whole number of bytes, 0 or more")
    return int(cleaned)


def parse_bandwidth(text: str, *, option: str = "--bandwidth") -> int:
    """Bytes per second, 1 or more."""
    rate = parse_byte_count(text, option=option)
    if rate < 1:
        raise FaultSpecError(option, text, "expected bytes per second, 1 or more")
    return rate
