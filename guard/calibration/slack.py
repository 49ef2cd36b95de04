"""Utility slack: lower a calibrated threshold while the calibration episodes keep their harm-free success.

CRC (or the group rule) returns the largest threshold λ̂ whose corrected calibration loss stays within
α: it spends the whole risk budget.  Often the last part of that budget buys almost no task success,
while it is exactly what an attack the calibration set did not hold (a more easily hijacked model, a
new goal) uses.  With a slack ``u`` the threshold is lowered to the smallest calibration score at which
the calibration episodes still keep at least ``(1 - u)`` of the harm-free task successes they had at
λ̂.  A harm-free success is an episode that completes its task, charges no ledger harm, and is not
stopped (its maximum score is at most the threshold); where no calibration episode carries a task
outcome, every harmless episode that runs to its end counts.

The guarantee is unchanged: the new threshold is never above λ̂, and an episode's ledger loss never
rises when the threshold falls, so ``E[L(λ')] <= E[L(λ̂)] <= α`` under the same assumptions
(docs/calibrate.md#utility-slack).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from guard.calibration.crc import alpha_fraction
from guard.errors import CalibrationError

__all__ = ["DEFAULT_SLACK", "slack_threshold", "slack_thresholds"]

#: The slack the shipped artifacts and ``carbguard calibrate`` use unless told otherwise.
DEFAULT_SLACK = 0.01


def _good(harm_level: npt.NDArray[np.float64], utility: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Episodes whose harm-free success is counted: harmless ones that complete their task (all harmless
    ones when no episode carries a task outcome)."""
    harmless: npt.NDArray[np.bool_] = ~np.isfinite(harm_level) & (harm_level > 0)
    return harmless & utility if utility.any() else harmless


def slack_threshold(
    threshold: float,
    harm_level: npt.ArrayLike,
    max_score: npt.ArrayLike,
    utility: npt.ArrayLike,
    slack: float | Fraction,
) -> float:
    """The lowest calibration score ``λ' <= threshold`` at which at least ``(1 - slack)`` of the harm-free
    successes at ``threshold`` remain (``threshold`` itself when there are none, or with ``slack = 0``).

    ``harm_level[i]`` is episode ``i``'s level (``+inf``: never harmful), ``max_score[i]`` its maximum score
    (it completes at a threshold ``>= max_score[i]``) and ``utility[i]`` whether it completes its task.
    Exact: the count to keep is ``ceil((1 - slack) * k)`` with ``slack`` read as the decimal it was written as.
    """
    share = Fraction(0) if slack == 0 else alpha_fraction(slack, "slack")
    if not 0 <= share < 1:
        raise CalibrationError(f"slack must be in [0, 1), got {slack}")
    levels = np.asarray(harm_level, dtype=np.float64)
    scores = np.asarray(max_score, dtype=np.float64)
    done = np.asarray(utility, dtype=bool)
    if not levels.shape == scores.shape == done.shape:
        raise CalibrationError("harm_level, max_score and utility must have one entry per episode")
    if share == 0 or math.isnan(threshold):
        return threshold
    good = np.sort(scores[_good(levels, done)])
    kept = int(np.searchsorted(good, threshold, side="right"))
    if kept == 0:
        return threshold
    need = math.ceil((1 - share) * kept)
    return float(min(threshold, good[need - 1]))


def slack_thresholds(
    thresholds: npt.ArrayLike,
    harm_level: npt.ArrayLike,
    max_score: npt.ArrayLike,
    utility: npt.ArrayLike,
    calib_idx: npt.ArrayLike,
    slack: float | Fraction,
) -> npt.NDArray[np.float64]:
    """:func:`slack_threshold` for each row of ``calib_idx`` (one calibration set per row) and its threshold."""
    lams = np.asarray(thresholds, dtype=np.float64)
    rows = np.asarray(calib_idx, dtype=np.int64)
    levels = np.asarray(harm_level, dtype=np.float64)
    scores = np.asarray(max_score, dtype=np.float64)
    done = np.asarray(utility, dtype=bool)
    out = np.empty_like(lams)
    for r, row in enumerate(rows):
        out[r] = slack_threshold(float(lams[r]), levels[row], scores[row], done[row], slack)
    return out
