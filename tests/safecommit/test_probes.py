"""Probe value by expected certificate shrinkage, outcome filtering and outcome parsing."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from guard.errors import InputError
from guard.policy.safecommit import OutcomeRule, ProbeConfig
from guard.records import Trust, result
from guard.safecommit.probes import (
    best_blocked_action,
    expected_shrinkage,
    filter_by_outcome,
    outcome_matrix,
    parse_outcome,
    select_probe,
    uncertified_mass,
)
from guard.safecommit.runtime import parse_probe_result
from guard.safecommit.types import ProbeSpec


def oracle_shrinkage(
    gamma: np.ndarray, retained: np.ndarray, weights: list[int], labels: np.ndarray, a: int
) -> list[Fraction]:
    """Σ_y P(y)·[μ(U) − μ(U ∩ W^y)] with μ normalised over the current W, in fractions."""
    kept = [k for k in range(len(weights)) if retained[k]]
    total = sum(Fraction(weights[k]) for k in kept)
    if total == 0:
        return [Fraction(0)] * labels.shape[0]
    mu_u = sum(Fraction(weights[k]) for k in kept if not gamma[k, a]) / total
    out = []
    for row in labels:
        delta = Fraction(0)
        for y in set(row[kept].tolist()):
            p_y = sum(Fraction(weights[k]) for k in kept if row[k] == y) / total
            mu_uy = sum(Fraction(weights[k]) for k in kept if row[k] == y and not gamma[k, a]) / total
            delta += p_y * (mu_u - mu_uy)
        out.append(delta)
    return out


problems = st.integers(1, 6).flatmap(
    lambda k: st.tuples(
        hnp.arrays(np.bool_, (k, 3)),
        hnp.arrays(np.bool_, (k,)),
        st.lists(st.integers(1, 20), min_size=k, max_size=k),
        hnp.arrays(np.intp, (4, k), elements=st.integers(0, 2)),
        st.integers(0, 2),
    )
)


@given(problems)
def test_shrinkage_matches_fraction_oracle(problem: tuple[np.ndarray, np.ndarray, list[int], np.ndarray, int]) -> None:
    """Δ(p) equals the exact expected removed blocking mass for random Γ, W, weights, outcomes."""
    gamma, retained, weights, labels, a = problem
    got = expected_shrinkage(gamma, retained, weights, labels, a)
    want = oracle_shrinkage(gamma, retained, weights, labels, a)
    assert np.allclose(got, [float(x) for x in want], atol=1e-12)
    assert (got >= -1e-12).all()


def test_identity_probe_closed_form() -> None:
    """Identity probe on j: Δ = μ_j(1 + μ(U) − 2μ_j) if j ∈ U, else μ_j·μ(U)."""
    gamma = np.array([[True], [False], [False]])
    weights = np.array([0.5, 0.3, 0.2])
    delta = expected_shrinkage(gamma, np.ones(3, bool), weights, np.eye(3, dtype=np.intp), 0)
    mu_u = 0.5
    assert np.allclose(delta, [0.5 * mu_u, 0.3 * (1 + mu_u - 0.6), 0.2 * (1 + mu_u - 0.4)])


def test_uninformative_probe_is_never_picked_even_at_eta_zero() -> None:
    """A probe whose outcome is the same in every retained world has Δ = 0 and is not chosen."""
    gamma = np.array([[True], [False]])
    delta = expected_shrinkage(gamma, np.ones(2, bool), [1.0, 1.0], np.zeros((1, 2), np.intp), 0)
    assert delta.tolist() == [0.0]
    assert select_probe(delta, [1.0], eta=0.0) == -1


def test_select_probe_divides_by_cost_and_applies_eta() -> None:
    """Value = Δ/c; the best value wins if ≥ η, else -1."""
    assert select_probe([0.4, 0.3], [2.0, 1.0], eta=0.0) == 1
    assert select_probe([0.4, 0.3], [2.0, 1.0], eta=0.31) == -1
    assert select_probe([[0.1, 0.1], [0.0, 0.5]], [1.0, 1.0], eta=0.05).tolist() == [0, 1]


def test_best_blocked_action_has_least_uncertified_mass() -> None:
    """Masses (0.2, 1.0, 0.2): a tie between actions 0 and 2 goes to the larger utility."""
    gamma = np.array([[True, False, True], [False, False, False], [True, True, True]])
    weights = np.array([0.8, 0.2, 0.0001])
    retained = np.array([True, True, False])
    assert np.allclose(uncertified_mass(gamma, retained, weights), [0.2, 1.0, 0.2])
    assert best_blocked_action(gamma, retained, weights, [0.5, 0.0, 0.7]) == 2
    assert best_blocked_action(gamma, retained, weights, [0.5, 0.0, 0.5]) == 0


def test_filter_keeps_only_consistent_worlds() -> None:
    """Observed label 1 of probe 0 keeps the worlds labelled 1 that were retained."""
    labels = np.array([[1, 0, 1, 1]])
    kept = filter_by_outcome([True, True, True, False], labels, 0, 1)
    assert kept.tolist() == [True, False, True, False]


@pytest.fixture
def probe() -> ProbeSpec:
    """A yes/no identity probe over three worlds."""
    return ProbeSpec("is_w0", 1.0, {"w0": "yes", "w1": "no", "w2": "no"})


def test_parse_outcome(probe: ProbeSpec) -> None:
    """Labels match ignoring case and spaces; bools read as yes/no; anything else is None."""
    assert parse_outcome(probe, " YES ") == "yes"
    assert parse_outcome(probe, False) == "no"
    assert parse_outcome(probe, "maybe") is None
    assert parse_outcome(probe, 1) is None
    assert parse_outcome(probe, None) is None


def test_outcome_matrix_needs_every_world(probe: ProbeSpec) -> None:
    """Labels index ``probe.labels`` (sorted); a world the probe does not name is an InputError."""
    assert outcome_matrix([probe], ["w0", "w1", "w2"]).tolist() == [[1, 0, 0]]
    with pytest.raises(InputError, match="'w3'"):
        outcome_matrix([probe], ["w0", "w3"])


def test_probe_spec_validates_cost() -> None:
    """A probe with a cost <= 0 is refused where it is built."""
    with pytest.raises(InputError, match="cost"):
        ProbeSpec("free", 0.0, {})


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("contact #desk: known", "known"),
        ("contact #DESK: known", "known"),  # ASCII case aside
        ("contact #de\u017fk: known", None),  # re.IGNORECASE reads the long s as s: a look-alike is not the value
        ("contact #des\u212a: known", None),  # and the Kelvin sign as k
    ],
)
def test_a_probe_rule_reads_the_value_exactly(text: str, label: str | None) -> None:
    """Catches ``{value}`` in a probe rule spliced in for a Unicode case-insensitive match: a probe that answers
    for a look-alike of the checked value says nothing about the value, so no rule applies."""
    config = ProbeConfig(
        name="directory",
        tool="lookup",
        applies_to={"post": ("channel",)},
        rules=(OutcomeRule(match="contact {value}: known", label="known"),),
        outcomes={"legit": "known", "untrusted": "unknown"},
    )
    assert parse_probe_result(config, "#desk", result(1, "p", text, Trust.TOOL_PRIVATE, "lookup")) == label
