"""The stand-in, `streamlab standin`: a scripted OpenAI-compatible server (the I/O layer half).

The tool's map across both layers is the docstring of `streamlab.core.standin` (one copy, so it cannot
drift). The modules of this half:

I/O layer (streamlab.net.standin):
    server      the socket side: `StandIn`, its lifecycle, and `serve()`, the notebook helper that replaces
                the previous server so a re-run cell never leaks one
    wire        one connection's loop: read requests, execute the planner's actions, time every write
    records     a bounded ring of `RequestRecord`s, running totals and a feed of finished requests
    dashboard   the room page (static/) and its live SSE feed
    chatpage    the chat page (static/chat.*): an answer read in the browser with fetch or EventSource
    hostaddr    this machine's addresses that others in a room can reach
"""
