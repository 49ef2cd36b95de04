"""A label-fed risk monitor: an anytime-valid test of "mean realised ledger loss ≤ α" by betting.

The score monitor (:mod:`guard.calibration.monitor`) watches the distribution of scores; it is blind
to harm that scores low.  This monitor watches the realised loss ``L_t ∈ [0, 1]`` of reviewed
sessions (in session-start order) and tests, sequentially,

    H0: E[L_t | L_1, …, L_{t-1}] ≤ α for every t

by testing by betting (Waudby-Smith & Ramdas 2024, "Estimating means of bounded random variables by
betting"; Podkopaev & Ramdas 2022 for monitoring deployed predictors).  The wealth against a level
``m`` is

    K_t(m) = Π_{s ≤ t} (1 + λ_s(m) · (L_s − m)),   K_0 = 1,

with the bet ``λ_s(m)`` a function of ``L_1..L_{s-1}`` only (predictable): the clipped aGRAPA bet

    λ_s(m) = clip((μ̂_{s-1} − m) / (σ̂²_{s-1} + (μ̂_{s-1} − m)²), 0, c / m),   c = BET_CAP = 1/2,

with ``μ̂_t = (½ + Σ_{i≤t} L_i) / (t + 1)`` and ``σ̂²_t = (¼ + Σ_{i≤t} (L_i − μ̂_i)²) / (t + 1)``.
Since ``L_s − m ≥ −m`` every factor is at least ``1 − c > 0``, and under H0(m) each factor has
conditional mean ≤ 1, so ``K_t(m)`` is a nonnegative supermartingale and by Ville's inequality
``P(sup_t K_t(m) ≥ 1/δ) ≤ δ`` — for any sequence whose conditional mean stays ≤ m, exchangeable or
not.  The alarm is ``K_t(α) ≥ 1/δ``.

The lower confidence sequence runs the same test at every level ``m`` of the grid ``k/GRID``
(``k = 1..GRID-1``) and reports, at each t, ``LB_t`` = the largest grid level ``g`` such that every
grid level ``≤ g`` has been rejected by time ``t`` (0 if level ``1/GRID`` has not).  If the
conditional means stay ≤ μ, the smallest grid level ``≥ μ`` is rejected with probability ≤ δ, and
when it is not, ``LB_t`` is a grid level below μ: ``P(∃t: LB_t ≥ μ) ≤ δ``.  ``LB_t`` never
decreases.

What a realised loss is (:func:`label_loss`): the audit log records decisions, not tool results
nor raw argument values, so the ledger's rules cannot be run from it.  A reviewed session's loss is
the declared ledger loss its label states: 1 if the label charges at least one harm (on a call of
the session; the reviewer vouches that it executed), 0 for an ``override`` label with no harms
("reviewed: no harm").  An ``add`` label with no harms says nothing without the rules, and is
refused.  The test is valid for the reviewed sessions only if which sessions get reviewed does not
depend on their outcome (review all of them, or a random sample).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from guard.errors import CalibrationError
from guard.jsonio import encode_float
from guard.ledger.labels import EpisodeLabel

BET_CAP = 0.5
GRID = 200


def label_loss(label: EpisodeLabel, call_ids: Collection[str], n_proposals: int, where: str) -> float:
    """The realised declared-ledger loss (0 or 1) a label states for one session; CalibrationError if it cannot."""
    for i, harm in enumerate(label.harms):
        if harm.call_id is not None and harm.call_id not in call_ids:
            raise CalibrationError(f"{where}: harms[{i}].call_id: session has no decision for call {harm.call_id!r}")
        if harm.step is not None and harm.step >= n_proposals:
            raise CalibrationError(f"{where}: harms[{i}].step: session decided {n_proposals} proposal(s)")
        if harm.call_id is None and harm.step is None and n_proposals == 0:
            raise CalibrationError(f"{where}: harms[{i}]: session decided no proposal, so nothing can be charged")
    if label.harms:
        return 1.0
    if label.mode == "add":
        raise CalibrationError(
            f"{where}: an 'add' label with no harms leaves the loss to the ledger's rules, which cannot be run "
            "from an audit log; label the session with mode 'override' (harms [] = reviewed, no harm)"
        )
    return 0.0


def _bets(losses: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Predictable aGRAPA bets ``λ_t(m)``: shape ``levels.shape + losses.shape`` (time on the last axis)."""
    t = np.arange(1, losses.shape[-1] + 1, dtype=np.float64)
    mean = (0.5 + np.cumsum(losses, axis=-1)) / (t + 1.0)  # μ̂_t, t = 1..T
    var = (0.25 + np.cumsum((losses - mean) ** 2, axis=-1)) / (t + 1.0)
    prior_mean = np.full((*losses.shape[:-1], 1), 0.5)
    prior_var = np.full((*losses.shape[:-1], 1), 0.25)
    mean_prev = np.concatenate([prior_mean, mean[..., :-1]], axis=-1)  # μ̂_{t-1}: the past only
    var_prev = np.concatenate([prior_var, var[..., :-1]], axis=-1)
    m = levels.reshape((*levels.shape, *(1,) * losses.ndim))
    gap = mean_prev - m
    return np.asarray(np.clip(gap / (var_prev + gap**2), 0.0, BET_CAP / m), dtype=np.float64)


