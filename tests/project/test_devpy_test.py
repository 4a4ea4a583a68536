"""`python3 dev.py test`: what its pytest runs are asked to print (issue 36).

The suite's one skip (tests/project/test_binder.py's repo2docker check, which needs a tool the project does not install)
used to end the run as a bare "1 skipped": each pytest run dev.py starts must ask pytest to say why (`-rs`).
The commands are taken from dev.py itself, recorded instead of run.
"""

from __future__ import annotations

import pytest

import dev


class _Stop(Exception):
    pass


def _commands(monkeypatch: pytest.MonkeyPatch, extra: list[str]) -> list[list[str]]:
    """The pytest commands `dev.test(extra)` runs, up to the end of its phase 2 (setup and lint not run)."""
    ran: list[list[str]] = []

    def record(*args: object, env: object = None) -> None:
        ran.append([str(a) for a in args])
        raise _Stop

    monkeypatch.setattr(dev, "setup", lambda: None)
    monkeypatch.setattr(dev, "lint", lambda extra: None)
    monkeypatch.setattr(dev, "run", record)
    with pytest.raises(_Stop):
        dev.test(extra)
    return ran


@pytest.mark.parametrize("extra", [[], ["tests/labs/test_quiz.py"]], ids=["whole-suite", "chosen-tests"])
def test_every_pytest_run_of_dev_py_test_says_why_a_test_skipped(monkeypatch: pytest.MonkeyPatch, extra) -> None:
    (command,) = _commands(monkeypatch, extra)
    assert command[1:3] == ["-m", "pytest"] and "-rs" in command, command
    assert "--nbval" in command
    assert command[len(command) - len(extra) :] == extra  # the tests chosen, last


def test_the_slow_files_go_out_first_in_the_order_the_root_conftest_gives(
    monkeypatch: pytest.MonkeyPatch, pytestconfig: pytest.Config
) -> None:
    """xdist's own order (files with most tests first) had left the one-test live run of lab 13 for last; dev.py
    turns it off, and every file the root conftest.py names as slow exists (a renamed file would quietly drop out)."""
    (root,) = [p for p in pytestconfig.pluginmanager.get_plugins() if hasattr(p, "FIRST") and hasattr(p, "ROOT")]
    (command,) = _commands(monkeypatch, [])
    assert "--no-loadscope-reorder" in command and command[command.index("--dist") + 1] == "loadfile", command
    assert root.FIRST and all((root.ROOT / name).is_file() for name in root.FIRST), root.FIRST
    assert len(set(root.FIRST)) == len(root.FIRST)
