"""The README's first contact: its `streamlab ...` command lines run as written after the set-up.

`python3 dev.py lab` installs the `streamlab` command into `.venv/bin/` only, so a README that shows bare
`streamlab parse ...` lines gives "command not found" to a learner who copies them (issue 24). Each bash block of
the README with a `streamlab` command is run here the way a learner's shell runs it: a login-like environment
whose PATH has no `streamlab` (neither `.venv/bin`, nor the running environment's bin/, nor any folder holding a
`streamlab`) and no virtual environment active, from the repository's root, the block's lines up to the command
(its set-up, such as activating `.venv`) and then the command. Only the commands that print and exit are run (not
the servers).

The README's lines name `.venv`, the environment dev.py creates; the tests, though, may run in any
`pip install -e ".[all]"` environment (issue 37: plain `pytest --nbval` in a CI job's own venv). So the lines run
literally when the interpreter running the tests is `.venv`'s (that proves them as written); from any other
environment each `.venv/bin/NAME` of a line stands for the running environment's own bin/NAME (`Path(sys.executable)
.parent`), which tests the commands and the set-up's shape against what is installed there, and a static test
checks, everywhere, that the README's `.venv/bin` is where dev.py puts the environment.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dev

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMAND = re.compile(r"^(?:\S*/)?streamlab (\S+)")
QUICK = {"parse", "fixtures", "progress", "quiz"}  # print and exit; `standin --list` too
BLOCKS = [
    block
    for block in re.findall(r"^```bash\n(.*?)^```", README, re.S | re.M)
    if any(COMMAND.match(line.strip()) for line in block.splitlines())
]

VENV_BIN = ROOT / ".venv" / "bin"
"""Where the README's lines find `activate` and `streamlab`."""
ENV_BIN = Path(sys.executable).parent
"""The bin/ folder of the environment running the tests (not resolved: a venv's python links to the base one)."""
IN_VENV = ENV_BIN.resolve() == VENV_BIN.resolve()
"""The tests run in `.venv` itself: the README's lines run exactly as written."""
VENV_PATH = re.compile(r"(?<![\w./~-])(?:\./)?\.venv/bin/([\w.-]+)")
ACTIVATE = re.compile(r"^(?:source|\.)\s+(?:\./)?\.venv/bin/activate$")
BASH = shutil.which("bash") or "/bin/bash"  # found on the full PATH: the learner's PATH may lack the env's folder


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


def _here(line: str) -> str:
    """A README line as it runs in the environment running the tests: as written in `.venv`, else with each
    `.venv/bin/NAME` pointing into this environment's bin/ (an environment without an `activate` script, such as
    a conda one or a system Python, is put first on PATH instead, which is what activating does)."""
    if IN_VENV:
        return line
    if ACTIVATE.match(line) and not (ENV_BIN / "activate").is_file():
        return f'export PATH={shlex.quote(str(ENV_BIN))}{os.pathsep}"$PATH"'
    return VENV_PATH.sub(lambda m: shlex.quote(str(ENV_BIN / m.group(1))), line)


def _learners_shell(home: Path) -> dict[str, str]:
    """A fresh terminal's environment: no virtual environment active, no folder on PATH that holds `streamlab`."""
    hidden = {VENV_BIN.resolve(), ENV_BIN.resolve()}
    path = [
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and Path(p).resolve() not in hidden and not os.access(Path(p) / "streamlab", os.X_OK)
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "STREAMLAB", "CONDA"))}
    return {**env, "PATH": os.pathsep.join(path), "HOME": str(home)}


def _run(before: list[str], command: str, home: Path) -> subprocess.CompletedProcess[str]:
    script = "\n".join(["set -e", *(_here(line) for line in [*before, command])])
    return subprocess.run(
        [BASH, "-c", script],
        cwd=ROOT,
        env=_learners_shell(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_readme_shows_streamlab_commands() -> None:
    assert BLOCKS and sum(len(_runs(b)) for b in BLOCKS) >= 3


def test_the_readmes_venv_is_where_dev_py_puts_the_environment() -> None:
    """Checked in every environment; the lines themselves run literally only in `.venv` (see the module's doc)."""
    named = {m.group(0) for block in BLOCKS for m in VENV_PATH.finditer(block)}
    assert named, "the README's command block shows how to reach `.venv`'s streamlab"
    if os.name != "nt":
        assert dev.BIN == VENV_BIN, f"dev.py's environment is {dev.BIN}, the README says {VENV_BIN}"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: _runs(b)[0][1] if _runs(b) else "?")
def test_each_streamlab_command_of_the_readme_runs_as_written(block: str, tmp_path: Path) -> None:
    where = "" if IN_VENV else f" (`.venv/bin` read as {ENV_BIN}, the environment running the tests)"
    for before, command in _runs(block):
        done = _run(before, command, tmp_path)
        assert done.returncode == 0, (
            f"README: `{command}` after {before}{where} fails ({done.returncode}): {done.stderr}"
        )
        assert done.stdout.strip(), f"README: `{command}` printed nothing{where}"


def test_the_learners_shell_finds_no_streamlab_without_the_set_up(tmp_path: Path) -> None:
    done = _run([], "streamlab parse data/fixtures/spec-comment-and-ids.sse", tmp_path)
    assert done.returncode == 127 and "not found" in done.stderr, (done.returncode, done.stderr)


def test_a_wrong_command_after_the_readmes_set_up_fails(tmp_path: Path) -> None:
    before, _ = _runs(BLOCKS[0])[0]
    done = _run(before, "streamlab parse data/fixtures/no-such-fixture.sse", tmp_path)
    assert done.returncode != 0, done.stdout
