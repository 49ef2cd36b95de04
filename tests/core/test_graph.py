"""The incremental prefix graph (docs/evidence.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.evidence.kgrams import gram_key
from guard.graph import E1, E2, E3, E4, PrefixGraph, ValueIndex, bits_of, build_graph, record_text
from guard.policy import Policy
from guard.records import Trust, proposal, result, user
from guard.runtime import Guard, Session
from guard.scoring import rows
from guard.scoring.view import EvidenceView


def _graph(policy: Policy, *records: Any) -> PrefixGraph:
    return build_graph(policy, records)


def test_e1_links_call_to_result(small_policy: Policy) -> None:
    """A result gets an E1 edge from the proposal with its call id."""
    g = _graph(
        small_policy,
        proposal(0, "read_document", {"path": "a.md"}, "c1"),
        result(1, "c1", "text", Trust.TOOL_PUBLIC, "read_document"),
    )
    assert g.graph.edges[0, 1]["etype"] == E1


def test_e2_span_reuse(small_policy: Policy) -> None:
    """An argument holding a span of min_span characters of earlier text makes an E2 edge."""
    g = _graph(
        small_policy,
        result(0, "x", "the quarterly numbers for Q3 2024 are fine", Trust.TOOL_PUBLIC, "read_document"),
        proposal(1, "post_note", {"body": "say that quarterly numbers for Q3 2024"}, "c1"),
    )
    assert g.graph.edges[0, 1]["etype"] == E2
    assert g.graph.edges[0, 1]["args"] == {"body"}


def test_short_span_makes_no_edge(small_policy: Policy) -> None:
    """A shared run shorter than min_span (8) makes no edge."""
    g = _graph(
        small_policy,
        result(0, "x", "a blue car", Trust.TOOL_PUBLIC, "read_document"),
        proposal(1, "post_note", {"body": "blue car"[:7]}, "c1"),
    )
    assert not g.graph.has_edge(0, 1)


def test_value_token_links_at_any_length(small_policy: Policy) -> None:
    """A whole value token (here a short e-mail address) makes an E2 edge however short."""
    g = _graph(
        small_policy,
        result(0, "x", "write to a@b.io now", Trust.TOOL_PUBLIC, "read_document"),
        proposal(1, "post_note", {"body": "a@b.io"}, "c1"),
    )
    assert g.graph.edges[0, 1]["etype"] == E2


def test_e3_shared_identifier(small_policy: Policy) -> None:
    """An identifier argument equal to an identifier an earlier record names makes an E3 edge."""
    g = _graph(
        small_policy,
        result(0, "x", "reply to bob@corp.example", Trust.TOOL_PUBLIC, "read_document"),
        proposal(1, "send_email", {"to": "bob@corp.example", "body": "hi"}, "c1"),
    )
    edge = g.graph.edges[0, 1]
    assert edge["etype"] == E3
    assert edge["types"] == {E2, E3}
    assert edge["args"] == {"to"}


def test_e3_from_earlier_identifier_argument(small_policy: Policy) -> None:
    """An identifier argument of an earlier proposal counts as an identifier it names."""
    g = _graph(
        small_policy,
        proposal(0, "read_document", {"path": "x"}, "c0"),
        proposal(1, "send_email", {"to": "x", "body": "hi"}, "c1"),
    )
    assert g.graph.edges[0, 1]["etype"] == E3


def test_e4_user_intent(small_policy: Policy) -> None:
    """Reuse from a user turn is typed E4."""
    g = _graph(
        small_policy,
        user(0, "please mail partners@newsletter.example"),
        proposal(1, "send_email", {"to": "partners@newsletter.example", "body": "hi"}, "c1"),
    )
    assert g.graph.edges[0, 1]["etype"] == E4


def test_paraphrase_escapes_matching(small_policy: Policy) -> None:
    """The rules are lexical: a paraphrase of earlier text makes no edge (a documented limit)."""
    g = _graph(
        small_policy,
        result(0, "x", "The holder is Emma Johnson.", Trust.TOOL_PRIVATE, "read_certificate"),
        proposal(1, "send_email", {"to": "z@z.example", "body": "it belongs to E. Johnsen"}, "c1"),
    )
    assert not g.graph.has_edge(0, 1)


def test_add_rejects_duplicate_index(small_policy: Policy) -> None:
    """A record index can be added only once."""
    g = _graph(small_policy, user(0, "a"))
    with pytest.raises(ValueError, match="already in the graph"):
        g.add(user(0, "b"))


def test_add_rejects_older_index(small_policy: Policy) -> None:
    """Records are added in time order."""
    g = _graph(small_policy, user(0, "a"), user(2, "b"))
    with pytest.raises(ValueError, match="older than"):
        g.add(user(1, "c"))


def test_reachable_sink(small_policy: Policy, texts: Any) -> None:
    """A sink with a path from a private source is reachable; one without is not."""
    g = _graph(
        small_policy,
        result(0, "c0", texts.cert, Trust.TOOL_PRIVATE, "read_certificate"),
        proposal(1, "send_email", {"to": "x@y.example", "body": texts.cert_number}, "c1"),
        proposal(2, "send_email", {"to": "other@z.io", "body": "hello there"}, "c2"),
    )
    assert g.private_sources() == {0}
    assert g.is_reachable_sink(1)
    assert not g.is_reachable_sink(2)


def test_non_sink_is_not_reachable_sink(small_policy: Policy, texts: Any) -> None:
    """A non-sink proposal is never a reachable sink, even with a private ancestor."""
    g = _graph(
        small_policy,
        result(0, "c0", texts.cert, Trust.TOOL_PRIVATE, "read_certificate"),
        proposal(1, "create_note", {"body": texts.cert_number}, "c1"),
    )
    assert g.private_ancestors(1) == {0}
    assert not g.is_reachable_sink(1)


def test_proposal_text_is_its_argument_values(small_policy: Policy) -> None:
    """A proposal contributes its argument values to the index."""
    assert record_text(proposal(0, "t", {"a": "x", "b": ["y", 3]}, "c")) == "x\ny\n3"


def test_value_index_finds_spans_and_tokens() -> None:
    """The index maps k-grams and value tokens back to their nodes."""
    index = ValueIndex([r"\d{4,}"], min_span=4)
    index.add(7, "code 123456 here", ())
    assert index.span_sources("xx6 he") == {7}
    assert index.token_sources("id 123456") == {7}
    assert index.token_sources("id 12345") == set()


@given(data=st.data())
def test_edges_point_forward_in_time(
    data: st.DataObject,
    small_policy: Policy,
    script_strategy: st.SearchStrategy[list[tuple[Any, ...]]],
    script_runner: Callable[..., tuple[Session, Any]],
) -> None:
    """Every edge of a random session's graph goes from an earlier to a later record."""
    session, _ = script_runner(Guard(small_policy, threshold=0.5), data.draw(script_strategy))
    assert all(a < b for a, b in session.graph.graph.edges)


