"""Real captured streams: what llama-cpp-python serving Gemma 3 270M sends, recorded byte for byte (I/O layer).

The labs' other bytes are synthetic (`streamlab.core.shapes`) or played by the stand-in. These are real: each
probe below is one request to a real server (`streamlab.net.model.ModelServer`), and each capture is

* `NAME.sse`: the response body exactly as received (httpx's `iter_raw`: after HTTP chunked framing, before
  any decoding), except where a record says `redacted` (file paths in a Python traceback);
* `NAME.json`: the request (method, path, headers, body as sent), the response (status, headers as received,
  byte count), the server (name, version, flags), the model (name, file, sha256, package), the time of every
  read as an offset in seconds from the moment the request was sent, with its byte count, the capture date,
  the server's CPU time over the capture (up to a second after its last read; for a cancel also the CPU it spent
  after the client closed, until it went idle, `server_cpu_after_close_seconds`) and everything else's
  (`machine.other_cpu_seconds`, this client included, and `machine.load_average_1m`: how contended the two cores
  were), the versions of the server's Python stack (`server.stack`: uvicorn, sse-starlette, FastAPI...), and
  `quirk`: what this capture shows against the OpenAI API reference.

`index.json` beside them lists every capture with its quirk. `python3 dev.py capture` (this module's `main()`)
starts the server and recaptures the whole folder (`--only NAME...`: those probes, the others kept; the whole
folder took 5 minutes on two cores shared with other work); a probe that needs other server flags (`Probe.server`)
gets a server of its own, and probes with the same flags share one, in the order of `PROBES`. Generation is
bounded everywhere (temperature 0, a fixed seed, `max_tokens`), so a recapture gives the same text on the same
build. `capture_live` runs one probe against a running server and hands back `streamlab.core.capture.Capture`
values without writing anything: what lab 11 does when it runs live. `streamlab.core.capture` reads the folder
back; the stand-in replays it.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import streamlab.data
from streamlab.core.capture import Capture
from streamlab.net.model import (
    MODEL_FILE,
    MODEL_NAME,
    MODEL_PACKAGE,
    MODEL_PACKAGE_VERSION,
    SERVER_PACKAGE,
    SERVER_VERSION,
    ModelServer,
    ModelUnavailable,
    missing_message,
    sha256_of,
)
from streamlab.net.relay.app import Relay

FOLDER = f"{SERVER_PACKAGE}-{SERVER_VERSION}-gemma3-270m-q4_k_m"
CAPTURES = Path(streamlab.data.__file__).parent / "captures" / FOLDER
N_CTX = 2048
SEED = 7

ASK = [{"role": "user", "content": "Write one sentence about rivers."}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
WEATHER_ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def chat(**fields: Any) -> dict[str, Any]:
    """A streamed chat request, bounded and deterministic unless `fields` say otherwise."""
    return {
        "model": MODEL_NAME,
        "messages": ASK,
        "stream": True,
        "max_tokens": 40,
        "temperature": 0,
        "seed": SEED,
        **fields,
    }


def long_prompt(tokens_over: int = N_CTX) -> list[dict[str, str]]:
    """A user message longer than the context (each "river " is one or two tokens; twice over to be sure)."""
    return [{"role": "user", "content": "river " * (2 * tokens_over)}]


@dataclass(frozen=True)
class Probe:
    """One request to capture: `body` a JSON value or the exact text to send; `close_after` N reads, then the
    client closes (a cancel); `close_at` seconds after the response headers, the client closes without reading
    (a cancel while the server still reads the prompt); `interrupt_after` N reads, then a second request
    (`second`) starts while this one streams, captured as NAME-second. `server` is extra server flags (the probe
    then gets a server of its own, started with them; a later flag overrides an earlier one); `count_prompt`
    records the prompt's length in tokens (`request.prompt_tokens`), counted by the server's own tokenizer;
    `via_relay` sends the request through streamlab's relay (`streamlab.net.relay.Relay`, in this process)
    instead of to the server."""

    name: str
    body: Any
    quirk: str
    path: str = "/v1/chat/completions"
    close_after: int | None = None
    close_at: float | None = None
    interrupt_after: int | None = None
    second: Any = None
    server: tuple[str, ...] = ()
    count_prompt: bool = False
    via_relay: bool = False


PROMPT_WORDS = (48, 240, 720, 1440)
"""The prompt-length probes: a user message of a short header and this many words ("river" and "stone" in turn,
one token each), from about 60 to about 1,460 tokens with the chat template (the context is N_CTX)."""


def prompt_of(words: int, label: str = "Prompt") -> list[dict[str, str]]:
    """A user message of about `words` tokens whose first words (`label` and the count) differ from every other
    prompt's: the server reuses the longest prefix it has already evaluated, so prompts sharing a start would skip
    part of the prefill."""
    body = " ".join(("river", "stone")[i % 2] for i in range(words))
    return [{"role": "user", "content": f"{label} {words}: {body}"}]


def gemma_prompt(messages: list[dict[str, str]]) -> str:
    """The text the gemma chat format (`--chat_format gemma`) makes of user `messages`, as the model reads it."""
    turns = "".join(f"<start_of_turn>user\n{m['content']}<end_of_turn>\n" for m in messages)
    return turns + "<start_of_turn>model\n"


THREADS = (1, 2)
"""The thread counts the `threads-N` probes compare, each on a server of its own, captured back to back."""
PREFILL_CANCEL_AT = 0.5
"""When the `cancelled-in-prefill` client leaves: this many seconds after the response headers, long before a
prompt of about 1,460 tokens is read (about 10 s on 2 quiet cores)."""
DEFAULT_SETTINGS = ("--n_threads", "1", "--logits_all", "true")
"""llama-cpp-python's own defaults on 2 cores (one thread: cpu_count // 2; logits kept for every token), which the
`flags-defaults` probe restores over the project's settings."""
CHATML = ("--chat_format", "chatml-function-calling")


