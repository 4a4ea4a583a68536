"""Text a server or client chose, made safe for a terminal (streamlab.core.untrusted), tested directly."""

from __future__ import annotations

import pytest

from streamlab.core.untrusted import printable, terminal_text

HOSTILE = "a\x1b[2Jb\x1b]52;c;eA==\x07c\x9b31m\rd\u2028e\x85f\u202eg\ud800h\x7f"


@pytest.mark.parametrize("escape", [printable, terminal_text])
def test_nothing_a_terminal_acts_on_survives(escape) -> None:
    out = escape(HOSTILE)
    assert all(ch.isprintable() for ch in out), out
    assert "\\x1b[2J" in out and "\\x07" in out and "\\x9b" in out and "\\r" not in out and "\\x0d" in out
    assert "\\u2028" in out and "\\x85" in out and "\\u202e" in out and "\\ud800" in out and "\\x7f" in out
    out.encode("utf-8")  # a lone surrogate escaped: always encodable


def test_a_report_keeps_its_lines_tabs_backslashes_and_readable_text() -> None:
    report = 'line one\tü "\\n" stays\nline two: 模型'
    assert terminal_text(report) == report
    assert terminal_text("x\r\ny").splitlines() == ["x\\x0d", "y"]
    assert printable(report) != report  # a one-line field escapes the break, the tab and the backslashes
