"""Rebuild the answer from streamed deltas, and say honestly how the stream ended (sans-IO core).

A streamed answer arrives in pieces: a delta is a fragment to append, never a snapshot. The two
accumulators here are fed parsed `SSEEvent`s one at a time (sans-IO: no sockets, no clocks) and keep the
pieces per slot:

* `ChatAccumulator` (Chat Completions): text, refusal and finish reason per choice index; tool calls
  keyed by (choice index, tool index) with every fragment concatenated; usage; whether `[DONE]` came;
  `reasoning` (a reasoning model's thinking, from `delta.reasoning_content` or `delta.reasoning`, never
  mixed into `text`; a delta carrying both with the same text counts once) and `logprobs` (every chunk's
  `logprobs.content` entries concatenated, per choice).
* `ResponsesAccumulator` (Responses): text by (output_index, content_index), function-call arguments by
  output_index, output items, the terminal status and usage; `reasoning_summary` / `reasoning_text` (the
  reasoning events' text, apart from the answer) and `queued` (`response.queued` came); it checks
  `sequence_number` by the resume cursor's one rule (`streamlab.core.resume.sequence_verdict`: a number above
  the last, but a keep-alive may repeat one) and that the concatenated deltas equal the `.done` values.

Both give `outcome()`, one of five `Outcome`s. "The loop ended" is not "the answer is complete":

========== ==============================================================================================
complete   the terminal marker came and nothing was cut: Chat `[DONE]` with every choice finished by
           "stop" / "tool_calls"; Responses `response.completed`.
incomplete the server ended the answer early on purpose and said so: finish_reason "length" or
           "content_filter", `[DONE]` with a choice that never got a finish_reason, `response.incomplete`
           (see `incomplete_reason`).
failed     the server reported an error: an error object inside the 200 stream (`ErrorInStream` is raised),
           a Responses `error` event, or `response.failed`.
truncated  the bytes stopped without a terminal marker: a dropped connection, a proxy timeout.
cancelled  our side stopped reading (the caller called `cancel()`) before the terminal marker. It wins
           over truncated: the missing end is our doing, not the server's.
========== ==============================================================================================

Errors are loud and keep what was received: a `data:` that is not JSON raises `FrameError`, a replayed
or reordered Responses event raises `SequenceError`, an error object raises `ErrorInStream`; the text and
calls gathered so far stay in the accumulator. A tool call's arguments are parsed only when the call is
complete (`ToolCallError` otherwise), so half a JSON document never reaches a function, nor does a call whose
whole name came again in every fragment (joined, as the SDK joins it, it names no function). Whatever the JSON
(nested past Python's recursion limit, a number of thousands of digits, a field of the wrong type), only
these documented errors escape.

Cost is linear in the bytes fed: text, refusals, arguments and tool-call names are kept as lists of pieces
and joined when read (`text`, `refusal`, `arguments` and `ToolCall.arguments` return plain strings, and
keep the joined string so a second read costs nothing), never grown with `s = s + piece`, which copies
the whole string on every delta. And a Chat chunk that is the JSON of the text chunk before it but for its
text is read without decoding the rest (`streamlab.core.pieces.OneHole`: exact, and a fifth of the cost).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from streamlab.core.endings import Outcome
from streamlab.core.errors import ErrorInStream, FrameError, SequenceError, ToolCallError
from streamlab.core.pieces import EventReader, GrownText, LearnedShape, add_piece, joined, parse_arguments, short
from streamlab.core.resume import sequence_verdict
from streamlab.core.shapes import REASONING_FIELDS, RESPONSES_TERMINAL_STATUS
from streamlab.core.sse import SSEEvent, SSEParser

__all__ = [
    "ToolCall",
    "Disagreement",
    "ChatAccumulator",
    "ResponsesAccumulator",
    "Replay",
    "replay",
    "INCOMPLETE_FINISH_REASONS",
    "RESPONSES_KNOWN_EVENTS",
]

_STR_OR_NULL = frozenset({str, type(None)})

INCOMPLETE_FINISH_REASONS = frozenset({"length", "content_filter"})
"""Chat finish reasons that mean the answer was cut short on purpose (token limit, content filter)."""

RESPONSES_KNOWN_EVENTS = frozenset(
    {
        *RESPONSES_TERMINAL_STATUS,
        "error",
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.delta",
        "response.refusal.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
    }
)
"""Responses event types this accumulator knows (the ones it needs plus documented ones it may ignore).
Anything else is counted in `unknown_events` and skipped, as the API reference tells clients to do."""

_REASONING_EVENTS = {
    "response.reasoning_summary_text.delta": ("reasoning_summary", "summary_index"),
    "response.reasoning_summary_text.done": ("reasoning_summary", "summary_index"),
    "response.reasoning_text.delta": ("reasoning_text", "content_index"),
    "response.reasoning_text.done": ("reasoning_text", "content_index"),
}
"""The reasoning events whose text the Responses accumulator keeps (apart from the answer), and the index that
names the part each one extends."""


@dataclass
class ToolCall:
    """A Chat tool call rebuilt from its fragments (`delta.tool_calls[]` entries sharing one `index`).

    `name` and `arguments` are the concatenation of every fragment's pieces (kept as pieces, joined when read),
    as the official SDK joins them. `name_fragments` counts the fragments that carried a piece of the name, and
    `name_repeated` is the whole name when more than one did and each carried the same string (a server that
    repeats the name in every fragment, as llama-cpp-python does: joined, it names no function), else None.
    """

    choice: int
    index: int
    id: str | None = None
    type: str | None = None
    name: str = GrownText()  # type: ignore[assignment]
    arguments: str = GrownText()  # type: ignore[assignment]
    fragments: int = 0
    name_fragments: int = 0
    name_repeated: str | None = None
    _first_name: str | None = field(default=None, repr=False, compare=False)

    def add(self, field: str, piece: str) -> None:
        """Append a piece to `name` or `arguments` without copying what is already there."""
        type(self).__dict__[field].add(self, piece)


class Disagreement(NamedTuple):
    """A place where the concatenated deltas differ from the server's own final value."""

    what: str  # "text", "refusal", "arguments", "reasoning_summary" or "reasoning_text"
    key: Any  # (output_index, content_index) for text and refusal, output_index for arguments
    built: str  # what the deltas concatenate to
    done: str  # what the `.done` event (or the done item) says


