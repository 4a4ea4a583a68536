"""The stand-in's room dashboard in a real browser: requests appear as rows, verdicts in the grid (browser suite).

The dashboard is the page the stand-in serves at /dashboard, listing the requests it has seen. The first test
opens it in headless Chromium, makes one streamed Chat Completions request with a model name used nowhere else,
and waits for a table row (`<tr>`) naming that model to appear, without reloading the page: the dashboard must
update itself. The second has three learners' notebooks send check-cell verdicts (through `RoomLink`, what
`join_room` uses) while the page is open, and waits for the learners x exercises grid to show each learner's
last verdict, the passes counted under each exercise, and no name whole. While the stand-in serves no
/dashboard (404), the tests are skipped and say so.
"""

from __future__ import annotations

import urllib.error
import urllib.request

import httpx
import pytest
from playwright.sync_api import expect

from streamlab.core import shapes
from streamlab.core.standin.script import Episode, Send
from streamlab.net.progress import RoomLink
from streamlab.net.standin.server import StandIn

MODEL = "browser-dashboard-check"
APPEAR_TIMEOUT = 60.0


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_request_appears_as_a_row_on_the_room_dashboard(request: pytest.FixtureRequest) -> None:
    frames = shapes.chat_text_stream(["Hel", "lo"], model=MODEL)
    with StandIn({MODEL: Episode([Send(frame) for frame in frames])}) as server:
        url = f"http://127.0.0.1:{server.port}/dashboard"
        status = _status(url)
        if status == 404:
            pytest.skip("the stand-in serves no /dashboard yet (streamlab.net.standin.server): nothing to open")
        assert status == 200, f"GET {url} answered {status}"
        page = request.getfixturevalue("browser_context").new_page()  # the browser starts only when needed
        try:
            page.goto(url)
            rows = page.locator("tr", has_text=MODEL)
            expect(rows).to_have_count(0)
            body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Say hello."}]}
            with httpx.Client(timeout=30) as client:
                reply = client.post(server.url("chat/completions"), json=body)
            assert reply.status_code == 200, reply.text
            expect(rows.first).to_be_visible(timeout=APPEAR_TIMEOUT * 1000)
        finally:
            page.close()


def test_three_learners_verdicts_fill_the_dashboards_grid_live(request: pytest.FixtureRequest) -> None:
    sent = {
        "grace-hopper": [("01.1", "not attempted"), ("01.1", "passed"), ("03.2", "not yet")],
        "linus": [("01.1", "passed"), ("03.2", "passed")],
        "ken": [("01.2", "not yet")],
    }
    with StandIn({}) as server:
        url = f"http://127.0.0.1:{server.port}/dashboard"
        if _status(url) == 404:
            pytest.skip("the stand-in serves no /dashboard yet (streamlab.net.standin.server): nothing to open")
        page = request.getfixturevalue("browser_context").new_page()
        links: list[RoomLink] = []
        try:
            page.goto(url)
            expect(page.locator("#verdicts-empty")).to_be_visible()
            expect(page.locator("#verdicts")).to_be_hidden()
            links = [RoomLink(f"http://127.0.0.1:{server.port}", name) for name in sent]
            for link, verdicts in zip(links, sent.values()):
                for exercise, verdict in verdicts:
                    assert link.send(exercise, verdict)
            assert all(link.flush(APPEAR_TIMEOUT) for link in links), links
            grid = page.locator("#verdicts-body tr")
            expect(grid).to_have_count(3, timeout=APPEAR_TIMEOUT * 1000)
            expect(page.locator("#verdicts-empty")).to_be_hidden()
            cells = page.locator("#verdicts-body td[data-exercise]")
            expect(cells).to_have_count(3 * 3)  # columns 01.1, 01.2, 03.2: every exercise anyone sent
            for exercise, verdict, count in (
                ("01.1", "passed", 2),
                ("03.2", "not yet", 1),
                ("03.2", "passed", 1),
                ("01.2", "not yet", 1),
                ("01.1", "not attempted", 0),
            ):
                selector = f'#verdicts-body td[data-exercise="{exercise}"][data-verdict="{verdict}"]'
                expect(page.locator(selector)).to_have_count(count)
            expect(page.locator('#verdicts-foot td[data-exercise="01.1"]')).to_have_text("2")
            expect(page.locator('#verdicts-foot td[data-exercise="03.2"]')).to_have_text("1")
            text = page.locator("body").inner_text()
            assert "grace" not in text and "linus" not in text and "ken" not in text  # keys shortened, always
            expect(page.locator("#total-learners")).to_have_text("3")
            expect(page.locator("#total-requests")).to_have_text("0")  # a verdict is nobody's API request
        finally:
            for link in links:
                link.close()
            page.close()
