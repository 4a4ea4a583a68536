"""The relay checker: any relay held to the five rules (I/O layer half; this map covers both).

`streamlab check-relay` grades any relay against the five rules of `streamlab.core.relay.stream.REQUIREMENTS`
by scripting its upstream (a stand-in), putting the chaos proxy between them and reading what comes out.

sans-IO core: streamlab.core.relay.grade (verdicts, the report, the seeded fuzz plan).

I/O layer (streamlab.net.relaycheck):
    run      `check_relay(...)`: one run of every check, the report
    checks   the checks, by requirement: each scripts one upstream behaviour and grades the result
    probe    the instruments: the scripted upstream, the two clients, the run's bookkeeping

Command line: streamlab.tools.cli.relay (`check-relay`). Lab 07 grades each stage of the capstone with it.
"""
