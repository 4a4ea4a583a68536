"""The gateway: one client, several upstreams (the I/O layer half).

The tool's map across both layers is the docstring of `streamlab.core.gateway` (one copy, so it cannot
drift). The modules of this half:

I/O layer (streamlab.net.gateway):
    app        the gateway's configuration and state (`GatewayConfig`, `GatewayState`), its Starlette app,
               `Gateway` and `serve_gateway()`
    exchange   one request through the gateway: the exchange machine (streamlab.core.relay.exchange) with
               several upstreams and a hold, wired to `GatewayState` through callables, carried out by the
               relay's executor (streamlab.net.relay.wire)
    metrics    the Prometheus text format on a registry of its own (prometheus-client)
    bench      two scripted upstreams, a chaos proxy and a gateway, for breaking it on purpose
"""
