"""Every lab keeps the house skeleton (DESIGN.md section 3) and is saved in canonical form."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
    assert not [o for o in setup["outputs"] if o["output_type"] != "stream" or o["name"] != "stderr"], (
        "the setup cell prints nothing"
    )


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
    kernel = "streamlab-deno" if path.name.startswith("12-") else "python3"  # lab 12 is TypeScript, on Deno
    assert nb["metadata"]["kernelspec"]["name"] == kernel
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    for i, cell in enumerate(code, 1):
        assert "execution" not in cell["metadata"], f"code cell {i} keeps timing metadata"
        assert not [o for o in cell["outputs"] if o["output_type"] == "error"], f"code cell {i} has an error"
        lines = [line for line in _src(cell).splitlines() if line.strip()]
        if kernel == "python3":  # a TypeScript statement ends with ';', and the Deno kernel shows no value for it
            assert not (lines and lines[-1].rstrip().endswith(";")), f"code cell {i} ends with ';' (nbval fails it)"
        if "NBVAL_IGNORE_OUTPUT" in _src(cell):
            assert lines[0] == "# NBVAL_IGNORE_OUTPUT", f"code cell {i}: the marker must be the exact first line"
        assert "asyncio.run(" not in _src(cell), f"code cell {i}: use top-level await in notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_has_an_id_so_opening_a_lab_changes_nothing(path: Path) -> None:
    """nbformat 4.5 gives every cell an id; a notebook saved without them is upgraded (ids added) the moment
    JupyterLab opens it, and shows as modified before the learner has touched it."""
    nb = _load(path)
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5), (
        f"{path.name}: nbformat {nb['nbformat']}.{nb['nbformat_minor']}, not 4.5"
    )
    ids = [cell.get("id") for cell in nb["cells"]]
    assert all(isinstance(i, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids), (
        f"{path.name}: cells without a valid id: {[n for n, i in enumerate(ids) if not isinstance(i, str)][:5]}"
    )
    assert len(set(ids)) == len(ids), f"{path.name}: a cell id is used twice"


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


ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_cut_the_prose_announces_is_the_cut_the_next_cell_scripts(path: Path) -> None:
    """ "A stream cut after its third event" must be followed by a script that sends three frames, then `Cut()`."""
    cells = _load(path)["cells"]
    for i, cell in enumerate(cells):
        said = re.findall(r"cut after its (\w+) event", _src(cell)) if cell["cell_type"] == "markdown" else []
        if not said:
            continue
        code = next(_src(c) for c in cells[i + 1 :] if c["cell_type"] == "code")
        scripted = [int(n) for n in re.findall(r"\[:(\d+)\]\]\s*\+\s*\[Cut\(\)\]", code)]
        assert scripted, f"{path.name}, cell {i}: announces a cut, the next code cell scripts none"
        assert [ORDINALS[word] for word in said] == scripted, (
            f"{path.name}, cell {i}: the prose says cut after the {said} event, the script after {scripted} frames"
        )


def test_lab_08_labels_every_finding_with_its_check_not_its_probe() -> None:
    """A finding prints as `STATUS check-id: detail`, and the detail starts with the probe (stream) it was found in,
    which is also dotted (`chat.usage`): printing the detail without the check id reads as a finding of another
    check (a framing finding once showed as `WARN chat.usage`)."""
    from streamlab.core.conformance.checks import CHECK_IDS, probes_for

    probes = {p.name for p in probes_for("both", "any-model")}
    path = next(p for p in NOTEBOOKS if p.name.startswith("08-"))
    labels = []
    for cell in _load(path)["cells"]:
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", ""))
            labels += re.findall(r"(?:^|: )(?:PASS|WARN|FAIL|SKIP) ([a-z_]+\.[a-z_.]+):", text, re.M)
    assert labels, "lab 08 prints no finding as STATUS check: detail"
    wrong = sorted({label for label in labels if label not in CHECK_IDS})
    assert not wrong, f"labelled with a name that is not a check id: {wrong} (probes: {sorted(probes & set(wrong))})"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_exercises_come_after_everything_they_need(path: Path) -> None:
    """An exercises section is the lab's last numbered section: what its exercises need is taught above it (lab 05
    once taught the table of endings, which its exercise 05.1 asks about, after the exercises)."""
    headings = [
        m.group(1, 2)
        for c in _load(path)["cells"]
        if c["cell_type"] == "markdown"
        for m in re.finditer(r"^## (\d+)\. (.+)$", _src(c), re.M)
    ]
    numbers = [int(n) for n, _ in headings]
    assert numbers == sorted(numbers), f"{path.name}: sections out of order: {numbers}"
    exercises = [int(n) for n, title in headings if title.startswith("Exercises")]
    if exercises:
        assert exercises[-1] == numbers[-1], f"{path.name}: a numbered section comes after the exercises"