class ChatAccumulator(EventReader):
    """Rebuild a Chat Completions answer from `chat.completion.chunk` events.

    Attributes, all keyed by choice index (several choices when the request set `n > 1`):
    `role`, `text`, `refusal`, `finish_reason`; `tool_calls` keyed by (choice index, tool index);
    `usage` (the last non-null usage seen: the final usage chunk, or the latest running count from a
    server that sends usage on every chunk); `saw_done` (the literal `[DONE]` arrived); `error`;
    `ignored_events` (events with an `event:` name, such as `event: ping`; Chat chunks have none).
    `text` and `refusal` are fresh dicts of plain strings on every read (the pieces are joined then).
    """

    def __init__(self) -> None:
        super().__init__()
        self.role: dict[int, str] = {}
        self._text: dict[int, list[str]] = {}
        self._refusal: dict[int, list[str]] = {}
        self.finish_reason: dict[int, str] = {}
        self.tool_calls: dict[tuple[int, int], ToolCall] = {}
        self.usage: dict[str, Any] | None = None
        self.usage_chunks = 0  # chunks that carried a non-null usage (1 for OpenAI; every chunk for some servers)
        self.saw_done = False
        self.chunks = 0
        self.ignored_events = 0
        self.choices: set[int] = set()
        self._reasoning: dict[int, list[str]] = {}
        self.reasoning_fields: dict[str, int] = {}  # delta field name -> deltas that carried it (see `reasoning`)
        self.reasoning_mirrored = 0  # deltas that carried the same text in both reasoning fields (kept once)
        self.logprobs: dict[int, list[dict[str, Any]]] = {}  # choice -> every chunk's logprobs.content, in order
        self._shape = LearnedShape()  # of the latest text chunks: they are read without decoding all their JSON

    def feed(self, event: SSEEvent) -> None:
        """Take the next event; raises ErrorInStream on an error object, FrameError on a malformed frame."""
        self.events += 1
        if self.saw_done or self.error is not None:
            self.late_events += 1  # nothing may follow [DONE] or an error; keep what we have
            return
        hole = self._shape.hole
        if hole is not None and event.event == "message":  # (such a chunk is not [DONE]: it is a JSON object)
            piece = hole.read(event.data)
            if piece is not None:  # the JSON of the last text chunk but for its text: do what the slow way would
                self.chunks += 1
                self._text[self._shape.key].append(piece)
                return
        if event.event not in ("message", "error"):
            self.ignored_events += 1  # e.g. `event: ping`: not a chunk
            return
        if len(event.data) < 16 and event.data.strip() == "[DONE]":  # literal text, not JSON: test it first
            self.saw_done = True
            return
        if event.event == "error" and not event.data.lstrip().startswith("{"):
            self.error = {"message": event.data}  # `event: error` with a plain-text body
            raise ErrorInStream(self.error, event_number=self.events)
        obj = self._decode(event)
        if event.event == "error" or obj.get("error"):
            self.error = obj.get("error") or obj
            raise ErrorInStream(self.error, event_number=self.events)
        self.chunks += 1
        if isinstance(obj.get("usage"), dict):  # null on ordinary chunks when include_usage is set
            self.usage = obj["usage"]
            self.usage_chunks += 1
        choices = obj.get("choices") or []  # [] on the usage chunk; some servers send null
        if not isinstance(choices, list):
            raise FrameError(f"'choices' must be a list, got {type(choices).__name__}", event, self.events)
        for choice in choices:
            self._choice(choice, event)
        if event.event == "message":
            self._learn(event.data, obj)

    def feed_shaped(self, events: Sequence[SSEEvent], start: int = 0) -> int:
        """Take `events[start:]` for as long as each is a text chunk of the learned shape, exactly as `feed` would,
        and return the index of the first one not taken (`start` when none was): a whole burst of text chunks in
        one call, none per chunk. Such a chunk is the learned chunk with only its text changed: everything a
        caller could look for outside the text is what the learned chunk had. `feed` keeps the same few lines
        inline (calling this for every event cost it 30% in `benchmarks/bench_accumulate.py`);
        tests/relay/test_relay_bursts.py holds the two to the same results."""
        hole = self._shape.hole
        if hole is None or self.saw_done or self.error is not None:
            return start
        text, read = self._text[self._shape.key], hole.read
        i, end = start, len(events)
        while i < end:
            event = events[i]
            if event.event != "message":
                break
            piece = read(event.data)
            if piece is None:
                break
            text.append(piece)
            i += 1
        self.events += i - start
        self.chunks += i - start
        return i

    def _learn(self, data: str, obj: dict[str, Any]) -> None:
        """After a chunk read the slow way: if it carries only text for one choice (no role, finish reason, usage,
        refusal or tool call: reading those again could change what later chunks set), learn its shape
        (`pieces.LearnedShape`), so that the chunks after it that differ only in that text are read without
        decoding their JSON."""
        choices = obj.get("choices")
        if type(choices) is not list or len(choices) != 1 or isinstance(obj.get("usage"), dict):
            return
        choice = choices[0]
        delta = choice.get("delta")
        if (
            type(delta) is dict
            and type(delta.get("content")) is str
            and type(delta.get("refusal")) is not str
            and not delta.get("tool_calls")
            and not delta.get("role")
            and not choice.get("finish_reason")
            and choice.get("logprobs") is None  # a learned shape would drop the next chunk's logprobs
            and not any(name in delta for name in REASONING_FIELDS)  # and its reasoning
        ):
            self._shape.learn(data, obj, ("choices", 0, "delta", "content"), choice["index"])

    @property
    def text(self) -> dict[int, str]:
        """The content text of each choice so far."""
        return {i: joined(pieces) for i, pieces in self._text.items()}

    @property
    def refusal(self) -> dict[int, str]:
        """The refusal text of each choice so far (`delta.refusal`)."""
        return {i: joined(pieces) for i, pieces in self._refusal.items()}

    @property
    def reasoning(self) -> dict[int, str]:
        """The reasoning text of each choice so far, kept apart from `text` (the answer).

        Servers stream it in a delta field the OpenAI reference does not have: `reasoning_content` (DeepSeek,
        llama.cpp, older vLLM) or `reasoning` (newer vLLM, Ollama, OpenRouter); `reasoning_fields` counts which
        came. A delta that carries both with the same text is a mirror of one piece (vLLM's compatibility copy,
        vllm-project/vllm#43933): it is kept once and counted in `reasoning_mirrored`, never doubled. Both with
        different text are two pieces, kept in the order of `shapes.REASONING_FIELDS`."""
        return {i: joined(pieces) for i, pieces in self._reasoning.items()}

    def _reasoning_delta(self, i: int, delta: dict[str, Any]) -> None:
        pieces = [delta[name] for name in REASONING_FIELDS if type(delta.get(name)) is str]
        for name in REASONING_FIELDS:
            if type(delta.get(name)) is str:
                self.reasoning_fields[name] = self.reasoning_fields.get(name, 0) + 1
        if len(pieces) == 2 and pieces[0] == pieces[1]:
            self.reasoning_mirrored += 1
            pieces = pieces[:1]
        for piece in pieces:
            add_piece(self._reasoning, i, piece)

    def _choice(self, choice: Any, event: SSEEvent) -> None:
        if not isinstance(choice, dict) or not isinstance(choice.get("index"), int):
            raise FrameError("a choice has no integer 'index'", event, self.events)
        i = choice["index"]
        self.choices.add(i)
        delta = choice.get("delta")
        if type(delta) is not dict:  # the checks call _typed only off the common path: this runs per delta
            delta = self._typed(delta, dict, event, "choice {}'s 'delta'", i) or {}
        role = delta.get("role")
        if role:  # a server may repeat it on every chunk; same value, no harm
            self.role[i] = self._typed(role, str, event, "choice {}'s 'delta.role'", i)
        for store, key in ((self._text, "content"), (self._refusal, "refusal")):
            piece = delta.get(key)
            if type(piece) is str:  # null (or absent) on chunks that carry something else
                add_piece(store, i, piece)
        if "reasoning_content" in delta or "reasoning" in delta:
            self._reasoning_delta(i, delta)
        logprobs = choice.get("logprobs")
        if type(logprobs) is dict and type(logprobs.get("content")) is list:  # null unless the request asked
            self.logprobs.setdefault(i, []).extend(logprobs["content"])
        fragments = delta.get("tool_calls")
        if fragments is not None and type(fragments) is not list:
            self._typed(fragments, list, event, "choice {}'s 'delta.tool_calls'", i)
        for fragment in fragments or ():
            if not isinstance(fragment, dict) or not isinstance(fragment.get("index"), int):
                raise FrameError(f"a tool-call fragment of choice {i} has no integer 'index'", event, self.events)
            self._fragment(i, fragment, event)
        reason = choice.get("finish_reason")
        if reason:  # null, or left out, until the choice ends
            self.finish_reason[i] = self._typed(reason, str, event, "choice {}'s 'finish_reason'", i)

    def _fragment(self, choice: int, frag: dict[str, Any], event: SSEEvent) -> None:
        key = (choice, frag["index"])
        fn = frag.get("function")
        if type(fn) is not dict:
            fn = self._typed(fn, dict, event, "tool call {}'s 'function'", key) or {}
        call_id, kind, name, arguments = frag.get("id"), frag.get("type"), fn.get("name"), fn.get("arguments")
        if not {type(call_id), type(kind), type(name), type(arguments)} <= _STR_OR_NULL:  # one C-level test
            fields = ("id", "type", "function.name", "function.arguments")
            for value, field in zip((call_id, kind, name, arguments), fields):
                self._typed(value, str, event, "tool call {}'s '{}'", key, field)
        call = self.tool_calls.get(key)
        if call is None:
            call = self.tool_calls[key] = ToolCall(choice, frag["index"])
        call.fragments += 1
        if call_id:
            # Usually sent once. The SDK concatenates split ids; a server that repeats the whole id on
            # every fragment must not double it, so an exact repeat is kept once.
            call.id = call_id if call.id in (None, call_id) else call.id + call_id
        if kind:
            call.type = kind
        if name:
            call.add("name", name)
            call.name_fragments += 1
            if call.name_fragments == 1:
                call._first_name = name
            same = name == call._first_name and (call.name_fragments == 2 or call.name_repeated is not None)
            call.name_repeated = name if same else None
        if arguments:
            call.add("arguments", arguments)

    # -- verdicts ------------------------------------------------------------------------------

    def _unfinished(self) -> list[int]:
        return sorted(i for i in self.choices if i not in self.finish_reason)

    def outcome(self) -> Outcome:
        """complete / incomplete / failed / truncated / cancelled (rules in the module docstring)."""
        if self.error is not None:
            return Outcome.FAILED
        if self.saw_done:
            if not self.choices or self._unfinished():
                return Outcome.INCOMPLETE
            if any(r in INCOMPLETE_FINISH_REASONS for r in self.finish_reason.values()):
                return Outcome.INCOMPLETE
            return Outcome.COMPLETE
        return Outcome.CANCELLED if self.cancelled else Outcome.TRUNCATED

    def explain(self) -> str:
        """One line: the outcome and the evidence for it."""
        outcome = self.outcome()
        reasons = ", ".join(f"choice {i}: {self.finish_reason[i]!r}" for i in sorted(self.finish_reason)) or "none"
        if outcome is Outcome.FAILED:
            return f"failed: {ErrorInStream(self.error)}"
        if outcome is Outcome.COMPLETE:
            return f"complete: [DONE] arrived; finish reasons {reasons}"
        if outcome is Outcome.INCOMPLETE:
            missing = self._unfinished()
            if not self.choices:
                return "incomplete: [DONE] arrived but no choice was ever sent"
            if missing:
                return f"incomplete: [DONE] arrived but choice(s) {missing} never got a finish_reason"
            return f"incomplete: finish reasons {reasons}"
        ended = "the caller stopped reading" if outcome is Outcome.CANCELLED else "the stream ended"
        return f"{outcome}: {ended} before [DONE]; finish reasons so far {reasons}"

    def tool_call_problem(self, choice: int = 0, index: int = 0) -> str | None:
        """Why the tool call at (choice, index) must not run yet, or None when it is complete and valid."""
        try:
            self.tool_arguments(choice, index)
        except ToolCallError as exc:
            return str(exc)
        return None

    def tool_arguments(self, choice: int = 0, index: int = 0) -> dict[str, Any]:
        """The parsed arguments of a complete tool call. Raises ToolCallError if it is not safe to run.

        Complete means: its choice finished with a reason other than "length" / "content_filter" (the
        finish chunk comes after the call's last fragment), no error arrived, it has a function name (not one
        whole name repeated in every fragment: see `ToolCall.name_repeated`), and its arguments parse to a JSON
        object.
        """
        what = f"tool call (choice {choice}, index {index})"
        call = self.tool_calls.get((choice, index))
        if call is None:
            raise ToolCallError(f"{what}: no such call (calls: {sorted(self.tool_calls)})")
        if self.error is not None:
            raise ToolCallError(f"{what}: the stream failed ({ErrorInStream(self.error)}); do not run it")
        reason = self.finish_reason.get(choice)
        if reason is None:
            raise ToolCallError(
                f"{what}: choice {choice} never finished (outcome {self.outcome()}); "
                f"arguments so far are {len(call.arguments)} characters: {short(call.arguments)}"
            )
        if reason in INCOMPLETE_FINISH_REASONS:
            raise ToolCallError(f"{what}: choice {choice} finished with {reason!r}, so the arguments may be cut off")
        if not call.name:
            raise ToolCallError(f"{what}: no function name arrived")
        if call.name_repeated is not None:
            raise ToolCallError(
                f"{what}: every one of its {call.name_fragments} name fragments says "
                f"{call.name_repeated!r}, so joined the name is {short(call.name)}: the server "
                "repeats it, and no function has that name; do not run it"
            )
        return parse_arguments(call.arguments, what)


