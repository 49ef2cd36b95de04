"""The one progress bar: plain lines when stderr is not a terminal, nothing when disabled."""

from __future__ import annotations

import io

from guard.progress import Progress


def test_plain_lines_off_a_terminal_each_count_once() -> None:
    """Off a terminal: no carriage returns, one line per tenth, and the final count once (catches the
    closing line repeating the last update, and ``\\r`` frames in logs)."""
    stream = io.StringIO()
    with Progress(6, "work", stream=stream, enabled=True) as tick:
        for done in range(1, 7):
            tick(done)
    text = stream.getvalue()
    assert "\r" not in text
    counts = [line.split(":")[1].split("(")[0].strip() for line in text.splitlines()]
    assert counts[-1] == "6/6" and counts.count("6/6") == 1
    assert len(counts) == len(set(counts)) <= 11


def test_disabled_writes_nothing() -> None:
    """A disabled bar is silent (catches progress leaking into --json output)."""
    stream = io.StringIO()
    with Progress(5, "work", stream=stream, enabled=False) as tick:
        tick(5)
    assert stream.getvalue() == ""
