"""Two rules the relay and the gateway had copied apart, through both servers on real sockets.

* The end of the answer: after `[DONE]` (or a terminal Responses event) the client's body ends at once, even if
  the upstream keeps its connection open (the relay had waited for the upstream's end: 3.67 s for a 3 s stall,
  the gateway 0.12 s).
* Sequence numbers: a Responses keep-alive that repeats a number (as a resumed stream sends one again) neither
  stops the summary from following the content nor the gateway's resume cursor from advancing (the relay had
  appended a marked error to a complete answer; the gateway resumed after a stale cursor and sent an event twice).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator

import httpx
import pytest

from streamlab.core import shapes
from streamlab.core.sse import parse
from streamlab.core.standin.script import Cut, Episode, Send, Stall, StoredResponse
from streamlab.net.gateway.app import Gateway
from streamlab.net.relay.app import Relay
from streamlab.net.standin.server import StandIn

pytestmark = pytest.mark.net

CHAT = shapes.chat_text_stream(["Hel", "lo"], model="m")
STALL = 3.0  # the upstream keeps its connection open this long after its last event
R_FRAMES = shapes.responses_text_stream(["one ", "two ", "three ", "four"], response_id="resp_ka")
AGAIN = shapes.sse_frame(json.dumps({"type": "keepalive", "sequence_number": 3}), event="keepalive")
WITH_REPEAT = R_FRAMES[:6] + [AGAIN] + R_FRAMES[6:]  # after delta "two" (5): a keep-alive numbered 3 again


def script() -> dict:
    return {
        "stall-after-done": Episode([Send(f) for f in CHAT] + [Stall(STALL)]),
        "repeat": Episode([Send(f) for f in WITH_REPEAT]),
        "bg-repeat": Episode(
            [Send(f) for f in WITH_REPEAT[:8]] + [Cut()],  # ... delta "three" (6), then a cut
            store_as="resp_ka",
            stored=StoredResponse.from_frames(R_FRAMES),
        ),
    }


@contextlib.contextmanager
def served(kind: str, upstream: str) -> Iterator[Relay | Gateway]:
    server = Relay(upstream, read_timeout=10) if kind == "relay" else Gateway([upstream], read_timeout=10)
    with server:
        yield server


def records(server: Relay | Gateway, count: int) -> list[dict]:
    if isinstance(server, Relay):
        assert server.wait_for_summaries(count)
        return server.summaries
    assert server.wait_for_logs(count)
    return server.logs


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_the_answer_reaches_the_client_promptly_when_the_upstream_stalls_after_done(kind, no_leaked_threads):
    with (
        StandIn(script(), usage="scripted") as upstream,
        served(kind, upstream.base_url) as server,
        httpx.Client(timeout=30) as client,
    ):
        ask = {"model": "stall-after-done", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        t0 = time.perf_counter()
        reply = client.post(server.base_url + "/chat/completions", json=ask)
        elapsed = time.perf_counter() - t0
        (summary,) = records(server, 1)
    events, truncated = parse(reply.content)
    assert reply.status_code == 200 and not truncated and events[-1].data == "[DONE]"
    assert elapsed < STALL * 2 / 3, f"the body ended {elapsed:.2f} s after the request: it waited for the stall"
    assert summary["outcome"] == "complete" and summary["marked"] is False


@pytest.mark.parametrize("kind", ["relay", "gateway"])
def test_a_keepalive_that_repeats_a_number_leaves_the_summary_following_the_content(kind, no_leaked_threads):
    with (
        StandIn(script(), usage="scripted") as upstream,
        served(kind, upstream.base_url) as server,
        httpx.Client(timeout=30) as client,
    ):
        reply = client.post(server.base_url + "/responses", json={"model": "repeat", "input": "x", "stream": True})
        (summary,) = records(server, 1)
    assert reply.content == b"".join(WITH_REPEAT)  # forwarded as it came, nothing added
    assert (summary["outcome"], summary["text_chars"], summary["problem"]) == ("complete", 18, "")


def test_a_keepalive_that_repeats_a_number_leaves_the_gateways_resume_cursor_advancing(no_leaked_threads):
    with (
        StandIn(script(), usage="scripted") as upstream,
        Gateway([upstream.base_url], read_timeout=10) as gateway,
        httpx.Client(timeout=30) as client,
    ):
        ask = {"model": "bg-repeat", "input": "x", "stream": True, "background": True}
        reply = client.post(gateway.base_url + "/responses", json=ask)
        assert gateway.wait_for_logs(1)
        (log,) = gateway.logs
        resumed = [r.path for r in upstream.records() if r.method == "GET"]
    events, _ = parse(reply.content)
    deltas = [json.loads(e.data)["delta"] for e in events if e.event == "response.output_text.delta"]
    assert deltas == ["one ", "two ", "three ", "four"]  # "three " once: resumed after it, not before
    assert (
        resumed == ["/v1/responses/resp_ka?stream=true&starting_after=6"]
        and log["resumes"] == 1
        and log["outcome"] == "complete"
    )


def test_data_nested_past_the_recursion_limit_is_no_marker_no_error_and_no_id():
    """The JSON guard: every reader of event data in the relay's and the gateway's rooms reads it guarded."""
    from streamlab.core.gateway.log import request_id_of
    from streamlab.core.relay.exchange import response_id_of
    from streamlab.core.relay.grade import is_marker
    from streamlab.core.relay.stream import raises_in_sdk
    from streamlab.core.sse import SSEEvent

    deep = SSEEvent(data='{"error": ' + "[" * 5000 + "]" * 5000 + ', "type": "error"}')
    assert not is_marker(deep)  # it had raised RecursionError out of the relay checker
    assert not raises_in_sdk(deep) and request_id_of({}, deep) is None and response_id_of(deep) is None
