"""Caddy's configuration for one reverse proxy in front of a streaming server, rendered from options (sans-IO core).

Caddy is lab 13's contrast to nginx: its `reverse_proxy` flushes a `text/event-stream` response after every write
whatever `flush_interval` says (so that setting is not an option here: it changes nothing for an event stream),
and its `encode gzip` compressor is flushed with it. The options are the few that change what a reader sees:

    option         Caddyfile                                      Caddy's default
    encode_gzip    encode gzip                                    no compression
    read_timeout   reverse_proxy { transport http { read_timeout } }   none: waits for ever
    http2          "h2c": plain-text HTTP/2 with prior knowledge   h1 and h2 over TLS, h3
                   "tls": h1 and h2 over TLS from Caddy's own local CA (`tls internal`), the way browsers get h2

`caddyfile(...)` writes the Caddyfile, every choice spelt out. What keeps Caddy inside its folder and on loopback
is always there: `admin off` (no admin endpoint on port 2019), `persist_config off`, storage in the folder, no
automatic HTTPS redirects (they would listen on port 80 of every address), `bind 127.0.0.1`, the protocols listed
(HTTP/3 over UDP never starts), `skip_install_trust` (the local CA is never added to the system's trust store; the
root certificate is at `ROOT_CERT` under the folder for a client to trust), and a one-second `grace_period`, so a
stop does not wait for a stream that never ends. `caddy_environment` points Caddy's home and XDG folders there too.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamlab.core.errors import ProxyConfigError
from streamlab.core.proxy.base import LOOPBACK, READY_PATH, Upstream, check_folder, check_port, duration

__all__ = [
    "CaddyOptions",
    "CADDY_DEFAULTS",
    "HTTP2_MODES",
    "caddyfile",
    "caddy_command",
    "caddy_environment",
    "CADDYFILE_NAME",
    "ROOT_CERT",
]

CADDYFILE_NAME = "Caddyfile"
ROOT_CERT = "data/pki/authorities/local/root.crt"
"""Where, under the proxy's folder, Caddy keeps its local CA's root certificate (with `http2="tls"`)."""

HTTP2_MODES = (None, "h2c", "tls")


@dataclass(frozen=True)
class CaddyOptions:
    """What lab 13 changes in Caddy (module docstring): `encode_gzip`, `read_timeout` (seconds without a byte from
    the server before Caddy gives up; None: Caddy's default, no limit) and `http2` (None, "h2c" or "tls")."""

    encode_gzip: bool = False
    read_timeout: float | None = None
    http2: str | None = None

    def __post_init__(self) -> None:
        if self.read_timeout is not None:
            duration("read_timeout", self.read_timeout)
        if self.http2 not in HTTP2_MODES:
            raise ProxyConfigError("http2", self.http2, f"must be one of {HTTP2_MODES}")

    @property
    def scheme(self) -> str:
        """The scheme it serves: "https" with `http2="tls"`, else "http"."""
        return "https" if self.http2 == "tls" else "http"

    def describe(self) -> str:
        """The options in Caddy's words, on one line."""
        parts = ["encode gzip" if self.encode_gzip else "no encode"]
        parts.append("no read_timeout" if self.read_timeout is None else f"read_timeout {self.read_timeout:g}s")
        parts.append({None: "HTTP/1.1", "h2c": "h1 + h2c", "tls": "h1 + h2 over TLS (tls internal)"}[self.http2])
        return ", ".join(parts)


CADDY_DEFAULTS = CaddyOptions()


def _global_block(options: CaddyOptions, folder: str) -> list[str]:
    protocols = {None: "h1", "h2c": "h1 h2c", "tls": "h1 h2"}[options.http2]
    lines = [
        "{",
        "\tadmin off",
        "\tpersist_config off",
        f"\tstorage file_system {folder}/data",
        "\tgrace_period 1s",
    ]
    if options.http2 == "tls":
        lines += ["\tauto_https disable_redirects", "\tskip_install_trust"]
    else:
        lines.append("\tauto_https off")
    lines += ["\tservers {", f"\t\tprotocols {protocols}", "\t}", "}"]
    return lines


def _proxy_block(options: CaddyOptions, upstream: Upstream) -> list[str]:
    inner: list[str] = []
    if upstream.scheme == "https":
        inner.append("\t\theader_up Host {upstream_hostport}")
    if options.read_timeout is not None:
        inner += [
            "\t\ttransport http {",
            f"\t\t\tread_timeout {duration('read_timeout', options.read_timeout)}",
            "\t\t}",
        ]
    if not inner:
        return [f"\treverse_proxy {upstream.origin}"]
    return [f"\treverse_proxy {upstream.origin} {{", *inner, "\t}"]


def caddyfile(options: CaddyOptions, *, upstream: Upstream, port: int, folder: str, token: str) -> str:
    """The whole Caddyfile: serve 127.0.0.1:`port`, forward to `upstream`, keep every file inside `folder`, and
    answer `READY_PATH` with `token` itself."""
    check_port(port)
    folder = check_folder(folder)
    if not token.isalnum():
        raise ValueError("token must be alphanumeric")
    site = [f"{options.scheme}://{LOOPBACK}:{port} {{", f"\tbind {LOOPBACK}"]
    if options.http2 == "tls":
        site.append("\ttls internal")
    site.append(f'\trespond {READY_PATH} "{token}" 200')
    if options.encode_gzip:
        site.append("\tencode gzip")
    site += [*_proxy_block(options, upstream), "}"]
    head = f"# streamlab: Caddy in front of {upstream.origin}: {options.describe()} (generated)"
    return "\n".join([head, *_global_block(options, folder), "", *site]) + "\n"


def caddy_command(binary: str, folder: str) -> list[str]:
    """The command line that runs Caddy in the foreground on `folder`'s Caddyfile."""
    folder = check_folder(folder)
    return [binary, "run", "--config", f"{folder}/{CADDYFILE_NAME}", "--adapter", "caddyfile"]


def caddy_environment(folder: str) -> dict[str, str]:
    """The environment variables that keep Caddy's own files (its data and config folders) inside `folder`."""
    folder = check_folder(folder)
    return {"HOME": folder, "XDG_DATA_HOME": f"{folder}/xdg-data", "XDG_CONFIG_HOME": f"{folder}/xdg-config"}
