"""The uvicorn plumbing under the relay and the gateway, held to the uvicorn it was written against.

`GuardedH11` (`streamlab.net.relay.serving`) overrides methods of uvicorn's `H11Protocol` and reads its
attributes. Were uvicorn to rename one, the override would silently stop being called (the head deadline, the
connection cap, the JSON 400 and the half-close would all vanish without an error): these tests fail instead.
uvicorn, h11 and starlette are pinned in constraints.txt; the installed versions must be the pinned ones.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from importlib.metadata import version
from pathlib import Path

import pytest
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from streamlab.net.relay.serving import UNSENT, GuardedH11, flushed

ROOT = Path(__file__).resolve().parents[2]

PARENT_ATTRIBUTES = ("connections", "cycle", "conn", "transport", "loop")
"""What GuardedH11's methods read from the H11Protocol they extend (besides the methods they override)."""


def _overrides() -> list[str]:
    """The public methods GuardedH11 defines itself: each must override one of uvicorn's own."""
    return sorted(n for n, v in vars(GuardedH11).items() if callable(v) and not n.startswith("_"))


def _shape(function: object) -> list[tuple[str, inspect._ParameterKind]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]  # type: ignore[arg-type]


def test_guarded_h11_overrides_the_methods_it_means_to() -> None:
    names = _overrides()
    assert names == [
        "connection_lost",
        "connection_made",
        "data_received",
        "eof_received",
        "on_response_complete",
        "send_400_response",
    ], "a new override: check it is one of uvicorn's methods (this test then covers it)"


@pytest.mark.parametrize("name", _overrides())
def test_each_override_is_still_a_method_of_uvicorns_h11_protocol(name: str) -> None:
    """Defined by uvicorn's H11Protocol itself (not only by asyncio's base class, whose empty default would keep
    `hasattr` true after a rename), with the same parameters, so uvicorn still calls it as GuardedH11 expects."""
    owners = [k for k in H11Protocol.__mro__ if name in vars(k)]
    assert owners and owners[0].__module__.startswith("uvicorn."), f"uvicorn's H11Protocol no longer defines {name}"
    assert _shape(getattr(GuardedH11, name)) == _shape(getattr(H11Protocol, name))


def test_the_attributes_guarded_h11_reads_exist_on_a_fresh_protocol() -> None:
    async def app(scope: object, receive: object, send: object) -> None:  # never called
        raise AssertionError

    config = uvicorn.Config(app, http="h11")
    config.load()
    loop = asyncio.new_event_loop()
    try:
        protocol = H11Protocol(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    finally:
        loop.close()
    missing = [a for a in PARENT_ATTRIBUTES if not hasattr(protocol, a)]
    assert not missing, f"uvicorn's H11Protocol no longer sets {missing}"


def _pins() -> dict[str, str]:
    text = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    return {m[1].lower(): m[2] for m in re.finditer(r"(?m)^([A-Za-z0-9_.-]+)==(\S+)", text)}


@pytest.mark.parametrize("package", ["uvicorn", "h11", "starlette"])
def test_the_server_kit_runs_on_the_pinned_versions(package: str) -> None:
    pins = _pins()
    assert package in pins, f"{package} is not pinned in constraints.txt"
    assert version(package) == pins[package], f"{package} {version(package)} installed, {pins[package]} pinned"


# -- the reply's bytes still in the process (UNSENT) and `flushed` --


def test_flushed_returns_when_the_last_bytes_have_left_the_process() -> None:
    """`flushed` waits while the transport still holds bytes, and no longer."""
    left = [70_000, 4_000, 0]
    calls: list[int] = []

    def unsent() -> int:
        calls.append(left[min(len(calls), 2)])
        return calls[-1]

    async def run() -> float:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await flushed({"extensions": {UNSENT: unsent}}, timeout=5.0)
        return loop.time() - t0

    waited = asyncio.run(run())
    assert calls == [70_000, 4_000, 0]  # asked until nothing was left, then not again
    assert waited < 1.0


def test_flushed_gives_up_at_its_timeout_and_needs_no_extension() -> None:
    async def run(scope: dict) -> float:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await flushed(scope, timeout=0.05)
        return loop.time() - t0

    assert 0.05 <= asyncio.run(run({"extensions": {UNSENT: lambda: 1}})) < 1.0  # a client that never reads
    assert asyncio.run(run({})) < 0.05  # another ASGI server: one turn of the loop


@pytest.mark.net
def test_every_request_under_the_server_kit_can_ask_what_is_unsent() -> None:
    """`AppServer` (`GuardedH11`) puts `UNSENT` in every request's scope: the transport's write buffer, 0 before
    the reply, and not 0 while a client that does not read holds up a large reply."""
    import socket
    import time

    import httpx

    from streamlab.net.relay.serving import AppServer

    seen: list[tuple[int, int]] = []

    async def app(scope: dict, receive: object, send: object) -> None:
        if scope["type"] != "http":
            return
        unsent = scope["extensions"][UNSENT]
        before = unsent()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})  # type: ignore[operator]
        size = 64 << 20 if scope["path"] == "/big" else 10
        await send({"type": "http.response.body", "body": b"x" * size, "more_body": False})  # type: ignore[operator]
        seen.append((before, unsent()))

    with AppServer(app, name="unsent") as server:
        assert httpx.get(f"http://127.0.0.1:{server.port}/small", trust_env=False).text == "x" * 10
        with socket.create_connection(("127.0.0.1", server.port)) as sock:  # asks for 64 MiB, reads none of it
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            for _ in range(200):
                if len(seen) == 2:
                    break
                time.sleep(0.01)
    assert seen[0] == (0, 0)
    assert seen[1][0] == 0 and seen[1][1] > 0  # the socket took what it could; the rest waits in the process
