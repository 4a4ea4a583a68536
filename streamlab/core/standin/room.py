"""The stand-in's state, one learner at a time (sans-IO core: plain data the planner reads and changes).

A *learner* is whoever holds one API key: the bearer token of the `Authorization` header (`learner_of`),
or the anonymous learner ("") when there is none. A workshop room serves one stand-in to many learners,
and nothing one of them does may change what another sees, so everything that moves lives per learner:

* how many create requests each model has had (request n plays episode n, the last repeats);
* how many times each stored response was fetched as a stream (GET n is cut where `cuts[n]` says);
* which stored responses were cancelled.

Scripts and stored responses are shared: they are frozen values, read by everyone and changed by no one.
A response id therefore names each learner's own copy: learner A cancelling `resp_demo` cancels A's, never
B's. `Room.reset(learner)` starts one learner over (the `POST /v1/reset` route); `Room.reset()` everyone.

The room remembers at most `max_learners` learners (10,000 by default), so a client inventing a new key per
request cannot grow it without bound, and no client can make it forget the learners of a workshop (issue 25:
10,001 new keys had forgotten every learner of a room in 15 s, and two requests per new key still did):

* a *newcomer* (a key seen in one request so far) may be forgotten to make room for a new key, the newcomer seen
  longest ago first: a flood of keys used once forgets only keys used once, and a real learner forgotten so
  loses one counted request (their next request plays as their first);
* a learner who came back (two requests or more) is never forgotten;
* when every place is taken by learners who came back, a new key is refused (`Room.admits` is False) and the
  planner answers it with an OpenAI-shaped 429 `room_full` that says so; the learners already in go on as before.
  Only the instructor frees places: `POST /v1/reset` with that key, or restarting the stand-in (with a larger
  `streamlab standin --max-learners`, or `StandIn(max_learners=...)`, for a room that needs more).

A workshop has tens of learners, so it never meets the bound; a flood meets it and locks out only new keys.

That is the *open* room: a stand-in on a learner's own machine (`serve()`, `StandIn()`), where any key names a
learner. A room served to others has a `Door` (`streamlab.core.standin.door`): there a learner is whoever joined
with the join code, their name is their key's (the room issued it), a request without such a key gets a 401,
and places are the door's: taken on joining, never by a request.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from streamlab.core.standin.actions import Action
from streamlab.core.standin.door import Door
from streamlab.core.standin.request import RequestHead
from streamlab.core.standin.script import (
    Episode,
    ErrorEpisode,
    Script,
    ScriptValue,
    Step,
    StoredResponse,
    normalise_scripts,
)

if TYPE_CHECKING:
    from streamlab.core.standin.profiles import Profile

__all__ = [
    "Learner",
    "Options",
    "Room",
    "UsagePolicy",
    "learner_of",
    "learner_key",
    "ANONYMOUS",
    "MAX_KEY_CHARS",
    "DEFAULT_MAX_LEARNERS",
    "DEFAULT_OPTIONS",
    "room_full_message",
]

ANONYMOUS = ""
"""The learner of requests without an `Authorization` header."""

DEFAULT_MAX_LEARNERS = 10_000

UsagePolicy = Literal["requested", "scripted"]


MAX_KEY_CHARS = 200
"""The longest name a learner is kept under: a longer key is named by its start and a digest of all of it."""


def learner_key(token: str) -> str:
    """The name learner state is kept under for an API key: the key itself, or, past `MAX_KEY_CHARS`, its first
    64 characters and a SHA-256 digest of the whole (still one name per key, but 60 KiB keys no longer cost
    60 KiB each in every record and in the room)."""
    if len(token) <= MAX_KEY_CHARS:
        return token
    digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{token[:64]}...#{digest}"


def room_full_message(max_learners: int) -> str:
    """What a new key hears when the room is full of learners who came back (the module docstring)."""
    places = "1 learner (API key)" if max_learners == 1 else f"{max_learners} learners (API keys)"
    return (
        f"This stand-in's room is full: it keeps {places} and every place is taken by a "
        "learner who came back, so a new key is not admitted. Use a key that has been here before, or ask the "
        "instructor to restart the stand-in (`streamlab standin --max-learners N` keeps more)."
    )


def learner_of(head: RequestHead) -> str:
    """The learner a request belongs to: its bearer token (`Authorization: Bearer ada` -> "ada"), the whole
    header value for another scheme, or `ANONYMOUS` without the header; bounded by `learner_key`."""
    value = head.get("authorization")
    if value is None:
        return ANONYMOUS
    scheme, _, token = value.strip().partition(" ")
    return learner_key(token.strip() if scheme.lower() == "bearer" else value.strip())


@dataclass(frozen=True)
class Options:
    """How closely the stand-in imitates the real API's checks. The defaults are the real API's.

    `usage`: "requested" (the default) sends a scripted Chat usage-only chunk (`choices: []` with `usage`)
    only when the request asks for it with `stream_options.include_usage`, as the real API does; "scripted"
    plays every scripted byte as is, which is what a test of exact scripted bytes wants. `require_input`
    (on by default): refuse a Chat request without `messages`, or a Responses request without `input`,
    with the real API's 400. `streamlab standin --lenient` turns both off. `profile`: a provider profile
    (`streamlab.core.standin.profiles`) that reshapes every answer and refusal the way that server does, and answers
    models the script does not name (it then decides when usage is sent).
    """

    usage: UsagePolicy = "requested"
    require_input: bool = True
    profile: Profile | None = None

    def __post_init__(self) -> None:
        if self.usage not in ("requested", "scripted"):
            raise ValueError(f"usage must be 'requested' or 'scripted', got {self.usage!r}")


DEFAULT_OPTIONS = Options()
"""The one place the stand-in's defaults are set (`StandIn`, `serve()` and `Room` read it): the real API's
behaviour, so code that works against the stand-in works against the real thing."""


@dataclass
class Learner:
    """One learner's moving state (see the module docstring)."""

    counts: dict[str, int] = field(default_factory=dict)
    gets: dict[str, int] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)

    def fresh_response(self, response_id: str) -> None:
        """A create request made `response_id` anew: it is no longer cancelled and its GETs count from 0."""
        self.cancelled.discard(response_id)
        self.gets.pop(response_id, None)


