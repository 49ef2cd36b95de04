"""The incremental prefix graph (METHOD §4).

Nodes are record indices; edges point forward in time and carry their type:

- ``E1`` call → result (same ``call_id``);
- ``E2`` span reuse: an argument value of a later proposal contains an exact span of at least
  ``min_span`` characters of an earlier record's text, or a whole value token of it;
- ``E3`` shared identifier: a value of an ``identifier_args`` argument equals an identifier that the
  earlier record names;
- ``E4`` user intent: E2/E3 where the earlier record is a user turn.

Adding a record costs time in the size of that record and the number of matches, never in the
length of the prefix: earlier texts are kept in a k-gram index (k = ``min_span``) and a value-token
index.  These rules are lexical, not semantic dataflow: a paraphrase escapes them, and common
strings shared by chance can add spurious edges.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import networkx as nx

from guard.normalize import normalize_value
from guard.policy import Policy, ToolKind
from guard.records import Record, RecordKind, Trust

E1, E2, E3, E4 = "E1", "E2", "E3", "E4"
_PRIORITY = {E1: 0, E4: 1, E3: 2, E2: 3}
_WS = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """Per-node flags computed once when the node is added (the scorer reads these)."""

    index: int
    kind: RecordKind
    trust: Trust
    private: bool
    injection: bool
    canary: bool
    injection_at: tuple[int, ...] = ()


class ValueIndex:
    """Value tokens and k-grams of earlier records → the nodes that hold them."""

    def __init__(self, patterns: Iterable[str], min_span: int) -> None:
        self._token_re = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
        self.min_span = min_span
        self.tokens: dict[str, set[int]] = defaultdict(set)
        self.identifiers: dict[str, set[int]] = defaultdict(set)
        self.kgrams: dict[str, set[int]] = defaultdict(set)

    def tokens_in(self, text: str) -> set[str]:
        """Value tokens found in ``text``."""
        if self._token_re is None or not text:
            return set()
        return {m.group(0) for m in self._token_re.finditer(text)}

    def add(self, node: int, text: str, identifiers: Iterable[str]) -> None:
        """Index ``text`` (k-grams, tokens) and extra identifiers under ``node``."""
        for token in self.tokens_in(text):
            self.tokens[token].add(node)
            self.identifiers[token].add(node)
        for ident in identifiers:
            self.identifiers[ident].add(node)
        k = self.min_span
        for gram in {text[i : i + k] for i in range(len(text) - k + 1)}:
            self.kgrams[gram].add(node)

    def span_sources(self, value: str) -> set[int]:
        """Nodes whose text shares an exact span of at least ``min_span`` chars with ``value``."""
        k = self.min_span
        found: set[int] = set()
        for i in range(len(value) - k + 1):
            nodes = self.kgrams.get(value[i : i + k])
            if nodes:
                found |= nodes
        return found

    def token_sources(self, value: str) -> set[int]:
        """Nodes that hold a whole value token found in ``value``."""
        found: set[int] = set()
        for token in self.tokens_in(value):
            found |= self.tokens.get(token, set())
        return found


def record_text(record: Record) -> str:
    """The text a record contributes to the index: its text, or a proposal's argument values."""
    if record.kind is RecordKind.PROPOSAL:
        return "\n".join(value for _, value in record.arg_values())
    return record.text


class NormalizingValueIndex(ValueIndex):
    """A :class:`ValueIndex` that indexes and looks up raw *and* normalized text (``graph.normalize``)."""

    def add(self, node: int, text: str, identifiers: Iterable[str]) -> None:
        """Index ``text`` and its normal form (k-grams, value tokens, identifiers) under ``node``."""
        idents = list(identifiers)
        super().add(node, text, idents)
        norm = normalize_value(text)
        norm_idents = [normalize_value(i) for i in idents]
        if norm != text or norm_idents != idents:
            super().add(node, norm, norm_idents)

    def span_sources(self, value: str) -> set[int]:
        """Nodes sharing a ``min_span`` span with ``value`` or with its normal form."""
        found = super().span_sources(value)
        norm = normalize_value(value)
        return found | super().span_sources(norm) if norm != value else found

    def token_sources(self, value: str) -> set[int]:
        """Nodes holding a whole value token of ``value`` or of its normal form."""
        found = super().token_sources(value)
        norm = normalize_value(value)
        return found | super().token_sources(norm) if norm != value else found


