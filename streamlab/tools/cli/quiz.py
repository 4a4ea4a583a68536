"""The `streamlab quiz` subcommand: print a lab's checkpoint quiz in the terminal (tools layer)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def _cmd_quiz(args: argparse.Namespace) -> int:
    """Print a lab's checkpoint quiz as text: the questions and their choices, then (unless --no-answers)
    each answer, why, and the lab section that teaches it. The labs show the same quiz with buttons."""
    from streamlab.tools.quiz import available_quizzes, load_quiz, quiz_text

    if args.list or args.lab is None:
        for lab in available_quizzes():
            quiz = load_quiz(lab)
            print(f"lab {lab}: {len(quiz.questions)} questions")
        return 0
    try:
        print(quiz_text(args.lab, answers=not args.no_answers))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def register(sub: Any) -> None:
    """Add the `quiz` subcommand to the `streamlab` parser's subparsers."""
    p = sub.add_parser("quiz", help="print a lab's checkpoint quiz (questions, answers, explanations)",
                       description=_cmd_quiz.__doc__)
    p.add_argument("lab", nargs="?", help="the lab's number, such as 03 (without it: list the quizzes)")
    p.add_argument("--no-answers", action="store_true", help="print the questions and choices only")
    p.add_argument("--list", action="store_true", help="list the labs that have a quiz and exit")
    p.set_defaults(func=_cmd_quiz)
