"""Split-conformal world-set threshold κ (docs/safecommit.md, Conformal threshold).

From calibration cases with known true worlds, ``q_i = s_i(ω*_i)``.  The threshold is the exact
order statistic ``κ = q_(r)`` (r-th smallest, 1-based) with ``r = ⌈(n+1)(1-α)⌉`` computed in
exact rational arithmetic from ``Fraction(repr(alpha))``; ``κ = +inf`` when ``r > n``.  A world is
retained iff ``s(ω) ≤ κ``.  The p-value form — retained iff ``(1 + #{i: q_i ≥ s}) / (n+1) > α`` —
is the same rule written differently and serves as the test oracle.

Guarantee (exchangeable calibration and test cases, true world in the support): the true world
is retained with probability at least ``1 - α``.  Nothing more.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from guard.errors import CalibrationError, InputError

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class SmallCalibrationWarning(UserWarning):
    """The calibration set is too small for α: κ is +inf and every world is retained."""


def alpha_fraction(alpha: float) -> Fraction:
    """``alpha`` as an exact fraction of its shortest decimal repr; raise unless 0 < α < 1."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, Fraction)):
        raise CalibrationError(f"alpha must be a number in (0, 1), got {alpha!r}")
    if isinstance(alpha, Fraction):
        frac = alpha
    elif not math.isfinite(alpha):
        raise CalibrationError(f"alpha must be a number in (0, 1), got {alpha!r}")
    else:
        frac = Fraction(repr(float(alpha)))
    if not 0 < frac < 1:
        raise CalibrationError(f"alpha must be a number in (0, 1), got {alpha!r}")
    return frac


def conformal_rank(n: int, alpha: float) -> int:
    """``r = ⌈(n+1)(1-α)⌉``, exactly; may exceed ``n`` (then κ = +inf)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise CalibrationError(f"n must be an int >= 0, got {n!r}")
    return math.ceil((n + 1) * (1 - alpha_fraction(alpha)))


def minimum_calibration_size(alpha: float) -> int:
    """The smallest ``n`` with ``r <= n``, i.e. ``⌈1/α⌉ - 1``: below it κ is +inf."""
    return math.ceil(1 / alpha_fraction(alpha)) - 1


def _calibration_array(cal_scores: npt.ArrayLike) -> FloatArray:
    """Calibration scores as a 1-D float array without NaN, or raise CalibrationError."""
    q = np.asarray(cal_scores, dtype=np.float64)
    if q.ndim != 1:
        raise CalibrationError(f"calibration scores must be 1-D, got shape {q.shape}")
    if np.isnan(q).any():
        raise CalibrationError(f"calibration scores hold NaN at {np.flatnonzero(np.isnan(q))[:5]}")
    return q


def conformal_threshold(cal_scores: npt.ArrayLike, alpha: float) -> float:
    """κ = the r-th smallest calibration score, or +inf (with a warning) when ``r > n``."""
    q = _calibration_array(cal_scores)
    n = int(q.size)
    r = conformal_rank(n, alpha)
    if r > n:
        need = minimum_calibration_size(alpha)
        warnings.warn(
            f"alpha={alpha!r} with n={n} calibration cases gives r={r} > n: kappa=+inf and every "
            f"world is retained; at least n={need} calibration cases are needed",
            SmallCalibrationWarning,
            stacklevel=2,
        )
        return math.inf
    return float(np.partition(q, r - 1)[r - 1])


def _world_scores(scores: npt.ArrayLike) -> FloatArray:
    """World scores as a float array without NaN, or raise InputError."""
    s = np.asarray(scores, dtype=np.float64)
    if np.isnan(s).any():
        raise InputError("world scores must not be NaN: a NaN score cannot be compared to kappa")
    return s


def retained_mask(scores: npt.ArrayLike, kappa: float) -> BoolArray:
    """``s(ω) <= κ`` elementwise (inclusive); any shape."""
    if math.isnan(kappa):
        raise CalibrationError("kappa must not be NaN")
    return np.asarray(_world_scores(scores) <= kappa, dtype=np.bool_)


def pvalue_retained(cal_scores: npt.ArrayLike, scores: npt.ArrayLike, alpha: float) -> BoolArray:
    """The p-value form: ``(1 + #{i: q_i >= s}) / (n+1) > α``, in exact fractions."""
    q = np.sort(_calibration_array(cal_scores))
    s = _world_scores(scores)
    a = alpha_fraction(alpha)
    n = int(q.size)
    at_least = n - np.searchsorted(q, s.ravel(), side="left")
    keep = [Fraction(1 + int(c), n + 1) > a for c in at_least]
    return np.asarray(keep, dtype=np.bool_).reshape(s.shape)


__all__ = [
    "SmallCalibrationWarning",
    "alpha_fraction",
    "conformal_rank",
    "conformal_threshold",
    "minimum_calibration_size",
    "pvalue_retained",
    "retained_mask",
]
