"""Shared test helpers (streams, a running stand-in, socket helpers) and the suite's markers.

Markers (registered in pyproject.toml) are applied here, so no test file has to remember them:

* `net`: the test opens a TCP socket (a stand-in, a client, a raw socket). Applied to every test of the
  modules in NET_MODULES, to every test that uses a fixture in NET_FIXTURES, and to every test whose own
  source calls something in OPENS_SOCKETS (`StandIn(`, `serve(`, `raw_request(`...). A guard (an audit hook on
  socket creation) fails any test that opens a TCP socket without the marker, so `pytest -m "not net"` is
  really the pure suite and `python3 dev.py stress` (which runs `-m net`) really covers every socket test.
* `notebook`: runs a lab (nbval cells, marked by the root conftest.py; in-process solution runs).
* `browser`: drives JupyterLab in a headless browser.
* `slow`: takes more than a few seconds on its own (building a wheel, a kernel per lab).

Helpers live in tests/support.py: `from support import ASK, free_port` (pytest puts tests/ on sys.path).
"""

from __future__ import annotations

import contextlib
import inspect
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from support import one_shot_server

# -- markers ------------------------------------------------------------------------------------------

NET_MODULES = frozenset({"test_cancel", "test_client", "test_sdk", "test_standin"})
"""Test modules in which every test opens sockets, by file stem (unique across tests/'s room folders)."""

NET_FIXTURES = frozenset({"server", "live_server", "idle_standin", "serve_once", "http"})
"""Fixtures that start a server or a client: a test using one opens sockets (the per-module `server`
fixtures all start a stand-in)."""

OPENS_SOCKETS = re.compile(
    r"\b(?:StandIn|serve|raw_request|one_shot_server|free_port|create_connection|run_three_clients)\(|"
    r"\bsocket\.socket\(|\bhttpx\.(?:Async)?Client\(|\b(?:Async)?OpenAI\("
)
"""Calls that open sockets: a test whose own source makes one is `net` even in a mostly pure module."""

NOTEBOOK_MODULES = frozenset({"test_solutions"})
NET_NOTEBOOKS = frozenset({"06-the-official-sdk.ipynb", "07-capstone-relay.ipynb"})
"""Labs whose setup or solutions talk to a stand-in: their tests in NOTEBOOK_MODULES are `net` too."""
BROWSER_MODULES = frozenset({"test_browser"})
SLOW_MODULES = frozenset({"test_wheel"})


def _module_name(item: pytest.Item) -> str:
    return item.path.stem


def _opens_sockets(item: pytest.Item) -> bool:
    if _module_name(item) in NET_MODULES or NET_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("notebook") in NET_NOTEBOOKS:
        return True
    function = getattr(item, "function", None)
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        source = ""
    return bool(OPENS_SOCKETS.search(source))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix != ".py":  # lab notebooks under nbval: marked by the root conftest.py
            continue
        module = _module_name(item)
        if _opens_sockets(item):
            item.add_marker(pytest.mark.net)
        if module in NOTEBOOK_MODULES:
            item.add_marker(pytest.mark.notebook)
        if module in BROWSER_MODULES or module.startswith("test_browser"):
            item.add_marker(pytest.mark.browser)
        if module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


# -- the guard: a TCP socket in a test not marked `net` fails it ----------------------------------------

_watch: dict[str, object] = {"item": None, "opened": []}


def _audit(event: str, args: tuple) -> None:
    # Cheap on every other event. Only sockets made by the test's own thread count: a server thread left
    # over from an earlier test must not blame the current one.
    if event == "socket.__new__" and _watch["item"] is not None and args[1] in (socket.AF_INET, socket.AF_INET6):
        if threading.current_thread() is threading.main_thread():
            _watch["opened"].append(args[1])


sys.addaudithook(_audit)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _watch["item"], _watch["opened"] = item, []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    if call.when != "teardown" or _watch["item"] is not item:
        return
    opened, _watch["item"] = _watch["opened"], None
    exempt = item.get_closest_marker("net") or item.path.suffix != ".py"
    report = outcome.get_result()
    if opened and not exempt and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} opened {len(opened)} TCP socket(s) but is not marked `net`. Use a fixture from "
            "NET_FIXTURES, add the module to NET_MODULES in tests/conftest.py, or mark it @pytest.mark.net."
        )


@pytest.fixture
def no_leaked_threads():
    """The test must end every thread it started: servers joined, no watchdog left behind. Threads are compared
    as a set, not counted: a thread an earlier test left finishing may end during this one without hiding a
    thread this test leaked (a count would see 3 - 1 + 1 and pass, or fail this test for the other's thread)."""
    before = set(threading.enumerate())

    def started_here() -> list[str]:
        return [t.name for t in threading.enumerate() if t not in before and t.is_alive()]

    yield
    deadline = time.monotonic() + 5
    while started_here() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not started_here(), f"threads this test started are still running: {started_here()}"


# -- a running stand-in ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def idle_standin():
    """One stand-in per test module with an empty script: tests install theirs with `set_scripts`."""
    from streamlab.core.standin.script import Episode
    from streamlab.net.standin.server import StandIn

    with StandIn({"unused": Episode([])}) as server:
        yield server


# -- raw sockets -----------------------------------------------------------------------------------------


@pytest.fixture
def serve_once() -> Callable[[bytes], contextlib.AbstractContextManager[int]]:
    """`with serve_once(http_response(b"...")) as port:` (the fixture form of one_shot_server)."""
    return one_shot_server