@given(data=st.data())
def test_incremental_graph_equals_scratch_build(
    data: st.DataObject,
    small_policy: Policy,
    script_strategy: st.SearchStrategy[list[tuple[Any, ...]]],
    script_runner: Callable[..., tuple[Session, Any]],
) -> None:
    """The graph a session grows decision by decision equals ``build_graph`` over its records."""
    session, _ = script_runner(Guard(small_policy, threshold=0.5), data.draw(script_strategy))
    live = session.graph
    scratch = build_graph(small_policy, [live.records[i] for i in sorted(live.records)])
    assert sorted(live.graph.nodes) == sorted(scratch.graph.nodes)
    assert sorted(live.graph.edges(data=True)) == sorted(scratch.graph.edges(data=True))
    assert live.facts == scratch.facts


# --------------------------------------------------------------------------- budgets: distinct k-grams, capped sessions


class _ReferenceGraph(PrefixGraph):
    """The pre-issue-13 edge rules: one ``_add_edge`` per (source, type, argument), ancestors by a walk."""

    def _add_edge(self, source: int, target: int, etype: str, arg: str) -> None:
        super()._add_edge(source, target, etype, arg)

    def walk_ancestors(self, node: int) -> set[int]:
        found: set[int] = set()
        frontier = set(self.graph.predecessors(node))
        while frontier:
            found |= frontier
            frontier = {p for n in frontier for p in self.graph.predecessors(n)} - found
        return found

    def loop_gcarb(self, node: int) -> frozenset[int]:
        ancestors = self.walk_ancestors(node)
        sources = {n for n in ancestors if self.facts[n].private}
        if not (sources and self.is_sink(node)):
            return frozenset(ancestors)
        on_path = set(sources)
        for current in sorted(a for a in ancestors if a > min(sources)):
            if current not in on_path and not on_path.isdisjoint(self.graph.predecessors(current)):
                on_path.add(current)
        return frozenset(on_path)


