"""pytest set-up for the whole repository (an entry point of the test tooling): labs run strict under nbval.

`pytest --nbval` from the repository root runs every unit test (tests/) and every lab (notebooks/), with
outputs compared strictly. Two nbval options are filled in here when not given on the command line, so the
plain command and `python3 dev.py test` run the same thing:

* `--nbval-sanitize-with notebooks/sanitize.cfg` (memory addresses, loopback ports, temp paths);
* `--nbval-cell-timeout 120` (nbval's default is 2000 s: a hung cell would stall CI for half an hour).

Notebook cells are marked `notebook`, `slow` and one `xdist_group` per lab (markers are registered in
pyproject.toml; the unit tests' markers are applied in tests/conftest.py).

Every check cell records its verdict (`streamlab.net.progress`): for the whole run, tests and lab kernels alike,
`STREAMLAB_PROGRESS` names a file in a temporary folder, so no run writes to the progress of whoever runs it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
SANITIZE = ROOT / "notebooks" / "sanitize.cfg"
CELL_TIMEOUT = 120.0
NBVAL_DEFAULT_CELL_TIMEOUT = 2000.0  # nbval's own default: "not given" is indistinguishable from it


# Lab 12 runs on the Deno kernel (`python -m deno jupyter --kernel`): its spec lives in tools/jupyter/kernels, found
# through JUPYTER_PATH by nbval's kernel manager in whichever environment runs the tests, .venv or another.
_KERNELS = str(ROOT / "tools" / "jupyter")
os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (_KERNELS, os.environ.get("JUPYTER_PATH", "")) if p)

_PROGRESS_DIR = tempfile.mkdtemp(prefix="streamlab-progress-")  # at import: before any kernel or test starts
os.environ["STREAMLAB_PROGRESS"] = os.path.join(_PROGRESS_DIR, "progress.json")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_PROGRESS_DIR, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    option = config.option
    if not (getattr(option, "nbval", False) or getattr(option, "nbval_lax", False)):
        return
    if not option.nbval_sanitize_with and not getattr(option, "sanitize_with", None):
        option.nbval_sanitize_with = str(SANITIZE)
    if option.nbval_cell_timeout == NBVAL_DEFAULT_CELL_TIMEOUT:
        option.nbval_cell_timeout = CELL_TIMEOUT


# The files that take longest, longest first (seconds on one worker of eight, quiet 2-core machine, measured with
# `pytest --nbval -n 8 --dist loadfile --durations=0`). They are handed out first: `dev.py test` runs pytest-xdist
# with `--no-loadscope-reorder`, so files go to workers in collection order. xdist's own order (the files with
# most tests first) had left the one-test lab 13 live run (83 s) for the end, and the run waited on it alone.
FIRST = (
    "tests/proxy/test_lab13_live.py",  # 83 s
    "tests/proxy/test_lab13.py",  # 82 s
    "tests/relaycheck/test_relaycheck.py",  # 79 s
    "tests/proxy/test_check_path.py",  # 79 s
    "tests/relay/test_capstone.py",  # 74 s
    "tests/proxy/test_proxy.py",  # 48 s
    "tests/hostile/test_hostile.py",  # 40 s
    "tests/standin/test_standin.py",  # 36 s
    "tests/project/test_instructors.py",  # 35 s
    "tests/standin/test_replay.py",  # 27 s
    "tests/hostile/test_hostile_ii.py",  # 25 s
    "notebooks/12-typescript-and-the-browser.ipynb",  # 23 s
)


def _first(item: pytest.Item) -> int:
    """Where `item`'s file stands in `FIRST` (files not named there keep their order, after those)."""
    try:
        return FIRST.index(item.path.relative_to(ROOT).as_posix())
    except ValueError:
        return len(FIRST)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_first)  # stable: each file's tests keep their order
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)
            item.add_marker(pytest.mark.slow)
            # Under pytest-xdist (`--dist loadgroup`, as dev.py runs it) a lab's cells stay on one worker, in order,
            # in one kernel; every other test goes wherever a worker is free.
            item.add_marker(pytest.mark.xdist_group(item.path.name))
