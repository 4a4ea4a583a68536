"""`python3 dev.py lab`: JupyterLab at the repository root, on the labs' folder, with no news pop-up.

The settings part is checked twice: where dev.py puts the override (the application settings directory of the
JupyterLab in .venv, as `jupyter lab path` reports it), and what a real JupyterLab started with dev.py's own
command line then serves (its settings API, its redirect from `/`, its contents API). That server runs on a
loopback port with every settings and state folder in a temporary directory, so no one's JupyterLab is touched.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import dev

OVERRIDE = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def test_lab_settings_go_where_this_jupyterlab_reads_its_default_overrides(tmp_path: Path) -> None:
    target = dev.lab_settings(tmp_path)
    assert target == tmp_path / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "streamlab.json"
    assert json.loads(target.read_text(encoding="utf-8")) == OVERRIDE
    assert dev.lab_settings(tmp_path) == target  # idempotent: a second setup leaves it as it is

    jupyter = Path(sys.executable).parent / "jupyter"
    out = subprocess.run([str(jupyter), "lab", "path"], capture_output=True, text=True, timeout=60, check=True).stdout
    app_dir = Path(re.search(r"Application directory:\s*(.+)", out).group(1).strip())
    assert app_dir == Path(sys.prefix) / "share" / "jupyter" / "lab"  # so lab_settings(VENV) lands in its settings/


def test_lab_command_starts_at_the_root_on_the_labs_folder_and_passes_extra_arguments_on() -> None:
    command = dev.lab_command(["--port", "8890"])
    assert command[:2] == [str(dev.BIN / "jupyter"), "lab"]
    assert f"--ServerApp.root_dir={dev.ROOT}" in command and "--LabApp.default_url=/lab/tree/notebooks" in command
    assert command[-2:] == ["--port", "8890"]  # last, so that they win over ours


@pytest.mark.net
@pytest.mark.slow
def test_a_jupyterlab_started_like_dev_py_lab_shows_the_labs_and_fetches_no_news(tmp_path: Path) -> None:
    settings = dev.lab_settings(tmp_path / "prefix").parent.parent  # <prefix>/share/jupyter/lab/settings
    folders = {name: tmp_path / name for name in ("user", "workspaces", "runtime", "config")}
    for folder in folders.values():
        folder.mkdir()
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(folders["user"]),
        JUPYTER_CONFIG_DIR=str(folders["config"]),
        JUPYTERLAB_WORKSPACES_DIR=str(folders["workspaces"]),
        JUPYTER_RUNTIME_DIR=str(folders["runtime"]),
    )
    env.pop("JUPYTER_TOKEN", None)
    command = dev.lab_command(
        [
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=0",
            "--ServerApp.port_retries=0",
            "--IdentityProvider.token=",
            f"--LabApp.app_settings_dir={settings}",
        ]
    )
    command[0] = str(Path(sys.executable).parent / "jupyter")  # this interpreter's JupyterLab (dev.py's is .venv's)
    with (tmp_path / "jupyterlab.log").open("wb") as log:
        process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = ""
        deadline = time.monotonic() + 180
        while not url:  # the server writes its URL to the runtime folder once it listens
            assert process.poll() is None, (tmp_path / "jupyterlab.log").read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "JupyterLab wrote no server info within 180 s"
            for info in folders["runtime"].glob("jpserver-*.json"):
                try:
                    url = json.loads(info.read_text())["url"].rstrip("/")
                except (ValueError, KeyError, OSError):
                    pass
            time.sleep(0.1)
        with httpx.Client(base_url=url, trust_env=False, timeout=30) as http:
            while True:
                try:
                    if http.get("/api/status").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "JupyterLab did not answer /api/status within 180 s"
                time.sleep(0.1)

            home = http.get("/", follow_redirects=False)
            assert home.status_code == 302 and home.headers["location"].rstrip("?").endswith("/lab/tree/notebooks")

            notebooks = http.get("/api/contents/notebooks").json()
            assert "01-sse-by-hand.ipynb" in {item["name"] for item in notebooks["content"]}
            source = http.get("/api/contents/streamlab").json()  # the root is the repository: the source opens
            assert source["type"] == "directory" and "core" in {item["name"] for item in source["content"]}

            schema = http.get("/lab/api/settings/@jupyterlab/apputils-extension:notification").json()["schema"]
            defaults = {name: spec.get("default") for name, spec in schema["properties"].items()}
            assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
