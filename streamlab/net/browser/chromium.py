"""The operating system's Chromium, found and started headless through Playwright (I/O layer).

No browser is ever downloaded (`playwright install` is never run): Playwright for Python drives the system's
executable through `executable_path`, as the browser test suite does (tools/browser.py, whose flags these are:
a test holds the two lists equal). `$STREAMLAB_CHROMIUM` names an executable; otherwise the first of
`CHROMIUM_NAMES` on the PATH is used. Playwright itself is the `browser` extra (`pip install -e '.[browser]'`);
`BrowserMissing` says which of the two is missing and how to get it.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Playwright is imported when a browser is started, so that `--help` works without it
    from playwright.sync_api import Browser, Playwright

__all__ = [
    "CHROMIUM_ARGS",
    "CHROMIUM_ENV",
    "CHROMIUM_INSTALL",
    "CHROMIUM_NAMES",
    "PLAYWRIGHT_INSTALL",
    "BrowserMissing",
    "find_chromium",
    "launch_chromium",
    "sync_playwright",
]

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_ENV = "STREAMLAB_CHROMIUM"
CHROMIUM_INSTALL = "apt-get install -y chromium"
PLAYWRIGHT_INSTALL = "pip install -e '.[browser]'"

CHROMIUM_ARGS = (
    # A closed network refuses the browser's own background connections slowly: switch them all off.
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-default-browser-check",
    "--disable-dev-shm-usage",
)


class BrowserMissing(RuntimeError):
    """No Chromium on this machine, or no Playwright for Python in this environment (the message says how to
    install what is missing)."""


def find_chromium() -> str | None:
    """The path of the system's Chromium (or Chrome), or None: $STREAMLAB_CHROMIUM first, then the PATH."""
    named = os.environ.get(CHROMIUM_ENV)
    if named:
        return named if os.access(named, os.X_OK) else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def sync_playwright() -> Any:
    """Playwright's synchronous entry point (a context manager), or `BrowserMissing` naming the extra."""
    try:
        from playwright.sync_api import sync_playwright as start
    except ImportError as exc:
        raise BrowserMissing(f"Playwright for Python is not installed: {PLAYWRIGHT_INSTALL}") from exc
    return start()


def launch_chromium(playwright: Playwright, executable: str | None = None) -> Browser:
    """Start headless Chromium from `executable` (default: `find_chromium()`), with a fresh temporary profile."""
    path = executable or find_chromium()
    if path is None:
        raise BrowserMissing(
            f"no Chromium found (looked for ${CHROMIUM_ENV} and {', '.join(CHROMIUM_NAMES)} on the PATH): install it "
            f"with `{CHROMIUM_INSTALL}` (as root), or set {CHROMIUM_ENV} to a Chromium or Chrome executable"
        )
    return playwright.chromium.launch(executable_path=path, headless=True, args=list(CHROMIUM_ARGS))
