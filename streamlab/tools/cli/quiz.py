"""The `streamlab quiz` subcommand: print a lab's checkpoint quiz in the terminal (tools layer)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def _cmd_quiz(args: argparse.Namespace) -> int:
    """Print a lab's checkpoint quiz as text: the questions and their choices; with --answers (for instructors,
    or once you have tried) also each answer, why, and the lab section that teaches it. The labs show the same
    quiz with buttons, and keep its answers hidden until the learner asks."""
    from streamlab.tools.quiz import available_quizzes, load_quiz
    from streamlab.tools.quizview import quiz_text

    if args.list or args.lab is None:
        for lab in available_quizzes():
            quiz = load_quiz(lab)
            print(f"lab {lab}: {len(quiz.questions)} questions")
        return 0
    try:
        text = quiz_text(args.lab, answers=args.answers)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(text)
    if not args.answers:
        print(f"\n(the answers: streamlab quiz {args.lab} --answers)")
    return 0


def register(sub: Any) -> None:
    """Add the `quiz` subcommand to the `streamlab` parser's subparsers."""
    p = sub.add_parser(
        "quiz",
        help="print a lab's checkpoint quiz (questions; --answers for the answers)",
        description=_cmd_quiz.__doc__,
    )
    p.add_argument("lab", nargs="?", help="the lab's number, such as 03 (without it: list the quizzes)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument(
        "--answers",
        action="store_true",
        help="also print each answer, why, and the section that teaches it (for instructors)",
    )
    shown.add_argument(
        "--no-answers", action="store_true", help="the questions and choices only (the default; kept for older scripts)"
    )
    p.add_argument("--list", action="store_true", help="list the labs that have a quiz and exit")
    p.set_defaults(func=_cmd_quiz)
