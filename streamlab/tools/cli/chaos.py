"""The `streamlab chaos` subcommand: run the chaos TCP proxy in front of a server until Ctrl-C (tools layer)."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["register"]

DESCRIPTION = """\
A TCP proxy between any client and any server that delays, slices, cuts, resets or stalls the bytes
passing through it, so that you can watch what a client (or your relay) does when the network misbehaves.
Point the client at the address printed on the first line instead of the server's.

Faults apply to one direction ("down" = server -> client, where the SSE stream travels; "up" = client ->
server; "both" = each direction on its own), per connection: each connection has its own byte counters and
its own random choices, seeded from --seed and the connection's number, so the same seed and the same
bytes give the same slices. They act in this order on every chunk: the limit (--cut-after, --reset-after or
--stall-after: at most one), then --slice, then --bandwidth, then --latency.

example: streamlab chaos --upstream 127.0.0.1:8000 --slice 1:8 --cut-after 2000 --seed 1
"""


def _option(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """Wrap a `streamlab.core.chaos` parser for argparse, which then names the option in its error."""
    from streamlab.core.errors import FaultSpecError

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except FaultSpecError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc.problem}") from None

    convert.__name__ = parse.__name__
    return convert


def _cmd_chaos(args: argparse.Namespace) -> int:
    """Run the proxy until Ctrl-C, SIGTERM or SIGHUP, printing one line per finished connection.

    Every line goes out through a `streamlab.net.console.Outlet`: a stdout that closes (`| head -n 1`, the
    address read and the reader gone) or stops being read costs lines, never the proxy. Printed from here,
    the first connection after `head` had left died of a broken pipe and took the proxy down with it."""
    from streamlab.core.chaos import ConnectionRecord
    from streamlab.net.console import Outlet, route_logging, stop_signals, stream_writer

    proxy = _proxy_of(args)
    printed: set[int] = set()  # numbers of the connections already reported
    outlet = Outlet(stream_writer(sys.stdout), name="chaos-console")

    def unreported(records: list[ConnectionRecord]) -> list[ConnectionRecord]:
        return [r for r in records if r.closed and r.number not in printed]

    def report() -> None:  # each connection once, when it has closed
        records = proxy.records()
        for rec in unreported(records):
            if not args.quiet:
                outlet.put(f"  {rec.line()}")
            printed.add(rec.number)
        if records:  # forget the numbers that have left the proxy's ring of records
            printed.difference_update([n for n in printed if n < records[0].number])

    # Before the address is printed: a script that reads the address and soon sends SIGTERM must find the
    # handler installed, not Python's default (which kills the process without the closing report). The
    # handlers only set an event (SIGINT too: under nohup or & it starts ignored): a KeyboardInterrupt raised
    # from a handler had given a traceback when a second signal came while the proxy was stopping.
    stop = threading.Event()
    restore = stop_signals(stop)
    _, unroute = route_logging(sys.stderr, name="chaos-log")
    try:
        return _serve_until(proxy, stop, args, outlet, unreported, report)
    finally:
        outlet.close(timeout=2.0)
        unroute()
        restore()


def _serve_until(
    proxy: Any, stop: threading.Event, args: argparse.Namespace, outlet: Any, unreported: Any, report: Any
) -> int:
    """Start the proxy, report connections until `stop` is set, then stop it and print the closing report."""
    try:
        proxy.start()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    try:  # from here on, Ctrl-C, SIGTERM or SIGHUP always ends with the proxy stopped and the closing report
        host, port = proxy.address
        outlet.put(
            f"streamlab chaos: {host}:{port} -> {args.upstream[0]}:{args.upstream[1]} ({proxy.faults.describe()})"
        )
        if not args.quiet:
            outlet.put("Ctrl-C stops it. One line per finished connection follows.")
        while not stop.is_set():
            proxy.wait_until(lambda records: bool(unreported(records)) or stop.is_set(), timeout=0.2)
            report()
    except KeyboardInterrupt:  # a handler installed before ours (the SIGINT of an embedding program)
        pass
    finally:
        proxy.stop()
    report()
    records = proxy.records()
    count = records[-1].number + 1 if records else 0
    outlet.put(f"stopped after {count} connection{'s' if count != 1 else ''}")
    return 0


def _proxy_of(args: argparse.Namespace) -> Any:
    """The proxy the options describe (a usage error for options that contradict each other)."""
    from streamlab.core.errors import FaultSpecError
    from streamlab.net.chaos.proxy import ChaosProxy

    given = [
        f"--{name.replace('_', '-')}"
        for name in ("cut_after", "reset_after", "stall_after")
        if getattr(args, name) is not None
    ]
    if len(given) > 1:
        args.parser.error(
            f"only one of --cut-after, --reset-after, --stall-after may be given (got {' and '.join(given)})"
        )
    latency, jitter = args.latency or (0.0, 0.0)
    sizes, delay = args.slice or (None, 0.0)
    try:
        proxy = ChaosProxy(
            upstream=args.upstream,
            host=args.host,
            port=args.port,
            seed=args.seed,
            direction=args.direction,
            latency_ms=latency,
            jitter_ms=jitter,
            bandwidth=args.bandwidth,
            slice_sizes=sizes,
            slice_delay_ms=delay,
            cut_after=args.cut_after,
            reset_after=args.reset_after,
            stall_after=args.stall_after,
        )
    except FaultSpecError as exc:
        args.parser.error(str(exc))
    return proxy


def register(sub: Any) -> None:
    """Add the `chaos` subcommand to the `streamlab` parser's subparsers."""
    from streamlab.core.chaos import parse_hostport

    p = sub.add_parser(
        "chaos",
        help="a TCP proxy that delays, slices, cuts, resets or stalls what passes through",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--upstream",
        required=True,
        type=_option(parse_hostport),
        metavar="HOST:PORT",
        help="the server to forward to, e.g. 127.0.0.1:8000 (a stand-in, a relay, any TCP server)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free one, printed)")
    p.add_argument("--seed", type=int, default=0, help="seed for every random choice (default 0)")
    p.add_argument(
        "--direction",
        choices=("down", "up", "both"),
        default="down",
        help="which bytes the faults touch: down = server -> client (default), up = client -> server, "
        "both = each direction on its own",
    )
    _add_fault_options(p)
    p.add_argument("--quiet", action="store_true", help="do not print a line per finished connection")
    p.set_defaults(func=_cmd_chaos, parser=p)


