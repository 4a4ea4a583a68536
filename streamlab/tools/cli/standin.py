"""The `streamlab standin` subcommand: serve a scripted OpenAI-compatible stand-in until Ctrl-C (tools layer).

It serves a room: each learner's API key names them, and each gets their own episodes (everyone's first
request to `flaky` gets the 429). Requests are checked as the real API checks them (`messages` or `input`
required; the Chat usage chunk only with `stream_options.include_usage`) unless `--lenient` is given.
`--replay` serves real captured streams instead (`streamlab.core.standin.replay`): each capture's bytes, read by
read, after the recorded gaps, under the capture's name as the model. One line is printed per finished request,
fed by the server as each request ends (no polling, so an idle server costs no CPU however many requests it has
served); `--quiet` prints none and subscribes to nothing.

What a client sent (its model, path, key) is printed escaped and capped (`streamlab.core.untrusted.printable`):
a lone surrogate, an escape sequence or a line break cannot stop the server, take over the instructor's
terminal or forge a line. The lines go out through a `streamlab.net.console.Outlet`: a writer thread with a
bounded queue, so a terminal nobody reads never holds up a request, and lines that do not fit are counted.
SIGINT and SIGTERM both stop it cleanly, even when it was started with SIGINT ignored (`nohup`, `&`).

Served to a room (`--host 0.0.0.0`, or any address others can reach) it has a join code, made up at start and
printed in the banner (`--join-code CODE` chooses it, `--join-code none` serves an open room): a learner joins
with it and a name and gets the API key that names them (`streamlab.core.standin.door`); a request without
such a key gets a 401 that says how to join. On 127.0.0.1 (the default) only this machine can reach it, and
any key names a learner unless `--join-code` is given. The banner also prints the projector's dashboard URL,
whose key keeps the projector a live feed however many others are open.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import threading
from typing import Any

__all__ = ["register", "banner", "room_urls", "scenario_list", "new_join_code", "join_code_for"]

_CODE_LETTERS = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: read aloud and copied off a board


def new_join_code() -> str:
    """A fresh join code, six letters and digits in two groups (`xk7-m2q`): about 30 bits, and the door lets an
    address try ten codes at once and then one every two seconds."""
    letters = "".join(secrets.choice(_CODE_LETTERS) for _ in range(6))
    return f"{letters[:3]}-{letters[3:]}"


def _label(learner: str) -> str:
    """How a learner's API key is printed: "anonymous", a short name as is, a long (real-looking) key masked;
    escaped either way (a key is whatever the client sent)."""
    from streamlab.core.untrusted import printable

    if not learner:
        return "anonymous"
    return printable(learner if len(learner) <= 16 else f"{learner[:4]}...{learner[-4:]}", spaces=False)


def _line(record: Any) -> str:
    """One finished request as the console shows it: every field a client chose escaped and capped, so the
    line is one line, each field one word, and nothing in it can act on a terminal."""
    from streamlab.core.untrusted import printable

    method, path = printable(record.method, limit=16, spaces=False), printable(record.path, limit=200, spaces=False)
    model = printable(record.model, limit=80, spaces=False)
    line = (
        f"  {method} {path} model={model} status={record.status} {record.ending} "
        f"{record.bytes_written} bytes learner={_label(record.learner)}"
    )
    resumed = record.last_event_id  # what a reconnecting EventSource sends on its own
    return line if resumed is None else f"{line} last-event-id={printable(resumed, limit=80, spaces=False)}"


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


def banner(
    scenario_name: str,
    host: str,
    port: int,
    script: dict[str, Any],
    *,
    addresses: list[str],
    quiet: bool = False,
    profile: str | None = None,
    replay: bool = False,
    join_code: str | None = None,
    instructor_key: str | None = None,
) -> str:
    """What `streamlab standin` prints when it starts: where to point learners (and the projector), and a
    first request to try with curl and with the openai SDK, all at an address the learners can use."""
    from streamlab.core.standin.scenarios import scenario_of

    urls, reachable = room_urls(host, port, addresses)
    base = urls[0]
    model = "scheduled" if "scheduled" in script else next(iter(script))
    known = scenario_of(model)
    dialect = known.route if known is not None else "chat/completions"
    kind = "real captured bytes, replayed with their timing" if replay else "scripted, not a model"
    lines = [f"streamlab stand-in: scenario {scenario_name!r} at {base}  ({kind})"]
    if host in _EVERY_INTERFACE:
        lines.append(f"  listening on every interface of this machine, port {port}")
        if not addresses:
            lines.append("  no address of this machine that others can reach was found: only this machine can use it")
    if reachable:
        lines += [f"  learners use: {url}" for url in urls]
        lines.append(
            "  WARNING: anyone on this machine's networks can reach this server and its dashboard: serve "
            "it on a network you trust, and stop it (Ctrl-C) after the workshop"
        )
    root = base.removesuffix("/v1")
    keyed = f"?key={instructor_key}" if instructor_key else ""
    if join_code:
        lines.append(
            f"  JOIN CODE: {join_code}   (write it on the board: a learner joins with it and a name, and only "
            "a learner who joined has a place)"
        )
    lines.append(f"  room dashboard (for the projector): {root}/dashboard{keyed}")
    if host in _EVERY_INTERFACE and addresses:
        lines.append(f"  (on this machine also http://127.0.0.1:{port}/dashboard{keyed})")
    if keyed:
        lines.append("  (its key keeps the projector a live feed; learners open it without the key)")
    lines.append(f"  models: {', '.join(sorted(script))}")
    if profile:
        from streamlab.core.standin.profiles import PROFILES

        lines.append(
            f"  profile {profile!r}: answers as {PROFILES[profile].title}; any other model name gets its "
            f"answer\n  grade it: streamlab check {base} --model any --dialect both"
        )
    if join_code:
        lines.append("  your API key names you: the room issues it when you join; POST /v1/reset starts you over")
        lines.append(
            f"  check cells on the dashboard: in a lab's setup cell, streamlab.join_room({root!r}, "
            f"name='your-name', code={join_code!r})"
        )
    else:
        lines.append("  your API key names you: each key gets its own episodes; POST /v1/reset starts you over")
        lines.append(
            f"  check cells on the dashboard: in a lab's setup cell, streamlab.join_room({root!r}, name='your-name')"
        )
    lines += ["", *_snippets(base, model, dialect, join_code), ""]
    lines.append("Ctrl-C stops it." + ("" if quiet else " One line per finished request follows."))
    return "\n".join(lines)


def _snippets(base: str, model: str, dialect: str, join_code: str | None = None) -> list[str]:
    body: dict[str, Any] = {"model": model, "stream": True}
    body.update({"input": "hi"} if dialect == "responses" else {"messages": [{"role": "user", "content": "hi"}]})
    key = "YOUR-KEY" if join_code else "your-name"
    lines = []
    if join_code:
        join = json.dumps({"name": "your-name", "code": join_code})
        lines += [
            'join first (its answer\'s "api_key" is your API key here):',
            f"  curl -s {base}/join -H 'Content-Type: application/json' -d '{join}'",
            "",
        ]
    lines += [
        "try it with curl (-N: print bytes as they arrive):",
        f"  curl -N {base}/{dialect} -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' "
        f"-d '{json.dumps(body)}'",
        "",
        "or with the openai SDK:",
    ]
    if join_code:
        lines += [
            "  import streamlab",
            f"  room = streamlab.join_room({base.removesuffix('/v1')!r}, name='your-name', code={join_code!r})",
        ]
    lines += [
        "  from openai import OpenAI",
        f"  client = OpenAI(base_url={base!r}, api_key={'room.api_key' if join_code else repr(key)})",
    ]
    if dialect == "responses":
        return lines + [
            f"  for event in client.responses.create(model={model!r}, input='hi', stream=True):",
            "      print(event.type)",
        ]
    return lines + [
        f"  for chunk in client.chat.completions.create(model={model!r}, stream=True,",
        "                                              messages=[{'role': 'user', 'content': 'hi'}]):",
        "      if chunk.choices:  # [] on a usage chunk; the finish chunk's content is None",
        "          print(chunk.choices[0].delta.content or '', end='', flush=True)",
        "  print()",
    ]


def scenario_list() -> str:
    """What `streamlab standin --list` prints: each scenario, its model, the labs that use it, what it plays."""
    from streamlab.core.standin.profiles import PROFILES
    from streamlab.core.standin.scenarios import LABS, ROOM_SCENARIOS

    lines = [f"{'scenario':<11} {'model':<10} {'labs':<18} what it plays"]
    lines += [f"{s.name:<11} {s.model:<10} {' '.join(s.labs):<18} {s.description}" for s in ROOM_SCENARIOS]
    lines += [
        "all         every model above at once (the default)",
        "",
        "labs: " + ", ".join(f"{number} {title}" for number, title in LABS.items()),
        "",
    ]
    lines += [f"--profile {profile.name:<9} {profile.title}" for profile in PROFILES.values()]
    return "\n".join(lines)


def _dropped(count: int) -> str:
    return f"  ({count} request line(s) not printed: stdout was not being read)"


def _printer(outlet: Any) -> Any:
    """The subscriber that turns each finished request into a console line (in the handler's thread: it only
    formats a short line and queues it, and never raises into the server)."""

    def print_record(record: Any) -> None:
        try:
            outlet.put(_line(record))
        except Exception:  # a line that cannot be made is one line lost, never a request
            outlet.put("  (a request line could not be printed)")

    return print_record


_RECORD_BYTES = 1024
"""What the command line's stand-in keeps of each request body and reply (its records feed one printed line
and the dashboard, neither of which reads bodies): 1,000 records of 64 KiB bodies had cost 555 MB."""


def _cmd_standin(args: argparse.Namespace) -> int:
    """Serve a scripted stand-in for an OpenAI-compatible endpoint (no model, no key, no network) until
    Ctrl-C. Every scenario is a scripted answer under its own model name; "all" serves them together."""
    from streamlab.core.standin.door import DoorLimits
    from streamlab.net.standin.hostaddr import room_addresses
    from streamlab.net.standin.server import StandIn

    if args.list:
        print(scenario_list())
        return 0
    try:
        script, name = _script(args)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    lenient = args.lenient or args.replay is not None  # a replay plays every recorded byte, whatever was asked
    join_code = join_code_for(args.host, args.join_code)
    from streamlab.net.console import Outlet, stop_signals, stream_writer

    stop = threading.Event()
    restore = stop_signals(stop)  # before the server starts: a script's early `kill` finds the handler
    try:
        server = StandIn(
            script,
            host=args.host,
            port=args.port,
            usage="scripted" if lenient else "requested",
            require_input=not lenient,
            max_record_bytes=_RECORD_BYTES,
            max_learners=args.max_learners,
            profile=args.profile,
            join_code=join_code,
            door_limits=DoorLimits(names_per_address=args.names_per_address),
        ).start()
    except OSError as exc:
        restore()
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    outlet = Outlet(stream_writer(sys.stdout), name="standin-console", notice=_dropped)
    if not args.quiet:
        server.subscribe(_printer(outlet))
    try:
        addresses = room_addresses() if args.host in _EVERY_INTERFACE else []
        outlet.put(
            banner(
                name,
                args.host,
                server.port,
                script,
                addresses=addresses,
                quiet=args.quiet,
                profile=args.profile,
                replay=args.replay is not None,
                join_code=join_code,
                instructor_key=server.instructor_key,
            )
        )
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        outlet.put(f"stopped after {server.totals().requests} request(s)")
        outlet.close(timeout=2.0)  # a stdout nobody reads cannot keep a stopped server from exiting
        restore()
    return 0


def join_code_for(host: str, given: str | None) -> str | None:
    """The room's join code: the one `given`, none for "none", else a new one when others can reach the server
    bound to `host` (`room_urls`) and none on a loopback address (this machine only)."""
    if given is not None:
        return None if given.strip().lower() == "none" else given.strip()
    _, reachable = room_urls(host, 0, ["others"] if host in _EVERY_INTERFACE else [])
    return new_join_code() if reachable else None


def _script(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The script to serve and the name the banner gives it: a named scenario, or every capture of a folder
    replayed with its recorded timing (`--replay`; each capture's name is its model)."""
    if args.replay is None:
        from streamlab.core.standin.scenarios import scenario

        return dict(scenario(args.scenario)), args.scenario
    from pathlib import Path

    from streamlab.core.capture import captures_folder, load_captures
    from streamlab.core.standin.replay import replay_script

    folder = captures_folder() if args.replay == "" else Path(args.replay)
    return replay_script(load_captures(folder)), f"replay of {folder.name}"


