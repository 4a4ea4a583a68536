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
import signal
import sys
import threading
from typing import Any

__all__ = ["register", "banner", "room_urls", "scenario_list"]


def _label(learner: str) -> str:
    """How a learner's API key is printed: "anonymous", a short name as is, a long (real-looking) key masked."""
    if not learner:
        return "anonymous"
    return learner if len(learner) <= 16 else f"{learner[:4]}...{learner[-4:]}"


def _line(record: Any) -> str:
    return (f"  {record.method} {record.path} model={record.model} status={record.status} {record.ending} "
            f"{record.bytes_written} bytes learner={_label(record.learner)}")


_EVERY_INTERFACE = ("0.0.0.0", "")


def room_urls(host: str, port: int, addresses: list[str]) -> tuple[list[str], bool]:
    """The base URLs a learner can use, and whether the room's network can reach the server.

    Bound to every interface (0.0.0.0): one URL per address of this machine that others can reach (the
    loopback one when there is none). Bound to one address: that one. Loopback is reachable from this
    machine only."""
    if host in _EVERY_INTERFACE:
        hosts = addresses or ["127.0.0.1"]
        return [f"http://{h}:{port}/v1" for h in hosts], bool(addresses)
    shown = f"[{host}]" if ":" in host else host
    reachable = not (host == "localhost" or host.startswith("127.") or host == "::1")
    return [f"http://{shown}:{port}/v1"], reachable


def banner(scenario_name: str, host: str, port: int, script: dict[str, Any], *, addresses: list[str],
           quiet: bool = False, profile: str | None = None) -> str:
    """What `streamlab standin` prints when it starts: where to point learners (and the projector), and a
    first request to try with curl and with the openai SDK, all at an address the learners can use."""
    from streamlab.core.standin.scenarios import scenario_of

    urls, reachable = room_urls(host, port, addresses)
    base = urls[0]
    model = "scheduled" if "scheduled" in script else next(iter(script))
    known = scenario_of(model)
    dialect = known.route if known is not None else "chat/completions"
    lines = [f"streamlab stand-in: scenario {scenario_name!r} at {base}  (scripted, not a model)"]
    if host in _EVERY_INTERFACE:
        lines.append(f"  listening on every interface of this machine, port {port}")
        if not addresses:
            lines.append("  no address of this machine that others can reach was found: only this machine can use it")
    if reachable:
        lines += [f"  learners use: {url}" for url in urls]
        lines.append("  WARNING: anyone on this machine's networks can reach this server and its dashboard: serve "
                     "it on a network you trust, and stop it (Ctrl-C) after the workshop")
    lines.append(f"  room dashboard (for the projector): {base.removesuffix('/v1')}/dashboard")
    if host in _EVERY_INTERFACE and addresses:
        lines.append(f"  (on this machine also http://127.0.0.1:{port}/dashboard)")
    lines.append(f"  models: {', '.join(sorted(script))}")
    if profile:
        from streamlab.core.standin.profiles import PROFILES

        lines.append(f"  profile {profile!r}: answers as {PROFILES[profile].title}; any other model name gets its "
                     f"answer\n  grade it: streamlab check {base} --model any --dialect both")
    lines.append("  your API key names you: each key gets its own episodes; POST /v1/reset starts you over")
    lines += ["", *_snippets(base, model, dialect), ""]
    lines.append("Ctrl-C stops it." + ("" if quiet else " One line per finished request follows."))
    return "\n".join(lines)