def log_wealth(losses: np.ndarray, levels: np.ndarray | float, bets: np.ndarray | None = None) -> np.ndarray:
    """``log K_1..log K_T`` against each level (``levels.shape + losses.shape``); ``bets`` overrides the bet."""
    losses = np.asarray(losses, dtype=np.float64)
    grid = np.asarray(levels, dtype=np.float64)
    lam = _bets(losses, grid) if bets is None else bets
    m = grid.reshape((*grid.shape, *(1,) * losses.ndim))
    return np.asarray(np.cumsum(np.log1p(lam * (losses - m)), axis=-1), dtype=np.float64)


def first_crossing(log_k: np.ndarray, delta: float) -> np.ndarray:
    """Per path (last axis = time): the 1-based first ``t`` with ``K_t ≥ 1/δ``, 0 for none."""
    hit = log_k >= math.log(1.0 / delta)
    if hit.shape[-1] == 0:
        return np.zeros(hit.shape[:-1], dtype=np.int64)
    return np.where(hit.any(axis=-1), hit.argmax(axis=-1) + 1, 0)


def lower_confidence_sequence(losses: np.ndarray, delta: float, grid: int = GRID) -> np.ndarray:
    """``LB_1..LB_T`` (see the module): a running lower confidence bound on the mean realised loss."""
    levels = np.arange(1, grid, dtype=np.float64) / grid
    log_k = log_wealth(np.asarray(losses, dtype=np.float64), levels)
    rejected = np.maximum.accumulate(log_k >= math.log(1.0 / delta), axis=-1)  # (G, T)
    prefix = np.cumprod(rejected, axis=0)  # level k rejected and every level below it
    count = prefix.sum(axis=0)  # how many of the lowest levels are all rejected
    return np.asarray(count / grid, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class RiskResult:
    """The risk monitor's verdict on one sequence of realised losses."""

    alpha: float
    delta: float
    losses: np.ndarray
    log_wealth: np.ndarray
    lower_bounds: np.ndarray
    alarm_at: int | None

    @property
    def alarm(self) -> bool:
        """Whether the wealth against α reached 1/δ."""
        return self.alarm_at is not None

    def to_json(self) -> dict[str, object]:
        """Plain JSON of the result: the wealth as numbers, or ``"inf"`` once it overflows a float."""
        n = len(self.losses)
        return {
            "alarm": self.alarm,
            "alarm_at_episode": self.alarm_at,
            "alpha": self.alpha,
            "delta": self.delta,
            "alarm_level": 1.0 / self.delta,
            "n": n,
            "mean_loss": float(self.losses.mean()) if n else None,
            "final_wealth": encode_float(float(np.exp(self.log_wealth[-1]))) if n else 1.0,
            "max_wealth": encode_float(float(np.exp(self.log_wealth.max()))) if n else 1.0,
            "wealth": [encode_float(round(float(v), 6)) for v in np.exp(self.log_wealth)],
            "lower_bounds": [round(float(v), 6) for v in self.lower_bounds],
            "bet": f"predictable clipped aGRAPA, lambda <= {BET_CAP}/alpha",
        }


def risk_monitor(
    losses: Sequence[float] | np.ndarray, alpha: float, delta: float = 0.05, upper: float = 1.0
) -> RiskResult:
    """Run the test of ``mean loss ≤ α`` and the lower confidence sequence on ``losses`` (each in [0, upper]).

    ``upper > 1`` takes inverse-propensity terms ``X = (picked/p)·L ∈ [0, 1/p]`` of review sampling
    (:mod:`guard.review`): with ``E[X | past] = E[L | past]`` the test is the same, and since
    ``X ≥ 0`` the bet cap ``λ ≤ c/α`` still keeps every factor ``1 + λ(X − α) ≥ 1 − c > 0``.
    """
    values = np.asarray(losses, dtype=np.float64)
    if not 0.0 < alpha < 1.0 or math.isnan(alpha):
        raise CalibrationError(f"alpha must lie in (0, 1), got {alpha}")
    if not 0.0 < delta < 1.0 or math.isnan(delta):
        raise CalibrationError(f"delta must lie in (0, 1), got {delta}")
    if not upper >= 1.0 or math.isinf(upper):
        raise CalibrationError(f"upper must be a finite number >= 1, got {upper}")
    if values.ndim != 1 or not np.all((values >= 0.0) & (values <= upper)):
        raise CalibrationError(f"realised losses must be a sequence of numbers in [0, {upper:g}]")
    log_k = log_wealth(values, alpha)
    at = int(first_crossing(log_k, delta))
    return RiskResult(alpha, delta, values, log_k, lower_confidence_sequence(values, delta), at or None)
