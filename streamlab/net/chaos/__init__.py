"""The chaos proxy: faults a real network makes, on purpose (I/O layer half; this map covers both).

`streamlab chaos` sits between a client and a server and does to the bytes what real networks do.

sans-IO core:
    streamlab.core.chaos   the fault plan: what happens to one direction of one TCP connection (delay,
                           slice, cut, reset, stall), decided from the bytes and a seed, never a clock

I/O layer (streamlab.net.chaos):
    proxy     the asyncio TCP proxy that carries the plan out, one task per direction
    book      its connection records, shared between the proxy's event loop and other threads

Command line: streamlab.tools.cli.chaos. Used by lab 07's bench, the relay checker and the gateway bench.
"""
