"""The stand-in's room dashboard on the wire: its page and the live SSE feed that updates it (I/O layer).

An instructor serving one stand-in to a room opens `http://HOST:PORT/dashboard` on the projector. The page
(plain HTML, CSS and JavaScript from `streamlab/net/standin/static/`, no build step, no CDN) shows one row per
learner and the room's totals, and keeps itself current with the browser's own `EventSource` on
`/dashboard/events`: the labs' subject, used for real.

    GET /dashboard                  the page; /dashboard/dashboard.css and /dashboard/dashboard.js beside it
    GET /dashboard/events           text/event-stream: `retry:` first, then an `id:` on every event
    POST /v1/progress               (an API route, `streamlab.core.standin.plan`) a learner's check-cell verdict

The feed starts with a `retry:` hint. A page that connects afresh gets one `snapshot` event (every row and
the totals); then one `learner` event per change (a request decided, a request finished), each with its
row and the new totals (a learner's row holds their requests and their last verdict on each exercise, for
the page's learners x exercises grid). A page that reconnects sends `Last-Event-ID`, as browsers do, and
gets exactly the events after that id, or a snapshot when the id is not this server's or too old to replay
(`streamlab.core.standin.board` decides which). While nothing happens a `: keep-alive` comment goes out every
`keepalive` seconds, so idle proxies keep the connection open.

Feeds a flood cannot take (issue 34, N8): past `max_feeds` open feeds a page gets a 503, and in a room with a door
one address holds at most `FEEDS_PER_ADDRESS` of them; but a feed asked for with the instructor's key
(`/dashboard?key=...`, the page passes it on to `/dashboard/events?key=...`; `StandIn.projector_url`) has
`RESERVED_FEEDS` places of its own, so the projector always gets its feed.

What is decided lives in the sans-IO `Board`; this module feeds it the stand-in's records (through
`RecordBook.subscribe(..., started=True)`) under a lock, and writes its events on each page's connection.
A page connection ends when the page goes away or the stand-in stops (within a quarter of a second: the
waits are short and `wake()` cuts them), so an open dashboard never holds a server up.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from streamlab.core.progress import PROGRESS_PATH, read_verdict
from streamlab.core.shapes import error_body
from streamlab.core.standin.board import Board, BoardEvent, Visit
from streamlab.core.standin.door import JOIN_PATH
from streamlab.core.standin.plan import last_event_id
from streamlab.core.standin.request import RequestHead
from streamlab.core.standin.room import DEFAULT_MAX_LEARNERS
from streamlab.net.standin.pages import StaticFiles, not_allowed, not_found
from streamlab.net.standin.records import RecordBook, RequestRecord
from streamlab.net.standin.wire import Connection, PageHandler

__all__ = [
    "RoomFeed",
    "visit_of",
    "DASHBOARD_PATH",
    "DEFAULT_KEEPALIVE",
    "DEFAULT_RETRY_MS",
    "DEFAULT_MAX_FEEDS",
    "RESERVED_FEEDS",
    "FEEDS_PER_ADDRESS",
]

DASHBOARD_PATH = "/dashboard"
DEFAULT_KEEPALIVE = 15.0
"""Seconds of silence after which the feed writes a keep-alive comment."""
DEFAULT_RETRY_MS = 2000
"""The `retry:` hint: how long a browser waits before reconnecting a dropped feed."""
DEFAULT_MAX_FEEDS = 32
"""Live feeds open at once (a projector or two, a few curious laptops); past them a page gets a 503, and the
stand-in's other connections stay the API's."""
RESERVED_FEEDS = 4
"""Feeds kept for pages that carry the instructor's key (the projector, a spare laptop): never taken by others."""
FEEDS_PER_ADDRESS = 2
"""In a room with a door, the most live feeds one address may hold without the instructor's key."""
_WAKE = 0.25  # seconds: how often a waiting feed looks at its client and at the stopping flag

