"""Make `streamlab/data/exercises.json`, the catalogue of every lab's exercises, from the code (a development tool
outside the package).

    .venv/bin/python tools/exercise_catalogue.py            print the catalogue
    .venv/bin/python tools/exercise_catalogue.py --write    write it to streamlab/data/exercises.json

The exercises are the registry of `streamlab.exercises` (after importing every `labNN` module there is), each with
the name its stub fills in, and the check cells of the TypeScript lab (lab 12, whose checks are TypeScript); a
lab's title is its notebook's first heading without "Lab NN: ". `streamlab progress` and the labs' index read the
catalogue so that they can list exercises never checked without importing the checkers; tests/labs/test_progress.py
fails when it is out of date.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CATALOGUE = ROOT / "streamlab" / "data" / "exercises.json"


def _title(path: Path) -> str:
    """A notebook's first Markdown heading, without its "# Lab NN: " prefix."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for line in source.splitlines():
            if line.startswith("# "):
                head = line[2:].strip()
                return head.split(": ", 1)[1] if head.startswith("Lab ") and ": " in head else head
    return path.stem


_TS_CHECK = re.compile(r'^await check\("(\d\d\.\d+)", (\w+)\);$', re.M)


def typescript_exercises() -> dict[str, dict[str, str]]:
    """The exercises of the labs in TypeScript (on the Deno kernel, lab 12): their checks live in the lab's own
    `notebooks/ts/labNN.ts`, not in the Python registry, so they are read from the notebook's check cells,
    `await check("NN.K", name);`, in order."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        if nb["metadata"].get("kernelspec", {}).get("name", "python3") == "python3":
            continue
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        found[path.name[:2]] = dict(_TS_CHECK.findall(code))
    return found


def catalogue() -> dict[str, Any]:
    """The catalogue document: every lab with exercises, in order, and its exercises (id: the name filled in)."""
    sys.path.insert(0, str(ROOT))
    from streamlab import exercises

    for lab in exercises.labs_with_exercises():
        importlib.import_module(f"streamlab.exercises.lab{lab}")
    registry = exercises.registry()
    labs = []
    for lab in exercises.labs_with_exercises():
        ids = sorted((ex for ex in registry if ex.startswith(f"{lab}.")), key=lambda ex: int(ex.split(".")[1]))
        found = sorted(NOTEBOOKS.glob(f"{lab}-*.ipynb"))
        labs.append(
            {
                "lab": lab,
                "title": _title(found[0]) if found else f"lab {lab}",
                "notebook": found[0].name if found else None,
                "exercises": {ex: registry[ex].name for ex in ids},
            }
        )
    for lab, checks in typescript_exercises().items():
        found = sorted(NOTEBOOKS.glob(f"{lab}-*.ipynb"))
        labs.append({"lab": lab, "title": _title(found[0]), "notebook": found[0].name, "exercises": checks})
    labs.sort(key=lambda entry: entry["lab"])
    return {
        "about": "Every lab's exercises (made by tools/exercise_catalogue.py --write; do not edit by hand)",
        "labs": labs,
    }


def text() -> str:
    """The catalogue as the file holds it."""
    return json.dumps(catalogue(), indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {CATALOGUE.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    if args.write:
        CATALOGUE.write_text(text(), encoding="utf-8")
        print(f"wrote {CATALOGUE.relative_to(ROOT)}")
    else:
        sys.stdout.write(text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
