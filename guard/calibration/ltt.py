"""Learn-then-Test (METHOD §8): the high-probability variant of the CARB threshold.

For binary episode losses, ``k_j`` is the number of calibration episodes charged at grid column
``j``.  The null "risk at ``grid[j]`` exceeds alpha" is rejected when the exact binomial p-value
``p_j = P(Bin(n, alpha) <= k_j) <= delta``.  Fixed-sequence testing runs from column 0 upward and
stops at the first ``p_j > delta``; the answer is the last rejected column.  Guarantee (only this):
for i.i.d. episodes and a frozen pipeline, ``P(R(lambda_hat) <= alpha) >= 1 - delta``, with
``R`` the expected ledger loss of a new episode.

The binomial tail is computed exactly with integers (alpha and delta read as decimals, see
:func:`~guard.calibration.crc.alpha_fraction`); no float CDF, no scipy.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from guard.calibration import crc
from guard.calibration.crc import alpha_fraction
from guard.errors import CalibrationError


def binomial_cdf(k: int, n: int, p: Fraction) -> Fraction:
    """Return ``P(Bin(n, p) <= k)`` exactly, for ``0 <= p <= 1``."""
    if n < 0 or not 0 <= p <= 1:
        raise CalibrationError(f"binomial_cdf needs n >= 0 and 0 <= p <= 1, got n={n}, p={p}")
    top = min(k, n)
    return sum((math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(top + 1)), Fraction(0))


def max_rejected_count(n: int, alpha: float | Fraction, delta: float | Fraction) -> int:
    """Return the largest ``k`` with ``P(Bin(n, alpha) <= k) <= delta`` (``-1`` if there is none).

    Integer recurrence: with ``alpha = a/q`` and ``b = q - a``, the ``i``-th term of the CDF times
    ``q**n`` is ``C(n, i) a**i b**(n-i)``, and each term follows exactly from the previous one.
    """
    rate, level = alpha_fraction(alpha), alpha_fraction(delta, "delta")
    a, q = rate.numerator, rate.denominator
    b = q - a
    limit = level.numerator * q**n  # compare cdf * q**n * level.denominator with this
    term, total = b**n, 0
    for i in range(n + 1):
        total += term
        if total * level.denominator > limit:
            return i - 1
        term = term * (n - i) * a // ((i + 1) * b)
    return n


def ltt_threshold_index(losses: npt.ArrayLike, alpha: float | Fraction, delta: float | Fraction) -> int:
    """Return the last grid column rejected by fixed-sequence LTT at level ``delta``.

    ``losses`` is a binary ``(n, G)`` table over an increasing grid (column 0 = ``-inf``).  Rows
    need not be non-decreasing: fixed-sequence testing is valid for any losses on a grid fixed in
    advance (before the calibration losses are looked at), and it stops at
    the first column it cannot reject even if a later one could be.  Raises
    :class:`CalibrationError` if column 0 is not rejected.
    """
    table = np.asarray(losses)
    if table.ndim != 2 or not np.isin(table, (0, 1)).all():
        raise CalibrationError(f"LTT needs a 2-D table of binary (0/1) losses, got shape {table.shape}")
    counts = table.astype(np.int64).sum(axis=0)
    k_max = max_rejected_count(table.shape[0], alpha, delta)
    accepted = np.flatnonzero(counts > k_max)
    first_kept = int(accepted[0]) if accepted.size else counts.size
    if first_kept == 0:
        raise CalibrationError(
            f"no threshold is feasible: LTT cannot reject risk > alpha={alpha} even at grid column 0 "
            f"with n={table.shape[0]}, delta={delta} (it needs P(Bin(n, alpha) <= {counts[0]}) <= delta)"
        )
    return first_kept - 1


__all__ = ["binomial_cdf", "ltt_threshold_index", "max_rejected_count"]


class RuleThreshold(NamedTuple):
    """λ̂ chosen by a named rule on a calibration set, with what an artifact records of it."""

    threshold: float
    risk: float
    grid: list[float]
    rule: str


def threshold_by_rule(
    scores: npt.NDArray[np.float64], harm_level: npt.NDArray[np.float64], rule: str, alpha: float, delta: float
) -> RuleThreshold:
    """λ̂ on the exact grid of ``scores`` for episodes charged at ``harm_level``: CARB (``carb``) or LTT (``ltt``)."""
    grid = crc.exact_grid(scores)
    losses = (grid[None, :] >= harm_level[:, None]).astype("int64")
    if rule == "carb":
        column = crc.crc_threshold_index(losses, alpha)
    elif rule == "ltt":
        column = ltt_threshold_index(losses, alpha, delta)
    else:
        raise CalibrationError(f"unknown rule {rule!r}; use carb or ltt")
    risk = (int(losses[:, column].sum()) + 1) / (harm_level.size + 1)
    name = rule if rule == "carb" else f"ltt(delta={delta})"
    return RuleThreshold(float(grid[column]), risk, [float(g) for g in grid], name)
