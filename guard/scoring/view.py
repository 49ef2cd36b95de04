"""One proposal's evidence view: the facts its feature rows read, each computed once, on first use.

A :class:`NodeEvidence` belongs to one (graph, node): the proposal's tool spec, its argument values, the
names of its payload and identifier arguments, the edge rules into it (read once, as the sources of each
argument), the user turns before it and their stems, its role, graded and control readings.  None of these
reads the selection, so the scorer keeps the newest proposal's view across the selections it scores.  An
:class:`EvidenceView` adds one selection (its bit set) to a node's view: what the selection-reading rows see.

The view holds its graph by a weak reference (a kept view does not keep an episode's graph alive); the
scorer builds a view from a graph it holds, and reads it only while it does.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from guard.evidence.control import ControlView, control_view
from guard.evidence.role_features import arg_sources, role_features
from guard.features import GRADED_FEATURES, ROLE_FEATURES
from guard.graph import PrefixGraph, members
from guard.policy import Effect, Policy, ToolSpec
from guard.records import Record

__all__ = ["Context", "EvidenceView", "NodeEvidence", "ToolFacts", "Turns", "tool_facts"]

#: The user turns before a node, lowercase, and the stems of their words.
Turns = tuple[tuple[str, ...], frozenset[str]]
_T = TypeVar("_T")


class _lazy(Generic[_T]):  # noqa: N801 -- used as a decorator, like ``property``
    """A property computed on first read and then kept in the instance (no lock: every fact is a pure
    function of the graph and the node, so two threads that both compute one get the same value)."""

    def __init__(self, compute: Callable[[Any], _T]) -> None:
        self._compute = compute
        self._name = compute.__name__
        self.__doc__ = compute.__doc__

    @overload
    def __get__(self, obj: None, owner: type) -> _lazy[_T]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> _T: ...
    def __get__(self, obj: object, owner: type) -> _T | _lazy[_T]:
        if obj is None:
            return self
        value = self._compute(obj)
        obj.__dict__[self._name] = value  # the instance's entry now shadows this (non-data) descriptor
        return value


@dataclass(frozen=True, slots=True)
class ToolFacts:
    """What the features read of a tool's spec, computed once per scorer: the spec (None: undeclared), whether
    it is a sink, whether it acts (a sink or side-effectful: what the role, scope and control readings read),
    and the names of its payload and identifier arguments."""

    spec: ToolSpec | None
    is_sink: bool = False
    acts: bool = False
    payload_names: frozenset[str] = frozenset()


_UNDECLARED = ToolFacts(None)


def tool_facts(policy: Policy) -> dict[str, ToolFacts]:
    """The :class:`ToolFacts` of every tool the policy declares, by name."""
    out = {}
    for name, spec in policy.tools.items():
        sink = spec.is_sink
        payload = frozenset(spec.payload_args) | frozenset(spec.identifier_args)
        out[name] = ToolFacts(spec, sink, sink or spec.effect is not Effect.NONE, payload)
    return out


@dataclass(frozen=True, slots=True)
class Context:
    """What the scorer lends its views: its policy (scorer settings), the facts of its tools, its compiled
    canary patterns and its memoised reading of the user turns before a node."""

    policy: Policy
    tools: Mapping[str, ToolFacts]
    canary: tuple[re.Pattern[str], ...]
    turns: Callable[[PrefixGraph, int], Turns]

    def tool(self, name: str | None) -> ToolFacts:
        """The facts of tool ``name`` (an undeclared tool: no spec, neither a sink nor acting)."""
        return self.tools.get(name or "", _UNDECLARED)


class NodeEvidence:
    """The selection-free facts of the proposal at ``node`` of ``graph`` (see the module): the tool's facts, the
    user turns and untrusted records of the graph as bit sets, read when the view is built; the rest on first use."""

    def __init__(self, graph: PrefixGraph, node: int, context: Context) -> None:
        self._graph = weakref.ref(graph)
        self.node = node
        self.context = context
        self.record: Record = graph.records[node]
        tool = context.tool(self.record.tool)
        self.spec, self.is_sink, self.acts, self.payload_names = tool.spec, tool.is_sink, tool.acts, tool.payload_names
        self.users = graph.user_bits()
        self.untrusted = graph.flagged_bits("untrusted")

    @property
    def graph(self) -> PrefixGraph:
        """The graph of the node (alive while the scorer that built this view scores from it)."""
        graph = self._graph()
        if graph is None:  # fail closed: a view is read only while its graph is held
            raise RuntimeError(f"the evidence view of node {self.node} outlived its graph")
        return graph

    @_lazy
    def args(self) -> tuple[tuple[str, str], ...]:
        """Every ``(argument name, text)`` the tool receives (:meth:`guard.records.Record.arg_values`)."""
        return tuple(self.record.arg_values())

    @_lazy
    def payload_values(self) -> tuple[str, ...]:
        """The texts of the payload and identifier arguments, in argument order."""
        names = self.payload_names
        return tuple(value for name, value in self.args if name in names)

    @_lazy
    def payload_stripped(self) -> frozenset[str]:
        """The payload and identifier texts, stripped, as a set."""
        return frozenset(value.strip() for value in self.payload_values)

    @_lazy
    def sources(self) -> dict[str, int]:
        """The edge rules into the node, read once: argument name ("" for a call's result) -> its sources."""
        return arg_sources(self.graph.edge_rules(self.node))

    @_lazy
    def turns(self) -> Turns:
        """The user turns before the node (lowercase) and their stems (the scorer's memo)."""
        return self.context.turns(self.graph, self.node)

    @_lazy
    def turn_texts(self) -> tuple[str, ...]:
        """The user turns before the node, as written."""
        graph = self.graph
        return tuple(graph.records[n].text for n in members(self.users & ((1 << self.node) - 1)))

    @_lazy
    def roles(self) -> dict[str, bool]:
        """The role and graded readings (:func:`guard.evidence.role_features.role_features`); all off for a call
        that is neither a sink nor side-effectful."""
        if not self.acts:
            return dict.fromkeys(ROLE_FEATURES + GRADED_FEATURES, False)
        graph = self.graph
        k = graph.policy.graph.min_span
        return role_features(graph, self.node, self.spec, self.args, k, graph.index_before(self.node), self.sources)

    @_lazy
    def control(self) -> ControlView:
        """The control reading (:func:`guard.evidence.control.control_view`); empty for a call that is neither a
        sink nor side-effectful."""
        if not self.acts:
            return ControlView()
        return control_view(self.graph, self.node, self.spec, self.turns[0], self.sources)


class EvidenceView:
    """A node's view and one selection: ``chosen`` is the selection as a bit set, ``private`` its private records."""

    __slots__ = ("chosen", "node", "private")

    def __init__(self, node: NodeEvidence, chosen: int) -> None:
        self.node = node
        self.chosen = chosen
        self.private = node.graph.flagged_bits("private") & chosen
