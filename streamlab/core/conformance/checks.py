"""What `streamlab check` sends and grades, and the report it prints (sans-IO core: plain data and text).

"OpenAI-compatible" is a claim about bytes on the wire. The conformance checker turns the claim into a list of
checks, each with an id, the promise it grades, and one line on why a client cares. This module holds that
catalogue (`CHECKS`), the requests the checker sends (`probes_for`: a small, fixed set, each bounded by
`max_tokens`: streamed with and without `stream_options.include_usage`, one that requires a tool call and one
that names the tool, three the API must refuse (an invalid request, a body that is not JSON, a prompt longer
than any context), and the same for the Responses API), the results it gets back (`ProbeResult`: status,
headers, raw body, arrival times, and whether the checker cut the body itself),
and the `Report` it makes of them: one `Finding` per check, pass / warn / fail / skip, with the evidence
located in the bytes (probe, event number, byte offset, the bytes quoted) and a `why`.

The verdicts themselves come from `streamlab.core.conformance.grade`; the requests are sent by `streamlab.net.check`.
Three rules shape every check:

* fail: code written from the documentation (the SDK's loop, an agent's tool loop, a billing job) loses data,
  crashes or does the wrong thing; warn: the documented contract is broken but a careful client survives;
  skip: the check could not run (no tool was called, no usage came, the route is not served, the checker's own
  deadline cut the stream before what the check reads). What the checker did itself (its deadline, its size cap,
  the `max_tokens` it sent, a keep-alive connection the server closed) is never a finding.
* Real models are not deterministic: no check compares the text of one answer with another's, and every
  count is judged against what the same stream carried.
* Timing facts (time to first token, gaps, keep-alive intervals) are reported, never graded: a slow model is
  not an incompatible one.

Exit codes (`Report.exit_code`): 0 nothing failed (warnings allowed), 1 something failed, 2 the endpoint could
not be checked (no connection, the API key was refused, or no probe got an HTTP response before the checker's
own deadline or cap stopped it: what never came passes nothing).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamlab.core.sse import is_event_stream
from streamlab.core.words import Word

__all__ = [
    "Status",
    "Check",
    "CHECKS",
    "CHECK_IDS",
    "GROUPS",
    "DIALECTS",
    "ProbeRequest",
    "probes_for",
    "ProbeResult",
    "Evidence",
    "Finding",
    "TimingFact",
    "Report",
    "GradedFinding",
    "GradedReport",
    "TOOL",
    "JSON_VERSION",
    "matrix_rows",
    "render_matrix",
]

JSON_VERSION = 1
"""The version of the `--json` format (bumped when a field changes meaning or disappears)."""

DIALECTS = ("chat", "responses", "both")


class Status(Word):
    """A check's verdict. `rank` orders them: a check over several streams reports its worst."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"

    @property
    def rank(self) -> int:
        return {"skip": 0, "pass": 1, "warn": 2, "fail": 3}[self.value]


@dataclass(frozen=True)
class Check:
    """One graded promise: `id` (stable, used in `--json` and in the profiles' quirk lists), the `group` it
    belongs to ("chat", "usage", "tools", "errors", "responses"), what it `promises`, and `why` it matters."""

    id: str
    group: str
    promises: str
    why: str


def _checks(*rows: tuple[str, str, str, str]) -> dict[str, Check]:
    return {row[0]: Check(*row) for row in rows}


