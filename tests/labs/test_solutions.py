"""Every hidden solution in every lab passes its own check, and every exercise has a check cell.

The solution code is taken from the notebook's markdown (`<summary>Solution NN.K</summary>` followed by a
```python block), executed after the lab's setup cell, and handed to the same checker the check cell uses.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import re
from pathlib import Path

import pytest

from streamlab.exercises import load_lab, registry, verdict

NOTEBOOKS = [  # the Python labs; lab 12's TypeScript solutions are run through its checks by tests/labs/test_lab12.py
    p
    for p in sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    if json.loads(p.read_text(encoding="utf-8"))["metadata"]["kernelspec"]["name"] == "python3"
]
SOLUTION = re.compile(r"<summary>\s*Solution\s+(\d\d\.\d+)\s*</summary>.*?```python\n(.*?)```", re.S)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _python_only(code: str) -> str:
    """Drop IPython magics and shell escapes, which plain exec cannot run."""
    return "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))


def _run(code: str, ns: dict) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    result = eval(compile(code, "<solution>", "exec", flags=flags), ns)
    if inspect.iscoroutine(result):
        asyncio.run(result)


def _solutions() -> list[tuple[str, str, str]]:
    out = []
    for nb in NOTEBOOKS:
        for cell in _cells(nb):
            if cell["cell_type"] == "markdown":
                for ex_id, code in SOLUTION.findall(_source(cell)):
                    out.append((nb.name, ex_id, code))
    return out


@pytest.mark.parametrize(("notebook", "ex_id", "code"), _solutions(), ids=lambda v: v if len(v) < 30 else "")
def test_solution_passes_its_check(notebook: str, ex_id: str, code: str) -> None:
    path = next(p for p in NOTEBOOKS if p.name == notebook)
    setup = next(_source(c) for c in _cells(path) if c["cell_type"] == "code")
    ns: dict = {"__name__": "__solution__"}
    _run(_python_only(setup), ns)
    _run(code, ns)
    ex = load_lab(ex_id)
    assert ex.name in ns, f"solution {ex_id} in {notebook} does not define {ex.name!r}"
    assert verdict(ex_id, ns[ex.name]) == f"Exercise {ex_id}: passed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_has_check_cell_and_solution(path: Path) -> None:
    lab = path.name[:2]
    code = "\n".join(_source(c) for c in _cells(path) if c["cell_type"] == "code")
    solved = {ex_id for name, ex_id, _ in _solutions() if name == path.name}
    called = set(re.findall(r"check\(\s*[\"'](\d\d\.\d+)[\"']", code))
    for ex_id in called:
        load_lab(ex_id)
    ids = {i for i in registry() if i.startswith(lab + ".")}
    assert ids, f"{path.name} has no registered exercises"
    assert ids == called, f"check cells {sorted(called)} != registered exercises {sorted(ids)}"
    assert ids == solved, f"hidden solutions {sorted(solved)} != registered exercises {sorted(ids)}"
