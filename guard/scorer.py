"""The frozen weighted scorer (docs/evidence.md): binary features of (selection, proposal), no LLM call.

Every feature is a row of the table (:mod:`guard.features`) computed by its function of the proposal's evidence
view (:mod:`guard.scoring`); the scorer iterates the bound table and sums the weights.  Only
``provenance_path`` needs a retained source-to-sink path; the other features can fire on disconnected
records, which is why the selector changes decisions.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping
from types import MappingProxyType

from guard import features as table
from guard.evidence.owned import owner_flow, system_only
from guard.evidence.scope import turn_stems
from guard.evidence.trust import internal_call, session_internal, trusted_call
from guard.features import DATAFLOW, FEATURE_GROUPS, FEATURES, PRIVATE_DATA, SIGNATURE_RULE_FEATURES
from guard.graph import PrefixGraph, bits_of, members
from guard.policy import Policy
from guard.scoring.rows import BOUND, Bound
from guard.scoring.view import Context, EvidenceView, NodeEvidence, Turns, tool_facts

#: The feature order, the opt-in prefix group and the data-flow features come from the feature table.
EXTRA_FEATURES: tuple[str, ...] = table.OPT_IN_FEATURES

__all__ = ["DATAFLOW", "EXTRA_FEATURES", "FEATURES", "FEATURE_GROUPS", "WeightedScorer"]


class WeightedScorer:
    """Score = Σ weight·feature over the policy's weights."""

    def __init__(self, policy: Policy, rows: Bound = BOUND) -> None:
        """``rows``: the feature table bound to its functions (:func:`guard.scoring.rows.bind`)."""
        self.policy = policy
        self.rows = rows
        self.weights = policy.scorer.weights.model_dump()
        self.tool_weights = dict(policy.scorer.tool_weights)
        canary = tuple(re.compile(p) for p in policy.scorer.canary_patterns)
        self._context = Context(policy, tool_facts(policy), canary, self._turns)
        self._memo: tuple[weakref.ref[PrefixGraph], tuple[int, int], NodeEvidence, dict[str, bool]] | None = None
        self._trusted: tuple[weakref.ref[PrefixGraph], tuple[int, int, object], frozenset[str]] | None = None
        self._lowerable = DATAFLOW | PRIVATE_DATA  # a session's vouch may make a destination internal
        self._records = any(spec.reads_records for spec in policy.tools.values())
        self._turn_memo: tuple[weakref.ref[PrefixGraph], int, Turns] | None = None

    def features(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> dict[str, bool]:
        """The binary feature values of the proposal at ``node`` given ``selected``: each row's function of the
        proposal's evidence view (:mod:`guard.scoring.rows`), conjunction rows from the rows they join."""
        evidence, prefix = self._prefix(graph, node)
        values = dict(prefix)  # every row in the table's order, the prefix rows filled in
        view = EvidenceView(evidence, bits_of(selected))
        for name, compute in self.rows.selection:
            values[name] = compute(view)
        read = values.__getitem__
        rows = self.rows  # a call that does not act: a conjunction with an acting part stays off, unread
        for name, parts in rows.conjunctions if evidence.acts else rows.passive_conjunctions:
            values[name] = all(map(read, parts))
        return values

    def evidence(self, graph: PrefixGraph, node: int) -> NodeEvidence:
        """The evidence view of the proposal at ``node`` (:class:`guard.scoring.view.NodeEvidence`), memoised
        for the newest proposal of a graph."""
        return self._prefix(graph, node)[0]

    def _prefix(self, graph: PrefixGraph, node: int) -> tuple[NodeEvidence, dict[str, bool]]:
        """The proposal's evidence view and the values of the rows that read the prefix, not the selection, in a
        map of every row in the table's order (both memoised for the newest proposal of a graph: a re-decision or
        another selection reuses them)."""
        memo = self._memo  # one atomic read: sessions of one guard may score from several threads
        if memo is not None and memo[0]() is graph and memo[1] == (len(graph), node):
            return memo[2], memo[3]
        evidence = NodeEvidence(graph, node, self._context)
        values = dict.fromkeys(self.rows.names, False)
        for name, compute in self.rows.prefix if evidence.acts else self.rows.passive:  # the others stay off
            values[name] = compute(evidence)
        self._memo = (weakref.ref(graph), (len(graph), node), evidence, values)
        return evidence, values

    def score(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> tuple[float, Mapping[str, bool]]:
        """The weighted sum and the features that made it."""
        values = self.features(graph, node, selected)
        if not self._in_scope(graph, node):
            return 0.0, MappingProxyType(values)
        lowered = self.lowered(graph, node, values)
        total = sum(self.weights[name] for name, on in values.items() if on and name not in lowered)
        if self.tool_weights:
            total += self.tool_weights.get(graph.records[node].tool or "", 0.0)
        return round(total, 12), MappingProxyType(values)

    def lowered(self, graph: PrefixGraph, node: int, values: Mapping[str, bool]) -> frozenset[str]:
        """The features this call leaves out of its score: the data-flow features when it is fully trusted
        (:func:`guard.evidence.trust.trusted_call`), else the private-data evidence when every destination it
        names is internal to the session (:func:`guard.evidence.trust.internal_call`: ``trust.internal`` and
        what the application vouched for, docs/policy.md#internal-destinations) or is the owner of every
        record whose data it carries (:func:`guard.evidence.owned.owner_flow`, docs/policy.md#owners), and the
        untrusted data-flow evidence when only trusted fields of untrusted records reach it
        (:func:`guard.evidence.owned.system_only`, docs/policy.md#trusted-fields), else none.  Tool identity
        and features of the action itself are never left out.

        ``values`` may be any feature map a decision carries (a refusal's is empty, another scorer's may
        be partial): a missing feature counts as off, and a node that is not a record of ``graph`` (a
        refusal before the proposal was added) is not lowered."""
        if not any(values.get(name, False) for name in self._lowerable):  # only features that fired can be left out
            return frozenset()
        if node not in graph.records:
            return frozenset()
        memo = self._trusted  # one atomic read, as for the prefix features
        key = (len(graph), node, graph.vouched)
        if memo is not None and memo[0]() is graph and memo[1] == key:
            return memo[2]
        record = graph.records[node]
        turns = (graph.records[n].text for n in members(graph.user_bits() & ((1 << node) - 1)))
        out = DATAFLOW if trusted_call(self.policy, turns, record) else self._partly_lowered(graph, node)
        self._trusted = (weakref.ref(graph), key, out)
        return out

    def _partly_lowered(self, graph: PrefixGraph, node: int) -> frozenset[str]:
        """The private-data evidence of a call to internal or owner destinations, and the untrusted data-flow
        evidence of a call that only trusted fields reach (:meth:`lowered`)."""
        record = graph.records[node]
        out: frozenset[str] = frozenset()
        if internal_call(self.policy, record, graph.vouched):
            out = PRIVATE_DATA
        if not self._records:
            return out
        parents = 0  # the records with an edge into the call: the graph's reading of where its values come from
        for _, _, bits in graph.edge_rules(node):
            parents |= bits
        before = parents & ((1 << node) - 1)
        sources = (graph.records[n] for n in members(graph.flagged_bits("private") & before))
        internal = session_internal(self.policy.trust.internal, graph.vouched)
        if not out and owner_flow(self.policy, record, sources, internal):
            out = PRIVATE_DATA
        untrusted = [graph.records[n] for n in members(graph.flagged_bits("untrusted") & before)]
        if system_only(self.policy, record, untrusted):
            out |= DATAFLOW - PRIVATE_DATA
        return out

    def signature_hit(self, graph: PrefixGraph, node: int, values: Mapping[str, bool]) -> bool:
        """Whether the signature rule escalates this call (docs/evidence.md#signatures-are-a-rule): the policy
        keeps the rule on, the call is a sink or side-effectful, and a value it carries stands inside a
        signature match of an untrusted record (a signature feature that reads the call's values fired) and
        inside an instruction-shaped clause (``instructed_value``), and trusted evidence left neither out.
        The rule only ever stops a call; it is not part of the score."""
        if self.policy.scorer.signature_rule != "escalate":
            return False
        if not values.get(table.INSTRUCTED_VALUE.name, False):
            return False  # the value must also stand in an instruction-shaped clause: a value merely near
        if not any(values.get(name, False) for name in SIGNATURE_RULE_FEATURES):  # known wording is not enough
            return False
        if node not in graph.records or not self._acting(graph, node):
            return False
        lowered = self.lowered(graph, node, values)
        if table.INSTRUCTED_VALUE.name in lowered:
            return False
        return any(values.get(name, False) and name not in lowered for name in SIGNATURE_RULE_FEATURES)

    def in_scope(self, graph: PrefixGraph, node: int) -> bool:
        """Whether the policy's scorer scope scores this proposal (out of scope: score 0)."""
        return self._in_scope(graph, node)

    def _acting(self, graph: PrefixGraph, node: int) -> bool:
        """Whether the proposal is a sink or a side-effectful call (what the signature rule may stop)."""
        return self._context.tool(graph.records[node].tool).acts

    def _in_scope(self, graph: PrefixGraph, node: int) -> bool:
        return self.policy.scorer.scope == "all" or self._acting(graph, node)

    def _turns(self, graph: PrefixGraph, node: int) -> Turns:
        """The user turns before ``node`` (lowercase) and the stems of their words, kept while they are the same."""
        users = graph.user_bits() & ((1 << node) - 1)
        memo = self._turn_memo  # one atomic read, as for the prefix features
        if memo is not None and memo[0]() is graph and memo[1] == users:
            return memo[2]
        texts = tuple(graph.records[n].text.lower() for n in members(users))
        found = (texts, turn_stems(texts))
        self._turn_memo = (weakref.ref(graph), users, found)
        return found