CHECKS: dict[str, Check] = _checks(
    (
        "chat.http",
        "chat",
        "status 200 and text/event-stream before any event",
        "anything else is not a stream: the SDK raises, or a hand-written loop parses an error page",
    ),
    (
        "chat.framing",
        "chat",
        "every event a data: field ended by a blank line (any standard line ending, comments tolerated)",
        "a field the standard does not know is dropped by every parser, with its content",
    ),
    (
        "chat.done",
        "chat",
        "data: [DONE] exactly once, last, nothing after it",
        "without it a clean close cannot be told from a cut; the SDK never reads what follows it",
    ),
    (
        "chat.json",
        "chat",
        "every event's data is a JSON object (except [DONE])",
        "clients json.loads every data line: one that is not JSON ends the loop with an exception",
    ),
    (
        "chat.object",
        "chat",
        '"object": "chat.completion.chunk" on every chunk',
        "strict clients and typed SDKs in other languages validate it",
    ),
    ("chat.id", "chat", "one stable id on every chunk", "clients and relays key logs, caches and resumption on it"),
    (
        "chat.delta",
        "chat",
        "every choice has an integer index and a delta object",
        "code reads choices[i].delta; without them there is nothing to append",
    ),
    (
        "chat.role",
        "chat",
        'role "assistant" on the first delta of each choice',
        "clients that rebuild the message take its role from the first delta",
    ),
    (
        "chat.role_repeated",
        "chat",
        "the role only on the first delta: not repeated, not null after it",
        "the SDK's stream helper joins strings it sees again: the role becomes 'assistantassistant'; code that "
        'copies delta["role"] whenever the key is there loses the role to a null',
    ),
    (
        "chat.finish_null",
        "chat",
        '"finish_reason": null on every chunk before the final one',
        "a missing key reads as null with .get(), but breaks clients that validate the schema",
    ),
    (
        "chat.finish",
        "chat",
        "a finish_reason on each choice's final chunk, and no content after it",
        "without it a natural stop cannot be told from a cut or a limit",
    ),
    (
        "usage.unrequested",
        "usage",
        "no usage unless stream_options.include_usage asked for it",
        "an unasked chunk with choices == [] breaks the documented chunk.choices[0] loop",
    ),
    (
        "usage.chunk",
        "usage",
        "exactly one usage chunk when include_usage is set",
        "missing means the cost is unknown (never zero); running totals double-count when added up",
    ),
    (
        "usage.choices",
        "usage",
        "the usage chunk has choices == []",
        "clients that spot the usage chunk by its empty choices miss it, or count it twice",
    ),
    (
        "usage.counts",
        "usage",
        "prompt, completion and total tokens present, non-zero when text came, total = prompt + completion",
        "billing, quotas and rate limits read these numbers",
    ),
    (
        "tools.required",
        "tools",
        'a tool call when tool_choice is "required"',
        'an agent forces a call with "required": an answer in prose leaves its tool loop nothing to run',
    ),
    (
        "tools.named",
        "tools",
        "a call to the function tool_choice names",
        "naming the function is how a client forces one exact call: an answer in prose leaves nothing to run",
    ),
    (
        "tools.index",
        "tools",
        "every tool-call fragment has an integer index, one per call",
        "clients join fragments by index: without it the arguments of different calls run together",
    ),
    (
        "tools.header",
        "tools",
        "id and type sent once per call",
        "the SDK's stream helper joins repeated strings: an id sent twice becomes 'call_1call_1'",
    ),
    (
        "tools.name",
        "tools",
        "each call's function name, its fragments joined, names a function the request offered",
        "clients join name fragments as they join arguments (the SDK does): a name repeated in every fragment "
        "calls 'get_weatherget_weather', which no tool has",
    ),
    (
        "tools.arguments",
        "tools",
        "the arguments, joined once the call is complete, parse as a JSON object",
        "only whole arguments can be parsed, and a call whose arguments never parse must not run",
    ),
    (
        "tools.finish",
        "tools",
        'finish_reason "tool_calls" when a tool was called',
        'agent loops run tools when finish_reason says so: "stop" ends the turn with the call never run',
    ),
    (
        "tools.legacy",
        "tools",
        "tool calls in tool_calls only, no deprecated function_call beside them",
        "a client that still reads function_call as well runs the call twice, and joins its repeated name too",
    ),
    (
        "error.status",
        "errors",
        "a request the API must refuse is answered with a 4xx",
        "a 200 hides the refusal inside a stream; a 5xx invites retries that can never succeed",
    ),
    (
        "error.shape",
        "errors",
        'an OpenAI-shaped body: {"error": {"message": ...}}',
        "clients read error.message: another shape loses it (the Node SDK shows a bare status, vllm#12886)",
    ),
    (
        "error.not_json",
        "errors",
        "a request body that is not JSON is refused with a 4xx and an OpenAI-shaped error",
        "a 5xx invites retries that can never succeed, and a plain-text body has no error.message to show",
    ),
    (
        "error.too_long",
        "errors",
        "a prompt longer than the model's context is refused: a 4xx (or an error event), never an empty or silent 200",
        "an empty 200 reads as an answer with nothing in it: the client cannot tell that the prompt was too long",
    ),
    (
        "errors.in_stream",
        "errors",
        'an error inside a 200 stream is a data: {"error": ...} event (Chat) or an error event (Responses)',
        "anything else looks like a normal end, and a failed answer passes as whole",
    ),
    (
        "responses.http",
        "responses",
        "the Responses route answers 200 text/event-stream",
        "client.responses calls fail outright where the route is missing",
    ),
    (
        "responses.framing",
        "responses",
        "every event ended by a blank line (any standard line ending, comments tolerated)",
        "a field the standard does not know is dropped by every parser, with its content",
    ),
    (
        "responses.event_type",
        "responses",
        "each event is JSON with a type, and its event: line equals it",
        "clients dispatch on one or the other: when they disagree, handlers see the wrong event",
    ),
    (
        "responses.sequence",
        "responses",
        "sequence_number on every event, strictly increasing",
        "resuming with starting_after, and spotting lost or replayed events, rely on it",
    ),
    (
        "responses.indexes",
        "responses",
        "output_index on every output event, content_index on every content event",
        "the SDK's responses.stream() raises TypeError without them, and a client that files deltas by index has "
        "nowhere to put them",
    ),
    (
        "responses.done_matches",
        "responses",
        "each .done value equals its joined deltas",
        "a client that shows the deltas and stores the .done value keeps an answer it never displayed",
    ),
    (
        "responses.terminal",
        "responses",
        "exactly one terminal event (completed, incomplete or failed), last",
        "the terminal event is the only proof that the answer is whole",
    ),
    (
        "responses.incomplete",
        "responses",
        "an answer stopped by max_output_tokens ends response.incomplete, not response.completed",
        "response.completed tells the client the answer is whole: a cut answer passes as complete",
    ),
    (
        "responses.usage",
        "responses",
        "usage on response.completed: input, output and total tokens, adding up",
        "billing, quotas and rate limits read these numbers",
    ),
    (
        "responses.arguments",
        "responses",
        "function-call arguments parse as a JSON object",
        "a call whose arguments never parse must not run",
    ),
)
"""Every check, in report order."""

