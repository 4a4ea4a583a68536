"""The room dashboard's state: a row per learner, room totals, and the numbered events of its feed (sans-IO core).

Theory of operation. The stand-in tells the board about each request twice, as a `Visit`: once the planner
has decided (whose request, which model) and once it has finished (its status, its `Ending`, its time to
first byte). A check-cell verdict a learner's notebook sent (`POST /v1/progress`) is a `Visit` too, with its
`verdict` and nothing else: it is not an API request, so it counts in no request total. The board keeps one
`Row` per learner (their requests and their verdicts, exercise by exercise) and the room's totals, and turns
every change into a `BoardEvent` numbered `{epoch}-{n}`. The feed (`streamlab.net.standin.dashboard`) writes
those as SSE frames with that `id:`, so a page that reconnects with `Last-Event-ID` gets exactly the events
after it (`since`). When it names an id this board never gave (another server's: the epoch differs) or no
longer keeps (older than the last `max_events`), it gets one `snapshot` event instead: every row and the
totals, which is the same state the missed events would have built. Nothing is lost either way.

What the instructor needs and no more. A learner appears as a number (in order of arrival) and a label.
In a room with a door (`streamlab.core.standin.door`) the label is the name the learner joined with (their key
is that name and a MAC only the room can make, so the name alone is no secret), escaped so that control and
bidi characters show as `\\u202e` rather than act (issue 34, N21); requests of nobody who joined make no row.
In an open room, where the key may be a real secret, the label never holds the key: at most its first three
characters and never more than half of it (`ada` shows as `a`), then a short hash salted with the server's
own secret (so a label cannot be looked up anywhere else). A model name is escaped the same way. Request
bodies, messages and headers never reach the board; the one header it reads is the SDK's
`x-stainless-retry-count`, as a number. Everything is bounded: `max_learners` rows, `max_events` kept for
replay, `MAX_EXERCISES` exercise columns, and the median TTFT over the room's last `TTFT_WINDOW` streams (not
each learner's last one: a room that streamed `scheduled` at 300 ms and then one fast model would
otherwise show the fast model's time alone).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from streamlab.core.errors import SSELimitError
from streamlab.core.shapes import sse_frame
from streamlab.core.sse import SSEEvent, SSEParser
from streamlab.core.standin.actions import Write
from streamlab.core.standin.plan import numbered_steps, steps_to_actions
from streamlab.core.standin.room import Room
from streamlab.core.standin.scenarios import scenario_of
from streamlab.core.standin.script import ErrorEpisode
from streamlab.core.untrusted import json_text, printable

__all__ = [
    "Visit",
    "Row",
    "BoardEvent",
    "Board",
    "learner_label",
    "member_label",
    "NAME_CHARS",
    "DEFAULT_MAX_EVENTS",
    "MAX_EXERCISES",
    "TTFT_WINDOW",
    "first_text_write",
    "text_write_index",
]

DEFAULT_MAX_EVENTS = 5000
"""How many recent events a board keeps for pages that reconnect (older ones get a snapshot)."""
MAX_EXERCISES = 200
"""How many distinct exercises the room's grid shows (the labs have about 30); a verdict for one more is ignored."""
TTFT_WINDOW = 100
"""The median TTFT is taken over the room's last this many streams."""


_ADJECTIVES = (
    "amber azure bold brave brisk calm clever coral crisp curly dapper deft eager early fair fancy fleet fond "
    "frank gentle glad golden grand green happy hardy jolly keen kind lively lucky mellow merry mild misty "
    "modest noble olive plucky polite proud quick quiet rapid ready rosy royal ruby rustic sandy shy silver "
    "sleek smart snowy sunny swift tidy tough vivid warm wise witty young zesty"
).split()
_ANIMALS = (
    "badger beaver bison camel cat cobra crane crow deer dingo dolphin donkey eagle eel falcon ferret finch fox "
    "gecko goat goose hare hawk heron hippo ibis jackal koala lemur lion llama lynx magpie marten mole moose "
    "newt otter owl panda parrot pelican penguin pony puffin quail rabbit raven robin salmon seal shark sloth "
    "stork swan tapir tiger toad trout turtle walrus whale wolf wombat yak zebra"
).split()


