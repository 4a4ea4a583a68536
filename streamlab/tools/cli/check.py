"""The `streamlab check` subcommand: grade any OpenAI-compatible streaming endpoint, byte by byte (tools layer).

It prints the report card as a table (or, with `--json`, the JSON document described in the README's
"Checking an endpoint" section) and exits 0 when no check failed, 1 when one did, and 2 when the endpoint
could not be checked at all (no connection, the API key was refused, or no probe got a response before the
checker's deadline), saying why on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register", "print_report"]


def _cmd_check(args: argparse.Namespace) -> int:
    """Send a few streaming requests to BASE_URL (a plain answer, one with stream_options.include_usage, one
    that requires a tool call and one that names the tool, one the API must refuse, a body that is not JSON,
    a prompt longer than any context, and the Responses equivalents with --dialect responses or both), each
    bounded by --max-tokens and --deadline, then grade the raw bytes of every answer: pass, warn, fail or skip,
    with the offending bytes located and quoted, and why each finding matters. Timing facts are reported,
    never graded. Exit 0: nothing failed; 1: something failed; 2: the endpoint could not be checked."""
    from streamlab.net.check import check_endpoint

    for flag, value in (("--timeout", args.timeout), ("--deadline", args.deadline)):
        if value <= 0:
            print(f"error: {flag} must be a positive number of seconds, got {value:g}", file=sys.stderr)
            return 2
    if args.max_tokens < 1:
        print(f"error: --max-tokens must be at least 1, got {args.max_tokens}", file=sys.stderr)
        return 2
    report = check_endpoint(
        args.base_url,
        model=args.model,
        api_key=args.api_key,
        dialect=args.dialect,
        timeout=args.timeout,
        deadline=args.deadline,
        max_tokens=args.max_tokens,
    )
    return print_report(report, command="streamlab check", target=args.base_url, args=args)


def print_report(report: Any, *, command: str, target: str, args: argparse.Namespace) -> int:
    """Print a checker's report (`--json`, or the text with `--failures-only` honoured), say on stderr why the
    target could not be checked, and return the report's exit code: what `check` and `check-path` share."""
    from streamlab.core.untrusted import terminal_text

    if args.json:
        print(report.to_json())
    else:  # the report quotes what the server or the path sent: none of it may act on the terminal
        print(terminal_text(report.render(passes=not args.failures_only)))
    if report.error is not None:
        print(terminal_text(f"{command}: could not check {target}: {report.error}"), file=sys.stderr)
    return int(report.exit_code)


def register(sub: Any) -> None:
    """Add the `check` subcommand to the `streamlab` parser's subparsers."""
    p = sub.add_parser(
        "check",
        help="grade an OpenAI-compatible streaming endpoint from the bytes it sends",
        description=_cmd_check.__doc__,
    )
    p.add_argument("base_url", metavar="BASE_URL", help="the API's base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, help="the model name to put in every request")
    p.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY' (default: none)")
    p.add_argument(
        "--dialect",
        choices=("chat", "responses", "both"),
        default="chat",
        help="which API to check: Chat Completions (default), Responses, or both",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (for CI) instead of a table")
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds allowed per request to connect, and between two reads (default 60)",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=30.0,
        help="seconds allowed for each probe in all; a stream still going then is cut, and what never "
        "came is not a finding (default 30)",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=40,
        help="the max_tokens / max_output_tokens every probe sends, so generation stops (default 40)",
    )
    p.add_argument("--failures-only", action="store_true", help="list only the checks that did not pass")
    p.set_defaults(func=_cmd_check)
