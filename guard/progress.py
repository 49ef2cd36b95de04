"""A dependency-free progress bar on stderr (quiet when stderr is not a terminal unless forced)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """``with Progress(total, "scoring") as tick: tick(done)``."""

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = bool(enabled) and self.stream.isatty()
        self._start = time.perf_counter()
        self._last = 0.0

    def __enter__(self) -> Callable[[int], None]:
        return self.update

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.update(self.total, force=True)
            self.stream.write("\n")
            self.stream.flush()

    def update(self, done: int, force: bool = False) -> None:
        """Redraw the bar at ``done`` of ``total`` (at most ten times a second)."""
        now = time.perf_counter()
        if not self.enabled or (not force and now - self._last < 0.1 and done < self.total):
            return
        self._last = now
        frac = min(done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        rate = done / max(now - self._start, 1e-9)
        self.stream.write(f"\r{self.label:<28} [{bar:<30}] {done}/{self.total} ({rate:,.0f}/s)")
        self.stream.flush()