class Room:
    """Scripts, stored responses and every learner's state: all the planner reads and changes.

    Not thread-safe on its own: the I/O layer holds one lock around each planner call.
    """

    def __init__(
        self,
        scripts: Mapping[str, ScriptValue],
        *,
        stored: Mapping[str, StoredResponse] | None = None,
        options: Options = DEFAULT_OPTIONS,
        max_learners: int = DEFAULT_MAX_LEARNERS,
        door: Door | None = None,
    ) -> None:
        if max_learners < 1:
            raise ValueError(f"max_learners must be at least 1, got {max_learners}")
        self.options = options
        self.max_learners = max_learners
        self.door = door  # None: an open room, where any key names a learner
        self.scripts: Script = {}
        self.stored: dict[str, StoredResponse] = {}
        self.learners: OrderedDict[str, Learner] = OrderedDict()
        self.newcomers: OrderedDict[str, None] = OrderedDict()  # keys seen in one request: the only ones forgotten
        self.memo: dict[tuple[int, str], tuple[Episode, tuple[Step, ...]]] = {}
        self.played: dict[tuple[int, bool], tuple[Episode, tuple[Action, ...]]] = {}  # see plan._memo_actions
        self.text_at: dict[tuple[int, bool], tuple[Episode, int | None]] = {}  # see board.text_write_index
        self.set_scripts(scripts, stored=stored)

    def set_scripts(
        self,
        scripts: Mapping[str, ScriptValue],
        *,
        stored: Mapping[str, StoredResponse] | None = None,
        reset: bool = True,
    ) -> None:
        """Replace the scripts and add stored responses; with `reset`, every learner starts over."""
        normal, kept = normalise_scripts(scripts, stored)
        self.scripts = normal
        self.stored.update(kept)
        self.memo.clear()
        self.played.clear()
        self.text_at.clear()
        if reset:
            self.reset()

    def reset(self, learner: str | None = None) -> None:
        """Start `learner` over (their counts, fetches and cancels), or everyone when None."""
        if learner is None:
            self.learners.clear()
            self.newcomers.clear()
        else:
            self.learners.pop(learner, None)
            self.newcomers.pop(learner, None)

    def admits(self, key: str) -> bool:
        """Whether learner `key` may have state: known already, a place free, or a newcomer to forget."""
        return key in self.learners or len(self.learners) < self.max_learners or bool(self.newcomers)

    def learner(self, key: str) -> Learner:
        """The state of learner `key`, created on first use (and marked as the most recently seen). A new key
        when the room does not admit it (`admits`) is a ValueError: the planner asks first and refuses it."""
        state = self.learners.get(key)
        if state is None:
            if not self.admits(key):
                raise ValueError(room_full_message(self.max_learners))
            state = self.learners[key] = Learner()
            self.newcomers[key] = None
            while len(self.learners) > self.max_learners:
                victim = next(k for k in self.newcomers if k != key)  # admits() said there is one
                del self.learners[victim]
                del self.newcomers[victim]
        else:
            self.learners.move_to_end(key)
            self.newcomers.pop(key, None)
        return state

    def pick(self, key: str, model: str) -> tuple[int, Episode | ErrorEpisode] | None:
        """Count one more create request of learner `key` for `model`; its episode (index, episode), or
        None when no script has that model."""
        episodes = self.scripts.get(model)
        if episodes is None:
            return None
        counts = self.learner(key).counts
        n = counts[model] = counts.get(model, 0) + 1
        i = min(n, len(episodes)) - 1
        return i, episodes[i]

    def requests_for(self, model: str, learner: str | None = None) -> int:
        """Create requests routed to `model`'s script: one learner's, or the room's total (None)."""
        if learner is not None:
            state = self.learners.get(learner)
            return 0 if state is None else state.counts.get(model, 0)
        return sum(state.counts.get(model, 0) for state in self.learners.values())

    def is_cancelled(self, key: tuple[str, str] | None) -> bool:
        """Whether learner `key[0]` cancelled response `key[1]` (False for None: a stream nobody can cancel)."""
        if key is None:
            return False
        state = self.learners.get(key[0])
        return state is not None and key[1] in state.cancelled
