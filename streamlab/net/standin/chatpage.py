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

import functools
import importlib.resources
import json

from streamlab.core.shapes import error_body
from streamlab.core.standin.request import RequestHead
from streamlab.net.standin.wire import Connection, PageHandler

__all__ = ["CHAT_PATH", "chat_page"]

CHAT_PATH = "/chat"

_FILES = {
    "": ("chat.html", "text/html; charset=utf-8"),
    "/chat.css": ("chat.css", "text/css; charset=utf-8"),
    "/chat.js": ("chat.js", "text/javascript; charset=utf-8"),
}
_HEADERS = (
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
)


@functools.cache
def _static(name: str) -> bytes:
    return importlib.resources.files("streamlab.net.standin").joinpath("static", name).read_bytes()


def chat_page(head: RequestHead) -> PageHandler | None:
    """The handler for a chat page path (None for every other path)."""
    path = head.path
    if path != CHAT_PATH and not path.startswith(CHAT_PATH + "/"):
        return None
    rest = path[len(CHAT_PATH) :]
    if rest not in _FILES:
        return _not_found
    return _file if head.method in ("GET", "HEAD") else _not_allowed


def _file(conn: Connection, head: RequestHead) -> bool:
    name, content_type = _FILES[head.path[len(CHAT_PATH) :]]
    body = _static(name)
    conn.send_reply(200, b"" if head.method == "HEAD" else body, content_type, headers=_HEADERS, length=len(body))
    return True


def _not_allowed(conn: Connection, head: RequestHead) -> bool:
    body = error_body(f"{head.method} is not allowed on {head.path}; use GET or HEAD", "invalid_request_error")
    conn.send_reply(405, json.dumps(body).encode(), "application/json", headers=(("Allow", "GET, HEAD"),))
    return True


def _not_found(conn: Connection, head: RequestHead) -> bool:
    message = f"unknown chat page path {head.path!r}: the page is {CHAT_PATH}"
    body = error_body(message, "invalid_request_error", "unknown_url")
    conn.send_reply(404, json.dumps(body).encode(), "application/json")
    return True