PROBES: tuple[Probe, ...] = (
    Probe(
        "chat-plain",
        chat(),
        (
            'A plain chat stream: a first chunk whose delta is only {"role": "assistant"}, one chunk per token, a '
            "last chunk with an empty delta and finish_reason 'length', then [DONE]. The base model echoes the prompt"
            " and rambles to max_tokens; chunks carry no system_fingerprint."
        ),
    ),
    Probe(
        "chat-200-tokens",
        chat(max_tokens=200, messages=[{"role": "user", "content": "Tell me about rivers."}]),
        (
            "Real pacing over 200 tokens, one chunk per token, finish_reason 'length': the reads' times show the time "
            "to first token and the decode rate on 2 cores (machine.other_cpu_seconds says what else ran meanwhile)."
        ),
    ),
    Probe(
        "include-usage",
        chat(stream_options={"include_usage": True}),
        (
            "stream_options.include_usage is accepted and ignored: no chunk carries usage, where the OpenAI API sends"
            " a last chunk with empty choices and the usage object before [DONE]."
        ),
    ),
    Probe(
        "error-messages-not-list",
        chat(messages="Write one sentence about rivers."),
        (
            "A validation error (messages is a string) is a 500 internal_server_error whose message is FastAPI's "
            "validation report with a traceback line naming the server's source file, where the OpenAI API answers 400 "
            "invalid_request_error. File paths in the stored body are redacted."
        ),
    ),
    Probe(
        "error-not-json",
        "this body is not JSON",
        (
            "A body that is not JSON is a 500 with the plain-text body 'Internal Server Error', where the OpenAI API "
            "answers 400 with a JSON error object."
        ),
    ),
    Probe(
        "no-messages",
        {"model": MODEL_NAME, "stream": True, "max_tokens": 16, "temperature": 0, "seed": SEED},
        (
            "A request with no messages is accepted (the OpenAI API answers 400: messages is required) and the model "
            "generates from an empty prompt; only max_tokens stops it before the context is full."
        ),
    ),
    Probe(
        "prompt-over-context",
        chat(messages=long_prompt()),
        (
            f"A prompt longer than the context ({N_CTX} tokens) is a 200 text/event-stream with an empty body:"
            " no event, no error, no [DONE], where the OpenAI API answers 400 context_length_exceeded before"
            " any stream."
        ),
    ),
    Probe(
        "tool-choice-required",
        chat(messages=WEATHER_ASK, tools=[WEATHER], tool_choice="required"),
        (
            "tool_choice 'required' is silently ignored with the gemma chat format: a text answer with finish_reason "
            "'length' and no tool call, where the OpenAI API guarantees at least one tool call."
        ),
    ),
    Probe(
        "tool-named",
        chat(
            messages=WEATHER_ASK,
            tools=[WEATHER],
            max_tokens=30,
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        ),
        (
            "A named tool call: every fragment repeats the call's id, type and function name (the OpenAI API sends"
            " them once), so an accumulator that appends them (the official SDK's) builds"
            " 'get_weatherget_weather...'; every delta also has \"role\": null and a legacy function_call beside"
            " tool_calls; finish_reason 'tool_calls'."
        ),
    ),
    Probe(
        "interrupted",
        chat(max_tokens=120),
        (
            "A second request while this stream runs ends it: [DONE] after a few chunks and no chunk with a "
            "finish_reason; the body then ends as a finished one does (HTTP's last chunk: no transport_error), so "
            "nothing but the missing finish_reason tells the client. The OpenAI API serves requests independently. "
            "The second request's stream is interrupted-second."
        ),
        interrupt_after=8,
        second=chat(max_tokens=20),
    ),
    Probe(
        "cancelled",
        chat(max_tokens=300),
        (
            "The client closes the connection after 15 reads (client.closed_at); the stored body is what had arrived, "
            "with no [DONE]. The server stops generating within a few tokens (it looks for the closed connection "
            "after each token): server_cpu_after_close_seconds is a token or a few, and its CPU time over the capture "
            "a small fraction of what 300 tokens cost."
        ),
        close_after=15,
    ),
    Probe(
        "cancelled-via-relay",
        chat(max_tokens=300),
        (
            "The cancel of `cancelled`, through streamlab's relay: the client closes its connection to the relay after "
            "15 reads, the relay closes its own upstream request, and the server stops generating as it did when the "
            "client closed directly (its CPU time over the capture is a small fraction of what 300 tokens cost)."
        ),
        close_after=15,
        via_relay=True,
    ),
    Probe(
        "cancelled-in-prefill",
        chat(messages=prompt_of(PROMPT_WORDS[-1], "Cancelled"), max_tokens=16),
        (
            f"A cancel during prefill: a prompt of about 1,460 tokens, and the client closes {PREFILL_CANCEL_AT:g} s"
            " after the response headers, before any byte of the body. The server notices a closed connection only "
            "between tokens, so it reads the whole prompt anyway: server_cpu_after_close_seconds is the rest of the "
            "prefill, spent for no one (a cancel during decode, `cancelled`, stops within a few tokens)."
        ),
        close_at=PREFILL_CANCEL_AT,
        count_prompt=True,
    ),
    *(
        Probe(
            f"prompt-{words}",
            chat(messages=prompt_of(words), max_tokens=16),
            (
                f"Prefill: a prompt of {words} words (request.prompt_tokens counts its tokens, chat template included)."
                " The time to the first content read grows with the prompt, since the model must read all of it"
                " before it writes a token; the gaps after it (decode, one token each) do not."
            ),
            count_prompt=True,
        )
        for words in PROMPT_WORDS
    ),
    Probe(
        "flags-defaults",
        chat(),
        (
            "The plain chat of chat-plain on a server with llama-cpp-python's defaults for two cores (--n_threads 1 "
            "--logits_all true): the same tokens, several times slower to decode; the server's flags are in the "
            "record."
        ),
        server=DEFAULT_SETTINGS,
    ),
    *(
        Probe(
            f"threads-{n}",
            chat(max_tokens=60),
            (
                f"The same 60-token chat on a server with --n_threads {n} (the project's other settings kept), "
                f"captured back to back with the other threads-N probes, so they met the same machine; "
                "machine.load_average_1m says how busy it was. Threads share each decode step: on free cores more "
                "threads are faster, on contended cores each step waits for the slowest thread."
            ),
            server=("--n_threads", str(n)),
        )
        for n in THREADS
    ),
    Probe(
        "chatml-plain",
        chat(),
        (
            "The plain chat of chat-plain with --chat_format chatml-function-calling: another prompt template, so the "
            "model reads other tokens and writes another answer; this one stops on the template's end-of-turn token "
            "(finish_reason 'stop') long before max_tokens, where the gemma format runs to it ('length')."
        ),
        server=CHATML,
    ),
    Probe(
        "chatml-tool-choice-required",
        chat(messages=WEATHER_ASK, tools=[WEATHER], tool_choice="required"),
        (
            "tool_choice 'required' with --chat_format chatml-function-calling: a 200 text/event-stream with an empty "
            "body (no event, no error, no [DONE]), where the gemma format answers in text (tool-choice-required) and "
            "the OpenAI API guarantees a tool call."
        ),
        server=CHATML,
    ),
)


