"""The sans-IO core layer: bytes in, values out; no sockets, threads, clocks, event loops, HTTP or plotting.

What lives here: the SSE parser, the one exception tree (errors), how a stream ended (endings), the byte
fixtures and the split harness, the broken-parser gallery, stream shapes, the accumulators, and the pure
planners and policies that the I/O layer executes (deciding here, doing in `streamlab.net`).

The rule, checked by tests/project/test_layers.py on every import (function bodies included): modules here import
other core modules and an allow-list of pure standard-library modules, nothing else. That is what makes the
core fuzzable, fast to test and reusable by every runner above it.
"""
