"""Lab 13's measurements: each case read through the real nginx, Caddy or an ASGI app, recorded and replayed (I/O).

    python -m streamlab.net.proxy.measure                       # every case and both check-path runs, live: JSON
    python -m streamlab.net.proxy.measure --output streamlab/data/paths/lab13.json   # re-record what lab 13 replays
    python -m streamlab.net.proxy.measure --recorded            # the recording lab 13 replays, no proxy needed
    python -m streamlab.net.proxy.measure --cases nginx nginx-gzip   # only these cases

`measure(keys)` starts a stand-in playing `streamlab.core.proxy.cases.lab_script()` on 127.0.0.1 and, for each case
of `streamlab.core.proxy.cases.CASES`, starts its hop in front of it (`NginxProxy`, `CaddyProxy`, `GzipApp`, or none),
reads one streamed chat completion through it as a browser reads it (`streamlab.net.pathcheck.read_route`: gzip
accepted, every network read timed), stops the hop, and keeps the case's facts and timings
(`streamlab.core.proxy.cases.facts_of`, `timings_of`). `check_paths()` runs `streamlab check-path` on nginx with gzip
and on Caddy. `run_proxy_lab()` does both and returns one JSON-able dict:

    {
      "schema": 1,
      "about":  {"recorded_at", "nginx", "caddy", "starlette", "httpx", "h2", "python", "platform", "command"},
      "stream": {"gap", "words", "read_timeout", "total_deadline", "prefill"},
      "cases":  {KEY: {"title", "hop", "setup", "model", "facts": {...}, "timings": {...}}},
      "check_path": {"nginx-gzip" | "caddy": {"setup", "exit_code", "verdict", "statuses", "report"}}
    }

The facts come out the same on every run (the lab prints them; tests/proxy/test_lab13.py compares a live run with the
recording); the timings do not (the lab plots them). `load_recorded()` reads the run shipped in the package
(`streamlab/data/paths/lab13.json`, `data/paths/lab13.json` in a checkout); `measured(keys, live=...)` and
`checked_path(name, live=...)` are what the lab calls: the recording, or with `live=True` a run now (a missing nginx
is `ProxyUnavailable`, saying how to install it).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.resources
import json
import platform
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from streamlab.core.errors import ProxyUnavailable
from streamlab.core.pathcheck.checks import chat_request, chat_url
from streamlab.core.pathcheck.timeline import timeline_of
from streamlab.core.proxy.caddy import CaddyOptions
from streamlab.core.proxy.cases import (
    CASE_KEYS,
    GAP,
    READ_TIMEOUT,
    TOTAL_DEADLINE,
    WORDS,
    Case,
    case,
    facts_of,
    lab_script,
    timings_of,
)
from streamlab.core.proxy.nginx import NginxOptions
from streamlab.core.standin.scenarios import PREFILL_SECONDS
from streamlab.net.pathcheck import check_path, read_route
from streamlab.net.proxy.asgi import GzipApp
from streamlab.net.proxy.caddy import CaddyProxy
from streamlab.net.proxy.nginx import NginxProxy
from streamlab.net.standin.server import StandIn

__all__ = [
    "SCHEMA",
    "RECORDED",
    "CHECKED_PATHS",
    "measure",
    "measure_case",
    "check_paths",
    "run_proxy_lab",
    "measured",
    "checked_path",
    "save",
    "load_recorded",
    "main",
]

SCHEMA = 1
RECORDED = ("paths", "lab13.json")
"""Where the recorded run lives inside `streamlab.data`."""
CHECKED_PATHS = ("nginx-gzip", "caddy")
"""The paths `check_paths()` grades with `streamlab check-path`."""
_COMMAND = "python -m streamlab.net.proxy.measure --output streamlab/data/paths/lab13.json"


@contextlib.contextmanager
def _hop(c: Case, upstream: str, versions: dict[str, str]) -> Iterator[str]:
    """Start the case's hop in front of `upstream` and yield the base URL a reader is given; stop it afterwards."""
    if c.nginx is not None:
        with NginxProxy(upstream, c.nginx) as nginx:
            versions["nginx"] = nginx.version
            yield nginx.base_url
    elif c.caddy is not None:
        with CaddyProxy(upstream, c.caddy) as caddy:
            versions["caddy"] = caddy.version
            yield caddy.base_url
    elif c.compress is not None:
        with GzipApp(upstream, compress_event_stream=c.compress) as app:
            yield app.base_url
    else:
        yield upstream


def _client(c: Case) -> httpx.Client:
    """The reader's client: HTTP/1.1, or HTTP/2 only (prior knowledge: what Caddy's h2c answers) for an http2 case."""
    return httpx.Client(trust_env=False, http1=not c.http2, http2=c.http2)


def measure_case(c: Case, upstream: str, versions: dict[str, str] | None = None) -> dict[str, Any]:
    """Read case `c` once through its hop in front of the stand-in at `upstream` (its base URL, `.../v1`)."""
    versions = {} if versions is None else versions
    with _hop(c, upstream, versions) as base, _client(c) as client:
        got = read_route(client, chat_url(base), chat_request(c.model), name=c.key, deadline=c.deadline)
        reused = None
        if c.again:
            after = read_route(client, chat_url(base), chat_request("paced"), name="again", deadline=20)
            reused = after.status == 200 and not after.new_connection
    t = timeline_of(got)
    facts = facts_of(
        t,
        status=got.status,
        http_version=got.http_version,
        encoding=got.header("content-encoding"),
        ending=got.ending.value,
        problem=got.problem,
        reused=reused,
    )
    return {
        "title": c.title,
        "hop": c.hop,
        "setup": c.describe(),
        "model": c.model,
        "facts": facts,
        "timings": timings_of(t),
    }