def _reference(policy: Policy, records: list[Any]) -> _ReferenceGraph:
    graph = _ReferenceGraph(policy)
    for record in records:
        graph.add(record)
    return graph


def _assert_same_graph(policy: Policy, records: list[Any]) -> None:
    from guard.scorer import WeightedScorer
    from guard.selectors import gcarb_select

    fast, slow = build_graph(policy, records), _reference(policy, records)
    assert sorted(fast.graph.edges(data=True)) == sorted(slow.graph.edges(data=True))
    scorer = WeightedScorer(policy)
    for node, record in fast.records.items():
        assert fast.ancestors(node) == slow.walk_ancestors(node)
        if record.kind.value == "proposal":
            chosen = gcarb_select(fast, node)
            assert chosen == slow.loop_gcarb(node)
            reference = _reference_features(scorer, slow, node, chosen)
            features = scorer.features(fast, node, chosen)  # plus the opt-in prefix features, not in the reference
            assert {k: features[k] for k in reference} == reference


def _reference_features(scorer: Any, graph: _ReferenceGraph, node: int, selected: frozenset[int]) -> dict[str, bool]:
    """The scorer's features computed the pre-issue-13 way (loops over facts and edges)."""
    spec = scorer.policy.tool(graph.records[node].tool or "")
    facts = [graph.facts[n] for n in selected]
    private = {f.index for f in facts if f.private}
    untrusted: set[str] = set()
    from_user: set[str] = set()
    for source, target, data in graph.graph.in_edges(node, data=True):
        assert target == node
        if data["etype"] == E4:
            from_user |= data["args"]
        elif source in selected and graph.facts[source].trust is Trust.TOOL_UNTRUSTED:
            untrusted |= data["args"]
    names = set(spec.payload_args) | set(spec.identifier_args) if spec else set()
    is_sink = spec is not None and spec.kind.value == "sink"
    return {
        "provenance_path": is_sink and bool(private & graph.private_sources(graph.walk_ancestors(node))),
        "private_in_context": bool(private),
        "canary": any(f.canary for f in facts) or rows._payload_canary(scorer.evidence(graph, node)),
        "injection_text": any(f.injection for f in facts),
        "untrusted_payload": bool((untrusted - from_user) & names),
        "irreversible_sink": is_sink and spec is not None and spec.effect.value == "irreversible",
        "injected_value": rows._injected_value(EvidenceView(scorer.evidence(graph, node), bits_of(selected))),
    }


