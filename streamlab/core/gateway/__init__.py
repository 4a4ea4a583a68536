"""The gateway: one client, several upstreams (sans-IO core half; this map covers both).

`streamlab relay --upstream A --upstream B` (lab 10): the reference relay grown to several upstreams.

sans-IO core (streamlab.core.gateway):
    breaker    a circuit breaker per upstream: closed, open, half-open, driven by endings and a clock passed in
    fallback   which upstream next, and whether a failed stream may move at all (before its first event only);
               asked by the exchange machine (streamlab.core.relay.exchange), which decides each request
    log        the per-request log line: its documented fields and how they are filled

I/O layer (streamlab.net.gateway):
    app        the gateway's configuration and state (`GatewayConfig`, `GatewayState`), its Starlette app,
               `Gateway` and `serve_gateway()`
    exchange   one request through the gateway: the exchange machine (streamlab.core.relay.exchange) with
               several upstreams and a hold, wired to `GatewayState` through callables, carried out by the
               relay's executor (streamlab.net.relay.wire)
    metrics    the Prometheus text format on a registry of its own (prometheus-client)
    bench      two scripted upstreams, a chaos proxy and a gateway, for breaking it on purpose

Command line: streamlab.tools.cli.relay.
"""
