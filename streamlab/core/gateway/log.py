"""The gateway's per-stream log line: its documented fields and how they are filled (sans-IO core).

A gateway writes one JSON object per request, on one line, when the request is over. It is a relay summary
line (`streamlab.core.relay.stream.SUMMARY_FIELDS`: model, outcome, text characters, usage, TTFT, total),
so anything that reads the relay's summaries reads these too, plus what only a gateway knows: which
upstreams it tried and what each said, which one answered, the request id that lets you find the request
in that provider's own logs, and the token count. `LOG_FIELDS` documents every field once; `log_record`
builds the object from the relay's summary and the gateway's notes, in that field order.

Where the request id comes from: the upstream's `x-request-id` response header when it sent one (OpenAI
does), else the id of the answer's first event (a Chat chunk's `id`, `chatcmpl-...`; a Responses
`response.created` event's `response.id`), else null.

Metrics take the same facts but never a per-request value as a label: labels are the upstream, the
ending, the outcome, all small fixed sets (each label value makes a time series of its own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamlab.core.endings import Ending
from streamlab.core.gateway.breaker import Health
from streamlab.core.gateway.fallback import Move
from streamlab.core.relay.stream import SUMMARY_FIELDS, summary_line
from streamlab.core.safejson import json_or_none
from streamlab.core.sse import SSEEvent
from streamlab.core.words import Word

__all__ = ["LOG_FIELDS", "Attempt", "AttemptNote", "log_record", "request_id_of", "tokens_of", "log_line"]

LOG_FIELDS: dict[str, str] = {
    **SUMMARY_FIELDS,
    "request_id": "the upstream's x-request-id header, else the id of the answer's first event (Chat chunk id, "
    "Responses response id); null when neither came",
    "upstream": "name of the upstream whose answer the client got (the last one tried when none answered; "
    "null when every breaker refused)",
    "attempts": "how many upstreams the request was sent to (breaker refusals are not counted)",
    "tried": "one object per upstream considered, in order: upstream, result (ok, fault, neutral, refused), "
    "status, ending, move (what the gateway did next), detail",
    "failover": "true when the answer came from another upstream than the first one sent the request",
    "resumes": "how many times the stream was resumed on the same upstream after a cut",
    "ending": "how the client's stream ended (streamlab.core.endings.Ending)",
    "status": "the HTTP status the client got",
    "tokens": "output tokens from the upstream's usage (Chat completion_tokens, Responses output_tokens), "
    "null when it sent no usage",
}
"""Every field of a gateway log line, in order, and what it holds."""


class Attempt(Word):
    """What one upstream's turn came to, in the log line's `tried`: its breaker's verdict, or refused unsent."""

    OK = "ok"  # it answered properly
    FAULT = "fault"  # it failed in a way that counts against it
    NEUTRAL = "neutral"  # says nothing about the upstream (the client left, the request was wrong)
    REFUSED = "refused"  # its circuit breaker said no: nothing was sent

    @classmethod
    def of(cls, health: Health) -> Attempt:
        """The attempt's result when its upstream's breaker heard `health`."""
        return cls(health.value)


@dataclass(frozen=True)
class AttemptNote:
    """What happened with one upstream during one request (an entry of the log line's `tried`)."""

    upstream: str
    result: Attempt
    status: int | None = None
    ending: Ending | None = None
    move: Move | None = None  # None when nothing followed
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream,
            "result": self.result.value,
            "status": self.status,
            "ending": None if self.ending is None else self.ending.value,
            "move": None if self.move is None else self.move.value,
            "detail": self.detail,
        }


def request_id_of(headers: Mapping[str, str], first_event: SSEEvent | None) -> str | None:
    """The request id: `x-request-id` from the upstream's response headers, else the first event's id."""
    for key, value in headers.items():
        if key.lower() == "x-request-id" and value:
            return value
    if first_event is None:
        return None
    obj = json_or_none(first_event.data)
    if not isinstance(obj, dict):
        return None
    response = obj.get("response")
    if isinstance(response, dict) and isinstance(response.get("id"), str):
        return response["id"]
    return obj["id"] if isinstance(obj.get("id"), str) else None


def tokens_of(usage: Any) -> int | None:
    """Output tokens from a usage object (Chat `completion_tokens`, Responses `output_tokens`), else None."""
    if not isinstance(usage, dict):
        return None
    for key in ("completion_tokens", "output_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def log_record(
    summary: Mapping[str, Any],
    *,
    request_id: str | None,
    upstream: str | None,
    tried: Sequence[AttemptNote],
    resumes: int = 0,
    status: int | None = None,
) -> dict[str, Any]:
    """A gateway log line as a dict: `LOG_FIELDS` first, in order, then the rest of the relay's summary.

    `summary` is the relay summary of the stream the client got (`RelayedStream.summary()`), `tried` the
    notes on each upstream considered, `upstream` the one that answered, `status` the status the client got
    (default: the summary's)."""
    sent = [note for note in tried if note.result is not Attempt.REFUSED]
    first_sent = sent[0].upstream if sent else None
    record: dict[str, Any] = {key: summary.get(key) for key in SUMMARY_FIELDS}
    record.update(
        {
            "request_id": request_id,
            "upstream": upstream,
            "attempts": len(sent),
            "tried": [note.as_dict() for note in tried],
            "failover": upstream is not None and first_sent is not None and upstream != first_sent,
            "resumes": resumes,
            "ending": summary.get("ending"),
            "status": summary.get("status") if status is None else status,
            "tokens": tokens_of(summary.get("usage")),
        }
    )
    for key, value in summary.items():
        record.setdefault(key, value)
    return record


def log_line(record: Mapping[str, Any]) -> str:
    """A log record as one line of JSON (the relay's summary-line format)."""
    return summary_line(record)
