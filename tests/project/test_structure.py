"""The house's structure: one address per name, no cycles inside a layer, the labs' imports, the drawing.

- a module's `__all__` names only what the module defines (no re-exports: every name has one address);
- no module imports another module's private name;
- no import cycle inside a layer (imports at any depth count, `if TYPE_CHECKING:` blocks do not);
- the labs import each name from `streamlab` when it is public there, otherwise from the module defining it;
- every module DESIGN.md's tree names exists, and every module that exists is in the tree.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path

import pytest

import streamlab

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "streamlab"
MODULES = {
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
    for p in sorted(PACKAGE.rglob("*.py"))
    if "__pycache__" not in p.parts
}


def _flags_parse(source: str) -> ast.Module:
    source = "\n".join(
        ("pass  #" + line) if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )
    return compile(source, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


@cache
def _top_level(module: str) -> tuple[frozenset[str], dict[str, tuple[str, str]]]:
    """(names the module defines, names it imports from a streamlab module -> (module, name))."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    defined: set[str] = set()
    imported: dict[str, tuple[str, str]] = {}

    def visit(body: list[ast.stmt], typing_only: bool) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.ImportFrom) and node.module and not typing_only:
                for alias in node.names:
                    imported[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.If):
                typing = "TYPE_CHECKING" in ast.unparse(node.test)
                visit(node.body, typing)
                visit(node.orelse, typing)
            elif isinstance(node, ast.Try):
                visit(node.body, typing_only)
                for handler in node.handlers:
                    visit(handler.body, typing_only)

    visit(tree.body, False)
    return frozenset(defined), imported


def _all_of(module: str) -> list[str]:
    for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return []


@pytest.mark.parametrize("module", [m for m in MODULES if m != "streamlab"])
def test_all_names_only_what_the_module_defines(module: str) -> None:
    defined, _ = _top_level(module)
    strays = [name for name in _all_of(module) if name not in defined]
    assert not strays, f"{module}.__all__ lists names defined elsewhere (import them from their home): {strays}"


def _imports(module: str) -> list[ast.ImportFrom | ast.Import]:
    """Every import of the module at any depth, except those under `if TYPE_CHECKING:`."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    guarded = [
        node for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
    ]
    skipped = {id(n) for node in guarded for n in ast.walk(node)}
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skipped]


@pytest.mark.parametrize("module", list(MODULES))
def test_no_private_name_is_imported_across_modules(module: str) -> None:
    private = [
        f"{n.module}.{a.name}"
        for n in _imports(module)
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("streamlab")
        for a in n.names
        if a.name.startswith("_") and not a.name.startswith("__")
    ]
    assert not private, f"{module} imports private names: {private}"


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for node in _imports(module):
            targets = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            )
            edges[module].update(t for t in targets if t in MODULES and t != module)
    return edges


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "root"


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk meets among edges that stay inside one layer."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if _layer(nxt) != _layer(node):
                continue
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                walk(nxt, path + [nxt])
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            walk(module, [module])
    return cycles


def test_no_import_cycle_inside_a_layer() -> None:
    cycles = _cycles(_edges())
    assert not cycles, "import cycles inside a layer:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_sees_cycles_inside_a_layer_only() -> None:
    edges = {
        "streamlab.core.a": {"streamlab.core.b"},
        "streamlab.core.b": {"streamlab.core.c"},
        "streamlab.core.c": {"streamlab.core.a"},
        "streamlab.net.x": {"streamlab.core.a"},
    }
    assert _cycles(edges) == [["streamlab.core.a", "streamlab.core.b", "streamlab.core.c", "streamlab.core.a"]]
    assert _cycles({"streamlab.core.a": {"streamlab.net.x"}, "streamlab.net.x": {"streamlab.core.a"}}) == []


def _home(module: str, name: str) -> str:
    """The module that defines `name`, following imports from `module`."""
    for _ in range(10):
        if module not in MODULES or f"{module}.{name}" in MODULES:
            return module
        defined, imported = _top_level(module)
        if name in defined or name not in imported or imported[name][1] != name:
            return module
        module = imported[name][0]
    return module


LABS = [  # the Python labs (lab 12 is TypeScript on the Deno kernel: tests/labs/test_lab12.py checks its imports)
    p
    for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    if json.loads(p.read_text(encoding="utf-8"))["metadata"]["kernelspec"]["name"] == "python3"
]


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name[:2])
def test_labs_import_from_streamlab_or_the_defining_module(lab: Path) -> None:
    problems = []
    for cell in json.loads(lab.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(_flags_parse("".join(cell["source"]))):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamlab")):
                continue
            for alias in node.names:
                public = streamlab._EXPORTS.get(alias.name)
                if node.module == "streamlab":
                    if public is None:
                        problems.append(f"from streamlab import {alias.name}: not a public name")
                elif public is not None and _home(node.module, alias.name) == public:
                    problems.append(f"from {node.module} import {alias.name}: public, import it from streamlab")
                elif _home(node.module, alias.name) != node.module:
                    problems.append(
                        f"from {node.module} import {alias.name}: defined in {_home(node.module, alias.name)}"
                    )
    assert not problems, f"{lab.name}:\n" + "\n".join(problems)


def _design_tree() -> set[str]:
    text = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    block = text.split("<!-- tree -->", 2)[1]
    names: set[str] = set()
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        m = re.match(r"^(\s*)(streamlab/|[a-z_][a-z0-9_]*(?:/|\.py))\s", line + " ")
        if not m or line.strip().startswith(("#", "`")):
            continue
        depth, entry = len(m.group(1)), m.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        prefix = "/".join(e.rstrip("/") for _, e in stack)
        path = f"{prefix}/{entry}" if prefix else entry
        if entry.endswith("/"):
            stack.append((depth, entry))
            names.add(path.rstrip("/") + "/__init__.py")
        else:
            names.add(path)
    return names


def test_design_tree_and_the_package_agree() -> None:
    drawn = {
        d
        for d in _design_tree()
        if d.startswith("streamlab/") and not d.startswith("streamlab/data/") and d != "streamlab/__init__.py"
    }
    real = {p.relative_to(ROOT).as_posix() for p in MODULES.values()} - {"streamlab/__init__.py"}
    real = {r for r in real if not r.startswith("streamlab/data/") and r != "streamlab/__main__.py"}
    assert not drawn - real, f"DESIGN.md's tree names modules that do not exist: {sorted(drawn - real)}"
    assert not real - drawn, f"modules missing from DESIGN.md's tree: {sorted(real - drawn)}"


def test_readme_names_only_modules_that_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(streamlab(?:\.[a-z_][a-z0-9_]*)+)`", text))
    missing = sorted(n for n in named if n not in MODULES and n.rpartition(".")[0] not in MODULES)
    assert not missing, f"README.md names modules that do not exist: {missing}"