def responses(**fields: Any) -> dict[str, Any]:
    """A streamed Responses request, bounded and deterministic unless `fields` say otherwise."""
    return {
        "model": MODEL_NAME,
        "input": ASK[0]["content"],
        "stream": True,
        "max_output_tokens": 24,
        "temperature": 0,
        "seed": SEED,
        **fields,
    }


LLAMA_SERVER_PROBES: tuple[Probe, ...] = (
    Probe(
        "chat-plain",
        chat(),
        (
            'A plain chat stream from llama-server: a first chunk whose delta is {"role": "assistant", '
            '"content": null}, one chunk per token, each with a system_fingerprint naming the build, a last chunk '
            "with finish_reason 'length' and a `timings` object (an extra field, not in the OpenAI API), then [DONE]. "
            "No usage chunk: none was asked for."
        ),
    ),
    Probe(
        "include-usage",
        chat(stream_options={"include_usage": True}),
        (
            "stream_options.include_usage is honoured as documented: a last chunk with empty choices and the usage "
            "object (prompt_tokens_details included) before [DONE], with `timings` beside it."
        ),
    ),
    Probe(
        "responses-text",
        responses(),
        (
            "A Responses stream: response.created, in_progress, output_item.added, content_part.added, one "
            "output_text.delta per token, the .done events and response.completed, but no event carries "
            "sequence_number, output_index or content_index, which the OpenAI API puts on every event (the official "
            "SDK's responses.stream() raises TypeError on the first one)."
        ),
        path="/v1/responses",
    ),
    Probe(
        "responses-max-output-tokens",
        responses(max_output_tokens=8),
        (
            "An answer stopped by max_output_tokens ends with response.completed and status 'completed', where the "
            "OpenAI API ends it with response.incomplete, status 'incomplete' and incomplete_details.reason "
            "'max_output_tokens': a client cannot tell a cut answer from a finished one."
        ),
        path="/v1/responses",
    ),
    Probe(
        "error-not-json",
        "this body is not JSON",
        (
            "A body that is not JSON is a 500 server_error whose message is the JSON library's parse error, where the "
            "OpenAI API answers 400 invalid_request_error."
        ),
    ),
    Probe(
        "error-messages-not-list",
        chat(messages="Write one sentence about rivers."),
        "A validation error (messages is a string) is a 400 invalid_request_error, as the OpenAI API answers.",
    ),
    Probe(
        "no-messages",
        {"model": MODEL_NAME, "stream": True, "max_tokens": 16, "temperature": 0, "seed": SEED},
        "A request with no messages is refused with a 400 invalid_request_error (\"'messages' is required\").",
    ),
    Probe(
        "prompt-over-context",
        chat(messages=long_prompt()),
        f"A prompt longer than the context ({N_CTX} tokens) is refused before any stream, with an error body.",
    ),
    Probe(
        "tool-choice-required",
        chat(messages=WEATHER_ASK, tools=[WEATHER], tool_choice="required"),
        (
            "tool_choice 'required' with --jinja is ignored: a text answer with finish_reason 'length' and no tool "
            "call, where the OpenAI API guarantees at least one tool call."
        ),
    ),
    Probe(
        "tool-named",
        chat(
            messages=WEATHER_ASK,
            tools=[WEATHER],
            max_tokens=30,
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        ),
        (
            "A tool_choice naming get_weather is ignored too: the model answers in text (it echoes the question and "
            "its chat template's markers) to finish_reason 'length', with no tool call, where the OpenAI API calls the "
            "named function. (llama-cpp-python calls it, repeating the name in every fragment: its tool-named.)"
        ),
    ),
    Probe(
        "concurrent",
        chat(max_tokens=60),
        (
            "A second request while this stream runs does not end it (llama-server has 4 slots): both streams run to "
            "finish_reason 'length', sharing the two cores. The second request's stream is concurrent-second."
        ),
        interrupt_after=8,
        second=chat(max_tokens=20),
    ),
    Probe(
        "cancelled",
        chat(max_tokens=300),
        (
            "The client closes the connection after 15 reads (client.closed_at); the stored body is what had arrived, "
            "with no [DONE]. The server stops generating: its CPU time over the capture is a fraction of what 300 "
            "tokens cost."
        ),
        close_after=15,
    ),
)


