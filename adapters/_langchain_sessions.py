"""The sessions of the LangGraph interceptor (:class:`guard.adapters._langchain_wrapper.GuardToolWrapper`): one
per thread (or run), kept in memory up to a bound, least recently used dropped and closed."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from guard.adapters._langchain_core import BaseMessage, SessionKey, Tracker, UnboundCallError
from guard.runtime import Guard, Session


class SessionPool:
    """Session keys, live sessions and their trackers; the interceptor sets the attributes in its ``__init__``."""

    guard: Guard
    session_key: SessionKey
    max_sessions: int
    _trackers: OrderedDict[str, Tracker]
    _lock: threading.Lock

    def key_for(self, config: Mapping[str, Any], messages: Sequence[Any]) -> str:
        """The session key of a run: ``session_key(config)``, else ``run:<first message id>``.

        Raises :class:`UnboundCallError` when neither exists: runs are never pooled into a shared session.
        """
        key = self.session_key(config)
        if key is not None:
            return key
        first = next((m for m in messages if isinstance(m, BaseMessage)), None)
        if first is None or type(first.id) is not str or not first.id:
            raise UnboundCallError(
                "carbguard: no thread id and the first message has no id; refusing (no shared session)"
            )
        return f"run:{first.id}"

    def session(self, key: str) -> Session | None:
        """The live session of ``key``, if it is in memory."""
        tracker = self._trackers.get(key)
        return tracker.session if tracker is not None else None

    def close(self, key: str | None = None) -> None:
        """Close the live session of ``key`` (every live one when None): its ``session_end`` audit entry.

        A ``ToolNode`` does not see a run end: call this when a thread is done (a session dropped from
        memory is closed then, and the middleware closes its own).  A closed session that decides
        again continues as a new segment (docs/audit.md).
        """
        with self._lock:
            trackers = [t for k, t in self._trackers.items() if key is None or k == key]
        for tracker in trackers:
            tracker.session.close()

    def skipped(self, key: str) -> list[str]:
        """Messages of session ``key`` that could not be fed (e.g. a result for an unknown call id)."""
        tracker = self._trackers.get(key)
        return list(tracker.skipped) if tracker is not None else []

    def _tracker(self, key: str) -> Tracker:
        with self._lock:
            tracker = self._trackers.get(key)
            if tracker is None:
                tracker = Tracker(self.guard.session(key))
                self._trackers[key] = tracker
                while len(self._trackers) > self.max_sessions:
                    self._trackers.popitem(last=False)[1].session.close()  # dropped: its session_end written
            self._trackers.move_to_end(key)
            return tracker
