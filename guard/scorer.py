"""The frozen weighted scorer (docs/evidence.md): binary features of (selection, proposal), no LLM call.

Only ``provenance_path`` needs a retained source-to-sink path; the other features can fire on
disconnected records, which is why the selector changes decisions.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping
from types import MappingProxyType
from urllib.parse import unquote

from guard import features as table
from guard.evidence.control import control_view
from guard.evidence.feature_index import SHORT_ID_MAX, merged_windows
from guard.evidence.owned import owner_flow, system_only
from guard.evidence.regex_screen import live
from guard.evidence.role_features import role_features
from guard.evidence.scope import requested, turn_stems
from guard.evidence.trust import internal_call, session_internal, trusted_call, trusted_value
from guard.features import (
    CONJUNCTIONS,
    DATAFLOW,
    FEATURE_GROUPS,
    FEATURES,
    GRADED_FEATURES,
    PRIVATE_DATA,
    ROLE_FEATURES,
    SIGNATURE_RULE_FEATURES,
)
from guard.graph import PrefixGraph, bits_of, members
from guard.policy import Effect, Policy, ToolSpec
from guard.records import RecordKind

#: The feature order, the opt-in prefix group and the data-flow features come from the feature table.
EXTRA_FEATURES: tuple[str, ...] = table.OPT_IN_FEATURES

__all__ = ["DATAFLOW", "EXTRA_FEATURES", "FEATURES", "FEATURE_GROUPS", "WeightedScorer"]

_URL = re.compile(r"(?:https?://|www\.)[^\s'\"<>(){}\[\],]+")
_URL_TOKEN = re.compile(r"[A-Za-z0-9@._+-]{5,}")


class WeightedScorer:
    """Score = Σ weight·feature over the policy's weights."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.weights = policy.scorer.weights.model_dump()
        self.tool_weights = dict(policy.scorer.tool_weights)
        self._canary = tuple(re.compile(p) for p in policy.scorer.canary_patterns)
        self._memo: tuple[weakref.ref[PrefixGraph], tuple[int, int], dict[str, bool], bool] | None = None
        self._trusted: tuple[weakref.ref[PrefixGraph], tuple[int, int, object], frozenset[str]] | None = None
        self._lowerable = DATAFLOW | PRIVATE_DATA  # a session's vouch may make a destination internal
        self._records = any(spec.reads_records for spec in policy.tools.values())
        self._turn_memo: tuple[weakref.ref[PrefixGraph], int, tuple[tuple[str, ...], frozenset[str]]] | None = None

    def features(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> dict[str, bool]:
        """The binary feature values of the proposal at ``node`` given ``selected``."""
        record = graph.records[node]
        spec = self.policy.tool(record.tool or "")
        is_sink = spec is not None and spec.is_sink
        chosen = bits_of(selected)
        private = graph.flagged_bits("private") & chosen
        prefix, payload_canary = self._prefix_features(graph, node, spec, is_sink)
        values = {
            table.PROVENANCE_PATH.name: is_sink and bool(graph.ancestor_bits(node) & private),
            table.PRIVATE_IN_CONTEXT.name: bool(private),
            table.CANARY.name: bool(graph.flagged_bits("canary") & chosen) or payload_canary,
            table.INJECTION_TEXT.name: bool(graph.flagged_bits("injection") & chosen),
            table.UNTRUSTED_PAYLOAD.name: self._untrusted_payload(graph, node, chosen),
            table.IRREVERSIBLE_SINK.name: is_sink and spec is not None and spec.effect is Effect.IRREVERSIBLE,
            table.INJECTED_VALUE.name: self._injected_value(graph, node, chosen),
            **prefix,
        }
        for row in CONJUNCTIONS:  # the table's conjunction rows, from the rows they join
            values[row.name] = all(values[name] for name in row.all_of)
        return values

    def _prefix_features(
        self, graph: PrefixGraph, node: int, spec: ToolSpec | None, is_sink: bool
    ) -> tuple[dict[str, bool], bool]:
        """The features that read the prefix, not the selection, and whether a payload argument matches a canary
        pattern (both memoised for the newest proposal of a graph)."""
        memo = self._memo  # one atomic read: sessions of one guard may score from several threads
        if memo is not None and memo[0]() is graph and memo[1] == (len(graph), node):
            return dict(memo[2]), memo[3]
        values = {
            table.INJECTED_SHORT_ID.name: (is_sink or _acts(spec)) and self._injected_short_id(graph, node),
            table.UNTRUSTED_ONLY_VALUE.name: is_sink and self._untrusted_only_value(graph, node),
            table.PRIVATE_IN_URL.name: self._private_in_url(graph, node),
            table.SEVERITY_HIGH.name: spec is not None and spec.severity >= 2,
            table.SEVERITY_MAX.name: spec is not None and spec.severity >= 3,
            **self._role_features(graph, node, spec, is_sink),
            table.INSTRUCTED_VALUE.name: (is_sink or _acts(spec)) and self._instructed_value(graph, node),
            table.UNREQUESTED_ACTION.name: (is_sink or _acts(spec)) and not self._requested(graph, node),
            **self._control(graph, node, spec, is_sink),
        }
        payload_canary = self._payload_canary(graph, node)
        self._memo = (weakref.ref(graph), (len(graph), node), values, payload_canary)
        return dict(values), payload_canary

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
        spec = self.policy.tool(graph.records[node].tool or "")
        return spec is not None and (spec.is_sink or spec.effect is not Effect.NONE)

    def _in_scope(self, graph: PrefixGraph, node: int) -> bool:
        return self.policy.scorer.scope == "all" or self._acting(graph, node)

    def _role_features(self, graph: PrefixGraph, node: int, spec: ToolSpec | None, is_sink: bool) -> dict[str, bool]:
        """Argument roles x source kinds and graded evidence (:mod:`guard.evidence.role_features`), for sinks and
        side-effectful calls; every such feature is off for other proposals."""
        if spec is None or not (is_sink or _acts(spec)):
            return dict.fromkeys(ROLE_FEATURES + GRADED_FEATURES, False)
        values = graph.records[node].arg_values()
        return role_features(graph, node, spec, values, graph.policy.graph.min_span, graph.index_before(node))

    def _control(self, graph: PrefixGraph, node: int, spec: ToolSpec | None, is_sink: bool) -> dict[str, bool]:
        """Where the control arguments of a sink or side-effectful call came from (:mod:`guard.evidence.control`)."""
        view = control_view(graph, node, spec, self._turns(graph, node)[0]) if is_sink or _acts(spec) else None
        return {
            table.CONTROL_UNTRUSTED_ONLY.name: view is not None and view.untrusted_only,
            table.CONTROL_UNNAMED_SOURCE.name: view is not None and view.unnamed,
        }

    def _payload_args(self, graph: PrefixGraph, node: int) -> set[str]:
        spec = self.policy.tool(graph.records[node].tool or "")
        return set(spec.payload_args) | set(spec.identifier_args) if spec else set()

    def _payload_canary(self, graph: PrefixGraph, node: int) -> bool:
        names = self._payload_args(graph, node)
        values = [v for name, v in graph.records[node].arg_values() if name in names]
        return any(_canary_in(self._canary, value) for value in values)

    def _injected_value(self, graph: PrefixGraph, node: int, chosen: int) -> bool:
        """A payload value of the proposal occurs inside injection-like text of a selected untrusted record."""
        names = self._payload_args(graph, node)
        values = [v for name, v in graph.records[node].arg_values() if name in names and len(v) >= 4]
        window = self.policy.scorer.injection_window
        sources = graph.flagged_bits("injection") & graph.flagged_bits("untrusted") & chosen
        k = graph.policy.graph.min_span
        for value in values if sources else ():
            # a record holding the value holds its first k-gram: look only there (its text is indexed whole,
            # since a cut text makes the graph limited and every later proposal is refused before scoring)
            candidates = sources if len(value) < k else sources & graph.gram_bits_before(value[:k], node)
            for source in members(candidates):
                if _inside(graph.records[source].text, value, graph.facts[source].injection_at, window):
                    return True
        return False

    def _untrusted_payload(self, graph: PrefixGraph, node: int, chosen: int) -> bool:
        """A payload argument reuses a selected untrusted record, and no user turn names it."""
        names = self._payload_args(graph, node)
        users, untrusted_selected = graph.user_bits(), graph.flagged_bits("untrusted") & chosen
        untrusted: set[str] = set()
        from_user: set[str] = set()
        for _etype, arg, sources in graph.edge_rules(node):
            if sources & users:
                from_user.add(arg)
            if sources & ~users & untrusted_selected:
                untrusted.add(arg)
        return bool((untrusted - from_user - {""}) & names)

    def _injected_short_id(self, graph: PrefixGraph, node: int) -> bool:
        """A short payload/identifier value (1-12 chars: ids, file numbers, amounts) of the proposal stands
        as a whole token inside injection-like text of any earlier untrusted record of the prefix."""
        names = self._payload_args(graph, node)
        values = {v.strip() for name, v in graph.records[node].arg_values() if name in names}
        return any(graph.injected.held_before(v, node) for v in values if 0 < len(v) <= SHORT_ID_MAX)

    def _instructed_value(self, graph: PrefixGraph, node: int) -> bool:
        """A payload/identifier value of the proposal stands inside an instruction-shaped clause of an earlier
        untrusted record (:mod:`guard.evidence.instructions`), and no earlier user turn names it exactly
        (:func:`guard.evidence.trust.trusted_value`: the user's naming clears the value, so a look-alike or a
        part of what the user wrote does not, docs/evidence.md#trust-is-granted-on-an-exact-match)."""
        names = self._payload_args(graph, node)
        values = {v.strip() for name, v in graph.records[node].arg_values() if name in names}
        held = [value for value in values if value and graph.instructed.held_before(value, node)]
        if not held:
            return False
        turns = [graph.records[n].text for n in members(graph.user_bits() & ((1 << node) - 1))]
        return any(not any(trusted_value(value, turn) for turn in turns) for value in held)

    def _requested(self, graph: PrefixGraph, node: int) -> bool:
        """Whether a user turn before the proposal asks for its tool's kind of action (:mod:`guard.evidence.scope`);
        with no user turn seen (an MCP proxy, a loop that records none) scope says nothing: requested."""
        turns = self._turns(graph, node)
        return not turns[0] or requested(graph.records[node].tool or "", turns[1])

    def _turns(self, graph: PrefixGraph, node: int) -> tuple[tuple[str, ...], frozenset[str]]:
        """The user turns before ``node`` (lowercase) and the stems of their words, kept while they are the same."""
        users = graph.user_bits() & ((1 << node) - 1)
        memo = self._turn_memo  # one atomic read, as for the prefix features
        if memo is not None and memo[0]() is graph and memo[1] == users:
            return memo[2]
        texts = tuple(graph.records[n].text.lower() for n in members(users))
        found = (texts, turn_stems(texts))
        self._turn_memo = (weakref.ref(graph), users, found)
        return found

    def _untrusted_only_value(self, graph: PrefixGraph, node: int) -> bool:
        """A payload/identifier argument of a sink is reused from untrusted records only: no user turn,
        private or trusted record is also a source of that argument (over the whole prefix, not the selection)."""
        names = self._payload_args(graph, node)
        untrusted_nodes = graph.flagged_bits("untrusted")
        untrusted: set[str] = set()
        other: set[str] = set()
        for _etype, arg, sources in graph.edge_rules(node):
            if sources & untrusted_nodes:
                untrusted.add(arg)
            if sources & ~untrusted_nodes:
                other.add(arg)
        return bool((untrusted - other - {""}) & names)

    def _private_in_url(self, graph: PrefixGraph, node: int) -> bool:
        """A URL in any argument carries, in its path or query, a token (>= 5 chars) of an earlier private
        record's text that no earlier user turn contains."""
        tokens: set[str] = set()
        for _name, value in graph.records[node].arg_values():
            for match in _URL.finditer(value):
                tokens |= set(_URL_TOKEN.findall(_path_and_query(match.group(0))))
        facts = graph.facts
        for token in tokens:
            holders = [n for n in graph.substrings.holders(token) if n < node]
            if any(facts[n].private for n in holders) and not any(facts[n].kind is RecordKind.USER for n in holders):
                return True
        return False


def _canary_in(patterns: tuple[re.Pattern[str], ...], value: str) -> bool:
    """Whether a canary pattern matches ``value`` (only the patterns its literal screen keeps are run)."""
    kept = live(patterns, value)
    return any(patterns[i].search(value) for i in kept) if kept is not None else any(p.search(value) for p in patterns)


def _acts(spec: ToolSpec | None) -> bool:
    return spec is not None and spec.effect is not Effect.NONE


def _path_and_query(url: str) -> str:
    """The part of a URL after its host, percent-decoded."""
    rest = url.split("://", 1)[-1]
    slash = [i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0]
    return unquote(rest[min(slash) :]) if slash else ""


def _inside(text: str, value: str, starts: tuple[int, ...], window: int) -> bool:
    """Whether ``value`` occurs in ``text`` starting within ``window`` characters after one of ``starts``.

    One bounded search per run of overlapping windows (:func:`merged_windows`): ``find`` in
    ``[lo, hi - 1 + len(value))`` returns an occurrence starting in ``[lo, hi)`` if there is one, so no
    character outside the windows is read and none twice.
    """
    size = len(value)
    return any(text.find(value, lo, hi - 1 + size) >= 0 for lo, hi in merged_windows(len(text), starts, window))