class ResponsesAccumulator(EventReader):
    """Rebuild a Responses answer from its typed events.

    Attributes: `text` and `refusal` by (output_index, content_index); `arguments` (function-call
    arguments) by output_index; `items` (the latest version of each output item, by output_index);
    `status` ("completed", "incomplete" or "failed", set by the terminal event), `response` (the
    terminal event's response object), `usage`, `incomplete_reason`; `last_sequence_number`;
    `unknown_events` and `unknown_types` (types we do not know, skipped); `error`. `text`, `refusal`
    and `arguments` are fresh dicts of plain strings on every read (the pieces are joined then).
    """

    def __init__(self) -> None:
        super().__init__()
        self._text: dict[tuple[int, int], list[str]] = {}
        self._refusal: dict[tuple[int, int], list[str]] = {}
        self._arguments: dict[int, list[str]] = {}
        self.items: dict[int, dict[str, Any]] = {}
        self.done_items: set[int] = set()
        self.status: str | None = None
        self.response: dict[str, Any] | None = None
        self.usage: dict[str, Any] | None = None
        self.incomplete_reason: str | None = None
        self.last_sequence_number: int | None = None
        self.unknown_events = 0
        self.unknown_types: dict[str, int] = {}
        self.queued = False  # `response.queued` came: a background response that waited for a worker
        self._summary: dict[tuple[int, int], list[str]] = {}
        self._reasoning_text: dict[tuple[int, int], list[str]] = {}
        self._final: list[tuple[str, Any, str]] = []  # (what, key, value from a .done event or done item)

    def feed(self, event: SSEEvent) -> None:
        """Take the next event. Raises ErrorInStream (error event), SequenceError, FrameError."""
        self.events += 1
        if self.status is not None or self.error is not None:
            self.late_events += 1
            return
        obj = self._decode(event)
        kind = obj.get("type")
        if not isinstance(kind, str):
            if event.event == "message":  # no `type` and no `event:` line either
                raise FrameError("the event has no 'type'", event, self.events)
            kind = event.event  # identify by the JSON type; fall back to the `event:` line
        seq = obj.get("sequence_number")
        if seq is not None:
            if not isinstance(seq, int):
                raise FrameError(f"sequence_number must be an integer, got {seq!r}", event, self.events)
            last = self.last_sequence_number
            verdict = sequence_verdict(last, seq, keepalive=kind == "keepalive")  # the cursor's rule, one home
            if verdict == "new":
                self.last_sequence_number = seq
            elif verdict != "repeat":  # a keep-alive repeating a number is harmless; anything else is not
                assert last is not None  # only a number after another can be a replay
                raise SequenceError(verdict, expected=last + 1, got=seq, event_type=kind, previous=last)
        if kind == "error" or (obj.get("error") and kind not in RESPONSES_TERMINAL_STATUS):
            self.error = obj["error"] if isinstance(obj.get("error"), dict) else obj
            raise ErrorInStream(self.error, event_number=self.events)
        if kind not in RESPONSES_KNOWN_EVENTS:
            self.unknown_events += 1  # e.g. a keep-alive: skip what we do not know, do not crash
            self.unknown_types[kind] = self.unknown_types.get(kind, 0) + 1
            return
        self._handle(kind, obj, event)

    @property
    def text(self) -> dict[tuple[int, int], str]:
        """Output text so far, by (output_index, content_index)."""
        return {key: joined(pieces) for key, pieces in self._text.items()}

    @property
    def refusal(self) -> dict[tuple[int, int], str]:
        """Refusal text so far, by (output_index, content_index)."""
        return {key: joined(pieces) for key, pieces in self._refusal.items()}

    @property
    def arguments(self) -> dict[int, str]:
        """Function-call arguments so far (the deltas concatenated), by output_index."""
        return {oi: joined(pieces) for oi, pieces in self._arguments.items()}

    @property
    def reasoning_summary(self) -> dict[tuple[int, int], str]:
        """Reasoning summary text so far (`response.reasoning_summary_text.delta`), by (output_index,
        summary_index): kept apart from `text`, the answer."""
        return {key: joined(pieces) for key, pieces in self._summary.items()}

    @property
    def reasoning_text(self) -> dict[tuple[int, int], str]:
        """Raw reasoning text so far (`response.reasoning_text.delta`), by (output_index, content_index)."""
        return {key: joined(pieces) for key, pieces in self._reasoning_text.items()}

    @property
    def reasoning(self) -> str:
        """All reasoning so far, summary and raw text, in output order: what a UI shows as "thinking"."""
        parts = [((oi, 0, si), text) for (oi, si), text in self.reasoning_summary.items()]
        parts += [((oi, 1, ci), text) for (oi, ci), text in self.reasoning_text.items()]
        return "".join(text for _, text in sorted(parts))

    def _need(self, obj: dict[str, Any], field: str, kind: str, event: SSEEvent, typ: type = int) -> Any:
        value = obj.get(field)
        if not isinstance(value, typ):
            raise FrameError(f"{kind} needs '{field}' ({typ.__name__}), got {value!r}", event, self.events)
        return value

    def _handle(self, kind: str, obj: dict[str, Any], event: SSEEvent) -> None:
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            key = (self._need(obj, "output_index", kind, event), self._need(obj, "content_index", kind, event))
            store = self._text if kind == "response.output_text.delta" else self._refusal
            add_piece(store, key, self._need(obj, "delta", kind, event, str))
        elif kind in ("response.output_text.done", "response.refusal.done"):
            key = (self._need(obj, "output_index", kind, event), self._need(obj, "content_index", kind, event))
            field = "text" if kind == "response.output_text.done" else "refusal"
            self._final.append((field, key, self._need(obj, field, kind, event, str)))
        elif kind == "response.content_part.done":
            key = (self._need(obj, "output_index", kind, event), self._need(obj, "content_index", kind, event))
            self._part(key, obj.get("part"))
        elif kind == "response.function_call_arguments.delta":
            oi = self._need(obj, "output_index", kind, event)
            add_piece(self._arguments, oi, self._need(obj, "delta", kind, event, str))
        elif kind == "response.function_call_arguments.done":
            oi = self._need(obj, "output_index", kind, event)
            self._final.append(("arguments", oi, self._need(obj, "arguments", kind, event, str)))
        elif kind in _REASONING_EVENTS:
            what, index = _REASONING_EVENTS[kind]
            key = (self._need(obj, "output_index", kind, event), self._need(obj, index, kind, event))
            if kind.endswith(".delta"):
                add_piece(
                    self._summary if what == "reasoning_summary" else self._reasoning_text,
                    key,
                    self._need(obj, "delta", kind, event, str),
                )
            else:
                self._final.append((what, key, self._need(obj, "text", kind, event, str)))
        elif kind == "response.queued":
            self.queued = True
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._item(kind, obj, event)
        elif kind in RESPONSES_TERMINAL_STATUS:
            resp = self._typed(obj.get("response"), dict, event, "{}'s 'response'", kind) or {}
            details = self._typed(resp.get("incomplete_details"), dict, event, "'response.incomplete_details'") or {}
            self.status = RESPONSES_TERMINAL_STATUS[kind]
            self.response = resp
            self.usage = resp.get("usage")
            self.incomplete_reason = details.get("reason")
            if self.status == "failed":
                self.error = resp.get("error") or {"message": "response.failed without an error object"}
        # other known types (created, in_progress, content_part.added, annotations, reasoning...) carry
        # nothing this accumulator keeps

    def _item(self, kind: str, obj: dict[str, Any], event: SSEEvent) -> None:
        """`response.output_item.added` / `.done`: keep the item; a function call's arguments as announced,
        a done item's final arguments and content parts to compare with the deltas."""
        oi = self._need(obj, "output_index", kind, event)
        item = self._need(obj, "item", kind, event, dict)
        arguments = item.get("arguments")
        if item.get("type") == "function_call":
            arguments = self._typed(arguments, str, event, "{}'s function_call 'arguments'", kind)
        self.items[oi] = item
        if kind == "response.output_item.added":
            if item.get("type") == "function_call" and oi not in self._arguments:  # usually announced empty
                self._arguments[oi] = [arguments or ""]
            return
        self.done_items.add(oi)
        if item.get("type") == "function_call" and arguments is not None:
            self._final.append(("arguments", oi, arguments))
        content = item.get("content")
        for ci, part in enumerate(content if isinstance(content, list) else ()):
            self._part((oi, ci), part)

    def _part(self, key: tuple[int, int], part: Any) -> None:
        if not isinstance(part, dict):
            return
        if part.get("type") == "output_text" and isinstance(part.get("text"), str):
            self._final.append(("text", key, part["text"]))
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            self._final.append(("refusal", key, part["refusal"]))

    # -- verdicts ------------------------------------------------------------------------------

    def disagreements(self) -> list[Disagreement]:
        """Every final value (`.done` event, done part, done item) that differs from the concatenated
        deltas. Empty for a healthy stream; anything here means a lost, repeated or corrupted delta."""
        stores: dict[str, dict[Any, list[str]]] = {
            "text": self._text,
            "refusal": self._refusal,
            "arguments": self._arguments,
            "reasoning_summary": self._summary,
            "reasoning_text": self._reasoning_text,
        }
        out = []
        for what, key, done in self._final:
            pieces = stores[what].get(key)
            built = joined(pieces) if pieces else ""
            if built != done:
                out.append(Disagreement(what, key, built, done))
        return out

    def outcome(self) -> Outcome:
        """complete / incomplete / failed / truncated / cancelled (rules in the module docstring)."""
        if self.error is not None or self.status == "failed":
            return Outcome.FAILED
        if self.status == "completed":
            return Outcome.COMPLETE
        if self.status == "incomplete":
            return Outcome.INCOMPLETE
        return Outcome.CANCELLED if self.cancelled else Outcome.TRUNCATED

    def explain(self) -> str:
        """One line: the outcome and the evidence for it."""
        outcome = self.outcome()
        if outcome is Outcome.FAILED and self.status == "failed":
            err = self.error if isinstance(self.error, dict) else {}
            return f"failed: response.failed arrived ({err.get('code')}: {err.get('message')})"
        if outcome is Outcome.FAILED:
            return f"failed: {ErrorInStream(self.error)}"
        if outcome is Outcome.COMPLETE:
            return "complete: response.completed arrived"
        if outcome is Outcome.INCOMPLETE:
            return f"incomplete: response.incomplete arrived, reason {self.incomplete_reason!r}"
        ended = "the caller stopped reading" if outcome is Outcome.CANCELLED else "the stream ended"
        return f"{outcome}: {ended} before a terminal event (last sequence_number {self.last_sequence_number})"

    def function_calls(self) -> dict[int, dict[str, Any]]:
        """The function-call items by output_index (latest version of each)."""
        return {oi: item for oi, item in sorted(self.items.items()) if item.get("type") == "function_call"}

    def call_problem(self, output_index: int) -> str | None:
        """Why the function call at `output_index` must not run yet, or None when it is safe."""
        try:
            self.call_arguments(output_index)
        except ToolCallError as exc:
            return str(exc)
        return None

    def call_arguments(self, output_index: int) -> dict[str, Any]:
        """The parsed arguments of a finished function call. Raises ToolCallError otherwise.

        Finished means: its `response.output_item.done` arrived with status "completed" (not
        "incomplete"), no error arrived, and its deltas agree with its final arguments.
        """
        what = f"function call at output_index {output_index}"
        item = self.items.get(output_index)
        if item is None or item.get("type") != "function_call":
            raise ToolCallError(f"{what}: no such call (function calls at {sorted(self.function_calls())})")
        if self.error is not None:
            raise ToolCallError(f"{what}: the stream failed ({ErrorInStream(self.error)}); do not run it")
        pieces = self._arguments.get(output_index)
        args = joined(pieces) if pieces else ""
        if output_index not in self.done_items:
            raise ToolCallError(
                f"{what}: its output_item.done never arrived (outcome {self.outcome()}); "
                f"arguments so far are {len(args)} characters: {short(args)}"
            )
        if item.get("status") not in (None, "completed"):
            raise ToolCallError(f"{what}: the item ended with status {item.get('status')!r}")
        bad = [d for d in self.disagreements() if d.what == "arguments" and d.key == output_index]
        if bad:
            raise ToolCallError(f"{what}: deltas {short(bad[0].built)} disagree with the final {short(bad[0].done)}")
        return parse_arguments(args, what)


