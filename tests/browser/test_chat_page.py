"""Lab 12's browser scenarios, live: the stand-in's chat page in headless Chromium (browser suite).

One run of `python -m streamlab.net.browser` (a child process, as lab 12 spawns it with STREAMLAB_LIVE=1) plays
the five scenarios on a fresh stand-in; the tests read its JSON. The facts are consequences of the protocol and
must come out exactly as the recorded run (`data/browser/lab12.json`) says, bar the header names that depend on
the Chromium version; timings are held only to orderings that causality guarantees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from streamlab.net.browser.run import VARIES_WITH_CHROMIUM, load_recorded
from streamlab.net.browser.scenarios import SCENARIOS, SCHEDULED_TEXT

from .conftest import ROOT

RUN_TIMEOUT = 240  # seconds: a run takes about 20 on two idle cores


@pytest.fixture(scope="module")
def live(chromium: str) -> dict[str, Any]:
    env = dict(os.environ, STREAMLAB_CHROMIUM=chromium)
    done = subprocess.run(
        [sys.executable, "-m", "streamlab.net.browser"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    run: dict[str, Any] = json.loads(done.stdout)
    return run


def _without_browser_specific(facts: dict[str, Any]) -> dict[str, Any]:
    copied = json.loads(json.dumps(facts))
    for *path, name in VARIES_WITH_CHROMIUM:
        place = copied
        for key in path:
            place = place[key]
        place.pop(name)
    return copied


def _shape(value: Any) -> Any:
    """The keys of nested dicts (and the type of everything else): what two runs must share."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def test_a_live_run_has_the_recorded_runs_shape_and_facts(live: dict[str, Any]) -> None:
    recorded = load_recorded()
    assert set(live) == set(recorded) and set(live["about"]) == set(recorded["about"])
    assert _shape(live["facts"]) == _shape(recorded["facts"])
    timing_keys = {k: set(v) for k, v in live["timings"].items()}
    assert timing_keys == {k: set(v) for k, v in recorded["timings"].items()}
    assert _without_browser_specific(live["facts"]) == _without_browser_specific(recorded["facts"])
    assert list(live["facts"]) == list(SCENARIOS)


def test_the_fetch_reader_shows_the_answer_and_its_marks_come_in_order(live: dict[str, Any]) -> None:
    facts, timings = live["facts"]["fetch"], live["timings"]["fetch"]
    assert facts["text_shown"] == SCHEDULED_TEXT and facts["status"] == 200
    assert facts["first_byte_not_before_the_scheduled_ttft"] and facts["marks_in_order"]
    steps = ("response_headers_ms", "first_byte_ms", "first_event_ms", "first_visible_text_ms", "done_ms")
    values = [timings[step] for step in steps]
    assert all(a <= b + 1.0 for a, b in zip(values, values[1:])), dict(zip(steps, values))


def test_eventsource_reconnects_after_a_clean_end_and_a_204_stops_it(live: dict[str, Any]) -> None:
    es = live["facts"]["eventsource"]
    naive, stop, headers = es["naive"], es["stop"], es["request_headers"]
    assert (naive["requests"], naive["generations"], naive["endings"]) == (2, 2, ["complete", "complete"])
    assert naive["last_event_id_sent"] == [None, naive["final_event_id"]] == [None, "23"]
    assert naive["reconnected_after_at_least_retry"] and naive["answer_shown_twice"]
    assert naive["key_in_the_url_the_server_logged"] and naive["learner"] == "es-naive"
    assert (stop["requests"], stop["statuses"], stop["generations"]) == (2, [200, 204], 1)
    assert stop["ready_state_after_204"] == 2 and stop["error_ready_states"] == [0, 2]
    assert stop["reconnected_after_at_least_retry"] and stop["learner_from_cookie"]
    assert stop["cookie_sent"] == "streamlab_key=es-cookie" and not stop["key_in_the_url_the_server_logged"]
    assert headers["accept"] == "text/event-stream" and headers["authorization"] is None
    assert headers["last_event_id_on_reconnect"] == "23" and "authorization" not in headers["names"]


def test_a_hidden_tab_aborts_and_the_shown_tab_asks_again(live: dict[str, Any]) -> None:
    hidden = live["facts"]["hidden_tab"]
    assert (hidden["requests"], hidden["page_requests"], hidden["generations"]) == (2, 2, 2)
    assert hidden["endings"] == ["client_gone", "complete"] and hidden["aborted_while_hidden"] == 1
    assert hidden["new_requests_while_hidden"] == 0
    assert hidden["answer_started_over"] and hidden["ends_with_the_whole_answer"]
    assert live["about"]["visibility"]["second_tab_hides_page"] is False  # why the page's visibility is emulated


def test_only_an_aborting_stop_button_stops_the_generation(live: dict[str, Any]) -> None:
    abort, naive = live["facts"]["stop_button"]["abort"], live["facts"]["stop_button"]["naive"]
    assert (abort["server_ending"], abort["error"]) == ("client_gone", "AbortError")
    assert (naive["server_ending"], naive["error"]) == ("complete", None)
    assert abort["shown_is_part_of_the_answer"] and naive["shown_is_part_of_the_answer"]
    assert naive["page_received_the_whole_answer"] and not abort["page_received_the_whole_answer"]
    timings = live["timings"]["stop_button"]
    assert timings["abort"]["server_streamed_ms"] < timings["naive"]["server_streamed_ms"]


def test_batching_per_frame_renders_the_same_text_with_fewer_updates(live: dict[str, Any]) -> None:
    render, timings = live["facts"]["render"], live["timings"]["render"]
    assert render["tokens"] == 800 and render["same_text_received"] and render["same_text_shown"]
    assert render["token_mode_updates_once_per_token"] and render["frame_mode_updates_less_often"]
    assert render["frame_mode_at_most_one_update_per_frame"]
    for mode in ("token", "frame"):
        t = timings[mode]
        assert t["first_text_ms"] <= t["first_visible_text_ms"] <= t["done_ms"] + 1.0, t
        assert t["frames"] > 0 and t["dom_updates"] > 0