@dataclass(frozen=True)
class Target:
    """A server to capture: the name `ModelServer` starts it by, its name and version in the records, the folder
    under data/captures/ and its probes."""

    server: str
    name: str
    version: str
    folder: str
    probes: tuple[Probe, ...]


TARGETS: dict[str, Target] = {
    "llama-cpp-python": Target("llama-cpp-python", SERVER_PACKAGE, SERVER_VERSION, FOLDER, PROBES),
    "llama-server": Target(
        "llama-server",
        "llama-server",
        f"llama.cpp as vendored by llama-cpp-python {SERVER_VERSION}",
        f"llama-server-{SERVER_VERSION}-gemma3-270m-q4_k_m",
        LLAMA_SERVER_PROBES,
    ),
}
"""Every server `python3 dev.py capture --server NAME` captures."""


# -- one capture ----------------------------------------------------------------------------------------


@dataclass
class Captured:
    name: str
    body: bytes = b""
    record: dict[str, Any] = field(default_factory=dict)


PATH_IN_TRACE = re.compile(rb"(?:/[^/\s\"'\\<>]+)+/(site-packages|dist-packages|lib/python3\.\d+)/")
ABSOLUTE_PATH = re.compile(rb"(?<![\w:/])(?:/(?:root|home|work|tmp|usr|opt|var)\b)(?:/[^\s\"'\\<>]+)+")


