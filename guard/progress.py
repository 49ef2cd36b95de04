"""The one progress bar of carbguard, on stderr.

On a terminal it redraws one line (at most ten times a second).  When stderr is not a terminal
(a CI log, a file) it writes a few plain lines per bar instead — the first update, one as the work
passes each quarter, and the final count — so a log gets neither carriage-return frames nor a line
per tenth of every job.  Disabled, it writes nothing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """``with Progress(total, "scoring", enabled=True) as tick: tick(done)``."""

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = bool(enabled)
        self.tty = self.enabled and _isatty(self.stream)
        self._start = time.perf_counter()
        self._last = 0.0
        self._quarter = -1  # the last quarter (0-4) a plain line was written for; -1: none yet
        self._done = 0
        self._printed = -1

    def __enter__(self) -> Callable[[int], None]:
        return self.update

    def __exit__(self, *exc: object) -> None:
        self.close()

    def step(self, count: int = 1) -> None:
        """Advance by ``count`` units."""
        self.update(self._done + count)

    def close(self) -> None:
        """Finish the bar (the final count, and a newline on a terminal)."""
        if not self.enabled:
            return
        self.update(max(self._done, 0), force=True)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False

    def update(self, done: int, force: bool = False) -> None:
        """Show ``done`` of ``total``."""
        self._done = done
        if not self.enabled:
            return
        if self.tty:
            self._redraw(done, force)
        else:
            quarter = min(4 * max(done, 0) // self.total, 4)
            if (force and done != self._printed) or self._quarter < 0 or quarter > self._quarter:
                self._quarter = max(quarter, self._quarter, 0)
                self._printed = done
                self.stream.write(f"{self.label}: {done}/{self.total}{self._rate(done)}\n")
                self.stream.flush()

    def _redraw(self, done: int, force: bool) -> None:
        now = time.perf_counter()
        if not force and now - self._last < 0.1 and done < self.total:
            return
        self._last = now
        bar = "#" * int(min(done / self.total, 1.0) * 30)
        self.stream.write(f"\r{self.label:<28} [{bar:<30}] {done}/{self.total}{self._rate(done)}")
        self.stream.flush()

    def _rate(self, done: int) -> str:
        return f" ({done / max(time.perf_counter() - self._start, 1e-9):,.0f}/s)"


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or exotic streams
        return False


__all__ = ["Progress"]
