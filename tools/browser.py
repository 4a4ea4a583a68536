"""Drive JupyterLab in headless Chromium (test tooling, outside the package; it knows nothing of streamlab).

Two pieces, used by tests/browser/ (which finds and launches the operating system's Chromium with the lab's own
driver, `streamlab.net.browser.chromium`: one finder and one set of flags; no browser is ever downloaded):

* `JupyterLabServer`: a private JupyterLab on a loopback port with no token, whose config, settings,
  workspaces, runtime files and IPython profile live in a temporary directory, so nothing is shared with a
  person's own JupyterLab and nothing pops up (no news, no announcements, no update check). Stopping it shuts
  down every kernel it started, then the server, and removes the directory.
* `NotebookPage`: one notebook open in the JupyterLab UI of a Playwright page. It restarts the kernel and runs
  every cell through the Kernel menu, as a learner does, waits on the states the UI shows (cell prompts, the
  kernel status), and reads back what each cell displays (`CellView`).

Every wait is on a state the page exposes, never a fixed sleep; each has a generous timeout that only
stops a hung run (a loaded machine simply reaches the state later).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Playwright is only needed by the code that drives a page
    from playwright.sync_api import Locator, Page

SETTINGS = {
    # No news or update pop-up, ever (the "would you like news?" question included).
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


# =====================================================================================================
# A private JupyterLab server
# =====================================================================================================


class JupyterLabError(RuntimeError):
    """JupyterLab did not start, or did not answer (the message carries the end of its log)."""


class JupyterLabServer:
    """JupyterLab serving `root_dir` on 127.0.0.1 (a free port), no token, settings in a temporary directory.

    Use as a context manager; `url` is the server's base URL, `log_path` its log. `python` is the interpreter
    whose JupyterLab (and default `python3` kernel) run; `env` the environment for both.
    """

    def __init__(
        self,
        root_dir: Path,
        *,
        python: str = sys.executable,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        start_timeout: float = 180.0,
    ) -> None:
        self.root_dir = Path(root_dir)
        self.python = python
        self.env = dict(os.environ if env is None else env)
        self.start_timeout = start_timeout
        self._home = Path(tempfile.mkdtemp(prefix="streamlab-jupyterlab-"))
        self.log_path = log_path or self._home / "jupyterlab.log"
        self._process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def _write_config(self) -> dict[str, str]:
        """Config, settings and state folders under the temporary home; returns the environment to start with."""
        folders = {name: self._home / name for name in ("config", "settings", "workspaces", "runtime", "ipython")}
        for folder in folders.values():
            folder.mkdir()
        config = {
            "ServerApp": {
                "ip": "127.0.0.1",
                "port": 0,
                "port_retries": 0,
                "open_browser": False,
                "root_dir": str(self.root_dir),
                "allow_root": True,
                # loopback only, no token: the test client's REST calls need no XSRF cookie either
                "disable_check_xsrf": True,
            },
            "IdentityProvider": {"token": ""},
            "LabApp": {
                "news_url": None,
                "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
                "user_settings_dir": str(folders["settings"]),
                "workspaces_dir": str(folders["workspaces"]),
            },
        }
        (folders["config"] / "jupyter_server_config.json").write_text(json.dumps(config, indent=1))
        for plugin, values in SETTINGS.items():
            path = folders["settings"] / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env = dict(
            self.env,
            JUPYTER_CONFIG_DIR=str(folders["config"]),
            JUPYTER_RUNTIME_DIR=str(folders["runtime"]),
            IPYTHONDIR=str(folders["ipython"]),
        )
        env.pop("JUPYTER_TOKEN", None)
        return env

    def start(self) -> JupyterLabServer:
        env = self._write_config()
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [self.python, "-m", "jupyterlab", "--no-browser"],
                env=env,
                cwd=self.root_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        runtime = self._home / "runtime"
        deadline = time.monotonic() + self.start_timeout
        while not self.url:
            self._check_alive()
            for info in runtime.glob("jpserver-*.json"):
                with contextlib.suppress(ValueError, OSError):
                    self.url = json.loads(info.read_text())["url"].rstrip("/")
            if time.monotonic() > deadline:
                self._fail(f"JupyterLab wrote no server info within {self.start_timeout:.0f} s")
            time.sleep(0.1)
        while not self._answers("api/status"):
            self._check_alive()
            if time.monotonic() > deadline:
                self._fail(f"JupyterLab did not answer {self.url}/api/status within {self.start_timeout:.0f} s")
            time.sleep(0.1)
        return self

    def _answers(self, path: str) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/{path}", timeout=10) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _check_alive(self) -> None:
        if self._process is not None and self._process.poll() is not None:
            self._fail(f"JupyterLab exited with status {self._process.returncode}")

    def _fail(self, what: str) -> None:
        tail = self.log_path.read_text(errors="replace").splitlines()[-30:] if self.log_path.exists() else []
        self.stop()
        raise JupyterLabError(what + "; the end of its log:\n" + "\n".join(tail))

    def api(self, method: str, path: str) -> Any:
        """Call the server's REST API (JSON in, JSON out; None for an empty answer)."""
        request = urllib.request.Request(f"{self.url}/api/{path}", method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """End every session and its kernel (a finished lab's kernel must not keep using the CPU)."""
        for session in self.api("GET", "sessions"):
            with contextlib.suppress(urllib.error.HTTPError):  # it may have ended on its own meanwhile
                self.api("DELETE", f"sessions/{session['id']}")

    def stop(self) -> None:
        """Shut down the kernels, then the server; remove the temporary home. Idempotent."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None and self.url:
                with contextlib.suppress(OSError, urllib.error.URLError):
                    self.shutdown_kernels()
            process.terminate()  # JupyterLab stops its remaining kernels on SIGTERM
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self._home, ignore_errors=True)

    def __enter__(self) -> JupyterLabServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# =====================================================================================================
# A notebook in the JupyterLab UI
# =====================================================================================================

# What every cell shows, read in one pass. Cells carry their notebook index in data-windowed-list-index.
# An output is a widget when its renderer holds a view (`> .jupyter-widgets`); JupyterLab shows errors and
# stderr with the same MIME type, so both count as "stderr" here.
CELLS_JS = """
(notebook) => [...notebook.querySelectorAll('.jp-Cell')].map((cell) => {
  const top = [...cell.querySelectorAll('.jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output')];
  return {
    index: Number(cell.dataset.windowedListIndex),
    kind: cell.classList.contains('jp-CodeCell') ? 'code'
        : cell.classList.contains('jp-MarkdownCell') ? 'markdown' : 'raw',
    prompt: (cell.querySelector('.jp-InputArea-prompt')?.textContent || '').trim(),
    outputs: top.map((o) => ({
      mime: o.dataset.mimeType || (o.querySelector(':scope > .jupyter-widgets') ? 'widget' : ''),
      text: (o.textContent || '').slice(0, 4000),
    })),
    stderr: [...cell.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
      .map((o) => (o.textContent || '').slice(-4000)),
    mermaid: [...cell.querySelectorAll('.jp-RenderedMermaid')].map((m) => {
      const img = m.querySelector('figure > img');
      const src = img ? decodeURIComponent(img.getAttribute('src') || '') : '';
      // How big it is on the page, and how big its text: Mermaid's font size (its <style>) times the scale the
      // page draws the SVG at (displayed width over the viewBox's width).
      const box = img ? img.getBoundingClientRect() : null;
      const view = src.match(/viewBox="[-\\d.]+ [-\\d.]+ ([\\d.]+) ([\\d.]+)"/);
      const font = src.match(/font-size:\\s*([\\d.]+)px/);
      return {
        warning: m.classList.contains('jp-mod-warning'),
        drawn: !!img && img.complete && img.naturalWidth > 0 && img.naturalHeight > 0,
        shapes: (src.match(/<(path|rect|polygon|circle|ellipse|line)\\b/g) || []).length,
        text: m.classList.contains('jp-mod-warning') ? (m.textContent || '').slice(0, 1000) : '',
        width: box ? box.width : 0,
        height: box ? box.height : 0,
        text_px: box && view && font ? Number(font[1]) * box.width / Number(view[1]) : 0,
      };
    }),
  };
})
"""

# The state of a run: prompts of code cells, whether any cell shows an error (or stderr), and the status the
# toolbar's execution indicator shows ("busy" while cells it scheduled remain, else the kernel's status).
RUN_STATE_JS = """
(panel) => {
  const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map((p) => p.textContent);
  return {
    queued: prompts.filter((p) => p.includes('*')).length,
    numbered: prompts.filter((p) => /\\d/.test(p)).length,
    code: prompts.length,
    stderr: !!panel.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'),
    status: panel.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status || '',
  };
}
"""

# Done: nothing queued, the kernel idle, and either every code cell ran or one shows an error (a cell that
# raises stops the run: JupyterLab unqueues the cells after it). The notebook must start without execution
# counts (outputs stripped), so that a number in a prompt can only come from this run.
RUN_DONE_JS = (
    f"(panel) => {{ const s = ({RUN_STATE_JS})(panel); return s.numbered > 0 && s.queued === 0 && "
    "s.status === 'idle' && (s.numbered === s.code || s.stderr); }"
)

# An opening notebook: how many cells the page shows, and the kernel status in the status bar
# ("Python 3 (ipykernel) | Idle").
OPEN_STATE_JS = """
() => ({
  cells: document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook')
    ?.querySelectorAll('.jp-Cell').length ?? 0,
  kernel: (document.querySelector('.jp-StatusBar-TextItem[title^="Change kernel"]')?.textContent || '').trim(),
})
"""

# The kernel of the notebook shown is idle (nothing running: no cell, no widget callback).
IDLE_JS = """
() => document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')
  ?.dataset.status === 'idle'
"""

# Scroll a cell to the top; true once two successive polls find it at the same place inside the window.
REVEAL_JS = """
(cell) => {
  cell.scrollIntoView({block: 'start'});
  const top = Math.round(cell.getBoundingClientRect().top);
  const steady = cell.dataset.streamlabTop === String(top);
  cell.dataset.streamlabTop = String(top);
  return steady && top >= 0 && top < window.innerHeight;
}
"""


@dataclass(frozen=True)
class OutputView:
    """One top-level output of a cell as displayed: its MIME type ("widget" for a rendered widget) and text."""

    mime: str
    text: str


@dataclass(frozen=True)
class MermaidView:
    """One Mermaid diagram as displayed: drawn (an image with a size), warning (JupyterLab's error box), its size
    on the page in CSS pixels, and the height its text is drawn at (0 when it cannot be read off the SVG)."""

    warning: bool
    drawn: bool
    shapes: int
    text: str
    width: float = 0.0
    height: float = 0.0
    text_px: float = 0.0


@dataclass(frozen=True)
class CellView:
    """What one cell shows after a run: its index in the .ipynb, kind, prompt ("[3]:"), outputs."""

    index: int
    kind: str
    prompt: str
    outputs: tuple[OutputView, ...] = ()
    stderr: tuple[str, ...] = ()
    mermaid: tuple[MermaidView, ...] = ()

    @property
    def ran(self) -> bool:
        return any(ch.isdigit() for ch in self.prompt)


@dataclass
class NotebookPage:
    """A notebook opened in JupyterLab in `page` (`open` loads the app with only this notebook)."""

    page: Page
    base_url: str
    path: str
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def panel(self) -> Locator:
        return self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").first

    @property
    def notebook(self) -> Locator:
        return self.panel.locator(".jp-Notebook").first

    def cell(self, index: int) -> Locator:
        return self.notebook.locator(f'.jp-Cell[data-windowed-list-index="{index}"]')

    def open(self, *, cells: int, timeout: float = 180.0) -> None:
        """Load JupyterLab on this notebook (`?reset`: no other tab restored); wait until all `cells` are
        in the page and its kernel is idle. Raises TimeoutError saying what the page showed instead."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        started = time.monotonic()
        self.page.goto(f"{self.base_url}/lab/tree/{self.path}?reset", timeout=timeout * 1000)
        try:
            self.page.wait_for_function(
                f"(n) => {{ const s = ({OPEN_STATE_JS})(); return s.cells === n && /\\| Idle$/.test(s.kernel); }}",
                arg=cells,
                timeout=timeout * 1000,
                polling=100,
            )
        except PlaywrightTimeout:
            state = self.page.evaluate(OPEN_STATE_JS)
            raise TimeoutError(
                f"{self.path} did not open within {timeout:.0f} s: the page shows {state['cells']} "
                f"cells (expected {cells}), kernel status {state['kernel']!r}"
            ) from None
        self.timings["open"] = time.monotonic() - started

    def restart_and_run_all(self, *, timeout: float = 300.0) -> None:
        """Kernel menu > "Restart Kernel and Run All Cells...", confirm, wait until every queued cell is done
        and the kernel is idle (the run stops early at a cell that raises: its later cells are not run).
        The notebook must have been saved without execution counts (see RUN_DONE_JS)."""
        started = time.monotonic()
        self.menu_command("Kernel", "runmenu:restart-and-run-all")
        self.page.locator(".jp-Dialog .jp-mod-accept").click()
        self.panel.wait_for_function(RUN_DONE_JS, timeout=timeout * 1000)
        self.timings["run"] = time.monotonic() - started

    def menu_command(self, menu: str, command: str, *, attempts: int = 3) -> None:
        """Open the menu bar's `menu` and click the item that runs `command` (a JupyterLab command id). A click
        that lands while the app is still settling may leave the menu closed: then close it and open it again."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        item = self.page.locator(f'.lm-Menu-item[data-command="{command}"]')
        for attempt in range(attempts):
            self.page.locator(".lm-MenuBar-item", has_text=menu).click()
            try:
                item.wait_for(state="visible", timeout=10_000)
                break
            except PlaywrightTimeout:
                if attempt == attempts - 1:
                    raise
                self.page.keyboard.press("Escape")
        item.click()

    def wait_idle(self, *, timeout: float = 120.0) -> None:
        """Wait until the notebook's kernel is idle (the toolbar's execution indicator says so)."""
        self.page.wait_for_function(IDLE_JS, timeout=timeout * 1000, polling=100)

    def run_state(self) -> dict[str, Any]:
        return self.panel.evaluate(RUN_STATE_JS)

    def cells(self) -> list[CellView]:
        """What every cell shows now, in notebook order."""
        views = []
        for raw in self.notebook.evaluate(CELLS_JS):
            views.append(
                CellView(
                    index=raw["index"],
                    kind=raw["kind"],
                    prompt=raw["prompt"],
                    outputs=tuple(OutputView(**o) for o in raw["outputs"]),
                    stderr=tuple(raw["stderr"]),
                    mermaid=tuple(MermaidView(**m) for m in raw["mermaid"]),
                )
            )
        return sorted(views, key=lambda c: c.index)

    def widget_outputs(self, index: int) -> Locator:
        """The rendered widget views among cell `index`'s top-level outputs."""
        return self.cell(index).locator(
            ".jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output > .jupyter-widgets"
        )

    def reveal(self, index: int, *, timeout: float = 30.0) -> None:
        """Scroll cell `index` to the top of the notebook and wait until it stays there. (Off-screen cells are
        laid out with an estimated height, so one scroll can land elsewhere once they get their real one.)"""
        self.cell(index).wait_for_function(REVEAL_JS, timeout=timeout * 1000)

    def screenshot(self, path: Path, *, index: int | None = None) -> Path:
        """Save the page as a PNG, with cell `index` scrolled to the top first when given."""
        if index is not None:
            self.reveal(index)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path))
        return path


