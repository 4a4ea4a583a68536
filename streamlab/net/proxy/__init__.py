"""Real proxies, run by the library: nginx and Caddy in front of a streaming server (the I/O layer half).

The tool's map across both layers is the docstring of `streamlab.core.proxy` (one copy, so it cannot drift). The
modules of this half:

I/O layer (streamlab.net.proxy):
    process   `ProxyProcess`: a proxy as a child process: its folder, port, readiness, SIGTERM then kill
    nginx     `NginxProxy`, `serve_nginx()` / `stop_nginx()`
    caddy     `CaddyProxy`, `serve_caddy()` / `stop_caddy()`
    asgi      `GzipApp`: the ASGI case, an app behind Starlette's GZipMiddleware; `serve_gzip_app()`
    measure   lab 13's measurements: every case read through its hop, recorded to and replayed from
              `streamlab/data/paths/lab13.json` (`python -m streamlab.net.proxy.measure`)
"""
