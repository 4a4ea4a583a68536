"""The relay: one stream forwarded from an upstream to a client (sans-IO core half; this map covers both).

Lab 07's capstone: a relay in front of a model API that forwards bytes as they arrive, summarises each
stream, closes the upstream when the client leaves, keeps idle connections alive and marks a death.

sans-IO core (streamlab.core.relay):
    stream     the five rules (`REQUIREMENTS`), the summary fields, the marked final event, and
               `RelayedStream`: the pure half of relaying one stream (bytes in, what to send out)
    pacing     `Pacing`: when the next keep-alive is due and when the upstream has been silent too long
    exchange   `Exchange`: one request through one or more upstreams, decided without a socket (events in,
               actions out): the relayed stream, pacing, the first-event hold, fallback, resume, the end
    grade      the relay checker's verdicts on what a relay delivered, its report, the seeded fuzz plan

I/O layer (streamlab.net.relay):
    upstream   the one upstream engine under the relay and the gateway: `UpstreamReader` (chunks, the end
               as an `Ending`, the client gone, the server stopping, idle), the httpx-error-to-`Ending`
               mapping, the headers both forward
    app        the reference relay: a Starlette app (`build_app`), `Relay` and `serve_relay()`
    wire       the one executor of the exchange machine, for the relay and the gateway: `ExchangeWire` (the
               ASGI response of every proxied request) and the `Hooks` each server passes in
    serving    any ASGI app under uvicorn on a thread (`AppServer`), and `ServedApp`, the base the relay
               and the gateway share (start, stop running streams, keep records in order)

Whether a response is an event stream is `streamlab.core.sse.is_event_stream`, for every reader; every
`serve_x()` / `stop_x()` pair holds its server in a `streamlab.net.slot.Slot`.

The relay checker is a room of its own (streamlab.net.relaycheck); the gateway grows this relay to several
upstreams (streamlab.core.gateway, streamlab.net.gateway.app). Command line: streamlab.tools.cli.relay.
"""
