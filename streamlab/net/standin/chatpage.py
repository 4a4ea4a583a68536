"""The stand-in's chat page on the wire: a small page that reads a streamed answer in the browser (I/O layer).

`http://HOST:PORT/chat` is served by the stand-in itself, so the page and the API share one origin: `fetch` and
`EventSource` need no CORS, and a `streamlab_key` cookie the page sets goes with every request. The page is
plain HTML, CSS and JavaScript from `streamlab/net/standin/static/` (no build step, no CDN):

    GET /chat                the page; /chat/chat.css and /chat/chat.js beside it
    GET /v1/chat/stream      (an API route, `streamlab.core.standin.plan`) the answer as an EventSource reads it

What the page does (the script's own comments teach it): a `fetch` + `ReadableStream` + `TextDecoderStream`
reader with a small SSE parser, an `EventSource` on the GET route, a fetch-event-source-style client, a stop
button that aborts and one that only stops rendering, rendering per token or per animation frame, and a
performance mark at every step. `streamlab.net.browser` drives it in headless Chromium.

Like the dashboard's files, these requests are nobody's API call: they leave no request record.
"""

from __future__ import annotations

from streamlab.core.standin.request import RequestHead
from streamlab.net.standin.pages import StaticFiles, not_found
from streamlab.net.standin.wire import PageHandler

__all__ = ["CHAT_PATH", "chat_page"]

CHAT_PATH = "/chat"

_FILES = StaticFiles(
    CHAT_PATH,
    {
        "": ("chat.html", "text/html; charset=utf-8"),
        "/chat.css": ("chat.css", "text/css; charset=utf-8"),
        "/chat.js": ("chat.js", "text/javascript; charset=utf-8"),
    },
)
_NOT_FOUND = not_found("chat page", CHAT_PATH)


def chat_page(head: RequestHead) -> PageHandler | None:
    """The handler for a chat page path (None for every other path: those are the API's)."""
    path = head.path
    if path != CHAT_PATH and not path.startswith(CHAT_PATH + "/"):
        return None
    return _FILES.handler(head) or _NOT_FOUND
