"""The split harness: parsers against every cut of real bytes (sans-IO core half; this map covers both).

Labs 01 and 02 cut real byte fixtures every way a network might and run parsers over every cut.

sans-IO core (streamlab.core.harness):
    fixtures     the byte fixtures in streamlab/data/fixtures/ (raw bytes plus hand-written expectations)
    fuzz         the split harness: `Contender`, `run_harness`, `smallest_failing_split`, `show_split`
    broken       a gallery of realistic broken parsers, one bug each

I/O layer (streamlab.net.harness):
    peers        the popular Python SSE libraries (openai's decoder, httpx-sse, sseclient-py) as contenders
    broken_http  the broken parsers that read lines through httpx, and the whole gallery in teaching order

Plots of a harness result: streamlab.tools.plots. The parser under test is streamlab.core.sse.
"""
