"""The segments of one session: what ran after ``close()`` is a unit of its own (docs/audit.md).

A closed session still decides and runs calls (a LangChain thread that runs again, a run resumed
after a review interrupt).  Its graph is kept, so every earlier record still counts for its
decisions, but the first decision after ``close()`` starts segment ``n`` (2, 3, …): its audit entries
carry ``session: "<id>#segment-<n>"`` and ``segment: n``, and the next ``close()`` writes that
segment's own ``session_end`` entry over its own decisions.  The monitor, review sampling and labels
therefore treat each segment as its own unit: a label of the first segment does not cover what ran
later (docs/monitoring.md).  A review entry carries the segment of the decision it answers.

A guard gives out segment numbers per session id from one :class:`SegmentBook` shared by its views,
so a second ``guard.session(id)`` with an id the guard has seen (an evicted LangChain thread that
comes back, one run per call under the caller's id) starts the next segment instead of writing a
second unit under the same ``session`` value (docs/audit.md#one-unit-per-segment).  The markers of
audit ids the guard and the monitor derive (``#segment-``, ``#run-``) are refused in a session id
(:func:`check_session_id`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from guard.decision import Decision
from guard.errors import InputError
from guard.records import safe_repr

#: Markers of derived audit ids: ``<id>#segment-<n>`` (a session's later segment) and ``<id>#run-<k>`` (the
#: monitor's name for the k-th unit of one audit id written by separate processes, guard.cli.deployed).
RESERVED = ("#segment-", "#run-")


def segment_id(session_id: str, segment: int) -> str:
    """The audit id of a session's ``segment``: the session id itself for the first, ``<id>#segment-<n>`` after."""
    return session_id if segment <= 1 else f"{session_id}#segment-{segment}"


def check_session_id(session_id: Any) -> str:
    """``session_id`` if a guard may open a session under it; InputError if it is no string, empty, or holds a
    reserved marker (it would pass for another session's segment or run in the audit log)."""
    if type(session_id) is not str or not session_id:
        raise InputError(f"a session id must be a non-empty string, got {safe_repr(session_id)[:80]}")
    marker = next((m for m in RESERVED if m in session_id), None)
    if marker is not None:
        raise InputError(
            f"session id {session_id[:80]!r} contains {marker!r}, reserved for the audit ids of later segments "
            "and runs (docs/audit.md#one-unit-per-segment); choose an id without it"
        )
    return session_id


class SegmentBook:
    """The last segment number one guard gave out per session id (thread-safe; shared by the guard's views).

    Every id the guard opened stays here for the guard's lifetime (one small entry per id), so a reused id
    always continues after the segments its earlier sessions used.
    """

    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        self._lock = threading.Lock()

    def next(self, session_id: str) -> int:
        """The next segment number of ``session_id`` (1 for an id not seen before)."""
        with self._lock:
            number = self._last.get(session_id, 0) + 1
            self._last[session_id] = number
            return number


def call_key(call_id: Any) -> str:
    """The key a call id is kept under (a non-str id under its repr, as :class:`guard.calls.CallBook` does)."""
    return call_id if type(call_id) is str else safe_repr(call_id)


class Segments:
    """The segment bookkeeping of one session (the session's lock guards it)."""

    def __init__(self, session_id: str, book: SegmentBook | None = None) -> None:
        self.session_id = session_id
        self._book = SegmentBook() if book is None else book
        self.number = self._book.next(session_id)
        self.first = self.number  # the session's first segment (above 1 when the guard had seen the id)
        self.closed = False
        self.start = 0  # the index of the running segment's first record
        self._calls: dict[str, None] = {}  # call ids decided (or audited) in the running segment, in order
        self._decided_in: dict[str, int] = {}  # call id -> the segment of its latest decision

    @property
    def audit_id(self) -> str:
        """The ``session`` id of the running segment's audit entries."""
        return segment_id(self.session_id, self.number)

    def fields(self, number: int | None = None) -> dict[str, Any]:
        """``session`` (and from the second segment on ``segment``) of an audit entry of segment ``number``."""
        n = self.number if number is None else number
        return {"session": segment_id(self.session_id, n), **({"segment": n} if n > 1 else {})}

    def end(self) -> bool:
        """Mark the running segment ended; False when it already was (``close()`` is idempotent)."""
        if self.closed:
            return False
        self.closed = True
        return True

    def reopen(self, next_index: int) -> None:
        """A decision after ``close()``: start the next segment at record ``next_index`` (no-op while open)."""
        if self.closed:
            self.closed = False
            self.number = self._book.next(self.session_id)
            self._calls = {}
            self.start = next_index

    def ran(self, call_id: Any, *, decided: bool = True) -> None:
        """``call_id`` was audited in the running segment (``decided``: its latest decision was made here)."""
        key = call_key(call_id)
        self._calls[key] = None
        if decided:
            self._decided_in[key] = self.number

    def decided_in(self, call_id: Any) -> int:
        """The segment of ``call_id``'s latest decision (the running one if unknown)."""
        return self._decided_in.get(call_key(call_id), self.number)

    def decisions(self, latest: Mapping[str, Decision]) -> dict[str, Decision]:
        """The latest decision per call id of the running segment, in order, out of the session's ``latest``."""
        return {c: latest[c] for c in self._calls if c in latest}


__all__ = ["RESERVED", "SegmentBook", "Segments", "call_key", "check_session_id", "segment_id"]
