"""The feature rows bound to their functions (guard/scoring/rows.py) and the scorer iterating a bound table."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.features import FEATURES, TABLE, Feature
from guard.graph import PrefixGraph, build_graph
from guard.policy import Policy
from guard.records import Record, Trust, proposal, result, user
from guard.scorer import WeightedScorer
from guard.scoring.rows import BOUND, FUNCTIONS, Prefix, Selection, bind

COMPUTED = [row for row in TABLE if not row.all_of]
CERT = "Number: X4821-99317"
LOCAL = Feature("test_local_sink", "prefix", 0.0, "The call is a sink (a test-local row).", "tests")
PICKED = Feature("test_local_picked", "prefix", 0.0, "The selection is not empty (a test-local row).", "tests")
BOTH = Feature("test_local_both", "control", 0.0, "Both test-local rows.", "tests", all_of=(LOCAL.name, PICKED.name))


def _leak(policy: Policy) -> PrefixGraph:
    records: tuple[Record, ...] = (
        user(0, "Send the certificate number to a@b.io."),
        result(1, "c0", CERT, Trust.TOOL_PRIVATE, "read_certificate"),
        proposal(2, "send_email", {"to": "a@b.io", "body": "X4821-99317"}, "c1"),
    )
    return build_graph(policy, records)


def test_the_shipped_binding_is_the_table() -> None:
    """Catches a scorer table that is not the feature table (a row left out of the binding, the order changed):
    the bound names are the table's, in its order, and every row that is not a conjunction has a function."""
    assert BOUND.names == FEATURES
    bound = {name for name, _ in BOUND.prefix} | {name for name, _ in BOUND.selection}
    assert bound == {row.name for row in COMPUTED} == set(FUNCTIONS)
    assert [name for name, _ in BOUND.conjunctions] == [row.name for row in TABLE if row.all_of]
    assert WeightedScorer.__init__.__defaults__ == (BOUND,)


@pytest.mark.parametrize("row", COMPUTED, ids=lambda row: row.name)
def test_a_row_without_its_function_is_refused(row: Feature) -> None:
    """Catches a binding check that misses a row: dropping any one row's function is an error naming that row
    (the same check runs on the shipped table when guard.scoring.rows is imported)."""
    functions = {name: fn for name, fn in FUNCTIONS.items() if name != row.name}
    with pytest.raises(ValueError, match=f"row '{row.name}' has no function"):
        bind(TABLE, functions)


def test_a_function_without_a_row_and_a_misplaced_conjunction_are_refused() -> None:
    """Catches a binding check that only looks one way: a function for a name the table lacks, a function bound
    to a conjunction row, a row listed twice, and a conjunction that joins a later row are all refused."""
    with pytest.raises(ValueError, match="function 'test_local_sink' has no row"):
        bind(TABLE, {**FUNCTIONS, LOCAL.name: Prefix(lambda ev: ev.is_sink)})
    with pytest.raises(ValueError, match=f"function '{BOTH.name}' has no row"):
        bind((*TABLE, LOCAL, PICKED, BOTH), {**FUNCTIONS, **_local(), BOTH.name: Prefix(lambda ev: True)})
    with pytest.raises(ValueError, match="in the table twice"):
        bind((*TABLE, LOCAL, LOCAL), {**FUNCTIONS, **_local()})
    with pytest.raises(ValueError, match="not an earlier row"):
        bind((*TABLE, LOCAL, BOTH, PICKED), {**FUNCTIONS, **_local()})


def _local() -> dict[str, Prefix | Selection]:
    return {LOCAL.name: Prefix(lambda ev: ev.is_sink), PICKED.name: Selection(lambda view: bool(view.chosen))}


def test_a_new_row_is_scored_without_touching_the_scorer(small_policy: Policy) -> None:
    """Catches a scorer that computes a fixed list of features instead of iterating its bound table, that keeps a
    selection row's value across selections (memoised as if it read the prefix only), or that computes a
    conjunction before (or without) its parts: a test-local prefix row, selection row and conjunction are scored
    in the table's order, and the selection row follows the selection on a memoised proposal."""
    scorer = WeightedScorer(small_policy, bind((*TABLE, LOCAL, PICKED, BOTH), {**FUNCTIONS, **_local()}))
    graph = _leak(small_policy)
    empty = scorer.features(graph, 2, frozenset())
    picked = scorer.features(graph, 2, frozenset({1}))
    assert tuple(picked) == (*FEATURES, LOCAL.name, PICKED.name, BOTH.name)
    assert (empty[LOCAL.name], empty[PICKED.name], empty[BOTH.name]) == (True, False, False)
    assert (picked[LOCAL.name], picked[PICKED.name], picked[BOTH.name]) == (True, True, True)
    shipped = WeightedScorer(small_policy).features(graph, 2, frozenset({1}))
    assert {name: picked[name] for name in FEATURES} == shipped


