"""The `streamlab relay` and `streamlab check-relay` subcommands: run a relay, grade any relay (tools layer)."""

from __future__ import annotations

import argparse
import inspect
import sys
import textwrap
import threading
from typing import Any

__all__ = ["register"]


def _requirements_text() -> str:
    from streamlab.core.relay.stream import REQUIREMENTS

    return "\n".join(
        textwrap.fill(r.rule, 100, initial_indent=f"  ({r.number}) ", subsequent_indent="      ") for r in REQUIREMENTS
    )


def _cmd_relay(args: argparse.Namespace) -> int:
    """Run the reference relay until Ctrl-C. Line 1 of stdout is its base URL; then one JSON summary line per
    stream. Everything else goes to stderr. The summary lines are written by a thread of their own (a bounded
    queue: a stdout nobody reads never holds up a stream; lines that do not fit are dropped and counted on
    stderr), escaped so that nothing a client sent can act on a terminal or split a line. stderr too gets
    its lines (asyncio's warnings included) through a thread of its own: an unread stderr had frozen the
    serving loop. Ctrl-C, SIGTERM and SIGHUP stop it."""
    from streamlab.core.relay.stream import summary_line
    from streamlab.core.untrusted import ascii_json
    from streamlab.net.console import Outlet, route_logging, stop_signals, stream_writer
    from streamlab.net.gateway.app import Gateway
    from streamlab.net.relay.app import Relay
    from streamlab.net.relay.serving import keep_freed_heap

    keep_freed_heap()  # a process of its own: the next stream reuses the heap the last one freed (no page faults)
    errors, unroute = route_logging(sys.stderr, name="relay-log")  # before the loop starts: it logs from there
    outlet = Outlet(
        stream_writer(sys.stdout, fallback=ascii_json),
        name="relay-console",
        notice=lambda n: f"streamlab relay: {n} summary line(s) dropped: stdout was not being read",
        notice_write=errors.put,
    )

    def emit(summary: dict[str, Any]) -> None:  # on the server's event loop: format and queue, never write
        outlet.put(summary_line(summary))

    keepalive = args.keepalive if args.keepalive > 0 else None
    stop = threading.Event()
    restore = stop_signals(stop)  # SIGINT too, explicitly (under nohup or & it starts ignored); before the URL
    try:
        relay: Relay | Gateway
        if len(args.upstream) == 1:
            relay = Relay(
                args.upstream[0],
                keepalive=keepalive,
                read_timeout=args.read_timeout,
                capture=args.capture,
                host=args.host,
                port=args.port,
                on_summary=emit,
            ).start()
        else:  # several upstreams: the gateway (fallback in order, a breaker each, JSON log lines, /metrics)
            relay = Gateway(
                args.upstream,
                keepalive=keepalive,
                read_timeout=args.read_timeout,
                capture=args.capture,
                host=args.host,
                port=args.port,
                on_log=emit,
            ).start()
    except (OSError, ValueError) as exc:
        restore()
        unroute()
        print(f"error: cannot start the relay on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    outlet.put(relay.base_url)
    kind = f"gateway (metrics at {relay.metrics_url})" if isinstance(relay, Gateway) else "relay"
    errors.put(
        f"streamlab {kind}: {relay.base_url} -> {' | '.join(args.upstream)} (keep-alive "
        f"{'off' if keepalive is None else f'{keepalive:g} s'}, read timeout {args.read_timeout:g} s"
        f"{', capturing to ' + str(args.capture) if args.capture else ''}); Ctrl-C stops it."
    )
    try:
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        relay.stop()
        outlet.close(timeout=2.0)
        unroute()
        restore()
    return 0


_CHECK_EPILOG = """\
How the checker reaches your relay (any language, any framework). The checker plays the upstream: a scripted
stand-in behind a chaos proxy, at one fixed URL for the whole run. Your relay forwards to that URL.

  Let the checker start your relay (it fills in the placeholders, waits for the port, reads the JSON summary
  lines your relay prints on stdout, and stops it at the end):
    streamlab check-relay --relay-cmd "python my_relay.py --upstream {upstream} --port {port} --keepalive {keepalive}"
    streamlab check-relay --relay-cmd "streamlab relay --upstream {upstream} --port {port} \\
        --keepalive {keepalive} --read-timeout {read_timeout}"

  Or start it yourself first (a relay connects upstream only when a request comes, so the order is free),
  sending its summary lines to a file, then give the checker its URL and that file:
    streamlab relay --upstream http://127.0.0.1:8765/v1 --keepalive 0.25 --read-timeout 2 > summaries.jsonl
    streamlab check-relay http://127.0.0.1:8001 --summaries summaries.jsonl

Your relay must use the keep-alive interval and read timeout the checker assumes (--keepalive, --read-timeout),
and each summary line must be a JSON object with at least: model, outcome, text_chars, usage, ttft_s, total_s.
Exit status: 0 when all five requirements hold, 1 when one does not, 2 for a usage error.
"""


def _cmd_check_relay(args: argparse.Namespace) -> int:
    """Drive a relay through a scripted upstream and a chaos proxy and grade its five rules with evidence.
    Each check prints one line (PASS or FAIL, the outcome it exercises, what was seen), then the report."""
    from streamlab.core.untrusted import terminal_text
    from streamlab.net.relaycheck.run import check_relay, relay_command

    if (args.relay_url is None) == (args.relay_cmd is None):
        print("error: give a RELAY_URL or --relay-cmd (one of them)", file=sys.stderr)
        return 2
    try:
        only = tuple(int(x) for x in args.only.split(",")) if args.only else (1, 2, 3, 4, 5)
        factory = (
            None
            if args.relay_cmd is None
            else relay_command(args.relay_cmd, keepalive=args.keepalive, read_timeout=args.read_timeout)
        )
        report = check_relay(
            factory,
            relay_url=args.relay_url,
            summary_file=args.summaries,
            upstream_port=args.upstream_port,
            keepalive=args.keepalive,
            read_timeout=args.read_timeout,
            seed=args.seed,
            fuzz_runs=args.fuzz_runs,
            requirements=only,
            disconnect_bound=args.disconnect_bound,
            ttft_bound=args.ttft_bound,
            log=lambda line: print(terminal_text(line), flush=True),
        )
    except (ValueError, RuntimeError, OSError) as exc:  # a dead relay's error quotes its stderr
        print(terminal_text(f"error: {exc}"), file=sys.stderr)
        return 2
    print()
    print(terminal_text(report.render(passes=False)), flush=True)  # it quotes the relay's bytes
    return 0 if report.ok else 1


def register(sub: Any) -> None:
    """Add the `relay` and `check-relay` subcommands to the `streamlab` parser's subparsers."""
    _register_relay(sub)
    _register_check_relay(sub)


def _register_relay(sub: Any) -> None:
    p = sub.add_parser(
        "relay",
        help="run the reference streaming relay in front of an OpenAI-compatible upstream",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=f"{inspect.cleandoc(_cmd_relay.__doc__ or '')}\n\nIts rules:\n{_requirements_text()}",
    )
    p.add_argument(
        "--upstream",
        required=True,
        action="append",
        metavar="URL",
        help="the upstream's base URL, e.g. http://127.0.0.1:8000/v1; repeat it (NAME=URL names one) to "
        "run the gateway: fallback in order, a circuit breaker per upstream, JSON log lines, /metrics. "
        "Credentials: URL#ENV_VAR gives that upstream its own API key (read from the environment variable "
        "ENV_VAR), sent instead of the client's; the client's own Authorization and OpenAI-Organization go to "
        "the first upstream only (when it has no key), never to a backup",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8001, help="port to bind (default 8001; 0 picks a free one)")
    p.add_argument(
        "--keepalive",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="send a keep-alive comment after this much silence (default 15; 0 turns them off)",
    )
    p.add_argument(
        "--read-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="give up on an upstream that sends nothing for this long (default 60)",
    )
    p.add_argument(
        "--capture",
        metavar="DIR",
        default=None,
        help="write each stream's raw upstream bytes as DIR/NAME.sse plus NAME.json (fixture format)",
    )
    p.set_defaults(func=_cmd_relay)


def _register_check_relay(sub: Any) -> None:
    p = sub.add_parser(
        "check-relay",
        help="grade a relay (yours or the reference) on the five rules, through faults",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_CHECK_EPILOG,
        description=f"{inspect.cleandoc(_cmd_check_relay.__doc__ or '')}\n\nThe rules:\n{_requirements_text()}",
    )
    p.add_argument(
        "relay_url",
        nargs="?",
        metavar="RELAY_URL",
        help="a running relay's URL (http://HOST:PORT adds /v1), its upstream set to the upstream URL",
    )
    p.add_argument(
        "--relay-cmd",
        metavar="CMD",
        help="a command that starts the relay: {upstream} and {port} "
        "are filled in, also {keepalive} and {read_timeout}",
    )
    p.add_argument("--summaries", metavar="FILE", help="the file the relay appends its JSON summary lines to")
    p.add_argument(
        "--upstream-port",
        type=int,
        default=0,
        metavar="PORT",
        help="the port of the checker's upstream (default 8765 with RELAY_URL, a free one with --relay-cmd)",
    )
    p.add_argument(
        "--keepalive",
        type=float,
        default=0.25,
        metavar="SECONDS",
        help="the relay's keep-alive interval (default 0.25)",
    )
    p.add_argument(
        "--read-timeout",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="the relay's read timeout: how long it waits on a silent upstream (default 2)",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the chaos proxy and the fuzz (default 1)")
    p.add_argument("--fuzz-runs", type=int, default=16, metavar="N", help="seeded fuzz runs (default 16; 0: none)")
    p.add_argument(
        "--only",
        metavar="1,2,...",
        help="check only these requirements, to iterate quickly (default all "
        "five; the exit status is 0 only when all five were checked and hold)",
    )
    p.add_argument(
        "--disconnect-bound",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how soon the upstream must see a departed client (default 1)",
    )
    p.add_argument(
        "--ttft-bound",
        type=float,
        default=0.25,
        metavar="SECONDS",
        help="how much time to first token the relay may add (default 0.25)",
    )
    p.set_defaults(func=_cmd_check_relay)