CHECK_IDS: tuple[str, ...] = tuple(CHECKS)
GROUPS: tuple[str, ...] = ("chat", "usage", "tools", "errors", "responses")


# -- what is sent ---------------------------------------------------------------------------------------------

TEXT_PROMPT = "Count from one to five in words, on one line."
TOOL_PROMPT = "What is the weather in Paris right now? Use the get_weather tool."
_WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {
        "location": {
            "type": "string",
            "description": "a city and its country, e.g. Paris, France",
            "enum": ["Paris, France", "London, United Kingdom", "Tokyo, Japan"],
        }
    },
    "required": ["location"],
}
TOOL = {"name": "get_weather", "description": "The current weather in a city.", "parameters": _WEATHER_PARAMETERS}
"""The one function the tool probes offer. The location is an enum so that a server which constrains the
arguments to the schema (llama.cpp's grammars do) gets a short, fixed answer: free text lets a small model
ramble to the token bound, and the verdict would depend on what it happened to write."""

MAX_TOKENS = 40
"""The generation bound every probe sends (`max_tokens`, `max_output_tokens`): a model that rambles (a base model
does, until its context is full) stops there, so a whole run takes seconds, not minutes."""
LONG_SENTENCE = "The quick brown fox jumps over the lazy dog, and the dog does not mind at all. "
LONG_REPEATS = 3000
"""The over-long prompt is `LONG_SENTENCE` this many times: about 240,000 characters, over 50,000 tokens with
the usual tokenizers (Gemma 3's: 57,000), past a 32K context and any server's default. A model whose context
holds it answers, and the check says the prompt fit."""
NOT_JSON = b'{"model": "any", "stream": true, "messages": [{"role": "user", "content": "Count to five."}'
"""The body that is not JSON: a request cut off before its closing brackets (sent as application/json)."""


@dataclass(frozen=True)
class ProbeRequest:
    """One request the checker sends: `name` ("chat.usage"), the `dialect`, the `route` under the base URL,
    and the JSON `body` (or `raw`: bytes sent as they are, as application/json). `kind` says what the response
    is graded as: "text", "usage", "tools" (tool_choice "required"), "named" (tool_choice naming the function),
    "error" (a request the API must refuse), "not_json" (a body that is not JSON) or "too_long" (a prompt
    longer than any context)."""

    name: str
    dialect: str
    route: str
    kind: str
    body: Mapping[str, Any]
    raw: bytes | None = None

    @property
    def content(self) -> bytes:
        """The request body's bytes, as sent."""
        return self.raw if self.raw is not None else json.dumps(dict(self.body)).encode()

    @property
    def cap(self) -> int | None:
        """The generation bound this probe asked for (`max_tokens` or `max_output_tokens`), or None."""
        value = self.body.get("max_tokens", self.body.get("max_output_tokens"))
        return value if isinstance(value, int) else None


