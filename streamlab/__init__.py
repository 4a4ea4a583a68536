"""streamlab: how streamed LLM responses (Server-Sent Events) really work, byte by byte.

Layers, each usable alone (lower layers never import higher ones):

* sans-IO core: `sse` (bytes -> events), `fixtures` + `fuzz` (byte fixtures and the split harness),
  `broken` (a gallery of realistic broken parsers), `shapes` (documented stream shapes -> bytes),
  `accumulate` (events -> text, tool calls, usage, outcome);
* I/O: `standin` (a scripted local server), `client` (httpx, sync and async), `retry`, `resume`;
* tools: `timing`, `plots`, `widgets`, `relay`, `conformance`, `cli`.
"""

from .core.sse import SSEEvent, SSELimitError, SSEParser

__version__ = "0.1.0"
__all__ = ["SSEEvent", "SSEParser", "SSELimitError", "__version__"]
