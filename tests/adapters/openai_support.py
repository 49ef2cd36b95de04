"""Helpers shared by the OpenAI Agents SDK adapter tests (the SDK's tracing and event loops)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Any


def quiet_tracing_and_close_loops() -> Iterator[None]:
    """No trace export; close the thread's default loop that ``Runner.run_sync`` leaves open."""
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:  # no default loop (set to None by an earlier test)
        return
    if not loop.is_running():
        loop.close()
    asyncio.set_event_loop(None)


def arun(coro: Any) -> Any:
    """Run a coroutine on a loop of its own (not the default loop run_sync uses)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def decision_entries(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decision entries of an audit log (not its ``session_end`` or review entries)."""
    return [e for e in entries if "event" not in e and e.get("kind") != "review"]


def session_ends(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``session_end`` entries of an audit log, in order."""
    return [e for e in entries if e.get("event") == "session_end"]
