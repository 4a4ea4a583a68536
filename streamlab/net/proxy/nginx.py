"""nginx in front of a streaming server, started and stopped by the library: `NginxProxy`, `serve_nginx` (I/O layer).

    from streamlab.core.proxy.nginx import NginxOptions
    from streamlab.net.proxy.nginx import NginxProxy

    with NginxProxy(server.base_url, NginxOptions(gzip=True)) as proxy:
        print(proxy.base_url)       # http://127.0.0.1:PORT/v1, nginx in front of the stand-in
        print(proxy.config)         # the nginx.conf it runs with

nginx comes from the operating system's packages (`apt-get install nginx-light`, `brew install nginx`); where it
is missing, `start()` raises `ProxyUnavailable` saying so. The configuration is `streamlab.core.proxy.nginx`'s; the
process (folder, port, readiness, stop) is `streamlab.net.proxy.process`'s. nginx runs as whoever starts it: as
root, its configuration says `user root` (its worker would otherwise run as `nobody`, which cannot write the
temporary folder). In a notebook `serve_nginx()` holds one nginx per process: re-running the cell stops the one
the previous run started.
"""

from __future__ import annotations

import os
from pathlib import Path

from streamlab.core.proxy.nginx import CONF_NAME, NGINX_DEFAULTS, NginxOptions, nginx_command, nginx_conf
from streamlab.net.proxy.process import GRACE, STARTUP_TIMEOUT, ProxyProcess, find_program, program_says
from streamlab.net.slot import Slot

__all__ = ["NginxProxy", "serve_nginx", "stop_nginx", "nginx_program"]

_PLACES = [
    Path(p) for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/bin/nginx", "/opt/homebrew/bin/nginx")
]


def nginx_program() -> str | None:
    """Where nginx is installed (the system's usual places, then PATH), or None."""
    return find_program("nginx", _PLACES)


class NginxProxy(ProxyProcess):
    """nginx on 127.0.0.1 in front of `upstream` (a URL: `http://127.0.0.1:8000/v1`), configured by `options`
    (`NginxOptions`: gzip, gzip_event_stream, buffering, read_timeout); the rest is `ProxyProcess`'s."""

    kind = "nginx"

    def __init__(
        self,
        upstream: str,
        options: NginxOptions = NGINX_DEFAULTS,
        *,
        port: int = 0,
        binary: str | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        grace: float = GRACE,
    ) -> None:
        super().__init__(upstream, port=port, binary=binary, startup_timeout=startup_timeout, grace=grace)
        self.options = options

    def locate(self) -> str | None:
        return nginx_program()

    def render(self, *, port: int, folder: str, token: str) -> str:
        user = None
        if hasattr(os, "geteuid") and os.geteuid() == 0:  # root: its worker would run as `nobody` without this
            import pwd

            user = pwd.getpwuid(0).pw_name
        return nginx_conf(self.options, upstream=self.upstream, port=port, folder=folder, token=token, user=user)

    def command(self, binary: str, folder: str) -> list[str]:
        return nginx_command(binary, folder)

    def prepare(self, folder: Path, config: str) -> dict[str, str]:
        (folder / "temp").mkdir(exist_ok=True)
        (folder / CONF_NAME).write_text(config)
        return {}

    def read_version(self, binary: str) -> str:
        """The version nginx reports ("nginx/1.22.1"), from `nginx -v` (which writes it to stderr)."""
        return program_says(binary, "-v").rpartition(" ")[2]


_SLOT: Slot[NginxProxy] = Slot()


def serve_nginx(upstream: str, options: NginxOptions = NGINX_DEFAULTS, *, port: int = 0) -> NginxProxy:
    """Start nginx for a notebook, first stopping the one a previous call started, and return it (re-running the
    cell never leaks a process: at most one per process, also stopped when the interpreter exits)."""
    return _SLOT.put(lambda: NginxProxy(upstream, options, port=port).start())


def stop_nginx() -> None:
    """Stop the nginx `serve_nginx()` started, if any."""
    _SLOT.clear()
