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


def test_a_long_job_writes_a_few_lines_to_a_log() -> None:
    """Off a terminal a 1046-step job writes its first update, one line per quarter and the final count:
    five lines (catches the old line per tenth, about a hundred lines in a ``carbguard evaluate`` log)."""
    stream = io.StringIO()
    with Progress(1046, "scoring episodes", stream=stream, enabled=True) as tick:
        for done in range(1, 1047):
            tick(done)
    counts = [int(line.split(": ")[1].split("/")[0]) for line in stream.getvalue().splitlines()]
    assert len(counts) == 5 and counts[0] == 1 and counts[-1] == 1046
    assert [4 * c // 1046 for c in counts] == [0, 1, 2, 3, 4]  # one line as each quarter is passed


def test_a_short_job_still_gets_its_first_and_last_line() -> None:
    """A job stopped early (``close`` before the end) still logs where it stopped (catches the quarter
    rule swallowing the final count)."""
    stream = io.StringIO()
    bar = Progress(100, "work", stream=stream, enabled=True)
    for _ in range(10):
        bar.step()
    bar.close()
    assert [line.split(" (")[0] for line in stream.getvalue().splitlines()] == ["work: 1/100", "work: 10/100"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_keeps_the_live_bar() -> None:
    """On a terminal: one redrawn line (``\\r`` frames, no per-quarter lines) ending in a newline at the
    final count (catches the log's quarter lines replacing the live bar)."""
    stream = _Terminal()
    with Progress(1046, "scoring episodes", stream=stream, enabled=True) as tick:
        for done in range(1, 1047):
            tick(done)
    text = stream.getvalue()
    assert text.startswith("\r") and text.endswith("\n") and text.count("\n") == 1
    assert text.rsplit("\r", 1)[1].split("] ")[1].startswith("1046/1046")
    assert "#" * 30 in text