# =====================================================================================================
# Widgets: what a control drives, and moving a control
# =====================================================================================================

# Everything a widget shows that is not one of its own controls: HTML and Output widgets' content (text and
# image data). Moving a slider changes its readout trivially; this is what the slider is meant to change.
DRIVEN_JS = """
(view) => {
  const parts = [];
  for (const el of view.querySelectorAll('.widget-html-content, .widget-output, .widget-textarea textarea')) {
    parts.push(el.tagName === 'TEXTAREA' ? el.value : el.textContent);
    for (const img of el.querySelectorAll('img')) parts.push(img.getAttribute('src') || '');
  }
  return parts.join('\\u0000');
}
"""


def driven_content(view: Locator) -> str:
    return view.evaluate(DRIVEN_JS)


def move_slider(slider: Locator) -> None:
    """Move a slider one step with the keyboard (right, or left when it sits at its maximum)."""
    handle = slider.locator(".noUi-handle").first
    now, top = handle.get_attribute("aria-valuenow"), handle.get_attribute("aria-valuemax")
    handle.focus()
    handle.press("ArrowLeft" if now is not None and now == top else "ArrowRight")


def pick_other_option(dropdown: Locator) -> str:
    """Choose a different option of a dropdown (`<select>`); returns the option chosen."""
    select = dropdown.locator("select").first
    options = select.locator("option").all_text_contents()
    current = select.evaluate("(s) => s.options[s.selectedIndex]?.text ?? ''")
    other = next((o for o in options if o != current), None)
    if other is None:
        raise ValueError(f"the dropdown offers only {options!r}: there is nothing else to pick")
    select.select_option(label=other)
    return other
