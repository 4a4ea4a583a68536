"""The relay: one stream forwarded from an upstream to a client (the I/O layer half).

The tool's map across both layers is the docstring of `streamlab.core.relay` (one copy, so it cannot
drift). The modules of this half:

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
"""
