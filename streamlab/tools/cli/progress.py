"""The `streamlab progress` subcommand: every exercise of every lab and its last check-cell verdict (tools layer)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]


def _cmd_progress(args: argparse.Namespace) -> int:
    """Show the verdicts your check cells recorded: every exercise of every lab, its last verdict (passed, not
    yet, not attempted, or - for never checked) and when, and the last pass of one that no longer passes. Only
    verdicts are kept, never answers: in ~/.streamlab/progress.json, or the file $STREAMLAB_PROGRESS names
    (`off` records nothing)."""
    from streamlab.core.progress import load_catalogue, progress_document, progress_table
    from streamlab.net.progress import ENV, progress_file, read_progress, reset_progress

    path = progress_file()
    if args.reset:
        if path is None:
            print(f"recording is off (${ENV}=off): nothing to reset")
        elif reset_progress(path):
            print(f"progress reset: removed {path}")
        else:
            print(f"nothing to reset: no progress file at {path}")
        return 0
    progress = read_progress(path)
    catalogue = load_catalogue()
    if args.lab is not None:
        lab = args.lab.zfill(2)
        if lab not in {c.lab for c in catalogue}:
            print(
                f"error: no lab {args.lab!r} has exercises; the labs are {', '.join(c.lab for c in catalogue)}",
                file=sys.stderr,
            )
            return 2
        catalogue = tuple(c for c in catalogue if c.lab == lab)
        progress = {ex: entry for ex, entry in progress.items() if ex.startswith(f"{lab}.")}
    if args.json:
        doc: dict[str, Any] = {"file": None if path is None else str(path), **progress_document(progress, catalogue)}
        print(json.dumps(doc, indent=2))
        return 0
    print(progress_table(progress, catalogue))
    print(f"(recording is off: ${ENV}=off)" if path is None else f"(kept in {path}; reset with --reset)")
    return 0


def register(sub: Any) -> None:
    """Add the `progress` subcommand to the `streamlab` parser's subparsers."""
    p = sub.add_parser(
        "progress", help="show which exercises of the labs you have passed", description=_cmd_progress.__doc__
    )
    p.add_argument("lab", nargs="?", help="only this lab, such as 03 (default: every lab)")
    p.add_argument("--json", action="store_true", help="print the same as a JSON document")
    p.add_argument("--reset", action="store_true", help="forget every recorded verdict (removes the file)")
    p.set_defaults(func=_cmd_progress)
