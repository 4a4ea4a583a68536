"""The `streamlab` command line's entry point and its sans-IO subcommands, tools layer (also `python -m streamlab`).

Subcommands import what they need lazily, so `streamlab --help` is instant and the sans-IO commands
work without the I/O layers.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path


def _cmd_parse(args: argparse.Namespace) -> int:
    """Parse a file (or stdin) of raw SSE bytes and print each event."""
    from streamlab.core.errors import SSELimitError
    from streamlab.core.sse import SSEParser

    raw = sys.stdin.buffer.read() if args.file == "-" else open(args.file, "rb").read()
    parser = SSEParser()
    try:
        events = parser.feed(raw)
    except SSELimitError as exc:
        for ev in exc.events:
            print(repr(ev))
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for ev in events:
        print(f"event={ev.event!r} id={ev.last_event_id!r} data={ev.data!r}")
    truncated = parser.close()
    print(f"{len(events)} event(s); retry={parser.retry_ms}; stopped mid-event={truncated}")
    return 0


def _cmd_fixtures(args: argparse.Namespace) -> int:
    """List the byte fixtures, or run the split harness on streamlab's parser."""
    from streamlab.core.harness.fixtures import load_fixtures
    from streamlab.core.harness.fuzz import run_harness, streamlab_contender

    fixtures = load_fixtures()
    if not args.fuzz:
        for f in fixtures:
            print(f"{f.name:<36} {len(f.raw):>5} bytes  {len(f.expected.events):>2} events  {f.description}")
        return 0
    result = run_harness([streamlab_contender()], fixtures, random_runs=args.runs, seed=args.seed)
    print(result.summary())
    return 0 if not result.failing_fixtures("streamlab") else 1


def _subcommand_modules() -> list[str]:
    """The other modules of `streamlab.tools.cli`: each defines `register(subparsers)` for its own subcommand(s)."""
    here = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name != "main")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="streamlab", description="Tools from the streamlab labs.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "parse", help="parse raw SSE bytes from a file and print the events", description=_cmd_parse.__doc__
    )
    p.add_argument("file", help="a file of raw SSE bytes, or - for stdin")
    p.set_defaults(func=_cmd_parse)

    p = sub.add_parser(
        "fixtures", help="list the byte fixtures or fuzz the parser over them", description=_cmd_fixtures.__doc__
    )
    p.add_argument("--fuzz", action="store_true", help="run every split strategy on streamlab's parser")
    p.add_argument("--runs", type=int, default=200, help="random splits per fixture (default 200)")
    p.add_argument("--seed", type=int, default=20261129, help="seed for the random splits")
    p.set_defaults(func=_cmd_fixtures)

    for name in _subcommand_modules():  # each tool registers its own subcommand, so none edits another's
        importlib.import_module(f"{__package__}.{name}").register(sub)
    return ap


READER_GONE = 128 + 13
"""The exit status after the reader of our output went away: a process killed by SIGPIPE reports 128 + 13."""


def _reader_gone() -> int:
    """Whoever read our output has gone (`streamlab quiz 03 | head`): stop quietly, as Unix tools do, with no
    traceback. Standard output is pointed at /dev/null so the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return READER_GONE


def _never_unencodable() -> None:
    """A character standard output cannot encode (any non-ASCII one where it is not UTF-8, a lone surrogate
    anywhere) prints as a backslash escape instead of raising: a report that quotes a server must not stop."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError, TypeError):
                reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; its exit status. A closed pipe on standard output ends it quietly (READER_GONE)."""
    args = build_parser().parse_args(argv)
    _never_unencodable()
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # what is still buffered must reach the reader now, while a broken pipe can be handled
    except BrokenPipeError:
        return _reader_gone()
    return status


if __name__ == "__main__":
    sys.exit(main())