def redact(body: bytes, *known: str) -> tuple[bytes, int]:
    """Replace the file paths in `body` (a traceback's) with `<redacted>/...`; returns the new body and how many
    were replaced. Paths below site-packages or the standard library keep their tail (the module they name)."""
    count = 0
    for path in sorted((k for k in known if k), key=len, reverse=True):
        count += body.count(path.encode())
        body = body.replace(path.encode(), b"<redacted>")
    body, n = PATH_IN_TRACE.subn(rb"<redacted>/\1/", body)
    count += n
    body, n = ABSOLUTE_PATH.subn(b"<redacted>", body)
    return body, count + n


def _request_record(probe: Probe, content: bytes, body: Any, prompt_tokens: int | None = None) -> dict[str, Any]:
    sent = body if not isinstance(body, str) else None
    record = {
        "method": "POST",
        "path": probe.path,
        "headers": {"content-type": "application/json"},
        "body": sent,
        "body_text": content.decode() if sent is None else None,
    }
    if prompt_tokens is not None:
        record["prompt_tokens"] = prompt_tokens
    return record


def count_prompt(client: httpx.Client, server: ModelServer, body: Any) -> int | None:
    """The prompt's length in tokens as the model reads it (the gemma template, the BOS token included), from
    the server's own tokenizer (`POST /extras/tokenize/count`); None when the body has no list of messages."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return None
    url = server.base_url.removesuffix("/v1") + "/extras/tokenize/count"
    reply = client.post(url, json={"input": gemma_prompt(messages)})
    reply.raise_for_status()
    return int(reply.json()["count"])


def machine_cpu_seconds() -> float | None:
    """CPU time the whole machine has spent busy since boot (Linux /proc/stat; None elsewhere)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


SERVER_STACK = ("uvicorn", "sse-starlette", "fastapi", "starlette", "starlette-context")
"""The Python packages under llama-cpp-python's server, whose behaviour shows in its bytes (sse-starlette writes
the frames and the `: ping` keep-alives, uvicorn the HTTP framing): each capture records their versions."""


