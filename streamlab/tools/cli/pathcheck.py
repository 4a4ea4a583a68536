"""The `streamlab check-path` subcommand: grade the path between a streaming server and a reader (tools layer).

It prints the report as a table (or, with `--json`, a document with `streamlab check`'s conventions) and exits 0 when
no check failed, 1 when one did, and 2 when the path could not be checked (no connection, or the checker's own
deadline stopped a read), saying why on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def _cmd_check_path(args: argparse.Namespace) -> int:
    """Read a streamed Chat Completion through the path at URL (a reverse proxy, a compression middleware, a CDN in
    front of a server) as a browser does, with `Accept: text/event-stream` and `Accept-Encoding: gzip, deflate, br`,
    and grade what arrived and when: whether the first event was held back (against --direct, the same server
    without the path, or against the events' own pacing), compression on the event stream, headers the path drops
    or changes, the HTTP version, what happens after a clean end (the response ends, the connection is reused), and
    whether a stream survives an idle gap without keep-alives (--silent-model) and with them (--keepalive-model,
    held open --window seconds). The default models are the stand-in's scenarios (`streamlab standin --scenario
    all`); against another server, name its models, and the checks it cannot play are skipped. Each read is bounded
    by --deadline and the whole run by --budget; when the checker's own deadline stops a read, the path could not
    be checked. Exit 0: nothing failed; 1: something failed; 2: the path could not be checked."""
    from streamlab.net.pathcheck import check_path
    from streamlab.tools.cli.check import print_report

    for flag, value in (("--window", args.window), ("--deadline", args.deadline), ("--budget", args.budget)):
        if value <= 0:
            print(f"error: {flag} must be a positive number of seconds, got {value:g}", file=sys.stderr)
            return 2
    keepalive = None if args.keepalive_model in ("", "none") else args.keepalive_model
    report = check_path(
        args.url,
        direct=args.direct,
        model=args.model,
        silent_model=args.silent_model,
        keepalive_model=keepalive,
        window=args.window,
        deadline=args.deadline,
        budget=args.budget,
        api_key=args.api_key,
        ca_file=args.ca_file,
    )
    return print_report(report, command="streamlab check-path", target=args.url, args=args)


def register(sub: Any) -> None:
    """Add the `check-path` subcommand to the `streamlab` parser's subparsers."""
    p = sub.add_parser(
        "check-path",
        help="grade the path (proxy, CDN, middleware) between a streaming server and a browser",
        description=_cmd_check_path.__doc__,
    )
    p.add_argument("url", metavar="URL", help="the base URL through the path, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--direct", metavar="URL", default=None, help="the same server's base URL without the path")
    p.add_argument(
        "--model", default="scheduled", help="the model every comparison reads (default: the stand-in's 'scheduled')"
    )
    p.add_argument(
        "--silent-model",
        default=None,
        help="a model whose stream falls silent for a while, no byte and no keep-alive (default: none, not run)",
    )
    p.add_argument(
        "--keepalive-model",
        default="stall",
        help="a model whose stream is kept alive by comments (default: the stand-in's 'stall'; 'none' skips it)",
    )
    p.add_argument("--window", type=float, default=5.0, help="seconds to hold the keep-alive stream open (default 5)")
    p.add_argument("--deadline", type=float, default=20.0, help="seconds allowed for each read (default 20)")
    p.add_argument("--budget", type=float, default=55.0, help="seconds allowed for the whole run (default 55)")
    p.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY' (default: none)")
    p.add_argument("--ca-file", default=None, help="a CA certificate to trust for an https URL (a local CA's root)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (for CI) instead of a table")
    p.add_argument("--failures-only", action="store_true", help="list only the checks that did not pass")
    p.set_defaults(func=_cmd_check_path)
