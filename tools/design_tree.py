"""Rewrite the module tree in DESIGN.md from the package: one line per folder and module, its docstring's job.

    python3 tools/design_tree.py          rewrite the block between the two `<!-- tree -->` markers
    python3 tools/design_tree.py --check  exit 1 if the block is not what the package says (no rewrite)

Each line is the module's path and the first line of its docstring without the layer in brackets, cut at a
word to fit 116 columns. The `notebooks/` and `data/` lines are kept as written. tests/project/test_structure.py holds
the drawing against the tree; this script is how a new module gets its line.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "streamlab"
WIDTH = 116
_LAYER = re.compile(r"\s*\((?:[^()]*(?:layer|core|I/O|sans-IO)[^()]*)\)\.?$")


def job(path: Path) -> str:
    """The first line of a module's docstring, without the trailing '(... layer)' and full stop."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.split("\n")[0]
    return _LAYER.sub("", first).rstrip(".")


def line(indent: int, name: str, path: Path) -> str:
    text = f"{'    ' * indent}{name}".ljust(28) + job(path)
    if len(text) > WIDTH:
        text = text[: text.rfind(" ", 0, WIDTH)].rstrip(",:;-")
    return text


def walk(folder: Path, indent: int) -> list[str]:
    out = []
    entries = sorted(
        (p for p in folder.iterdir() if p.name not in ("__pycache__", "data", "static")),
        key=lambda p: (p.is_dir(), p.name),
    )
    for p in entries:
        if p.is_dir() and (p / "__init__.py").exists():
            out.append(line(indent, f"{p.name}/", p / "__init__.py"))
            out += walk(p, indent + 1)
        elif p.suffix == ".py" and p.name != "__init__.py" and not (p.name == "__main__.py" and indent == 1):
            # a tool's own `python -m` entry is drawn; the package's (`python -m streamlab`) is the CLI's
            out.append(line(indent, p.name, p))
    return out


def render(old_block: list[str]) -> list[str]:
    head = [ln for ln in old_block if ln.startswith(("notebooks/", " " * 28)) and not ln.startswith("    ")]
    head = [ln for ln in old_block[: old_block.index("streamlab/")]] if "streamlab/" in old_block else head
    tail_start = next((i for i, ln in enumerate(old_block) if ln.startswith("    data/")), len(old_block))
    return [*head, "streamlab/", *walk(PACKAGE, 1), *old_block[tail_start:]]


def main(argv: list[str]) -> int:
    design = ROOT / "DESIGN.md"
    lines = design.read_text(encoding="utf-8").split("\n")
    start = lines.index("<!-- tree -->") + 2  # after the marker and the opening fence
    end = lines.index("```", start)
    new = render(lines[start:end])
    if "--check" in argv:
        if new != lines[start:end]:
            print("DESIGN.md's tree is not the package's: run python3 tools/design_tree.py", file=sys.stderr)
            return 1
        return 0
    lines[start:end] = new
    design.write_text("\n".join(lines), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
