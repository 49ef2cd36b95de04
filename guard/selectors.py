"""Selectors: which earlier records the scorer sees (docs/concepts.md).

Every selector returns a frozenset of earlier node indices; the proposal itself is always scored.
No selector looks at the threshold, so the same proposal gets the same context at every λ.
"""

from __future__ import annotations

import hashlib
import random

from guard.errors import PolicyError
from guard.graph import NodeSet, PrefixGraph
from guard.policy import SelectorSpec
from guard.protocols import Selector


def gcarb_select(graph: PrefixGraph, node: int) -> frozenset[int]:
    """G-CARB: private-source → ``node`` paths if ``node`` is a reachable sink, else its ancestors.

    The path nodes are the ancestors that are private sources or descend from one (the graph keeps
    that flag per node), so this is a few bit-set operations, not a walk over the prefix.
    """
    ancestors = graph.ancestor_bits(node)
    if graph.is_sink(node) and ancestors & graph.private_bits():
        return NodeSet.of(graph.path_bits(node))
    return NodeSet.of(ancestors)


class GCarbSelector:
    """Dependency selection along the provenance graph."""

    name = "gcarb"

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        """See :func:`gcarb_select`."""
        return gcarb_select(graph, node)


class FullPrefixSelector:
    """Every earlier record."""

    name = "full_prefix"

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        """All nodes before ``node``."""
        return frozenset(n for n in graph.records if n < node)


class FixedWindowSelector:
    """The last ``k`` earlier records."""

    name = "fixed_window"

    def __init__(self, window: int) -> None:
        self.window = window

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        """The ``k`` nodes just before ``node``."""
        earlier = sorted(n for n in graph.records if n < node)
        return frozenset(earlier[-self.window :])


class LedgerCurrentSelector:
    """Nothing earlier: the proposal alone."""

    name = "ledger_current"

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        """The empty set."""
        return frozenset()


class RandomEqualSizeSelector:
    """As many earlier records as G-CARB picks, drawn from a seed of (episode id, proposal index)."""

    name = "random_equal_size"

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        """A deterministic pseudo-random subset of the prefix, of G-CARB's size."""
        size = len(gcarb_select(graph, node))
        earlier = sorted(n for n in graph.records if n < node)
        digest = hashlib.sha256(f"{self.seed}|{episode_id}|{node}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        return frozenset(rng.sample(earlier, min(size, len(earlier))))


def make_selector(spec: SelectorSpec) -> Selector:
    """The selector a policy names."""
    if spec.name == "gcarb":
        return GCarbSelector()
    if spec.name == "full_prefix":
        return FullPrefixSelector()
    if spec.name == "fixed_window":
        return FixedWindowSelector(spec.window)
    if spec.name == "ledger_current":
        return LedgerCurrentSelector()
    if spec.name == "random_equal_size":
        return RandomEqualSizeSelector(spec.seed)
    raise PolicyError(
        f"unknown selector {spec.name!r}; use gcarb, full_prefix, fixed_window, ledger_current or random_equal_size"
    )
