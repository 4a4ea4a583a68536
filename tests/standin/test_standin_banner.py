"""The `streamlab standin` banner's openai SDK snippet, run as printed: it prints the answer and nothing else."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap

import pytest

from streamlab.core.accumulate import ChatAccumulator
from streamlab.net.client import stream_chat

pytestmark = [pytest.mark.net, pytest.mark.slow]


def _sdk_snippet(banner: str) -> str:
    """The lines the banner prints under "or with the openai SDK:", as the Python a learner would paste."""
    block = banner.split("or with the openai SDK:\n", 1)[1].split("\n\n", 1)[0]
    return textwrap.dedent(block)


def test_the_banner_sdk_snippet_prints_the_text_and_no_none() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlab", "standin", "--scenario", "ttft", "--port", "0", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        banner = "".join(lines)
        base = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", banner).group(1)
        snippet = _sdk_snippet(banner)
        assert "OpenAI(base_url=" in snippet and "delta.content or ''" in snippet

        run = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr

        acc = ChatAccumulator()
        request = {"model": "scheduled", "messages": [{"role": "user", "content": "hi"}]}
        with stream_chat(base, request, headers={"Authorization": "Bearer your-name"}) as stream:
            for timed in stream:
                acc.feed(timed.event)
        assert acc.text[0] and run.stdout == acc.text[0] + "\n"  # the answer, whole, then one newline
        assert "None" not in run.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_a_room_with_a_join_code_prints_it_and_its_sdk_snippet_joins_and_prints_the_text() -> None:
    """Issue 34: served with a join code, the banner prints the code, the projector's keyed dashboard and a snippet
    that joins (`join_room(..., code=...)`, then `api_key=room.api_key`); run as printed, it gets the answer, while
    a request with a bare name gets the 401 that says how to join."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlab", "standin", "--scenario", "ttft", "--port", "0", "--quiet"]
        + ["--join-code", "abc-def"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        banner = "".join(lines)
        base = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", banner).group(1)
        assert "JOIN CODE: abc-def" in banner
        assert re.search(r"room dashboard \(for the projector\): http://127\.0\.0\.1:\d+/dashboard\?key=\S+", banner)
        assert "code='abc-def'" in banner and f"curl -s {base}/join" in banner
        snippet = _sdk_snippet(banner)
        assert "join_room(" in snippet and "api_key=room.api_key" in snippet
        run = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip(), run.stdout  # the answer's text

        import httpx

        request = {"model": "scheduled", "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(f"{base}/chat/completions", json=request, headers={"Authorization": "Bearer your-name"})
        assert reply.status_code == 401 and reply.json()["error"]["code"] == "not_joined"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