def _add_fault_options(p: Any) -> None:
    from streamlab.core.chaos import parse_bandwidth, parse_byte_count, parse_latency, parse_slice

    def count(option: str) -> Callable[[str], int]:
        return _option(lambda text: parse_byte_count(text, option=option))

    p.add_argument(
        "--latency",
        type=_option(parse_latency),
        metavar="MS[:JITTER]",
        help="deliver each write MS milliseconds (plus or minus up to JITTER) after its bytes reached "
        "the proxy, e.g. 100:20: a shift in time, as on a long cable, not a pause per write",
    )
    p.add_argument(
        "--bandwidth",
        type=_option(parse_bandwidth),
        metavar="BYTES_PER_S",
        help="at most this many bytes per second, in writes of a tenth of a second's worth",
    )
    p.add_argument(
        "--slice",
        type=_option(parse_slice),
        metavar="MIN:MAX[:DELAY_MS]",
        help="cut the bytes into writes of MIN to MAX bytes (1:8 cuts inside UTF-8 characters), "
        "optionally DELAY_MS apart",
    )
    p.add_argument(
        "--cut-after",
        type=count("--cut-after"),
        metavar="BYTES",
        help="after BYTES bytes in a faulted direction, close the connection cleanly (FIN to both "
        "peers; the receiver gets exactly BYTES bytes)",
    )
    p.add_argument(
        "--reset-after",
        type=count("--reset-after"),
        metavar="BYTES",
        help="after BYTES bytes in a faulted direction, reset the connection (RST to both peers, "
        "once the receiver has the BYTES bytes)",
    )
    p.add_argument(
        "--stall-after",
        type=count("--stall-after"),
        metavar="BYTES",
        help="after BYTES bytes in a faulted direction, pass nothing more in it, not even the end, "
        "and keep the connection open until a peer gives up or the proxy stops",
    )