def _snippets(base: str, model: str, dialect: str) -> list[str]:
    body: dict[str, Any] = {"model": model, "stream": True}
    body.update({"input": "hi"} if dialect == "responses" else {"messages": [{"role": "user", "content": "hi"}]})
    lines = ["try it with curl (-N: print bytes as they arrive):",
             f"  curl -N {base}/{dialect} -H 'Authorization: Bearer your-name' -H 'Content-Type: application/json' "
             f"-d '{json.dumps(body)}'",
             "", "or with the openai SDK:", "  from openai import OpenAI",
             f"  client = OpenAI(base_url={base!r}, api_key='your-name')"]
    if dialect == "responses":
        return lines + [f"  for event in client.responses.create(model={model!r}, input='hi', stream=True):",
                        "      print(event.type)"]
    return lines + [f"  for chunk in client.chat.completions.create(model={model!r}, stream=True,",
                    "                                              messages=[{'role': 'user', 'content': 'hi'}]):",
                    "      if chunk.choices:  # [] on a usage chunk; the finish chunk's content is None",
                    "          print(chunk.choices[0].delta.content or '', end='', flush=True)",
                    "  print()"]


def scenario_list() -> str:
    """What `streamlab standin --list` prints: each scenario, its model, the labs that use it, what it plays."""
    from streamlab.core.standin.profiles import PROFILES
    from streamlab.core.standin.scenarios import LABS, ROOM_SCENARIOS

    lines = [f"{'scenario':<11} {'model':<10} {'labs':<15} what it plays"]
    lines += [f"{s.name:<11} {s.model:<10} {' '.join(s.labs):<15} {s.description}" for s in ROOM_SCENARIOS]
    lines += ["all         every model above at once (the default)", "",
              "labs: " + ", ".join(f"{number} {title}" for number, title in LABS.items()), ""]
    lines += [f"--profile {profile.name:<9} {profile.title}" for profile in PROFILES.values()]
    return "\n".join(lines)


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
    from streamlab.core.standin.scenarios import scenario
    from streamlab.net.standin.hostaddr import room_addresses
    from streamlab.net.standin.server import StandIn

    if args.list:
        print(scenario_list())
        return 0
    try:
        script = scenario(args.scenario)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)  # a script's `kill` stops it as cleanly as Ctrl-C
    try:
        server = StandIn(script, host=args.host, port=args.port, usage="scripted" if args.lenient else "requested",
                         require_input=not args.lenient, max_record_bytes=64 * 1024, profile=args.profile).start()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    finished: queue.Queue[Any] | None = None if args.quiet else queue.Queue()
    if finished is not None:
        server.subscribe(finished.put)
    try:
        addresses = room_addresses() if args.host in _EVERY_INTERFACE else []
        print(banner(args.scenario, args.host, server.port, script, addresses=addresses, quiet=args.quiet,
                     profile=args.profile), flush=True)
        _follow(finished)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    while finished is not None and not finished.empty():
        print(_line(finished.get_nowait()), flush=True)
    print(f"stopped after {server.totals().requests} request(s)", flush=True)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def register(sub: Any) -> None:
    """Add the `standin` subcommand to the `streamlab` parser's subparsers."""
    from streamlab.core.standin.profiles import PROFILE_NAMES

    p = sub.add_parser("standin", help="serve a scripted OpenAI-compatible stand-in until Ctrl-C",
                       description=_cmd_standin.__doc__)
    p.add_argument("--scenario", default="all", help="a named scenario, or 'all' (default); see --list")
    p.add_argument("--list", action="store_true", help="list the scenarios, the labs that use each, and exit")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only; 0.0.0.0 serves a room, and prints "
                        "this machine's addresses for the learners)")
    p.add_argument("--port", type=int, default=8000, help="port to bind (default 8000; 0 picks a free one)")
    p.add_argument("--quiet", action="store_true", help="do not print a line per finished request")
    p.add_argument("--lenient", action="store_true",
                   help="play every scripted byte and accept requests without messages/input (default: check "
                        "requests and send usage only when asked, as the real API does)")
    p.add_argument("--profile", choices=PROFILE_NAMES, default=None,
                   help="answer as that server does (documented quirks of vLLM, Ollama, LiteLLM, llama.cpp, or "
                        "several faults at once: broken); any model name the scenario lacks gets its answer")
    p.set_defaults(func=_cmd_standin)