_FILES = StaticFiles(
    DASHBOARD_PATH,
    {
        "": ("dashboard.html", "text/html; charset=utf-8"),
        "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
        "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    },
)
_NOT_FOUND = not_found("dashboard", DASHBOARD_PATH)


def visit_of(record: RequestRecord, text_at: int | None = None) -> Visit | None:
    """What the board may learn from a record: whose, which model, how it ended and its time to first text (the
    time of its write number `text_at`, the first to show text: `streamlab.core.standin.board.text_write_index`;
    None when not known or never written);
    never the body, the messages or other headers. A verdict the planner accepted (`POST /v1/progress`, whose
    record keeps the verdict alone) is a verdict visit; any other verdict request is nobody's business (None)."""
    path = urlsplit(record.path).path.rstrip("/")  # the record keeps the whole request target
    if path == JOIN_PATH:  # a learner joined a room: their row appears, with no request counted
        return (
            Visit(key=record.learner, request=record.index, finished=True, joined=True)
            if record.status == 200
            else None
        )
    if path == PROGRESS_PATH:
        if not (record.finished and record.status == 200):
            return None
        verdict = read_verdict(record.json)
        return (
            None
            if isinstance(verdict, str)
            else Visit(
                key=record.learner, request=record.index, finished=True, verdict=(verdict.exercise, verdict.verdict)
            )
        )
    retry = (record.headers.get("x-stainless-retry-count") or "").strip()
    times = record.write_times
    ttft = times[text_at] - record.started_at if text_at is not None and text_at < len(times) else None
    return Visit(
        key=record.learner,
        request=record.index,
        finished=record.finished,
        model=record.model,
        path=record.path,
        status=record.status,
        ending=str(record.ending) if record.finished else None,
        retry=int(retry) if retry.isdigit() and retry.isascii() else None,
        ttft=ttft,
    )


class RoomFeed:
    """The room's `Board`, fed by one stand-in's records, and the handlers of its dashboard pages."""

    def __init__(
        self,
        book: RecordBook,
        stopping: threading.Event,
        *,
        keepalive: float = DEFAULT_KEEPALIVE,
        retry_ms: int = DEFAULT_RETRY_MS,
        max_feeds: int = DEFAULT_MAX_FEEDS,
        max_learners: int = DEFAULT_MAX_LEARNERS,
        instructor_key: str | None = None,
        room: bool = False,
        text_at: Callable[[RequestRecord], int | None] | None = None,
        member: Callable[[str], bool] | None = None,
    ) -> None:
        """`instructor_key`: the key whose feeds have places of their own; `room`: the stand-in has a door (labels
        are names, and feeds are limited per address); `text_at`: which write of a record's stream first showed
        text (its time is the TTFT the board shows; without it, none is); `member`: in a room with a door, whether
        a record's learner joined (a request refused before the planner still carries the key it was sent with:
        20 such under made-up keys had pushed every learner off a 3-row board)."""
        if not keepalive > 0 or retry_ms < 0 or max_feeds < 1:
            raise ValueError(
                f"keepalive must be > 0 seconds, retry_ms >= 0 and max_feeds >= 1, got {keepalive!r}, {retry_ms!r}, "
                f"{max_feeds!r}"
            )
        self.keepalive = keepalive
        self.retry_ms = retry_ms
        self.max_feeds = max_feeds
        self.feeds = 0  # feeds open right now, without the instructor's key
        self.reserved = 0  # feeds open right now with it
        self.room = room
        self._text_at = text_at
        self._member = member
        self._key = instructor_key
        self._by_address: dict[str, int] = {}  # feeds open per address (a room with a door only)
        self._stopping = stopping
        self._cond = threading.Condition()
        self._board = Board(salt=os.urandom(16), epoch=secrets.token_hex(4), max_learners=max_learners, members=room)
        self._unsubscribe = book.subscribe(self._seen, started=True)

    # -- fed by the records (in the request handlers' threads) --

    def _seen(self, record: RequestRecord) -> None:
        if self._member is not None and not self._member(record.learner):
            return
        text_at = self._text_at(record) if self._text_at is not None and record.finished and record.stream else None
        visit = visit_of(record, text_at)
        if visit is None:
            return
        with self._cond:
            self._board.observe(visit)
            self._cond.notify_all()

    def reset(self) -> None:
        """Forget every learner (the stand-in started everyone over)."""
        with self._cond:
            self._board.reset()
            self._cond.notify_all()

    def wake(self) -> None:
        """Wake every waiting feed now (the stand-in is stopping)."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        """Stop listening to the records and wake every feed."""
        self._unsubscribe()
        self.wake()

    # -- read by the pages --

    def since(self, last_id: str | None) -> list[BoardEvent]:
        """The events a page that last saw `last_id` has missed (a snapshot for None or an unknown id)."""
        with self._cond:
            return self._board.since(last_id)

    def snapshot(self) -> dict[str, object]:
        """The rows and totals as the page shows them (a copy)."""
        with self._cond:
            return json.loads(self._board.snapshot().data)

    def next_events(self, after: str, timeout: float) -> list[BoardEvent]:
        """The events after `after`, waiting up to `timeout` seconds for one when there are none yet."""
        with self._cond:
            events = self._board.since(after)
            if not events and not self._stopping.is_set():
                self._cond.wait(timeout)
                events = self._board.since(after)
            return events

    # -- the pages --

    def page(self, head: RequestHead) -> PageHandler | None:
        """The handler for a dashboard path (None for every other path: those are the API's)."""
        path = head.path
        if path != DASHBOARD_PATH and not path.startswith(DASHBOARD_PATH + "/"):
            return None
        rest = path[len(DASHBOARD_PATH) :]
        if rest == "/events":
            return self._events if head.method == "GET" else not_allowed("GET")
        if rest == "/":  # the page links its files relative to /dashboard (so it works under a path prefix too)
            return _to_the_page
        return _FILES.handler(head) or _NOT_FOUND

    def _events(self, conn: Connection, head: RequestHead) -> bool:
        """Play the feed on this connection until the page leaves or the server stops (never ends cleanly:
        a page whose feed ends reconnects, and a stopped server is not coming back on this connection). Past
        `max_feeds` open feeds the page gets a 503 instead, so open dashboards can never take the connections
        the API needs (260 of them had taken all 256: every API call got 503)."""
        keyed = self._keyed(head)
        address = _peer_of(conn) if self.room and not keyed else None
        refused = self._take(keyed, address)
        if refused:
            body = json.dumps(error_body(refused, "server_error", "too_many_feeds")).encode()
            conn.send_reply(503, body, "application/json", headers=(("Retry-After", "5"),), close=True)
            return False
        try:
            return self._play(conn, head)
        finally:
            self._give_back(keyed, address)

    def _keyed(self, head: RequestHead) -> bool:
        """Whether the feed request carries the instructor's key (`?key=`)."""
        given = head.query.get("key", [""])[-1]
        return bool(self._key) and hmac.compare_digest(given.encode(), str(self._key).encode())

    def _take(self, keyed: bool, address: str | None) -> str | None:
        """Take a feed's place: None, or why there is none."""
        with self._cond:
            if keyed:
                if self.reserved >= RESERVED_FEEDS:
                    return f"the instructor's {RESERVED_FEEDS} dashboard feeds are all open; close one"
                self.reserved += 1
                return None
            if self.feeds >= self.max_feeds:
                return f"the dashboard already has its maximum of {self.max_feeds} live feeds open; try again shortly"
            if address is not None:
                held = self._by_address.get(address, 0)
                if held >= FEEDS_PER_ADDRESS:
                    return f"this address already holds {held} live dashboard feeds, the most one address may"
                self._by_address[address] = held + 1
            self.feeds += 1
            return None

    def _give_back(self, keyed: bool, address: str | None) -> None:
        with self._cond:
            if keyed:
                self.reserved -= 1
                return
            self.feeds -= 1
            if address is not None:
                left = self._by_address.pop(address, 1) - 1
                if left:
                    self._by_address[address] = left

    def _play(self, conn: Connection, head: RequestHead) -> bool:
        conn.send_stream_head((("X-Accel-Buffering", "no"),))
        conn.send_chunk(b"retry: %d\n\n" % self.retry_ms)
        cursor = last_event_id(head) or ""
        pending = self.since(cursor or None)
        quiet_since = time.monotonic()
        while not self._stopping.is_set():
            if pending:
                conn.send_chunk(b"".join(event.frame() for event in pending))
                cursor, quiet_since = pending[-1].id, time.monotonic()
            elif time.monotonic() - quiet_since >= self.keepalive:
                conn.send_chunk(b": keep-alive\n\n")
                quiet_since = time.monotonic()
            if conn.peer_closed():
                return False
            left = self.keepalive - (time.monotonic() - quiet_since)
            pending = self.next_events(cursor, timeout=max(0.0, min(_WAKE, left)))
        return False


def _peer_of(conn: Connection) -> str:
    try:
        return str(conn.sock.getpeername()[0])
    except (OSError, IndexError):
        return ""


def _to_the_page(conn: Connection, head: RequestHead) -> bool:
    conn.send_reply(308, b"", "text/plain; charset=utf-8", headers=(("Location", "../dashboard"),))
    return True
