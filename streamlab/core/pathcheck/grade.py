"""Grade a path from what its reads got: buffering, compression, headers, version, the end, idle gaps (sans-IO core).

`grade_path(reads)` turns the reads of one run (`PathReads`) into one `PathFinding` per check of `PATH_CHECKS`. Every
judgement is a comparison of timelines (`streamlab.core.pathcheck.timeline`), never a clock read here:

* buffering: with a direct route, the first event through the path against the first event read directly: held
  back by at least `HELD_MIN` seconds and by half the time the direct events took to come is a failure (the reader
  got the answer's first words after most of it had been written), less than that but over `HELD_MIN` a warning.
  Without one, the server's own pacing is read from the events themselves: `MANY` events or more that all arrived
  within `BURST` seconds of the last, after `HELD_MIN` seconds or more, is a whole answer delivered at once, and
  the detail says that a server which itself sends whole answers would look the same (give --direct to tell);
* compression: a Content-Encoding on the event stream fails when the events were also held back, and warns when
  they flowed anyway (each hop flushes the compressor here; one that does not holds the stream);
* the end: the path's stream must end as the direct one does (every event, [DONE], a clean end), the response
  must end within `END_LAG` seconds of [DONE], and a second request on the same connection must be answered;
* idle gaps: a stream that falls silent must come through whole (a cut names the silence before it: about the
  path's idle timeout); a stream kept alive by comments must stay open for the whole window the checker holds it,
  with its keep-alives reaching the reader.

A read the checker's own deadline stopped (`Ending.DEADLINE`) is never graded: its check is skipped and the report
says the path could not be checked.
"""

from __future__ import annotations

from dataclasses import replace

from streamlab.core.conformance.checks import Evidence, Status
from streamlab.core.decompress import codings_of
from streamlab.core.endings import Ending
from streamlab.core.pathcheck.checks import PATH_CHECK_IDS, PathFinding, PathRead, PathReads
from streamlab.core.pathcheck.timeline import Timeline, timeline_of
from streamlab.core.scan import quote

__all__ = ["grade_path", "HELD_MIN", "HELD_SHARE", "BURST", "MANY", "END_LAG", "PASSED_ON_HEADERS", "CONSUMED"]

HELD_MIN = 0.25
"""Seconds a first event may come later through the path than directly before it counts as held back."""
HELD_SHARE = 0.5
"""The share of the direct events' spread past which a held-back first event is a failure, not a warning."""
BURST = 0.05
"""Seconds within which events count as having arrived together."""
MANY = 5
"""Events enough that arriving all together is a sign of buffering rather than of a short answer."""
END_LAG = 1.0
"""Seconds after [DONE] by which the body must have ended."""

PASSED_ON_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
        "content-length",
        "date",
        "server",
        "via",
        "alt-svc",
        "content-encoding",
        "vary",
    }
)
"""Headers each hop may set for itself (hop-by-hop headers, framing, the date, the server's name, the
compression, which `path.compression` grades): never counted as dropped, changed or added."""

CONSUMED = {"x-accel-buffering": "nginx reads it and, by design, does not pass it on"}
"""Headers a proxy is meant to take for itself."""


def _f(check: str, status: Status, detail: str, evidence: Evidence | None = None) -> PathFinding:
    return PathFinding(check, status, detail, evidence)


def _event_evidence(read: PathRead, t: Timeline, index: int) -> Evidence | None:
    if not t.events:
        return None
    block, _ = t.events[index]
    offset, shown = quote(t.scan.body, block.start, block.end)
    return Evidence(read.name, block.number, offset, shown)


def _header_evidence(read: PathRead, name: str) -> Evidence:
    return Evidence(read.name, None, None, repr(f"{name}: {read.header(name)}"))


def _http(path: PathRead) -> PathFinding:
    if path.is_event_stream:
        return _f("path.http", Status.PASS, f"{path.status_line()}")
    offset, shown = quote(path.body, 0, len(path.body))
    evidence = Evidence(path.name, None, offset if path.body else None, shown if path.body else "")
    return _f("path.http", Status.FAIL, f"{path.status_line()} through the path", evidence)


def _version(reads: PathReads) -> PathFinding:
    path, direct = reads.path, reads.direct
    version = path.http_version or "unknown"
    also = (
        f" (direct: {direct.http_version})" if direct is not None and direct.http_version != path.http_version else ""
    )
    if version == "HTTP/1.0":
        return _f("path.version", Status.WARN, f"HTTP/1.0{also}: the body ends when the connection closes")
    if version == "HTTP/1.1":
        return _f("path.version", Status.PASS, f"HTTP/1.1{also}: at most 6 streams at once per host in a browser")
    return _f("path.version", Status.PASS, f"{version}{also}")


