"""The five browser scenarios of lab 12, each run for real on the stand-in's chat page (I/O layer).

Each scenario drives the page (`streamlab/net/standin/static/chat.js`, through Playwright's `page.evaluate` and
real clicks) against a running stand-in, then reads both sides: what the page saw (its results and performance
marks) and what the stand-in recorded (its `RequestRecord`s: status, ending, the headers each request carried).
Each returns `(facts, timings)`:

* facts: counts, booleans, header values and texts that come out the same on every run (a lab prints them, a
  test compares them with the recorded run); each is a consequence of the protocol, never of luck;
* timings: milliseconds and frame counts, which vary from run to run (a lab plots them).

Every scenario uses a learner key of its own, so the stand-in keeps each one's episodes and records apart.
Waits are on states (the page's counters, the stand-in's records), never fixed sleeps, except one bounded
window in which an `EventSource` that a 204 closed must make no third request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamlab.core.standin.scenarios import markdown_pieces
from streamlab.net.standin.records import RequestRecord
from streamlab.net.standin.server import StandIn

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = [
    "Lab",
    "Scenario",
    "SCENARIOS",
    "SCHEDULED_TEXT",
    "LONG_TEXT",
    "VISIBILITY_METHOD",
    "fetch_reader",
    "eventsource",
    "hidden_tab",
    "stop_button",
    "render_batching",
    "second_tab_hides_page",
    "set_visibility",
]

SCHEDULED_TEXT = "".join(f"w{i:02d} " for i in range(20))
"""The `scheduled` scenario's answer (first token after 0.30 s, then one every 0.05 s)."""
LONG_TEXT = "".join(f"t{i:03d} " for i in range(200))
"""The `long` scenario's answer (200 tokens, 0.02 s apart: time to press stop in the middle)."""
SCHEDULED_TTFT_MS = 300.0
CLOCK_SLACK_MS = 1.0
"""Chromium coarsens performance.now() to 0.1 ms: an ordering of marks is checked to within this much."""
NO_THIRD_REQUEST_WINDOW = 1.5
"""Seconds an EventSource closed by a 204 is watched for a third request (none may come: it is closed for good)."""
WAIT = 20.0
"""Seconds any one state may take to arrive (a loaded machine only gets there later)."""

VISIBILITY_METHOD = (
    "document.visibilityState and document.hidden overridden on the page, then a visibilitychange event "
    "dispatched: in headless Chromium a second tab brought to the front leaves the first one 'visible'"
)
"""How the hidden-tab scenario hides the page, and why (headless Chromium never hides a page by itself)."""

_SET_VISIBILITY = """(state) => {
  Object.defineProperty(document, "visibilityState", {configurable: true, get: () => state});
  Object.defineProperty(document, "hidden", {configurable: true, get: () => state === "hidden"});
  document.dispatchEvent(new Event("visibilitychange"));
}"""


@dataclass(frozen=True)
class Lab:
    """What every scenario works on: the running stand-in and the chat page open on it."""

    server: StandIn
    page: Page


Scenario = Callable[[Lab], tuple[dict[str, Any], dict[str, Any]]]


def _chat(lab: Lab, **options: Any) -> dict[str, Any]:
    """Run `streamlab.chat(options)` on the page to its end; its result."""
    result: dict[str, Any] = lab.page.evaluate("(options) => streamlab.chat(options)", options)
    return result


def _start(lab: Lab, function: str = "chat", **options: Any) -> None:
    """Start `streamlab.<function>(options)` on the page without waiting for it (see `_finish`)."""
    lab.page.evaluate(f"(options) => {{ window.__run = streamlab.{function}(options); }}", options)


def _finish(lab: Lab) -> dict[str, Any]:
    result: dict[str, Any] = lab.page.evaluate("() => window.__run")
    return result


def _wait_tokens(lab: Lab, count: int) -> None:
    lab.page.wait_for_function(f"() => streamlab.state.tokens >= {count}", timeout=WAIT * 1000)