def test_an_acting_row_is_off_for_a_call_that_does_not_act(small_policy: Policy) -> None:
    """Catches a scorer that calls an ``acting`` row's function for a call that neither sends nor changes anything
    (or leaves such a row unset): the row is off for a read without its function being called, and computed for a
    sink."""
    calls: list[int] = []

    def sink_seen(ev: Any) -> bool:
        calls.append(ev.node)
        return True

    scorer = WeightedScorer(small_policy, bind((*TABLE, LOCAL), {**FUNCTIONS, LOCAL.name: Prefix(sink_seen, True)}))
    graph = build_graph(
        small_policy,
        (
            user(0, "Read my inbox, then mail a@b.io."),
            proposal(1, "read_inbox", {}, "c0"),
            proposal(2, "send_email", {"to": "a@b.io", "body": "hello"}, "c1"),
        ),
    )
    assert not scorer.evidence(graph, 1).acts  # not vacuous: the read does not act
    assert scorer.features(graph, 1, frozenset())[LOCAL.name] is False
    assert scorer.features(graph, 2, frozenset())[LOCAL.name] is True
    assert calls == [2]


ALWAYS = Feature("test_local_always", "prefix", 0.0, "Always on (a test-local row).", "tests")
ACTING = Feature("test_local_acting", "prefix", 0.0, "On for a call that acts (a test-local row).", "tests")
QUIET = Feature("test_local_quiet", "control", 0.0, "ALWAYS and PICKED.", "tests", all_of=(ALWAYS.name, PICKED.name))
LOUD = Feature("test_local_loud", "control", 0.0, "ACTING and PICKED.", "tests", all_of=(ACTING.name, PICKED.name))
NESTED = Feature("test_local_nested", "control", 0.0, "LOUD and ALWAYS.", "tests", all_of=(LOUD.name, ALWAYS.name))


@pytest.mark.parametrize("node", [1, 2], ids=["read", "sink"])
@pytest.mark.parametrize("chosen", [frozenset(), frozenset({0})], ids=["empty", "picked"])
def test_every_conjunction_is_all_of_its_parts(small_policy: Policy, node: int, chosen: frozenset[int]) -> None:
    """Catches a scorer that skips, for a call that does not act, a conjunction a passive call can fire (one of
    passive rows and a selection row), or that reads one with an acting part (directly or through a nested
    conjunction) as anything but off: on a read and on a sink, with and without a selection, every conjunction
    of a table with test-local passive, acting and nested conjunctions is the conjunction of its parts."""
    rows = (*TABLE, ALWAYS, ACTING, PICKED, QUIET, LOUD, NESTED)
    functions = {
        **FUNCTIONS,
        PICKED.name: Selection(lambda view: bool(view.chosen)),
        ALWAYS.name: Prefix(lambda ev: True),
        ACTING.name: Prefix(lambda ev: True, True),
    }
    bound = bind(rows, functions)
    assert [name for name, _ in bound.passive_conjunctions] == [QUIET.name]
    graph = build_graph(
        small_policy,
        (
            user(0, "Read my inbox, then mail a@b.io."),
            proposal(1, "read_inbox", {}, "c0"),
            proposal(2, "send_email", {"to": "a@b.io", "body": "hello"}, "c1"),
        ),
    )
    values = WeightedScorer(small_policy, bound).features(graph, node, chosen)
    for row in rows:
        if row.all_of:
            assert values[row.name] is all(values[part] for part in row.all_of), row.name
    assert values[QUIET.name] is bool(chosen)  # not vacuous: a passive conjunction fires on the read too
    assert values[NESTED.name] is (node == 2 and bool(chosen))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="htpsw.:/aX1 ", max_size=24))
def test_the_url_screen_keeps_every_value_the_url_pattern_matches(value: str) -> None:
    """Catches a literal screen in front of ``private_in_url`` that skips a value holding a URL (one that looks
    for ``https`` only, or for ``www`` without ``http``): a value the pattern matches always passes the screen."""
    from guard.scoring.rows import _URL, _may_hold_url

    assert _may_hold_url(value) or _URL.search(value) is None
    assert _may_hold_url("see http://a.io/x") and _may_hold_url("www.a.io")
