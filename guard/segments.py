"""The segments of one session: what ran after ``close()`` is a unit of its own (docs/audit.md).

A closed session still decides and runs calls (a LangChain thread that runs again, a run resumed
after a review interrupt).  Its graph is kept, so every earlier record still counts for its
decisions, but the first decision after ``close()`` starts segment ``n`` (2, 3, …): its audit entries
carry ``session: "<id>#segment-<n>"`` and ``segment: n``, and the next ``close()`` writes that
segment's own ``session_end`` entry over its own decisions.  The monitor, review sampling and labels
therefore treat each segment as its own unit: a label of the first segment does not cover what ran
later (docs/monitoring.md).  A review entry carries the segment of the decision it answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard.decision import Decision
from guard.records import safe_repr


def segment_id(session_id: str, segment: int) -> str:
    """The audit id of a session's ``segment``: the session id itself for the first, ``<id>#segment-<n>`` after."""
    return session_id if segment <= 1 else f"{session_id}#segment-{segment}"


def call_key(call_id: Any) -> str:
    """The key a call id is kept under (a non-str id under its repr, as :class:`guard.calls.CallBook` does)."""
    return call_id if type(call_id) is str else safe_repr(call_id)


class Segments:
    """The segment bookkeeping of one session (the session's lock guards it)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.number = 1
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
            self.number += 1
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


__all__ = ["Segments", "call_key", "segment_id"]