def _at_least_one(text: str) -> int:
    """argparse type for a count that must be a whole number of at least 1 (its error names the value)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(sub: Any) -> None:
    """Add the `standin` subcommand to the `streamlab` parser's subparsers."""
    from streamlab.core.standin.profiles import PROFILE_NAMES
    from streamlab.core.standin.room import DEFAULT_MAX_LEARNERS

    p = sub.add_parser(
        "standin", help="serve a scripted OpenAI-compatible stand-in until Ctrl-C", description=_cmd_standin.__doc__
    )
    p.add_argument("--scenario", default="all", help="a named scenario, or 'all' (default); see --list")
    p.add_argument("--list", action="store_true", help="list the scenarios, the labs that use each, and exit")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: this machine only; 0.0.0.0 serves a room, and prints "
        "this machine's addresses for the learners)",
    )
    p.add_argument("--port", type=int, default=8000, help="port to bind (default 8000; 0 picks a free one)")
    p.add_argument("--quiet", action="store_true", help="do not print a line per finished request")
    p.add_argument(
        "--max-learners",
        type=_at_least_one,
        default=DEFAULT_MAX_LEARNERS,
        metavar="N",
        help=f"API keys the room remembers (default {DEFAULT_MAX_LEARNERS:,}): keys used once are forgotten first, "
        "a learner who came back never; when every place is taken so, a new key gets a 429 room_full",
    )
    p.add_argument(
        "--join-code",
        default=None,
        metavar="CODE",
        help="the room's join code (default: a new one when serving others, --host 0.0.0.0; none on 127.0.0.1); "
        "'none' serves an open room, where any API key names a learner",
    )
    p.add_argument(
        "--names-per-address",
        type=_at_least_one,
        default=20,
        metavar="N",
        help="names one network address may join (default 20; raise it when the whole room reaches you through one "
        "NAT address)",
    )
    p.add_argument(
        "--lenient",
        action="store_true",
        help="play every scripted byte and accept requests without messages/input (default: check "
        "requests and send usage only when asked, as the real API does)",
    )
    p.add_argument(
        "--replay",
        nargs="?",
        const="",
        default=None,
        metavar="CAPTURE_DIR",
        help="replay real captured streams with their recorded timing instead of a scenario: every "
        "capture in CAPTURE_DIR (default: the packaged llama-cpp-python captures) under its own "
        "name as the model, the real model's name playing chat-plain",
    )
    p.add_argument(
        "--profile",
        choices=PROFILE_NAMES,
        default=None,
        help="answer as that server does (documented quirks of vLLM, Ollama, LiteLLM, llama.cpp, or "
        "several faults at once: broken); any model name the scenario lacks gets its answer",
    )
    p.set_defaults(func=_cmd_standin)
