"""The stand-in's planner: a whole request plus the room's state in, the actions to perform out (sans-IO core).

Theory of operation. The stand-in's socket handler (`streamlab.net.standin.server`) reads a request, hands it to
`plan(room, request)` under a lock, and carries out the `Decision` it gets back: a JSON `Reply`, or a
`Stream` of `Pause` / `Write` / `Close` actions (`streamlab.core.standin.actions`). Every decision is taken here,
none on the socket side: routing, validating the body the way the real API does, picking the learner's
episode, resuming after `Last-Event-ID` or `starting_after`, cutting a stored response's n-th fetch, and
cancelling. While a stream plays, the handler asks `stream_cancelled(room, stream)` before each action,
and `stream_ending` (in `actions`) names how it stopped. No sockets, threads or clocks here: a plan can be
tested with plain values, and one script serves any number of learners (`streamlab.core.standin.room`).

Routes come from one table, `ROUTES` (method, path pattern, planner), as h11 picks its readers from a
table: a path that matches some route but not with this method gets the one 405 with an `Allow` header;
a path that matches none gets the one 404.

Who is asking is decided once, in `plan`: in an open room the request's bearer token names the learner
(`learner_of`); in a room with a door (`streamlab.core.standin.door`) only a key the room issued on
`POST /v1/join` does, and every other route answers a request without one with a 401 that says how to join.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from streamlab.core.accumulate import ChatAccumulator, ResponsesAccumulator
from streamlab.core.errors import ErrorInStream, FrameError, SequenceError
from streamlab.core.progress import MAX_VERDICT_BYTES, PROGRESS_PATH, load_catalogue, read_verdict
from streamlab.core.safejson import json_or_none
from streamlab.core.shapes import error_body
from streamlab.core.sse import SSEEvent, SSEParser, parse
from streamlab.core.standin.actions import Action, Close, Decision, Note, Pause, Reply, Stream, Write
from streamlab.core.standin.door import JOIN_PATH, Joined
from streamlab.core.standin.eventsource import (
    EVENTS_PATH,
    EventsOptions,
    final_event_id,
    key_of,
    number_events,
    read_options,
    retry_frame,
)
from streamlab.core.standin.profiles import answer_episode, apply_profile
from streamlab.core.standin.request import Request, RequestHead
from streamlab.core.standin.room import Room, learner_of, room_full_message
from streamlab.core.standin.script import (
    Cut,
    End,
    Episode,
    ErrorEpisode,
    KeepAlive,
    Send,
    Stall,
    Step,
    StoredResponse,
    Wait,
    frame_json,
    split_frames,
)
from streamlab.core.untrusted import clip

__all__ = [
    "plan",
    "Route",
    "ROUTES",
    "stream_cancelled",
    "derive_body",
    "steps_to_actions",
    "strip_usage",
    "skip_after_id",
    "last_event_id",
    "numbered_steps",
]


# --- routing --------------------------------------------------------------------------------------

Planner = Callable[[Room, Request, str, dict[str, str]], Decision]


@dataclass(frozen=True)
class Route:
    """`method` on a path made of `pattern`'s segments ("{name}" matches one segment, given to the planner)."""

    method: str
    pattern: tuple[str, ...]
    planner: Planner

    def match(self, segments: Sequence[str]) -> dict[str, str] | None:
        """The `{name}` values when `segments` fit the pattern, else None."""
        if len(segments) != len(self.pattern):
            return None
        params: dict[str, str] = {}
        for want, got in zip(self.pattern, segments):
            if want.startswith("{") and want.endswith("}"):
                if not got:
                    return None
                params[want[1:-1]] = got
            elif want != got:
                return None
        return params

    @property
    def path(self) -> str:
        return "/" + "/".join(self.pattern)


def plan(room: Room, request: Request) -> Decision:
    """Route `request` through `ROUTES` and return what to do (the one 404 and the one 405 live here)."""
    head = request.head
    path = head.path.rstrip("/")
    segments = path.split("/")[1:]
    learner = _who(room, request)
    matching = [(route, params) for route in ROUTES if (params := route.match(segments)) is not None]
    for route, params in matching:
        if route.method == head.method:
            if room.door is not None and not learner and route.planner is not _join:
                return Decision(_not_joined(head), Note(learner=""))
            if route.planner in _STATEFUL and not room.admits(learner):  # a full room refuses new keys only
                full = _error(429, room_full_message(room.max_learners), type="requests", code="room_full")
                return Decision(full, Note(learner=learner))
            return route.planner(room, request, learner, params)
    if matching:
        allowed = sorted({route.method for route, _ in matching})
        reply = _error(405, f"{head.method} is not allowed on {path}; use {' or '.join(allowed)}")
        return Decision(Reply(405, reply.body, (("Allow", ", ".join(allowed)),)), Note(learner=learner))
    served = ", ".join(sorted({route.path for route in ROUTES}))
    return Decision(
        _error(404, f"unknown path {head.path!r}: this stand-in serves {served}", code="unknown_url"),
        Note(learner=learner),
    )


