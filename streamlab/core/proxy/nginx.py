"""nginx's configuration for one reverse proxy in front of a streaming server, rendered from options (sans-IO core).

The faults lab 13 measures are a few directives of nginx's, each an option of `NginxOptions`:

    option             directive                              nginx's default
    gzip               gzip on | off                          off
    gzip_event_stream  text/event-stream in gzip_types        (gzip_types is text/html alone)
    buffering          proxy_buffering on | off               on
    read_timeout       proxy_read_timeout (seconds)           60 s

With its defaults nginx forwards an event stream as it comes (proxy_buffering hands on what each read brings); with
`gzip on` and the event stream in `gzip_types`, the gzip filter holds the compressed bytes until a buffer fills or
the answer ends, so a reader gets the whole answer at once; `proxy_buffering off` makes nginx flush the compressor
after every read from the server. `proxy_read_timeout` is the longest silence nginx allows *between two reads*
from the server: a stream whose model thinks longer than that without a byte (a keep-alive comment counts) is cut.
An app's `X-Accel-Buffering: no` header turns buffering off for its own responses (nginx reads it and does not pass
it on); `Cache-Control: no-transform` does not stop nginx's gzip filter. The lab measures each of these.

`nginx_conf(...)` writes every one of those directives out, defaults included (marked so), so the file shown in the
lab is the whole story. Everything else keeps nginx inside one folder: its pid file, error log and temporary files
(`-p FOLDER`, all paths absolute), one worker process, no access log, `listen 127.0.0.1:PORT` only. A `user`
directive is written only when asked: nginx started by root would otherwise run its worker as `nobody`, which
cannot write the temporary folder (the net layer passes root's name then; anyone else runs nginx as themselves).
`nginx_command` is the command line that runs it in the foreground, `daemon off`, so the helper owns the process.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamlab.core.proxy.base import (
    LOOPBACK,
    READY_PATH,
    Upstream,
    check_folder,
    check_port,
    duration,
)

__all__ = ["NginxOptions", "NGINX_DEFAULTS", "nginx_conf", "nginx_command", "CONF_NAME", "EVENT_STREAM_TYPES"]

CONF_NAME = "nginx.conf"
"""The configuration file's name inside the proxy's folder."""

EVENT_STREAM_TYPES = ("text/plain", "application/json")
"""The media types `gzip_types` lists besides text/html (always compressed) when the event stream is left out."""


@dataclass(frozen=True)
class NginxOptions:
    """What lab 13 changes in nginx, one fault or fix each (module docstring): `gzip` (off by default, as in nginx),
    `gzip_event_stream` (whether `gzip_types` lists text/event-stream when gzip is on), `buffering`
    (`proxy_buffering`), `read_timeout` (`proxy_read_timeout`, seconds, nginx's default 60)."""

    gzip: bool = False
    gzip_event_stream: bool = True
    buffering: bool = True
    read_timeout: float = 60.0

    def __post_init__(self) -> None:
        duration("read_timeout", self.read_timeout)  # raises ProxyConfigError when out of range

    def describe(self) -> str:
        """The options as nginx's directives, on one line ("gzip on (text/event-stream in gzip_types), ...")."""
        gzip = "gzip off"
        if self.gzip:
            listed = "in" if self.gzip_event_stream else "not in"
            gzip = f"gzip on (text/event-stream {listed} gzip_types)"
        buffering = "on" if self.buffering else "off"
        return f"{gzip}, proxy_buffering {buffering}, proxy_read_timeout {self.read_timeout:g}s"


NGINX_DEFAULTS = NginxOptions()


def _default(is_default: bool) -> str:
    return "  # nginx's default" if is_default else ""


def _gzip_lines(options: NginxOptions) -> list[str]:
    if not options.gzip:
        return ["gzip off;" + _default(True)]
    types = list(EVENT_STREAM_TYPES) + (["text/event-stream"] if options.gzip_event_stream else [])
    return ["gzip on;", f"gzip_types {' '.join(types)};"]


def nginx_conf(
    options: NginxOptions,
    *,
    upstream: Upstream,
    port: int,
    folder: str,
    token: str,
    user: str | None = None,
) -> str:
    """The whole nginx.conf: listen on 127.0.0.1:`port`, forward to `upstream`, every file inside `folder`, and
    answer `READY_PATH` with `token` itself; `user` adds a `user` directive (for nginx started by root)."""
    check_port(port)
    folder = check_folder(folder)
    if not token.isalnum() or (user is not None and not user.replace("-", "").replace("_", "").isalnum()):
        raise ValueError("token must be alphanumeric, and user a plain user name")
    timeout = duration("read_timeout", options.read_timeout)
    location = [f"proxy_pass {upstream.origin};"]
    if upstream.scheme == "https":
        location.append("proxy_ssl_server_name on;")
    location += [
        f"proxy_buffering {'on' if options.buffering else 'off'};" + _default(options.buffering),
        f"proxy_read_timeout {timeout};" + _default(options.read_timeout == 60),
    ]
    head = [f"# streamlab: nginx in front of {upstream.origin}: {options.describe()} (generated)"]
    if user is not None:
        head.append(f"user {user};")
    head += [
        "worker_processes 1;",
        f"pid {folder}/nginx.pid;",
        f"error_log {folder}/error.log warn;",
        "events {",
        "    worker_connections 256;",
        "}",
        "http {",
        "    access_log off;",
        *(
            f"    {kind}_temp_path {folder}/temp/{kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        ),
        "    server {",
        f"        listen {LOOPBACK}:{port};",
        *(f"        {line}" for line in _gzip_lines(options)),
        f"        location = {READY_PATH} {{",
        f'            return 200 "{token}";',
        "        }",
        "        location / {",
        *(f"            {line}" for line in location),
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(head) + "\n"


def nginx_command(binary: str, folder: str) -> list[str]:
    """The command line that runs nginx in the foreground (`daemon off`) on `folder`'s configuration."""
    folder = check_folder(folder)
    return [binary, "-p", f"{folder}/", "-c", f"{folder}/{CONF_NAME}", "-g", "daemon off;"]
