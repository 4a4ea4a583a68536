"""The peer adapters drive the real libraries over a real httpx.Response, and are judged fairly.

Nothing here hard-codes what a library gets right or wrong: expectations come from the fixtures (written
from the standard) and from streamlab's parser on the same bytes.
"""

from __future__ import annotations

import httpx
import pytest

from streamlab.core.harness.fixtures import load_fixtures
from streamlab.core.harness.fuzz import check, run_harness, streamlab_contender
from streamlab.core.sse import parse
from streamlab.net.harness.peers import (
    httpx_sse_contender,
    openai_contender,
    peers,
    response_from_chunks,
    sseclient_contender,
)

FIXTURES = {f.name: f for f in load_fixtures()}


@pytest.fixture(scope="module")
def harness():
    return run_harness([streamlab_contender(), *peers()], list(FIXTURES.values()), random_runs=20)


def test_response_from_chunks_is_a_real_streaming_response() -> None:
    chunks = [b"data: a\r", b"", b"\ndata: \xc3", b"\xa9\n\n"]
    response = response_from_chunks(chunks)
    assert isinstance(response, httpx.Response) and response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert list(response.iter_bytes()) == [c for c in chunks if c]  # httpx drops the empty chunk
    with pytest.raises(httpx.StreamConsumed):
        list(response.iter_bytes())


def test_peer_names_and_exposed_fields() -> None:
    assert [p.name for p in peers()] == ["openai", "httpx-sse", "sseclient-py"]
    assert "truncated" not in set().union(*(p.exposes for p in peers()))
    assert sseclient_contender().exposes == frozenset({"events"})
    for p in peers():
        assert p.description.startswith(p.name + " ")  # name, installed version, how it is driven


@pytest.mark.parametrize("name", ["spec-three-messages", "chat-completions-lf", "responses-typed-events"])
def test_peers_agree_with_streamlab_on_plain_streams(name: str) -> None:
    fixture = FIXTURES[name]
    events, _ = parse(fixture.raw)
    cuts_list = [(), (1,), (len(fixture.raw) // 2,), tuple(range(1, len(fixture.raw), 7))]
    for peer in peers():
        for cuts in cuts_list:
            trial = check(peer, fixture, cuts)
            assert trial.ok, (peer.name, cuts, trial.problem)
            assert trial.got is not None and list(trial.got.events) == events


def test_only_exposed_fields_are_compared() -> None:
    fixture = FIXTURES["retry-valid"]  # one event plus retry: 3000
    trial = check(sseclient_contender(), fixture, ())
    assert trial.ok and trial.got is not None and trial.got.retry_ms is None  # not reported, not judged
    for peer in (openai_contender(), httpx_sse_contender()):
        trial = check(peer, fixture, ())
        assert trial.ok and trial.got is not None and trial.got.retry_ms == 3000


def test_results_are_computed_and_classified(harness) -> None:
    for peer in ("openai", "httpx-sse", "sseclient-py"):
        failing = harness.failing_fixtures(peer)
        chunking = harness.whole_ok_split_wrong(peer)
        assert set(chunking) <= set(failing)
        for name in failing:  # every failure is either a gap (wrong whole) or a chunking bug, never both
            whole = harness.cell(peer, name, "whole")
            assert (whole.passed < whole.total) != (name in chunking)
        for name in failing:  # and the reported problem is real: re-running the first failure reproduces it
            trial = harness.first_failure(peer, name)
            assert trial is not None
            again = check(next(p for p in peers() if p.name == peer), FIXTURES[name], trial.cuts, trial.strategy)
            assert not again.ok and again.problem == trial.problem


def test_a_peer_that_raises_has_failed_that_run() -> None:
    fixture = FIXTURES["invalid-utf8"]
    for peer in peers():
        trial = check(peer, fixture, ())
        if trial.got is None:  # a library that raises on invalid UTF-8 is marked wrong, with the error named
            assert trial.problem.startswith("raised ") and not trial.ok
