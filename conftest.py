"""pytest set-up for the whole repository (an entry point of the test tooling): labs run strict under nbval.

`pytest --nbval` from the repository root runs every unit test (tests/) and every lab (notebooks/), with
outputs compared strictly. Two nbval options are filled in here when not given on the command line, so the
plain command and `python3 dev.py test` run the same thing:

* `--nbval-sanitize-with notebooks/sanitize.cfg` (memory addresses, loopback ports, temp paths);
* `--nbval-cell-timeout 120` (nbval's default is 2000 s: a hung cell would stall CI for half an hour).

Notebook cells are marked `notebook` and `slow` (markers are registered in pyproject.toml; the unit tests'
markers are applied in tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
SANITIZE = ROOT / "notebooks" / "sanitize.cfg"
CELL_TIMEOUT = 120.0
NBVAL_DEFAULT_CELL_TIMEOUT = 2000.0  # nbval's own default: "not given" is indistinguishable from it


def pytest_configure(config: pytest.Config) -> None:
    option = config.option
    if not (getattr(option, "nbval", False) or getattr(option, "nbval_lax", False)):
        return
    if not option.nbval_sanitize_with and not getattr(option, "sanitize_with", None):
        option.nbval_sanitize_with = str(SANITIZE)
    if option.nbval_cell_timeout == NBVAL_DEFAULT_CELL_TIMEOUT:
        option.nbval_cell_timeout = CELL_TIMEOUT


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)
            item.add_marker(pytest.mark.slow)
