"""Provider profiles for the stand-in: documented behaviour of real OpenAI-compatible servers (sans-IO core).

A `Profile` names a real server at a stated version and lists its `Quirk`s: each one says what the server does
differently from the OpenAI API reference, where that is documented (an issue, a pull request, a release
note), which conformance check (`streamlab.core.conformance.checks.CHECKS`) reports it and how (warn or fail), and
which `streamlab.core.standin.quirks` fault reproduces it. `variations` are changes that break no promise (an extra
field, a keep-alive comment, a tool call sent whole) and must draw no finding. The quirk list is data, so a
test can demand that `streamlab check` against the stand-in in a profile reports exactly those checks, no
more and no fewer.

The stand-in applies a profile in one place (`apply_profile`, called by the planner): to the episode it
would have played (a scripted one, or `answer_episode`, the answer it gives any model its script does not
name: text, a tool call when the request offers tools, in either dialect) and to the error reply for a
request it refuses. Profiles are snapshots of versions, not verdicts on today's releases: every quirk below
was fixed or changed later, and its docstring says when, where that is known.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from streamlab.core.conformance.checks import CHECKS, Status
from streamlab.core.shapes import (
    chat_text_stream,
    chat_tool_call_stream,
    responses_function_call_stream,
    responses_text_stream,
    with_logprobs,
)
from streamlab.core.standin.quirks import (
    FAULTS,
    Context,
    ErrorFix,
    RequestFix,
    StreamFix,
    apply_usage_rule,
    frames_of,
    steps_from,
    with_pings,
)
from streamlab.core.standin.script import Episode, ErrorEpisode, paced

__all__ = [
    "Quirk",
    "Profile",
    "PROFILES",
    "PROFILE_NAMES",
    "get_profile",
    "answer_episode",
    "apply_profile",
    "ANSWER_PIECES",
    "CAPTURES",
    "LLAMA_CPP_PYTHON_CAPTURES",
    "LLAMA_SERVER_CAPTURES",
]

ANSWER_PIECES = ["One", ", two", ", three", ", four", ", five", "."]
"""The text every profile's built-in answer streams (one piece per chunk)."""


CAPTURES = "streamlab/data/captures"
"""Where the real captures live (`streamlab.net.capture` writes them): one folder per server, version and model."""
LLAMA_CPP_PYTHON_CAPTURES = f"{CAPTURES}/llama-cpp-python-0.3.36-gemma3-270m-q4_k_m"
LLAMA_SERVER_CAPTURES = f"{CAPTURES}/llama-server-0.3.36-gemma3-270m-q4_k_m"
"""llama-server built from the llama.cpp that llama-cpp-python 0.3.36 vendors (`streamlab.net.model`)."""


@dataclass(frozen=True)
class Quirk:
    """One documented difference: the `check` that reports it, with which `status`, `what` the server does,
    the `sources` that document it, the `fault` that reproduces it, and the `capture` that shows it (the
    path of a real capture's bytes, `NAME.sse` beside its record `NAME.json`; "" when there is none)."""

    check: str
    status: Status
    what: str
    sources: tuple[str, ...]
    fault: str
    capture: str = ""

    def __post_init__(self) -> None:
        if self.check not in CHECKS:
            raise ValueError(f"quirk names an unknown check {self.check!r}")
        if self.fault not in FAULTS:
            raise ValueError(f"quirk names an unknown fault {self.fault!r}")
        if self.status not in (Status.WARN, Status.FAIL):
            raise ValueError(f"a quirk is a warn or a fail, not {self.status}")


@dataclass(frozen=True)
class Profile:
    """A server at a version: its `name`, a one-line `title`, the `doc` (where its behaviour is documented),
    its `quirks`, its `variations` (faults that must draw no finding), and `responses_404`, the body of the
    404 it answers `/v1/responses` with when that route is not served (None: it is served; the checker skips
    the Responses checks of a route that is not served, and says so). `ping_every`: the server writes a `: ping`
    keep-alive comment every that many seconds of a stream, tokens flowing or not (`quirks.with_pings`; a
    comment breaks no promise, so it draws no finding)."""

    name: str
    title: str
    doc: str
    quirks: tuple[Quirk, ...] = ()
    variations: tuple[str, ...] = ()
    responses_404: Mapping[str, Any] | None = None
    ping_every: float | None = None

    @property
    def faults(self) -> tuple[str, ...]:
        """The faults to apply, in order: each quirk's fault (once), then the variations."""
        names = [q.fault for q in self.quirks] + list(self.variations)
        return tuple(dict.fromkeys(names))

    def expected(self) -> dict[str, Status]:
        """The findings `streamlab check` must report against this profile: check id -> warn or fail."""
        return {q.check: q.status for q in self.quirks}


