"""Learn-then-Test (docs/calibrate.md): the high-probability variant of the CARB threshold.

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
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from guard.artifact import CRC_GUARANTEE, ltt_guarantee
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


def rule_name(rule: str, delta: float) -> str:
    """The rule as an artifact records it: ``carb``, or ``ltt(delta=<delta>)``."""
    return rule if rule == "carb" else f"ltt(delta={delta})"


def rule_delta(recorded: str) -> float | None:
    """δ of a recorded LTT rule (``ltt(delta=0.1)`` -> ``0.1``); ``None`` for any other rule."""
    if recorded.startswith("ltt(delta=") and recorded.endswith(")"):
        try:
            return float(recorded[len("ltt(delta=") : -1])
        except ValueError:
            return None
    return None


def ltt_p_value(k: int, n: int, alpha: float | Fraction) -> float:
    """LTT's p-value at a column charging ``k`` of ``n`` episodes: ``P(Bin(n, alpha) <= k)``, exact then rounded."""
    return float(binomial_cdf(k, n, alpha_fraction(alpha)))


def allowed_count(rule: str, n: int, alpha: float | Fraction, delta: float | Fraction) -> int:
    """Most calibration episodes the rule lets λ̂'s column charge: CRC's budget, or LTT's largest rejected count."""
    if rule == "carb":
        return crc.max_harmful_allowed(n, alpha)
    return max_rejected_count(n, alpha, delta)


def prob_realised_risk_exceeds(n: int, allowed: int, level: float | Fraction) -> float:
    """``P(R(λ̂) > level)`` over calibration draws, in the idealised model (0/1 losses, no ties in harm levels).

    With continuous harm levels and a rule that charges at most ``allowed`` of ``n`` episodes,
    λ̂ sits just below the ``(allowed + 1)``-th smallest harm level, so ``R(λ̂)`` is that order
    statistic of ``n`` uniforms: ``Beta(allowed + 1, n - allowed)``.  Its tail is a binomial CDF,
    ``P(Beta > x) = P(Bin(n, x) <= allowed)``, computed exactly.  Ties and discrete scores change
    the figure; it describes the spread of a rule, not a given corpus.
    """
    x = Fraction(repr(float(level))) if not isinstance(level, Fraction) else level
    if x >= 1:
        return 0.0
    if allowed < 0:
        return 0.0
    return float(binomial_cdf(allowed, n, x))


#: below this many calibration episodes ``carbguard calibrate`` warns about the spread of R(λ̂).
SMALL_N = 100


def small_n_warning(rule: str, n: int, alpha: float, delta: float) -> str | None:
    """The stderr warning of ``carbguard calibrate`` at ``n < SMALL_N`` (``None`` otherwise)."""
    if n >= SMALL_N:
        return None
    allowed = allowed_count(rule, n, alpha, delta)
    p_alpha = prob_realised_risk_exceeds(n, allowed, alpha)
    p_twice = prob_realised_risk_exceeds(n, allowed, 2 * alpha)
    name = "CRC" if rule == "carb" else f"LTT (delta={delta})"
    return (
        f"warning: only n={n} calibration episodes. The realised risk R(lambda_hat) of the chosen threshold "
        f"varies from one calibration draw to the next: for {name} at alpha={alpha} it is about "
        f"Beta({allowed + 1}, {n - allowed}) (0/1 losses, no ties, a dense score grid), "
        f"so P(R(lambda_hat) > alpha) = {p_alpha:.3f} "
        f"and P(R(lambda_hat) > 2*alpha) = {p_twice:.3f}. Collect more episodes"
        + (", or use --rule ltt if one bad calibration draw matters." if rule == "carb" else ".")
    )


def rule_fields(rule: str, *, alpha: float, n: int, calibration_risk: float) -> dict[str, Any]:
    """The risk figure and guarantee an artifact records, by rule.

    CRC (``carb``): ``calibration_risk`` is the corrected risk ``(k + 1) / (n + 1)`` and the guarantee is
    in expectation.  LTT (``ltt(delta=...)``): ``calibration_risk`` is the empirical ``k / n``, recorded as
    ``empirical_calibration_risk`` with LTT's p-value ``P(Bin(n, alpha) <= k)`` (at most δ), and the
    guarantee is the high-probability one with its δ.
    """
    delta = rule_delta(rule)
    if delta is None:
        return {"calibration_risk": calibration_risk, "guarantee": CRC_GUARANTEE}
    charged = round(calibration_risk * n)
    return {
        "empirical_calibration_risk": calibration_risk,
        "ltt": {
            "delta": delta,
            "charged": charged,
            "max_rejected_count": max_rejected_count(n, alpha, delta),
            "p_value": ltt_p_value(charged, n, alpha),
        },
        "guarantee": ltt_guarantee(alpha, delta),
    }


__all__ = [
    "SMALL_N",
    "allowed_count",
    "binomial_cdf",
    "ltt_p_value",
    "ltt_threshold_index",
    "max_rejected_count",
    "prob_realised_risk_exceeds",
    "rule_delta",
    "rule_fields",
    "rule_name",
    "small_n_warning",
]


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
    charged = int(losses[:, column].sum())
    # CRC records its corrected risk (k + 1) / (n + 1); LTT the empirical k / n (its artifact names it so).
    risk = (charged + 1) / (harm_level.size + 1) if rule == "carb" else charged / harm_level.size
    return RuleThreshold(float(grid[column]), risk, [float(g) for g in grid], rule_name(rule, delta))
