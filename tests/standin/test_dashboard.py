"""The room dashboard: its board (pure), its page, and its live SSE feed read with the library's own client.

The feed is read by `streamlab.net.eventstream.EventStream` (the library's parser over httpx) on a thread;
tests wait on the state the events build, never on sleeps, and the only time bound is a generous one.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from streamlab.core.progress import VERDICTS
from streamlab.core.standin.board import MAX_EXERCISES, TTFT_WINDOW, Board, Visit, learner_label
from streamlab.core.standin.scenarios import scenario
from streamlab.net.eventstream import EventStream
from streamlab.net.progress import RoomLink
from streamlab.net.standin.server import StandIn

pytestmark = [pytest.mark.usefixtures("no_leaked_threads")]

HI = [{"role": "user", "content": "hi"}]
WAIT = 20.0  # seconds: a generous bound for "the event arrives", so a loaded machine does not fail the test
QUICK = 0.5  # the feed's keep-alive period here: a reader closed from another thread notices at the next bytes


# -- the board, without a socket ----------------------------------------------------------------------------


def board(**kw: Any) -> Board:
    return Board(salt=b"salt", epoch="e1", **kw)


def test_a_label_never_holds_the_key_only_three_characters_and_a_salted_hash():
    key = "sk-proj-0123456789abcdef"
    label = learner_label(key, b"salt")
    assert label.startswith("sk-\u2026#") and "proj" not in label and "0123" not in label
    assert label == learner_label(key, b"salt") != learner_label(key, b"other salt")
    assert learner_label("", b"salt") == "anonymous"
    assert learner_label("sk-proj-one", b"s") != learner_label("sk-proj-two", b"s")  # same prefix, two rows


@pytest.mark.parametrize("key, shown", [("ada", "a"), ("bo", "b"), ("x", ""), ("alice", "al"), ("sk-proj-x", "sk-")])
def test_even_a_short_key_is_never_shown_whole(key: str, shown: str):
    label = learner_label(key, b"salt")
    assert re.fullmatch(re.escape(shown) + "\u2026#[0-9a-f]{6} [a-z]+ [a-z]+", label), label
    assert key not in label  # INSTRUCTORS.md: "a key is never shown whole"
    assert learner_label("ada", b"salt") != learner_label("amy", b"salt")  # same first letter, two learners


def test_learners_with_the_same_first_letter_are_told_apart_by_two_words():
    """Issue 36: `a\u2026#1685b7` and `a\u2026#16f5b1` cannot be told apart on a projector; two words can."""
    labels = [learner_label(name, b"room salt") for name in ("ada", "amy", "alan", "anna", "ari", "abe")]
    words = [label.split(" ", 1)[1] for label in labels]
    assert len(set(words)) == len(words), labels
    assert all(len(w.split()) == 2 and w.replace(" ", "").isalpha() for w in words)


def test_the_board_counts_each_request_once_and_keeps_how_it_ended():
    b = board()
    b.observe(Visit("ada", 0, False, model="flaky"))
    b.observe(Visit("ada", 0, True, model="flaky", status=429, ending="http_error"))
    b.observe(Visit("ada", 1, False, model="flaky", retry=1))
    (event,) = b.observe(Visit("ada", 1, True, model="flaky", status=200, ending="complete", retry=1, ttft=0.25))
    row = json.loads(event.data)["row"]
    assert row == {
        "number": 1,
        "learner": learner_label("ada", b"salt"),
        "requests": 2,
        "active": 0,
        "model": "flaky",
        "scenario": "flaky",
        "status": 200,
        "ending": "complete",
        "endings": {"complete": 1, "http_error": 1},
        "retries": 1,
        "ttft_ms": 250.0,
        "verdicts": {},
    }
    b.observe(Visit("bob", 0, False, model="not-a-scenario"))
    totals = json.loads(b.snapshot().data)["totals"]
    assert totals == {
        "learners": 2,
        "requests": 3,
        "active": 1,
        "retries": 1,
        "endings": {"complete": 1, "http_error": 1},
        "ttft_p50_ms": 250.0,
        "ttft_streams": 1,
        "verdicts": {},
    }
    b.observe(Visit("carol", 5, True, model="scheduled", status=200, ending="cut"))  # seen only finished
    assert json.loads(b.snapshot().data)["rows"][2]["requests"] == 1


def test_since_replays_exactly_the_missed_events_or_gives_one_snapshot():
    b = board(max_events=3)
    ids = [e.id for i in range(5) for e in b.observe(Visit("ada", i, True, ending="complete"))]
    assert ids == ["e1-1", "e1-2", "e1-3", "e1-4", "e1-5"]
    assert [e.id for e in b.since("e1-3")] == ["e1-4", "e1-5"]
    assert b.since("e1-5") == []
    for unknown in (None, "", "e1-1", "e1-9", "e2-4", "nonsense", "e1-x"):  # too old, future, other epoch
        (event,) = b.since(unknown)
        assert event.event == "snapshot" and event.id == "e1-5", unknown
    reset = b.reset()
    assert reset.event == "snapshot" and json.loads(reset.data)["rows"] == []
    assert b.since("e1-5") == [reset]


def test_past_its_bound_the_board_forgets_the_least_recent_learner_and_says_so():
    b = board(max_learners=2)
    for i, key in enumerate(("a", "b", "c")):
        events = b.observe(Visit(key, i, True))
    assert [e.event for e in events] == ["forget", "learner"] and json.loads(events[0].data)["number"] == 1
    assert [r["number"] for r in json.loads(b.snapshot().data)["rows"]] == [2, 3]


# -- the feed, over HTTP ---------------------------------------------------------------------------------------


class Watcher:
    """The dashboard's event stream read by the library's own client on a thread, like a page would."""

    def __init__(self, server: StandIn, last_event_id: str | None = None) -> None:
        self.stream = EventStream(
            server.dashboard_url + "/events", None, method="GET", last_event_id=last_event_id, read_timeout=None
        )
        self.events: list[Any] = []
        self.rows: dict[int, dict] = {}
        self.totals: dict = {}
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, name="dashboard-watcher")
        self.thread.start()

    def _read(self) -> None:
        try:
            for timed in self.stream:
                data = json.loads(timed.data)
                with self.cond:
                    self.events.append(timed)
                    if timed.type == "snapshot":
                        self.rows = {row["number"]: row for row in data["rows"]}
                    elif timed.type == "learner":
                        self.rows[data["row"]["number"]] = data["row"]
                    self.totals = data["totals"]
                    self.cond.notify_all()
        except Exception:  # noqa: BLE001 - the stream ends when the test closes it or the server stops
            pass
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, predicate: Callable[[Watcher], bool], what: str) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: predicate(self), WAIT), f"waited {WAIT} s for {what}: {self.rows}"

    def by_label(self) -> dict[str, dict]:
        return {row["learner"]: row for row in self.rows.values()}

    def close(self) -> None:
        self.stream.close()
        self.thread.join(WAIT)


def test_the_feed_reports_each_learners_requests_as_they_happen():
    with StandIn(scenario("all"), dashboard_keepalive=QUICK) as server:
        watcher = Watcher(server)
        try:
            watcher.wait_for(lambda w: len(w.events) >= 1, "the first snapshot")
            assert watcher.events[0].type == "snapshot" and watcher.totals["requests"] == 0
            assert watcher.stream.parser.retry_ms == 2000 and watcher.stream.raw.startswith(b"retry: 2000\n\n")
            with openai.OpenAI(base_url=server.base_url, api_key="ada-lovelace", max_retries=1) as sdk:
                text = "".join(
                    c.choices[0].delta.content or ""
                    for c in sdk.chat.completions.create(model="flaky", messages=HI, stream=True)
                    if c.choices
                )
            assert text == "Hello w\u00f6rld"  # the SDK retried the 429 by itself: x-stainless-retry-count 1
            with httpx.Client(headers={"Authorization": "Bearer bob"}) as bob, pytest.raises(httpx.HTTPError):
                bob.post(server.url("chat/completions"), json={"model": "cutoff", "messages": HI, "stream": True})
            watcher.wait_for(
                lambda w: len(w.rows) == 2 and w.totals["active"] == 0 and w.totals["requests"] == 3,
                "two learners' three finished requests",
            )
            rows = sorted(watcher.rows.values(), key=lambda r: r["number"])
            assert rows[0]["learner"].startswith("ada\u2026#") and rows[1]["learner"].startswith("b\u2026#")
            assert rows[0]["requests"] == 2 and rows[0]["retries"] == 1 and rows[0]["ending"] == "complete"
            assert rows[0]["endings"] == {"complete": 1, "http_error": 1} and rows[0]["scenario"] == "flaky"
            assert rows[0]["ttft_ms"] is not None and rows[0]["ttft_ms"] >= 0
            assert rows[1]["ending"] == "cut" and rows[1]["model"] == "cutoff" and rows[1]["retries"] == 0
            assert watcher.totals["endings"] == {"complete": 1, "cut": 1, "http_error": 1}
            ids = [e.id for e in watcher.events]
            assert all(ids) and len(set(ids)) == len(ids)  # an id on every event, never repeated
        finally:
            watcher.close()


def test_a_reconnect_with_last_event_id_misses_nothing():
    with StandIn(scenario("flaky"), dashboard_keepalive=QUICK) as server, httpx.Client() as client:
        steady, first = Watcher(server), Watcher(server)
        try:
            for key in ("ada", "bob"):
                client.post(
                    server.url("chat/completions"),
                    headers={"Authorization": f"Bearer {key}"},
                    json={"model": "flaky", "messages": HI, "stream": True},
                )
            first.wait_for(lambda w: w.totals.get("requests") == 2 and w.totals["active"] == 0, "two requests")
            seen = first.events[-1].id
            first.close()  # the page goes away (a laptop asleep, a network blip) ...
            for key in ("ada", "carol", "dan"):  # ... while the room goes on
                client.post(
                    server.url("chat/completions"),
                    headers={"Authorization": f"Bearer {key}"},
                    json={"model": "flaky", "messages": HI, "stream": True},
                )
            steady.wait_for(lambda w: w.totals.get("requests") == 5 and w.totals["active"] == 0, "five requests")
            again = Watcher(server, last_event_id=seen)  # ... and comes back, as EventSource does
            try:
                again.wait_for(lambda w: w.events and w.events[-1].id == steady.events[-1].id, "the replay")
                missed = [(e.id, e.type, e.data) for e in steady.events if _number(e.id) > _number(seen)]
                assert [(e.id, e.type, e.data) for e in again.events] == missed  # exactly those, in order
                caught_up = {**first.rows, **again.rows}  # the page's rows, updated by what it was replayed
                assert caught_up == steady.rows and again.totals == steady.totals
            finally:
                again.close()
            stale = Watcher(server, last_event_id="another-server-7")  # an id this server never gave
            try:
                stale.wait_for(lambda w: w.events, "a snapshot")
                assert [e.type for e in stale.events] == ["snapshot"] and stale.rows == steady.rows
            finally:
                stale.close()
        finally:
            steady.close()


def _number(event_id: str) -> int:
    return int(event_id.rpartition("-")[2])


def test_keep_alive_comments_while_the_room_is_quiet():
    with StandIn({}, dashboard_keepalive=0.2) as server:
        watcher = Watcher(server)
        try:
            deadline = time.monotonic() + WAIT
            while watcher.stream.raw.count(b": keep-alive\n\n") < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert watcher.stream.raw.count(b": keep-alive\n\n") >= 2
            assert [e.type for e in watcher.events] == ["snapshot"]  # comments are not events
        finally:
            watcher.close()


def test_open_feeds_never_hold_the_server_up_and_leave_no_records():
    server = StandIn(scenario("ttft")).start()
    watchers = [Watcher(server) for _ in range(3)]
    try:
        for w in watchers:
            w.wait_for(lambda w: w.events, "the snapshot")
        with httpx.Client() as client:
            r = client.post(server.url("chat/completions"), json={"model": "scheduled", "messages": HI, "stream": True})
        assert r.status_code == 200
        assert server.wait_idle() and [rec.model for rec in server.records()] == ["scheduled"]
        assert server.totals().requests == 1  # the page and its feeds are nobody's API call
    finally:
        started = time.monotonic()
        server.stop()  # with three feeds open
        stopped_in = time.monotonic() - started
        for w in watchers:
            w.thread.join(WAIT)
    assert stopped_in < WAIT and not any(w.thread.is_alive() for w in watchers)


def test_three_learners_verdicts_reach_the_dashboard_feed_live():
    """Three notebooks joined to one room stand-in send their check cells' verdicts (through the same link
    `join_room` makes); a page reading the dashboard feed sees learners x exercises fill in, never a name whole,
    and the verdicts count as nobody's API request."""
    sent = {
        "grace-hopper": [("01.1", "not attempted"), ("01.1", "passed"), ("03.2", "not yet")],
        "linus": [("01.1", "passed"), ("03.2", "passed")],
        "ken": [("01.1", "not yet")],
    }
    with StandIn(scenario("ttft"), dashboard_keepalive=QUICK) as server, httpx.Client() as client:
        watcher = Watcher(server)
        links = [RoomLink(server.base_url.removesuffix("/v1"), name) for name in sent]
        try:
            watcher.wait_for(lambda w: w.events, "the first snapshot")
            client.post(
                server.url("chat/completions"),
                headers={"Authorization": "Bearer linus"},
                json={"model": "scheduled", "messages": HI, "stream": True},
            )  # one real request too
            for link, verdicts in zip(links, sent.values()):
                for exercise, verdict in verdicts:
                    assert link.send(exercise, verdict)
            assert all(link.flush(WAIT) for link in links) and [link.sent for link in links] == [3, 2, 1]
            want = {name: dict(verdicts) for name, verdicts in sent.items()}  # the last verdict per exercise

            def key(verdicts: dict) -> str:
                return json.dumps(verdicts, sort_keys=True)

            watcher.wait_for(
                lambda w: sorted(key(r["verdicts"]) for r in w.rows.values()) == sorted(key(v) for v in want.values()),
                "every learner's last verdicts",
            )
            watcher.wait_for(lambda w: w.totals["active"] == 0 and w.totals["requests"] == 1, "linus's stream")
            by_verdicts = {key(r["verdicts"]): r for r in watcher.rows.values()}
            for name, verdicts in want.items():
                row = by_verdicts[key(verdicts)]
                assert row["learner"].startswith(name[: min(3, len(name) // 2)] + "\u2026#"), row
            linus = by_verdicts[key(want["linus"])]
            assert linus["requests"] == 1 and linus["model"] == "scheduled"  # verdicts and requests share a row
            assert watcher.totals["verdicts"] == {"not yet": 2, "passed": 3} and watcher.totals["learners"] == 3
            raw = watcher.stream.raw.decode()
            assert "grace" not in raw and "linus" not in raw and "ken" not in raw
            bad = client.post(
                server.url("progress"),
                headers={"Authorization": "Bearer mallory"},
                json={"exercise": "01.1", "verdict": "<b>passed</b>"},
            )
            assert bad.status_code == 400 and "verdict must be one of" in bad.json()["error"]["message"]
            assert server.wait_idle()
            assert not any(r["learner"].startswith("mal") for r in watcher.rows.values())  # refused: not shown
            assert len(watcher.rows) == 3
        finally:
            for link in links:
                link.close()
            watcher.close()


# -- the page ------------------------------------------------------------------------------------------------


def test_the_page_and_its_files_are_served_from_the_package_with_a_strict_policy():
    with StandIn({}) as server, httpx.Client() as client:
        page = client.get(server.dashboard_url)
        assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert '<script src="dashboard/dashboard.js"' in page.text and '<table id="learners"' in page.text
        script = client.get(server.dashboard_url + "/dashboard.js")
        assert script.status_code == 200 and "EventSource" in script.text
        assert "innerHTML" not in script.text  # learner-chosen text (model names) is only ever textContent
        assert client.get(server.dashboard_url + "/dashboard.css").headers["content-type"].startswith("text/css")
        head = client.head(server.dashboard_url)
        assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 1000
        slash = client.get(server.dashboard_url + "/")
        assert slash.status_code == 308 and slash.headers["location"] == "../dashboard"
        assert client.post(server.dashboard_url + "/events").status_code == 405
        assert client.get(server.dashboard_url + "/nope").status_code == 404
        assert server.records() == []
    with StandIn({}, dashboard=False) as server, httpx.Client() as client:
        assert client.get(server.dashboard_url).json()["error"]["code"] == "unknown_url"


def test_the_feed_carries_no_key_and_no_message():
    with StandIn(scenario("ttft"), dashboard_keepalive=QUICK) as server, httpx.Client() as client:
        watcher = Watcher(server)
        try:
            secret = "sk-proj-THIS-IS-A-REAL-LOOKING-KEY"
            client.post(
                server.url("chat/completions"),
                headers={"Authorization": f"Bearer {secret}"},
                json={
                    "model": "scheduled",
                    "stream": True,
                    "messages": [{"role": "user", "content": "my private question"}],
                },
            )
            watcher.wait_for(lambda w: w.totals.get("requests") == 1 and w.totals["active"] == 0, "the request")
            raw = watcher.stream.raw.decode()
            assert "REAL-LOOKING" not in raw and "proj" not in raw and "private question" not in raw
        finally:
            watcher.close()


def test_the_dashboard_files_ship_in_the_wheel():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert {p.name for p in (root / "streamlab" / "net" / "standin" / "static").iterdir()} >= {
        "dashboard.html",
        "dashboard.css",
        "dashboard.js",
    }


def test_the_totals_kept_row_by_row_equal_a_count_over_every_row():
    import random
    import statistics

    rng = random.Random(11)
    b = board(max_learners=7)
    open_requests: dict[int, str] = {}
    streams: list[float] = []  # every stream's TTFT in ms, in the order they finished
    for n in range(1000):
        if rng.random() < 0.2:
            b.observe(
                Visit(
                    f"k{rng.randrange(10)}",
                    n,
                    True,
                    verdict=(f"0{rng.randrange(1, 4)}.{rng.randrange(1, 4)}", rng.choice(VERDICTS)),
                )
            )
        elif open_requests and rng.random() < 0.5:
            request = rng.choice(sorted(open_requests))
            key = open_requests.pop(request)
            ttft = rng.choice([None, rng.random()])
            b.observe(
                Visit(
                    key,
                    request,
                    True,
                    ending=rng.choice(["complete", "cut", "http_error"]),
                    retry=rng.choice([None, 0, 1]),
                    ttft=ttft,
                )
            )
            if ttft is not None:
                streams.append(round(1000 * ttft, 1))
        else:
            key = f"k{rng.randrange(10)}"
            open_requests[n] = key
            b.observe(Visit(key, n, False, model=rng.choice(["flaky", "x"])))
        rows = json.loads(b.snapshot().data)["rows"]
        endings: dict[str, int] = {}
        verdicts: dict[str, int] = {}
        for r in rows:
            for name, count in r["endings"].items():
                endings[name] = endings.get(name, 0) + count
            for verdict in r["verdicts"].values():
                verdicts[verdict] = verdicts.get(verdict, 0) + 1
        recent = streams[-TTFT_WINDOW:]
        assert b.totals() == {
            "learners": len(rows),
            "requests": sum(r["requests"] for r in rows),
            "active": sum(r["active"] for r in rows),
            "retries": sum(r["retries"] for r in rows),
            "endings": dict(sorted(endings.items())),
            "ttft_p50_ms": round(statistics.median(recent), 1) if recent else None,
            "ttft_streams": len(recent),
            "verdicts": dict(sorted(verdicts.items())),
        }, n
    assert len(streams) > TTFT_WINDOW  # the window was full and slid


def test_the_median_ttft_is_the_rooms_recent_streams_not_each_learners_last():
    # The run-through: three learners stream `scheduled` (first bytes after 300 ms), then two of them one fast
    # model. The median of each learner's last TTFT said 1 ms; the room's streams say 300 ms.
    b = board()
    for i, key in enumerate(("ada", "bob", "cy")):
        b.observe(Visit(key, i, True, model="scheduled", status=200, ending="complete", ttft=0.300))
    for i, key in enumerate(("ada", "bob"), 3):
        b.observe(Visit(key, i, True, model="splits", status=200, ending="complete", ttft=0.001))
    totals = b.totals()
    assert totals["ttft_p50_ms"] == 300.0 and totals["ttft_streams"] == 5
    rows = json.loads(b.snapshot().data)["rows"]
    assert [r["ttft_ms"] for r in rows] == [1.0, 1.0, 300.0]  # each row still shows its own last stream
    for i in range(5, 5 + TTFT_WINDOW):  # only the last TTFT_WINDOW streams count
        b.observe(Visit("cy", i, True, model="splits", status=200, ending="complete", ttft=0.002))
    assert b.totals()["ttft_p50_ms"] == 2.0 and b.totals()["ttft_streams"] == TTFT_WINDOW
    b.observe(Visit("ada", 999, True, ending="complete"))  # a JSON reply has no TTFT: the window stays
    assert b.totals()["ttft_streams"] == TTFT_WINDOW
    b.reset()
    assert b.totals()["ttft_p50_ms"] is None and b.totals()["ttft_streams"] == 0


def test_a_verdict_changes_only_the_learners_verdicts_never_a_request_count():
    b = board()
    b.observe(Visit("ada", 0, False, model="scheduled"))
    (event,) = b.observe(Visit("ada", 1, True, verdict=("03.2", "not yet")))
    row = json.loads(event.data)["row"]
    assert row["verdicts"] == {"03.2": "not yet"} and row["requests"] == 1 and row["active"] == 1
    b.observe(Visit("ada", 2, True, verdict=("03.2", "passed")))  # the last verdict wins
    b.observe(Visit("ada", 3, True, verdict=("01.1", "not attempted")))
    (event,) = b.observe(Visit("bob", 4, True, verdict=("03.2", "passed")))  # a learner seen only by verdicts
    data = json.loads(event.data)
    assert data["row"]["requests"] == 0 and data["row"]["learner"].startswith("b\u2026#")
    assert data["totals"]["verdicts"] == {"not attempted": 1, "passed": 2} and data["totals"]["requests"] == 1
    rows = json.loads(b.snapshot().data)["rows"]
    assert rows[0]["verdicts"] == {"01.1": "not attempted", "03.2": "passed"}  # in exercise order


def test_the_grid_keeps_at_most_max_exercises_columns():
    b = board()
    for k in range(MAX_EXERCISES):
        b.observe(Visit(f"learner{k % 3}", k, True, verdict=(f"{k // 10:02d}.{k % 10}", "passed")))
    b.observe(Visit("ada", 500, True, verdict=("99.9", "passed")))  # one column too many: ignored
    b.observe(Visit("ada", 501, True, verdict=("00.0", "not yet")))  # a column already there: kept
    rows = {r["learner"]: r for r in json.loads(b.snapshot().data)["rows"]}
    ada = rows[learner_label("ada", b"salt")]
    assert ada["verdicts"] == {"00.0": "not yet"}
    columns = {ex for r in rows.values() for ex in r["verdicts"]}
    assert len(columns) == MAX_EXERCISES and "99.9" not in columns


def test_the_ttft_shown_is_the_time_to_first_text_not_first_byte():
    """Issue 36: the dashboard's TTFT had been the first byte's (a role chunk at once: 12 ms in a room where
    learners waited ~300 ms for words). A real stream whose role chunk leaves at once and whose first word 0.3 s
    later shows about 300 ms, through the Chat route and the EventSource route alike."""
    from streamlab.core.standin.script import Episode, Send, Wait

    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    word = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    episode = Episode([Send(role), Wait(0.3), Send(word), Send(b"data: [DONE]\n\n")])
    with StandIn({"late": episode}) as server, httpx.Client(timeout=10) as client:
        body = {"model": "late", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        client.post(server.url("chat/completions"), json=body, headers={"Authorization": "Bearer ada"})
        client.get(server.url("chat/stream"), params={"model": "late", "key": "grace"})
        assert server.wait_idle()
        with client.stream("GET", server.dashboard_url + "/events") as feed:  # what a page gets: a snapshot first
            snapshot = json.loads(next(line for line in feed.iter_lines() if line.startswith("data: "))[6:])
        assert [r["ttft_ms"] >= 290 for r in snapshot["rows"]] == [True, True], snapshot
        assert snapshot["totals"]["ttft_p50_ms"] >= 290