def _records(lab: Lab, learner: str, count: int | None = None) -> list[RequestRecord]:
    """The learner's records once they are all finished (and at least `count` of them exist)."""
    done = lab.server.wait_until(
        lambda rs: (
            len([r for r in rs if r.learner == learner]) >= (count or 1)
            and all(r.finished for r in rs if r.learner == learner)
        ),
        timeout=WAIT,
    )
    records = lab.server.records(learner=learner)
    if not done:
        raise RuntimeError(f"the stand-in's records for {learner!r} did not finish in {WAIT:g} s: {records}")
    return records


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


def _marks(result: dict[str, Any], *names: str) -> dict[str, float | None]:
    marks = result.get("marks") or {}
    return {name.replace("-", "_") + "_ms": _round(marks.get(name)) for name in names}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _ordered(values: list[float | None]) -> bool:
    present = [v for v in values if v is not None]
    return len(present) == len(values) and all(a <= b + CLOCK_SLACK_MS for a, b in zip(present, present[1:]))


# -- (a) the fetch reader ------------------------------------------------------------------------------------


def fetch_reader(lab: Lab) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a) `fetch` + `ReadableStream` + `TextDecoderStream` on the `scheduled` answer: when each step happened."""
    key = "fetch-reader"
    result = _chat(lab, transport="fetch", model="scheduled", key=key, render="frame", markdown=False)
    (record,) = _records(lab, key, 1)
    steps = ("response-headers", "first-byte", "first-event", "first-text", "first-visible-text", "done")
    timings: dict[str, Any] = _marks(result, *steps)
    first = record.write_times[0] if record.write_times else None
    arrived = record.arrived_at
    timings["server_first_write_ms"] = None if first is None or arrived is None else _ms(first - arrived)
    first_byte = timings["first_byte_ms"]
    facts = {
        "scheduled_first_token_ms": SCHEDULED_TTFT_MS,
        "status": result["status"],
        "content_type": result["contentType"],
        "events": result["events"],
        "tokens": result["tokens"],
        "text_shown": result["shown"],
        "shows_the_whole_answer": result["shown"] == SCHEDULED_TEXT,
        "server_ending": str(record.ending),
        "marks_in_order": _ordered([timings[f"{step.replace('-', '_')}_ms"] for step in steps[:5]]),
        "first_byte_not_before_the_scheduled_ttft": (
            first_byte is not None and first_byte >= SCHEDULED_TTFT_MS - CLOCK_SLACK_MS
        ),
    }
    return facts, timings


# -- (b) EventSource on the GET route ---------------------------------------------------------------------------


def _reconnect_gap(records: list[RequestRecord]) -> float | None:
    """Seconds from the first stream's last write to the reconnect's arrival (a lower bound on the browser's wait:
    it learns of the end after that write, then waits `retry`)."""
    if len(records) < 2 or not records[0].write_times:
        return None
    return records[1].started_at - records[0].write_times[-1]


def _eventsource_run(lab: Lab, key: str, retry_ms: int, after_end: str, cookie: bool) -> dict[str, Any]:
    options = dict(transport="eventsource", model="scheduled", retry=retry_ms, afterEnd=after_end, markdown=False)
    options.update(closeOnDone=False, closeAfterDone=2, timeoutMs=WAIT * 1000)
    options.update(cookie=key, key="") if cookie else options.update(key=key)
    result = _chat(lab, **options)
    if cookie:
        lab.page.evaluate("() => { document.cookie = 'streamlab_key=; path=/; max-age=0'; }")
    return result


def eventsource(lab: Lab) -> tuple[dict[str, Any], dict[str, Any]]:
    """(b) `EventSource` on `GET /v1/chat/stream`: a naive server replays the answer after its clean end; the fix
    answers the reconnect's Last-Event-ID with 204, and the browser stops for good."""
    naive_key, stop_key = "es-naive", "es-cookie"
    naive = _eventsource_run(lab, naive_key, 300, "replay", cookie=False)
    naive_records = _records(lab, naive_key, 2)
    stop = _eventsource_run(lab, stop_key, 600, "stop", cookie=True)
    _records(lab, stop_key, 2)
    time.sleep(NO_THIRD_REQUEST_WINDOW)  # a closed EventSource must stay closed: watch for a third request
    stop_records = _records(lab, stop_key, 2)
    first = naive_records[0]
    naive_gap, stop_gap = _reconnect_gap(naive_records), _reconnect_gap(stop_records)
    facts = {
        "naive": {
            "requests": len(naive_records),
            "generations": lab.server.requests_for("scheduled", learner=naive_key),
            "statuses": [r.status for r in naive_records],
            "endings": [str(r.ending) for r in naive_records],
            "last_event_id_sent": [r.last_event_id for r in naive_records],
            "final_event_id": naive["lastEventId"],
            "opens": naive["opens"],
            "error_ready_states": naive["errors"],
            "events": naive["events"],
            "answer_shown_twice": naive["shown"] == SCHEDULED_TEXT * 2,
            "retry_ms": 300,
            "reconnected_after_at_least_retry": naive_gap is not None and naive_gap >= 0.300,
            "learner": first.learner,
            "key_in_the_url_the_server_logged": f"key={naive_key}" in first.path,
        },
        "stop": {
            "requests": len(stop_records),
            "generations": lab.server.requests_for("scheduled", learner=stop_key),
            "statuses": [r.status for r in stop_records],
            "last_event_id_sent": [r.last_event_id for r in stop_records],
            "opens": stop["opens"],
            "error_ready_states": stop["errors"],
            "ready_state_after_204": stop["readyState"],
            "closed_by": stop["closedBy"],
            "answer_shown_once": stop["shown"] == SCHEDULED_TEXT,
            "retry_ms": 600,
            "reconnected_after_at_least_retry": stop_gap is not None and stop_gap >= 0.600,
            "learner_from_cookie": all(r.learner == stop_key for r in stop_records),
            "key_in_the_url_the_server_logged": "key=" in stop_records[0].path,
            "cookie_sent": stop_records[0].headers.get("cookie"),
        },
        "request_headers": {
            "accept": first.headers.get("accept"),
            "cache_control": first.headers.get("cache-control"),
            "authorization": first.headers.get("authorization"),
            "last_event_id_on_reconnect": naive_records[1].last_event_id,
            "names": sorted(first.headers),
        },
    }
    timings = {
        "naive_reconnect_gap_ms": None if naive_gap is None else _ms(naive_gap),
        "stop_reconnect_gap_ms": None if stop_gap is None else _ms(stop_gap),
        "naive": _marks(naive, "first-event", "first-visible-text", "end-1", "error-1", "open-2", "end-2"),
        "stop": _marks(stop, "first-event", "end-1", "error-1", "error-2"),
    }
    return facts, timings


