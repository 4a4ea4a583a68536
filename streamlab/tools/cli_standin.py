"""The `streamlab standin` subcommand: serve a scripted OpenAI-compatible stand-in until Ctrl-C (tools layer).

It serves a room: each learner's API key names them, and each gets their own episodes (everyone's first
request to `flaky` gets the 429). Requests are checked as the real API checks them (`messages` or `input`
required; the Chat usage chunk only with `stream_options.include_usage`) unless `--lenient` is given.
One line is printed per finished request, fed by the server as each request ends (no polling, so an idle
server costs no CPU however many requests it has served); `--quiet` prints none and subscribes to nothing.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
from typing import Any

__all__ = ["register"]


def _label(learner: str) -> str:
    """How a learner's API key is printed: "anonymous", a short name as is, a long (real-looking) key masked."""
    if not learner:
        return "anonymous"
    return learner if len(learner) <= 16 else f"{learner[:4]}...{learner[-4:]}"


def _line(record: Any) -> str:
    return (f"  {record.method} {record.path} model={record.model} status={record.status} {record.outcome} "
            f"{record.bytes_written} bytes learner={_label(record.learner)}")


def _banner(args: argparse.Namespace, server: Any, script: dict[str, Any]) -> None:
    base = server.base_url
    model = "scheduled" if "scheduled" in script else next(iter(script))
    dialect = "responses" if model in ("responses", "bg") else "chat/completions"
    body: dict[str, Any] = {"model": model, "stream": True}
    body.update({"input": "hi"} if dialect == "responses" else {"messages": [{"role": "user", "content": "hi"}]})
    print(f"streamlab stand-in: scenario {args.scenario!r} at {base}  (scripted, not a model)")
    if args.host in ("0.0.0.0", "::", ""):
        print(f"  listening on every interface: others in the room use this machine's address, port {server.port}")
    print(f"  models: {', '.join(sorted(script))}")
    if args.profile:
        from ..core.profiles import PROFILES

        print(f"  profile {args.profile!r}: answers as {PROFILES[args.profile].title}; any other model name gets its "
              f"answer\n  grade it: streamlab check {base} --model any --dialect both")
    print("  your API key names you: each key gets its own episodes; POST /v1/reset starts you over")
    print("\ntry it with curl (-N: print bytes as they arrive):")
    print(f"  curl -N {base}/{dialect} -H 'Authorization: Bearer your-name' -H 'Content-Type: application/json' "
          f"-d '{json.dumps(body)}'")
    print("\nor with the openai SDK:")
    print("  from openai import OpenAI")
    print(f"  client = OpenAI(base_url={base!r}, api_key='your-name')")
    if dialect == "responses":
        print(f"  for event in client.responses.create(model={model!r}, input='hi', stream=True):")
        print("      print(event.type)")
    else:
        print(f"  for chunk in client.chat.completions.create(model={model!r}, stream=True,")
        print("                                              messages=[{'role': 'user', 'content': 'hi'}]):")
        print("      if chunk.choices:  # [] on a usage chunk; the finish chunk's content is None")
        print("          print(chunk.choices[0].delta.content or '', end='', flush=True)")
        print("  print()")
    print("\nCtrl-C stops it." + ("" if args.quiet else " One line per finished request follows."), flush=True)


def _follow(finished: queue.Queue[Any] | None) -> None:
    """Print each finished request as the server reports it, until Ctrl-C. Blocks on the queue (or, with
    --quiet, on nothing at all): the wake-ups are the requests themselves, plus one a second for Ctrl-C
    on platforms where a blocking wait cannot be interrupted."""
    idle = threading.Event()
    while True:
        if finished is None:
            idle.wait(1.0)
            continue
        try:
            record = finished.get(timeout=1.0)
        except queue.Empty:
            continue
        print(_line(record), flush=True)


def _cmd_standin(args: argparse.Namespace) -> int:
    """Serve a scripted stand-in for an OpenAI-compatible endpoint (no model, no key, no network) until
    Ctrl-C. Every scenario is a scripted answer under its own model name; "all" serves them together."""
    from ..core.profiles import PROFILES
    from ..net.standin import SCENARIOS, StandIn, scenario

    if args.list:
        for name, what in SCENARIOS.items():
            print(f"{name:<11} {what}")
        for profile in PROFILES.values():
            print(f"--profile {profile.name:<9} {profile.title}")
        return 0
    try:
        script = scenario(args.scenario)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        server = StandIn(script, host=args.host, port=args.port, usage="scripted" if args.lenient else "requested",
                         require_input=not args.lenient, max_record_bytes=64 * 1024, profile=args.profile).start()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    finished: queue.Queue[Any] | None = None if args.quiet else queue.Queue()
    if finished is not None:
        server.subscribe(finished.put)
    _banner(args, server, script)
    try:
        _follow(finished)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    while finished is not None and not finished.empty():
        print(_line(finished.get_nowait()), flush=True)
    print(f"stopped after {server.totals().requests} request(s)", flush=True)
    return 0


def register(sub: Any) -> None:
    """Add the `standin` subcommand to the `streamlab` parser's subparsers."""
    from ..core.profiles import PROFILE_NAMES

    p = sub.add_parser("standin", help="serve a scripted OpenAI-compatible stand-in until Ctrl-C",
                       description=_cmd_standin.__doc__)
    p.add_argument("--scenario", default="all", help="a named scenario, or 'all' (default); see --list")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 for a room)")
    p.add_argument("--port", type=int, default=8000, help="port to bind (default 8000; 0 picks a free one)")
    p.add_argument("--quiet", action="store_true", help="do not print a line per finished request")
    p.add_argument("--lenient", action="store_true",
                   help="play every scripted byte and accept requests without messages/input (default: check "
                        "requests and send usage only when asked, as the real API does)")
    p.add_argument("--profile", choices=PROFILE_NAMES, default=None,
                   help="answer as that server does (documented quirks of vLLM, Ollama, LiteLLM, llama.cpp, or "
                        "several faults at once: broken); any model name the scenario lacks gets its answer")
    p.set_defaults(func=_cmd_standin)