def _error(
    status: int, message: str, *, type: str = "invalid_request_error", code: str | None = None, param: str | None = None
) -> Reply:
    return Reply(status, error_body(message, type, code, param))


def _who(room: Room, request: Request) -> str:
    """The learner asking: the bearer token in an open room; in a room with a door, the member the room's key
    names (an EventSource's `?key=` or cookie too), or "" for anyone else."""
    head = request.head
    if room.door is None:
        return learner_of(head)
    key = key_of(head) if head.path.rstrip("/") == EVENTS_PATH else None
    if key is None:
        value = (head.get("authorization") or "").strip()
        scheme, _, token = value.partition(" ")
        key = token.strip() if scheme.lower() == "bearer" else value
    return room.door.name_of(key, now=request.now) or ""


def _not_joined(head: RequestHead) -> Reply:
    """The 401 for a request to a room without a key the room issued: it says how to join."""
    root = f"http://{clip(head.get('host') or 'HOST:PORT', 100)}"
    message = (
        "this stand-in serves a room: join it first, with the join code the instructor gave you and your name. "
        f"In Python: `room = streamlab.join_room('{root}', name='your-name', code='CODE')`, then use "
        f"`room.api_key` as your API key; or `curl {root}{JOIN_PATH} -d "
        '\'{"name": "your-name", "code": "CODE"}\'` and send its "api_key" as `Authorization: Bearer KEY`.'
    )
    return _error(401, message, code="not_joined")


# --- POST /v1/chat/completions and /v1/responses ---------------------------------------------------

_REQUIRED_INPUT: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "chat": ("messages", list),
    "responses": ("input", (str, list)),
}
_JSON_TYPE = {
    str: "a string",
    int: "an integer",
    float: "a decimal",
    bool: "a boolean",
    dict: "an object",
    list: "an array",
    type(None): "null",
}
_EXPECTED = {
    "messages": "an array of objects",
    "input": "a string or an array",
    "stream": "a boolean",
    "stream_options": "an object",
}


def _invalid_type(name: str, value: Any) -> Reply:
    got = _JSON_TYPE.get(type(value), type(value).__name__)
    return _error(
        400,
        f"Invalid type for '{name}': expected {_EXPECTED.get(name, 'an object')}, but got {got} instead.",
        param=name,
        code="invalid_type",
    )


def _read_json(head: RequestHead, body: bytes) -> dict[str, Any] | Reply:
    """The request body as a JSON object, or the 400 the real API would give."""
    content_type = head.get("content-type")
    if content_type is not None and content_type.split(";")[0].strip().lower() != "application/json":
        return _error(
            400,
            f"unsupported Content-Type {content_type!r}: this endpoint accepts only application/json request bodies",
        )
    if not body:
        return _error(400, "missing request body: expected a JSON object with a 'model'")
    try:
        req = json.loads(body)
    except RecursionError:
        return _error(400, "request body is not valid JSON: it is nested too deeply")
    except ValueError as exc:
        return _error(400, f"request body is not valid JSON: {exc}")
    if not isinstance(req, dict):
        return _error(400, f"request body must be a JSON object, got {type(req).__name__}")
    return req


CONTEXT_TOKENS = 32_768
"""The stand-in model's context: a prompt longer than this (four characters of its JSON to a token) gets the real
API's 400 `context_length_exceeded`."""


def _check_fields(room: Room, req: dict[str, Any], dialect: str) -> Reply | None:
    """The first thing the real API would refuse in this body, as its 400 (same message, param and code), or
    None. Only the model is checked in a lenient room (`require_input=False`)."""
    model = req.get("model")
    if not isinstance(model, str) or not model:
        return _error(400, "you must provide a model parameter (a non-empty string)", param="model")
    if not room.options.require_input:
        return None
    name, types = _REQUIRED_INPUT[dialect]
    if name not in req:
        return _error(400, f"Missing required parameter: '{name}'.", param=name, code="missing_required_parameter")
    if not isinstance(req[name], types):
        return _invalid_type(name, req[name])
    if dialect == "chat":
        problem = _check_messages(req["messages"])
        if problem is not None:
            return problem
    tokens = len(json.dumps(req[name])) // 4
    if tokens > CONTEXT_TOKENS:
        return _error(
            400,
            f"This model's maximum context length is {CONTEXT_TOKENS} tokens. However, your "
            f"{'messages' if dialect == 'chat' else 'input'} resulted in about {tokens} tokens. Please "
            "reduce the length.",
            param=name,
            code="context_length_exceeded",
        )
    stream = req.get("stream")
    if stream is not None and not isinstance(stream, bool):
        return _invalid_type("stream", stream)
    options = req.get("stream_options")
    if options is not None and dialect == "chat":
        if not isinstance(options, dict):
            return _invalid_type("stream_options", options)
        if stream is not True:
            return _error(
                400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.", param="stream_options"
            )
    return _check_tools(req["tools"], dialect) if "tools" in req else None