# -- (c) a fetch-event-source-style client in a tab hidden, then shown ---------------------------------------------


def set_visibility(page: Page, state: str) -> None:
    """Make the page `state` ("hidden" or "visible") as far as its scripts can tell (see `VISIBILITY_METHOD`)."""
    page.evaluate(_SET_VISIBILITY, state)


def second_tab_hides_page(page: Page) -> bool:
    """Whether bringing a second tab to the front hides `page` in this browser (headless Chromium: it does not)."""
    other = page.context.new_page()
    try:
        other.bring_to_front()
        hidden = page.evaluate("() => document.visibilityState") == "hidden"
    finally:
        other.close()
        page.bring_to_front()
    return hidden


def hidden_tab(lab: Lab) -> tuple[dict[str, Any], dict[str, Any]]:
    """(c) fetch-event-source's default (openWhenHidden=false): the tab hidden mid-answer aborts the request, the
    tab shown again sends it again, and the model generates the whole answer a second time. The `long` answer
    (four seconds) leaves the tab all the time it needs to hide after the third token on a loaded machine."""
    key = "hidden-tab"
    _start(lab, transport="fetch-event-source", model="long", key=key, markdown=False)
    _wait_tokens(lab, 3)
    set_visibility(lab.page, "hidden")
    try:
        (aborted,) = _records(lab, key, 1)  # the abort reached the stand-in while the tab was hidden
        while_hidden = len(lab.server.records(learner=key))
    finally:
        set_visibility(lab.page, "visible")
    result = _finish(lab)
    records = _records(lab, key, 2)
    text = result["text"]
    facts = {
        "requests": len(records),
        "page_requests": result["requests"],
        "generations": lab.server.requests_for("long", learner=key),
        "endings": [str(r.ending) for r in records],
        "new_requests_while_hidden": while_hidden - 1,
        "aborted_while_hidden": result["abortedWhileHidden"],
        "last_event_id_sent": [r.last_event_id for r in records],
        "answer_started_over": text.startswith("t000 t001 t002 ") and text.count("t000 ") == 2,
        "ends_with_the_whole_answer": text.endswith(LONG_TEXT),
    }
    timings = {
        **_marks(result, "first-text", "hidden", "shown", "request-2", "done"),
        "first_request_lasted_ms": None
        if aborted.finished_at is None
        else _ms(aborted.finished_at - aborted.started_at),
    }
    return facts, timings


