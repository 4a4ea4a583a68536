"""Exercise checks for the labs.

Every exercise has an id "NN.K" (lab NN, exercise K). Its checker lives in `streamlab.exercises.labNN`,
registered with `@exercise("NN.K", "name")`, where `name` is the variable or function the learner fills in.
A notebook's check cell calls `check("NN.K", name)` and prints one verdict line:

    Exercise 01.2: passed
    Exercise 01.2: not attempted yet
    Exercise 01.2: not yet: <what is wrong>
    Exercise 09.9: no such exercise (lab 09 has 09.1, 09.2)

A check never raises, so a notebook with untouched stubs still runs top to bottom. Each verdict (the word
only: passed, not yet, not attempted) is kept in the learner's progress file, and sent to the room's stand-in
when they joined one (`streamlab.net.progress`; `streamlab progress` shows them all). The test suite pulls
each hidden solution out of its notebook and runs it through the same checker (tests/labs/test_solutions.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamlab.net.progress import record_verdict

__all__ = [
    "exercise",
    "check",
    "verdict",
    "NotAttempted",
    "Exercise",
    "registry",
    "load_lab",
    "function_answer",
    "labs_with_exercises",
]


class NotAttempted(Exception):
    """Raised by a checker (or by a stub) when the learner has not filled the exercise in yet."""


@dataclass(frozen=True)
class Exercise:
    id: str
    name: str  # the variable or function the learner fills in
    checker: Callable[[Any], None]  # raises AssertionError with a helpful message when wrong


_REGISTRY: dict[str, Exercise] = {}


def registry() -> dict[str, Exercise]:
    """All exercises registered so far (labs load lazily; see load_lab)."""
    return dict(_REGISTRY)


def exercise(ex_id: str, name: str) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    """Register a checker for exercise `ex_id` whose answer is bound to `name` in the notebook."""

    def wrap(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        _REGISTRY[ex_id] = Exercise(ex_id, name, fn)
        return fn

    return wrap


def labs_with_exercises() -> list[str]:
    """The lab numbers ("01", "02", ...) that have an exercises module, in order."""
    here = Path(__file__).parent
    return sorted(p.stem[3:] for p in here.glob("lab[0-9][0-9].py"))


def _unknown(ex_id: str) -> str | None:
    """Why `ex_id` names no exercise (which ids exist instead), or None when it names one. Imports its lab."""
    lab = str(ex_id).split(".")[0]
    labs = labs_with_exercises()
    if lab not in labs:
        return f'an id is "NN.K", lab NN and exercise K; the labs with exercises are {", ".join(labs)}'
    if ex_id not in _REGISTRY:
        importlib.import_module(f"{__name__}.lab{lab}")
    if ex_id not in _REGISTRY:
        return f"lab {lab} has {', '.join(sorted(k for k in _REGISTRY if k.split('.')[0] == lab))}"
    return None


def load_lab(ex_id: str) -> Exercise:
    """Import the lab module that defines `ex_id` and return its Exercise (KeyError saying which ids exist if
    `ex_id` names none)."""
    problem = _unknown(ex_id)
    if problem is not None:
        raise KeyError(f"no exercise {ex_id!r}: {problem}")
    return _REGISTRY[ex_id]


def function_answer(answer: Any, name: str) -> Callable[..., Any]:
    """The learner's function, for a checker: `...` (the untouched stub) is not attempted yet, anything that
    is not callable is a clear wrong answer."""
    if answer is Ellipsis:
        raise NotAttempted
    if not callable(answer):
        raise AssertionError(f"{name} should be a function, got {type(answer).__name__}")
    return answer


def verdict(ex_id: str, answer: Any) -> str:
    """Run the checker for `ex_id` on `answer` and return the verdict line (never raises; an id that names no
    exercise, a typo in the check cell, gets a verdict that says which ids exist)."""
    return _judge(ex_id, answer)[1]


def _judge(ex_id: str, answer: Any) -> tuple[str | None, str]:
    """The verdict as a word of `streamlab.core.progress.VERDICTS` (None for an id that names no exercise) and
    as the line a check cell prints."""
    problem = _unknown(ex_id)
    if problem is not None:
        return None, f"Exercise {ex_id}: no such exercise ({problem})"
    ex = _REGISTRY[ex_id]
    untouched = "not attempted", f"Exercise {ex_id}: not attempted yet"
    if answer is Ellipsis or answer is None:
        return untouched
    try:
        ex.checker(answer)
    except (NotAttempted, NotImplementedError):
        return untouched
    except AssertionError as exc:
        if isinstance(exc.__cause__, (NotAttempted, NotImplementedError)):  # a stub, seen through a case wrapper
            return untouched
        return "not yet", f"Exercise {ex_id}: not yet: {exc}"
    except Exception as exc:  # the learner's code crashed: say how, do not stop the notebook
        return "not yet", f"Exercise {ex_id}: not yet: your code raised {type(exc).__name__}: {exc}"
    return "passed", f"Exercise {ex_id}: passed"


def check(ex_id: str, answer: Any) -> None:
    """Print the verdict for exercise `ex_id` (what a notebook's check cell calls), then keep it in the
    learner's progress file and send it to the room they joined, if any (`streamlab.net.progress`: only the
    verdict and its time, never the answer; a failure there is silent)."""
    word, line = _judge(ex_id, answer)
    print(line)
    if word is not None:
        try:
            record_verdict(ex_id, word)
        except Exception:  # noqa: BLE001 - record_verdict never raises; this guard keeps that a promise
            pass