def _profile(build: Callable[[], Profile]) -> Profile:
    """A profile whose `doc` is its builder's docstring (the docstring says where each quirk is documented)."""
    first, _, rest = (build.__doc__ or "").partition("\n")
    doc = (first.strip() + "\n" + textwrap.dedent(rest)).strip()
    profile = build()
    return Profile(
        profile.name, profile.title, doc, profile.quirks, profile.variations, profile.responses_404, profile.ping_every
    )


W, F = Status.WARN, Status.FAIL


def _openai() -> Profile:
    """The documented stream, exactly: OpenAI's API reference.

    Chat Completions (https://platform.openai.com/docs/api-reference/chat-streaming): a role on the first delta,
    `"finish_reason": null` until each choice's final chunk, usage only when `stream_options.include_usage`
    asks for it (then in one extra chunk whose `choices` is empty), then `data: [DONE]`. Responses
    (https://platform.openai.com/docs/api-reference/responses-streaming): typed events whose `event:` line
    repeats the JSON `type`, `sequence_number` counting up, `.done` events equal to their deltas, one terminal
    event carrying the usage. Errors (https://platform.openai.com/docs/guides/error-codes): a 4xx with
    `{"error": {"message", "type", "param", "code"}}`. Every check passes against it.
    """
    return Profile("openai", "OpenAI API reference, exactly", "")


def _vllm() -> Profile:
    """vLLM's OpenAI-compatible server, version 0.9.1 (June 2025).

    * Streamed chunks leave `finish_reason` out instead of sending null: a regression from 0.8.5 reported in
      https://github.com/vllm-project/vllm/issues/19650, fixed by https://github.com/vllm-project/vllm/pull/19662.
    * Errors are `{"object": "error", "message": ..., "type": "BadRequestError", "param": null, "code": 400}`,
      not `{"error": {...}}`: https://github.com/vllm-project/vllm/issues/12886; the nested shape arrived in
      0.10.1 with https://github.com/vllm-project/vllm/pull/22099.
    * No `/v1/responses` route yet (https://github.com/vllm-project/vllm/issues/14721; added later by
      https://github.com/vllm-project/vllm/pull/20504): FastAPI's 404, `{"detail": "Not Found"}`.

    Not reproduced: with a *named* forced function vLLM answered finish_reason "tool_calls" where OpenAI says
    "stop" (https://github.com/vllm-project/vllm/pull/25054); the checker asks with `tool_choice: "required"`,
    where both say "tool_calls".
    """
    return Profile(
        "vllm",
        "vLLM 0.9.1 (June 2025)",
        "",
        (
            Quirk(
                "chat.finish_null",
                W,
                'chunks leave "finish_reason" out instead of null',
                ("https://github.com/vllm-project/vllm/issues/19650",),
                "omit_null_finish",
            ),
            Quirk(
                "error.shape",
                F,
                'errors are {"object": "error", "message": ...}, not {"error": {...}}',
                (
                    "https://github.com/vllm-project/vllm/issues/12886",
                    "https://github.com/vllm-project/vllm/pull/22099",
                ),
                "error_flat_envelope",
            ),
            Quirk(
                "error.not_json",
                F,
                "so is the refusal of a body that is not JSON",
                ("https://github.com/vllm-project/vllm/issues/12886",),
                "error_flat_envelope",
            ),
            Quirk(
                "error.too_long",
                F,
                "and the refusal of a prompt over the context",
                ("https://github.com/vllm-project/vllm/issues/12886",),
                "error_flat_envelope",
            ),
        ),
        responses_404={"detail": "Not Found"},
    )


OLLAMA_RESPONSES_404 = {"error": {"message": "404 page not found", "type": "not_found", "param": None, "code": None}}
"""What Ollama (0.5, with or without tools) answers a Responses request: its router's own 404."""