def probes_for(dialect: str, model: str, *, max_tokens: int = MAX_TOKENS) -> list[ProbeRequest]:
    """The requests for `dialect` ("chat", "responses" or "both"), in the order they are sent.

    Every answer is bounded by `max_tokens` (Chat) or `max_output_tokens` (Responses). The first Chat tool probe
    asks with `tool_choice: "required"`, whose documented answer is a call ending "tool_calls"; the second names
    the function, which even a model that ignores "required" must call (OpenAI then ends the stream with
    finish_reason "stop", as vllm-project/vllm#25054 measured, so either reason passes there). The body that is
    not JSON and the over-long prompt go to the Chat route (to the Responses route with `--dialect responses`).
    """
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {DIALECTS}, got {dialect!r}")
    say = [{"role": "user", "content": TEXT_PROMPT}]
    ask = [{"role": "user", "content": TOOL_PROMPT}]
    long = LONG_SENTENCE * LONG_REPEATS
    chat_tool = {"type": "function", "function": TOOL}
    named = {"type": "function", "function": {"name": TOOL["name"]}}
    chat = {"model": model, "stream": True, "max_tokens": max_tokens}
    resp = {"model": model, "stream": True, "max_output_tokens": max_tokens}
    probes: list[ProbeRequest] = []
    if dialect in ("chat", "both"):
        probes += [
            ProbeRequest("chat.plain", "chat", "chat/completions", "text", {**chat, "messages": say}),
            ProbeRequest(
                "chat.usage",
                "chat",
                "chat/completions",
                "usage",
                {**chat, "messages": say, "stream_options": {"include_usage": True}},
            ),
            ProbeRequest(
                "chat.tools",
                "chat",
                "chat/completions",
                "tools",
                {**chat, "messages": ask, "tools": [chat_tool], "tool_choice": "required"},
            ),
            ProbeRequest(
                "chat.named",
                "chat",
                "chat/completions",
                "named",
                {**chat, "messages": ask, "tools": [chat_tool], "tool_choice": named},
            ),
            ProbeRequest(
                "chat.error",
                "chat",
                "chat/completions",
                "error",
                {**chat, "messages": "this should be a list of messages"},
            ),
            ProbeRequest("chat.not_json", "chat", "chat/completions", "not_json", {}, NOT_JSON),
            ProbeRequest(
                "chat.too_long",
                "chat",
                "chat/completions",
                "too_long",
                {**chat, "messages": [{"role": "user", "content": long}], "max_tokens": 1},
            ),
        ]
    if dialect in ("responses", "both"):
        probes += [
            ProbeRequest("responses.text", "responses", "responses", "text", {**resp, "input": TEXT_PROMPT}),
            ProbeRequest(
                "responses.tools",
                "responses",
                "responses",
                "tools",
                {**resp, "input": TOOL_PROMPT, "tools": [{"type": "function", **TOOL}], "tool_choice": "required"},
            ),
            ProbeRequest("responses.error", "responses", "responses", "error", {**resp, "input": 42}),
        ]
    if dialect == "responses":
        probes += [
            ProbeRequest("responses.not_json", "responses", "responses", "not_json", {}, NOT_JSON),
            ProbeRequest(
                "responses.too_long",
                "responses",
                "responses",
                "too_long",
                {**resp, "input": long, "max_output_tokens": 16},
            ),
        ]
    return probes


# -- what came back -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeResult:
    """What one request got: `status` (None when no HTTP response arrived), response `headers` (lower-case
    names), the raw `body` bytes as read (after the transfer coding), `arrivals` as (bytes received so far,
    seconds since the request was sent) per network read, `headers_at` (seconds until the headers came),
    `problem`: why reading stopped early on the server's side (no response, the body broke off, a read timed
    out), or None; and `cut`: why the checker stopped reading itself (its deadline, its size cap), or None. A
    cut stream is graded on what arrived, and what it never got to (its end) is not a finding."""

    request: ProbeRequest
    status: int | None
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    arrivals: tuple[tuple[int, float], ...] = ()
    headers_at: float | None = None
    problem: str | None = None
    cut: str | None = None

    @property
    def name(self) -> str:
        return self.request.name

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        want = name.lower()
        return next((v for k, v in self.headers if k.lower() == want), None)

    @property
    def media_type(self) -> str:
        """The Content-Type without parameters, lower-case ("" when there is none)."""
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    @property
    def is_event_stream(self) -> bool:
        """A 200 whose Content-Type is an event stream, by the library's one rule (`streamlab.core.sse`)."""
        return self.status == 200 and is_event_stream(self.header("content-type"))


