"""The typed extension points of carbguard, one Protocol per concept."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from guard.calls import CallState
    from guard.decision import Certification
    from guard.graph import PrefixGraph
    from guard.policy import Policy, ToolSpec
    from guard.records import Record


@runtime_checkable
class Selector(Protocol):
    """Picks the earlier records that the scorer sees for one proposal."""

    name: str

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        """Earlier node indices for the proposal at ``node``; must not depend on the threshold."""
        ...


@runtime_checkable
class Scorer(Protocol):
    """Maps (selection, proposal) to one number, with the feature values that made it."""

    def score(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> tuple[float, Mapping[str, bool]]:
        """The score and the binary features of the proposal at ``node``."""
        ...


@runtime_checkable
class LedgerRule(Protocol):
    """One harm category: a rule over an executed proposal and its confirmed result."""

    name: str

    def fires(self, proposal: Record, result: Record, history: tuple[Record, ...]) -> bool:
        """Whether executing ``proposal`` (answered by ``result``) charges this category."""
        ...


@runtime_checkable
class AuditSink(Protocol):
    """Receives one audit entry per decision and makes it durable before returning."""

    def write(self, entry: Mapping[str, Any]) -> None:
        """Append ``entry`` durably (flushed) or raise."""
        ...


class Certifier(Protocol):
    """The SafeCommit stage (docs/safecommit.md) as the runtime sees it."""

    def certify(self, session: SessionState, node: int, spec: ToolSpec) -> Certification:
        """Certify the proposal at ``node`` or refuse it."""
        ...


class Escalation(Protocol):
    """The circuit breaker as the gate sees it (:class:`guard.breaker.Breaker`): why a tripped fallback
    escalates a call of ``spec``'s tool (None: it does not); ``risky`` tells whether the call carries
    private or untrusted provenance (asked only by the ``escalate_risky`` fallback); ``threshold_in_force``
    is the threshold and how a refusal names it, read from one snapshot of the gate state."""

    def threshold_in_force(self) -> tuple[float, str]: ...

    def escalation(self, spec: ToolSpec | None, risky: Callable[[], bool] | None = None) -> str | None: ...

    def escalates(self, spec: ToolSpec | None, risky: Callable[[], bool] | None = None) -> bool: ...


class GuardConfig(Protocol):
    """What the stages of one decision read from the guard that owns the session."""

    @property
    def policy(self) -> Policy: ...
    @property
    def threshold(self) -> float: ...
    @property
    def artifact_id(self) -> str | None: ...
    @property
    def selector(self) -> Selector: ...
    @property
    def scorer(self) -> Scorer: ...
    @property
    def certifier(self) -> Certifier: ...
    @property
    def mode(self) -> str: ...
    @property
    def breaker(self) -> Escalation: ...
    @property
    def audit(self) -> AuditSink | None: ...


class SessionState(Protocol):
    """What the stages of one decision read and extend: the episode's graph and bookkeeping.

    :class:`guard.session.Session` is the implementation; the stages, the redactor and the
    certifier see only this view, so none of them imports the runtime.
    """

    @property
    def guard(self) -> GuardConfig: ...
    @property
    def session_id(self) -> str: ...
    @property
    def graph(self) -> PrefixGraph: ...
    @property
    def proposals(self) -> Mapping[str, Record]: ...
    @property
    def certifier_state(self) -> dict[str, Any]: ...
    @property
    def next_index(self) -> int: ...

    def call_state(self, call_id: str) -> CallState:
        """Where ``call_id`` stands (proposed, ran, answered, or unknown)."""
        ...

    def propose(self, call_id: str, record: Record) -> None:
        """The pipeline's hook: add ``record`` to the graph as the proposal node of ``call_id``."""
        ...
