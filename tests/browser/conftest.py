"""The browser suite's set-up (test tooling): collected only on request; one JupyterLab and one Chromium per run.

Selection. These tests start a JupyterLab server and a browser and take minutes, so the unit runs never
collect them: `pytest`, `pytest --nbval`, `python3 dev.py test` and `python3 dev.py stress` (-m net) skip this
folder's test modules without importing them. They run when asked for, by a `-m` expression that names
`browser` (`-m "not browser"` collects and then deselects them) or by a path inside tests/browser:
`python3 dev.py browser` runs `pytest tests/browser -m browser`. Every test here is
marked `browser`, `net` (loopback sockets: the JupyterLab server, the stand-in) and `slow`.

This file imports only the standard library, tools/browser.py and streamlab.net.browser.chromium (no Playwright at
import) at its top, since the unit runs load it too (and may have no Playwright installed).

Fixtures (session-wide, started once): `chromium` (the system executable; the run fails with the install
command when there is none), `browser_context` (headless Chromium through Playwright, 1280x800),
`committed_labs` (every lab's JSON, read once: what the checks expect), `lab_root` (a temporary copy of
notebooks/ made from it with outputs stripped, so the committed labs are never touched by JupyterLab's
autosave), `jupyterlab` (a private server on it, see tools/browser.py), `artifacts` (the folder
for screenshots and the server log: $STREAMLAB_BROWSER_ARTIFACTS, or a new temporary folder; printed at the
start and at the end of the run).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamlab.net.browser.chromium import CHROMIUM_ENV, CHROMIUM_INSTALL, find_chromium, launch_chromium
from tools.browser import JupyterLabServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NOTEBOOKS = ROOT / "notebooks"
LABS = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))
ARTIFACTS_ENV = "STREAMLAB_BROWSER_ARTIFACTS"
VIEWPORT = {"width": 1280, "height": 800}
_artifacts_key = pytest.StashKey[Path]()


def _selected(config: pytest.Config) -> bool:
    """True when the run asks for the browser tests: `-m ...browser...`, or a path inside this folder."""
    if "browser" in (config.option.markexpr or ""):
        return True
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name.startswith("test_") and not _selected(config):
        return True
    return None  # no opinion: the usual rules apply


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            for marker in (pytest.mark.browser, pytest.mark.net, pytest.mark.slow):
                item.add_marker(marker)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    folder = config.stash.get(_artifacts_key, None)
    if folder is not None:
        terminalreporter.write_line(f"browser screenshots and JupyterLab log: {folder}")


@pytest.fixture(scope="session")
def artifacts(pytestconfig: pytest.Config) -> Path:
    """Where screenshots and the server log go (kept after the run, for a person to look at)."""
    named = os.environ.get(ARTIFACTS_ENV)
    folder = Path(named) if named else Path(tempfile.mkdtemp(prefix="streamlab-browser-"))
    folder.mkdir(parents=True, exist_ok=True)
    pytestconfig.stash[_artifacts_key] = folder
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"\nbrowser screenshots and JupyterLab log: {folder}")
    return folder


@pytest.fixture(scope="session")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.fail(
            f"no Chromium found (looked for ${CHROMIUM_ENV} and chromium on the PATH): install it with "
            f"`{CHROMIUM_INSTALL}` (as root), or set {CHROMIUM_ENV} to a Chromium or Chrome executable",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def browser_context(chromium: str) -> Iterator[object]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the browser tests need Playwright for Python: pip install -e '.[browser]' "
            "(python3 dev.py browser installs it)",
            pytrace=False,
        )

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright, chromium)
        context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
        context.set_default_timeout(60_000)  # one UI action on a loaded machine; long waits pass their own
        try:
            yield context
        finally:
            context.close()
            browser.close()


@pytest.fixture(scope="session")
def committed_labs() -> dict[str, dict]:
    """Every notebook of notebooks/ as committed (outputs included), read once: the labs' expectations and the
    copies JupyterLab serves come from this one snapshot, even if a lab is edited while the suite runs."""
    return {path.name: json.loads(path.read_text(encoding="utf-8")) for path in sorted(NOTEBOOKS.glob("*.ipynb"))}


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory: pytest.TempPathFactory, committed_labs: dict[str, dict]) -> Path:
    """A copy of notebooks/ (labs stripped of outputs, as a learner's fresh run starts) for JupyterLab to serve."""
    from .labcheck import strip_outputs  # imports Playwright: only when the browser tests run

    root = tmp_path_factory.mktemp("labs")
    for name, nb in committed_labs.items():
        (root / name).write_text(json.dumps(strip_outputs(nb), indent=1), encoding="utf-8")
    for path in sorted(NOTEBOOKS.iterdir()):
        if path.is_file() and path.suffix != ".ipynb":
            shutil.copy2(path, root / path.name)
        elif path.is_dir() and not path.name.startswith((".", "_")):  # ts/: lab 12's TypeScript modules
            shutil.copytree(path, root / path.name, ignore=shutil.ignore_patterns(".*"))
    for name in ("deno.json", "deno.lock"):  # lab 12's npm imports (openai-node), pinned, found from the labs' folder
        shutil.copy2(ROOT / name, root / name)
    return root


@pytest.fixture(scope="session")
def jupyterlab(lab_root: Path, artifacts: Path) -> Iterator[JupyterLabServer]:
    with JupyterLabServer(lab_root, log_path=artifacts / "jupyterlab.log") as server:
        yield server
