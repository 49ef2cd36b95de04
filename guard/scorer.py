"""The frozen weighted scorer (METHOD §6): binary features of (selection, proposal), no LLM call.

Only ``provenance_path`` needs a retained source-to-sink path; the other features can fire on
disconnected records, which is why the selector changes decisions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from guard.graph import E4, PrefixGraph
from guard.policy import Effect, Policy, ToolKind
from guard.records import Trust

FEATURES: tuple[str, ...] = (
    "provenance_path",
    "private_in_context",
    "canary",
    "injection_text",
    "untrusted_payload",
    "irreversible_sink",
    "injected_value",
)


class WeightedScorer:
    """Score = Σ weight·feature over the policy's weights."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.weights = policy.scorer.weights.model_dump()
        self._canary = [re.compile(p) for p in policy.scorer.canary_patterns]

    def features(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> dict[str, bool]:
        """The binary feature values of the proposal at ``node`` given ``selected``."""
        record = graph.records[node]
        spec = self.policy.tool(record.tool or "")
        is_sink = spec is not None and spec.kind is ToolKind.SINK
        private = graph.flagged_among("private", selected)
        ancestors = graph.ancestor_bits(node) if is_sink and private else 0
        return {
            "provenance_path": any(ancestors >> p & 1 for p in private),
            "private_in_context": bool(private),
            "canary": bool(graph.flagged_among("canary", selected)) or self._payload_canary(graph, node),
            "injection_text": bool(graph.flagged_among("injection", selected)),
            "untrusted_payload": self._untrusted_payload(graph, node, selected),
            "irreversible_sink": is_sink and spec is not None and spec.effect is Effect.IRREVERSIBLE,
            "injected_value": self._injected_value(graph, node, selected),
        }

    def score(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> tuple[float, Mapping[str, bool]]:
        """The weighted sum and the features that made it."""
        values = self.features(graph, node, selected)
        if not self._in_scope(graph, node):
            return 0.0, MappingProxyType(values)
        total = sum(self.weights[name] for name, on in values.items() if on)
        return round(total, 12), MappingProxyType(values)

    def _in_scope(self, graph: PrefixGraph, node: int) -> bool:
        """Whether the policy's scorer scope scores this proposal."""
        if self.policy.scorer.scope == "all":
            return True
        spec = self.policy.tool(graph.records[node].tool or "")
        return spec is not None and (spec.kind is ToolKind.SINK or spec.effect is not Effect.NONE)

    def _payload_args(self, graph: PrefixGraph, node: int) -> set[str]:
        spec = self.policy.tool(graph.records[node].tool or "")
        return set(spec.payload_args) | set(spec.identifier_args) if spec else set()

    def _payload_canary(self, graph: PrefixGraph, node: int) -> bool:
        names = self._payload_args(graph, node)
        values = [v for name, v in graph.records[node].arg_values() if name in names]
        return any(p.search(v) for p in self._canary for v in values)

    def _injected_value(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> bool:
        """A payload value of the proposal occurs inside injection-like text of a selected untrusted record."""
        names = self._payload_args(graph, node)
        values = [v for name, v in graph.records[node].arg_values() if name in names and len(v) >= 4]
        window = self.policy.scorer.injection_window
        for source in graph.flagged_among("injection", selected):
            facts = graph.facts[source]
            if not facts.injection_at or facts.trust is not Trust.TOOL_UNTRUSTED:
                continue
            text = graph.records[source].text
            if any(_inside(text, v, facts.injection_at, window) for v in values):
                return True
        return False

    def _untrusted_payload(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> bool:
        names = self._payload_args(graph, node)
        untrusted_selected = graph.flagged_among("untrusted", selected)
        untrusted: set[str] = set()
        from_user: set[str] = set()
        for sources, etype, args in graph.edge_blocks(node):
            if etype == E4:
                from_user |= args
            elif not untrusted_selected.isdisjoint(sources):
                untrusted |= args
        return bool((untrusted - from_user) & names)


def _inside(text: str, value: str, starts: tuple[int, ...], window: int) -> bool:
    """Whether ``value`` occurs in ``text`` within ``window`` characters after one of ``starts``."""
    position = text.find(value)
    while position >= 0:
        if any(0 <= position - start <= window for start in starts):
            return True
        position = text.find(value, position + 1)
    return False