# -- (d) the stop button: abort, or only stop rendering ----------------------------------------------------------


def _stop_run(lab: Lab, key: str, button: str) -> tuple[dict[str, Any], RequestRecord]:
    _start(lab, transport="fetch", model="long", key=key, render="frame", markdown=False)
    _wait_tokens(lab, 5)
    lab.page.click(button)
    result = _finish(lab)
    (record,) = _records(lab, key, 1)
    return result, record


def stop_button(lab: Lab) -> tuple[dict[str, Any], dict[str, Any]]:
    """(d) a stop button that aborts ends the request on the stand-in (client_gone); one that only stops rendering
    leaves the model writing to the end (complete), however frozen the screen looks."""
    aborted, aborted_record = _stop_run(lab, "stop-abort", "#stop")
    naive, naive_record = _stop_run(lab, "stop-naive", "#stop-rendering")

    def seen(result: dict[str, Any], record: RequestRecord) -> dict[str, Any]:
        shown = result["shown"]
        return {
            "server_ending": str(record.ending),
            "error": result["error"],
            "shown_is_part_of_the_answer": bool(shown) and LONG_TEXT.startswith(shown) and shown != LONG_TEXT,
            "page_received_the_whole_answer": result["text"] == LONG_TEXT,
        }

    facts = {"abort": seen(aborted, aborted_record), "naive": seen(naive, naive_record)}
    timings = {
        name: {
            **_marks(result, "stop-clicked", "aborted", "done"),
            "server_streamed_ms": None if record.finished_at is None else _ms(record.finished_at - record.started_at),
        }
        for name, result, record in (("abort", aborted, aborted_record), ("naive", naive, naive_record))
    }
    return facts, timings


# -- (e) rendering every token against once per animation frame -----------------------------------------------------


def render_batching(lab: Lab) -> tuple[dict[str, Any], dict[str, Any]]:
    """(e) the `markdown` answer (800 small tokens, 2 ms apart) re-rendered whole through a small Markdown function:
    on every token, or once per animation frame. Frames, long tasks and DOM updates are measured in the page."""
    runs = {}
    for mode in ("token", "frame"):
        runs[mode] = lab.page.evaluate(
            "(options) => streamlab.measureRendering(options)",
            {"model": "markdown", "key": f"render-{mode}", "render": mode},
        )
        _records(lab, f"render-{mode}", 1)
    answer = "".join(markdown_pieces())
    token, frame = runs["token"], runs["frame"]
    facts = {
        "tokens": token["tokens"],
        "same_text_received": token["text"] == frame["text"] == answer,
        "same_text_shown": token["shown"] == frame["shown"],
        "token_mode_updates_once_per_token": token["updates"] == token["tokens"],
        "frame_mode_updates_less_often": frame["updates"] < token["updates"],
        "frame_mode_at_most_one_update_per_frame": frame["updates"] <= frame["frames"],
    }
    timings = {
        mode: {
            "frames": result["frames"],
            "long_tasks": result["longTasks"],
            "long_task_ms": round(result["longTaskMs"], 1),
            "dom_updates": result["updates"],
            "render_ms": round(result["renderMs"], 1),
            "elapsed_ms": round(result["elapsedMs"], 1),
            **_marks(result, "first-text", "first-visible-text", "done"),
        }
        for mode, result in runs.items()
    }
    return facts, timings


SCENARIOS: dict[str, Scenario] = {
    "fetch": fetch_reader,
    "eventsource": eventsource,
    "hidden_tab": hidden_tab,
    "stop_button": stop_button,
    "render": render_batching,
}
"""The scenarios in the order a run plays them, under the names the JSON's `facts` and `timings` use."""
