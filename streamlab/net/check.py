"""`streamlab check`'s runs: send the conformance probes to an endpoint and keep each raw body (I/O layer).

`check_endpoint(base_url, model=...)` sends the requests of `streamlab.core.conformance.checks.probes_for` one after
the other with httpx, reads every body as raw bytes (the arrival time of each network read noted), and hands
the results to `streamlab.core.conformance.grade.grade`, which decides everything. This module only sends, reads,
times and stops reading:

* every probe goes on a fresh connection: servers that close a keep-alive connection after a stream
  (llama-cpp-python and llama-server both do) would otherwise fail the next probe with "no HTTP response",
  a finding about the checker's pool, not the server;
* every request has a `timeout`, to connect and for each read, and a `deadline` for the whole exchange; every
  probe also bounds generation (`max_tokens`), so a model that rambles stops early. A stream still going at
  the deadline is cut, and the result says so in `cut`: what arrived is graded, the missing end is not a
  finding (a slow model is not an incompatible one);
* a body is read up to `max_body_bytes` (4 MiB, counted after every layer of Content-Encoding is undone),
  so a server that sends a line of endless bytes, or a decompression bomb, cannot exhaust the checker's
  memory (a cut too);
* the endpoint "could not be checked" (exit 2) when the first request cannot connect at all (refused, DNS,
  connect timeout) or is answered 401 / 403 (the API key was refused). Anything else that a server sends,
  garbage included, is graded, and the report says what arrived.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import httpx

from streamlab.core.conformance.checks import MAX_TOKENS, ProbeRequest, ProbeResult, Report, probes_for
from streamlab.core.conformance.grade import grade, timing_facts
from streamlab.core.decompress import BoundedDecoder
from streamlab.core.errors import ConnectFailed, EncodingError
from streamlab.core.safejson import read_json
from streamlab.net.eventstream import SocketDeadline, describe_transport_error, iter_decoded

__all__ = ["check_endpoint", "run_probe", "DEFAULT_TIMEOUT", "DEFAULT_DEADLINE", "MAX_BODY_BYTES", "USER_AGENT"]

DEFAULT_TIMEOUT = 60.0
"""Seconds allowed for each request to connect, and between two reads."""
DEFAULT_DEADLINE = 30.0
"""Seconds allowed for each probe's whole exchange, from sending the request to the body's last byte."""
MAX_BODY_BYTES = 4 * 1024 * 1024
USER_AGENT = "streamlab-check/1"


def run_probe(
    client: httpx.Client,
    base_url: str,
    probe: ProbeRequest,
    *,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    deadline: float = DEFAULT_DEADLINE,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> ProbeResult:
    """Send one probe and read its whole body (up to the limits). Raises `ConnectFailed` only when no
    connection could be made; a problem on the server's side is recorded in the result's `problem`, the
    checker's own cut (its deadline, its size cap) in `cut`."""
    url = f"{base_url.rstrip('/')}/{probe.route}"
    headers = {"User-Agent": USER_AGENT, "Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    limits = httpx.Timeout(timeout, read=min(timeout, deadline))
    start = time.perf_counter()
    guard = SocketDeadline(deadline + _GRACE)
    trace = {"trace": guard.trace}
    try:
        with client.stream(
            "POST", url, content=probe.content, headers=headers, timeout=limits, extensions=trace
        ) as response:
            headers_at = time.perf_counter() - start
            found = tuple((k.lower(), v) for k, v in response.headers.multi_items())
            body, arrivals, problem, cut = _read(response, start, deadline, max_body_bytes, guard)
            return ProbeResult(probe, response.status_code, found, body, arrivals, headers_at, problem, cut)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ConnectFailed(f"cannot connect to {url}: {describe_transport_error(exc, reading=False)}") from exc
    except httpx.TimeoutException as exc:
        if time.perf_counter() - start >= deadline:
            return ProbeResult(probe, None, cut=f"no response within the checker's deadline of {deadline:g} s")
        return ProbeResult(probe, None, problem=describe_transport_error(exc, reading=False))
    except httpx.HTTPError as exc:
        if guard.fired:
            return ProbeResult(probe, None, cut=f"no response within the checker's deadline of {deadline:g} s")
        return ProbeResult(probe, None, problem=describe_transport_error(exc, reading=False))
    finally:
        guard.cancel()


_GRACE = 0.5
"""Seconds past a probe's deadline before its socket is shut down (the body loop's own check comes first): a
server that drips its header bytes, each read within the read timeout, had kept `streamlab check` waiting for
ever."""


def _read(
    response: httpx.Response, start: float, deadline: float, limit: int, guard: SocketDeadline
) -> tuple[bytes, tuple[tuple[int, float], ...], str | None, str | None]:
    """The body, the arrivals, the server's problem and the checker's own cut. Whatever error the read raises
    after the deadline has passed (the guard shutting the socket in a gap between two tokens surfaces as a broken
    read) is the checker's cut, never a finding about the server (issue 36: false FAILs under load)."""
    body = bytearray()
    arrivals: list[tuple[int, float]] = []
    problem = cut = None
    try:
        for piece in _decoded(response, limit):
            body += piece
            now = time.perf_counter() - start
            arrivals.append((len(body), now))
            if len(body) >= limit:
                cut = f"stopped reading at the checker's limit of {limit} bytes"
                break
            if now > deadline:
                cut = f"still sending after the checker's deadline of {deadline:g} s: stopped reading"
                break
    except httpx.HTTPError as exc:
        if guard.fired or time.perf_counter() - start >= deadline:
            cut = f"still sending after the checker's deadline of {deadline:g} s: stopped reading"
        else:
            problem = f"the body broke off after {len(body)} bytes: {describe_transport_error(exc, reading=True)}"
    except EncodingError as exc:
        problem = f"the body could not be decoded after {len(body)} bytes: {exc}"
    return bytes(body[:limit]), tuple(arrivals), problem, cut


def _decoded(response: httpx.Response, limit: int) -> Iterator[bytes]:
    """The body with its Content-Encoding undone a piece at a time, the limit counted after every layer
    (`streamlab.core.decompress`): an 8.5 KB `gzip, gzip` body had been decoded whole, 2.1 GB past a 4 MiB cap."""
    yield from iter_decoded(response, BoundedDecoder(response.headers.get("content-encoding"), limit))


def _refused_key(result: ProbeResult) -> str | None:
    if result.status not in (401, 403):
        return None
    try:
        body = read_json(result.body)
        message = body["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = result.body[:200].decode("utf-8", "replace")
    return f"the endpoint refused the API key (HTTP {result.status}): {message}"


def _probe_line(r: ProbeResult) -> str:
    route = f"POST /{r.request.route}"
    if r.status is None and r.cut is None:
        return f"{r.name:<18} {route:<22} no response: {r.problem}"
    if r.status is None:
        return f"{r.name:<18} {route:<22} no response: {r.cut} (not a finding)"
    media = r.media_type or "no Content-Type"
    extra = f"; {r.problem}" if r.problem else ""
    extra += f"; {r.cut} (what never came is not a finding)" if r.cut else ""
    return f"{r.name:<18} {route:<22} {r.status} {media}, {len(r.body)} bytes{extra}"


def check_endpoint(
    base_url: str,
    *,
    model: str,
    api_key: str | None = None,
    dialect: str = "chat",
    timeout: float = DEFAULT_TIMEOUT,
    deadline: float = DEFAULT_DEADLINE,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_tokens: int = MAX_TOKENS,
    probes: Sequence[ProbeRequest] | None = None,
) -> Report:
    """Grade the OpenAI-compatible endpoint at `base_url` (e.g. `http://127.0.0.1:8000/v1`) for `model`.

    `dialect` is "chat", "responses" or "both"; every answer is bounded by `max_tokens` and every probe by
    `deadline` seconds; `probes`, when given, replaces the standard requests. The report's `exit_code` is 0
    (nothing failed), 1 (something failed) or 2 (could not be checked: see `unreachable`)."""
    todo = list(probes) if probes is not None else probes_for(dialect, model, max_tokens=max_tokens)
    report = Report(base_url, model, dialect)
    results: list[ProbeResult] = []
    fresh = httpx.Limits(max_keepalive_connections=0)  # a new connection for every probe
    with httpx.Client(follow_redirects=False, trust_env=False, limits=fresh) as client:
        for k, probe in enumerate(todo):
            try:
                result = run_probe(
                    client,
                    base_url,
                    probe,
                    api_key=api_key,
                    timeout=timeout,
                    deadline=deadline,
                    max_body_bytes=max_body_bytes,
                )
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
    if results and all(r.status is None and r.cut for r in results):
        # The checker stopped every probe itself before any response came: nothing was seen, so nothing passed
        # (grading what never came would pass "exactly one [DONE] in each of 0 streams").
        report.unreachable = (
            f"no probe got an HTTP response before the checker stopped reading ({results[0].cut}); "
            "give it more time (--deadline), or check that the server answers at all"
        )
        return report
    report.findings = grade(results, dialect=dialect)
    report.timings = timing_facts(results)
    return report