@given(data=st.data())
def test_grouped_edges_equal_the_reference_rules_on_random_sessions(
    data: st.DataObject,
    small_policy: Policy,
    script_strategy: st.SearchStrategy[list[tuple[Any, ...]]],
    script_runner: Callable[..., tuple[Session, Any]],
) -> None:
    """Edges, ancestors, G-CARB and features equal the pre-issue-13 code on random sessions (catches any rule drift)."""
    session, _ = script_runner(Guard(small_policy, threshold=0.5), data.draw(script_strategy))
    _assert_same_graph(small_policy, [session.graph.records[i] for i in sorted(session.graph.records)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grouped_edges_equal_the_reference_rules_on_benchmark_episodes(seed: int) -> None:
    """The same on 400-record synthetic banking episodes (shared values, popular k-grams, user E4 edges)."""
    from benchmarks import latency

    policy = latency.bench_policy()
    episode = latency.make_episode(400, seed, policy)
    _assert_same_graph(policy, list(episode.records))


def test_span_sources_looks_up_each_distinct_kgram_once() -> None:
    """A long, repetitive argument costs one lookup per distinct k-gram (7,993 lookups before)."""

    class CountingDict(dict[str, Any]):
        lookups = 0

        def get(self, key: str, default: Any = None) -> Any:
            CountingDict.lookups += 1
            return super().get(key, default)

    index = ValueIndex([], min_span=8)
    index.add(0, "abcdefgh" * 10, ())
    index.kgrams = CountingDict(index.kgrams)
    assert index.span_sources("abcdefgh" * 1000) == {0}
    assert CountingDict.lookups == 8


def test_popular_kgrams_give_the_same_sources_as_sparse_ones() -> None:
    """A k-gram held by more than 64 nodes (kept as a bit set too) still returns exactly its nodes."""
    index = ValueIndex([], min_span=8)
    for node in range(200):
        index.add(node, f"shared-text n{node:05d}x" if node % 3 else "shared-text only", ())
    assert index.span_sources("xx shared-text yy") == set(range(200))
    assert index.span_sources("only") == set()
    assert index.span_sources(" n00007x") == {7}


def test_popular_kgrams_stay_exact_across_the_switch_to_a_bit_set() -> None:
    """A k-gram held by 1,000 records, looked up after every 37th: each answer is exactly the holders so far
    (catches entries lost when a k-gram held by more than 64 records switches to a bit set)."""
    index = ValueIndex([], min_span=8)
    for node in range(1000):
        index.add(node, "boilerplate footer" if node % 5 else f"other text {node}", ())
        if node % 37 == 0:
            assert index.span_sources("boilerplate") == {n for n in range(node + 1) if n % 5}
            assert index.gram_bits("ilerplat") == sum(1 << n for n in range(node + 1) if n % 5)
    assert isinstance(index.kgrams[gram_key("ilerplat", 8)], list)  # one entry per k-gram: a bit set, not an array


def test_an_oversized_result_is_indexed_cut_and_refuses_later_proposals(small_policy: Policy) -> None:
    """A 1,000,000-character result is indexed only up to the cap, then the session refuses (indexed whole before)."""
    from guard.audit import MemoryAudit
    from guard.limits import MAX_RECORD_CHARS

    audit = MemoryAudit()
    session = Guard(small_policy, threshold=0.5, audit=audit).session("big")
    assert session.decide("read_certificate", {"name": "x"}, "c1").allowed
    secret = "PIN 8417-2290-5531 for the vault"
    session.observe_result("c1", "filler line\n" * 85_000 + secret)  # the secret sits beyond the cap
    facts = session.graph.facts[1]
    assert facts.truncated and session.graph.limited is not None
    assert session.graph.indexed_chars <= 2 * MAX_RECORD_CHARS
    assert len(session.graph.index.kgrams) <= MAX_RECORD_CHARS
    for tool, args in (("post_note", {"body": secret}), ("read_document", {"path": "a.md"})):
        decision = session.decide(tool, args, f"after-{tool}")
        assert not decision.allowed and "limited" in decision.message
    assert "limited" in audit.entries[-1]["message"] and audit.entries[-1]["verdict"] == "escalate"


def test_the_session_budget_refuses_proposals_and_cuts_observed_text(
    small_policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_SESSION_CHARS a proposal is refused unread and observed text is cut (no budget before)."""
    from guard.evidence import node_facts

    monkeypatch.setattr(node_facts, "MAX_SESSION_CHARS", 300)
    session = Guard(small_policy, threshold=0.5).session("budget")
    session.observe_user("u" * 250)
    refused = session.decide("post_note", {"body": "b" * 80}, "c1")
    assert not refused.allowed and "session limits" in refused.message and len(session.graph) == 1
    assert session.decide("read_document", {"path": "a.md"}, "c2").allowed
    session.observe_result("c2", "r" * 100)
    assert session.graph.facts[2].truncated and session.graph.indexed_chars == 300
    assert not session.decide("read_document", {"path": "b.md"}, "c3").allowed


def test_normal_sessions_are_not_limited(small_policy: Policy) -> None:
    """The negative control: results under the caps are indexed whole and nothing is refused for size."""
    session = Guard(small_policy, threshold=0.5).session("normal")
    assert session.decide("read_document", {"path": "a.md"}, "c1").allowed
    session.observe_result("c1", "x" * 30_000)
    assert session.graph.limited is None and not session.graph.facts[1].truncated
    assert session.decide("read_document", {"path": "b.md"}, "c2").allowed


def test_a_node_set_is_made_only_from_bits() -> None:
    """``NodeSet(...)`` is refused, so a selection's ``bits`` always equal its members (what the stage checks)."""
    from guard.graph import NodeSet

    with pytest.raises(TypeError, match=r"NodeSet\.of"):
        NodeSet([1, 2])
    chosen = NodeSet.of(0b101001)
    assert chosen == {0, 3, 5} and chosen.bits == 0b101001


@given(nodes=st.sets(st.integers(0, 3000), max_size=80))
def test_bit_sets_round_trip_on_both_sides_of_the_small_set_path(nodes: set[int]) -> None:
    """``to_bits`` / ``members`` agree with a plain sum and sort, for sets under and over the size where the
    conversion switches from Python to numpy (catches an off-by-one in either path)."""
    from guard.evidence.bitset import members, to_bits

    bits = to_bits(nodes)
    assert bits == sum(1 << n for n in nodes)
    assert members(bits) == sorted(nodes) == members(to_bits(list(nodes)))


def test_audited_decisions_never_build_the_networkx_view() -> None:
    """With an audit sink and SafeCommit (the shipped banking policy), deciding a 300-record episode never
    reads ``PrefixGraph.graph`` (catches per-edge work put back on the decision path), and each entry's
    ``edges_in`` equals the networkx edges, built afterwards."""
    import json

    from benchmarks import latency
    from guard.audit import MemoryAudit
    from guard.corpora.agentdojo import load_suite_policy
    from guard.records import RecordKind

    policy = load_suite_policy("banking")
    audit = MemoryAudit()
    session = Guard(policy, threshold=0.5, audit=audit).session("audited")
    for r in latency.make_episode(300, 4, latency.bench_policy()).records:
        if r.kind is RecordKind.PROPOSAL and policy.tool(r.tool or "") is not None:
            session.decide(r.tool, json.loads(r.args_json()), r.call_id)
        elif r.kind is RecordKind.USER:
            session.observe_user(r.text)
        elif r.kind is RecordKind.RESULT and r.call_id in session.proposals:
            session.observe_result(r.call_id, r.text, r.status)
    graph = session.graph
    assert graph._nx.number_of_edges() == 0, "the networkx view was built during decisions"
    entries = [e for e in audit.entries if e.get("kind", "decision") == "decision" and "edges_in" in e]
    assert entries and any(e["edges_in"] for e in entries)
    for entry in entries:
        node = entry["proposal_index"]
        assert entry["edges_in"] == sorted([s, t] for s, t, _, _ in graph.edges_into(node))
        assert graph.has_user_source(node) == any("E4" in types for _, _, types, _ in graph.edges_into(node))


def test_a_proposals_own_text_reaches_the_index_before_any_later_read(small_policy: Policy) -> None:
    """A proposal's own text is indexed after its decision, but every later reader sees it: the next
    proposal's edges (catches a deferred text that is never indexed), ``index`` itself, and
    ``gram_bits_before`` for a later node (catches a read that skips the deferred text)."""
    text = "the quarterly numbers for Q3 2024 are fine"
    g = _graph(small_policy, proposal(0, "post_note", {"body": text}, "c1"))
    assert g.gram_bits_before("quarterl", 0) == 0  # older than 0: none, deferred or not
    assert g.gram_bits_before("quarterl", 1) == 1  # node 0 holds it, though not yet indexed
    g.add(proposal(1, "post_note", {"body": f"repeat: {text}"}, "c2"))
    assert g.graph.edges[0, 1]["etype"] == E2
    assert g.index.span_sources(text) == {0, 1}


def test_a_decision_leaves_its_own_proposal_unindexed(small_policy: Policy) -> None:
    """Scoring a sink reads older records only, so the proposal's own text waits for the next read, as the
    graph promises (catches a feature that reads ``graph.index`` and so indexes the proposal inside its own
    decision, moving that cost onto every sink's latency)."""
    session = Guard(small_policy, threshold=0.5).session("s")
    session.observe_user("please send the quarterly summary to bob@example.com")
    session.decide("send_email", {"to": "bob@example.com", "body": "the quarterly summary"}, "c1")
    pending = session.graph._unindexed
    assert pending is not None and pending[0] == 1


def test_gram_bits_before_is_exactly_the_older_holders(small_policy: Policy) -> None:
    """``gram_bits_before(gram, node)`` = the records below ``node`` holding ``gram``, whatever is deferred
    (catches a mask off by one, and a newer holder leaking into an older node's answer)."""
    records = [
        proposal(0, "post_note", {"body": "alpha-bravo-charlie"}, "a"),
        result(1, "a", "ok alpha-bravo-charlie", Trust.TOOL_PUBLIC, "post_note"),
        proposal(2, "post_note", {"body": "zulu alpha-bravo"}, "b"),
    ]
    g = _graph(small_policy, *records)
    holders = [r.index for r in records if "alpha-br" in record_text(r)]
    for node in range(4):
        assert g.gram_bits_before("alpha-br", node) == bits_of(n for n in holders if n < node)


def test_a_node_set_cannot_be_given_other_bits() -> None:
    """``NodeSet.bits`` is what the stage checks instead of the members, so it cannot be reassigned
    (catches a writable ``bits``: a selector could hand the stage bits that differ from its members)."""
    from guard.evidence.bitset import NodeSet

    chosen = NodeSet.of(0b1011)
    for name in ("bits", "ordered", "_bits"):
        with pytest.raises(AttributeError, match="read-only"):
            setattr(chosen, name, 0)
    assert (chosen.bits, chosen.ordered, set(chosen)) == (0b1011, (0, 1, 3), {0, 1, 3})


def test_a_kgram_answers_exactly_in_each_of_its_three_forms() -> None:
    """One holder (the node index itself), 2..64 (an array), more (a bit set): ``gram_bits`` and
    ``span_sources`` give exactly the holders in each form (catches a single holder returned as its
    index instead of its bit, and a holder lost when a form changes)."""
    index = ValueIndex([], min_span=8)
    holders: list[int] = []
    for node in [5, 9, *range(20, 90)]:
        index.add(node, "xx abcdefgh yy", ())
        holders.append(node)
        assert index.gram_bits("abcdefgh") == sum(1 << n for n in holders)
        assert index.span_sources("-abcdefgh-") == set(holders)
    assert index.gram_bits("zzzzzzzz") == 0
