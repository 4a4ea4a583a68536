"""The room's door: its join code, the learners who joined, their API keys and the per-address limits (sans-IO core).

A stand-in that serves a room has a *join code* (the instructor prints it in `streamlab standin`'s banner and
writes it on the board) and a secret of its own that nobody sees. A learner joins with the code and a name
(`POST /v1/join`, which `streamlab.join_room(url, name=..., code=...)` sends); the room answers with an API key
made from the name and a MAC of it under the secret (keyed BLAKE2b): `ada.3f0c...`. Only a key the room issued names a
learner, so a request with a made-up key or none gets a 401 that says how to join, and nobody can be `ada`
by sending `Bearer ada` (issue 34, N4). The key is checked by recomputing the MAC: nothing is stored per key.

Who may join what:

* a name is taken by the first address that joins with it; the same address may join again with it (a kernel
  restarted on the same laptop gets the same key back), another address gets a 409 `name_taken`;
* one address may take at most `names_per_address` names, and try the door (right code or wrong) at most
  `join_burst` times at once, then once every `1 / join_rate` seconds: a guessing script gets a 429, and a
  learner with the code cannot fill the room's places alone;
* the room has `places` places; a join when all are taken frees the place of the learner active least
  recently, but only one idle for `recent` seconds or more: a learner who has been active recently is never
  dropped for a newcomer, who gets a 429 `room_full` instead (N1);
* verdict POSTs are limited per address too (`allow_verdict`): `verdict_burst` at once, then `verdict_rate` a
  second (N2, N3 came from floods of them).

Time is an input (`now`, seconds on any monotonic clock): the I/O layer passes it, so this stays sans-IO.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import quote, unquote

__all__ = [
    "JOIN_PATH",
    "DoorLimits",
    "Door",
    "Joined",
    "Refused",
    "normal_code",
    "name_problem",
    "MAX_NAME_CHARS",
]

JOIN_PATH = "/v1/join"
MAX_NAME_CHARS = 64
"""The longest name a learner may join with (it is shown whole on the dashboard)."""
_TAG_HEX = 24  # 96 bits of MAC in each key


@dataclass(frozen=True)
class DoorLimits:
    """The per-address limits and the recency rule (the module docstring). The defaults fit a workshop of a
    few hundred learners on one network; a room behind one NAT address needs `names_per_address` raised."""

    names_per_address: int = 20
    join_burst: int = 10
    join_rate: float = 0.5
    verdict_burst: int = 60
    verdict_rate: float = 2.0
    recent: float = 600.0
    max_addresses: int = 4096

    def __post_init__(self) -> None:
        counts = (self.names_per_address, self.join_burst, self.verdict_burst, self.max_addresses)
        if min(counts) < 1 or not (self.join_rate > 0 and self.verdict_rate > 0 and self.recent >= 0):
            raise ValueError(f"door limits must be positive, got {self!r}")


@dataclass(frozen=True)
class Joined:
    """A learner is in: their `name`, the `api_key` that names them, and `evicted`, the idle learner whose
    place they took (None when a place was free or they had one already)."""

    name: str
    api_key: str
    evicted: str | None = None


@dataclass(frozen=True)
class Refused:
    """A join turned down: the HTTP `status`, an error `code` and a `message` that says what to do."""

    status: int
    code: str
    message: str
    retry_after: int | None = None


def normal_code(code: str) -> str:
    """A join code as compared: lower case, without spaces and dashes (`XK7-M2Q` is `xk7m2q`)."""
    return "".join(c for c in code.lower() if c not in " -")


def _same(a: str, b: str) -> bool:
    """Whether two secrets are equal, in a time that depends on their lengths only (not where they differ)."""
    x, y = a.encode("utf-8", "replace"), b.encode("utf-8", "replace")
    return len(x) == len(y) and not sum(p ^ q for p, q in zip(x, y))


def name_problem(name: object) -> str | None:
    """Why `name` cannot be a learner's name in a room (None: it can): a short printable string."""
    if not isinstance(name, str) or not name.strip():
        return "a name is a non-empty string, such as your first name"
    if len(name) > MAX_NAME_CHARS or not name.isprintable() or name != name.strip():
        return f"a name is at most {MAX_NAME_CHARS} printable characters, without leading or trailing spaces"
    return None


