"""The endpoint checker's room, `streamlab check` (its sans-IO core half; the map of the tool across both layers).

Is a server's stream what the OpenAI API reference promises?

A room of its own, across both layers (each module's docstring says more):

sans-IO core, here:
    checks      the catalogue (`CHECKS`: id, promise, why), the probes the checker sends (`probes_for`),
                what comes back (`ProbeResult`), findings with located evidence, the `Report` and the matrix
    grade       `grade(results, dialect=...)`: every check of a dialect over the raw bodies; the error checks
                (an invalid request, a body that is not JSON, a prompt over the context)
    base        what every check stands on: a scanned `Stream`, the `Worst` verdict, status and framing
    chat        the Chat Completions checks: [DONE], chunk shape, roles, finish reasons, usage, tool calls
                ("required" honoured, names, the deprecated function_call)
    responses   the Responses checks: event names, sequence numbers, indexes, `.done` values, the terminal
                event (incomplete when max_output_tokens stopped it); an unserved route skips them all

I/O layer:
    streamlab.net.check        sends the probes with httpx, keeps every raw body and the time of each read
    streamlab.tools.cli.check  the `streamlab check` command line

Data flows one way: probes_for -> net.check (bytes and times) -> grade -> Report -> text or JSON. Nothing
here touches a socket or a clock, so the same functions grade the stand-in's profiles and a real server.
"""
