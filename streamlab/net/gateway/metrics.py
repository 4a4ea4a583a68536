"""The gateway's metrics in the Prometheus text format, on a registry of its own (I/O layer: prometheus-client).

Every `Gateway` owns one `CollectorRegistry`, never the process-wide default one: two gateways in one process
(a test, a notebook re-run) keep separate counts, and importing streamlab registers nothing globally. The
families, with their labels (all small fixed sets; a per-request value never becomes a label):

    streamlab_gateway_ttft_seconds         histogram  upstream          request -> first token sent to the client
    streamlab_gateway_stream_seconds       histogram  upstream          request -> end of the client's stream
    streamlab_gateway_endings_total        counter    upstream, ending, outcome   one per request, how it ended
    streamlab_gateway_attempts_total       counter    upstream, result  one per upstream considered (ok, fault,
                                                                        neutral, refused by its breaker)
    streamlab_gateway_output_tokens_total  counter    upstream          output tokens from the upstreams' usage
    streamlab_gateway_breaker_state        gauge      upstream          0 closed, 1 half-open, 2 open

A request that no upstream answered (every breaker open) is counted under `upstream="none"`. Histograms
let a dashboard compute any percentile across many gateway instances (`histogram_quantile` over the summed
buckets); a summary's precomputed quantiles could not be combined.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = ["GatewayMetrics", "CONTENT_TYPE", "TIME_BUCKETS", "NO_UPSTREAM", "FAMILIES"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The Content-Type of the /metrics page (the Prometheus text format)."""

TIME_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Histogram bucket bounds in seconds: from a local stand-in's milliseconds to a long reasoning answer."""

NO_UPSTREAM = "none"
"""The upstream label of a request no upstream answered."""

FAMILIES = (
    "streamlab_gateway_ttft_seconds",
    "streamlab_gateway_stream_seconds",
    "streamlab_gateway_endings",
    "streamlab_gateway_attempts",
    "streamlab_gateway_output_tokens",
    "streamlab_gateway_breaker_state",
)
"""The metric family names, as `prometheus_client.parser.text_string_to_metric_families` reports them
(counters without their `_total` suffix)."""


class GatewayMetrics:
    """The metric families of one gateway. `breaker_code(name)` is called at every scrape for each upstream's
    breaker gauge (so the page shows the state at that moment)."""

    def __init__(self, upstreams: Sequence[str], breaker_code: Callable[[str], int]) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self.ttft = Histogram(
            "streamlab_gateway_ttft_seconds",
            "Seconds from the request to the first token sent to the client",
            ["upstream"],
            buckets=TIME_BUCKETS,
            registry=reg,
        )
        self.total = Histogram(
            "streamlab_gateway_stream_seconds",
            "Seconds from the request to the end of the client's stream",
            ["upstream"],
            buckets=TIME_BUCKETS,
            registry=reg,
        )
        self.endings = Counter(
            "streamlab_gateway_endings",
            "Requests by how they ended, per upstream",
            ["upstream", "ending", "outcome"],
            registry=reg,
        )
        self.attempts = Counter(
            "streamlab_gateway_attempts",
            "Upstreams considered for a request, by result (ok, fault, neutral, refused)",
            ["upstream", "result"],
            registry=reg,
        )
        self.tokens = Counter(
            "streamlab_gateway_output_tokens",
            "Output tokens reported in the upstreams' usage",
            ["upstream"],
            registry=reg,
        )
        self.breaker = Gauge(
            "streamlab_gateway_breaker_state",
            "Circuit breaker state: 0 closed, 1 half-open, 2 open",
            ["upstream"],
            registry=reg,
        )
        for name in upstreams:
            self.breaker.labels(name).set_function(functools.partial(breaker_code, name))

    def observe(self, record: Mapping[str, Any]) -> None:
        """Count one finished request from its log record (`streamlab.core.gateway.log.log_record`)."""
        upstream = record.get("upstream") or NO_UPSTREAM
        for note in record.get("tried") or ():
            self.attempts.labels(note["upstream"], note["result"]).inc()
        self.endings.labels(upstream, str(record.get("ending")), str(record.get("outcome"))).inc()
        if record.get("ttft_s") is not None:
            self.ttft.labels(upstream).observe(record["ttft_s"])
        if record.get("total_s") is not None:
            self.total.labels(upstream).observe(record["total_s"])
        if record.get("tokens"):
            self.tokens.labels(upstream).inc(record["tokens"])

    def text(self) -> bytes:
        """The metrics page, in the Prometheus text format."""
        return generate_latest(self.registry)