def learner_label(key: str, salt: bytes) -> str:
    """How a learner is shown: "anonymous", or the start of the key (at most three characters, never more than
    half of it), an ellipsis, a salted hash and two words drawn from it (`ada` shows as `a\u2026#5e47e0 calm
    otter`, never whole): the words tell learners apart on a projector, where `a\u2026#1685b7` and
    `a\u2026#16f5b1` did not (issue 36)."""
    if not key:
        return "anonymous"
    digest = hashlib.sha256(salt + key.encode("utf-8", "replace")).digest()
    shown = printable(key[: min(3, len(key) // 2)], limit=None)
    words = f"{_ADJECTIVES[digest[3] % len(_ADJECTIVES)]} {_ANIMALS[digest[4] % len(_ANIMALS)]}"
    return f"{shown}\u2026#{digest[:3].hex()} {words}"


NAME_CHARS = 32
"""The most characters of a room member's name the board shows (then `...(+N)`)."""


def member_label(name: str) -> str:
    """How a learner who joined a room is shown: their name, escaped (controls and bidi overrides as `\\u202e`)."""
    return printable(name, limit=NAME_CHARS)


def _has_text(event: SSEEvent) -> bool:
    """Whether an event shows the user text: a Chat delta's `content` (or `refusal`), or a Responses
    `response.output_text.delta` (`response.refusal.delta`), not empty."""
    try:
        obj = json.loads(event.data)
    except (ValueError, RecursionError):
        return False
    if not isinstance(obj, dict):
        return False
    if obj.get("type") in ("response.output_text.delta", "response.refusal.delta"):
        return isinstance(obj.get("delta"), str) and bool(obj["delta"])
    choices = obj.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and any(isinstance(delta.get(k), str) and delta[k] for k in ("content", "refusal")):
            return True
    return False


def first_text_write(writes: Iterable[bytes]) -> int | None:
    """The index of the first write whose bytes complete an event that shows text (None: no write does). The
    dashboard's TTFT is the time of that write: a user sees the first words then, not at the first byte (a role
    chunk, a comment or `response.created` shows nothing; issue 36). Bytes past the parser's limits (a 32 MB
    line) show no text: a subscriber of the records must not raise (it had killed the thread that ran it)."""
    parser = SSEParser()
    try:
        for i, data in enumerate(writes):
            if any(_has_text(event) for event in parser.feed(data)):
                return i
    except SSELimitError as exc:
        return i if any(_has_text(event) for event in exc.events) else None
    return None


def text_write_index(room: Room, model: str, episode: int, *, events: bool = False) -> int | None:
    """Which write of the answer `room` plays as `model`'s episode `episode` first shows text: through the chat
    route (`events=False`) or the EventSource route (`events=True`, whose first write is its `retry:` hint).
    None when that is not a scripted episode played as scripted (a profile reshapes answers per request)."""
    episodes = room.scripts.get(model)
    if room.options.profile is not None or episodes is None or not 0 <= episode < len(episodes):
        return None
    ep = episodes[episode]
    if isinstance(ep, ErrorEpisode):
        return None
    hit = room.text_at.get((id(ep), events))
    if hit is None:  # made once per episode and route: a room asks for the same episodes again and again
        steps = numbered_steps(room, ep, model) if events else ep.steps
        index = first_text_write(a.data for a in steps_to_actions(steps) if isinstance(a, Write))
        hit = room.text_at[(id(ep), events)] = (ep, None if index is None else index + (1 if events else 0))
    return hit[1]


@dataclass(frozen=True)
class Visit:
    """What the board learns about one request (`request` is the stand-in's record index).

    `finished` is False for the first report (decided, still being answered) and True for the last.
    `retry` is the `x-stainless-retry-count` the client sent (None without one); `ttft` the seconds from
    reading the request to writing the stream's first text (None for a JSON reply, or when that is not known).
    `verdict` is (exercise, verdict) for a check cell's verdict the learner sent: then only the row's verdicts
    change.
    """

    key: str
    request: int
    finished: bool
    model: str | None = None
    path: str = ""
    status: int | None = None
    ending: str | None = None
    retry: int | None = None
    ttft: float | None = None
    verdict: tuple[str, str] | None = None
    joined: bool = False  # a learner joined the room: their row, nothing counted


@dataclass
class Row:
    """One learner as the dashboard shows them."""

    number: int
    label: str
    requests: int = 0
    active: int = 0
    model: str | None = None
    scenario: str | None = None
    status: int | None = None
    ending: str | None = None
    endings: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    ttft_ms: float | None = None
    open: set[int] = field(default_factory=set)
    verdicts: dict[str, str] = field(default_factory=dict)  # exercise id -> its last verdict

    def as_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "learner": self.label,
            "requests": self.requests,
            "active": self.active,
            "model": self.model,
            "scenario": self.scenario,
            "status": self.status,
            "ending": self.ending,
            "endings": dict(sorted(self.endings.items())),
            "retries": self.retries,
            "ttft_ms": self.ttft_ms,
            "verdicts": dict(sorted(self.verdicts.items())),
        }


@dataclass(frozen=True)
class BoardEvent:
    """One event of the feed: its `id`, its `event` type (snapshot, learner, forget) and its JSON `data`."""

    id: str
    event: str
    data: str

    def frame(self) -> bytes:
        """The SSE frame: `id:`, `event:` and one `data:` line (the JSON has no line breaks)."""
        return sse_frame(self.data, event=self.event, id=self.id)


class Board:
    """The dashboard's state and its recent events. Not thread-safe: the I/O layer holds a lock around it."""

    def __init__(
        self,
        *,
        salt: bytes,
        epoch: str,
        max_events: int = DEFAULT_MAX_EVENTS,
        max_learners: int = 10_000,
        members: bool = False,
    ) -> None:
        """`members`: the board of a room with a door: labels are names, and anonymous requests make no row."""
        if max_events < 1 or max_learners < 1:
            raise ValueError(f"max_events and max_learners must be at least 1, got {max_events}, {max_learners}")
        if not epoch or "-" in epoch:
            raise ValueError(f"epoch must be a non-empty string without '-', got {epoch!r}")
        self.salt = salt
        self.members = members
        self.epoch = epoch
        self.max_learners = max_learners
        self.rows: OrderedDict[str, Row] = OrderedDict()
        self.events: deque[tuple[int, BoardEvent]] = deque(maxlen=max_events)
        self.count = 0  # the number of the last event given (0: none yet)
        self.numbers = 0  # learners numbered so far
        self._sums = _Sums()  # the totals, kept up to date row by row (a visit costs the same for 1 or 1,000 rows)
        self._ttfts: deque[float] = deque(maxlen=TTFT_WINDOW)  # the room's last streams' TTFTs, in ms
        self._json: dict[int, str] = {}  # row number -> its JSON, in number order (a snapshot joins them)
        self._snapshot: BoardEvent | None = None  # the last snapshot made, while no event came after it

    @property
    def last_id(self) -> str:
        return f"{self.epoch}-{self.count}"

    def observe(self, visit: Visit) -> list[BoardEvent]:
        """Update the learner's row from `visit`; the events that say so (and any learner forgotten)."""
        row = self.rows.get(visit.key)
        out: list[BoardEvent] = []
        if row is None:
            if self.members and not visit.key:
                return out
            self.numbers += 1
            label = member_label(visit.key) if self.members else learner_label(visit.key, self.salt)
            row = self.rows[visit.key] = Row(self.numbers, label)
            self._sums.add(row)
            while len(self.rows) > self.max_learners:
                _, gone = self.rows.popitem(last=False)
                self._sums.remove(gone)
                self._json.pop(gone.number, None)
                out.append(self._add("forget", {"number": gone.number, "totals": self.totals()}))
        else:
            self.rows.move_to_end(visit.key)
        self._sums.remove(row)
        if visit.joined:
            pass
        elif visit.verdict is not None:
            self._verdict(row, *visit.verdict)
        else:
            _update(row, visit)
            if visit.finished and visit.ttft is not None:
                self._ttfts.append(round(1000 * visit.ttft, 1))
        self._sums.add(row)
        shown = _json(row.as_json())
        self._json[row.number] = shown
        out.append(self._add_raw("learner", f'{{"row":{shown},"totals":{_json(self.totals())}}}'))
        return out

    def _verdict(self, row: Row, exercise: str, verdict: str) -> None:
        """Keep the learner's last verdict on `exercise`, unless it would be one exercise column too many."""
        if exercise in row.verdicts or exercise in self._sums.columns or len(self._sums.columns) < MAX_EXERCISES:
            row.verdicts[exercise] = verdict

    def reset(self) -> BoardEvent:
        """Forget every learner (the stand-in started over); the snapshot event that says so."""
        self.rows.clear()
        self._json.clear()
        self._sums = _Sums()
        self._ttfts.clear()
        self.count += 1
        event = self.snapshot()
        self.events.append((self.count, event))
        return event

    def snapshot(self) -> BoardEvent:
        """Every row and the totals, as of the last event: made from each row's JSON kept as it changed, and
        made once for any number of pages asking before the next event (32 viewers reconnecting to a 10,000-row
        board had each made their own under the lock the API's requests wait for: N11)."""
        if self._snapshot is None or self._snapshot.id != self.last_id:
            data = f'{{"rows":[{",".join(self._json.values())}],"totals":{_json(self.totals())}}}'
            self._snapshot = BoardEvent(self.last_id, "snapshot", data)
        return self._snapshot

    def since(self, last_id: str | None) -> list[BoardEvent]:
        """What a page that last saw `last_id` has missed: the events after it, or one snapshot when the id is
        absent, another board's, or older than the events kept."""
        after = self._number_of(last_id)
        if after is None:
            return [self.snapshot()]
        return [event for n, event in self.events if n > after]

    def totals(self) -> dict[str, Any]:
        """The room's totals: learners, requests, streams in progress, retries, endings, the median TTFT of the
        room's last `TTFT_WINDOW` streams (and how many that is), and the verdicts, counted by kind."""
        sums = self._sums
        return {
            "learners": len(self.rows),
            "requests": sums.requests,
            "active": sums.active,
            "retries": sums.retries,
            "endings": {k: v for k, v in sorted(sums.endings.items()) if v},
            "ttft_p50_ms": _median(self._ttfts),
            "ttft_streams": len(self._ttfts),
            "verdicts": {k: v for k, v in sorted(sums.verdicts.items()) if v},
        }

    def _number_of(self, last_id: str | None) -> int | None:
        if not last_id:
            return None
        epoch, _, number = last_id.rpartition("-")
        if epoch != self.epoch or not number.isdigit() or not number.isascii():
            return None
        n = int(number)
        oldest = self.events[0][0] if self.events else self.count + 1
        if n > self.count or n < oldest - 1:
            return None
        return n

    def _add(self, kind: str, payload: dict[str, Any]) -> BoardEvent:
        return self._add_raw(kind, _json(payload))

    def _add_raw(self, kind: str, data: str) -> BoardEvent:
        self.count += 1
        event = BoardEvent(self.last_id, kind, data)
        self.events.append((self.count, event))
        return event


class _Sums:
    """Sums over the rows, updated by taking a row out before it changes and adding it back after."""

    def __init__(self) -> None:
        self.requests = self.active = self.retries = 0
        self.endings: Counter[str] = Counter()
        self.verdicts: Counter[str] = Counter()  # how many (learner, exercise) verdicts of each kind
        self.columns: Counter[str] = Counter()  # exercise id -> how many rows hold a verdict on it (no zeros)

    def add(self, row: Row) -> None:
        self._count(row, 1)

    def remove(self, row: Row) -> None:
        self._count(row, -1)

    def _count(self, row: Row, sign: int) -> None:
        self.requests += sign * row.requests
        self.active += sign * row.active
        self.retries += sign * row.retries
        for name, n in row.endings.items():
            self.endings[name] += sign * n
        for exercise, verdict in row.verdicts.items():
            self.verdicts[verdict] += sign
            self.columns[exercise] += sign
            if not self.columns[exercise]:
                del self.columns[exercise]


def _median(values: Iterable[float]) -> float | None:
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return None
    middle = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return round(middle, 1)


def _update(row: Row, visit: Visit) -> None:
    """Apply one visit to a row: count a request the first time it is seen, close it the last time."""
    first = visit.request not in row.open
    if first and not visit.finished:
        row.open.add(visit.request)
    elif not first and visit.finished:
        row.open.discard(visit.request)
    if first:
        row.requests += 1
        if visit.retry:
            row.retries += 1
    if visit.model is not None:
        row.model = printable(visit.model, limit=80)  # controls and bidi overrides shown, never acting (N21)
        known = scenario_of(visit.model)
        row.scenario = known.name if known is not None else None
    row.active = len(row.open)
    if visit.finished:
        row.status = visit.status
        if visit.ending is not None:
            row.ending = visit.ending
            row.endings[visit.ending] += 1
        if visit.ttft is not None:
            row.ttft_ms = round(1000 * visit.ttft, 1)


def _json(payload: dict[str, Any]) -> str:
    """An event's data: compact JSON in which what a client chose (a model name) cannot break the feed (a lone
    surrogate cannot be encoded as UTF-8) or a line (U+2028): `json_text` escapes both."""
    return json_text(payload, separators=(",", ":"))