def _wrong_type(param: str, expected: str, value: Any) -> Reply:
    got = _JSON_TYPE.get(type(value), type(value).__name__)
    message = f"Invalid type for '{param}': expected {expected}, but got {got} instead."
    return _error(400, message, param=param, code="invalid_type")


def _missing(param: str) -> Reply:
    return _error(400, f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


_TOOL_FIELDS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "name": (str, "a string"),
    "description": (str, "a string"),
    "parameters": (dict, "an object"),
    "strict": (bool, "a boolean"),
}
"""A function tool's fields and the JSON type each must have (`parameters` may also be null)."""


def _check_tools(tools: Any, dialect: str) -> Reply | None:
    """The real API's 400 for a wrongly typed `tools` (naming the field: `tools[0].function.name`), or None.
    A profile builds its answer from the first function tool: a string, a list of numbers or a function that is
    not an object had reached it and ended in a stand-in 500 (issue 25)."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        return _wrong_type("tools", "an array of objects", tools)
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            return _wrong_type(where, "an object", tool)
        kind = tool.get("type")
        if kind is None:
            return _missing(f"{where}.type")
        if not isinstance(kind, str):
            return _wrong_type(f"{where}.type", "a string", kind)
        if kind != "function":
            if dialect == "chat" and kind != "custom":
                return _error(
                    400,
                    f"Invalid value: '{kind}'. Supported values are: 'function' and 'custom'.",
                    param=f"{where}.type",
                    code="invalid_value",
                )
            continue
        spec, where = (tool.get("function"), f"{where}.function") if dialect == "chat" else (tool, where)
        if spec is None:
            return _missing(where)
        if not isinstance(spec, dict):
            return _wrong_type(where, "an object", spec)
        if "name" not in spec:
            return _missing(f"{where}.name")
        for field, (kinds, expected) in _TOOL_FIELDS.items():
            value = spec.get(field)
            if field in spec and not isinstance(value, kinds) and not (field == "parameters" and value is None):
                return _wrong_type(f"{where}.{field}", expected, value)
    return None


def _check_messages(messages: list[Any]) -> Reply | None:
    if not messages:
        return _error(
            400,
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            param="messages",
            code="empty_array",
        )
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            got = _JSON_TYPE.get(type(message), type(message).__name__)
            return _error(
                400,
                f"Invalid type for 'messages[{i}]': expected an object, but got {got} instead.",
                param=f"messages[{i}]",
                code="invalid_type",
            )
        if "role" not in message:
            return _error(
                400,
                f"Missing required parameter: 'messages[{i}].role'.",
                param=f"messages[{i}].role",
                code="missing_required_parameter",
            )
    return None


def _create(room: Room, request: Request, learner: str, dialect: str) -> Decision:
    req = _read_json(request.head, request.body)
    if isinstance(req, Reply):
        if room.options.profile is None:
            return Decision(req, Note(learner=learner))
        refused = ErrorEpisode(req.status, req.body, req.headers)  # a profile may refuse it its own way
        return _answer(room, request.head, learner, dialect, {}, refused, Note(learner=learner), not_json=True)
    problem = _check_fields(room, req, dialect)
    stream = req.get("stream") is True
    profile = room.options.profile
    if problem is not None:
        if profile is None:
            return Decision(problem, Note(learner=learner, json=req, stream=stream))
        refused = ErrorEpisode(problem.status, problem.body, problem.headers)
        return _answer(
            room, request.head, learner, dialect, req, refused, Note(learner=learner, json=req, stream=stream)
        )
    model = req["model"]
    note = Note(learner=learner, json=req, model=model, stream=stream)
    picked = room.pick(learner, model)
    if picked is None and profile is not None:  # a profile answers any model the script does not name
        picked = (0, answer_episode(dialect, req))
    if picked is None:
        known = ", ".join(sorted(room.scripts)) or "none"
        return Decision(
            _error(
                404,
                f"The model `{clip(model)}` does not exist on this stand-in (scripted: {known})",
                code="model_not_found",
                param="model",
            ),
            note,
        )
    index, ep = picked
    note = Note(learner=learner, json=req, model=model, stream=stream, episode=index)
    return _answer(room, request.head, learner, dialect, req, ep, note)


def _answer(
    room: Room,
    head: RequestHead,
    learner: str,
    dialect: str,
    req: dict[str, Any],
    ep: Episode | ErrorEpisode,
    note: Note,
    *,
    not_json: bool = False,
) -> Decision:
    """Play `ep` for this request: through the room's provider profile first, when there is one (the one place
    a profile applies), then as a JSON reply, a whole body, or a stream. `not_json`: the body was not JSON."""
    profile = room.options.profile
    if profile is not None:
        ep = apply_profile(profile, ep, dialect=dialect, request=req, not_json=not_json)
    if isinstance(ep, ErrorEpisode):
        return Decision(Reply(ep.status, ep.body, ep.headers, wait=ep.wait), note)
    if ep.store_as:
        room.learner(learner).fresh_response(ep.store_as)
    if req.get("stream") is not True:
        return Decision(_whole_body(ep, dialect, str(req.get("model") or "")), note)
    usage = profile is not None or _wants_usage(room, req, dialect)  # a profile has applied its own usage rule
    return _create_stream(room, head, learner, ep, usage, note)


def _whole_body(ep: Episode, dialect: str, model: str) -> Reply:
    result = ep.body if ep.body is not None else derive_body(ep.payload, dialect, model)
    if result is None:
        return _error(
            500,
            "stand-in: this episode has no non-streaming body and none could be derived from its frames",
            type="server_error",
        )
    return Reply(200, result, ep.headers, wait=ep.thinking_time)


def _wants_usage(room: Room, req: dict[str, Any], dialect: str) -> bool:
    """Whether the scripted usage chunk is played: always for Responses (usage rides on the terminal event)
    and with usage="scripted"; for Chat only when `stream_options.include_usage` is true."""
    if dialect != "chat" or room.options.usage == "scripted":
        return True
    options = req.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _create_stream(room: Room, head: RequestHead, learner: str, ep: Episode, usage: bool, note: Note) -> Decision:
    steps = ep.steps if usage else _memo_strip(room, ep)
    skip = 0
    resume_id = last_event_id(head)
    if resume_id is not None:
        skip = skip_after_id(_payload(steps), resume_id)
        note = _with(note, resumed_after=resume_id if skip else None)
    cancel_key = (learner, ep.store_as) if ep.store_as else None
    if skip or room.options.profile is not None:  # a profile's episode is made for this request: nothing to reuse
        return Decision(Stream(ep.headers, steps_to_actions(steps, skip), cancel_key, ep.timeline), note)
    return Decision(Stream(ep.headers, _memo_actions(room, ep, steps, usage), cancel_key, ep.timeline), note)


def _memo_strip(room: Room, ep: Episode) -> tuple[Step, ...]:
    key = (id(ep), "no-usage")
    hit = room.memo.get(key)
    if hit is None:
        hit = room.memo[key] = (ep, strip_usage(ep.steps))
    return hit[1]


def _memo_actions(room: Room, ep: Episode, steps: tuple[Step, ...], usage: bool) -> tuple[Action, ...]:
    """The actions that play a script's episode from its start, made once (a room of learners asks for the
    same episodes again and again, often all at once)."""
    key = (id(ep), usage)
    hit = room.played.get(key)
    if hit is None:
        hit = room.played[key] = (ep, steps_to_actions(steps, 0))
    return hit[1]


def _with(note: Note, *, resumed_after: str | None) -> Note:
    return Note(note.learner, note.json, note.model, note.episode, note.stream, resumed_after)


def _create_chat(room: Room, request: Request, learner: str, params: dict[str, str]) -> Decision:
    return _create(room, request, learner, "chat")


def _create_responses(room: Room, request: Request, learner: str, params: dict[str, str]) -> Decision:
    return _create(room, request, learner, "responses")


# --- GET /v1/responses/{id}, cancel, reset ---------------------------------------------------------


def _not_found(response_id: str) -> Reply:
    return _error(404, f"No response found with id '{response_id}'.", code="not_found")


def _retrieve(room: Room, request: Request, learner: str, params: dict[str, str]) -> Decision:
    rid = params["id"]
    stored = room.stored.get(rid)
    if stored is None:
        return Decision(_not_found(rid), Note(learner=learner))
    state = room.learner(learner)
    query = request.head.query
    if query.get("stream", ["false"])[-1].lower() != "true":
        obj = stored.response_object(rid)
        if rid in state.cancelled:
            obj["status"] = "cancelled"
        return Decision(Reply(200, obj), Note(learner=learner, stream=False))
    start, resumed_after = _resume_point(stored, request.head, query)
    if isinstance(start, Reply):
        return Decision(start, Note(learner=learner, stream=True))
    n = state.gets.get(rid, 0)
    state.gets[rid] = n + 1
    cut_at = stored.cuts[n] if n < len(stored.cuts) else None
    steps = _replay_steps(stored, start, cut_at)
    return Decision(
        Stream((), steps_to_actions(steps, 0)), Note(learner=learner, stream=True, resumed_after=resumed_after)
    )


_SEQUENCE = re.compile(r"-?[0-9]{1,18}")
"""A `starting_after` value: a decimal integer, ASCII digits only, no sign but a minus, no underscores."""


def _resume_point(
    stored: StoredResponse, head: RequestHead, query: dict[str, list[str]]
) -> tuple[int | Reply, str | None]:
    """The index of the first stored frame to send, and what to record as `resumed_after`."""
    frames = stored.frames
    if "starting_after" in query:
        text = query["starting_after"][-1]
        if not _SEQUENCE.fullmatch(text):  # int() also takes "+5", " 5", "1_0" and other scripts' digits
            return _error(400, f"starting_after must be an integer, got {text!r}", param="starting_after"), None
        after = int(text)
        start = 0
        for i, (seq, _) in enumerate(frames):
            if seq is not None and seq <= after:
                start = i + 1
        return start, str(after)
    resume_id = last_event_id(head)
    if resume_id is None:
        return 0, None
    skip = skip_after_id(b"".join(f for _, f in frames), resume_id)
    start = pos = 0
    for i, (_, frame) in enumerate(frames):
        if pos >= skip:
            break
        pos += len(frame)
        start = i + 1
    return start, resume_id if skip else None


def _replay_steps(stored: StoredResponse, start: int, cut_at: int | None) -> list[Step]:
    """Steps replaying `stored` from frame `start`, cut after `cut_at` payload bytes when given."""
    steps: list[Step] = []
    budget = cut_at
    for i, (_, frame) in enumerate(stored.frames[start:]):
        if i and stored.gap:
            steps.append(Wait(stored.gap))
        if budget is not None and len(frame) >= budget:
            if budget:
                steps.append(Send(frame[:budget]))
            steps.append(Cut())
            break
        steps.append(Send(frame))
        if budget is not None:
            budget -= len(frame)
    return steps


def _cancel(room: Room, request: Request, learner: str, params: dict[str, str]) -> Decision:
    rid = params["id"]
    stored = room.stored.get(rid)
    if stored is None:
        return Decision(_not_found(rid), Note(learner=learner))
    room.learner(learner).cancelled.add(rid)
    obj = stored.response_object(rid)
    obj["status"] = "cancelled"
    return Decision(Reply(200, obj), Note(learner=learner))


def _reset(room: Room, request: Request, learner: str, params: dict[str, str]) -> Decision:
    room.reset(learner)
    return Decision(
        Reply(200, {"object": "stand-in.reset", "learner": learner or None, "reset": True}), Note(learner=learner)
    )


# --- POST /v1/progress: a check cell's verdict, for the room dashboard -------------------------------------


def _progress(room: Room, request: Request, learner: str, params: dict[str, str]) -> Decision:
    """A learner's check-cell verdict (`streamlab.net.progress.join_room`): checked here, kept by the dashboard
    (its record's `json` is the verdict alone). Nothing in the room changes: no episode is played or counted."""
    note = Note(learner=learner)
    if not learner:
        return Decision(
            _error(
                401,
                "a verdict needs a name: send it with `Authorization: Bearer YOUR-NAME` "
                "(join_room(url, name=...) does)",
                code="missing_api_key",
            ),
            note,
        )
    if room.door is not None:
        wait = room.door.allow_verdict(request.peer, now=request.now)
        if wait:
            message = "too many verdicts from this address: wait a moment (a check cell sends one)"
            refused = _error(429, message, type="requests", code="rate_limited")
            return Decision(Reply(429, refused.body, (("Retry-After", str(int(wait) + 1)),)), note)
    if len(request.body) > MAX_VERDICT_BYTES:
        return Decision(
            _error(
                413,
                f"a verdict body is at most {MAX_VERDICT_BYTES} bytes, got {len(request.body)}",
                code="body_too_large",
            ),
            note,
        )
    req = _read_json(request.head, request.body)
    if isinstance(req, Reply):
        return Decision(req, note)
    verdict = read_verdict(req)
    if isinstance(verdict, str):
        return Decision(_error(400, verdict, code="invalid_verdict"), note)
    if verdict.exercise not in _known_exercises():  # made-up ids would fill the dashboard grid's columns
        message = f"no lab has an exercise {verdict.exercise!r}: the check cells send the ids of streamlab progress"
        return Decision(_error(400, message, param="exercise", code="unknown_exercise"), note)
    return Decision(
        Reply(200, {"object": "stand-in.progress", **verdict.as_json()}), Note(learner=learner, json=verdict.as_json())
    )


@functools.cache
def _known_exercises() -> frozenset[str]:
    """Every exercise id of the catalogue (`streamlab/data/exercises.json`)."""
    return frozenset(exercise for lab in load_catalogue() for exercise, _ in lab.exercises)


# --- POST /v1/join: a learner joins a room with its code and their name ------------------------------------


def _join(room: Room, request: Request, learner: str, params: dict[str, str]) -> Decision:
    """`{"name": ..., "code": ...}` in, the learner's API key out (`streamlab.core.standin.door`); an open room
    needs no joining and says so (404, as a path it does not serve)."""
    door = room.door
    if door is None:
        message = "this stand-in is an open room: there is nothing to join, any API key names you"
        return Decision(_error(404, message, code="no_join_code"), Note(learner=learner))
    if len(request.body) > MAX_VERDICT_BYTES:
        return Decision(_error(413, f"a join body is at most {MAX_VERDICT_BYTES} bytes", code="body_too_large"))
    req = _read_json(request.head, request.body)
    if isinstance(req, Reply):
        return Decision(req, Note(learner=""))
    name, code = req.get("name"), req.get("code")
    if not isinstance(code, str):
        return Decision(_error(400, 'send the room\'s join code as "code"', param="code"), Note(learner=""))
    got = door.join(name if isinstance(name, str) else "", code, request.peer, now=request.now)
    if not isinstance(got, Joined):
        headers = () if got.retry_after is None else (("Retry-After", str(got.retry_after)),)
        kind = "requests" if got.status == 429 else "invalid_request_error"
        return Decision(Reply(got.status, error_body(got.message, kind, got.code, None), headers), Note(learner=""))
    if got.evicted is not None:
        room.reset(got.evicted)
    body = {"object": "stand-in.join", "name": got.name, "api_key": got.api_key}
    return Decision(Reply(200, body), Note(learner=got.name))


# --- GET /v1/chat/stream: the chat episode as a browser's EventSource reads it ------------------------------

_EVENTS_REQUEST: dict[str, Any] = {"stream": True, "messages": [{"role": "user", "content": "(EventSource: no body)"}]}
"""What a provider profile is told the request was: an EventSource GET has no body to read."""


def _chat_events(room: Room, request: Request, learner: str, params: dict[str, str]) -> Decision:
    """`GET /v1/chat/stream?model=M&key=K[&retry=MS][&after_end=stop|replay]`: the learner's next chat episode
    (the same one `POST /v1/chat/completions` with `stream: true` would play), every event numbered with `id:`
    after a `retry:` hint (`streamlab.core.standin.eventsource`). The key comes from the query or the
    `streamlab_key` cookie (an EventSource can send no `Authorization`). A reconnect's `Last-Event-ID` is
    answered by `_reconnected` unless `after_end=replay` (the naive server, which plays the next episode)."""
    head = request.head
    key = key_of(head)
    if room.door is None:  # with a door, `plan` has read the key already
        learner = learner if key is None else key
    note = Note(learner=learner, stream=True)
    model = head.query.get("model", [""])[-1]
    if not model:
        message = f"you must provide a model parameter: GET {EVENTS_PATH}?model=MODEL&key=YOUR-KEY"
        return Decision(_error(400, message, param="model"), note)
    options = read_options(head.query)
    if not isinstance(options, EventsOptions):
        return Decision(_error(400, options[1], param=options[0], code="invalid_value"), note)
    if not room.admits(learner):
        return Decision(_error(429, room_full_message(room.max_learners), type="requests", code="room_full"), note)
    note = Note(learner=learner, model=model, stream=True)
    resume_id = last_event_id(head)
    if resume_id and options.after_end == "stop":
        decided = _reconnected(room, learner, model, resume_id, options)
        if decided is not None:
            return decided
    picked = room.pick(learner, model)
    if picked is None and room.options.profile is not None:  # a profile answers any model the script does not name
        picked = (0, answer_episode("chat", {"model": model, **_EVENTS_REQUEST}))
    if picked is None:
        known = ", ".join(sorted(room.scripts)) or "none"
        message = f"The model `{clip(model)}` does not exist on this stand-in (scripted: {known})"
        return Decision(_error(404, message, code="model_not_found", param="model"), note)
    index, ep = picked
    note = Note(learner=learner, model=model, stream=True, episode=index)
    played = _numbered(room, ep, model)
    if isinstance(played, ErrorEpisode):  # any status but 200 fails an EventSource for good: it stays closed
        return Decision(Reply(played.status, played.body, played.headers, wait=played.wait), note)
    headers, steps = played
    return Decision(Stream(headers, (Write(retry_frame(options.retry_ms)), *steps_to_actions(steps))), note)


def _reconnected(room: Room, learner: str, model: str, resume_id: str, options: EventsOptions) -> Decision | None:
    """A reconnect carrying `Last-Event-ID`, after_end=stop: 204 No Content when it names the final event of the
    answer the learner was given last (the answer is complete: the EventSource must stop, WHATWG HTML 9.2.3),
    the rest of that answer when it names an event inside it, or None (not that answer's id: play the next)."""
    last = _last_given(room, learner, model)
    if last is None:
        return None
    index, ep = last
    played = _numbered(room, ep, model)
    if isinstance(played, ErrorEpisode):
        return None
    headers, steps = played
    payload = _payload(steps)
    if resume_id == final_event_id(payload):
        return Decision(Reply(204, b""), Note(learner=learner, model=model, episode=index, stream=True))
    skip = skip_after_id(payload, resume_id)
    if not skip:
        return None
    note = Note(learner=learner, model=model, stream=True, episode=index, resumed_after=resume_id)
    return Decision(Stream(headers, (Write(retry_frame(options.retry_ms)), *steps_to_actions(steps, skip))), note)


def _last_given(room: Room, learner: str, model: str) -> tuple[int, Episode | ErrorEpisode] | None:
    """The episode the learner's last request for `model` played, without counting a request (None: none yet)."""
    episodes = room.scripts.get(model)
    if episodes is None:  # a profile's built-in answer is the same every time
        return (
            None if room.options.profile is None else (0, answer_episode("chat", {"model": model, **_EVENTS_REQUEST}))
        )
    state = room.learners.get(learner)
    count = 0 if state is None else state.counts.get(model, 0)
    return None if not count else (min(count, len(episodes)) - 1, episodes[min(count, len(episodes)) - 1])


def numbered_steps(room: Room, ep: Episode, model: str) -> tuple[Step, ...]:
    """The steps a scripted episode plays as on the EventSource route (no profile): numbered, usage left out."""
    played = _numbered(room, ep, model)
    return () if isinstance(played, ErrorEpisode) else played[1]


def _numbered(
    room: Room, ep: Episode | ErrorEpisode, model: str
) -> tuple[tuple[tuple[str, str], ...], tuple[Step, ...]] | ErrorEpisode:
    """`ep` as the EventSource route plays it: through the room's profile, without the usage chunk nobody asked
    for (a GET has no `stream_options`), every event numbered; made once per scripted episode."""
    profile = room.options.profile
    if profile is not None:
        ep = apply_profile(profile, ep, dialect="chat", request={"model": model, **_EVENTS_REQUEST})
    if isinstance(ep, ErrorEpisode):
        return ep
    if profile is not None:
        return ep.headers, number_events(ep.steps)
    key = (id(ep), "numbered")
    hit = room.memo.get(key)
    if hit is None:
        steps = ep.steps if room.options.usage == "scripted" else _memo_strip(room, ep)
        hit = room.memo[key] = (ep, number_events(steps))
    return ep.headers, hit[1]


ROUTES: tuple[Route, ...] = (
    Route("POST", ("v1", "chat", "completions"), _create_chat),
    Route("GET", tuple(EVENTS_PATH.split("/")[1:]), _chat_events),
    Route("POST", ("v1", "responses"), _create_responses),
    Route("GET", ("v1", "responses", "{id}"), _retrieve),
    Route("POST", ("v1", "responses", "{id}", "cancel"), _cancel),
    Route("POST", ("v1", "reset"), _reset),
    Route("POST", tuple(PROGRESS_PATH.split("/")[1:]), _progress),
    Route("POST", tuple(JOIN_PATH.split("/")[1:]), _join),
)
"""Every route the stand-in serves: method, path segments, the planner that decides."""

_STATEFUL = frozenset({_create_chat, _create_responses, _retrieve, _cancel, _progress})
"""The planners that keep state for their learner: a new key is refused before them when the room is full."""


def stream_cancelled(room: Room, stream: Stream) -> bool:
    """Asked before each action of a playing stream: has a cancel request stopped it?"""
    return room.is_cancelled(stream.cancel_key)


# --- steps -> actions -------------------------------------------------------------------------------


def steps_to_actions(steps: Iterable[Step], skip: int = 0) -> tuple[Action, ...]:
    """The actions that play `steps`, leaving out the first `skip` payload bytes (already delivered before a
    reconnect) and the `Wait`s before them. An empty `Send` writes nothing; nothing after `Cut` or `End` plays."""
    actions: list[Action] = []
    for step in steps:
        if isinstance(step, Wait):
            if not skip and step.seconds > 0:
                actions.append(Pause(step.seconds))
        elif isinstance(step, Stall):
            actions.append(Pause(step.seconds))
        elif isinstance(step, (Send, KeepAlive)):
            data = step.data
            if skip:
                dropped = min(skip, len(data))
                data, skip = data[dropped:], skip - dropped
                if data:
                    actions.append(Write(bytes(data), frame=False))
            elif data:
                actions.append(Write(bytes(data)))
        elif isinstance(step, Cut):
            actions.append(Close(step.reset))
            break
        elif isinstance(step, End):
            break
    return tuple(actions)


def _payload(steps: Iterable[Step]) -> bytes:
    return b"".join(s.data for s in steps if isinstance(s, (Send, KeepAlive)))


def _usage_only(frame: bytes) -> bool:
    obj = frame_json(frame)
    return isinstance(obj, dict) and obj.get("choices") == [] and isinstance(obj.get("usage"), dict)


def strip_usage(steps: Iterable[Step]) -> tuple[Step, ...]:
    """`steps` without the Chat usage-only chunk (`choices: []` with `usage`), which the real API sends only
    when `stream_options.include_usage` is set. Only whole frames inside one `Send` are recognised; a `Send`
    left empty is dropped."""
    out: list[Step] = []
    for step in steps:
        if isinstance(step, Send) and b'"usage"' in step.data:
            frames = split_frames(step.data)
            kept = [f for f in frames if not _usage_only(f)]
            if len(kept) != len(frames):
                if not kept:
                    continue
                step = Send(b"".join(kept))
        out.append(step)
    return tuple(out)


def last_event_id(head: RequestHead) -> str | None:
    """The Last-Event-ID header, decoded as the UTF-8 the standard sends (header bytes arrive as Latin-1)."""
    value = head.get("last-event-id")
    if value is None:
        return None
    return value.encode("latin-1", "replace").decode("utf-8", "replace")


def skip_after_id(payload: bytes, last_id: str) -> int:
    """How many leading bytes of `payload` a client reconnecting with `Last-Event-ID: last_id` has already
    seen: everything up to the end of the first frame after which the stream's last event ID equals it.
    0 (send it all) when the ID is empty or no frame sets it."""
    if not last_id:
        return 0
    parser = SSEParser()
    pos = 0
    for frame in split_frames(payload):
        parser.feed(frame)
        pos += len(frame)
        if parser.last_event_id == last_id:
            return pos
    return 0


# --- non-streaming bodies -----------------------------------------------------------------------------


def derive_body(payload: bytes, dialect: str, model: str) -> dict[str, Any] | None:
    """The non-streaming JSON a scripted stream stands for, or None when the frames do not say.

    The frames go through the same accumulators a client uses (`streamlab.core.accumulate`). Chat
    Completions: each choice's text (and refusal, and tool calls) with its finish reason and the usage, as
    one `chat.completion`. Responses: the terminal event's `response` object (or, for a stream cut before
    it, the last `response` any event carried).
    """
    events, _ = parse(payload)
    if dialect == "responses":
        return _derive_response(events)
    return _derive_chat(events, model)


def _feed_all(acc: ChatAccumulator | ResponsesAccumulator, events: Iterable[SSEEvent]) -> None:
    for ev in events:
        try:
            acc.feed(ev)
        except FrameError:
            continue  # a frame that is not a chunk (a comment-like data line): not part of the answer
        except (ErrorInStream, SequenceError):
            return


def _derive_chat(events: list[SSEEvent], model: str) -> dict[str, Any] | None:
    first = next(
        (
            obj
            for ev in events
            if isinstance(obj := _json(ev.data), dict) and obj.get("object") == "chat.completion.chunk"
        ),
        None,
    )
    if first is None:
        return None
    acc = ChatAccumulator()
    _feed_all(acc, events)
    return {
        "id": first.get("id", "chatcmpl-standin"),
        "object": "chat.completion",
        "created": first.get("created", 0),
        "model": first.get("model", model),
        "choices": [_chat_choice(acc, i) for i in sorted(acc.choices)],
        "usage": acc.usage,
    }


def _chat_choice(acc: ChatAccumulator, i: int) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": acc.role.get(i, "assistant"),
        "content": acc.text.get(i, ""),
        "refusal": acc.refusal.get(i),
    }
    calls = [call for (choice, _), call in sorted(acc.tool_calls.items()) if choice == i]
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": c.type or "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
        message["content"] = acc.text.get(i)
    return {"index": i, "message": message, "logprobs": None, "finish_reason": acc.finish_reason.get(i, "stop")}


def _derive_response(events: list[SSEEvent]) -> dict[str, Any] | None:
    acc = ResponsesAccumulator()
    _feed_all(acc, events)
    if acc.response is not None:
        return dict(acc.response)
    carried = [
        obj["response"]
        for ev in events
        if isinstance(obj := _json(ev.data), dict) and isinstance(obj.get("response"), dict)
    ]
    return dict(carried[-1]) if carried else None


def _json(data: str) -> Any:
    return json_or_none(data)
