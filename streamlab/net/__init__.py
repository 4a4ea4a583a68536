"""The I/O layer: everything that opens a socket, starts a thread, runs an event loop or reads a clock.

Each module here executes what the sans-IO core (`streamlab.core`) decides and never duplicates its logic:
the stand-in server, the httpx client, the retry and resume runners, live timing runs, and the adapters
that drive other libraries' parsers.

The rule, checked by tests/project/test_layers.py: modules here import the core, the standard library and the
third-party I/O libraries (httpx, Starlette, uvicorn, the openai SDK...), never `streamlab.tools` or
`streamlab.exercises`, and never plotting or widget libraries.
"""
