"""The provenance the ``escalate_risky`` fallback reads (docs/monitoring.md#the-circuit-breaker).

After a trip with ``escalate_risky``, a sink or side effect escalates when it carries private or
untrusted provenance.  The prefix graph's edges are not enough to tell: its edge rules drop an edge on
purpose where a shared span says little about provenance *for the score* (a boilerplate k-gram of the
background table, a weak span such as a city, a value held only in a signature or footer zone, a
k-gram overlapping a structured value), and trusted evidence or an internal destination lowers the
score of a call whose edges stand.  A call whose only edge was dropped would look data-free.  So
:func:`risky_provenance` also reads the raw value index: every ``min_span`` k-gram of every argument
value (as written and, with ``graph.normalize``, in normal form), wherever an earlier record holds it
(free text, inside a structured value, a zone, boilerplate), and every value token, whole structured
value, core and identifier of it, whichever rule kept it from making an edge.  A record found that way
counts as the source of an edge: the call is risky when it, or an ancestor of it, is private, tainted
or untrusted.  Text shorter than ``min_span`` that is no value token, and paraphrase, stay unseen (the
graph's lexical limit, docs/security.md#what-it-does-not-defend).
"""

from __future__ import annotations

from functools import reduce
from operator import or_
from typing import TYPE_CHECKING

from guard.evidence.bitset import members, to_bits
from guard.evidence.kgrams import gram_keys
from guard.evidence.normalize import normalize_value
from guard.evidence.value_index import values_of
from guard.graph import NodeSet

if TYPE_CHECKING:
    from guard.graph import PrefixGraph
    from guard.protocols import SessionState as Session

__all__ = ["raw_sources", "risky_bits", "risky_provenance"]


def risky_bits(graph: PrefixGraph) -> int:
    """The private, tainted (a private ancestor) and untrusted records of ``graph``, as a bit set."""
    return graph.flagged_bits("tainted") | graph.flagged_bits("private") | graph.flagged_bits("untrusted")


def risky_provenance(session: Session, node: int, selected: frozenset[int]) -> bool:
    """Whether the proposal ``node`` carries private or untrusted provenance (the ``escalate_risky`` fallback).

    True when an ancestor of ``node`` in the prefix graph (the source of an edge into it, or into one
    of its ancestors) or a record of its selected evidence is a private-source or untrusted-source
    record or content, or descends from a private one; and when a record that shares a value with the
    call by the raw reading (:func:`raw_sources`: an edge some rule dropped), or an ancestor of such a
    record, is one.  Fail closed: True when the graph cannot tell (it is ``limited``: texts were
    indexed cut, so edges may be missing).
    """
    graph = session.graph
    if graph.limited is not None:
        return True
    risky = risky_bits(graph)
    chosen = selected.bits if type(selected) is NodeSet else to_bits(selected)
    if (graph.ancestor_bits(node) | chosen) & risky:
        return True
    found = raw_sources(graph, node)
    return bool(found & risky) or any(graph.ancestor_bits(source) & risky for source in members(found))


def raw_sources(graph: PrefixGraph, node: int) -> int:
    """The records older than ``node`` that share a value with the proposal ``node`` however the edge rules
    read it, as a bit set: a ``min_span`` k-gram of an argument value held anywhere in their indexed text,
    or a value token, whole structured value, core or identifier of it (zone-only holders included)."""
    record = graph.records[node]
    index = graph.index_before(node)
    k = index.min_span
    before = (1 << node) - 1
    bits = 0
    for _, value in record.arg_values():
        for form in _forms(graph, value):
            keys = gram_keys(form, ((0, len(form)),), k)
            if keys:
                bits |= reduce(or_, graph.keys_bits_before(keys, node).values(), 0)
            bits |= index.token_bits(form) | index.identifier_bits(form)
            bits |= index.cores.bits(form) if index.cores else 0
            for token in index.tokens_in(form):
                bits |= index.zoned.get(token, 0)
            for whole in values_of(form):
                if whole.key:
                    bits |= index.wholes.get(whole.key, 0) | index.zoned.get(whole.key, 0)
    return bits & before


def _forms(graph: PrefixGraph, value: str) -> tuple[str, ...]:
    """``value`` and, when the policy normalises, its normal form (the index holds both forms of a text)."""
    if not value.strip():
        return ()
    if not graph.policy.graph.normalize:
        return (value,)
    norm = normalize_value(value)
    return (value,) if norm == value else (value, norm)
