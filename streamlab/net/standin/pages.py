"""The stand-in's own pages on the wire: static files under a path, and the JSON errors around them (I/O layer).

The room dashboard (`/dashboard`) and the chat page (`/chat`) are served by the stand-in itself from
`streamlab/net/standin/static/`, with the same strict headers (no caching, no sniffing, no referrer, a Content
Security Policy that allows only the page's own files and its own origin). `StaticFiles` serves one page's files;
`not_allowed` and `not_found` answer the rest with OpenAI-shaped JSON errors, as the API's routes do.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from collections.abc import Mapping

from streamlab.core.shapes import error_body
from streamlab.core.standin.request import RequestHead
from streamlab.net.standin.wire import Connection, PageHandler

__all__ = ["PAGE_HEADERS", "StaticFiles", "not_allowed", "not_found"]

PAGE_HEADERS = (
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
)
"""The headers of every static page file the stand-in serves."""


@functools.cache
def _static(name: str) -> bytes:
    return (importlib.resources.files("streamlab.net.standin") / "static" / name).read_bytes()


class StaticFiles:
    """One page's files: `files` maps a path after `prefix` ("" for the page itself, "/page.js", ...) to a file of
    `static/` and its Content-Type."""

    def __init__(self, prefix: str, files: Mapping[str, tuple[str, str]]) -> None:
        self.prefix = prefix
        self.files = dict(files)

    def handler(self, head: RequestHead) -> PageHandler | None:
        """The handler for `head` when its path is one of the files (a 405 for a method other than GET and HEAD),
        else None."""
        if head.path[len(self.prefix) :] not in self.files or not head.path.startswith(self.prefix):
            return None
        return self._serve if head.method in ("GET", "HEAD") else not_allowed("GET, HEAD")

    def _serve(self, conn: Connection, head: RequestHead) -> bool:
        name, content_type = self.files[head.path[len(self.prefix) :]]
        body = _static(name)
        conn.send_reply(
            200, b"" if head.method == "HEAD" else body, content_type, headers=PAGE_HEADERS, length=len(body)
        )
        return True


def not_allowed(allow: str) -> PageHandler:
    """A 405 naming the methods in `allow` ("GET, HEAD")."""

    def handler(conn: Connection, head: RequestHead) -> bool:
        body = error_body(f"{head.method} is not allowed on {head.path}; use {allow}", "invalid_request_error")
        conn.send_reply(405, json.dumps(body).encode(), "application/json", headers=(("Allow", allow),))
        return True

    return handler


def not_found(what: str, where: str) -> PageHandler:
    """A 404 for an unknown path under a page: "unknown WHAT path '...': the WHAT is WHERE"."""

    def handler(conn: Connection, head: RequestHead) -> bool:
        message = f"unknown {what} path {head.path!r}: the {what} is {where}"
        conn.send_reply(
            404, json.dumps(error_body(message, "invalid_request_error", "unknown_url")).encode(), "application/json"
        )
        return True

    return handler
