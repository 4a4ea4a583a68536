"""Shared test fixtures."""

from __future__ import annotations

import threading
import time

import pytest


@pytest.fixture
def no_leaked_threads():
    """The test must leave the thread count where it found it: servers joined, no watchdog left behind."""
    before = threading.active_count()
    yield
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before, [t.name for t in threading.enumerate()]
