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
from typing import Any

__version__ = "0.1.0"

# The one list of public names: each name and the module that defines it (not merely imports it).
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
    # I/O: the relay, the gateway, the chaos proxy and the checkers the labs run
    "Relay": "streamlab.net.relay.app",
    "serve_relay": "streamlab.net.relay.app",
    "stop_relay": "streamlab.net.relay.app",
    "Gateway": "streamlab.net.gateway.app",
    "serve_gateway": "streamlab.net.gateway.app",
    "stop_gateway": "streamlab.net.gateway.app",
    "ChaosProxy": "streamlab.net.chaos.proxy",
    "serve_chaos": "streamlab.net.chaos.proxy",
    "stop_chaos": "streamlab.net.chaos.proxy",
    "check_relay": "streamlab.net.relaycheck.run",
    "check_endpoint": "streamlab.net.check",
    # I/O: the official SDK seen through the library
    "read_sdk_stream": "streamlab.net.sdk",
    "SDKStreamView": "streamlab.net.sdk",
    "AsyncSDKStreamView": "streamlab.net.sdk",
    # sans-IO core: one relayed stream, the media-type rule
    "RelayedStream": "streamlab.core.relay.stream",
    "is_event_stream": "streamlab.core.sse",
    # tools: the checkpoint quizzes (answers only on request)
    "quiz": "streamlab.tools.quizview",
    "quiz_text": "streamlab.tools.quizview",
    "quiz_answers": "streamlab.tools.quizview",
    # I/O: a learner's verdicts, sent to the room's stand-in too (opt-in, one line in a lab's setup cell)
    "join_room": "streamlab.net.progress",
}

__all__ = ["__version__", *_EXPORTS]  # the one list is _EXPORTS; tests/test_exported_members.py pins it


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
