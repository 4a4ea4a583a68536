"""Every lab keeps the house skeleton (DESIGN.md section 3) and is saved in canonical form."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_labs_are_numbered_in_order_and_listed() -> None:
    numbers = [int(p.name[:2]) for p in NOTEBOOKS]
    assert numbers == list(range(1, len(NOTEBOOKS) + 1))
    index = (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert path.name in index, f"{path.name} missing from notebooks/README.md"
        assert path.name in readme, f"{path.name} missing from the README's table of labs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_skeleton(path: Path) -> None:
    cells = _load(path)["cells"]
    first = _src(cells[0])
    assert cells[0]["cell_type"] == "markdown" and first.startswith(f"# Lab {path.name[:2]}:")
    assert re.search(r"\*\*Time( budget)?:\*\*", first), "the first cell states a time budget"
    assert "**What you will build:**" in first
    assert re.search(r"Objectives|After this lab you can", first)
    markdown = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    assert "## Key points" in markdown
    assert "## Further reading" in markdown
    assert "html.spec.whatwg.org" in markdown or "platform.openai.com" in markdown
    setup = next(c for c in cells if c["cell_type"] == "code")
    assert "streamlab" in _src(setup), "the setup cell imports streamlab"
    assert not [o for o in setup["outputs"] if o["output_type"] != "stream" or o["name"] != "stderr"], \
        "the setup cell prints nothing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_links_between_labs_resolve(path: Path) -> None:
    cells = _load(path)["cells"]
    markdown = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    for target in re.findall(r"\]\(([^)#:]+\.ipynb)", markdown):
        assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_canonical_form(path: Path) -> None:
    """What `python3 dev.py execute` writes: counts 1..N, no widget state, no timing metadata, no errors."""
    nb = _load(path)
    assert "widgets" not in nb["metadata"]
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    for i, cell in enumerate(code, 1):
        assert "execution" not in cell["metadata"], f"code cell {i} keeps timing metadata"
        assert not [o for o in cell["outputs"] if o["output_type"] == "error"], f"code cell {i} has an error"
        lines = [line for line in _src(cell).splitlines() if line.strip()]
        assert not (lines and lines[-1].rstrip().endswith(";")), f"code cell {i} ends with ';' (nbval fails it)"
        if "NBVAL_IGNORE_OUTPUT" in _src(cell):
            assert lines[0] == "# NBVAL_IGNORE_OUTPUT", f"code cell {i}: the marker must be the exact first line"
        assert "asyncio.run(" not in _src(cell), f"code cell {i}: use top-level await in notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_check_cells_say_not_attempted(path: Path) -> None:
    """The committed labs have untouched stubs, so every check cell must print 'not attempted yet'."""
    for cell in _load(path)["cells"]:
        if cell["cell_type"] != "code" or not re.search(r"^check\(", _src(cell), re.M):
            continue
        text = "".join("".join(o.get("text", "")) for o in cell["outputs"] if o["output_type"] == "stream")
        lines = [line for line in text.splitlines() if line.startswith("Exercise ")]
        assert lines, f"{path.name}: a check cell printed no verdict"
        for line in lines:
            assert re.fullmatch(r"Exercise \d\d\.\d+: not attempted yet", line), f"{path.name}: {line}"
