"""streamlab's public surface: the names the labs use, importable from `streamlab` itself.

How streamed LLM responses (Server-Sent Events) really work, byte by byte. The package is layered, and
each layer is a subpackage that only imports the ones below it (DESIGN.md draws them):

* `streamlab.core`: sans-IO: the SSE parser, the exception tree, stream endings, fixtures and the split
  harness, the broken-parser gallery, stream shapes, the accumulators, and the pure planners and policies;
* `streamlab.net`: I/O: the stand-in server, the httpx client, the retry and resume runners, live timings;
* `streamlab.tools`: figures, widgets and the `streamlab` command line;
* `streamlab.exercises`: the labs' check cells.

Every name below is loaded on first use (PEP 562 `__getattr__`), so `import streamlab.core.sse` stays
light: it imports no httpx, no server, no plotting. `tests/project/test_exported_members.py` pins the list and
checks that each name comes from the module that defines it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

__all__ = ["__version__", *_EXPORTS]  # the one list is _EXPORTS; tests/project/test_exported_members.py pins it

if TYPE_CHECKING:  # what a type checker sees: each public name with its real type
    # (tests/project/test_exported_members.py holds this block to _EXPORTS); at run time the names stay lazy
    # (__getattr__ below)
    from streamlab.core.accumulate import ChatAccumulator as ChatAccumulator
    from streamlab.core.accumulate import ResponsesAccumulator as ResponsesAccumulator
    from streamlab.core.accumulate import replay as replay
    from streamlab.core.endings import Ending as Ending
    from streamlab.core.endings import Outcome as Outcome
    from streamlab.core.endings import outcome_of as outcome_of
    from streamlab.core.errors import BadStatus as BadStatus
    from streamlab.core.errors import ConnectFailed as ConnectFailed
    from streamlab.core.errors import ConnectionBroken as ConnectionBroken
    from streamlab.core.errors import DeadlineExceeded as DeadlineExceeded
    from streamlab.core.errors import ErrorInStream as ErrorInStream
    from streamlab.core.errors import EventTooLarge as EventTooLarge
    from streamlab.core.errors import FrameError as FrameError
    from streamlab.core.errors import IdleTimeout as IdleTimeout
    from streamlab.core.errors import IncompleteEvent as IncompleteEvent
    from streamlab.core.errors import NotAnEventStream as NotAnEventStream
    from streamlab.core.errors import ReadStalled as ReadStalled
    from streamlab.core.errors import RequestNotSent as RequestNotSent
    from streamlab.core.errors import ResumeError as ResumeError
    from streamlab.core.errors import RetryError as RetryError
    from streamlab.core.errors import SequenceError as SequenceError
    from streamlab.core.errors import SSELimitError as SSELimitError
    from streamlab.core.errors import StreamEndError as StreamEndError
    from streamlab.core.errors import StreamlabError as StreamlabError
    from streamlab.core.errors import ToolCallError as ToolCallError
    from streamlab.core.harness.fixtures import data_dir as data_dir
    from streamlab.core.harness.fixtures import load_fixture as load_fixture
    from streamlab.core.harness.fixtures import load_fixtures as load_fixtures
    from streamlab.core.harness.fuzz import chunks_at as chunks_at
    from streamlab.core.harness.fuzz import run_harness as run_harness
    from streamlab.core.harness.fuzz import show_split as show_split
    from streamlab.core.harness.fuzz import smallest_failing_split as smallest_failing_split
    from streamlab.core.reading import TimedEvent as TimedEvent
    from streamlab.core.relay.stream import RelayedStream as RelayedStream
    from streamlab.core.resume import SequenceCursor as SequenceCursor
    from streamlab.core.retry import RetryPolicy as RetryPolicy
    from streamlab.core.shapes import chat_text_stream as chat_text_stream
    from streamlab.core.shapes import responses_text_stream as responses_text_stream
    from streamlab.core.sse import SSEEvent as SSEEvent
    from streamlab.core.sse import SSEParser as SSEParser
    from streamlab.core.sse import is_event_stream as is_event_stream
    from streamlab.core.sse import parse as parse
    from streamlab.core.standin.scenarios import RoomScenario as RoomScenario
    from streamlab.core.standin.scenarios import scenario as scenario
    from streamlab.core.standin.scenarios import scenario_of as scenario_of
    from streamlab.core.standin.script import Cut as Cut
    from streamlab.core.standin.script import End as End
    from streamlab.core.standin.script import Episode as Episode
    from streamlab.core.standin.script import KeepAlive as KeepAlive
    from streamlab.core.standin.script import Send as Send
    from streamlab.core.standin.script import Stall as Stall
    from streamlab.core.standin.script import StoredResponse as StoredResponse
    from streamlab.core.standin.script import Wait as Wait
    from streamlab.core.standin.script import error_episode as error_episode
    from streamlab.core.standin.script import paced as paced
    from streamlab.net.chaos.proxy import ChaosProxy as ChaosProxy
    from streamlab.net.chaos.proxy import serve_chaos as serve_chaos
    from streamlab.net.chaos.proxy import stop_chaos as stop_chaos
    from streamlab.net.check import check_endpoint as check_endpoint
    from streamlab.net.client import astream_chat as astream_chat
    from streamlab.net.client import astream_responses as astream_responses
    from streamlab.net.client import resume_response as resume_response
    from streamlab.net.client import stream_chat as stream_chat
    from streamlab.net.client import stream_responses as stream_responses
    from streamlab.net.eventstream import AsyncEventStream as AsyncEventStream
    from streamlab.net.eventstream import EventStream as EventStream
    from streamlab.net.gateway.app import Gateway as Gateway
    from streamlab.net.gateway.app import serve_gateway as serve_gateway
    from streamlab.net.gateway.app import stop_gateway as stop_gateway
    from streamlab.net.progress import join_room as join_room
    from streamlab.net.relay.app import Relay as Relay
    from streamlab.net.relay.app import serve_relay as serve_relay
    from streamlab.net.relay.app import stop_relay as stop_relay
    from streamlab.net.relaycheck.run import check_relay as check_relay
    from streamlab.net.resume import LastEventIdStream as LastEventIdStream
    from streamlab.net.resume import ResumableResponseStream as ResumableResponseStream
    from streamlab.net.retry import AsyncRetryingStream as AsyncRetryingStream
    from streamlab.net.retry import RetryingStream as RetryingStream
    from streamlab.net.sdk import AsyncSDKStreamView as AsyncSDKStreamView
    from streamlab.net.sdk import SDKStreamView as SDKStreamView
    from streamlab.net.sdk import read_sdk_stream as read_sdk_stream
    from streamlab.net.standin.hostaddr import room_addresses as room_addresses
    from streamlab.net.standin.server import StandIn as StandIn
    from streamlab.net.standin.server import serve as serve
    from streamlab.net.standin.server import stop_serving as stop_serving
    from streamlab.tools.quizview import quiz as quiz
    from streamlab.tools.quizview import quiz_answers as quiz_answers
    from streamlab.tools.quizview import quiz_text as quiz_text


def __getattr__(name: str) -> Any:
    """Import the defining module on first use of an exported name (PEP 562), then keep the value."""
    home = _EXPORTS.get(name)
    if home is None:
        raise AttributeError(f"module 'streamlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups no longer reach __getattr__
    return value


_HELPERS = frozenset({"annotations", "importlib", "TYPE_CHECKING", "Any"})
"""This module's own imports: not streamlab's names, so `dir` (and a notebook's tab completion) leaves them out."""


def __dir__() -> list[str]:
    """Every public name, loaded or not, and the loaded subpackages; none of this module's helpers."""
    return sorted((set(globals()) - _HELPERS) | set(__all__))