def server_stack() -> dict[str, str | None]:
    """The installed version of each package of `SERVER_STACK` (None: not installed)."""
    found: dict[str, str | None] = {}
    for name in SERVER_STACK:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def load_average() -> float | None:
    """The machine's load average over the last minute (None where the system has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def wait_until_idle(server: ModelServer, *, step: float = 1.0, quiet: int = 2, limit: float = 120.0) -> None:
    """Wait until the server has spent (almost) no CPU over `quiet` windows of `step` seconds in a row, or `limit`
    seconds have passed: after a cancel, so the CPU it spent for a client that had left is all counted (a cancel
    during prefill: seconds of it). Two windows, because on a contended machine a busy server can get no core
    for a moment."""
    deadline = time.monotonic() + limit
    before = server.cpu_seconds()
    calm = 0
    while before is not None and calm < quiet and time.monotonic() < deadline:
        time.sleep(step)
        now = server.cpu_seconds()
        if now is None:
            return
        calm = calm + 1 if now - before < 0.02 * step else 0
        before = now


def _read_body(
    response: httpx.Response, probe: Probe, start: float, on_read: Callable[[int], None] | None
) -> tuple[list[dict[str, Any]], list[bytes], dict[str, Any], dict[str, Any] | None]:
    """Read a response raw as `probe` says (every read timed; `close_after` reads, or none at all with
    `close_at`): the reads, the chunks, what the client did, and the transport error, if any."""
    reads: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    if probe.close_at is not None:  # leave before the first byte: the server is still reading the prompt
        time.sleep(probe.close_at)
        return reads, chunks, {"closed_after_reads": 0}, None
    try:
        for chunk in response.iter_raw():
            reads.append({"at": round(time.perf_counter() - start, 6), "bytes": len(chunk)})
            chunks.append(chunk)
            if on_read is not None:
                on_read(len(reads))
            if probe.close_after is not None and len(reads) >= probe.close_after:
                return reads, chunks, {"closed_after_reads": len(reads)}, None
    except httpx.TransportError as exc:  # the server broke the HTTP framing: part of what it shows
        error = {"at": round(time.perf_counter() - start, 6), "error": f"{type(exc).__name__}: {exc}"}
        return reads, chunks, {}, error
    return reads, chunks, {}, None


def send(
    client: httpx.Client,
    server: ModelServer,
    name: str,
    probe: Probe,
    body: Any,
    on_read: Callable[[int], None] | None = None,
    base_url: str | None = None,
) -> Captured:
    """POST `body` and read the response raw, timing every read; `probe.close_after` reads (or `probe.close_at`
    seconds), then close. `base_url` (a relay's) replaces the server's as the address the request goes to."""
    content = (body if isinstance(body, str) else json.dumps(body)).encode()
    url = (base_url or server.base_url).removesuffix("/v1") + probe.path
    prompt_tokens = count_prompt(client, server, body) if probe.count_prompt else None
    cpu, busy = server.cpu_seconds(), machine_cpu_seconds()
    at_close: float | None = None
    start = time.perf_counter()
    with client.stream("POST", url, content=content, headers={"content-type": "application/json"}) as response:
        headers_at = time.perf_counter() - start
        reads, chunks, client_side, transport_error = _read_body(response, probe, start, on_read)
        status, headers = response.status_code, [[k.decode(), v.decode()] for k, v in response.headers.raw]
    if client_side:
        client_side["closed_at"] = round(time.perf_counter() - start, 6)
        at_close = server.cpu_seconds()
    time.sleep(1.0)  # let a cancelled generation stop, so its CPU time is all counted
    if client_side:
        wait_until_idle(server)  # a cancel during prefill keeps the server busy for seconds
    cpu_after, busy_after = server.cpu_seconds(), machine_cpu_seconds()
    record: dict[str, Any] = {
        "request": _request_record(probe, content, body, prompt_tokens),
        "response": {"status": status, "headers": headers, "headers_at": round(headers_at, 6)},
        "reads": reads,
        "transport_error": transport_error,
        "client": client_side or None,
        "server_cpu_seconds": None,
        "machine": {"cpus": os.cpu_count(), "other_cpu_seconds": None, "load_average_1m": load_average()},
    }
    if client_side and at_close is not None and cpu_after is not None:  # did generation stop with the client?
        record["server_cpu_after_close_seconds"] = round(cpu_after - at_close, 3)
    if cpu is not None and cpu_after is not None:
        record["server_cpu_seconds"] = round(cpu_after - cpu, 2)
        if busy is not None and busy_after is not None:  # everything but the server: how contended the cores were
            record["machine"]["other_cpu_seconds"] = round(busy_after - busy - (cpu_after - cpu), 2)
    return Captured(name, b"".join(chunks), record)


def capture_probe(server: ModelServer, probe: Probe) -> list[Captured]:
    """One probe's captures: one, or two when a second request interrupts the first."""
    if probe.via_relay:
        with Relay(upstream=server.base_url) as relay, httpx.Client(timeout=120) as client:
            captured = send(client, server, probe.name, probe, probe.body, base_url=relay.base_url)
        captured.record["client"] = {**(captured.record["client"] or {}), "via": "streamlab.net.relay.Relay"}
        return [captured]
    if probe.interrupt_after is None:
        with httpx.Client(timeout=120) as client:
            return [send(client, server, probe.name, probe, probe.body)]
    seconds: list[Captured] = []
    started: dict[str, float] = {}
    first_start = time.perf_counter()

    def second() -> None:
        with httpx.Client(timeout=120) as client:
            seconds.append(send(client, server, f"{probe.name}-second", probe, probe.second))

    thread = threading.Thread(target=second, name="capture-second", daemon=True)

    def on_read(n: int) -> None:
        if n == probe.interrupt_after and not thread.is_alive() and "at" not in started:
            started["at"] = round(time.perf_counter() - first_start, 6)
            thread.start()

    with httpx.Client(timeout=120) as client:
        first = send(client, server, f"{probe.name}-first", probe, probe.body, on_read=on_read)
    thread.join(timeout=180)
    first.record["client"] = {"second_request_sent_at": started.get("at"), "after_reads": probe.interrupt_after}
    if seconds:
        seconds[0].record["client"] = {
            "sent_while": f"{probe.name}-first was streaming",
            "sent_at_in_first": started.get("at"),
        }
    return [first, *seconds]


# -- the folder -------------------------------------------------------------------------------------------


def finish(
    captured: Captured, probe: Probe, server: ModelServer, sha256: str, date: str, target: Target | None = None
) -> None:
    """Redact what must not be shipped and complete the record with what is common to every capture (`target`:
    the server captured, llama-cpp-python's by default)."""
    target = target or TARGETS["llama-cpp-python"]
    stored, replaced = redact(captured.body, str(server.path or ""), str(Path.home()))
    captured.record["response"]["bytes_received"] = len(captured.body)
    captured.record["response"]["bytes_stored"] = len(stored)
    captured.record["redacted"] = (
        (f"{replaced} file path(s) in the body replaced with <redacted>; the stored bytes are otherwise as received")
        if replaced
        else None
    )
    captured.body = stored
    quirk = (
        probe.quirk
        if not captured.name.endswith("-second")
        else (f"The request sent while {probe.name}-first streamed: it streams normally, to finish_reason 'length'.")
    )
    captured.record = {
        "name": captured.name,
        "quirk": quirk,
        "captured": date,
        "server": {
            "name": target.name,
            "version": target.version,
            "flags": server.flags,
            **({"stack": server_stack()} if target.server == "llama-cpp-python" else {}),
        },
        "model": {
            "name": server.model,
            "file": MODEL_FILE,
            "sha256": sha256,
            "package": f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}",
        },
        **captured.record,
        "times": "seconds from the moment the request was sent; one read = one chunk from httpx's iter_raw",
    }


