"""The sans-IO core: bytes in, values out. No sockets, threads, clocks, asyncio, HTTP or plotting here.

sse (bytes -> events), errors (the one exception tree), endings (how a stream ended), fixtures + fuzz
(byte fixtures and the split harness), broken (a gallery of broken parsers), shapes (documented stream
shapes -> bytes), accumulate (events -> text, tool calls, usage, outcome), and the pure planners and
policies that the I/O layer executes.
"""
