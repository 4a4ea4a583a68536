"""Exercise checks for the labs.

Every exercise has an id "NN.K" (lab NN, exercise K). Its checker lives in `streamlab.exercises.labNN`,
registered with `@exercise("NN.K", "name")`, where `name` is the variable or function the learner fills in.
A notebook's check cell calls `check("NN.K", name)` and prints one verdict line:

    Exercise 01.2: passed
    Exercise 01.2: not attempted yet
    Exercise 01.2: not yet: <what is wrong>

A check never raises, so a notebook with untouched stubs still runs top to bottom. The test suite pulls
each hidden solution out of its notebook and runs it through the same checker (tests/test_solutions.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["exercise", "check", "verdict", "NotAttempted", "Exercise", "registry", "load_lab"]


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


def load_lab(ex_id: str) -> Exercise:
    """Import the lab module that defines `ex_id` and return its Exercise."""
    if ex_id not in _REGISTRY:
        lab = ex_id.split(".")[0]
        importlib.import_module(f"{__name__}.lab{lab}")
    try:
        return _REGISTRY[ex_id]
    except KeyError:
        raise KeyError(f"no exercise {ex_id!r} is registered") from None


def verdict(ex_id: str, answer: Any) -> str:
    """Run the checker for `ex_id` on `answer` and return the verdict line (never raises)."""
    ex = load_lab(ex_id)
    if answer is Ellipsis or answer is None:
        return f"Exercise {ex_id}: not attempted yet"
    try:
        ex.checker(answer)
    except (NotAttempted, NotImplementedError):
        return f"Exercise {ex_id}: not attempted yet"
    except AssertionError as exc:
        if isinstance(exc.__cause__, (NotAttempted, NotImplementedError)):  # a stub, seen through a case wrapper
            return f"Exercise {ex_id}: not attempted yet"
        return f"Exercise {ex_id}: not yet: {exc}"
    except Exception as exc:  # the learner's code crashed: say how, do not stop the notebook
        return f"Exercise {ex_id}: not yet: your code raised {type(exc).__name__}: {exc}"
    return f"Exercise {ex_id}: passed"


def check(ex_id: str, answer: Any) -> None:
    """Print the verdict for exercise `ex_id` (what a notebook's check cell calls)."""
    print(verdict(ex_id, answer))