def write(
    folder: Path, captures: list[Captured], *, replace: bool, probes: tuple[Probe, ...] = PROBES, server: str = ""
) -> None:
    """Write each capture's two files and rebuild index.json from every record in the folder (in the order of
    `probes`); `replace` first removes the captures a full run no longer makes."""
    folder.mkdir(parents=True, exist_ok=True)
    if replace:
        for old in [*folder.glob("*.sse"), *folder.glob("*.json")]:
            old.unlink()
    for captured in captures:
        (folder / f"{captured.name}.sse").write_bytes(captured.body)
        (folder / f"{captured.name}.json").write_text(json.dumps(captured.record, indent=2, ensure_ascii=False) + "\n")
    order = [name for p in probes for name in (p.name, f"{p.name}-first", f"{p.name}-second")]
    records = [json.loads(path.read_text()) for path in folder.glob("*.json") if path.name != "index.json"]
    records.sort(key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
    index = [
        {
            "name": r["name"],
            "status": r["response"]["status"],
            "bytes": r["response"]["bytes_stored"],
            "captured": r["captured"],
            "quirk": r["quirk"],
        }
        for r in records
    ]
    first = records[0]
    (folder / "index.json").write_text(
        json.dumps(
            {
                "server": first["server"],
                "model": first["model"],
                "recapture": "python3 dev.py capture" + (f" --server {server}" if server else ""),
                "captures": index,
            },
            indent=2,
            ensure_ascii=False,
        )
        + "\n"
    )


def capture_all(
    folder: Path | None = None,
    *,
    gguf: str | None = None,
    only: tuple[str, ...] = (),
    log: Callable[[str], None] = print,
    server: str = "llama-cpp-python",
    llama_server: str | None = None,
) -> list[Path]:
    """Start the model server (`server`: a key of TARGETS; `llama_server` the binary, for llama-server), run
    every probe (or those named in `only`), write the folder (the packaged one by default); the files written."""
    target = TARGETS[server]
    folder = folder or CAPTURES.parent / target.folder
    probes = [p for p in target.probes if not only or p.name in only]
    unknown = sorted(set(only) - {p.name for p in target.probes})
    if unknown:
        names = ", ".join(p.name for p in target.probes)
        raise ValueError(f"no {server} probe named {', '.join(unknown)}; the probes are {names}")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    done: list[Captured] = []
    settings = list(dict.fromkeys(p.server for p in probes))  # one server per set of flags, in the probes' order
    sha256 = ""
    for extra in settings:
        with ModelServer(gguf, n_ctx=N_CTX, extra=extra, server=server, llama_server=llama_server) as running:
            sha256 = sha256 or (sha256_of(running.path) if running.path else "")
            log(f"serving {running.model} at {running.base_url} ({' '.join(running.flags)})")
            for probe in (p for p in probes if p.server == extra):
                for captured in capture_probe(running, probe):
                    finish(captured, probe, running, sha256, date, target)
                    response = captured.record["response"]
                    log(
                        f"  {captured.name}: {response['status']}, {response['bytes_stored']} bytes, "
                        f"{len(captured.record['reads'])} reads"
                    )
                    done.append(captured)
    write(folder, done, replace=not only, probes=target.probes, server="" if server == "llama-cpp-python" else server)
    return sorted(folder.iterdir())


def probe_named(name: str, *, server: str = "llama-cpp-python") -> Probe:
    """The probe that makes capture `name` (NAME, or NAME-first / NAME-second for an interrupting pair) on
    `server` (a key of TARGETS)."""
    for probe in TARGETS[server].probes:
        if name in (probe.name, f"{probe.name}-first", f"{probe.name}-second"):
            return probe
    names = ", ".join(p.name for p in TARGETS[server].probes)
    raise KeyError(f"no {server} probe makes a capture named {name!r}; the probes are {names}")


def capture_live(server: ModelServer, name: str, **changes: Any) -> dict[str, Capture]:
    """Run the probe behind capture `name` against a running model server now, and return what it captured as
    `streamlab.core.capture.Capture` values by name (two for an interrupting pair), written nowhere.

    `changes` replace fields of the probe's JSON body (`max_tokens=20` keeps a live run short). The records are
    those of the packaged captures, without the model file's sha256 (not computed, to save reading 253 MB).
    A probe made with other server flags (`Probe.server`) should meet a server started with them."""
    probe = probe_named(name)
    if changes:
        probe = dataclasses.replace(probe, body={**probe.body, **changes})
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out: dict[str, Capture] = {}
    for captured in capture_probe(server, probe):
        finish(captured, probe, server, "", date)
        out[captured.name] = Capture(captured.name, captured.body, captured.record)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 dev.py capture",
        description=(
            "Recapture every stream of one server in streamlab/data/captures/<server>-<version>-<model>/ from a "
            "freshly started server."
        ),
    )
    parser.add_argument("--server", choices=tuple(TARGETS), default="llama-cpp-python", help="the server to capture")
    parser.add_argument("--llama-server", metavar="PATH", help="the llama-server binary (default: from PATH)")
    parser.add_argument("--out", type=Path, default=None, help="folder to write (default: the packaged one)")
    parser.add_argument("--only", nargs="*", default=(), metavar="NAME", help="capture only these probes")
    args = parser.parse_args(argv)
    python_server = args.server == "llama-cpp-python"
    if missing_message(server=python_server):
        print(missing_message(server=python_server), file=sys.stderr)
        return 3
    try:
        written = capture_all(args.out, only=tuple(args.only), server=args.server, llama_server=args.llama_server)
    except (ValueError, ModelUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files to {args.out or CAPTURES.parent / TARGETS[args.server].folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
