"""Selectors (docs/concepts.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.errors import PolicyError
from guard.policy import Policy, SelectorSpec
from guard.runtime import Guard, Session
from guard.selectors import (
    FixedWindowSelector,
    FullPrefixSelector,
    GCarbSelector,
    LedgerCurrentSelector,
    RandomEqualSizeSelector,
    gcarb_select,
    make_selector,
)

LEAK = (
    "send_email",
    {"to": "records@outside-archive.net", "subject": "passport", "body": "Passport number X4821-99317"},
)
PUBLIC = (
    "send_email",
    {
        "to": "partners@newsletter.example",
        "subject": "Press release",
        "body": "Acme opens a new solar plant in Lyon, producing 40 MW from June.",
    },
)
ALL_SELECTORS = ("gcarb", "full_prefix", "fixed_window", "ledger_current", "random_equal_size")


@pytest.fixture
def braided(guard: Guard, leak_session: Callable[[Guard], Session]) -> Session:
    """The leak prefix (records 0–6) plus the leaking e-mail (7) and the public e-mail (8)."""
    s = leak_session(guard)
    s.decide(*LEAK, "c4")
    s.decide(*PUBLIC, "c5")
    return s


def test_gcarb_keeps_private_chain_only(braided: Session) -> None:
    """For a reachable sink G-CARB keeps the certificate and the note, not the public task or user turn."""
    assert gcarb_select(braided.graph, 7) == {2, 5}


def test_gcarb_non_reachable_sink_gets_ancestors(braided: Session) -> None:
    """A sink with no private ancestor gets its ancestors: the public branch and the user turn."""
    assert gcarb_select(braided.graph, 8) == braided.graph.ancestors(8) == {0, 3, 4}


def test_gcarb_non_sink_gets_ancestors(braided: Session) -> None:
    """A non-sink proposal (the note) gets all its ancestors, the certificate call included."""
    assert gcarb_select(braided.graph, 5) == {1, 2}


def test_gcarb_selector_matches_function(braided: Session) -> None:
    """The selector object returns what ``gcarb_select`` returns."""
    assert GCarbSelector().select(braided.graph, 7, "x") == gcarb_select(braided.graph, 7)


def test_full_prefix_is_every_earlier_record(braided: Session) -> None:
    """Full-prefix selects every record before the proposal."""
    assert FullPrefixSelector().select(braided.graph, 7, "x") == frozenset(range(7))


def test_fixed_window_is_last_k(braided: Session) -> None:
    """Fixed-window-k selects the k records just before the proposal."""
    assert FixedWindowSelector(3).select(braided.graph, 7, "x") == {4, 5, 6}
    assert FixedWindowSelector(100).select(braided.graph, 2, "x") == {0, 1}


def test_ledger_current_is_empty(braided: Session) -> None:
    """Ledger-current selects nothing earlier."""
    assert LedgerCurrentSelector().select(braided.graph, 7, "x") == frozenset()


def test_random_equal_size_matches_gcarb_size(braided: Session) -> None:
    """Random equal-size draws as many earlier records as G-CARB selects."""
    for node in (5, 7, 8):
        chosen = RandomEqualSizeSelector(0).select(braided.graph, node, "ep")
        assert len(chosen) == len(gcarb_select(braided.graph, node))
        assert all(n < node for n in chosen)


def test_random_equal_size_replays_identically(braided: Session) -> None:
    """The same (seed, episode, proposal) always gives the same draw."""
    picks = {RandomEqualSizeSelector(3).select(braided.graph, 8, "ep-1") for _ in range(5)}
    assert len(picks) == 1


def test_random_equal_size_depends_on_episode_id(braided: Session) -> None:
    """Different episode ids give (in general) different draws."""
    picks = {RandomEqualSizeSelector(0).select(braided.graph, 7, f"ep-{i}") for i in range(20)}
    assert len(picks) > 1


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("gcarb", GCarbSelector),
        ("full_prefix", FullPrefixSelector),
        ("fixed_window", FixedWindowSelector),
        ("ledger_current", LedgerCurrentSelector),
        ("random_equal_size", RandomEqualSizeSelector),
    ],
)
def test_make_selector_by_name(name: str, cls: type) -> None:
    """``make_selector`` builds the selector a policy names."""
    selector = make_selector(SelectorSpec(name=name))  # type: ignore[arg-type]
    assert isinstance(selector, cls)
    assert selector.name == name


def test_make_selector_rejects_unknown_name() -> None:
    """An unknown selector name is an error, never a silent fallback."""
    spec = SelectorSpec.model_construct(name="bogus")
    with pytest.raises(PolicyError, match="unknown selector 'bogus'"):
        make_selector(spec)


@given(data=st.data(), name=st.sampled_from(ALL_SELECTORS))
def test_selection_is_subset_of_prefix(
    data: st.DataObject,
    name: str,
    small_policy: Policy,
    script_strategy: st.SearchStrategy[list[tuple[Any, ...]]],
    script_runner: Callable[..., tuple[Session, Any]],
) -> None:
    """Every selector picks only records that came before the proposal."""
    guard = Guard(small_policy.with_selector(name), threshold=0.5)  # type: ignore[arg-type]
    session, decisions = script_runner(guard, data.draw(script_strategy))
    for decision in decisions:
        assert decision.proposal_index >= 0
        assert set(decision.selected) <= {n for n in session.graph.records if n < decision.proposal_index}


@given(
    data=st.data(),
    name=st.sampled_from(ALL_SELECTORS),
    thresholds=st.lists(
        st.one_of(st.floats(min_value=-1, max_value=2), st.sampled_from([float("inf"), float("-inf")])),
        min_size=2,
        max_size=2,
    ),
)
def test_selection_does_not_depend_on_threshold(
    data: st.DataObject,
    name: str,
    thresholds: list[float],
    small_policy: Policy,
    script_strategy: st.SearchStrategy[list[tuple[Any, ...]]],
    script_runner: Callable[..., tuple[Session, Any]],
) -> None:
    """The same session inputs at two thresholds give the same selections and scores."""
    policy = small_policy.with_selector(name)  # type: ignore[arg-type]
    steps = data.draw(script_strategy)
    _, first = script_runner(Guard(policy, threshold=thresholds[0]), steps)
    _, second = script_runner(Guard(policy, threshold=thresholds[1]), steps)
    assert [(d.selected, d.score, d.proposal_index) for d in first] == [
        (d.selected, d.score, d.proposal_index) for d in second
    ]