def _ollama() -> Profile:
    """Ollama's OpenAI-compatible endpoint (`/v1`), version 0.4.6 (November 2024).

    * Every delta repeats `"role": "assistant"`: https://github.com/ollama/ollama/issues/7626 (the official
      SDK's stream helper then builds the role "assistantassistant...", as
      https://github.com/pydantic/logfire/pull/545 found); OpenAI's shape came with
      https://github.com/ollama/ollama/pull/17485.
    * `stream_options.include_usage` is ignored, so no usage is ever streamed:
      https://github.com/ollama/ollama/issues/4448 and https://github.com/ollama/ollama/issues/5200; supported
      from 0.5.2 (https://github.com/ollama/ollama/releases/tag/v0.5.2).
    * Tool calls come whole, in one chunk (a variation, not a fault), and without an `index`:
      https://github.com/ollama/ollama/issues/7881, fixed in 0.4.7. (Later versions sent `index: 0` for every
      call of a parallel set: https://github.com/ollama/ollama/issues/15457; the checker asks for one call.)
    * No `/v1/responses`: the endpoints of https://github.com/ollama/ollama/blob/v0.4.6/docs/openai.md are
      chat completions, completions, models and embeddings (the Responses API was published in March 2025).
      Ollama's router answers an unknown
      path with `404 page not found` in text/plain; the stand-in sends JSON bodies only, so the profile sends
      that text as an error message.
    """
    return Profile(
        "ollama",
        "Ollama 0.4.6 (November 2024)",
        "",
        (
            Quirk(
                "chat.role_repeated",
                W,
                'every delta repeats "role": "assistant"',
                ("https://github.com/ollama/ollama/issues/7626",),
                "role_every_delta",
            ),
            Quirk(
                "usage.chunk",
                F,
                "stream_options.include_usage is ignored: no usage is streamed",
                ("https://github.com/ollama/ollama/issues/4448", "https://github.com/ollama/ollama/issues/5200"),
                "drop_usage",
            ),
            Quirk(
                "tools.index",
                F,
                "tool-call fragments come without an index",
                ("https://github.com/ollama/ollama/issues/7881",),
                "tool_call_no_index",
            ),
        ),
        variations=("tool_call_in_one_chunk",),
        responses_404=OLLAMA_RESPONSES_404,
    )


def _litellm() -> Profile:
    """The LiteLLM proxy, mid-2025 (around 1.74), in front of a Vertex AI Gemini deployment.

    * Null fields are left out of streamed chunks, `finish_reason` among them:
      https://github.com/BerriAI/liteLLM-proxy/issues/19 and https://github.com/brainlid/langchain/pull/367.
    * The usage chunk carries a choice, `[{"index": 0, "delta": {}}]`, instead of `choices: []`:
      https://github.com/BerriAI/litellm/issues/8450, still open as https://github.com/BerriAI/litellm/issues/28735;
      the bytes are quoted in https://github.com/agentjido/req_llm/issues/781.
    * A streamed Gemini tool call ends with finish_reason "stop", not "tool_calls":
      https://github.com/BerriAI/litellm/issues/12240 (a regression after 1.72; also
      https://github.com/BerriAI/litellm/issues/12862 for other providers).
    * `/v1/responses` is served and passed through as documented (the proxy also drops null-valued keys from
      Responses events, https://github.com/BerriAI/litellm/issues/41972, which no check here grades).
    """
    return Profile(
        "litellm",
        "LiteLLM proxy, mid-2025, Gemini upstream",
        "",
        (
            Quirk(
                "chat.finish_null",
                W,
                'null fields are left out, "finish_reason" among them',
                ("https://github.com/BerriAI/liteLLM-proxy/issues/19",),
                "omit_null_finish",
            ),
            Quirk(
                "usage.choices",
                W,
                'the usage chunk carries choices [{"index": 0, "delta": {}}]',
                ("https://github.com/BerriAI/litellm/issues/8450", "https://github.com/BerriAI/litellm/issues/28735"),
                "usage_chunk_with_choice",
            ),
            Quirk(
                "tools.finish",
                F,
                'a tool call ends with finish_reason "stop"',
                ("https://github.com/BerriAI/litellm/issues/12240",),
                "tool_finish_stop",
            ),
        ),
    )


