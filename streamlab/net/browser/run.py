"""One run of lab 12's browser scenarios in headless Chromium, as one JSON-able dict (I/O layer).

`run_browser_lab()` starts a fresh stand-in (127.0.0.1, an ephemeral port, every room scenario), starts the
system's Chromium headless (`streamlab.net.browser.chromium`), opens the stand-in's chat page and plays the five
scenarios of `streamlab.net.browser.scenarios` in order. It returns:

    {
      "schema": 1,
      "about":   {"recorded_at", "chromium", "playwright", "python", "platform", "headless", "page",
                  "visibility": {"method", "second_tab_hides_page"}, "command"},
      "facts":   {"fetch": {...}, "eventsource": {...}, "hidden_tab": {...}, "stop_button": {...}, "render": {...}},
      "timings": {the same five keys: milliseconds and frame counts}
    }

`facts` come out the same on every run (a lab prints them; tests compare a live run with the recording), except
the header names Chromium sends (`facts.eventsource.request_headers.names`, which depend on its version).
`timings` vary (a lab plots them). `save(result, path)` writes one run as indented JSON; `load_recorded()` reads
the run shipped in the package (`streamlab/data/browser/lab12.json`, `data/browser/lab12.json` in a checkout),
which lab 12 replays unless it is run with STREAMLAB_LIVE=1.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from streamlab.core.standin.scenarios import scenario
from streamlab.net.browser.chromium import launch_chromium, sync_playwright
from streamlab.net.browser.scenarios import SCENARIOS, VISIBILITY_METHOD, Lab, second_tab_hides_page
from streamlab.net.standin.server import StandIn

__all__ = ["SCHEMA", "RECORDED", "VARIES_WITH_CHROMIUM", "run_browser_lab", "save", "load_recorded"]

SCHEMA = 1
RECORDED = ("browser", "lab12.json")
"""Where the recorded run lives inside `streamlab.data`."""
VARIES_WITH_CHROMIUM = (("eventsource", "request_headers", "names"),)
"""Facts that depend on the Chromium version rather than on the protocol: left out when runs are compared."""
VIEWPORT = {"width": 1280, "height": 800}


def _about(browser_version: str, page_url: str, hides: bool) -> dict[str, Any]:
    try:
        playwright_version = importlib.metadata.version("playwright")
    except importlib.metadata.PackageNotFoundError:
        playwright_version = None
    return {
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "chromium": browser_version,
        "playwright": playwright_version,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "headless": True,
        "page": page_url.rsplit(":", 1)[0] + ":PORT/chat",
        "visibility": {"method": VISIBILITY_METHOD, "second_tab_hides_page": hides},
        "command": "python -m streamlab.net.browser",
    }


def run_browser_lab(*, chromium: str | None = None) -> dict[str, Any]:
    """Play every scenario once, on a fresh stand-in and a fresh headless Chromium; the run as a dict (above).
    `chromium`: the executable (default: $STREAMLAB_CHROMIUM, else `chromium` on the PATH)."""
    with StandIn(scenario("all")) as server, sync_playwright() as playwright:
        browser = launch_chromium(playwright, chromium)
        try:
            context = browser.new_context(
                viewport={"width": VIEWPORT["width"], "height": VIEWPORT["height"]}, device_scale_factor=1
            )
            page = context.new_page()
            page.goto(server.chat_url)
            page.wait_for_function("() => window.streamlab !== undefined")
            about = _about(browser.version, server.chat_url, second_tab_hides_page(page))
            lab = Lab(server, page)
            facts: dict[str, Any] = {}
            timings: dict[str, Any] = {}
            for name, play in SCENARIOS.items():
                facts[name], timings[name] = play(lab)
            context.close()
        finally:
            browser.close()
    return {"schema": SCHEMA, "about": about, "facts": facts, "timings": timings}


def save(result: dict[str, Any], path: str | Path) -> None:
    """Write one run to `path` as indented JSON (the form `load_recorded` reads back)."""
    Path(path).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def load_recorded() -> dict[str, Any]:
    """The run recorded in the package (`streamlab/data/browser/lab12.json`)."""
    folder, name = RECORDED
    text = (importlib.resources.files("streamlab.data") / folder / name).read_text(encoding="utf-8")
    result: dict[str, Any] = json.loads(text)
    return result
