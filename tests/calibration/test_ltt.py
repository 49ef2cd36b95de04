"""Tests of guard.calibration.ltt: exact binomial p-values and fixed-sequence Learn-then-Test."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from functools import cache

import numpy as np
import pytest

from guard.calibration.ltt import binomial_cdf, ltt_threshold_index, max_rejected_count
from guard.errors import CalibrationError

NEG_INF = float("-inf")


@cache
def pascal_cdf(k: int, n: int, p: Fraction) -> Fraction:
    """Oracle P(Bin(n, p) <= k) by the recurrence F(n, k) = p F(n-1, k-1) + (1-p) F(n-1, k)."""
    if k < 0:
        return Fraction(0)
    if n == 0 or k >= n:
        return Fraction(1)
    return p * pascal_cdf(k - 1, n - 1, p) + (1 - p) * pascal_cdf(k, n - 1, p)


def oracle_ltt(counts: list[int], n: int, alpha: str, delta: str) -> int | None:
    """Fixed-sequence oracle: reject while p_j <= delta, from column 0 up; None if column 0 stays."""
    last = None
    for j, k in enumerate(counts):
        if pascal_cdf(k, n, Fraction(alpha)) > Fraction(delta):
            break
        last = j
    return last


def test_binomial_cdf_known_values() -> None:
    """P(Bin(10, 1/2) <= 2) = 56/1024; k >= n gives 1; k < 0 gives 0."""
    assert binomial_cdf(2, 10, Fraction(1, 2)) == Fraction(56, 1024)
    assert binomial_cdf(7, 7, Fraction(1, 10)) == 1
    assert binomial_cdf(-1, 7, Fraction(1, 10)) == 0


@pytest.mark.parametrize("alpha", ["0.05", "0.1", "0.2", "0.5"])
def test_binomial_cdf_matches_pascal_oracle(alpha: str) -> None:
    """binomial_cdf equals the Pascal-recurrence oracle for n <= 40, every k."""
    for n in range(41):
        for k in range(n + 1):
            assert binomial_cdf(k, n, Fraction(alpha)) == pascal_cdf(k, n, Fraction(alpha))


@pytest.mark.parametrize("delta", ["0.01", "0.05", "0.1", "0.5"])
def test_max_rejected_count_matches_oracle(delta: str) -> None:
    """The integer recurrence finds the largest k with P(Bin(n, alpha) <= k) <= delta."""
    for alpha in ("0.05", "0.1", "0.2", "0.3"):
        for n in range(0, 151):
            expected = max(
                (k for k in range(n + 1) if pascal_cdf(k, n, Fraction(alpha)) <= Fraction(delta)), default=-1
            )
            assert max_rejected_count(n, float(alpha), float(delta)) == expected


def test_ltt_matches_oracle_on_random_monotone_tables() -> None:
    """Random monotone binary tables: ltt_threshold_index equals the fixed-sequence oracle."""
    rnd = random.Random(11)
    for _ in range(300):
        n, g = rnd.randint(1, 150), rnd.randint(1, 8)
        alpha, delta = rnd.choice(["0.05", "0.1", "0.2"]), rnd.choice(["0.05", "0.1", "0.2"])
        starts = [rnd.choice([*range(g), g, g, g]) for _ in range(n)]
        table = np.array([[int(j >= s) for j in range(g)] for s in starts])
        expected = oracle_ltt(table.sum(axis=0).tolist(), n, alpha, delta)
        if expected is None:
            with pytest.raises(CalibrationError, match="column 0"):
                ltt_threshold_index(table, float(alpha), float(delta))
        else:
            assert ltt_threshold_index(table, float(alpha), float(delta)) == expected


def test_fixed_sequence_stops_at_first_unrejected_column() -> None:
    """Counts 0, 0, 50, 0: column 2 is not rejected, so column 3 is never tested."""
    table = np.zeros((100, 4), dtype=int)
    table[:50, 2] = 1
    assert ltt_threshold_index(table, 0.1, 0.1) == 1


def test_ltt_raises_when_column_zero_is_not_rejected() -> None:
    """n=10, alpha=0.1: P(Bin(10, 0.1) <= 0) = 0.9**10 > 0.1, so nothing is certified."""
    with pytest.raises(CalibrationError, match="column 0"):
        ltt_threshold_index(np.zeros((10, 3), dtype=int), 0.1, 0.1)


def test_ltt_rejects_non_binary_losses() -> None:
    """Losses other than 0/1 raise."""
    with pytest.raises(CalibrationError, match="binary"):
        ltt_threshold_index(np.full((50, 2), 0.5), 0.1, 0.1)


def test_ltt_rejects_delta_outside_unit_interval() -> None:
    """delta must lie in (0, 1) and is named in the message."""
    with pytest.raises(CalibrationError, match="delta"):
        ltt_threshold_index(np.zeros((50, 2), dtype=int), 0.1, 1.0)


def test_monte_carlo_risk_exceeds_alpha_with_probability_at_most_delta() -> None:
    """1000 seeded calibrations: P(R(lambda_hat) > alpha) <= delta + 3 SE, R known in closed form."""
    alpha, delta, n, trials, prevalence = 0.1, 0.1, 200, 1000, 0.5
    grid = np.concatenate(([NEG_INF], np.linspace(0.0, 1.0, 101)))
    rng = np.random.default_rng(2024)
    exceed = np.empty(trials, dtype=bool)
    for t in range(trials):
        levels = np.where(rng.random(n) < prevalence, rng.random(n), np.inf)
        lam = grid[ltt_threshold_index(grid[None, :] >= levels[:, None], alpha, delta)]
        exceed[t] = prevalence * min(max(lam, 0.0), 1.0) > alpha  # R(lam) = P(M <= lam)
    rate, se = exceed.mean(), exceed.std(ddof=1) / math.sqrt(trials)
    assert rate <= delta + 3 * se
    assert rate > 0.0  # the test is not vacuous: LTT does come close to the edge
