"""The `streamlab relay` and `streamlab check-relay` subcommands: run a relay, grade any relay (tools layer)."""

from __future__ import annotations

import argparse
import inspect
import signal
import sys
import textwrap
import threading
from typing import Any

__all__ = ["register"]


def _requirements_text() -> str:
    from ..core.relaysummary import REQUIREMENTS

    return "\n".join(textwrap.fill(r.rule, 100, initial_indent=f"  ({r.number}) ", subsequent_indent="      ")
                     for r in REQUIREMENTS)


def _cmd_relay(args: argparse.Namespace) -> int:
    """Run the reference relay until Ctrl-C. Line 1 of stdout is its base URL; then one JSON summary line per
    stream. Everything else goes to stderr."""
    from ..core.relaysummary import summary_line
    from ..net.relay import Relay

    lock = threading.Lock()

    def emit(summary: dict[str, Any]) -> None:
        with lock:
            sys.stdout.write(summary_line(summary) + "\n")
            sys.stdout.flush()

    keepalive = args.keepalive if args.keepalive > 0 else None
    try:
        relay = Relay(args.upstream, keepalive=keepalive, read_timeout=args.read_timeout, capture=args.capture,
                      host=args.host, port=args.port, on_summary=emit).start()
    except (OSError, ValueError) as exc:
        print(f"error: cannot start the relay on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    print(relay.base_url, flush=True)
    print(f"streamlab relay: {relay.base_url} -> {args.upstream} (keep-alive "
          f"{'off' if keepalive is None else f'{keepalive:g} s'}, read timeout {args.read_timeout:g} s"
          f"{', capturing to ' + str(args.capture) if args.capture else ''}); Ctrl-C stops it.", file=sys.stderr)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        relay.stop()
    return 0


def register(sub: Any) -> None:
    """Add the `relay` and `check-relay` subcommands to the `streamlab` parser's subparsers."""
    p = sub.add_parser(
        "relay", help="run the reference streaming relay in front of an OpenAI-compatible upstream",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=f"{inspect.cleandoc(_cmd_relay.__doc__ or '')}\n\nIts rules:\n{_requirements_text()}")
    p.add_argument("--upstream", required=True, help="the upstream's base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8001, help="port to bind (default 8001; 0 picks a free one)")
    p.add_argument("--keepalive", type=float, default=15.0, metavar="SECONDS",
                   help="send a keep-alive comment after this much silence (default 15; 0 turns them off)")
    p.add_argument("--read-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="give up on an upstream that sends nothing for this long (default 60)")
    p.add_argument("--capture", metavar="DIR", default=None,
                   help="write each stream's raw upstream bytes as DIR/NAME.sse plus NAME.json (fixture format)")
    p.set_defaults(func=_cmd_relay)
