"""The I/O layer: everything that opens a socket, starts a thread or reads a clock.

Each module here wraps the sans-IO core (`streamlab.core`) and never duplicates its decisions: the
stand-in server, the httpx client, the retry and resume runners, live timing runs, and the adapters
that drive other libraries' parsers.
"""