Acc = TypeVar("Acc", ChatAccumulator, ResponsesAccumulator)


@dataclass
class Replay:
    """What `replay` saw: the accumulator (its state is the answer), and how the bytes ended."""

    accumulator: ChatAccumulator | ResponsesAccumulator
    events: int  # events the parser produced and the accumulator was fed
    cut_mid_event: bool  # the bytes stopped inside an unfinished event (the parser dropped it)
    error: ErrorInStream | None  # the error reported inside the stream, if any

    @property
    def outcome(self) -> Outcome:
        return self.accumulator.outcome()


def replay(
    chunks: Iterable[bytes], accumulator: Acc, *, stop_after: int | None = None, parser: SSEParser | None = None
) -> Replay:
    """Feed network chunks through an SSE parser into `accumulator`, as a client would.

    Stops at a `ErrorInStream` (recorded in the result, not raised: the stream is over either way).
    `stop_after=N` plays a caller who stops reading after N events: it calls `accumulator.cancel()`.
    FrameError and SequenceError propagate, with everything gathered so far left in the accumulator.
    """
    parser = parser if parser is not None else SSEParser()
    fed = 0
    if stop_after is not None and stop_after <= 0:
        accumulator.cancel()
        return Replay(accumulator, 0, False, None)
    try:
        for chunk in chunks:
            for event in parser.feed(chunk):
                fed += 1
                accumulator.feed(event)
                if fed == stop_after:  # the caller hangs up here; the rest is never read
                    accumulator.cancel()
                    return Replay(accumulator, fed, False, None)
    except ErrorInStream as exc:
        return Replay(accumulator, fed, False, exc)
    return Replay(accumulator, fed, parser.close(), None)
