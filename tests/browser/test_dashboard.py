"""The stand-in's room dashboard in a real browser: a request made to the stand-in appears as a row (browser suite).

The dashboard is the page the stand-in serves at /dashboard, listing the requests it has seen. This test opens
it in headless Chromium, makes one streamed Chat Completions request with a model name used nowhere else, and
waits for a table row (`<tr>`) naming that model to appear, without reloading the page: the dashboard must
update itself. While the stand-in serves no /dashboard (404), the test is skipped and says so.
"""

from __future__ import annotations

import urllib.error
import urllib.request

import httpx
import pytest
from playwright.sync_api import expect

from streamlab.core import shapes
from streamlab.core.standin.script import Episode, Send
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
