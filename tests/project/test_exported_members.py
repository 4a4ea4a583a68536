"""The public surface: `streamlab` exports exactly these names, each from the module that defines it, lazily.

Adding or removing a public name is a decision, so it shows up here as a one-line diff (as in httpx's
tests/project/test_exported_members.py). When a name moves to another module, update `_EXPORTS` in
streamlab/__init__.py (the one list: `__all__` is made from it): the failure says where it lives now.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import streamlab

ROOT = Path(__file__).resolve().parents[2]

EXPORTED = [
    "__version__",
    "astream_chat",
    "astream_responses",
    "AsyncEventStream",
    "AsyncRetryingStream",
    "AsyncSDKStreamView",
    "BadStatus",
    "ChaosProxy",
    "chat_text_stream",
    "ChatAccumulator",
    "check_endpoint",
    "check_relay",
    "chunks_at",
    "ConnectFailed",
    "ConnectionBroken",
    "Cut",
    "data_dir",
    "DeadlineExceeded",
    "End",
    "Ending",
    "Episode",
    "error_episode",
    "ErrorInStream",
    "EventStream",
    "EventTooLarge",
    "FrameError",
    "Gateway",
    "IdleTimeout",
    "IncompleteEvent",
    "is_event_stream",
    "join_room",
    "KeepAlive",
    "LastEventIdStream",
    "load_fixture",
    "load_fixtures",
    "NotAnEventStream",
    "Outcome",
    "outcome_of",
    "paced",
    "parse",
    "quiz",
    "quiz_answers",
    "quiz_text",
    "read_sdk_stream",
    "ReadStalled",
    "Relay",
    "RelayedStream",
    "replay",
    "RequestNotSent",
    "responses_text_stream",
    "ResponsesAccumulator",
    "ResumableResponseStream",
    "resume_response",
    "ResumeError",
    "RetryError",
    "RetryingStream",
    "RetryPolicy",
    "room_addresses",
    "RoomScenario",
    "run_harness",
    "scenario",
    "scenario_of",
    "SDKStreamView",
    "Send",
    "SequenceCursor",
    "SequenceError",
    "serve",
    "serve_chaos",
    "serve_gateway",
    "serve_relay",
    "show_split",
    "smallest_failing_split",
    "SSEEvent",
    "SSELimitError",
    "SSEParser",
    "Stall",
    "StandIn",
    "stop_chaos",
    "stop_gateway",
    "stop_relay",
    "stop_serving",
    "StoredResponse",
    "stream_chat",
    "stream_responses",
    "StreamEndError",
    "StreamlabError",
    "TimedEvent",
    "ToolCallError",
    "Wait",
]

NAMES = [n for n in EXPORTED if n != "__version__"]


def test_all_is_the_pinned_list() -> None:
    assert sorted(streamlab.__all__) == sorted(EXPORTED)
    assert len(set(streamlab.__all__)) == len(streamlab.__all__), "a name is listed twice"
    assert sorted(streamlab._EXPORTS) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_name_comes_from_the_module_that_defines_it(name: str) -> None:
    home = streamlab._EXPORTS[name]
    value = getattr(streamlab, name)
    defined_in = getattr(value, "__module__", None)
    assert defined_in == home, f"streamlab.{name} is defined in {defined_in}, not {home}: update _EXPORTS"
    module = importlib.import_module(home)
    assert name in getattr(module, "__all__", ()), f"{home}.__all__ does not list {name}"
    assert getattr(module, name) is value


def test_dir_lists_every_name_before_and_after_loading() -> None:
    assert set(EXPORTED) <= set(dir(streamlab))
    assert streamlab.SSEParser is not None  # loaded now, and kept in the module's namespace
    assert set(EXPORTED) <= set(dir(streamlab))


def test_dir_shows_no_helper_of_the_module_itself() -> None:
    """Tab completion on `streamlab.` offers what a learner may use: `streamlab.Any` or `streamlab.importlib` had
    been offered beside the labs' names."""
    assert streamlab.SSEParser is not None  # loads streamlab.core
    shown = set(dir(streamlab))
    assert not shown & {"Any", "TYPE_CHECKING", "importlib", "annotations"}
    assert {"__version__", "core"} <= shown  # (`core` is loaded by any exported name's first use)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'relay'"):
        streamlab.relay  # noqa: B018  (the lookup is the test)
    assert not hasattr(streamlab, "conformance")


def test_version_matches_the_installed_metadata() -> None:
    assert streamlab.__version__ == importlib.metadata.version("streamlab")


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_importing_the_package_or_the_parser_stays_light() -> None:
    """PEP 562 laziness: the parser does not drag in httpx, a server or matplotlib."""
    heavy = {"httpx", "matplotlib", "ipywidgets", "starlette", "uvicorn", "openai", "http.server", "asyncio"}
    for code in ("import streamlab", "import streamlab.core.sse", "from streamlab import SSEParser, load_fixtures"):
        loaded = _loaded_after(code)
        assert not heavy & loaded, f"{code!r} loaded {sorted(heavy & loaded)}"
        assert not {m for m in loaded if m.startswith(("streamlab.net", "streamlab.tools"))}, code
    assert "httpx" in _loaded_after("from streamlab import EventStream")  # ...which really is lazy, not absent


def test_star_import_gives_every_name() -> None:
    namespace: dict = {}
    exec("from streamlab import *", namespace)
    assert set(EXPORTED) <= set(namespace)


def test_docstrings_advertise_only_modules_that_exist() -> None:
    """The package docstring once named `relay` and `conformance` modules that did not exist."""
    layers = ("core", "net", "tools", "exercises")
    packages = [streamlab, *(importlib.import_module(f"streamlab.{p}") for p in layers)]
    for package in packages:
        for dotted in re.findall(r"`(streamlab(?:\.[a-z_][a-z0-9_]*)+)`", package.__doc__ or ""):
            assert importlib.util.find_spec(dotted) is not None, f"{package.__name__} docstring names {dotted}"


def _type_checking_imports() -> dict[str, str]:
    """What `streamlab/__init__.py`'s `if TYPE_CHECKING:` block imports: each name and the module it comes from,
    checked to be the explicit re-export form (`import X as X`) that every type checker honours."""
    tree = ast.parse((ROOT / "streamlab" / "__init__.py").read_text(encoding="utf-8"))
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1, "streamlab/__init__.py needs one `if TYPE_CHECKING:` block of the public names"
    found: dict[str, str] = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.module, f"only `from MODULE import NAME as NAME` there: {node}"
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name}: write `{alias.name} as {alias.name}` (a re-export)"
            found[alias.name] = node.module
    return found


def test_type_checkers_see_every_public_name_with_its_type() -> None:
    """The lazy `__getattr__` returns Any: without the TYPE_CHECKING imports every public name was Any to mypy
    and pyright (issue 35). The block holds exactly `_EXPORTS`, each from its defining module."""
    assert _type_checking_imports() == streamlab._EXPORTS
