"""Fallback across upstreams: which one to try next, and whether a failed stream may move at all (sans-IO core).

Theory of operation
-------------------
A gateway with several upstreams in order of preference tries the first one whose breaker allows it
(`streamlab.core.gateway.breaker`). When that attempt fails, `decide` says what happens next, and the answer turns on
one fact: **has any event of this answer reached the client?**

* **Not yet.** Nothing was shown, so sending the same request elsewhere costs only time, exactly like a retry
  before the first event (lab 05). The gateway *fails over* to the next upstream, provided the failure is
  one another upstream could fix (`worth_another`: no connection, a timeout, a stream that broke or stalled,
  408/409/429/5xx, an error object as the very first event). A failure that is the request's own fault
  (400, 401, 404, 422...) is passed to the client as it came: every upstream would refuse it the same way.
  When no upstream is left, the last failure is passed on.
* **Yes.** The client holds part of an answer. Another upstream would produce a *different* answer (sampling
  differs from request to request, even on one model); appending it would splice two answers into one
  text that repeats or contradicts itself. So the gateway never fails over after the first event. If the
  same upstream can continue the *same* response from a cursor (a Responses background stream, resumed
  with `starting_after`), and the cut fell between events, it *resumes*. Otherwise it ends the stream with
  the relay's *marked final event* (`streamlab.core.relay.stream.marker_frame`), on which the official SDK
  raises, so the client knows the answer is unfinished and may restart it visibly.

"Before the first event" is made exact by how the gateway forwards: it holds an answer's bytes until its
first event is complete, then sends them and forwards the rest as it arrives. Until then the client has
received no byte of that answer (a keep-alive comment of the gateway's own at most), so `events_sent == 0`
means nothing at all of it was shown. A partial first event held back and thrown away costs nothing: the
client could not have dispatched it anyway.

`decide(situation)` is pure and total; `Move` names the four outcomes; `remaining(order, tried)` lists the
upstreams still to try. The exchange machine (`streamlab.core.relay.exchange`) asks it before and after the
commit; `streamlab.net.relay.wire` carries the moves out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from streamlab.core.endings import TRANSPORT_FAILURES, Ending
from streamlab.core.retry import is_retryable_status
from streamlab.core.words import Word

__all__ = ["Move", "Situation", "Verdict", "worth_another", "decide", "remaining", "MOVES"]


class Move(Word):
    """What the gateway does after a failed attempt."""

    FAIL_OVER = "fail_over"  # send the request to the next upstream: nothing of this answer was shown
    PASS_ERROR = "pass_error"  # give the client this failure (its status as is; 502/504 when there was none)
    RESUME = "resume"  # reconnect to the same upstream and continue the same response after its cursor
    MARKED_END = "marked_end"  # end the stream with the marked final event (the client's SDK raises on it)


MOVES = tuple(m.value for m in Move)
"""The moves' names, as the lab's exercise spells them."""


@dataclass(frozen=True)
class Situation:
    """One failed attempt, as the fallback rule sees it.

    `events_sent`: events of this answer already sent to the client (0: none, so no byte of it either).
    `ending`: how the attempt ended (`HTTP_ERROR` with `status`; `COMPLETE` with `in_stream_error` when the
    body ended cleanly after an error object). `upstreams_left`: upstreams not tried yet for this request.
    `resumable`: the same upstream can continue this very response from a cursor. `at_event_boundary`: the
    cut fell between two events (the client holds no half event).
    """

    events_sent: int
    ending: Ending | str
    status: int | None = None
    in_stream_error: bool = False
    upstreams_left: int = 0
    resumable: bool = False
    at_event_boundary: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "ending", Ending(self.ending))
        if self.events_sent < 0 or self.upstreams_left < 0:
            raise ValueError(
                f"events_sent and upstreams_left must be >= 0, got {self.events_sent}, {self.upstreams_left}"
            )
        if self.ending is Ending.HTTP_ERROR and self.status is None:
            raise ValueError("a Situation ending in http_error needs its status")


@dataclass(frozen=True)
class Verdict:
    """A decision: the move, and the reason in a few words (for logs and the lab)."""

    move: Move
    reason: str

    def __str__(self) -> str:
        return f"{self.move}: {self.reason}"


def worth_another(ending: Ending | str, *, status: int | None = None, in_stream_error: bool = False) -> bool:
    """Could another upstream do better than this failure? True for transport failures (no connection, a
    break, a stall, a clean end before the terminal marker), for 408/409/429/5xx, and for an error object
    inside the stream; False for the request's own faults (other 4xx), a cancel and a departed client."""
    ending = Ending(ending)
    if ending is Ending.HTTP_ERROR:
        return status is not None and is_retryable_status(status)
    if ending is Ending.COMPLETE:
        return True  # it ended cleanly yet failed: an error object, or no terminal marker
    return in_stream_error or ending is Ending.CONNECT_ERROR or ending in TRANSPORT_FAILURES


def decide(situation: Situation) -> Verdict:
    """The fallback rule (module docstring): fail over only before the first event; after it, resume where
    the same upstream can continue the same response, else end with the marked final event."""
    s = situation
    ending = Ending(s.ending)
    if s.events_sent == 0:
        if not worth_another(ending, status=s.status, in_stream_error=s.in_stream_error):
            what = f"HTTP {s.status}" if ending is Ending.HTTP_ERROR else str(ending)
            return Verdict(Move.PASS_ERROR, f"{what} is the request's own fault: every upstream would say the same")
        if s.upstreams_left == 0:
            return Verdict(Move.PASS_ERROR, "no upstream left to try: the last failure goes to the client")
        return Verdict(Move.FAIL_OVER, "nothing of this answer reached the client: another upstream may answer")
    broke = not s.in_stream_error and (ending in TRANSPORT_FAILURES or ending is Ending.COMPLETE)
    if s.resumable and s.at_event_boundary and broke:
        return Verdict(Move.RESUME, f"{s.events_sent} event(s) sent: continue the same response after its cursor")
    if s.resumable and not s.at_event_boundary:
        why = "the cut fell inside an event the client already holds part of"
    elif s.resumable:
        why = "the upstream reported an error; continuing would not change it"
    else:
        why = "another answer would be spliced onto this one"
    return Verdict(Move.MARKED_END, f"{s.events_sent} event(s) already sent and {why}")


def remaining(order: Sequence[str], tried: Collection[str]) -> list[str]:
    """The upstreams still to try, in order of preference (each upstream is tried at most once per request)."""
    if len(set(order)) != len(order):
        raise ValueError(f"upstream names must be unique, got {list(order)}")
    return [name for name in order if name not in tried]