def _held_against_direct(path: PathRead, t: Timeline, d: Timeline) -> PathFinding:
    assert t.first_event is not None and d.first_event is not None
    held = t.first_event - d.first_event
    n = len(t.events)
    seen = (
        f"first event at {t.first_event:.2f} s through the path, {d.first_event:.2f} s direct; events spread over "
        f"{t.span:.2f} s (direct {d.span:.2f} s)"
    )
    if held >= max(HELD_MIN, HELD_SHARE * d.span):
        together = t.together_at_end(BURST)
        return _f(
            "path.buffering",
            Status.FAIL,
            f"the first event was held back {held:.2f} s: {seen}; {together} of {n} events arrived within "
            f"{BURST * 1000:.0f} ms of the last (headers at {t.headers or 0:.2f} s)",
            _event_evidence(path, t, 0),
        )
    if held >= HELD_MIN:
        return _f("path.buffering", Status.WARN, f"the first event came {held:.2f} s late: {seen}", None)
    return _f("path.buffering", Status.PASS, seen)


def _held_by_pacing(path: PathRead, t: Timeline) -> PathFinding:
    assert t.first_event is not None
    n = len(t.events)
    together = t.together_at_end(BURST)
    if n >= MANY and together == n and t.first_event >= HELD_MIN:
        return _f(
            "path.buffering",
            Status.FAIL,
            f"all {n} events arrived together at {t.first_event:.2f} s, within {BURST * 1000:.0f} ms of each other: "
            "the reader saw nothing until the whole answer was there (no --direct to compare with: a server that "
            "sends whole answers at once would look the same)",
            _event_evidence(path, t, 0),
        )
    return _f(
        "path.buffering",
        Status.PASS,
        f"{n} events over {t.span:.2f} s, the first at {t.first_event:.2f} s ({together} within "
        f"{BURST * 1000:.0f} ms of the last; no --direct: judged by the events' own pacing)",
    )


def _buffering(reads: PathReads, t: Timeline, d: Timeline | None) -> PathFinding:
    path = reads.path
    if not path.is_event_stream or not t.events:
        return _f("path.buffering", Status.SKIP, "no event came through the path")
    if d is not None and d.events:
        return _held_against_direct(path, t, d)
    return _held_by_pacing(path, t)


def _compression(reads: PathReads, buffering: PathFinding) -> PathFinding:
    path, direct = reads.path, reads.direct
    codings = codings_of(path.header("content-encoding"))
    if not path.is_event_stream:
        return _f("path.compression", Status.SKIP, "no event stream came through the path")
    if not codings:
        return _f("path.compression", Status.PASS, "no Content-Encoding: the event stream is sent as it is")
    named = ", ".join(codings)
    who = ""
    if direct is not None and direct.is_event_stream:
        who = " (sent by the server itself)" if direct.header("content-encoding") else " (added by the path)"
    evidence = _header_evidence(path, "content-encoding")
    if path.problem and "decode" in path.problem:
        return _f("path.compression", Status.WARN, f"{named} on the event stream{who}: {path.problem}", evidence)
    if buffering.status is Status.FAIL:
        return _f(
            "path.compression",
            Status.FAIL,
            f"{named} on the event stream{who}, and its events were held back: the compressor waited for a full "
            "buffer or the end",
            evidence,
        )
    return _f(
        "path.compression",
        Status.WARN,
        f"{named} on the event stream{who}: it flowed here (every hop flushes the compressor per event), but a "
        "hop that does not holds the whole answer back",
        evidence,
    )


def _header_map(read: PathRead) -> dict[str, str]:
    names = sorted({k.lower() for k, _ in read.headers} - PASSED_ON_HEADERS)
    return {n: read.header(n) or "" for n in names}


