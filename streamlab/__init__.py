"""streamlab's public surface: the names the labs use, importable from `streamlab` itself.

How streamed LLM responses (Server-Sent Events) really work, byte by byte. The package is layered, and
each layer is a subpackage that only imports the ones below it (DESIGN.md draws them):

* `streamlab.core`: sans-IO: the SSE parser, the exception tree, stream endings, fixtures and the split
  harness, the broken-parser gallery, stream shapes, the accumulators, and the pure planners and policies;
* `streamlab.net`: I/O: the stand-in server, the httpx client, the retry and resume runners, live timings;
* `streamlab.tools`: figures, widgets and the `streamlab` command line;
* `streamlab.exercises`: the labs' check cells.

Every name below is loaded on first use (PEP 562 `__getattr__`), so `import streamlab.core.sse` stays
light: it imports no httpx, no server, no plotting. `tests/test_exported_members.py` pins the list and
checks that each name comes from the module that defines it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each exported name and the module that defines it (not merely re-exports it).
_EXPORTS: dict[str, str] = {
    # sans-IO core: parsing
    "SSEEvent": "streamlab.core.sse",
    "SSEParser": "streamlab.core.sse",
    "parse": "streamlab.core.sse",
    # sans-IO core: the one exception tree
    "StreamlabError": "streamlab.core.errors",
    "SSELimitError": "streamlab.core.errors",
    "FrameError": "streamlab.core.errors",
    "SequenceError": "streamlab.core.errors",
    "ToolCallError": "streamlab.core.errors",
    "ErrorInStream": "streamlab.core.errors",
    "StreamEndError": "streamlab.core.errors",
    "BadStatus": "streamlab.core.errors",
    "NotAnEventStream": "streamlab.core.errors",
    "RequestNotSent": "streamlab.core.errors",
    "ConnectFailed": "streamlab.core.errors",
    "ConnectionBroken": "streamlab.core.errors",
    "ReadStalled": "streamlab.core.errors",
    "IdleTimeout": "streamlab.core.errors",
    "DeadlineExceeded": "streamlab.core.errors",
    "IncompleteEvent": "streamlab.core.errors",
    "EventTooLarge": "streamlab.core.errors",
    "RetryError": "streamlab.core.errors",
    "ResumeError": "streamlab.core.errors",
    # sans-IO core: how a stream ended
    "Ending": "streamlab.core.endings",
    "Outcome": "streamlab.core.endings",
    "outcome_of": "streamlab.core.endings",
    # sans-IO core: fixtures, the split harness, stream shapes, accumulators
    "load_fixture": "streamlab.core.harness.fixtures",
    "load_fixtures": "streamlab.core.harness.fixtures",
    "data_dir": "streamlab.core.harness.fixtures",
    "run_harness": "streamlab.core.harness.fuzz",
    "chunks_at": "streamlab.core.harness.fuzz",
    "show_split": "streamlab.core.harness.fuzz",
    "smallest_failing_split": "streamlab.core.harness.fuzz",
    "chat_text_stream": "streamlab.core.shapes",
    "responses_text_stream": "streamlab.core.shapes",
    "ChatAccumulator": "streamlab.core.accumulate",
    "ResponsesAccumulator": "streamlab.core.accumulate",
    "replay": "streamlab.core.accumulate",
    # sans-IO core: what the I/O layer reads, decides and plays
    "TimedEvent": "streamlab.core.reading",
    "RetryPolicy": "streamlab.core.retry",
    "SequenceCursor": "streamlab.core.resume",
    "Episode": "streamlab.core.standin.script",
    "Send": "streamlab.core.standin.script",
    "Wait": "streamlab.core.standin.script",
    "KeepAlive": "streamlab.core.standin.script",
    "Stall": "streamlab.core.standin.script",
    "Cut": "streamlab.core.standin.script",
    "End": "streamlab.core.standin.script",
    "error_episode": "streamlab.core.standin.script",
    "paced": "streamlab.core.standin.script",
    "StoredResponse": "streamlab.core.standin.script",
    "scenario": "streamlab.core.standin.scenarios",
    "scenario_of": "streamlab.core.standin.scenarios",
    "RoomScenario": "streamlab.core.standin.scenarios",
    # I/O: the client
    "EventStream": "streamlab.net.eventstream",
    "AsyncEventStream": "streamlab.net.eventstream",
    "stream_chat": "streamlab.net.client",
    "stream_responses": "streamlab.net.client",
    "astream_chat": "streamlab.net.client",
    "astream_responses": "streamlab.net.client",
    "resume_response": "streamlab.net.client",
    # I/O: the stand-in server
    "StandIn": "streamlab.net.standin.server",
    "serve": "streamlab.net.standin.server",
    "stop_serving": "streamlab.net.standin.server",
    "room_addresses": "streamlab.net.standin.hostaddr",
    # I/O: retry and resume runners
    "RetryingStream": "streamlab.net.retry",
    "AsyncRetryingStream": "streamlab.net.retry",
    "ResumableResponseStream": "streamlab.net.resume",
    "LastEventIdStream": "streamlab.net.resume",
}

__all__ = [
    "__version__",
    "AsyncEventStream", "AsyncRetryingStream", "BadStatus", "ChatAccumulator", "ConnectFailed",
    "ConnectionBroken", "Cut", "DeadlineExceeded", "End", "Ending", "Episode", "ErrorInStream", "EventStream",
    "EventTooLarge", "FrameError", "IdleTimeout", "IncompleteEvent", "KeepAlive", "LastEventIdStream",
    "NotAnEventStream", "Outcome", "ReadStalled", "RequestNotSent", "ResponsesAccumulator",
    "ResumableResponseStream", "ResumeError", "RetryError", "RetryPolicy", "RetryingStream", "RoomScenario",
    "SSEEvent",
    "SSELimitError", "SSEParser", "Send", "SequenceCursor", "SequenceError", "Stall", "StandIn",
    "StoredResponse", "StreamEndError", "StreamlabError", "TimedEvent", "ToolCallError", "Wait",
    "astream_chat", "astream_responses", "chat_text_stream", "chunks_at", "data_dir", "error_episode",
    "load_fixture", "load_fixtures", "outcome_of", "paced", "parse", "replay", "responses_text_stream",
    "resume_response", "room_addresses", "run_harness", "scenario", "scenario_of", "serve", "show_split",
    "smallest_failing_split",
    "stop_serving", "stream_chat", "stream_responses",
]  # the same names as _EXPORTS, spelled out for readers and linters


def __getattr__(name: str) -> Any:
    """Import the defining module on first use of an exported name (PEP 562), then keep the value."""
    home = _EXPORTS.get(name)
    if home is None:
        raise AttributeError(f"module 'streamlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups no longer reach __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the same names, for type checkers and editors (a test keeps this block equal to _EXPORTS)
    from streamlab.core.accumulate import ChatAccumulator, ResponsesAccumulator, replay
    from streamlab.core.endings import Ending, Outcome, outcome_of
    from streamlab.core.errors import (
        BadStatus,
        ConnectFailed,
        ConnectionBroken,
        DeadlineExceeded,
        ErrorInStream,
        EventTooLarge,
        FrameError,
        IdleTimeout,
        IncompleteEvent,
        NotAnEventStream,
        ReadStalled,
        RequestNotSent,
        ResumeError,
        RetryError,
        SequenceError,
        SSELimitError,
        StreamEndError,
        StreamlabError,
        ToolCallError,
    )
    from streamlab.core.harness.fixtures import data_dir, load_fixture, load_fixtures
    from streamlab.core.harness.fuzz import chunks_at, run_harness, show_split, smallest_failing_split
    from streamlab.core.reading import TimedEvent
    from streamlab.core.resume import SequenceCursor
    from streamlab.core.retry import RetryPolicy
    from streamlab.core.shapes import chat_text_stream, responses_text_stream
    from streamlab.core.sse import SSEEvent, SSEParser, parse
    from streamlab.core.standin.scenarios import RoomScenario, scenario, scenario_of
    from streamlab.core.standin.script import (
        Cut,
        End,
        Episode,
        KeepAlive,
        Send,
        Stall,
        StoredResponse,
        Wait,
        error_episode,
        paced,
    )
    from streamlab.net.client import (
        astream_chat,
        astream_responses,
        resume_response,
        stream_chat,
        stream_responses,
    )
    from streamlab.net.eventstream import AsyncEventStream, EventStream
    from streamlab.net.resume import LastEventIdStream, ResumableResponseStream
    from streamlab.net.retry import AsyncRetryingStream, RetryingStream
    from streamlab.net.standin.hostaddr import room_addresses
    from streamlab.net.standin.server import StandIn, serve, stop_serving
