"""The path checker's room, `streamlab check-path` (its sans-IO core half; the map of the tool across both layers).

Does the path between a streaming server and a reader (a reverse proxy, a compression middleware, a CDN) let the
stream through as the server sent it?

sans-IO core, here:
    checks     the catalogue (`PATH_CHECKS`), what the checker sends (a browser's headers, `chat_request`), what
               each read got (`PathRead`, `PathReads`), findings, timing facts and the `PathReport`
    timeline   when each event of a read arrived: its bytes and network reads in, a `Timeline` out
    grade      `grade_path(reads)`: buffering, compression, headers, the HTTP version, the end, idle gaps

I/O layer:
    streamlab.net.pathcheck         makes the reads with httpx, times every network read, keeps its own deadlines
                                    apart from the path's doing
    streamlab.tools.cli.pathcheck   the `streamlab check-path` command line

Data flows one way: net.pathcheck (bytes and times) -> timeline -> grade -> PathReport -> text or JSON. The real
proxies it is tested against are streamlab.net.proxy's.
"""