def _llamacpp() -> Profile:
    """llama.cpp's `llama-server`, builds of summer 2025 (about b5900 to b6250). The current one differs (it
    sends usage only when asked, refuses with 400s and serves Responses): that is the `llama-server` profile.

    * Usage is always sent, asked for or not (https://github.com/ggml-org/llama.cpp/issues/12102), on the
      finish chunk rather than in a chunk of its own, with a `timings` object beside it
      (https://github.com/ggml-org/llama.cpp/issues/15443, b6210). https://github.com/ggml-org/llama.cpp/pull/15444
      moved it to its own chunk, sent always (https://github.com/ggml-org/llama.cpp/issues/16048).
    * A request refused after streaming was asked for gets HTTP 200 and the error inside the stream
      (https://github.com/ggml-org/llama.cpp/issues/14566; 400 for an over-long prompt since
      https://github.com/ggml-org/llama.cpp/pull/16486), written as an `error:` field line that SSE parsers
      ignore, then `data: [DONE]` (https://github.com/ggml-org/llama.cpp/issues/16104, fixed by
      https://github.com/ggml-org/llama.cpp/pull/16109; the bytes are quoted in
      https://github.com/coddy-project/coddy-agent/pull/106). The profile gives the checker's invalid request
      that treatment.
    * No `/v1/responses`: 404 "File Not Found" (https://github.com/ggml-org/llama.cpp/issues/14702, b5902;
      still requested in https://github.com/ggml-org/llama.cpp/issues/19138).
    """
    return Profile(
        "llamacpp",
        "llama.cpp llama-server, summer 2025",
        "",
        (
            Quirk(
                "usage.unrequested",
                W,
                "usage is sent although include_usage was not set",
                ("https://github.com/ggml-org/llama.cpp/issues/12102",),
                "usage_on_finish_chunk",
            ),
            Quirk(
                "usage.choices",
                W,
                "usage rides on the finish chunk, whose choices are not empty",
                ("https://github.com/ggml-org/llama.cpp/issues/15443",),
                "usage_on_finish_chunk",
            ),
            Quirk(
                "error.status",
                F,
                "a refused streaming request gets HTTP 200",
                ("https://github.com/ggml-org/llama.cpp/issues/14566",),
                "error_in_stream_field",
            ),
            Quirk(
                "errors.in_stream",
                F,
                "the error is an error: field line, which SSE parsers ignore",
                (
                    "https://github.com/ggml-org/llama.cpp/issues/16104",
                    "https://github.com/ggml-org/llama.cpp/pull/16109",
                ),
                "error_in_stream_field",
            ),
            Quirk(
                "error.too_long",
                F,
                "a streamed prompt over the context gets that treatment too (a 400 since PR 16486)",
                ("https://github.com/ggml-org/llama.cpp/pull/16486",),
                "error_in_stream_field",
            ),
        ),
        variations=("timings",),
        responses_404={"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}},
    )


def _broken() -> Profile:
    """Several faults at once, from no real server: a test target for a checker and for defensive clients.

    The Chat stream never sends `data: [DONE]`, never sends a role, changes its id on every chunk, adds one to
    `total_tokens`, repeats each tool call's id and type on every fragment, and puts `: ping` comments between
    frames (allowed: comments must be tolerated, so they draw no finding). A refused request gets a 500
    `{"detail": ...}`. The Responses stream repeats a `sequence_number`, says one character more in
    `output_text.done` than its deltas did, and sends its terminal event twice.
    """
    return Profile(
        "broken",
        "several faults at once (not a real server)",
        "",
        (
            Quirk("chat.done", F, "no data: [DONE]", (), "no_done"),
            Quirk("chat.id", W, "every chunk has another id", (), "id_changes"),
            Quirk("chat.role", F, "no role, ever", (), "no_role"),
            Quirk("usage.counts", F, "total_tokens is one more than prompt + completion", (), "usage_total_wrong"),
            Quirk("tools.header", W, "the call's id and type come on every fragment", (), "tool_id_every_fragment"),
            Quirk("error.status", F, "a refused request gets a 500", (), "error_500_detail"),
            Quirk("error.shape", F, 'the error body is {"detail": ...}', (), "error_500_detail"),
            Quirk("error.not_json", F, "a body that is not JSON gets the same 500", (), "error_500_detail"),
            Quirk("error.too_long", F, "a prompt over the context gets the same 500", (), "error_500_detail"),
            Quirk("responses.sequence", F, "a sequence_number is repeated", (), "seq_repeat"),
            Quirk("responses.done_matches", F, "output_text.done says more than its deltas", (), "done_text_differs"),
            Quirk("responses.terminal", F, "the terminal event comes twice", (), "double_terminal"),
        ),
        variations=("ping_comments",),
    )


def _llama_cpp_python() -> Profile:
    """llama-cpp-python 0.3.36's server (`python -m llama_cpp.server --chat_format gemma`), serving Gemma 3 270M.

    Every quirk is shown by a real capture in streamlab/data/captures/llama-cpp-python-0.3.36-gemma3-270m-q4_k_m/
    (NAME.sse, the bytes; NAME.json, the request and the time of every read), written by `streamlab.net.capture`:

    * `stream_options.include_usage` is ignored: no usage chunk is ever streamed (capture `include-usage`;
      https://github.com/abetlen/llama-cpp-python/issues/1640, and the unmerged
      https://github.com/abetlen/llama-cpp-python/pull/1552).
    * `tool_choice: "required"` (and "auto") is silently ignored with the gemma chat format: the model answers in
      text (capture `tool-choice-required`). Only a tool_choice that names the function gets a call, and that
      call (capture `tool-named`) repeats its `id`, `type` and the function's whole name in every fragment, sends
      `"role": null` on every delta after the first, and sends each fragment again as the deprecated
      `function_call`. Joined the way the official SDK joins fragments, the name reads
      `get_weatherget_weather...`.
    * A request that fails validation (`messages` not a list) gets a 500 `internal_server_error`, its message
      quoting the server's source file and line (capture `error-messages-not-list`; the capture's record says
      where it redacted the paths). A body that is not JSON breaks the error handler itself, and Starlette
      answers a plain-text 500 "Internal Server Error" (capture `error-not-json`).
    * A streamed prompt longer than the context gets a 200 with an empty body: no event, no error (capture
      `prompt-over-context`).
    * No `/v1/responses`: FastAPI's 404 `{"detail": "Not Found"}`, which the checker reports as a skip.
    * Every 15 s of a stream, tokens flowing or not, a keep-alive comment `: ping - ` and the UTC time (sse-starlette
      3.7's ping task, `SSE_STARLETTE_PING`): allowed, so no finding, but a stream that lasts longer than 15 s
      (a long prompt, a busy machine) carries them, and a client must skip them.

    Not graded by the checker: a request with no `messages` is accepted and generates until the context is full
    (capture `no-messages`); a second request mid-stream ends the first with `[DONE]` and no finish_reason
    (capture `interrupted`).
    """
    cap = LLAMA_CPP_PYTHON_CAPTURES
    return Profile(
        "llama-cpp-python",
        "llama-cpp-python 0.3.36 server, gemma chat format",
        "",
        (
            Quirk(
                "usage.chunk",
                F,
                "stream_options.include_usage is ignored: no usage is streamed",
                ("https://github.com/abetlen/llama-cpp-python/issues/1640",),
                "drop_usage",
                f"{cap}/include-usage.sse",
            ),
            Quirk(
                "tools.required",
                F,
                'tool_choice "required" is ignored: the answer is text',
                (),
                "required_ignored",
                f"{cap}/tool-choice-required.sse",
            ),
            Quirk(
                "tools.header",
                W,
                "a named call repeats its id and type in every fragment",
                (),
                "tool_id_every_fragment",
                f"{cap}/tool-named.sse",
            ),
            Quirk(
                "tools.name",
                F,
                "a named call repeats the function's whole name in every fragment",
                (),
                "tool_name_every_fragment",
                f"{cap}/tool-named.sse",
            ),
            Quirk(
                "chat.role_repeated",
                W,
                '"role": null on every delta of a call after the first',
                (),
                "role_null_in_tool_calls",
                f"{cap}/tool-named.sse",
            ),
            Quirk(
                "tools.legacy",
                W,
                "each call fragment is sent again as the deprecated function_call",
                (),
                "legacy_function_call",
                f"{cap}/tool-named.sse",
            ),
            Quirk(
                "error.status",
                F,
                "a request that fails validation gets a 500 quoting the server's source file",
                (),
                "validation_500_traceback",
                f"{cap}/error-messages-not-list.sse",
            ),
            Quirk(
                "error.not_json",
                F,
                'a body that is not JSON gets a plain-text 500 "Internal Server Error"',
                (),
                "not_json_500_text",
                f"{cap}/error-not-json.sse",
            ),
            Quirk(
                "error.too_long",
                F,
                "a streamed prompt over the context gets a 200 with an empty body",
                (),
                "too_long_empty_200",
                f"{cap}/prompt-over-context.sse",
            ),
        ),
        responses_404={"detail": "Not Found"},
        ping_every=15.0,
    )


def _llama_server() -> Profile:
    """llama.cpp's `llama-server`, built from the llama.cpp that llama-cpp-python 0.3.36 vendors, serving Gemma 3
    270M (`--jinja`).

    The Chat stream is the documented one (usage only when `include_usage` asks for it, in its own chunk, with a
    `timings` object beside it: an extra field, harmless), refusals are 400s shaped `{"error": {...}}`, and
    `/v1/responses` is served. Real captures in streamlab/data/captures/llama-server-0.3.36-gemma3-270m-q4_k_m/
    show what differs:

    * Responses events carry no `sequence_number`, no `output_index` and no `content_index` (capture
      `responses-text`): the official SDK's `responses.stream()` raises TypeError, and
      `streamlab.core.accumulate.ResponsesAccumulator` a FrameError. They are added by
      https://github.com/ggml-org/llama.cpp/pull/24957 (open as of this writing).
    * An answer stopped by `max_output_tokens` ends `response.completed`, not `response.incomplete` (capture
      `responses-max-output-tokens`; Gemma 270M is a base model, so every answer runs to the bound).
    * A body that is not JSON gets a 500 with the JSON library's parse error as the message (capture
      `error-not-json`).
    * Every tool_choice is ignored: "required" (capture `tool-choice-required`) and one naming the function
      (capture `tool-named`) both get a text answer to finish_reason 'length', with no tool call. A Responses
      request that offers tools is answered in text too (the variation `responses_tools_ignored`: no function call
      is ever played, so `responses.arguments` has nothing to grade and skips, as against the server).

    Not graded by the checker: the role chunk's delta carries `"content": null`; a second request mid-stream is
    served beside the first, which runs to its end (4 slots; captures `concurrent-first`, `concurrent-second`).
    """
    cap = LLAMA_SERVER_CAPTURES
    return Profile(
        "llama-server",
        "llama.cpp llama-server (as vendored by llama-cpp-python 0.3.36)",
        "",
        (
            Quirk(
                "responses.sequence",
                F,
                "Responses events carry no sequence_number",
                ("https://github.com/ggml-org/llama.cpp/pull/24957",),
                "no_sequence_number",
                f"{cap}/responses-text.sse",
            ),
            Quirk(
                "responses.indexes",
                F,
                "Responses events carry no output_index or content_index",
                ("https://github.com/ggml-org/llama.cpp/pull/24957",),
                "no_output_indexes",
                f"{cap}/responses-text.sse",
            ),
            Quirk(
                "responses.incomplete",
                F,
                "an answer stopped by max_output_tokens ends response.completed",
                (),
                "completed_at_cap",
                f"{cap}/responses-max-output-tokens.sse",
            ),
            Quirk(
                "error.not_json",
                F,
                "a body that is not JSON gets a 500",
                (),
                "not_json_500",
                f"{cap}/error-not-json.sse",
            ),
            Quirk(
                "tools.required",
                F,
                'tool_choice "required" is ignored: the answer is text',
                (),
                "tools_ignored",
                f"{cap}/tool-choice-required.sse",
            ),
            Quirk(
                "tools.named",
                F,
                "a tool_choice naming the function is ignored: the answer is text",
                (),
                "tools_ignored",
                f"{cap}/tool-named.sse",
            ),
        ),
        variations=("timings", "responses_tools_ignored"),
    )


_PLACEHOLDER_404 = {"error": {"message": "Not Found", "type": "not_found", "param": None, "code": None}}
"""The 404 of a profile whose server served no Responses route, where its real body was not recorded (a
placeholder: the checker only needs to see the route refused)."""


def _reasoning() -> Profile:
    """Reasoning streams as servers send them today, both dialects (not one real server: each shape is cited, the
    fault is made up).

    * Chat: the thinking streams before the answer in delta fields the OpenAI reference does not have, one chunk
      in each shape: `reasoning_content` (DeepSeek, https://api-docs.deepseek.com/guides/reasoning_model; llama.cpp;
      older vLLM), `reasoning` (newer vLLM after https://github.com/vllm-project/vllm/issues/27755, Ollama,
      OpenRouter), and the same text in both fields of one delta (vLLM's compatibility mirror,
      https://github.com/vllm-project/vllm/pull/34030, vllm-project/vllm#43933), which a client that appends every
      reasoning field it knows shows twice (https://github.com/MoonshotAI/kimi-code/issues/3928). A variation: the
      checker notes the fields on `chat.delta`; `ChatAccumulator.reasoning` keeps a mirrored piece once.
    * Responses: a reasoning item with its summary (`response.reasoning_summary_text.delta`, documented) before
      the message, and its `response.reasoning_summary_text.done` says one character more than the deltas did,
      which `responses.done_matches` fails: the checker grades the reasoning events it knows like the others.
    """
    return Profile(
        "reasoning",
        "reasoning streams: Chat fields, a Responses summary (not a real server)",
        "",
        (
            Quirk(
                "responses.done_matches",
                F,
                "a reasoning summary's .done says more than its deltas",
                (),
                "reasoning_done_differs",
            ),
        ),
        variations=("reasoning_mix",),
    )


def _ollama_tools() -> Profile:
    """Ollama's OpenAI-compatible endpoint with tools in the request, early 2025 (0.5.x).

    * With `tools` in a streamed request, the answer is not streamed token by token: the whole text comes in one
      chunk, and each tool call whole (https://github.com/ollama/ollama/issues/9092; tool-call streaming came in
      0.8.0, https://github.com/ollama/ollama/releases/tag/v0.8.0). Allowed by the reference, so no check fails;
      what it changes is the user's wait (lab 04): the first text arrives when the last would have.
    * Every delta still repeats `"role": "assistant"` (https://github.com/ollama/ollama/issues/7626, as in the
      `ollama` profile; fixed by https://github.com/ollama/ollama/pull/17485). Usage is streamed when asked (0.5.2)
      and tool calls carry their index (0.4.7), so the other 0.4.6 quirks are gone.
    * No `/v1/responses`, as in the `ollama` profile.
    """
    return Profile(
        "ollama-tools",
        "Ollama 0.5 with tools: no token streaming",
        "",
        (
            Quirk(
                "chat.role_repeated",
                W,
                'every delta repeats "role": "assistant"',
                ("https://github.com/ollama/ollama/issues/7626",),
                "role_every_delta",
            ),
        ),
        variations=("tools_not_streamed",),
        responses_404=OLLAMA_RESPONSES_404,
    )


def _azure() -> Profile:
    """Azure OpenAI's Chat Completions stream, with its content filter on (the default).

    * The first chunk carries the prompt's filter verdict, `prompt_filter_results`, with `choices: []` and empty
      `id`, `model` and `object` (https://learn.microsoft.com/en-us/azure/ai-services/openai/concepts/content-filter,
      "Streaming"; https://github.com/openai/openai-python/issues/1155): a loop that reads `chunk.choices[0]` fails
      on it before any text, and the checker warns on the chunk's object and id.
    """
    return Profile(
        "azure",
        "Azure OpenAI, content filter on",
        "",
        (
            Quirk(
                "chat.object",
                W,
                'the first chunk (prompt_filter_results, choices []) has "object": ""',
                ("https://github.com/openai/openai-python/issues/1155",),
                "azure_filter_first_chunk",
            ),
            Quirk(
                "chat.id",
                W,
                'the first chunk has "id": ""',
                ("https://github.com/openai/openai-python/issues/1155",),
                "azure_filter_first_chunk",
            ),
        ),
    )


def _groq() -> Profile:
    """Groq's OpenAI-compatible API, mid-2024 (also Bedrock models behind LiteLLM, 2025).

    * A request that sets `stream_options` is refused with a 400 naming it
      (https://github.com/vercel/ai/issues/1578; https://github.com/BerriAI/litellm/issues/9916): the usage probe
      gets no stream, so the checker cannot grade the usage chunk. The library's client
      (`streamlab.net.client.stream_chat`) retries such a 400 once without `stream_options`, and says so.
    * No `/v1/responses` at the time; the 404's body here is a placeholder.
    """
    return Profile(
        "groq",
        "Groq, mid-2024: stream_options refused",
        "",
        (
            Quirk(
                "chat.http",
                F,
                "a request with stream_options gets a 400 naming it",
                ("https://github.com/vercel/ai/issues/1578", "https://github.com/BerriAI/litellm/issues/9916"),
                "stream_options_400",
            ),
        ),
        responses_404=_PLACEHOLDER_404,
    )


def _usage_over_cap() -> Profile:
    """A usage count above the request's `max_tokens` (not one real server: a proxy that estimates usage).

    * The usage chunk counts more completion tokens than `max_tokens` allowed, which no answer bounded by it can
      have: billing and quotas read a number the model never produced. Course notes attribute it to the LiteLLM
      proxy around 1.108; no public report was found to cite, so the profile claims no server. The checker's
      `usage.counts` fails it.
    """
    return Profile(
        "usage-over-cap",
        "usage above max_tokens (not a real server)",
        "",
        (Quirk("usage.counts", F, "completion_tokens exceeds the request's max_tokens", (), "usage_over_max_tokens"),),
    )


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in map(
        _profile,
        (
            _openai,
            _vllm,
            _ollama,
            _litellm,
            _llamacpp,
            _broken,
            _llama_cpp_python,
            _llama_server,
            _reasoning,
            _ollama_tools,
            _azure,
            _groq,
            _usage_over_cap,
        ),
    )
}
"""Every profile, by name."""

