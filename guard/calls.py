"""The calls of one session: their decisions, proposals and where each stands (run, answered, approved).

:class:`CallBook` is the only writer of this bookkeeping; :class:`guard.session.Session` holds one
and answers readers with queries (``decision``, ``call_state``) and read-only views.  The pipeline
adds proposals through :meth:`CallBook.propose`; :meth:`CallBook.bind` is the binding rule of
``Session.authorize``.  Not thread-safe by itself: the session's lock guards every call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from guard.decision import Decision
from guard.errors import BindingError
from guard.records import Record, canonical_args, safe_repr


class CallState(StrEnum):
    """Where one call id of a session is (``Session.call_state``)."""

    UNKNOWN = "unknown"  # never entered the graph (not decided, or refused before it)
    PROPOSED = "proposed"  # decided, in the graph, not run
    RAN = "ran"  # authorized once; no result observed yet
    ANSWERED = "answered"  # its result was observed


def decided_call(decision: Decision | None, tool: Any, args: Any) -> bool:
    """Whether ``decision`` was made on exactly this call: the same plain-str tool and canonical arguments.

    ``Session.authorize`` uses it; adapters use it to tell an unchanged request (reuse the decision)
    from a changed one (decide it again).
    """
    if decision is None or decision.args is None or type(tool) is not str or tool != decision.tool:
        return False
    if not isinstance(args, Mapping):
        return False
    try:
        return canonical_args(args) == dict(decision.args)
    except (TypeError, ValueError, RecursionError):
        return False


class CallBook:
    """Decisions by call id, the proposals in the graph, and which calls ran, were answered or approved."""

    def __init__(self) -> None:
        self._decisions: dict[str, Decision] = {}
        self._proposals: dict[str, Record] = {}
        self._executed: set[str] = set()
        self._answered: set[str] = set()
        self._approved: set[str] = set()
        self.decisions: Mapping[str, Decision] = MappingProxyType(self._decisions)
        self.proposals: Mapping[str, Record] = MappingProxyType(self._proposals)

    def decision(self, call_id: Any) -> Decision | None:
        """The latest decision on ``call_id`` (None if it was never decided)."""
        return self._decisions.get(call_id) if type(call_id) is str else None

    def state(self, call_id: Any) -> CallState:
        """Where ``call_id`` stands."""
        if call_id in self._answered:
            return CallState.ANSWERED
        if call_id in self._executed:
            return CallState.RAN
        return CallState.PROPOSED if call_id in self._proposals else CallState.UNKNOWN

    def executed(self) -> frozenset[str]:
        """The call ids that were authorized to run."""
        return frozenset(self._executed)

    def answered(self) -> frozenset[str]:
        """The call ids whose result was observed."""
        return frozenset(self._answered)

    def remember(self, call_id: Any, decision: Decision) -> Decision:
        """Keep ``decision`` as the latest on ``call_id`` (a non-str id is kept under its repr)."""
        self._decisions[call_id if type(call_id) is str else safe_repr(call_id)] = decision
        return decision

    def propose(self, call_id: str, record: Record) -> None:
        """The pipeline's hook: ``record`` is the proposal node of ``call_id``."""
        self._proposals[call_id] = record

    def answer(self, call_id: str) -> None:
        """``call_id``'s result was observed."""
        self._answered.add(call_id)

    def approve(self, call_id: str) -> None:
        """A human approved ``call_id``: :meth:`bind` lets its decided call run once although not ``execute``."""
        self._approved.add(call_id)

    def bind(self, where: str, call_id: Any, tool: Any, args: Any, shadow: bool) -> dict[str, Any]:
        """Mark exactly the decided call as run and return a fresh copy of its canonical arguments.

        Raises :class:`BindingError` (nothing marked) for no decision, another tool, a second run,
        changed arguments, or a verdict other than ``execute`` (unless ``shadow`` or approved).
        """
        decision = self.decision(call_id)
        if decision is None:
            raise BindingError(f"{where}: no decision for this call; decide it first")
        if decision.args is None:  # refused before its arguments were read (bad_arguments, an unknown tool, ...)
            raise BindingError(
                f"{where}: decided {decision.verdict.value} ({decision.reason.value}) before its arguments could be "
                "read, so there is no decided copy of them to run"
            )
        if type(tool) is not str or tool != decision.tool:
            raise BindingError(f"{where}: decided for tool {decision.tool!r}, asked to run another tool")
        if call_id in self._executed or call_id in self._answered:
            raise BindingError(f"{where}: already ran; a decided call runs once")
        if not decided_call(decision, tool, args):
            raise BindingError(f"{where}: arguments differ from the ones decided; decide the new call")
        if not decision.allowed and not shadow and call_id not in self._approved:
            raise BindingError(f"{where}: verdict is {decision.verdict.value}, not execute")
        self._executed.add(call_id)
        copy: dict[str, Any] = json.loads(json.dumps(dict(decision.args)))
        return copy


__all__ = ["CallBook", "CallState", "decided_call"]
