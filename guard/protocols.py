"""The typed extension points of carbguard, one Protocol per concept."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from guard.graph import PrefixGraph
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
