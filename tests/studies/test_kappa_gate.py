"""Held-out coverage of SafeCommit's κ on the gated population (guard.studies._kappa_gate)."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np

from guard.calibration.kappa import Case
from guard.studies._kappa_gate import format_gate, gated_coverage

MODELS = ["a", "b"]


def _case(model: str, score: float, gate: float, truth: str = "legit") -> Case:
    return replace(Case("e", model, "banking", "send_money", 1, truth, score), gate_score=gate)  # type: ignore[arg-type]


def _order_statistic(scores: list[float], alpha: float) -> float:
    """κ by hand: the ⌈(n+1)(1-α)⌉-th smallest score, +inf when that rank exceeds n."""
    n = len(scores)
    rank = math.ceil((n + 1) * (1 - Fraction(alpha).limit_denominator()))
    return sorted(scores)[rank - 1] if rank <= n else math.inf


def test_gated_kappa_and_coverage_equal_a_hand_computation() -> None:
    """κ from the other model's cases under λ, coverage over the test episodes' cases under λ, both by hand
    (catches gating the held-out cases with ``<`` for ``<=``, leaving the pool ungated, or counting cases of
    calibration episodes as held out)."""
    pool = [_case("a", float(s), s / 20) for s in range(1, 20)] + [
        _case("b", float(s), 1 - s / 20) for s in range(1, 20)
    ]
    episodes = [
        [_case("a", 12.0, 0.5, "unsafe"), _case("a", 30.0, 0.9)],  # the second is above λ: escalated, not a case
        [_case("b", 2.0, 0.2)],
        [_case("a", 1.0, 0.1)],  # a calibration episode in the permutation below
    ]
    lam, test = np.array([0.5]), np.array([[0, 1]])
    ungated = {"a": 5.0, "b": 40.0}
    out = gated_coverage(episodes, pool, MODELS, 0.1, lam, test, ungated)
    kappa_a = _order_statistic([c.score for c in pool if c.model == "b" and c.gate_score <= 0.5], 0.1)
    kappa_b = _order_statistic([c.score for c in pool if c.model == "a" and c.gate_score <= 0.5], 0.1)
    assert out["kappa_gated_mean"] == {"a": kappa_a, "b": kappa_b}
    held = [(12.0, "a", True), (2.0, "b", False)]
    assert out["n"] == 2
    assert out["gated_all"] == sum(s <= {"a": kappa_a, "b": kappa_b}[m] for s, m, _ in held) / 2
    assert out["ungated_all"] == sum(s <= ungated[m] for s, m, _ in held) / 2 == 0.5
    assert out["ungated_unsafe"] == 0.0 and out["gated_unsafe"] == float(kappa_a >= 12.0)
    assert out["lambda_mean"] == 0.5


def test_a_one_model_study_pools_the_other_models_cases() -> None:
    """Catches a one-model study (``safecommit study --model M``) crashing on calibration cases of models outside it,
    or leaving those cases out of the model's leave-one-out pool."""
    pool = [_case("a", 100.0, 0.1)] + [_case("b", float(s), 0.1) for s in range(1, 20)]
    episodes = [[_case("a", 3.0, 0.1, "unsafe")]]
    out = gated_coverage(episodes, pool, ["a"], 0.1, np.array([0.5]), np.array([[0]]), {"a": 5.0})
    assert out["kappa_gated_mean"] == {"a": _order_statistic([float(s) for s in range(1, 20)], 0.1)}
    assert out["n"] == 1 and out["gated_all"] == 1.0


def test_format_gate_prints_one_row_per_alpha() -> None:
    """The printed block has the α, λ̂ and both coverages (the README quotes these lines)."""
    gate = {
        "lambda_mean": 0.9,
        "n": 10.0,
        "ungated_all": 0.97,
        "ungated_unsafe": 0.95,
        "gated_all": 0.98,
        "gated_unsafe": 0.96,
        "kappa_gated_mean": {"a": 1.25},
    }
    lines = format_gate([{"alpha": 0.1, "gate": gate}])
    assert "0.10" in lines[-1] and "0.970" in lines[-1] and "0.980" in lines[-1] and "a 1.25" in lines[-1]
