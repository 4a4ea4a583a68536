"""The reading state of one event stream (streamlab.core.reading), fed (chunk, time) pairs: no socket, no clock."""

from __future__ import annotations

import tracemalloc

import pytest

from streamlab.core.endings import Ending
from streamlab.core.errors import (
    ENDING_ERRORS,
    DeadlineExceeded,
    EventTooLarge,
    IdleTimeout,
    IncompleteEvent,
    SSELimitError,
    StreamlabError,
)
from streamlab.core.reading import Reading
from streamlab.core.sse import SSEParser

FRAME = b'id: 7\nretry: 1500\ndata: {"i": 1}\n\n'


def reading(**options) -> Reading:
    r = Reading(parser=options.pop("parser", SSEParser()), **options)
    r.started_at = 100.0
    return r


def test_a_clean_stream_is_counted_stamped_and_complete() -> None:
    r = reading()
    first = r.take(FRAME + FRAME[:5], now=100.5)
    second = r.take(FRAME[5:] + b": ping\n\n", now=101.0)
    r.finish_clean(now=101.0)
    assert [t.elapsed for t in first + second] == [0.5, 1.0]
    assert r.end_reason is Ending.COMPLETE and r.error is None and not r.mid_event
    assert (r.events_received, r.bytes_received, r.chunks_received) == (2, 2 * len(FRAME) + 8, 2)
    assert (r.first_event_at, r.last_event_at, r.first_byte_at, r.last_byte_at) == (100.5, 101.0, 100.5, 101.0)
    assert r.raw == FRAME * 2 + b": ping\n\n" and r.events == first + second
    assert r.last_event_id == "7" and r.retry_ms == 1500


def test_keep_none_keeps_only_the_running_state_and_says_so() -> None:
    r = reading(keep="none")
    got = r.take(FRAME * 3, now=100.2)
    r.finish_clean(now=100.2)
    assert len(got) == 3 and r.events_received == 3 and r.bytes_received == 3 * len(FRAME)
    assert r.last_event_id == "7" and r.retry_ms == 1500 and r.first_event_at == r.last_event_at == 100.2
    for what in ("raw", "events", "chunks"):
        with pytest.raises(RuntimeError, match=rf'stream\.{what} is not kept: .*keep="none".*3 event\(s\)'):
            getattr(r, what)


def test_keep_must_be_all_or_none() -> None:
    with pytest.raises(ValueError, match='keep must be "all" or "none"'):
        Reading(parser=SSEParser(), keep="some")  # type: ignore[arg-type]


def test_a_limit_mid_stream_is_an_ending_with_its_error_and_cause() -> None:
    r = reading(parser=SSEParser(max_line_bytes=100))
    got = r.take(FRAME + b"data: " + b"x" * 200 + b"\n\n", now=100.3)
    assert len(got) == 1  # the event completed before the oversized line is still handed out
    err = r.pending
    assert isinstance(err, EventTooLarge) and isinstance(err, StreamlabError)
    assert r.end_reason is Ending.LIMIT_EXCEEDED is err.ending and r.error is err and r.mid_event
    assert isinstance(err.__cause__, SSELimitError) and err.limit_error is err.__cause__
    assert err.limit_error.limit == "max_line_bytes" and err.events_received == 1
    assert "max_line_bytes=100" in str(err) and "after 1 event(s)" in str(err)


def test_a_clean_end_inside_an_event_raises_incomplete_event() -> None:
    r = reading()
    r.take(FRAME + b"data: half", now=100.1)
    with pytest.raises(IncompleteEvent) as info:
        r.finish_clean(now=100.2)
    assert r.end_reason is Ending.INCOMPLETE_EVENT and r.mid_event and info.value.events_received == 1


def test_idle_timeout_is_decided_from_the_times_given() -> None:
    r = reading(idle_timeout=0.5, is_content=lambda ev: ev.data != "ping")
    r.headers_at = 100.0
    r.take(b"data: ping\n\n", now=100.4)
    assert r.pending is None  # 0.4 s without content: still within the bound
    r.take(b"data: ping\n\n", now=100.6)
    assert isinstance(r.pending, IdleTimeout) and r.end_reason is Ending.IDLE_TIMEOUT


def test_the_deadline_is_decided_from_the_times_given() -> None:
    r = reading(deadline=1.0)
    r.take(FRAME + b"data: half", now=100.5)
    assert not r.deadline_passed(100.99) and r.deadline_passed(101.0)
    err = r.deadline_error(101.0)
    assert isinstance(err, DeadlineExceeded) and r.end_reason is Ending.DEADLINE and err.mid_event


def test_cancel_ends_quietly_and_only_once() -> None:
    r = reading()
    r.take(FRAME, now=100.1)
    r.cancel()
    assert r.end_reason is Ending.CANCELLED and r.take(FRAME, now=100.2) == [] and r.events_received == 1
    done = reading()
    done.finish_clean(now=100.0)
    done.cancel()
    assert done.end_reason is Ending.COMPLETE


def test_every_abnormal_ending_has_one_error_class() -> None:
    for ending, cls in ENDING_ERRORS.items():
        assert cls.ending is ending
    assert Ending.COMPLETE not in ENDING_ERRORS and Ending.CANCELLED not in ENDING_ERRORS


def _peak(n_events: int, keep: str) -> int:
    """Peak traced memory while reading `n_events` events in 64 KiB chunks, the caller dropping each event."""
    block = b'data: {"i": 123456}\n\n' * 1000  # built before tracing starts: the "network" owns it
    chunks = [memoryview(block)[i : i + 65536] for i in range(0, len(block), 65536)]
    tracemalloc.start()
    try:
        r = reading(keep=keep)
        for _ in range(n_events // 1000):
            for chunk in chunks:
                for _event in r.take(bytes(chunk), now=100.0):
                    pass
        r.finish_clean(now=100.0)
        assert r.events_received == n_events
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_keep_none_reads_any_length_in_constant_memory() -> None:
    """10x the events, the same peak (tracemalloc costs ~15 us an allocation here, hence 2k and 20k events;
    benchmarks/bench_client_memory.py measures 200k through the whole client)."""
    short, long = _peak(2_000, "none"), _peak(20_000, "none")
    assert abs(long - short) < 64 * 1024, (short, long)
    kept = _peak(20_000, "all")
    assert kept - long > 20_000 * 21, (kept, long)  # the control: keeping everything grows with the stream