@dataclass(frozen=True)
class Evidence:
    """Where a check looked: the `probe`, the 1-based `event` number in its stream (None for the status line
    or the body as a whole), the `offset` of the quoted bytes in the body, and the bytes themselves (`quote`,
    as a Python bytes literal, shortened)."""

    probe: str
    event: int | None = None
    offset: int | None = None
    quote: str = ""

    def line(self) -> str:
        where = [self.probe]
        if self.event is not None:
            where.append(f"event #{self.event}")
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        return ", ".join(where) + (f": {self.quote}" if self.quote else "")

    def as_dict(self) -> dict[str, Any]:
        return {"probe": self.probe, "event": self.event, "offset": self.offset, "bytes": self.quote}


@dataclass(frozen=True)
class GradedFinding:
    """What every checker's finding shares (`streamlab check`, `streamlab check-path`): one check's `status`, what
    was seen (`detail`) and the `evidence`; `why` and the promise come from the checker's own catalogue
    (`catalogue()`: `CHECKS` here, `PATH_CHECKS` for the path)."""

    check: str
    status: Status
    detail: str
    evidence: Evidence | None = None

    @classmethod
    def catalogue(cls) -> Mapping[str, Any]:
        """The checks this kind of finding is about, by id: each has `group`, `promises` and `why`."""
        raise NotImplementedError

    @property
    def why(self) -> str:
        return str(self.catalogue()[self.check].why)

    def as_dict(self) -> dict[str, Any]:
        c = self.catalogue()[self.check]
        return {
            "id": self.check,
            "group": c.group,
            "status": self.status.value,
            "promises": c.promises,
            "detail": self.detail,
            "why": c.why,
            "evidence": self.evidence.as_dict() if self.evidence else None,
        }


@dataclass(frozen=True)
class Finding(GradedFinding):
    """One check's verdict on the endpoint: `status`, what was seen (`detail`), and the `evidence`."""

    @classmethod
    def catalogue(cls) -> Mapping[str, Any]:
        return CHECKS


@dataclass(frozen=True)
class TimingFact:
    """Timing of one streamed probe, in seconds since its request was sent; reported, never graded. None
    where it does not apply (no content event came, no keep-alive came)."""

    probe: str
    headers: float | None
    first_content: float | None
    max_gap: float | None
    keepalives: int
    max_keepalive_interval: float | None
    total: float | None
    events: int
    bytes: int

    def line(self) -> str:
        def s(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}s"

        ka = f"{self.keepalives} keep-alive(s)" + (
            f" (at most {s(self.max_keepalive_interval)} apart)" if self.max_keepalive_interval is not None else ""
        )
        return (
            f"  {self.probe:<16} headers {s(self.headers)}  first content {s(self.first_content)}  "
            f"max gap {s(self.max_gap)}  total {s(self.total)}  {self.events} events  {ka}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "headers_s": self.headers,
            "first_content_s": self.first_content,
            "max_gap_s": self.max_gap,
            "keepalives": self.keepalives,
            "max_keepalive_interval_s": self.max_keepalive_interval,
            "total_s": self.total,
            "events": self.events,
            "bytes": self.bytes,
        }


# -- the report -----------------------------------------------------------------------------------------------


class GradedReport:
    """What every checker's report shares (`streamlab check`, `streamlab check-path`): the findings counted by
    status, the exit code (0 nothing failed, 1 a check failed, 2 could not check: `error` says why), the verdict
    word and the summary line that ends the printed report."""

    findings: list[Any]

    @property
    def error(self) -> str | None:
        """Why nothing could be checked (None when it could)."""
        return None

    def counts(self) -> dict[str, int]:
        return {s.value: sum(f.status is s for f in self.findings) for s in Status}

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 2
        return 1 if any(f.status is Status.FAIL for f in self.findings) else 0

    @property
    def verdict(self) -> str:
        return {0: "pass", 1: "fail", 2: "could not be checked"}[self.exit_code]

    def summary(self) -> str:
        """The last line of a printed report: "N pass, N warn, N fail, N skip: VERDICT (exit N)"."""
        c = self.counts()
        counted = f"{c['pass']} pass, {c['warn']} warn, {c['fail']} fail, {c['skip']} skip"
        return f"{counted}: {self.verdict} (exit {self.exit_code})"


