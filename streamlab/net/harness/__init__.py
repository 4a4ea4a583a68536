"""The split harness: parsers against every cut of real bytes (the I/O layer half).

The tool's map across both layers is the docstring of `streamlab.core.harness` (one copy, so it cannot
drift). The modules of this half:

I/O layer (streamlab.net.harness):
    peers        the popular Python SSE libraries (openai's decoder, httpx-sse, sseclient-py) as contenders
    broken_http  the broken parsers that read lines through httpx, and the whole gallery in teaching order
"""
