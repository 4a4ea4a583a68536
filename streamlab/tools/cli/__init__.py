"""The `streamlab` command line (tools layer): one module per subcommand group, discovered by `main`.

    main      the entry point (`streamlab`, `python -m streamlab`), `parse` and `fixtures`
    standin   `streamlab standin`: serve the scripted stand-in to a learner or a room
    relay     `streamlab relay` (the relay, or the gateway with several upstreams) and `check-relay`
    chaos     `streamlab chaos`: the chaos TCP proxy in front of a server
    check     `streamlab check`: grade an OpenAI-compatible endpoint byte by byte
    pathcheck `streamlab check-path`: grade the path (a proxy, a CDN) between a streaming server and a reader
    quiz      `streamlab quiz`: a lab's checkpoint quiz in the terminal

Each subcommand imports what it needs when it runs, so `streamlab --help` is instant.
"""
