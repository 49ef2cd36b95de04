"""Utility slack (guard/calibration/slack.py): a lower threshold that keeps the calibration's harm-free successes."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from guard.calibration.crc import carb_threshold_from_harm_levels, exact_grid
from guard.calibration.slack import slack_threshold, slack_thresholds
from guard.errors import CalibrationError


def _oracle(threshold: float, levels: np.ndarray, scores: np.ndarray, utility: np.ndarray, slack: Fraction) -> float:
    """Walk the grid of calibration scores from the threshold down, keeping the lowest value at which at least
    (1 - slack) of the harm-free successes at the threshold remain (exact rational comparison)."""
    good = (levels == np.inf) & (utility if utility.any() else np.ones_like(utility))

    def kept(lam: float) -> int:
        return int((good & (scores <= lam)).sum())

    base = kept(threshold)
    if base == 0 or slack == 0:
        return threshold
    best = threshold
    for lam in sorted({float(s) for s in scores if s <= threshold}, reverse=True):
        if Fraction(kept(lam)) >= (1 - slack) * base:
            best = lam
    return best


def _instance(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scores = rng.choice(np.arange(0, 2.0, 0.1), size=n).round(1)
    harmful = rng.random(n) < 0.3
    levels = np.where(harmful, np.minimum(scores, rng.choice(np.arange(0, 2.0, 0.1), size=n).round(1)), np.inf)
    utility = rng.random(n) < 0.7
    return levels, scores, utility


def test_slack_equals_the_oracle() -> None:
    """Catches a count kept with a float (1 - slack) * k rounding the wrong way, a walk that takes the highest
    instead of the lowest qualifying score, harmful episodes counted as successes, and the fallback to harmless
    completion (no task outcomes) missing: 500 seeded instances against a walk with exact fractions."""
    rng = np.random.default_rng(7)
    for case in range(500):
        levels, scores, utility = _instance(rng, int(rng.integers(1, 40)))
        if case % 5 == 0:
            utility[:] = False  # no task outcomes: harmless completion counts
        threshold = float(rng.choice(np.concatenate([scores, [np.inf]])))
        for slack in (Fraction(1, 100), Fraction(1, 10), Fraction(1, 3)):
            got = slack_threshold(threshold, levels, scores, utility, slack)
            assert got == _oracle(threshold, levels, scores, utility, slack), (case, slack)


def test_slack_never_raises_the_threshold_nor_the_loss() -> None:
    """Catches a slack that moves the threshold up (the guarantee would be lost): on CRC thresholds of random
    calibration sets, the slack threshold is at most λ̂, so every episode's loss at it is at most its loss at λ̂."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        levels, scores, utility = _instance(rng, 60)
        grid = exact_grid(scores)
        lam = carb_threshold_from_harm_levels(levels, grid, 0.2)
        low = slack_threshold(lam, levels, scores, utility, 0.05)
        assert low <= lam
        assert ((levels <= low) <= (levels <= lam)).all()


def test_slack_keeps_its_share_of_successes() -> None:
    """Catches a count rounded down (one success too few kept): with 10 successes and slack .05, all 10 must
    remain (ceil(9.5) = 10), so the threshold cannot move below the highest success's score."""
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.5])
    levels = np.array([np.inf] * 10 + [1.5])
    utility = np.ones(11, dtype=bool)
    assert slack_threshold(1.4, levels, scores, utility, 0.05) == 1.0
    assert slack_threshold(1.4, levels, scores, utility, 0.10) == 0.9
    assert slack_threshold(1.4, levels, scores, utility, 0) == 1.4


def test_nothing_to_keep_and_bad_slack() -> None:
    """Catches a walk to the bottom (stop everything) when no success runs at λ̂, and a slack out of [0, 1)."""
    scores = np.array([0.5, 0.9])
    levels = np.array([np.inf, 0.9])
    assert slack_threshold(0.4, levels, scores, np.array([True, True]), 0.5) == 0.4
    assert slack_threshold(-math.inf, levels, scores, np.array([True, True]), 0.5) == -math.inf
    with pytest.raises(CalibrationError, match="slack"):
        slack_threshold(0.4, levels, scores, np.array([True, True]), 1.0)


def test_rows_are_calibrated_separately() -> None:
    """Catches the batch form reading the whole corpus instead of each row's calibration episodes."""
    scores = np.array([0.1, 0.9, 0.2, 0.8])
    levels = np.full(4, np.inf)
    utility = np.ones(4, dtype=bool)
    rows = np.array([[0, 1], [2, 3]])
    got = slack_thresholds(np.array([1.0, 1.0]), levels, scores, utility, rows, 0.5)
    assert got.tolist() == [0.1, 0.2]
