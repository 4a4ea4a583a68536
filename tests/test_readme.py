"""The README's first contact: its `streamlab ...` command lines run as written after the set-up.

`python3 dev.py lab` installs the `streamlab` command into `.venv/bin/` only, so a README that shows bare
`streamlab parse ...` lines gives "command not found" to a learner who copies them (issue 24). Each bash block of
the README with a `streamlab` command is run here the way a learner's shell runs it: a login-like environment
whose PATH has no `.venv/bin` and no virtual environment active, from the repository's root, the block's lines
up to the command (its set-up, such as activating `.venv`) and then the command. Only the commands that print and
exit are run (not the servers).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMAND = re.compile(r"^(?:\S*/)?streamlab (\S+)")
QUICK = {"parse", "fixtures", "progress", "quiz"}  # print and exit; `standin --list` too
BLOCKS = [
    block
    for block in re.findall(r"^```bash\n(.*?)^```", README, re.S | re.M)
    if any(COMMAND.match(line.strip()) for line in block.splitlines())
]


def _runs(block: str) -> list[tuple[list[str], str]]:
    """(the lines before it, the command) for each quick `streamlab` command of a block."""
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    out = []
    for i, line in enumerate(lines):
        m = COMMAND.match(line)
        if m and (m.group(1) in QUICK or line.endswith("standin --list")):
            before = [b for b in lines[:i] if b and not COMMAND.match(b) and not b.startswith("#")]
            out.append((before, line))
    return out


def _learners_shell(home: Path) -> dict[str, str]:
    venv_bin = str(ROOT / ".venv" / "bin")
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != Path(venv_bin)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "STREAMLAB"))}
    return {**env, "PATH": os.pathsep.join(path), "HOME": str(home)}


def test_the_readme_shows_streamlab_commands() -> None:
    assert BLOCKS and sum(len(_runs(b)) for b in BLOCKS) >= 3


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: _runs(b)[0][1] if _runs(b) else "?")
def test_each_streamlab_command_of_the_readme_runs_as_written(block: str, tmp_path: Path) -> None:
    env = _learners_shell(tmp_path)
    for before, command in _runs(block):
        script = "\n".join(["set -e", *before, command])
        done = subprocess.run(
            ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, f"README: `{command}` after {before} fails ({done.returncode}): {done.stderr}"
        assert done.stdout.strip(), f"README: `{command}` printed nothing"