def measure(keys: Sequence[str] | None = None, *, versions: dict[str, str] | None = None) -> dict[str, Any]:
    """Every case named in `keys` (default: all of `CASE_KEYS`, in order), each read once through its own hop in
    front of one fresh stand-in; key -> the case's record."""
    chosen = [case(k) for k in (CASE_KEYS if keys is None else keys)]
    with StandIn(lab_script()) as standin:
        return {c.key: measure_case(c, standin.base_url, versions) for c in chosen}


def _check_one(name: str, upstream: str, versions: dict[str, str]) -> dict[str, Any]:
    if name == "nginx-gzip":
        hop: NginxProxy | CaddyProxy = NginxProxy(upstream, NginxOptions(gzip=True))
    else:
        hop = CaddyProxy(upstream, CaddyOptions())
    with hop:
        versions[hop.kind] = hop.version
        report = check_path(hop.base_url, direct=upstream, silent_model="prefill", window=3.0)
        setup = f"{'nginx' if hop.kind == 'nginx' else 'Caddy'}: {hop.options.describe()}"
    return {
        "setup": setup,
        "exit_code": report.exit_code,
        "verdict": report.verdict,
        "statuses": {f.check: f.status.value for f in report.findings},
        "report": report.render(timings=False),
    }


def check_paths(names: Sequence[str] = CHECKED_PATHS, *, versions: dict[str, str] | None = None) -> dict[str, Any]:
    """`streamlab check-path` on each of `names` ("nginx-gzip", "caddy") in front of a fresh stand-in, with the
    stand-in itself as the direct route and its `prefill` scenario as the silent stream."""
    versions = {} if versions is None else versions
    unknown = sorted(set(names) - set(CHECKED_PATHS))
    if unknown:
        raise ValueError(f"unknown path {unknown}; known: {', '.join(CHECKED_PATHS)}")
    with StandIn(lab_script()) as standin:
        return {name: _check_one(name, standin.base_url, versions) for name in names}


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_proxy_lab(keys: Sequence[str] | None = None) -> dict[str, Any]:
    """One whole run: every case (or those in `keys`) and both check-path runs, with what ran them (`about`)."""
    versions: dict[str, str] = {}
    cases = measure(keys, versions=versions)
    checked = check_paths(versions=versions) if keys is None else {}
    return {
        "schema": SCHEMA,
        "about": {
            "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "nginx": versions.get("nginx"),
            "caddy": versions.get("caddy"),
            "starlette": _version("starlette"),
            "httpx": _version("httpx"),
            "h2": _version("h2"),
            "python": platform.python_version(),
            "platform": f"{platform.system()} {platform.machine()}",
            "command": _COMMAND,
        },
        "stream": {
            "gap": GAP,
            "words": list(WORDS),
            "read_timeout": READ_TIMEOUT,
            "total_deadline": TOTAL_DEADLINE,
            "prefill": PREFILL_SECONDS,
        },
        "cases": cases,
        "check_path": checked,
    }


def save(run: dict[str, Any], path: str | Path) -> None:
    """Write one run to `path` as indented JSON (the form `load_recorded` reads back)."""
    Path(path).write_text(json.dumps(run, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def load_recorded() -> dict[str, Any]:
    """The run recorded in the package (`streamlab/data/paths/lab13.json`)."""
    folder, name = RECORDED
    text = (importlib.resources.files("streamlab.data") / folder / name).read_text(encoding="utf-8")
    run: dict[str, Any] = json.loads(text)
    return run


def measured(keys: Sequence[str], *, live: bool = False) -> dict[str, Any]:
    """The records of the cases named in `keys`: from the recording, or with `live` measured now."""
    for key in keys:
        case(key)  # an unknown key is refused either way
    if live:
        return measure(keys)
    recorded = load_recorded()["cases"]
    return {key: recorded[key] for key in keys}


def checked_path(name: str, *, live: bool = False) -> dict[str, Any]:
    """`streamlab check-path`'s verdict on path `name` ("nginx-gzip" or "caddy"): recorded, or with `live` now."""
    if live:
        return check_paths([name])[name]
    return dict(load_recorded()["check_path"][name])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamlab.net.proxy.measure",
        description="Measure lab 13's cases: the stand-in read through real nginx, Caddy and a Starlette app with "
        "GZipMiddleware, one fault or fix at a time, and streamlab check-path on nginx with gzip and on Caddy; print "
        "the facts and timings as JSON.",
    )
    parser.add_argument("--output", metavar="PATH", help="also write the run to PATH (indented JSON)")
    parser.add_argument("--cases", nargs="+", metavar="KEY", choices=CASE_KEYS, help="only these cases (no check-path)")
    parser.add_argument(
        "--recorded", action="store_true", help="print the run recorded in the package instead (what lab 13 replays)"
    )
    args = parser.parse_args(argv)
    if args.recorded:
        print(json.dumps(load_recorded(), indent=1, ensure_ascii=False))
        return 0
    try:
        run = run_proxy_lab(args.cases)
    except ProxyUnavailable as exc:
        print(f"streamlab.net.proxy.measure: {exc}", file=sys.stderr)
        return 3
    if args.output:
        save(run, args.output)
    print(json.dumps(run, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
