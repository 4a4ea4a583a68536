"""The `streamlab standin` subcommand: serve a scripted OpenAI-compatible stand-in until Ctrl-C (tools layer)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def _cmd_standin(args: argparse.Namespace) -> int:
    """Serve a scripted stand-in for an OpenAI-compatible endpoint (no model, no key, no network) until
    Ctrl-C. Every scenario is a scripted answer under its own model name; "all" serves them together."""
    import json
    import time

    from ..net.standin import SCENARIOS, StandIn, scenario

    if args.list:
        for name, what in SCENARIOS.items():
            print(f"{name:<11} {what}")
        return 0
    try:
        script = scenario(args.scenario)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        server = StandIn(script, host=args.host, port=args.port).start()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    base = server.base_url
    model = "scheduled" if "scheduled" in script else next(iter(script))
    dialect = "responses" if model in ("responses", "bg") else "chat/completions"
    body = {"model": model, "stream": True}
    body.update({"input": "hi"} if dialect == "responses" else {"messages": [{"role": "user", "content": "hi"}]})
    print(f"streamlab stand-in: scenario {args.scenario!r} at {base}  (scripted, not a model)")
    if args.host in ("0.0.0.0", "::", ""):
        print(f"  listening on every interface: others in the room use this machine's address, port {server.port}")
    print(f"  models: {', '.join(sorted(script))}")
    print("\ntry it with curl (-N: print bytes as they arrive):")
    print(f"  curl -N {base}/{dialect} -H 'Content-Type: application/json' -d '{json.dumps(body)}'")
    print("\nor with the openai SDK:")
    print("  from openai import OpenAI")
    print(f"  client = OpenAI(base_url={base!r}, api_key='stand-in')")
    if dialect == "responses":
        print(f"  for event in client.responses.create(model={model!r}, input='hi', stream=True):")
        print("      print(event.type)")
    else:
        print(f"  for chunk in client.chat.completions.create(model={model!r}, stream=True,")
        print("                                              messages=[{'role': 'user', 'content': 'hi'}]):")
        print("      print(chunk.choices[0].delta.content if chunk.choices else chunk.usage)")
    print("\nCtrl-C stops it." + ("" if args.quiet else " One line per finished request follows."), flush=True)
    shown = 0

    def report() -> None:  # one line per request finished since the last call, in arrival order
        nonlocal shown
        records = server.records()
        while not args.quiet and shown < len(records) and records[shown].finished:
            r = records[shown]
            print(f"  {r.method} {r.path} model={r.model} status={r.status} {r.outcome} {r.bytes_written} bytes",
                  flush=True)
            shown += 1

    try:
        while True:
            time.sleep(0.2)
            report()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    report()
    print(f"stopped after {len(server.records())} request(s)", flush=True)
    return 0



def register(sub: Any) -> None:
    """Add the `standin` subcommand to the `streamlab` parser's subparsers."""
    p = sub.add_parser("standin", help="serve a scripted OpenAI-compatible stand-in until Ctrl-C",
                       description=_cmd_standin.__doc__)
    p.add_argument("--scenario", default="all", help="a named scenario, or 'all' (default); see --list")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 for a room)")
    p.add_argument("--port", type=int, default=8000, help="port to bind (default 8000; 0 picks a free one)")
    p.add_argument("--quiet", action="store_true", help="do not print a line per finished request")
    p.set_defaults(func=_cmd_standin)
