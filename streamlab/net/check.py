"""`streamlab check`'s runs: send the conformance probes to an endpoint and keep each raw body (I/O layer).

`check_endpoint(base_url, model=...)` sends the requests of `streamlab.core.conformance.checks.probes_for` one after
the other with httpx, reads every body as raw bytes (the arrival time of each network read noted), and hands
the results to `streamlab.core.conformance.grade.grade`, which decides everything. This module only sends, reads,
times and stops reading:

* every request has a `timeout`: to connect, for each read, and for the whole body (a stream that keeps
  sending keep-alives for ever is cut off there, and the report says so);
* a body is read up to `max_body_bytes` (4 MiB), so a server that sends a line of endless bytes cannot
  exhaust the checker's memory;
* the endpoint "could not be checked" (exit 2) when the first request cannot connect at all (refused, DNS,
  connect timeout) or is answered 401 / 403 (the API key was refused). Anything else that a server sends,
  garbage included, is graded, and the report says what arrived.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import httpx

from streamlab.core.conformance.checks import ProbeRequest, ProbeResult, Report, probes_for
from streamlab.core.conformance.grade import grade, timing_facts
from streamlab.core.errors import ConnectFailed

__all__ = ["check_endpoint", "run_probe", "DEFAULT_TIMEOUT", "MAX_BODY_BYTES", "USER_AGENT"]

DEFAULT_TIMEOUT = 60.0
"""Seconds allowed for each request: to connect, between two reads, and for the whole body."""
MAX_BODY_BYTES = 4 * 1024 * 1024
USER_AGENT = "streamlab-check/1"


def _describe(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"the reply is not valid HTTP/1.1, or the server closed the connection: {text}"
    return f"{type(exc).__name__}: {text}"


def run_probe(client: httpx.Client, base_url: str, probe: ProbeRequest, *, api_key: str | None = None,
              timeout: float = DEFAULT_TIMEOUT, max_body_bytes: int = MAX_BODY_BYTES) -> ProbeResult:
    """Send one probe and read its whole body (up to the limits). Raises `ConnectFailed` only when no
    connection could be made; every other problem is recorded in the result's `problem`."""
    url = f"{base_url.rstrip('/')}/{probe.route}"
    headers = {"User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    start = time.perf_counter()
    try:
        with client.stream("POST", url, json=dict(probe.body), headers=headers,
                           timeout=httpx.Timeout(timeout)) as response:
            headers_at = time.perf_counter() - start
            found = tuple((k.lower(), v) for k, v in response.headers.multi_items())
            body, arrivals, problem = _read(response, start, timeout, max_body_bytes)
            return ProbeResult(probe, response.status_code, found, body, arrivals, headers_at, problem)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ConnectFailed(f"cannot connect to {url}: {_describe(exc)}") from exc
    except httpx.HTTPError as exc:
        return ProbeResult(probe, None, problem=_describe(exc))


def _read(response: httpx.Response, start: float, timeout: float,
          limit: int) -> tuple[bytes, tuple[tuple[int, float], ...], str | None]:
    body = bytearray()
    arrivals: list[tuple[int, float]] = []
    problem = None
    try:
        for piece in response.iter_bytes():
            body += piece
            now = time.perf_counter() - start
            arrivals.append((len(body), now))
            if len(body) >= limit:
                problem = f"stopped reading at the checker's limit of {limit} bytes"
                break
            if now > timeout:
                problem = f"still sending after {timeout:g} s: stopped reading"
                break
    except httpx.HTTPError as exc:
        problem = f"the body broke off after {len(body)} bytes: {_describe(exc)}"
    return bytes(body[:limit]), tuple(arrivals), problem


def _refused_key(result: ProbeResult) -> str | None:
    if result.status not in (401, 403):
        return None
    try:
        body = json.loads(result.body)
        message = body["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = result.body[:200].decode("utf-8", "replace")
    return f"the endpoint refused the API key (HTTP {result.status}): {message}"


def _probe_line(r: ProbeResult) -> str:
    route = f"POST /{r.request.route}"
    if r.status is None:
        return f"{r.name:<16} {route:<22} no response: {r.problem}"
    media = r.media_type or "no Content-Type"
    extra = f"; {r.problem}" if r.problem else ""
    return f"{r.name:<16} {route:<22} {r.status} {media}, {len(r.body)} bytes{extra}"


def check_endpoint(base_url: str, *, model: str, api_key: str | None = None, dialect: str = "chat",
                   timeout: float = DEFAULT_TIMEOUT, max_body_bytes: int = MAX_BODY_BYTES,
                   probes: Sequence[ProbeRequest] | None = None) -> Report:
    """Grade the OpenAI-compatible endpoint at `base_url` (e.g. `http://127.0.0.1:8000/v1`) for `model`.

    `dialect` is "chat", "responses" or "both"; `probes`, when given, replaces the standard requests. The
    report's `exit_code` is 0 (nothing failed), 1 (something failed) or 2 (could not be checked: see
    `unreachable`)."""
    todo = list(probes) if probes is not None else probes_for(dialect, model)
    report = Report(base_url, model, dialect)
    results: list[ProbeResult] = []
    with httpx.Client(follow_redirects=False, trust_env=False) as client:
        for k, probe in enumerate(todo):
            try:
                result = run_probe(client, base_url, probe, api_key=api_key, timeout=timeout,
                                   max_body_bytes=max_body_bytes)
            except ConnectFailed as exc:
                if k == 0:
                    report.unreachable = str(exc)
                    return report
                result = ProbeResult(probe, None, problem=str(exc))
            if k == 0 and (refused := _refused_key(result)) is not None:
                report.unreachable = refused
                return report
            results.append(result)
    report.probes = [_probe_line(r) for r in results]
    report.findings = grade(results, dialect=dialect)
    report.timings = timing_facts(results)
    return report
