"""The wheel is complete: built from this tree and installed alone into a fresh venv, it finds its data set.

`streamlab fixtures --fuzz` needs only the sans-IO core and the packaged data, so the wheel is installed with
`--no-deps` (no httpx, no matplotlib) and run from an unrelated working directory: that proves the data is
inside the wheel (not read from a checkout) and that the command line imports nothing above the core.

The build copies the sources to a temporary folder first (setuptools writes build/ and *.egg-info next to
the pyproject it builds). With setuptools >= 77 importable here the build runs without build isolation,
fully offline; otherwise pip fetches the build backend from the configured index, and the test is skipped
only when it cannot get one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_REQUIREMENT = (77,)  # [build-system] requires setuptools>=77 (SPDX license string)

pytestmark = pytest.mark.slow


def _files(folder: Path) -> set[str]:
    return {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def _can_build_without_isolation() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    return tuple(int(x) for x in re.findall(r"\d+", setuptools.__version__)[:1]) >= BUILD_REQUIREMENT


def _run(args: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    for folder in ("streamlab",):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    args = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-input", "--quiet", "--wheel-dir", tmp / "dist"]
    if _can_build_without_isolation():
        args.append("--no-build-isolation")
    out = _run([*args, src], cwd=tmp)
    if out.returncode != 0:
        unobtainable = re.search(
            r"(No matching distribution|Could not find a version that satisfies).*setuptools", out.stdout + out.stderr
        )
        if unobtainable:
            pytest.skip(f"pip cannot get the build backend offline: {unobtainable.group(0)}")
        pytest.fail(f"pip wheel failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    (built,) = (tmp / "dist").glob("streamlab-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no pip, no site packages) with only the wheel in it; returns its bin folder."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False, clear=True).create(env_dir)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / ("python.exe" if os.name == "nt" else "python")
    out = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--no-deps",
            "--no-index",
            "--no-input",
            "--quiet",
            wheel,
        ],
        cwd=env_dir,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return bin_dir


def _clean_env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "STREAMLAB", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env["PYTHONNOUSERSITE"] = "1"
    return env


def test_wheel_holds_the_package_and_every_data_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    packaged_data = {n.removeprefix("streamlab/data/") for n in names if n.startswith("streamlab/data/")}
    missing_data = _files(ROOT / "data") - packaged_data
    assert not missing_data, f"data files missing from the wheel (see package-data): {sorted(missing_data)}"
    shipped = {f"streamlab/{rel}" for rel in _files(ROOT / "streamlab")}  # modules, the dashboard's static files
    assert not shipped - names, f"files not in the wheel: {sorted(shipped - names)}"
    fixtures = {n for n in names if n.startswith("streamlab/data/fixtures/") and n.endswith(".sse")}
    assert len(fixtures) == len(list((ROOT / "data" / "fixtures").glob("*.sse")))
    strays = {top for top in (n.split("/")[0] for n in names) if top != "streamlab" and not top.endswith(".dist-info")}
    assert not strays, f"top-level entries other than the package: {sorted(strays)}"


def test_installed_wheel_fuzzes_every_fixture_from_any_folder(installed: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _clean_env(installed)
    python = installed / ("python.exe" if os.name == "nt" else "python")
    probe = _run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('httpx'), u.find_spec('matplotlib'))"],
        cwd=elsewhere,
        env=env,
    )
    assert probe.stdout.split() == ["None", "None"], "the fresh venv must not see the I/O and plotting libraries"

    streamlab = shutil.which("streamlab", path=str(installed))
    assert streamlab, f"no streamlab console script in {installed}"
    n = len(list((ROOT / "data" / "fixtures").glob("*.sse")))

    listing = _run([streamlab, "fixtures"], cwd=elsewhere, env=env)
    assert listing.returncode == 0, listing.stderr
    assert len(listing.stdout.splitlines()) == n

    fuzz = _run([streamlab, "fixtures", "--fuzz", "--runs", "50"], cwd=elsewhere, env=env)
    assert fuzz.returncode == 0, fuzz.stdout + fuzz.stderr
    row = next(line for line in fuzz.stdout.splitlines() if line.startswith("streamlab "))
    whole = re.findall(r"(\d+) / (\d+)", row)[0]
    assert whole == (str(n), str(n)), f"expected all {n} fixtures to pass whole, got {row!r}"
    assert all(ok == total for ok, total in re.findall(r"(\d+) / (\d+)", row)), row

    usage = _run([streamlab, "--help"], cwd=elsewhere, env=env)  # every cli_* module imports without httpx
    assert usage.returncode == 0, usage.stderr
