"""When a relayed stream needs a keep-alive, and when its upstream has been silent too long (sans-IO core).

Every forwarding loop (the reference relay, the gateway before and after its first event) asks the same two
questions while it waits for the upstream: how long may I wait before I must act, and, when that time has
come, what must I do? The arithmetic used to be copied into each loop; `Pacing` holds it once, with the
clock passed in, so it is tested without sleeping.

    pacing = Pacing(keepalive=15.0, read_timeout=60.0, now=t0)
    wait = pacing.wait(now)            # seconds until the next decision is due
    pacing.upstream(now)               # bytes came (and went out): both clocks restart
    pacing.due(now)                    # Due.NOTHING, Due.KEEPALIVE or Due.READ_TIMEOUT

A keep-alive resets the downstream clock even when `RelayedStream.keepalive` decides one is not safe yet
(mid-line), so the next attempt comes one interval later rather than in a busy loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamlab.core.words import Word

__all__ = ["Due", "Pacing"]


class Due(Word):
    """What a forwarding loop must do once `Pacing.wait` has passed."""

    NOTHING = "nothing"  # woken early (or too early to act): wait again
    KEEPALIVE = "keepalive"  # `keepalive` seconds with nothing sent downstream
    READ_TIMEOUT = "read_timeout"  # `read_timeout` seconds without a byte from the upstream


@dataclass
class Pacing:
    """The two clocks of one relayed stream: the last byte from the upstream and the last write downstream.

    `keepalive` is None for a relay that never sends keep-alives; `read_timeout` must be positive.
    """

    keepalive: float | None
    read_timeout: float
    now: float
    last_up: float = 0.0
    last_down: float = 0.0

    def __post_init__(self) -> None:
        if self.read_timeout <= 0:
            raise ValueError(f"read_timeout must be a positive number of seconds, got {self.read_timeout!r}")
        if self.keepalive is not None and self.keepalive <= 0:
            raise ValueError(f"keepalive must be a positive number of seconds or None, got {self.keepalive!r}")
        self.last_up = self.last_down = self.now

    def wait(self, now: float) -> float:
        """Seconds from `now` until a decision is due (never negative)."""
        due = self.last_up + self.read_timeout
        if self.keepalive is not None:
            due = min(due, self.last_down + self.keepalive)
        return max(due - now, 0.0)

    def upstream(self, now: float) -> None:
        """Bytes arrived from the upstream and were passed on: both clocks start again."""
        self.last_up = self.last_down = now

    def restart_upstream(self, now: float) -> None:
        """A new upstream response took over (a resumed stream): its silence is counted from `now`."""
        self.last_up = now

    def due(self, now: float) -> Due:
        """What to do at `now`. A keep-alive that is due restarts the downstream clock at once."""
        if now - self.last_up >= self.read_timeout:
            return Due.READ_TIMEOUT
        if self.keepalive is not None and now - self.last_down >= self.keepalive:
            self.last_down = now
            return Due.KEEPALIVE
        return Due.NOTHING
