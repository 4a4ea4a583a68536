"""`python3 dev.py reset NN`: a learner's lab notebook put back as committed, only after they said yes.

Each test runs dev.py as a learner does (a subprocess, from the repository root) in a throwaway git repository
holding a copy of dev.py and two small notebooks, so no real lab is touched.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n'
EDITED = '{"cells": [{"cell_type": "code", "source": "answer_1 = 42"}], "metadata": {}}\n'

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="dev.py reset uses git")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    shutil.copy2(ROOT / "dev.py", tmp_path / "dev.py")
    (tmp_path / "notebooks").mkdir()
    for name in ("01-sse-by-hand.ipynb", "04-ttft-vs-total.ipynb"):
        (tmp_path / "notebooks" / name).write_text(COMMITTED)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "labs")
    return tmp_path


def _reset(repo: Path, *args: str, answer: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "dev.py", "reset", *args], cwd=repo, input=answer, text=True, capture_output=True, timeout=60
    )


def _lab01(repo: Path) -> Path:
    return repo / "notebooks" / "01-sse-by-hand.ipynb"


@pytest.mark.parametrize("name", ["1", "01", "notebooks/01-sse-by-hand.ipynb"])
def test_yes_puts_the_notebook_back_as_committed(repo: Path, name: str) -> None:
    _lab01(repo).write_text(EDITED)
    done = _reset(repo, name, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _lab01(repo).read_text() == COMMITTED
    assert "back as committed" in done.stdout and "Reload Notebook from Disk" in done.stdout


@pytest.mark.parametrize(
    ("answer", "restored"), [("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False), ("", False)]
)
def test_without_yes_it_asks_and_only_yes_restores(repo: Path, answer: str, restored: bool) -> None:
    _lab01(repo).write_text(EDITED)
    done = _reset(repo, "01", answer=answer)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Your changes to it are lost" in done.stdout  # the question was asked
    assert _lab01(repo).read_text() == (COMMITTED if restored else EDITED)
    if not restored:
        assert "left as it is" in done.stdout


def test_only_the_named_lab_changes(repo: Path) -> None:
    other = repo / "notebooks" / "04-ttft-vs-total.ipynb"
    _lab01(repo).write_text(EDITED)
    other.write_text(EDITED)
    assert _reset(repo, "4", "--yes").returncode == 0
    assert other.read_text() == COMMITTED and _lab01(repo).read_text() == EDITED


def test_an_untouched_notebook_is_left_alone_without_a_question(repo: Path) -> None:
    done = _reset(repo, "01")
    assert done.returncode == 0 and "already as committed" in done.stdout and "[y/N]" not in done.stdout


@pytest.mark.parametrize("args", [(), ("07",), ("01", "04")])
def test_a_lab_that_is_not_there_is_refused_with_the_list(repo: Path, args: tuple[str, ...]) -> None:
    done = _reset(repo, *args)
    assert done.returncode == 2 and "NN one of: 01 04" in done.stdout


def test_without_git_history_it_says_what_to_do_instead(repo: Path) -> None:
    shutil.rmtree(repo / ".git")
    _lab01(repo).write_text(EDITED)
    done = _reset(repo, "01", "--yes")
    assert done.returncode == 2 and "needs git" in done.stdout
    assert _lab01(repo).read_text() == EDITED