class PrefixGraph:
    """A DAG over the records of one episode, extended one record at a time."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.graph: nx.DiGraph = nx.DiGraph()
        self.facts: dict[int, NodeFacts] = {}
        self.records: dict[int, Record] = {}
        index_type = NormalizingValueIndex if policy.graph.normalize else ValueIndex
        self.index = index_type(policy.graph.value_patterns.values(), policy.graph.min_span)
        self._calls: dict[str, int] = {}
        self._newest = -1
        self._ancestor_memo: dict[int, frozenset[int]] = {}
        self._injection = [re.compile(p) for p in policy.scorer.injection_patterns]
        self._canary = [re.compile(p) for p in policy.scorer.canary_patterns]

    def __len__(self) -> int:
        return int(self.graph.number_of_nodes())

    def add(self, record: Record) -> None:
        """Add ``record`` and the edges into it; earlier nodes are never touched."""
        if record.index in self.records:
            raise ValueError(f"record index {record.index} is already in the graph")
        self._ancestor_memo.clear()
        if self.records and record.index < self._newest:
            raise ValueError(f"record index {record.index} is older than the graph's newest record")
        text = record_text(record)
        self.records[record.index] = record
        self._newest = record.index
        self.facts[record.index] = self._facts(record, text)
        self.graph.add_node(record.index)
        for source, etype, arg in self._incoming(record):
            self._add_edge(source, record.index, etype, arg)
        if record.kind is RecordKind.PROPOSAL and record.call_id is not None:
            self._calls[record.call_id] = record.index
        self.index.add(record.index, text, self._identifiers(record))

    def _facts(self, record: Record, text: str) -> NodeFacts:
        return NodeFacts(
            index=record.index,
            kind=record.kind,
            trust=record.trust,
            private=record.kind is RecordKind.RESULT and record.trust is Trust.TOOL_PRIVATE,
            injection=any(p.search(text) for p in self._injection),
            injection_at=tuple(sorted(m.start() for p in self._injection for m in p.finditer(text))),
            canary=any(p.search(text) for p in self._canary),
        )

    def _identifiers(self, record: Record) -> list[str]:
        if record.kind is not RecordKind.PROPOSAL or record.tool is None:
            return []
        spec = self.policy.tool(record.tool)
        names = set(spec.identifier_args) if spec else set()
        return [value for name, value in record.arg_values() if name in names]

    def _incoming(self, record: Record) -> Iterator[tuple[int, str, str]]:
        if record.kind is RecordKind.RESULT and record.call_id in self._calls:
            yield self._calls[record.call_id], E1, ""
        if record.kind is not RecordKind.PROPOSAL:
            return
        spec = self.policy.tool(record.tool or "")
        ident_args = set(spec.identifier_args) if spec else set()
        for name, value in record.arg_values():
            for source in self.index.span_sources(value) | self.index.token_sources(value):
                yield source, self._reuse_type(source, E2), name
            if name in ident_args:
                for ident in self._identifier_forms(value):
                    for source in self.index.identifiers.get(ident, ()):
                        yield source, self._reuse_type(source, E3), name

    def _identifier_forms(self, value: str) -> tuple[str, ...]:
        """The value, and with ``graph.normalize`` its normal form too."""
        if not self.policy.graph.normalize:
            return (value,)
        norm = normalize_value(value)
        return (value,) if norm == value else (value, norm)

    def _reuse_type(self, source: int, etype: str) -> str:
        return E4 if self.facts[source].kind is RecordKind.USER else etype

    def _add_edge(self, source: int, target: int, etype: str, arg: str) -> None:
        data = self.graph.get_edge_data(source, target)
        if data is None:
            self.graph.add_edge(source, target, etype=etype, types={etype}, args={arg} - {""})
            return
        data["types"].add(etype)
        if arg:
            data["args"].add(arg)
        if _PRIORITY[etype] < _PRIORITY[data["etype"]]:
            data["etype"] = etype

    # ----------------------------------------------------------------- queries

    def private_sources(self, nodes: Iterable[int] | None = None) -> set[int]:
        """Private-source nodes (results of private tools) among ``nodes`` (default: all)."""
        pool = self.facts.keys() if nodes is None else nodes
        return {n for n in pool if self.facts[n].private}

    def ancestors(self, node: int) -> set[int]:
        """Every node with a path to ``node`` (memoised until the next :meth:`add`)."""
        known = self._ancestor_memo.get(node)
        if known is None:
            pred = self.graph._pred
            found = set(pred[node])
            frontier = set(found)
            while frontier:
                step: set[int] = set()
                for current in frontier:
                    step.update(pred[current])
                frontier = step - found
                found |= frontier
            known = self._ancestor_memo[node] = frozenset(found)
        return set(known)

    def is_sink(self, node: int) -> bool:
        """Whether ``node`` is a proposal of a sink tool."""
        record = self.records[node]
        spec = self.policy.tool(record.tool or "") if record.kind is RecordKind.PROPOSAL else None
        return spec is not None and spec.kind is ToolKind.SINK

    def private_ancestors(self, node: int, ancestors: set[int] | None = None) -> set[int]:
        """Private sources with a path to ``node``."""
        return self.private_sources(self.ancestors(node) if ancestors is None else ancestors)

    def is_reachable_sink(self, node: int) -> bool:
        """A sink proposal with a path from some private source."""
        return self.is_sink(node) and bool(self.private_ancestors(node))

    def edges_into(self, node: int) -> Iterator[tuple[int, str, set[str], set[str]]]:
        """``(source, primary type, all types, argument names)`` of every edge into ``node``."""
        for source, _, data in self.graph.in_edges(node, data=True):
            yield source, data["etype"], data["types"], data["args"]


def build_graph(policy: Policy, records: Iterable[Record]) -> PrefixGraph:
    """A graph built from scratch over ``records`` (the reference the incremental graph must equal)."""
    graph = PrefixGraph(policy)
    for record in records:
        graph.add(record)
    return graph
