"""The browser, for real: lab 12's chat page read by headless Chromium (I/O layer; this map covers the tool).

The page and its routes belong to the stand-in; this folder only drives a real browser at them.

stand-in (the page and the API it reads):
    streamlab.net.standin.chatpage        GET /chat: the page (static/chat.html, chat.js, chat.css)
    streamlab.core.standin.eventsource    GET /v1/chat/stream's pure half: numbered events, retry:, the key
    streamlab.core.standin.plan           the route itself: 204 after the final event, or the naive replay

I/O layer (streamlab.net.browser):
    chromium    the system's Chromium, found and started headless through Playwright (never downloaded)
    scenarios   the five scenarios: fetch reader, EventSource, hidden tab, stop button, render batching
    run         one run on a fresh stand-in, as a JSON-able dict of facts and timings; the recorded run
    __main__    `python -m streamlab.net.browser`: one run printed as JSON (`--output` writes it too)

The recorded run, `data/browser/lab12.json`, is what lab 12 replays; STREAMLAB_LIVE=1 makes it run this module.
"""
