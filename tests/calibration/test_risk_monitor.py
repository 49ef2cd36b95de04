"""The label-fed risk monitor (guard/calibration/risk_monitor.py): exact wealth and confidence-sequence
oracles, seeded Monte Carlo false-alarm checks at the H0 boundary (exchangeable and not), detection, and a
negative control (a bet that peeks at the current loss) that must fail the false-alarm check."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from guard.calibration.risk_monitor import (
    BET_CAP,
    _bets,
    first_crossing,
    label_loss,
    log_wealth,
    lower_confidence_sequence,
    risk_monitor,
)
from guard.errors import CalibrationError
from guard.ledger.labels import EpisodeLabel, Harm

ALPHA, DELTA = 0.1, 0.05
STREAMS, HORIZON = 2000, 500
ROOT = Path(__file__).resolve().parents[2]


def _max_alarms(n: int, rate: float, level: float = 1e-3) -> int:
    """The largest alarm count an exact one-sided binomial test at ``level`` accepts for a rate ≤ ``rate``.

    Clopper-Pearson-style slack: P(Bin(n, rate) > k) ≤ level, computed exactly.
    """
    tail, k = 1.0, -1
    while tail > level:
        k += 1
        tail -= math.comb(n, k) * rate**k * (1 - rate) ** (n - k)
    return k


def _alarm_rate(p: np.ndarray, seed: int, bets: object = None) -> float:
    rng = np.random.default_rng(seed)
    losses = (rng.random((STREAMS, len(p))) < p).astype(np.float64)
    lam = None if bets is None else bets(losses, ALPHA)  # type: ignore[operator]
    return float(np.mean(first_crossing(log_wealth(losses, ALPHA, lam), DELTA) > 0))


def _oracle_wealth(losses: list[int], m: Fraction) -> list[Fraction]:
    """K_1..K_T by hand, in exact rationals: μ̂, σ̂² of the past only, the clipped aGRAPA bet, the product."""
    wealth, out = Fraction(1), []
    total, squares = Fraction(0), Fraction(0)
    mean_prev, var_prev = Fraction(1, 2), Fraction(1, 4)
    for t, x in enumerate(losses, start=1):
        gap = mean_prev - m
        lam = min(max(gap / (var_prev + gap * gap), Fraction(0)), Fraction(BET_CAP) / m)
        wealth *= 1 + lam * (x - m)
        out.append(wealth)
        total += x
        mean = (Fraction(1, 2) + total) / (t + 1)
        squares += (x - mean) ** 2
        mean_prev, var_prev = mean, (Fraction(1, 4) + squares) / (t + 1)
    return out


SEQUENCE = [0, 1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 1]


@pytest.mark.parametrize(
    "sequence,m",
    [
        (SEQUENCE, Fraction(3, 10)),
        (SEQUENCE, Fraction(1, 20)),
        (SEQUENCE, Fraction(7, 10)),
        ([1] * 12, Fraction(7, 10)),
    ],
)
def test_wealth_exact_oracle(sequence: list[int], m: Fraction) -> None:
    """Catches a bet that uses the current loss (planted: μ̂_t for μ̂_{t-1}), a missing clip at 0 (planted;
    SEQUENCE at m = 0.7: the bet would go negative) or at c/m (planted; all ones at m = 0.7: the cap binds),
    or a wrong product."""
    expected = [float(k) for k in _oracle_wealth(sequence, m)]
    got = np.exp(log_wealth(np.array(sequence, dtype=np.float64), float(m)))
    assert got == pytest.approx(expected, rel=1e-12)


def test_bets_are_predictable() -> None:
    """Catches a bet that sees the loss it multiplies (planted: μ̂_t for μ̂_{t-1}): changing L_t leaves
    λ_1..λ_t unchanged, at one level and on a grid of levels."""
    rng = np.random.default_rng(5)
    a = rng.random(50)
    for t in (0, 17, 49):
        b = a.copy()
        b[t] = 1.0 - a[t]
        for levels in (np.asarray(0.3), np.array([0.05, 0.3, 0.6])):
            assert np.array_equal(_bets(a, levels)[..., : t + 1], _bets(b, levels)[..., : t + 1])
            assert not np.array_equal(_bets(a, levels), _bets(b, levels)) or t == 49


def test_confidence_sequence_exact_oracle() -> None:
    """Catches an off-by-one in the lower bound (planted: the smallest unrejected level reported, one grid step
    too high), a bound that is not running (planted: rejection not carried forward), or gaps in the grid."""
    rng = np.random.default_rng(2)
    losses = (rng.random(60) < 0.4).astype(np.float64)
    grid, delta = 20, 0.1
    got = lower_confidence_sequence(losses, delta, grid)
    rejected = [False] * grid
    for t in range(len(losses)):
        for k in range(1, grid):
            m = Fraction(k, grid)
            k_t = _oracle_wealth([int(x) for x in losses[: t + 1]], m)[-1]
            rejected[k] = rejected[k] or k_t >= 1 / Fraction(delta)
        lowest = next(k for k in range(1, grid + 1) if k == grid or not rejected[k])
        assert got[t] == pytest.approx((lowest - 1) / grid), t
    assert got[-1] > 0.0 and np.all(np.diff(got) >= 0)


def test_confidence_sequence_covers() -> None:
    """Catches a lower bound that is not a 1-δ confidence sequence: over 300 Bernoulli(0.25) streams it may
    exceed the true mean at some time in at most δ of them (planted: the wealth threshold 1/δ replaced by 2)."""
    rng = np.random.default_rng(9)
    misses = sum(
        bool(np.any(lower_confidence_sequence((rng.random(300) < 0.25).astype(float), DELTA, 100) >= 0.25))
        for _ in range(300)
    )
    assert misses <= _max_alarms(300, DELTA), misses


def test_false_alarm_at_the_boundary() -> None:
    """Bernoulli(α) losses, 2,000 seeded streams of 500 episodes: catches a wealth process that is not a
    supermartingale under H0 (planted: the bet computed from μ̂_t, which includes L_t -> 100% false alarms)."""
    rate = _alarm_rate(np.full(HORIZON, ALPHA), seed=1)
    assert rate * STREAMS <= _max_alarms(STREAMS, DELTA), rate


def test_false_alarm_non_exchangeable_null() -> None:
    """A non-exchangeable H0 stream: independent losses whose mean drifts from α down to α/2 and oscillates
    (never above α): Ville still bounds the false alarm by δ, exchangeable or not. Catches a two-sided bet
    (planted: the clip at 0 removed, so the bet turns negative and gains while the mean sits below α)."""
    t = np.arange(HORIZON)
    p = ALPHA * (1.0 - 0.5 * t / HORIZON) * (0.75 + 0.25 * np.cos(t / 10.0))
    assert np.all(p <= ALPHA)
    rate = _alarm_rate(p, seed=2)
    assert rate * STREAMS <= _max_alarms(STREAMS, DELTA), rate


def _peeking_bets(losses: np.ndarray, alpha: float) -> np.ndarray:
    """The planted bug: the largest allowed bet exactly when the current loss exceeds α, none otherwise."""
    return np.where(losses > alpha, BET_CAP / alpha, 0.0)


def test_negative_control_peeking_bet_fails() -> None:
    """Negative control that must fail the false-alarm check: a bet that peeks at L_t only ever gains, so under
    Bernoulli(α) losses it alarms in far more than δ of the streams (if this passed, the check would be blind)."""
    rate = _alarm_rate(np.full(HORIZON, ALPHA), seed=1, bets=_peeking_bets)
    assert rate * STREAMS > _max_alarms(STREAMS, DELTA) and rate > 10 * DELTA, rate


def test_detects_three_alpha() -> None:
    """Mean risk 3α: catches a monitor without power (planted: the bet's sign flipped, betting on low losses ->
    no alarm) — at least 95% of 2,000 streams must alarm within 300 episodes, and the median delay is under 60."""
    rng = np.random.default_rng(3)
    losses = (rng.random((STREAMS, 300)) < 3 * ALPHA).astype(np.float64)
    at = first_crossing(log_wealth(losses, ALPHA), DELTA)
    assert np.mean(at > 0) >= 0.95 and np.median(np.where(at > 0, at, np.inf)) < 60, np.mean(at > 0)


def test_risk_monitor_result_and_errors() -> None:
    """Catches a wrong alarm position (1-based), lower bounds not one per session, a crash on no labelled
    session (planted: the empty guard in first_crossing removed), or bad inputs accepted."""
    result = risk_monitor([1.0] * 30, 0.3, 0.05)
    log_k = log_wealth(np.ones(30), 0.3)
    assert result.alarm_at == int(np.argmax(log_k >= math.log(20))) + 1
    assert np.exp(log_k[result.alarm_at - 2]) < 20 <= np.exp(log_k[result.alarm_at - 1])
    out = result.to_json()
    assert out["alarm"] is True and out["n"] == 30 and len(result.lower_bounds) == 30
    assert out["lower_bounds"] == [round(float(v), 6) for v in result.lower_bounds]
    assert risk_monitor([0.0] * 30, 0.3).to_json()["alarm_at_episode"] is None
    assert risk_monitor([], 0.3).to_json()["n"] == 0  # no labelled session yet: no alarm, no crash
    for bad in ([1.5], [-0.1], [math.nan]):
        with pytest.raises(CalibrationError, match=r"\[0, 1\]"):
            risk_monitor(bad, 0.3)
    with pytest.raises(CalibrationError, match="alpha"):
        risk_monitor([0.0], 1.0)


def test_label_loss() -> None:
    """Catches a label's loss read wrongly: a harm is loss 1, a reviewed-no-harm override 0; an 'add' label without
    harms (planted: read as 0) and a harm on a call the session never decided are refused."""
    harm = EpisodeLabel("s", (Harm("privacy_flow", call_id="c1"),), "r", "")
    assert label_loss(harm, {"c1"}, 1, "x") == 1.0
    assert label_loss(EpisodeLabel("s", (), "r", ""), {"c1"}, 1, "x") == 0.0
    with pytest.raises(CalibrationError, match="'add' label"):
        label_loss(EpisodeLabel("s", (), "r", "", mode="add"), {"c1"}, 1, "x")
    with pytest.raises(CalibrationError, match="no decision for call"):
        label_loss(harm, {"c2"}, 1, "x")
    with pytest.raises(CalibrationError, match="step"):
        label_loss(EpisodeLabel("s", (Harm("destructive", step=3),), "r", ""), {"c1"}, 1, "x")
