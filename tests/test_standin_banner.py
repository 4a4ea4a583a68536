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