PROFILE_NAMES: tuple[str, ...] = tuple(PROFILES)


def get_profile(profile: str | Profile) -> Profile:
    """The profile of that name (a Profile is returned as is); a ValueError lists the known names."""
    if isinstance(profile, Profile):
        return profile
    found = PROFILES.get(profile)
    if found is None:
        raise ValueError(f"unknown profile {profile!r}; known: {', '.join(PROFILE_NAMES)}")
    return found


# -- the answer the stand-in gives any model its script does not name --------------------------------------------


def _first_function(dialect: str, request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first function tool the request offers, as {"name", "parameters"} (either dialect's shape)."""
    tools = request.get("tools")  # checked by the planner, but not in a lenient room: any JSON may come here
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            continue
        spec = tool.get("function") if dialect == "chat" else tool
        if isinstance(spec, dict) and isinstance(spec.get("name"), str):
            parameters = spec.get("parameters")
            return {"name": spec["name"], "parameters": parameters if isinstance(parameters, dict) else {}}
    return None


def _example(name: str, schema: Any) -> Any:
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    return "Paris, France" if any(w in name for w in ("location", "city", "place")) else "example"


def _arguments(parameters: Mapping[str, Any]) -> str:
    """Arguments that satisfy a function's JSON schema at its simplest: one example value per property."""
    props = raw if isinstance(raw := parameters.get("properties"), dict) else {}
    return json.dumps({name: _example(name, schema) for name, schema in props.items()})


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def answer_episode(dialect: str, request: Mapping[str, Any]) -> Episode:
    """The built-in answer: the text of `ANSWER_PIECES`, or a call to the first function the request offers,
    in `dialect` ("chat" or "responses"), with usage (the usage rule of the profile decides whether it is sent),
    paced a few milliseconds apart. A Chat text answer to a request with `logprobs: true` carries each chunk's
    logprobs (`shapes.with_logprobs`), as the reference documents."""
    model = str(request.get("model") or "stand-in")
    tool = _first_function(dialect, request)
    if dialect == "chat":
        if tool is not None:
            frames = chat_tool_call_stream(
                [("call_standin_1", tool["name"], _pieces(_arguments(tool["parameters"])))],
                interleave=False,
                model=model,
                completion_id="chatcmpl-standin",
            )
        else:
            frames = chat_text_stream(ANSWER_PIECES, model=model, completion_id="chatcmpl-standin")
            if request.get("logprobs") is True:  # documented: each chunk then carries its tokens' logprobs
                frames = with_logprobs(frames)
    elif tool is not None:
        frames = responses_function_call_stream(
            _pieces(_arguments(tool["parameters"])),
            name=tool["name"],
            call_id="call_standin_1",
            model=model,
            response_id="resp_standin",
        )
    else:
        frames = responses_text_stream(ANSWER_PIECES, model=model, response_id="resp_standin")
    return Episode(paced(frames, first=0.01, gap=0.002))


# -- the one place a profile applies ------------------------------------------------------------------------------


def apply_profile(
    profile: Profile,
    answer: Episode | ErrorEpisode,
    *,
    dialect: str,
    request: Mapping[str, Any],
    not_json: bool = False,
) -> Episode | ErrorEpisode:
    """What a server with `profile` sends instead of `answer` (the documented episode, or the documented error
    reply) to `request`, on the `dialect`'s route: the same steps and timing, the frames changed by the
    profile's faults, usage sent as the profile's usage rule says. `not_json`: the request's body was not
    JSON at all (`request` is then empty, and `answer` the documented 400)."""
    ctx = Context(dialect, request, not_json)
    if dialect == "responses" and profile.responses_404 is not None:
        return ErrorEpisode(404, dict(profile.responses_404))
    faults = [FAULTS[name] for name in profile.faults]
    # A fault's kind says which of the two fixes its `apply` is ("error": the error reply's, else a stream's
    # frames'), which Fault's one field cannot tell a type checker: the casts below state it.
    if isinstance(answer, ErrorEpisode):
        result: Episode | ErrorEpisode = answer
        for fault in faults:
            if fault.kind == "error" and isinstance(result, ErrorEpisode):
                result = cast(ErrorFix, fault.apply)(result, ctx)
        return result
    for fault in faults:
        if fault.kind == "request":
            refused = cast(RequestFix, fault.apply)(answer, ctx)
            if isinstance(refused, ErrorEpisode):
                return refused
            answer = refused  # the episode as it was, or the one the server answers with instead
    frames = frames_of(answer.steps)
    if not any(f.owns_usage for f in faults if f.kind == dialect):
        frames = apply_usage_rule(frames, ctx)
    for fault in faults:
        if fault.kind == dialect:
            frames = cast(StreamFix, fault.apply)(frames, ctx)
    steps = steps_from(answer.steps, frames)
    if profile.ping_every is not None and ctx.streamed:  # the server's keep-alive clock runs beside the stream
        steps = with_pings(steps, profile.ping_every)
    return Episode(
        steps,
        body=answer.body,
        headers=answer.headers,
        store_as=answer.store_as,
        stored=answer.stored,
    )