def _headers(reads: PathReads) -> PathFinding:
    path, direct = reads.path, reads.direct
    if direct is None:
        return _f("path.headers", Status.SKIP, "no --direct route to compare with")
    if not (path.is_event_stream and direct.is_event_stream):
        return _f("path.headers", Status.SKIP, "the path and the direct route did not both stream")
    p, d = _header_map(path), _header_map(direct)
    consumed = sorted(n for n in d if n not in p and n in CONSUMED)
    dropped = sorted(n for n in d if n not in p and n not in CONSUMED)
    changed = sorted(n for n in d if n in p and p[n] != d[n])
    added = sorted(n for n in p if n not in d)
    notes = [f"{n}: {CONSUMED[n]}" for n in consumed]
    if added:
        notes.append(f"added: {', '.join(added)}")
    note = f" ({'; '.join(notes)})" if notes else ""
    if dropped or changed:
        first = (dropped or changed)[0]
        what = [f"dropped {', '.join(dropped)}"] if dropped else []
        what += [f"changed {', '.join(changed)}"] if changed else []
        evidence = _header_evidence(direct, first)
        if first in changed:
            evidence = replace(evidence, quote=f"direct {evidence.quote}, path {_header_evidence(path, first).quote}")
        return _f("path.headers", Status.WARN, f"the path {' and '.join(what)}{note}", evidence)
    return _f("path.headers", Status.PASS, f"the {len(d)} headers the server sent arrived as sent{note}")


def _complete(reads: PathReads, t: Timeline, d: Timeline | None) -> PathFinding:
    path = reads.path
    if not path.is_event_stream:
        return _f("path.complete", Status.SKIP, "no event stream came through the path")
    if path.ending is Ending.DEADLINE:
        return _f("path.complete", Status.SKIP, f"the checker's own deadline stopped the read ({path.problem})")
    n, expected = len(t.events), (len(d.events) if d is not None else None)
    direct_done = d is not None and d.done is not None
    if path.ending is Ending.COMPLETE and (t.done is not None or not direct_done):
        if expected is not None and n < expected:
            return _f(
                "path.complete",
                Status.FAIL,
                f"{n} events through the path, {expected} direct: {expected - n} lost",
                _event_evidence(path, t, -1),
            )
        done = "and [DONE]" if t.done is not None else "(the server sends no [DONE]: the direct route neither)"
        return _f("path.complete", Status.PASS, f"{n} events {done}, then a clean end at {t.end or 0:.2f} s")
    silence = t.longest_silence(to_end=True)
    how = "broke off" if path.ending is Ending.BROKEN else f"ended ({path.ending.value}) without [DONE]"
    return _f(
        "path.complete",
        Status.FAIL,
        f"the stream {how} at {t.end or 0:.2f} s after {n} events, the longest silence before it {silence:.2f} s "
        f"({path.problem or 'no reason given'}): an idle timeout on the path about that long?",
        _event_evidence(path, t, -1),
    )


def _after_close(reads: PathReads, t: Timeline) -> PathFinding:
    path, again = reads.path, reads.again
    if path.ending is not Ending.COMPLETE or t.done is None or t.end is None:
        return _f("path.after_close", Status.SKIP, "the stream did not end cleanly after [DONE] (see path.complete)")
    lag = t.end - t.done
    if lag > END_LAG:
        return _f(
            "path.after_close",
            Status.WARN,
            f"the response ended {lag:.2f} s after [DONE]: the path held it open",
            _event_evidence(path, t, -1),
        )
    said = f"the response ended {lag * 1000:.0f} ms after [DONE]"
    if again is None:
        why = reads.not_run.get("again", "not made")
        return _f("path.after_close", Status.PASS, f"{said}; no second request ({why})")
    if again.ending is Ending.DEADLINE:
        return _f("path.after_close", Status.SKIP, f"{said}; the checker's deadline stopped the second request")
    if not again.is_event_stream:
        return _f(
            "path.after_close",
            Status.FAIL,
            f"{said}, but a second request after it failed: {again.status_line()}",
            Evidence(again.name, None, None, repr(again.problem or again.status_line())),
        )
    reuse = {
        False: "kept the connection alive: a second request on it streamed",
        True: "closed the connection: the second request opened a new one and streamed",
        None: "a second request streamed",
    }[again.new_connection]
    return _f("path.after_close", Status.PASS, f"{said}; the path {reuse}")


def _refused(read: PathRead) -> bool:
    """Whether the request was refused (a 4xx: the server does not play that model, say): the check cannot run."""
    return read.status is not None and 400 <= read.status < 500


