"""Lab 13 runs live: with `STREAMLAB_LIVE=1` every cell measures again against the real nginx and Caddy, top to bottom,
and prints the facts its committed (replayed) outputs print.

A file of its own so that pytest-xdist's `--dist loadfile` runs it beside tests/proxy/test_lab13.py, not after it (each
takes a minute or two of real streams). Skips, saying what to install, where nginx or Caddy is missing; CI has both.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from streamlab.core.proxy.base import install_hint
from streamlab.net.proxy.caddy import caddy_program
from streamlab.net.proxy.nginx import nginx_program

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "notebooks" / "13-between-the-server-and-the-screen.ipynb"
MODE_CELL = "a13c0004"  # says "replayed" or "live"
REPORT_CELL = "a13c0035"  # the check-path report: its URLs, byte counts and timings are this run's

pytestmark = [
    pytest.mark.net,
    pytest.mark.slow,
    pytest.mark.skipif(nginx_program() is None, reason=install_hint("nginx")),
    pytest.mark.skipif(caddy_program() is None, reason=install_hint("caddy")),
]


def _printed(cell: dict) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


@pytest.mark.timeout(600)
def test_lab_13_runs_live_top_to_bottom_and_prints_the_recorded_facts() -> None:
    import nbformat
    from nbclient import NotebookClient

    committed = nbformat.read(LAB, as_version=4)
    nb = nbformat.read(LAB, as_version=4)
    env_before = os.environ.get("STREAMLAB_LIVE")
    os.environ["STREAMLAB_LIVE"] = "1"  # the kernel inherits this process's environment
    try:
        NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(LAB.parent)}}
        ).execute()
    finally:
        if env_before is None:
            os.environ.pop("STREAMLAB_LIVE", None)
        else:
            os.environ["STREAMLAB_LIVE"] = env_before
    cells = {c.id: c for c in nb.cells if c.cell_type == "code"}
    errors = [o for c in cells.values() for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else ""
    assert "this run: live" in _printed(cells[MODE_CELL])
    report = _printed(cells[REPORT_CELL])
    assert "FAIL  path.buffering" in report and "(exit 1)" in report, report
    for cell in committed.cells:
        if cell.cell_type != "code" or cell.id in (MODE_CELL, REPORT_CELL):
            continue
        live, replayed = _printed(cells[cell.id]), _printed(cell)
        assert re.sub(r"127\.0\.0\.1:\d+", "PORT", live) == re.sub(r"127\.0\.0\.1:\d+", "PORT", replayed), (
            f"cell {cell.id} prints other facts live:\n{live}\nreplayed:\n{replayed}"
        )