class _Bucket:
    """A token bucket: `burst` tokens, refilled at `rate` a second."""

    __slots__ = ("tokens", "at")

    def __init__(self, burst: int, now: float) -> None:
        self.tokens = float(burst)
        self.at = now

    def take(self, burst: int, rate: float, now: float) -> float:
        """Take one token: 0.0 when there was one, else the seconds until there is."""
        self.tokens = min(float(burst), self.tokens + max(0.0, now - self.at) * rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / rate


class _Address:
    __slots__ = ("names", "joins", "verdicts")

    def __init__(self, limits: DoorLimits, now: float) -> None:
        self.names: set[str] = set()
        self.joins = _Bucket(limits.join_burst, now)
        self.verdicts = _Bucket(limits.verdict_burst, now)


class Door:
    """The join code, the secret, the members (least recently active first) and what each address used.
    Not thread-safe: the I/O layer holds the room's lock around the planner."""

    def __init__(self, code: str, secret: bytes, *, places: int, limits: DoorLimits = DoorLimits()) -> None:
        if not normal_code(code):
            raise ValueError("a join code needs at least one letter or digit")
        if len(secret) < 16:
            raise ValueError("the room's secret must be at least 16 bytes")
        if places < 1:
            raise ValueError(f"places must be at least 1, got {places}")
        self.code = code
        self.places = places
        self.limits = limits
        self._secret = secret
        self.members: OrderedDict[str, tuple[str, float]] = OrderedDict()  # name -> (address, last active)
        self._addresses: OrderedDict[str, _Address] = OrderedDict()

    def key_for(self, name: str) -> str:
        """The API key the room issues to `name`: the name (URL-quoted, so the key is ASCII) and its MAC."""
        tag = hashlib.blake2b(name.encode("utf-8"), key=self._secret[:64], digest_size=16).hexdigest()[:_TAG_HEX]
        return f"{quote(name, safe='')}.{tag}"

    def name_of(self, key: str | None, *, now: float) -> str | None:
        """The member a key names (and they are active now), or None: no key, a key this room did not issue,
        or one whose learner has since left (their place was given to a newcomer)."""
        if not key:
            return None
        quoted, _, tag = key.rpartition(".")
        name = unquote(quoted)
        if not quoted or name not in self.members or not _same(self.key_for(name), key):
            return None
        self.members[name] = (self.members[name][0], now)
        self.members.move_to_end(name)
        return name

    def join(self, name: str, code: str, address: str, *, now: float) -> Joined | Refused:
        """Let `name` in from `address` with `code`, or say why not (the module docstring's rules)."""
        seat = self._address(address, now)
        wait = seat.joins.take(self.limits.join_burst, self.limits.join_rate, now)
        if wait:
            return Refused(429, "rate_limited", "too many join attempts from this address: wait and try again",
                           retry_after=int(wait) + 1)  # fmt: skip
        if not _same(normal_code(code), normal_code(self.code)):
            return Refused(403, "wrong_join_code", "that is not this room's join code: the instructor has it")
        problem = name_problem(name)
        if problem is not None:
            return Refused(400, "invalid_name", problem)
        held = self.members.get(name)
        if held is not None:
            if held[0] != address:
                return Refused(
                    409,
                    "name_taken",
                    f"the name {name!r} has already joined this room from another machine: join with another name",
                )
            self.name_of(self.key_for(name), now=now)
            return Joined(name, self.key_for(name))
        if len(seat.names) >= self.limits.names_per_address:
            return Refused(
                429,
                "too_many_names",
                f"this address has joined {len(seat.names)} names already, the most one address may "
                "(`streamlab standin --names-per-address N` allows more)",
            )
        evicted = None
        if len(self.members) >= self.places:
            oldest, (where, seen) = next(iter(self.members.items()))
            if now - seen < self.limits.recent:
                return Refused(
                    429,
                    "room_full",
                    f"this room is full: its {self.places} places are taken by learners active in the last "
                    f"{self.limits.recent:g} s; ask the instructor (`streamlab standin --max-learners N` keeps more)",
                )
            self.leave(oldest)
            evicted = oldest
        self.members[name] = (address, now)
        seat.names.add(name)
        return Joined(name, self.key_for(name), evicted)

    def leave(self, name: str) -> None:
        """Free `name`'s place (their key stops working; their address may join with the name again)."""
        held = self.members.pop(name, None)
        if held is not None and held[0] in self._addresses:
            self._addresses[held[0]].names.discard(name)

    def allow_verdict(self, address: str, *, now: float) -> float:
        """Count one verdict POST from `address`: 0.0 when allowed, else the seconds to wait."""
        return self._address(address, now).verdicts.take(self.limits.verdict_burst, self.limits.verdict_rate, now)

    def _address(self, address: str, now: float) -> _Address:
        seat = self._addresses.get(address)
        if seat is None:
            seat = self._addresses[address] = _Address(self.limits, now)
            while len(self._addresses) > self.limits.max_addresses:  # forget the address seen least recently
                self._addresses.popitem(last=False)
        else:
            self._addresses.move_to_end(address)
        return seat
