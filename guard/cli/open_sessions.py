"""Sessions still open past the bound: the options, the check and the warning of ``carbguard monitor`` and ``review``.

A session with no ``session_end`` entry and ``--open-bound N`` audit entries (default 1000), or
``--open-bound-seconds S`` (default 3600, by the clock now), after its last entry is *open past the
bound*: the monitor no longer waits for it (:class:`guard.cli.deployed.OpenBound`), review cannot
sample it (it has no recorded pick), and both name it and exit 5 (docs/monitoring.md).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from guard.cli._common import ranged
from guard.cli.deployed import OPEN_BOUND_ENTRIES, OPEN_BOUND_SECONDS, OpenBound, UnitIds

EXIT_OPEN = 5


def open_bound(args: argparse.Namespace) -> OpenBound:
    """The bound of ``--open-bound`` / ``--open-bound-seconds`` (wall time now)."""
    return OpenBound(entries=args.open_bound, seconds=args.open_bound_seconds, now=time.time())


def open_past_bound_line(ids: list[str], bound: dict[str, Any], what: str) -> str:
    """The warning on sessions still open past the bound (``carbguard monitor`` and ``review``)."""
    shown = ", ".join(repr(s) for s in ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    return (
        f"WARNING: {len(ids)} session(s) still open past the bound ({bound['entries']} entries or "
        f"{bound['seconds']:g} s after their last entry; no session_end): {shown}; {what} — close every session "
        "(session.close() in a finally: block), or find out why the agent stopped without closing them"
    )


def open_past_bound(entries: list[dict[str, Any]], bound: OpenBound) -> list[str]:
    """The sessions with no ``session_end`` that are past ``bound`` after their last entry, in start order."""
    last: dict[str, tuple[int, float | None]] = {}
    closed: set[str] = set()
    units = UnitIds()  # the monitor's units (a run under an id whose unit ended is a unit of its own)
    for line, entry in enumerate(entries, start=1):
        if entry.get("kind") in ("review", "breaker"):
            continue
        sid = units.of(str(entry.get("session")), ending=entry.get("event") == "session_end")
        if entry.get("event") == "session_end":
            closed.add(sid)
        ts = entry.get("ts")
        seen = float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else None
        before = last.get(sid, (0, None))[1]
        last[sid] = (line, seen if before is None else before if seen is None else max(before, seen))
    total = len(entries)
    return [sid for sid, (line, ts) in last.items() if sid not in closed and bound.past(total - line, ts)]


_entries = ranged(int, lambda value: value >= 1, "must be at least 1")
_seconds = ranged(float, lambda value: 0.0 < value < float("inf"), "must be a positive number of seconds")


def add_open_bound(parser: Any) -> None:
    """``--open-bound`` and ``--open-bound-seconds`` (``carbguard monitor`` and ``review``)."""
    parser.add_argument(
        "--open-bound",
        type=_entries,
        default=OPEN_BOUND_ENTRIES,
        metavar="N",
        help=f"a session with no session_end and N audit entries after its last entry is open past the bound "
        f"(default {OPEN_BOUND_ENTRIES}): reported, exit code 5",
    )
    parser.add_argument(
        "--open-bound-seconds",
        type=_seconds,
        default=OPEN_BOUND_SECONDS,
        metavar="S",
        help=f"... or S seconds after its last entry, by the clock now (default {OPEN_BOUND_SECONDS:g})",
    )


__all__ = ["EXIT_OPEN", "add_open_bound", "open_bound", "open_past_bound", "open_past_bound_line"]
