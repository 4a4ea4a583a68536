"""The first set-up reads as a success: installing streamlab prints no setuptools warning.

`python3 dev.py setup` (and `lab`, `test`) installs the project with pip; a first run used to print about 170 lines
of setuptools `BuildBackendWarning`s (data folders "absent from the `packages` configuration"), which read as a
failure to a newcomer (issue 24). The data now lives inside the package, found by `packages.find`. Here the
project is built from a copy of its sources the way pip builds it (`pip wheel -v`, so the backend's output is
shown), and the output must hold no warning of the build backend. The only lines allowed are setuptools' notes
that byte-compiling is off, which pip asks for.

`dev.py setup` installs the project editable (`pip install -e .`), and that took another road through setuptools:
it printed a `BuildBackendWarning: Editable installation.` on every install, while the wheel build was quiet
(issue 36). So the copy is also installed editable, into a fresh virtual environment, as `dev.py setup` does.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = re.compile(r"byte-compiling is disabled|Location '.*' is ignored")  # pip's own notes, not the build's
WARNING = re.compile(r"warning", re.I)

pytestmark = pytest.mark.slow


def build_warnings(src: Path, dist: Path) -> list[str]:
    """Build `src` as pip does, verbosely, and return every warning line of the output."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-input", "-v", "--wheel-dir", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = done.stdout + done.stderr
    if done.returncode != 0:
        if re.search(r"(No matching distribution|Could not find a version that satisfies).*setuptools", out):
            pytest.skip("pip cannot get the build backend (setuptools) from the configured index")
        pytest.fail(f"pip wheel failed ({done.returncode}):\n{out[-3000:]}")
    return [line.strip() for line in out.splitlines() if WARNING.search(line) and not ALLOWED.search(line)]


def _copy_of_the_project(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "streamlab", src / "streamlab", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return src


def _pip(*args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600, check=False
    )
    return done.returncode, done.stdout + done.stderr


def test_building_the_project_prints_no_setuptools_warning(tmp_path: Path) -> None:
    warnings = build_warnings(_copy_of_the_project(tmp_path), tmp_path / "dist")
    assert warnings == [], "the build prints warnings a newcomer reads as a failure:\n" + "\n".join(warnings[:10])


def test_an_editable_install_prints_no_setuptools_warning(tmp_path: Path) -> None:
    """`pip install -e` into a fresh virtual environment (this interpreter's pip, pointed at it with `--python`):
    no warning, verbose or not, and the installed `streamlab` is the copy's own folder."""
    src = _copy_of_the_project(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    code, out = _pip("--python", str(python), "install", "--no-deps", "--no-input", "-v", "-e", str(src))
    if code != 0:
        if re.search(r"(No matching distribution|Could not find a version that satisfies).*setuptools", out):
            pytest.skip("pip cannot get the build backend (setuptools) from the configured index")
        pytest.fail(f"pip install -e failed ({code}):\n{out[-3000:]}")
    warnings = [line.strip() for line in out.splitlines() if WARNING.search(line) and not ALLOWED.search(line)]
    assert warnings == [], "the editable install prints warnings:\n" + "\n".join(warnings[:10])
    where = subprocess.run(
        [str(python), "-c", "import importlib.util; print(importlib.util.find_spec('streamlab').origin)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tmp_path,
    ).stdout.strip()
    assert Path(where) == src / "streamlab" / "__init__.py"
