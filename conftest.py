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


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)
            item.add_marker(pytest.mark.slow)
            # Under pytest-xdist (`--dist loadgroup`, as dev.py runs it) a lab's cells stay on one worker, in order,
            # in one kernel; every other test goes wherever a worker is free.
            item.add_marker(pytest.mark.xdist_group(item.path.name))
