"""The incremental prefix graph (docs/evidence.md).

Nodes are record indices; edges point forward in time and carry their type:

- ``E1`` call → result (same ``call_id``);
- ``E2`` span reuse: an argument value of a later proposal contains an exact span of at least ``min_span``
  characters of an earlier record's free text, a whole value token of it, or a whole structured value of it
  (an e-mail address, URL, IBAN, ...: :mod:`guard.evidence.values`); a span covering only part of a
  structured value, or boilerplate (:mod:`guard.evidence.specificity`), makes no edge;
- ``E3`` shared identifier: an ``identifier_args`` value equals an identifier the earlier record names; ``E4``
  user intent: E2/E3 where the earlier record is a user turn.
Adding a record costs time in its size and its matches, never in the prefix's length: earlier texts are
kept in a k-gram index (k = ``min_span``) and a value-token index.  The rules are lexical, not semantic
dataflow: a paraphrase escapes them, strings shared by chance can add spurious edges.  Edges into a node
are fixed when it is added, so per-node facts that depend on its ancestors are computed once, oldest node
first, as integer bit sets: ancestors, private sources, *tainted* nodes (private, or with a private
ancestor).  A decision costs set operations, not a walk over the prefix.  Texts beyond the limits of
:mod:`guard.limits` are indexed cut and mark the graph ``limited``; every later proposal is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import reduce
from operator import or_

import networkx as nx

from guard.evidence.bitset import NodeSet, bits_of, members, to_bits
from guard.evidence.edge_rules import E1, E2, E3, E4, PRIORITY, Rule, partition, write_blocks
from guard.evidence.feature_index import InjectedTokens, SubstringIndex
from guard.evidence.instructions import InstructedValues
from guard.evidence.kgrams import Key
from guard.evidence.node_facts import NodeFacts, admitted_text, node_facts, record_text
from guard.evidence.normalize import normalize_value
from guard.evidence.value_index import ValueIndex, index_for
from guard.evidence.weak_spans import reuse_bits
from guard.policy import Policy
from guard.policy.trust import InternalSpec
from guard.records import Record, RecordKind

__all__ = ["E1", "E2", "E3", "E4", "NodeFacts", "NodeSet", "PrefixGraph", "ValueIndex", "bits_of", "members"]
__all__ += ["build_graph", "record_text"]

#: The per-node flags the graph keeps as bit sets (:meth:`PrefixGraph.flagged_bits`).
FLAGS = ("private", "tainted", "canary", "injection", "untrusted")


class PrefixGraph:
    """A DAG over the records of one episode, extended one record at a time."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._nx: nx.DiGraph = nx.DiGraph()
        self._rules: dict[int, list[Rule]] = {}
        self._unflushed: list[int] = []
        self.facts: dict[int, NodeFacts] = {}
        self.records: dict[int, Record] = {}
        self._index: ValueIndex = index_for(policy)
        self._unindexed: tuple[int, str, list[str]] | None = None
        self.injected = InjectedTokens(policy.scorer.injection_window)
        self.substrings = SubstringIndex()
        self.instructed = InstructedValues()
        self.indexed_chars = 0
        self.limited: str | None = None
        self._calls: dict[str, int] = {}
        self._newest = -1
        self.vouched = InternalSpec()  # destinations the application vouched for (Session.vouch)
        self._injection = tuple(re.compile(p) for p in policy.scorer.injection_patterns)
        self._canary = tuple(re.compile(p) for p in policy.scorer.canary_patterns)
        self._reset_derived()

    def __len__(self) -> int:
        return len(self.records)

    @property
    def index(self) -> ValueIndex:
        """The value index of every record added so far.

        A proposal's own text is indexed after its decision, at the first read of the index after
        it (the next record's edges, at the latest): no edge into the proposal and no feature of it
        reads its own text, so the decision need not wait for it."""
        pending = self._unindexed
        if pending is not None:
            self._unindexed = None
            self._index.add(*pending)
        return self._index

    @index.setter
    def index(self, index: ValueIndex) -> None:
        self._unindexed = None
        self._index = index

    def index_before(self, node: int) -> ValueIndex:
        """An index holding every record older than ``node`` (a deferred younger proposal stays unindexed)."""
        pending = self._unindexed
        return self.index if pending is not None and pending[0] < node else self._index

    def gram_bits_before(self, gram: str, node: int) -> int:
        """The records older than ``node`` whose indexed text holds the k-gram ``gram``, as a bit set."""
        return self.index_before(node).gram_bits(gram) & ((1 << node) - 1)

    def keys_bits_before(self, keys: Iterable[Key], node: int, among: int = -1) -> dict[Key, int]:
        """:meth:`gram_bits_before` of each k-gram key (:mod:`guard.evidence.kgrams`), of the records in ``among``."""
        before = among & ((1 << node) - 1)
        found = self.index_before(node).keys_bits(keys, before)
        return {key: kept for key, bits in found.items() if (kept := bits & before)}

    @property
    def graph(self) -> nx.DiGraph:
        """The graph as a networkx ``DiGraph`` with edge attributes ``etype``, ``types`` and ``args``.

        The decision path reads the edge rules (:meth:`edge_rules`) and never this view; it is filled
        on first access after new edges, so a decision never pays one dict entry per edge."""
        if self._unflushed:
            for target in self._unflushed:
                write_blocks(self._nx, target, partition(self._rules[target], self._user_bits))
            self._unflushed.clear()
            nx._clear_cache(self._nx)
        return self._nx

    def add(self, record: Record) -> None:
        """Add ``record`` and the edges into it; earlier nodes are never touched.

        A proposal is refused (:class:`InputError`, nothing added) when the graph is ``limited`` or
        its text would exceed the session budget; an observed text beyond a limit is indexed cut
        and marks the graph ``limited`` (see :mod:`guard.limits`).
        """
        if record.index in self.records:
            raise ValueError(f"record index {record.index} is already in the graph")
        if self.records and record.index < self._newest:
            raise ValueError(f"record index {record.index} is older than the graph's newest record")
        text = record_text(record)
        indexed = self._admit(record, text)
        self.records[record.index] = record
        self._order.append(record.index)
        self._newest = record.index
        self.facts[record.index] = self._facts(record, indexed, truncated=len(indexed) < len(text))
        self._nx.add_node(record.index)
        self._all_bits |= 1 << record.index
        if record.kind is RecordKind.USER:
            self._user_bits |= 1 << record.index
        if type(self)._add_edge is PrefixGraph._add_edge:
            self._link(record)
        else:  # a subclass filters edges one at a time (guard.studies): the reference path
            for source, etype, arg in self._incoming(record):
                self._add_edge(source, record.index, etype, arg)
        if record.kind is RecordKind.PROPOSAL and record.call_id is not None:
            self._calls[record.call_id] = record.index
        if record.kind is RecordKind.PROPOSAL:
            self._unindexed = (record.index, indexed, self._identifiers(record))
        else:
            self.index.add(record.index, indexed, self._identifiers(record), self._exact(record))
        self._index_features(record.index, indexed)
        self.indexed_chars += len(indexed)

    def _exact(self, record: Record) -> bool:
        """Whether ``record`` is indexed whole: private or untrusted text, never discounted by position (zones)."""
        return record.trust.private or record.trust.untrusted

    def _index_features(self, node: int, text: str) -> None:
        """Feed the prefix-feature indexes (:mod:`guard.evidence.feature_index`) with this record's indexed text."""
        facts = self.facts[node]
        if facts.injection_at and facts.trust.untrusted:
            self.injected.add(node, text, facts.injection_at)
        if facts.private or facts.kind is RecordKind.USER:
            self.substrings.add(node, text)
        if facts.trust.untrusted and facts.kind is not RecordKind.PROPOSAL:
            self.instructed.add(node, text)

    def _admit(self, record: Record, text: str) -> str:
        """The part of ``text`` to index (see :func:`guard.evidence.node_facts.admitted_text`)."""
        kept, self.limited = admitted_text(record, text, len(self.records), self.indexed_chars, self.limited)
        return kept

    def _facts(self, record: Record, text: str, truncated: bool = False) -> NodeFacts:
        return node_facts(record, text, self._injection, self._canary, truncated)

    def _identifiers(self, record: Record) -> list[str]:
        if record.kind is not RecordKind.PROPOSAL or record.tool is None:
            return []
        spec = self.policy.tool(record.tool)
        names = set(spec.identifier_args) if spec else set()
        return [value for name, value in record.arg_values() if name in names]

    # ----------------------------------------------------------------- edges

    def _incoming(self, record: Record) -> Iterator[tuple[int, str, str]]:
        """``(source, type, argument)`` of every edge rule that fires into ``record`` (the reference rules)."""
        if record.kind is RecordKind.RESULT and record.call_id in self._calls:
            yield self._calls[record.call_id], E1, ""
        if record.kind is not RecordKind.PROPOSAL:
            return
        spec = self.policy.tool(record.tool or "")
        ident_args = set(spec.identifier_args) if spec else set()
        for name, bits in reuse_bits(self.index, record.arg_values()).items():  # weak spans: per call
            for source in members(bits):
                yield source, self._reuse_type(source, E2), name
        for name, value in record.arg_values():
            if name in ident_args:
                for ident in self._identifier_forms(value):
                    for source in self.index.identifiers.get(ident, ()):
                        yield source, self._reuse_type(source, E3), name

    def _link(self, record: Record) -> None:
        """The edges of :meth:`_incoming`, kept as rules: ``(type, argument, sources as a bit set)``.

        A rule stands for the edges from each of its sources; the networkx view (:attr:`graph`) is
        built from the rules when it is read, so a decision costs set operations per argument, not
        work per edge.
        """
        target = record.index
        rules: list[Rule] = []
        self._rules[target] = rules
        if record.kind is RecordKind.RESULT:
            source = self._calls.get(record.call_id) if record.call_id is not None else None
            if source is not None:
                rules.append((E1, "", 1 << source))
                self._unflushed.append(target)
            return
        if record.kind is not RecordKind.PROPOSAL:
            return
        spec = self.policy.tool(record.tool or "")
        ident_args = set(spec.identifier_args) if spec else set()
        named: dict[str, int] = {}
        index = self.index
        reuse = reuse_bits(index, record.arg_values())  # span and token sources, weak spans read per call
        for name, value in record.arg_values():
            if name in ident_args:
                for ident in self._identifier_forms(value):
                    holders = index.identifier_bits(ident)
                    if holders:
                        named[name] = named.get(name, 0) | holders
        rules += [(E2, name, bits) for name, bits in reuse.items()]
        rules += [(E3, name, bits) for name, bits in named.items()]
        if rules:
            self._unflushed.append(target)

    def edge_rules(self, node: int) -> list[Rule]:
        """The edges into ``node`` as rules ``(type, argument name or "", sources as a bit set)``.

        Every edge into ``node`` comes from a source of some rule, and carries the argument names of
        the rules whose sources include it (E4 when the source is a user turn: see :meth:`user_bits`).
        """
        rules = self._rules.get(node)
        if rules is None:  # edges added one at a time (a subclass): one rule per edge and argument
            rules = [
                (data["etype"], arg, 1 << source)
                for source, data in self.graph._pred[node].items()
                for arg in (data["args"] or {""})
            ]
        return rules

    def edge_blocks(self, node: int) -> list[tuple[set[int], str, set[str]]]:
        """The edges into ``node`` grouped by attributes: ``(sources, primary type, argument names)``."""
        rules = self._rules.get(node)
        if rules is not None:
            return [(block, attrs["etype"], attrs["args"]) for block, attrs in partition(rules, self._user_bits)]
        grouped: dict[int, tuple[set[int], str, set[str]]] = {}
        for source, data in self.graph._pred[node].items():
            grouped.setdefault(id(data), (set(), data["etype"], data["args"]))[0].add(source)
        return list(grouped.values())

    def has_user_source(self, node: int) -> bool:
        """Whether an edge into ``node`` comes from a user turn (an E4 edge), read from the rules."""
        users = self.user_bits()
        return any(bits & users for _, _, bits in self.edge_rules(node))

    def user_bits(self) -> int:
        """User-turn nodes as a bit set."""
        self._sync()
        return self._user_bits

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
        if PRIORITY[etype] < PRIORITY[data["etype"]]:
            data["etype"] = etype

    # ----------------------------------------------------------------- derived bit sets

    def _reset_derived(self) -> None:
        self._order: list[int] = list(self.records)
        self._synced = 0
        self._anc: dict[int, int] = {}
        self._flag_bits: dict[str, int] = dict.fromkeys(FLAGS, 0)
        self._all_bits = to_bits(self.records)
        self._user_bits = to_bits(n for n, r in self.records.items() if r.kind is RecordKind.USER)

    def _sync(self) -> None:
        """Compute ancestors and flag bits of the nodes added since the last call, oldest first."""
        if self._synced == len(self._order) == len(self.records):  # nothing new: most reads of a decision
            return
        if len(self._order) != len(self.records):  # records set from outside (a snapshot): start over
            self._reset_derived()
        flags = self._flag_bits
        for node in self._order[self._synced :]:
            bits = self._anc[node] = self._closure(node)
            facts, one = self.facts[node], 1 << node
            flags["private"] |= one if facts.private else 0
            flags["tainted"] |= one if facts.private or bits & flags["private"] else 0
            flags["canary"] |= one if facts.canary else 0
            flags["injection"] |= one if facts.injection else 0
            flags["untrusted"] |= one if facts.trust.untrusted else 0
        self._synced = len(self._order)

    def _pred_bits(self, node: int) -> int:
        """The sources of the edges into ``node``, as a bit set."""
        return reduce(or_, (bits for _, _, bits in self.edge_rules(node)), 0)

    def _closure(self, node: int) -> int:
        """Ancestors of ``node`` as a bit set, from its sources' (already computed) ancestor sets.  Newest
        uncovered source first: a source already among the ancestors found adds nothing (its ancestors are
        there too), so the work is one OR per distinct lineage among the sources, not one per source."""
        anc, bits = self._anc, 0
        rest = self._pred_bits(node)
        while rest:
            top = rest.bit_length() - 1
            bits |= anc[top] | 1 << top
            rest &= ~bits
        return bits

    def node_bits(self) -> int:
        """Every node of the graph as a bit set."""
        self._sync()
        return self._all_bits

    def flagged_bits(self, flag: str) -> int:
        """Nodes with ``flag`` (``private``, ``tainted``, ``canary``, ``injection``, ``untrusted``) as a bit set."""
        self._sync()
        return self._flag_bits[flag]

    def ancestor_bits(self, node: int) -> int:
        """Ancestors of ``node`` as a bit set (bit ``i`` set: record ``i`` has a path to ``node``)."""
        self._sync()
        return self._anc[node]

    def path_bits(self, node: int) -> int:
        """Ancestors of ``node`` that are private sources or descend from one (G-CARB's path nodes)."""
        return self.ancestor_bits(node) & self.flagged_bits("tainted")

    def private_bits(self) -> int:
        """Private-source nodes as a bit set."""
        return self.flagged_bits("private")

    # ----------------------------------------------------------------- queries

    def private_sources(self, nodes: Iterable[int] | None = None) -> set[int]:
        """Private-source nodes (results of private tools) among ``nodes`` (default: all)."""
        private = self.flagged_bits("private")
        return set(members(private if nodes is None else private & to_bits(nodes)))

    def ancestors(self, node: int) -> set[int]:
        """Every node with a path to ``node``."""
        return set(members(self.ancestor_bits(node)))

    def is_sink(self, node: int) -> bool:
        """Whether ``node`` is a proposal of a sink tool."""
        record = self.records[node]
        spec = self.policy.tool(record.tool or "") if record.kind is RecordKind.PROPOSAL else None
        return spec is not None and spec.is_sink

    def private_ancestors(self, node: int, ancestors: set[int] | None = None) -> set[int]:
        """Private sources with a path to ``node``."""
        if ancestors is None:
            return set(members(self.ancestor_bits(node) & self.private_bits()))
        return self.private_sources(ancestors)

    def is_reachable_sink(self, node: int) -> bool:
        """A sink proposal with a path from some private source."""
        return self.is_sink(node) and bool(self.ancestor_bits(node) & self.private_bits())

    def edges_into(self, node: int) -> Iterator[tuple[int, str, set[str], set[str]]]:
        """``(source, primary type, all types, argument names)`` of every edge into ``node``."""
        for source, data in self.graph._pred[node].items():
            yield source, data["etype"], data["types"], data["args"]


def build_graph(policy: Policy, records: Iterable[Record]) -> PrefixGraph:
    """A graph built from scratch over ``records`` (the reference the incremental graph must equal)."""
    graph = PrefixGraph(policy)
    for record in records:
        graph.add(record)
    return graph
