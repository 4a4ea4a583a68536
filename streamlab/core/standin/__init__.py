"""The stand-in, `streamlab standin`: a scripted OpenAI-compatible server (sans-IO core half; this map covers both).

Deciding is apart from doing: the core decides every byte, the I/O layer only carries it out on a socket.

sans-IO core (streamlab.core.standin):
    script      the script model: steps (Wait, Send, KeepAlive, Stall, Cut, End), episodes, stored responses
    scenarios   the named scripts a room is served (`streamlab standin --list`)
    request     an HTTP/1.x request head read from bytes; whether to take the body
    room        the room's state, one learner (bearer token) at a time; no learner changes what another sees
    plan        the planner: a whole request plus the room's state in, `actions` out (routes from a table,
                validation like the real API, usage only when asked, Last-Event-ID, starting_after, cancel)
    actions     the plain values the planner hands the wire loop
    eventsource GET /v1/chat/stream's pure half: every event numbered, a `retry:` hint, the key from the
                query or a cookie (an EventSource sends no Authorization)
    quirks      provider quirks as transformations of a scripted answer (bytes in, bytes out)
    profiles    provider profiles built from quirks, each citing where its behaviour is documented
    board       the room dashboard's state: a row per learner, totals, the numbered events of its feed
    replay      a real capture as an episode: its reads as chunks after the recorded gaps (streamlab.core.capture)

I/O layer (streamlab.net.standin):
    server      the socket side: `StandIn`, its lifecycle, and `serve()`, the notebook helper that replaces
                the previous server so a re-run cell never leaks one
    wire        one connection's loop: read requests, execute the planner's actions, time every write
    records     a bounded ring of `RequestRecord`s, running totals and a feed of finished requests
    dashboard   the room page (static/) and its live SSE feed
    chatpage    the chat page (static/chat.*) that reads an answer in the browser (streamlab.net.browser drives it)
    hostaddr    this machine's addresses that others in a room can reach

Tools: streamlab.tools.cli.standin (the command line). A request flows
bytes -> request -> plan (+ room, script) -> actions -> wire -> bytes, and leaves a record on the way out.
"""
