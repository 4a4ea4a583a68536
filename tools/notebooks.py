"""Canonical notebook execution and the output check (run through `python3 dev.py execute|check`).

execute: run each notebook top to bottom in a fresh kernel and save it in canonical form: execution
         counts 1..N, no timing metadata, no widget state, outputs exactly as produced.
check:   run each notebook in memory the same way and compare with the committed file, cell by cell,
         ignoring images (renderer-dependent), cells marked `# NBVAL_IGNORE_OUTPUT`, and whatever
         notebooks/sanitize.cfg rewrites. Exit 1 listing every difference.
"""

from __future__ import annotations

import configparser
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
SANITIZE = ROOT / "notebooks" / "sanitize.cfg"
IGNORE = "# NBVAL_IGNORE_OUTPUT"
SKIP = "# NBVAL_SKIP"
PROGRESS_ENV = "STREAMLAB_PROGRESS"


KERNELS = {
    "python3": {"display_name": "Python 3", "language": "python", "name": "python3"},
    # Lab 12 (TypeScript): the Deno kernel whose spec lives in tools/jupyter/kernels (found through JUPYTER_PATH)
    "streamlab-deno": {"display_name": "TypeScript (Deno)", "language": "typescript", "name": "streamlab-deno"},
}
"""The kernels a lab may run on, by name, with the kernelspec metadata its canonical form carries."""


def kernel_of(nb: nbformat.NotebookNode) -> str:
    """The lab's kernel: Python unless its metadata names another of `KERNELS`."""
    name = nb.metadata.get("kernelspec", {}).get("name", "python3")
    return name if name in KERNELS else "python3"


def execute(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    kernel = kernel_of(nb)
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        p for p in (str(ROOT / "tools" / "jupyter"), os.environ.get("JUPYTER_PATH", "")) if p
    )
    client = NotebookClient(
        nb,
        timeout=180,
        kernel_name=kernel,
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
        # no start-up banner warnings in the CI log
        extra_arguments=["--IPKernelApp.log_level=ERROR"] if kernel == "python3" else [],
    )
    # The check cells record their verdicts (streamlab.net.progress): into a fresh, empty file of the run's own,
    # never the progress of whoever runs this, so what a notebook shows of progress is the same on every run.
    with tempfile.TemporaryDirectory(prefix="streamlab-progress-") as folder:
        before = os.environ.get(PROGRESS_ENV)
        os.environ[PROGRESS_ENV] = os.path.join(folder, "progress.json")
        try:
            client.execute()
        finally:
            if before is None:
                os.environ.pop(PROGRESS_ENV, None)
            else:
                os.environ[PROGRESS_ENV] = before
    return canonical(nb)


def merge_streams(outputs: list) -> list:
    """Join consecutive stream outputs of the same name: how a kernel splits printed text into messages
    depends on timing, so only the joined text is meaningful."""
    merged: list = []
    for out in outputs:
        if (
            out.get("output_type") == "stream"
            and merged
            and merged[-1].get("output_type") == "stream"
            and merged[-1].get("name") == out.get("name")
        ):
            merged[-1]["text"] = merged[-1]["text"] + out["text"]
        else:
            merged.append(out)
    return merged


def canonical(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = dict(KERNELS[kernel_of(nb)])
    nb.metadata.get("language_info", {}).pop("version", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = merge_streams(cell.outputs)
            for out in cell.outputs:
                out.get("metadata", {}).pop("transient", None)
    return nb


def sanitizers() -> list[tuple[re.Pattern[str], str]]:
    cfg = configparser.ConfigParser()
    cfg.read(SANITIZE)
    return [(re.compile(cfg[s]["regex"]), cfg[s]["replace"].strip()) for s in cfg.sections()]


def comparable(cell: nbformat.NotebookNode, subs: list[tuple[re.Pattern[str], str]]) -> list[str]:
    """The text of a cell's outputs as nbval compares them (images and widget views dropped)."""
    texts = []
    for out in merge_streams(cell.get("outputs", [])):
        if out.output_type == "stream":
            texts.append(f"{out.name}: {out.text}")
        elif out.output_type in ("execute_result", "display_data"):
            for mime in ("text/plain", "text/html", "image/svg+xml", "text/markdown", "text/latex"):
                if mime in out.data:
                    value = out.data[mime]
                    texts.append(f"{mime}: {''.join(value) if isinstance(value, list) else value}")
        elif out.output_type == "error":
            texts.append(f"error: {out.ename}: {out.evalue}")
    joined = "\n".join(texts)
    for pattern, replacement in subs:
        joined = pattern.sub(replacement, joined)
    return joined.splitlines()


def check(path: Path) -> list[str]:
    committed = nbformat.read(path, as_version=4)
    fresh = execute(path)
    subs = sanitizers()
    problems = []
    code_old = [c for c in committed.cells if c.cell_type == "code"]
    code_new = [c for c in fresh.cells if c.cell_type == "code"]
    for i, (old, new) in enumerate(zip(code_old, code_new), 1):
        if old.execution_count != i:
            problems.append(f"code cell {i}: committed execution count {old.execution_count}, expected {i}")
        first = old.source.splitlines()[0] if old.source else ""
        if first.strip() in (IGNORE, SKIP):
            continue
        a, b = comparable(old, subs), comparable(new, subs)
        if a != b:
            problems.append(
                f"code cell {i} ({first[:60]!r}): committed output differs from a fresh run\n"
                f"    committed: {a[:6]}\n    fresh:     {b[:6]}"
            )
    if committed.metadata.get("widgets"):
        problems.append("notebook metadata holds widget state; re-run `python3 dev.py execute`")
    return problems


def main() -> None:
    cmd, paths = sys.argv[1], [Path(p) for p in sys.argv[2:]]
    failed = False
    for path in paths:
        t0 = time.perf_counter()
        if cmd == "execute":
            nb = execute(path)
            nbformat.write(nb, path)
            print(f"executed {path.name} in {time.perf_counter() - t0:.1f} s")
        elif cmd == "check":
            problems = check(path)
            status = "ok" if not problems else f"{len(problems)} difference(s)"
            print(f"check {path.name}: {status} ({time.perf_counter() - t0:.1f} s)")
            for p in problems:
                print("  " + p)
            failed |= bool(problems)
        else:
            sys.exit(f"unknown command {cmd!r}")
    if failed:
        print("committed outputs are not the canonical command's outputs: run `python3 dev.py execute`")
        sys.exit(1)


if __name__ == "__main__":
    main()
