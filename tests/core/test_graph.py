"""The incremental prefix graph (METHOD §4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.graph import E1, E2, E3, E4, PrefixGraph, ValueIndex, build_graph, record_text
from guard.policy import Policy
from guard.records import Trust, proposal, result, user
from guard.runtime import Guard, Session


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
        result(0, "x", "the quarterly numbers are fine", Trust.TOOL_PUBLIC, "read_document"),
        proposal(1, "post_note", {"body": "say that quarterly numbers"}, "c1"),
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