@dataclass
class Report(GradedReport):
    """The checker's verdict on one endpoint: a finding per check (in `CHECKS` order), timing facts, and the
    probes' status lines. `unreachable` says why nothing could be checked (then `findings` is empty)."""

    base_url: str
    model: str
    dialect: str
    findings: list[Finding] = field(default_factory=list)
    timings: list[TimingFact] = field(default_factory=list)
    probes: list[str] = field(default_factory=list)
    unreachable: str | None = None

    def finding(self, check: str) -> Finding | None:
        return next((f for f in self.findings if f.check == check), None)

    @property
    def error(self) -> str | None:
        return self.unreachable

    def issues(self) -> dict[str, Status]:
        """The checks that did not pass and did not skip, with their status: what a profile's quirks predict."""
        return {f.check: f.status for f in self.findings if f.status in (Status.WARN, Status.FAIL)}

    def render(self, *, timings: bool = True, passes: bool = True, width: int = 110) -> str:
        """The report card as text: one row per check, evidence and why under each warn and fail."""
        lines = [f"streamlab check {self.base_url}  model={self.model}  dialect={self.dialect}"]
        if self.unreachable is not None:
            lines.append(f"could not be checked: {self.unreachable}")
            lines.append("exit 2")
            return "\n".join(lines)
        lines += [f"  {p}" for p in self.probes]
        lines.append("")
        for finding in self.findings:
            if not passes and finding.status is Status.PASS:
                continue
            lines.append(_clip(f"  {finding.status.value.upper():<5} {finding.check:<22} {finding.detail}", width))
            if finding.status in (Status.WARN, Status.FAIL):
                if finding.evidence is not None:
                    lines.append(_clip(f"        evidence: {finding.evidence.line()}", width))
                lines.append(_clip(f"        why: {finding.why}", width))
        if timings and self.timings:
            lines += ["", "timing (reported, never graded):"]
            lines += [t.line() for t in self.timings]
        lines += ["", self.summary()]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """The `--json` document (see the README's "Checking an endpoint" section)."""
        return {
            "tool": "streamlab check",
            "version": JSON_VERSION,
            "base_url": self.base_url,
            "model": self.model,
            "dialect": self.dialect,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "error": self.unreachable,
            "summary": self.counts(),
            "checks": [f.as_dict() for f in self.findings],
            "timings": [t.as_dict() for t in self.timings],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent, ensure_ascii=False)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


# -- several endpoints side by side ---------------------------------------------------------------------------

_MARK = {Status.PASS: ".", Status.WARN: "W", Status.FAIL: "F", Status.SKIP: "-"}


def matrix_rows(reports: Mapping[str, Report], checks: Sequence[str] | None = None) -> list[tuple[str, list[Status]]]:
    """(check id, the status under each report in order) for every check that any report graded."""
    wanted = (
        list(checks) if checks is not None else [c for c in CHECK_IDS if any(r.finding(c) for r in reports.values())]
    )
    rows = []
    for check in wanted:
        statuses = []
        for report in reports.values():
            f = report.finding(check)
            statuses.append(f.status if f is not None else Status.SKIP)
        rows.append((check, statuses))
    return rows


def render_matrix(reports: Mapping[str, Report], checks: Iterable[str] | None = None) -> str:
    """The compatibility matrix as text: checks down, endpoints across, "." pass, W warn, F fail, - skip."""
    names = list(reports)
    rows = matrix_rows(reports, list(checks) if checks is not None else None)
    width = max([len(c) for c, _ in rows] + [5])
    cols = [max(len(n), 4) for n in names]
    lines = [" " * (width + 2) + "  ".join(n.rjust(w) for n, w in zip(names, cols))]
    for check, statuses in rows:
        lines.append(f"{check:<{width}}  " + "  ".join(_MARK[s].rjust(w) for s, w in zip(statuses, cols)))
    lines.append("(. pass, W warn, F fail, - skip)")
    return "\n".join(lines)
