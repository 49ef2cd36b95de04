"""The conformal world-set threshold κ: exact order statistic, p-value form, small-n edge."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.errors import CalibrationError, InputError
from guard.safecommit.conformal import (
    SmallCalibrationWarning,
    conformal_rank,
    conformal_threshold,
    minimum_calibration_size,
    pvalue_retained,
    retained_mask,
)

ALPHAS = (0.001, 0.01, 0.02, 0.05, 0.07, 0.1, 0.123, 0.15, 0.2, 0.25, 1 / 3, 0.3, 0.5, 0.7, 0.9, 0.99)


def oracle_kappa(q: list[float], alpha: float) -> float:
    """The r-th smallest score with r the least integer >= (n+1)(1-α), in exact fractions."""
    n = len(q)
    bound = (n + 1) * (1 - Fraction(repr(alpha)))
    r = next(r for r in range(n + 2) if r >= bound)
    return sorted(q)[r - 1] if r <= n else math.inf


@pytest.fixture
def quiet_small_n() -> Iterator[None]:
    """Silence the small-calibration warning inside the test body."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallCalibrationWarning)
        yield None


def test_kappa_matches_fraction_oracle_for_n_up_to_500(quiet_small_n: None) -> None:
    """κ equals the exact order statistic for n = 1..500, many α, scores with ties."""
    rng = np.random.default_rng(0)
    for n in range(1, 501):
        q = rng.integers(0, max(2, n // 3), size=n).astype(float).tolist()
        for alpha in ALPHAS:
            assert conformal_threshold(q, alpha) == oracle_kappa(q, alpha), (n, alpha)


def test_rank_uses_exact_arithmetic() -> None:
    """(n+1)(1-α) in floats is 3.0000000000000004 for n=9, α=0.7; the exact rank is 3."""
    assert (9 + 1) * (1 - 0.7) > 3
    assert conformal_rank(9, 0.7) == 3


def test_numpy_higher_quantile_is_one_order_statistic_off() -> None:
    """numpy's ``method="higher"`` picks the 29th of 30 where the rule needs the 30th."""
    q = np.arange(1.0, 31.0)
    assert float(np.quantile(q, 0.95, method="higher")) == 29.0
    assert conformal_threshold(q, 0.05) == 30.0


def test_r_above_n_gives_infinite_kappa_and_names_minimum_n() -> None:
    """With n=10 and α=0.05, r=11 > n: κ=+inf, all worlds kept, warning names n=19."""
    with pytest.warns(SmallCalibrationWarning, match="at least n=19"):
        kappa = conformal_threshold(np.arange(10.0), 0.05)
    assert kappa == math.inf
    assert retained_mask([0.0, 1e9, math.inf], kappa).all()
    assert minimum_calibration_size(0.05) == 19


def test_minimum_size_is_the_first_finite_n() -> None:
    """Below ``minimum_calibration_size`` r > n, at it r <= n."""
    for alpha in ALPHAS:
        m = minimum_calibration_size(alpha)
        assert conformal_rank(m, alpha) <= m
        assert m == 0 or conformal_rank(m - 1, alpha) > m - 1


def test_retained_set_is_inclusive() -> None:
    """A world scoring exactly κ is retained."""
    assert retained_mask([1.0, 2.0, 2.0000001], 2.0).tolist() == [True, True, False]


def test_leave_one_out_coverage_is_exactly_r_over_n_plus_1() -> None:
    """For n+1 distinct scores, the share of left-out points retained is r/(n+1) ≥ 1-α."""
    rng = np.random.default_rng(3)
    for n, alpha in ((19, 0.05), (50, 0.1), (99, 0.05), (37, 0.2)):
        pool = rng.permutation(n + 1).astype(float)
        hits = sum(bool(retained_mask(pool[i], conformal_threshold(np.delete(pool, i), alpha))) for i in range(n + 1))
        assert Fraction(hits, n + 1) == Fraction(conformal_rank(n, alpha), n + 1) >= 1 - Fraction(repr(alpha))


scores = st.lists(st.integers(0, 8).map(float) | st.floats(0, 10, allow_nan=False), min_size=0, max_size=60)


@given(cal=scores, test=scores, alpha=st.sampled_from(ALPHAS) | st.floats(0.001, 0.999))
def test_quantile_and_pvalue_forms_agree(cal: list[float], test: list[float], alpha: float) -> None:
    """s <= q_(r)  iff  (1 + #{q_i >= s}) / (n+1) > α, ties and small n included."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallCalibrationWarning)
        kappa = conformal_threshold(cal, alpha)
    assert retained_mask(test, kappa).tolist() == pvalue_retained(cal, test, alpha).tolist()


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, math.nan, math.inf, True, "0.05"])
def test_bad_alpha_is_refused(alpha: object) -> None:
    """α outside (0, 1), NaN, a bool or a string raises CalibrationError."""
    with pytest.raises(CalibrationError, match="alpha"):
        conformal_threshold([1.0, 2.0], alpha)  # type: ignore[arg-type]


def test_nan_scores_are_refused() -> None:
    """NaN calibration scores are a CalibrationError; NaN world scores an InputError."""
    with pytest.raises(CalibrationError, match="NaN"):
        conformal_threshold([1.0, math.nan], 0.5)
    with pytest.raises(InputError, match="NaN"):
        retained_mask([math.nan], 1.0)


def test_numpy_float_alpha_is_read_by_value() -> None:
    """``np.float64(0.05)`` gives the same κ as ``0.05`` (its repr is not a number)."""
    q = np.arange(100.0)
    assert conformal_threshold(q, np.float64(0.05)) == conformal_threshold(q, 0.05)