def _idle_silent(reads: PathReads) -> PathFinding:
    read = reads.silent
    if read is None:
        return _f("path.idle_silent", Status.SKIP, f"could not be run: {reads.not_run.get('silent', 'not made')}")
    if read.ending is Ending.DEADLINE:
        return _f("path.idle_silent", Status.SKIP, f"the checker's own deadline stopped the read ({read.problem})")
    t = timeline_of(read)
    if _refused(read):
        return _f(
            "path.idle_silent",
            Status.SKIP,
            f"could not be run: {read.status_line()} for model {read.model!r}, a stream with a silent gap",
        )
    if read.is_event_stream and read.ending is Ending.COMPLETE and t.done is not None:
        return _f(
            "path.idle_silent",
            Status.PASS,
            f"a stream with a silence of {t.longest_silence():.2f} s (no byte, no keep-alive) came through whole",
        )
    silence = t.longest_silence(to_end=True)
    if not read.is_event_stream:
        return _f(
            "path.idle_silent",
            Status.FAIL,
            f"{read.status_line()} after {t.end or 0:.2f} s: the path gave up waiting for the server",
            Evidence(read.name, None, 0 if read.body else None, repr(read.body[:96]) if read.body else ""),
        )
    return _f(
        "path.idle_silent",
        Status.FAIL,
        f"the path cut the stream after {silence:.2f} s of silence (at {t.end or 0:.2f} s, {len(t.events)} events "
        f"in; {read.problem or read.ending.value}): its idle timeout is shorter than the server's pause",
        _event_evidence(read, t, -1),
    )


def _idle_keepalive(reads: PathReads) -> PathFinding:
    read, window = reads.keepalive, reads.window
    if read is None:
        return _f("path.idle_keepalive", Status.SKIP, f"could not be run: {reads.not_run.get('keepalive', 'not made')}")
    if read.ending is Ending.DEADLINE:
        return _f("path.idle_keepalive", Status.SKIP, f"the checker's own deadline stopped the read ({read.problem})")
    if _refused(read):
        return _f(
            "path.idle_keepalive",
            Status.SKIP,
            f"could not be run: {read.status_line()} for model {read.model!r}, a stream kept alive by comments "
            "(the stand-in's `stall` scenario; another server needs --keepalive-model)",
        )
    t = timeline_of(read)
    pings = len(t.keepalives)
    if read.ending is Ending.CANCELLED:
        if pings:
            return _f(
                "path.idle_keepalive",
                Status.PASS,
                f"open for the whole {window:.1f} s window the checker held it, {pings} keep-alive(s) reaching the "
                f"reader (the longest silence {t.longest_silence():.2f} s)",
            )
        got = "nothing, not even the headers" if read.status is None else f"{len(t.events)} event(s), no keep-alive"
        return _f(
            "path.idle_keepalive",
            Status.WARN,
            f"open for the whole {window:.1f} s window, but the reader got {got}: a hop holds the stream back, "
            "and a reader's own read timeout would fire",
            _event_evidence(read, t, -1),
        )
    if not read.is_event_stream:
        return _f(
            "path.idle_keepalive",
            Status.FAIL,
            f"{read.status_line()} after {t.end or 0:.2f} s for a stream kept alive by comments",
            Evidence(read.name, None, 0 if read.body else None, repr(read.body[:96]) if read.body else ""),
        )
    if read.ending is Ending.COMPLETE and t.done is not None:
        return _f("path.idle_keepalive", Status.SKIP, f"the stream ended on its own at {t.end or 0:.2f} s")
    last = t.keepalives[-1] if t.keepalives else None
    return _f(
        "path.idle_keepalive",
        Status.FAIL,
        f"the path cut a stream kept alive by comments at {t.end or 0:.2f} s ({pings} keep-alive(s) came, the last "
        f"at {last or 0:.2f} s; {read.problem or read.ending.value}): keep-alives did not save it",
        _event_evidence(read, t, -1),
    )


def grade_path(reads: PathReads) -> list[PathFinding]:
    """One finding per check of `PATH_CHECKS`, in order, from the reads of one run."""
    t = timeline_of(reads.path)
    d = timeline_of(reads.direct) if reads.direct is not None and reads.direct.is_event_stream else None
    buffering = _buffering(reads, t, d)
    found = {
        "path.http": _http(reads.path),
        "path.version": _version(reads),
        "path.buffering": buffering,
        "path.compression": _compression(reads, buffering),
        "path.headers": _headers(reads),
        "path.complete": _complete(reads, t, d),
        "path.after_close": _after_close(reads, t),
        "path.idle_silent": _idle_silent(reads),
        "path.idle_keepalive": _idle_keepalive(reads),
    }
    return [found[c] for c in PATH_CHECK_IDS]
