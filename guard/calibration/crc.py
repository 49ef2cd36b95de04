"""CARB threshold calibration (docs/calibrate.md): conformal risk control as pure functions.

A loss table ``losses[i, j]`` is episode ``i``'s ledger loss when the gate runs at grid point
``grid[j]``; the grid increases and column 0 is the ``-inf`` sentinel (stop before every
proposal).  The rule picks the largest ``j`` with ``sum_i losses[i, j] + B <= alpha * (n + 1)``,
read as "the last grid point before the first violation".

Every comparison with ``alpha`` is exact.  ``alpha`` is taken as the decimal it was written as
(``0.1`` is ``1/10``, see :func:`alpha_fraction`); integer losses are summed as integers and
compared with an integer budget; float losses are compared as exact rationals.  No float
quantile is ever taken.

Guarantee (only this): for exchangeable episodes and a frozen pipeline,
``E[L_{n+1}(lambda_hat)] <= alpha``, in expectation over the calibration set and the new
episode, for the declared ledger loss only.  :func:`step_crc_threshold_index` carries no
guarantee at all; it is the heuristic baseline of docs/calibrate.md
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from guard.calibration._arrays import FloatArray as FloatArray
from guard.calibration._arrays import IntArray as IntArray
from guard.calibration._arrays import as_count_table, as_grid, as_index_matrix, as_levels, reject_nan
from guard.errors import CalibrationError

#: rows x columns processed at once by the permutation functions (bounds peak memory).
_CHUNK_ELEMENTS = 1 << 22


class EpisodeScoreIndex(NamedTuple):
    """Every episode's finite scores as sorted integer keys; built by :func:`index_episode_scores`.

    ``values`` are the sorted distinct finite scores of the whole corpus; a score ``s`` of episode
    ``e`` is stored once as the key ``e * stride + rank(s)`` with ``rank`` its position in
    ``values`` and ``stride = len(values) + 1``, so ``keys`` sorts by episode, then by score.
    """

    values: FloatArray
    keys: IntArray
    stride: int
    n_episodes: int


# --------------------------------------------------------------------------- exact budget


def alpha_fraction(alpha: float | Fraction, name: str = "alpha") -> Fraction:
    """Return ``alpha`` as an exact rational: a float is read as its repr (``0.1`` -> ``1/10``).

    A :class:`~fractions.Fraction` is kept as it is (pass ``Fraction(1, 3)`` for exactly one
    third: the float ``1/3`` reads as ``0.3333333333333333``, slightly less).
    """
    number = isinstance(alpha, (Fraction, int, float, np.integer, np.floating)) and not isinstance(alpha, bool)
    if not number or not 0 < alpha < 1:  # also NaN and the infinities
        raise CalibrationError(f"{name} must be a number with 0 < {name} < 1, got {alpha!r}")
    return alpha if isinstance(alpha, Fraction) else Fraction(repr(float(alpha)))


def min_calibration_size(alpha: float | Fraction, bound: int = 1) -> int:
    """Return the smallest ``n`` with ``bound <= alpha * (n + 1)``: below it nothing is feasible."""
    _check_bound(bound)
    return math.ceil(Fraction(bound) / alpha_fraction(alpha)) - 1


def max_harmful_allowed(n: int, alpha: float | Fraction, bound: int = 1) -> int:
    """Return the largest integer ``S`` with ``S + bound <= alpha * (n + 1)`` (equality allowed).

    Raises :class:`CalibrationError` naming the minimum ``n`` when ``alpha < bound / (n + 1)``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise CalibrationError(f"n must be a non-negative integer, got {n!r}")
    _check_bound(bound)
    allowed = math.floor(alpha_fraction(alpha) * (int(n) + 1)) - bound
    if allowed < 0:
        raise CalibrationError(_infeasible_message(int(n), alpha, bound))
    return allowed


def _infeasible_message(n: int, alpha: float | Fraction, bound: int) -> str:
    need = min_calibration_size(alpha, bound)
    return (
        f"no threshold is feasible: alpha={alpha} is below B/(n+1) = {bound}/{n + 1}; "
        f"CARB needs at least n={need} calibration episodes at this alpha (B={bound}), got n={n}"
    )


def _check_bound(bound: int) -> None:
    if isinstance(bound, bool) or not isinstance(bound, (int, np.integer)) or bound < 1:
        raise CalibrationError(f"the loss bound B must be a positive integer, got {bound!r}")


# --------------------------------------------------------------------------- loss tables


def check_monotone(losses: npt.ArrayLike) -> None:
    """Raise :class:`CalibrationError` naming the first episode row and grid column that decrease."""
    table = _as_table(losses)
    rows, cols = np.nonzero(np.diff(table, axis=1) < 0)
    if rows.size:
        i, j = int(rows[0]), int(cols[0]) + 1
        raise CalibrationError(
            f"episode row {i}: loss decreases from {table[i, j - 1]} at grid column {j - 1} "
            f"to {table[i, j]} at grid column {j}; every episode's loss must be non-decreasing "
            "in lambda (monotonize() takes the running maximum, if that is what you mean)"
        )


def monotonize(losses: npt.ArrayLike) -> npt.NDArray[np.int64] | FloatArray:
    """Return the running maximum along the grid: ``L~[i, j] = max_{l <= j} L[i, l]``."""
    table = _as_table(losses)
    result: npt.NDArray[np.int64] | FloatArray = np.maximum.accumulate(table, axis=1)
    return result


def crc_threshold_index(losses: npt.ArrayLike, alpha: float | Fraction, bound: int = 1) -> int:
    """Return the largest grid column ``j`` with ``sum_i losses[i, j] + bound <= alpha * (n + 1)``.

    ``losses`` is ``(n, G)``, each row non-decreasing (checked, raises otherwise), values in
    ``[0, bound]``.  The answer is the last column before the first violation.  Raises
    :class:`CalibrationError` if ``alpha < bound / (n + 1)`` or column 0 is already infeasible.
    """
    table = _as_table(losses)
    _check_range(table, bound)
    check_monotone(table)
    allowed = max_harmful_allowed(table.shape[0], alpha, bound)
    if np.issubdtype(table.dtype, np.integer) or np.all(table == np.floor(table)):
        first_bad = _first_true(table.astype(np.int64).sum(axis=0) > allowed)
    else:
        cap = alpha_fraction(alpha) * (table.shape[0] + 1) - bound
        first_bad = _first_violation_float(table.astype(np.float64), cap)
    if first_bad == 0:
        raise CalibrationError(
            "no threshold is feasible: grid column 0 (the most conservative lambda) already has "
            f"corrected calibration loss above alpha={alpha}"
        )
    return first_bad - 1


def _first_violation_float(table: FloatArray, cap: Fraction) -> int:
    """First column whose exact sum exceeds ``cap``; float sums decide, exact sums break ties."""
    sums = table.sum(axis=0)
    threshold = float(cap)
    slack = (table.shape[0] + 2) * 2.0**-52 * (sums + abs(threshold) + 1.0)
    low = _first_true(~(sums + slack <= threshold))
    high = _first_true(sums - slack > threshold)
    while low < high:  # column sums are non-decreasing, so bisect on the exact ones
        mid = (low + high) // 2
        if sum(map(Fraction, table[:, mid].tolist()), Fraction(0)) > cap:
            high = mid
        else:
            low = mid + 1
    return low


def _first_true(mask: npt.NDArray[np.bool_]) -> int:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else mask.size


def _as_table(losses: npt.ArrayLike) -> npt.NDArray[np.int64] | FloatArray:
    table = np.asarray(losses)
    if table.ndim != 2:
        raise CalibrationError(f"losses must be a 2-D (episodes, grid) array, got shape {table.shape}")
    if table.dtype == np.bool_ or np.issubdtype(table.dtype, np.integer):
        return table.astype(np.int64)
    if not np.issubdtype(table.dtype, np.floating):
        raise CalibrationError(f"losses must be numeric, got dtype {table.dtype}")
    return reject_nan(table.astype(np.float64), "losses")


def _check_range(table: npt.NDArray[np.int64] | FloatArray, bound: int) -> None:
    _check_bound(bound)
    bad = np.argwhere((table < 0) | (table > bound))
    if bad.size:
        i, j = int(bad[0][0]), int(bad[0][1])
        raise CalibrationError(f"losses[{i}, {j}] = {table[i, j]} is outside [0, B={bound}]")


# --------------------------------------------------------------------------- binary fast path


def exact_grid(scores: Iterable[float] | npt.ArrayLike) -> FloatArray:
    """Return the sorted distinct finite scores with ``-inf`` prepended (the exact grid of docs/calibrate.md)."""
    if isinstance(scores, np.ndarray):
        flat = scores.astype(np.float64).ravel()
    else:
        flat = np.asarray(list(scores), dtype=np.float64).ravel()  # type: ignore[arg-type]
    reject_nan(flat, "scores")
    return np.concatenate(([-np.inf], np.unique(flat[np.isfinite(flat)])))


def carb_threshold_from_harm_levels(harm_levels: npt.ArrayLike, grid: npt.ArrayLike, alpha: float | Fraction) -> float:
    """Return lambda_hat for binary episode losses ``L_i(lam) = [lam >= M_i]``.

    ``harm_levels[i] = M_i`` is the running-max score at episode ``i``'s first harmful executed
    step (``+inf`` if it never charges the ledger).  The result is the largest grid value with
    ``#{i : M_i <= lam} + 1 <= alpha * (n + 1)``, i.e. the largest grid value strictly below the
    ``(m+1)``-th smallest ``M_i`` with ``m = max_harmful_allowed(n, alpha)``; it equals
    ``grid[crc_threshold_index(grid[None, :] >= M[:, None], alpha)]``.
    """
    levels, grid_values = as_levels(harm_levels), as_grid(grid)
    allowed = max_harmful_allowed(levels.size, alpha)
    cut = float(np.partition(levels, allowed)[allowed]) if allowed < levels.size else np.inf
    column = int(np.searchsorted(grid_values, cut, side="left")) - 1
    if column < 0:
        raise CalibrationError(_column_zero_message(cut, grid_values, alpha))
    return float(grid_values[column])


def carb_thresholds_for_permutations(
    harm_levels: npt.ArrayLike, grid: npt.ArrayLike, calib_idx: npt.ArrayLike, alpha: float | Fraction
) -> FloatArray:
    """Return lambda_hat for each row of ``calib_idx`` (shape ``(R, n_cal)``) on one fixed grid.

    Row ``r`` is a calibration set (distinct episode indices into ``harm_levels``; not checked).
    ``lambda_hat[r]`` = the largest value of ``grid`` strictly below the ``(m+1)``-th smallest
    calibration ``M``, ``m = max_harmful_allowed(n_cal, alpha)`` -- exactly
    :func:`carb_threshold_from_harm_levels` on that row with this grid.  With ``grid`` the exact
    grid of the whole corpus (all scores, a symmetric function of the corpus, so valid for the
    permutation protocol of docs/studies.md) every lambda between ``lambda_hat[r]`` and the cut gives the same
    prefixes on every corpus episode.  Cost: one ``np.partition`` per row, chunked.
    """
    levels, grid_values = as_levels(harm_levels), as_grid(grid)
    index = as_index_matrix(calib_idx, levels.size)
    cuts = _row_cuts(levels, index, max_harmful_allowed(index.shape[1], alpha))
    columns = np.searchsorted(grid_values, cuts, side="left") - 1
    if (columns < 0).any():
        r = int(np.flatnonzero(columns < 0)[0])
        raise CalibrationError(f"permutation {r}: " + _column_zero_message(cuts[r], grid_values, alpha))
    return grid_values[columns]


def index_episode_scores(scores: npt.ArrayLike, episode_ids: npt.ArrayLike, n_episodes: int) -> EpisodeScoreIndex:
    """Index a corpus's proposal scores (flat ``scores[k]`` of episode ``episode_ids[k]``).

    Non-finite scores are left out (they never form a grid point).  ``n_episodes`` counts the
    episodes, including any with no proposal.
    """
    flat = np.asarray(scores, dtype=np.float64).ravel()
    owner = np.asarray(episode_ids).ravel()
    if flat.shape != owner.shape or not np.issubdtype(owner.dtype, np.integer):
        raise CalibrationError("scores and episode_ids must be flat arrays of equal length, ids integer")
    if owner.size and (owner.min() < 0 or owner.max() >= n_episodes):
        raise CalibrationError(f"episode_ids must lie in [0, {n_episodes}), got {owner.min()}..{owner.max()}")
    reject_nan(flat, "scores")
    finite = np.isfinite(flat)
    values, ranks = np.unique(flat[finite], return_inverse=True)
    stride = values.size + 1
    if n_episodes * stride >= 2**62:
        raise CalibrationError(f"{n_episodes} episodes x {values.size} distinct scores overflow int64 keys")
    keys = np.unique(owner[finite].astype(np.int64) * stride + ranks.astype(np.int64).ravel())
    return EpisodeScoreIndex(values, keys, stride, int(n_episodes))


def carb_thresholds_for_permutations_exact(
    harm_levels: npt.ArrayLike,
    score_index: EpisodeScoreIndex,
    calib_idx: npt.ArrayLike,
    alpha: float | Fraction,
) -> FloatArray:
    """Like :func:`carb_thresholds_for_permutations`, each row on its own calibration grid.

    Row ``r``'s grid is :func:`exact_grid` of the scores of its calibration episodes only, so
    ``lambda_hat[r]`` = the largest calibration score strictly below the cut (``-inf`` if none).
    Cost: ``R * n_cal`` binary searches in ``score_index.keys``, chunked: ~10 ms for R=200,
    n_cal=500; ~15 s for 10**6 episodes, n_cal=5*10**5 (use the fixed-grid function there).
    """
    levels = as_levels(harm_levels)
    if levels.size != score_index.n_episodes:
        raise CalibrationError(f"{levels.size} harm levels for {score_index.n_episodes} indexed episodes")
    index = as_index_matrix(calib_idx, levels.size)
    cuts = _row_cuts(levels, index, max_harmful_allowed(index.shape[1], alpha))
    if (cuts == -np.inf).any():
        r = int(np.flatnonzero(cuts == -np.inf)[0])
        raise CalibrationError(f"permutation {r}: " + _column_zero_message(-np.inf, exact_grid([]), alpha))
    return scores_below(score_index, index, cuts)


def scores_below(score_index: EpisodeScoreIndex, index: IntArray, cuts: FloatArray) -> FloatArray:
    """For each row of ``index`` (calibration episodes), the largest score of those episodes strictly below the
    row's cut (``-inf`` if none): λ̂ on the row's own exact grid once the rule has fixed its cut."""
    below = np.searchsorted(score_index.values, cuts, side="left").astype(np.int64)
    best = np.empty(index.shape[0], dtype=np.int64)
    for rows in _row_chunks(index.shape):
        base = np.sort(index[rows], axis=1) * score_index.stride  # sorted queries search faster
        pos = np.searchsorted(score_index.keys, base + below[rows, None], side="left") - 1
        found = score_index.keys[np.maximum(pos, 0)]
        ranks = np.where((pos >= 0) & (found >= base), found - base, -1)
        best[rows] = ranks.max(axis=1, initial=-1)
    return np.where(best >= 0, score_index.values[np.maximum(best, 0)], -np.inf)


def _row_cuts(levels: FloatArray, index: IntArray, allowed: int) -> FloatArray:
    """The ``(allowed+1)``-th smallest calibration harm level of each row (``+inf`` if none)."""
    cuts = np.full(index.shape[0], np.inf)
    if allowed >= index.shape[1]:
        return cuts
    for rows in _row_chunks(index.shape):
        cuts[rows] = np.partition(levels[index[rows]], allowed, axis=1)[:, allowed]
    return cuts


def _row_chunks(shape: tuple[int, ...]) -> Iterable[slice]:
    step = max(1, _CHUNK_ELEMENTS // max(1, shape[1]))
    return (slice(start, start + step) for start in range(0, shape[0], step))


def _column_zero_message(cut: float, grid: FloatArray, alpha: float | Fraction) -> str:
    return (
        f"no threshold is feasible: too many episodes charge the ledger already at the first grid "
        f"point {grid[0]} (the (m+1)-th smallest harm level is {cut}) for alpha={alpha}"
    )


# --------------------------------------------------------------------------- heuristic baseline


def step_crc_threshold_index(harmful_exec: npt.ArrayLike, executed: npt.ArrayLike, alpha: float | Fraction) -> int:
    """Executed-step CRC (docs/calibrate.md baseline): a HEURISTIC with NO guarantee of any kind.

    ``harmful_exec[i, j]`` / ``executed[i, j]`` count episode ``i``'s harmful / all executed
    actions at grid column ``j``.  Pooled ratio ``R(j) = sum_i harmful / sum_i executed`` (0 when
    nothing executed), monotonized ``R~(j) = max_{l <= j} R(l)``; the CARB rule with ``R~`` as
    the mean loss of the ``n`` episodes: largest ``j`` (last before the first violation) with
    ``n * R~(j) + 1 <= alpha * (n + 1)``.  The first violation of ``R~`` is the first ``j`` with
    ``R(j) > (alpha * (n + 1) - 1) / n``, compared exactly in integers.  A pooled step rate
    dilutes one harmful action over many benign ones, so episode loss at this lambda can far
    exceed alpha.
    """
    harmful, done = as_count_table(harmful_exec, "harmful_exec"), as_count_table(executed, "executed")
    if harmful.shape != done.shape or (harmful > done).any():
        raise CalibrationError("harmful_exec must have the shape of executed and never exceed it")
    n = harmful.shape[0]
    max_harmful_allowed(n, alpha)  # raises when alpha < 1 / (n + 1)
    limit = (alpha_fraction(alpha) * (n + 1) - 1) / n
    hits = harmful.sum(axis=0).astype(object) * limit.denominator
    room = done.sum(axis=0).astype(object) * limit.numerator
    first_bad = _first_true(np.asarray(hits > room, dtype=np.bool_))
    if first_bad == 0:
        raise CalibrationError(f"no threshold is feasible: the pooled step rate at grid column 0 exceeds alpha={alpha}")
    return first_bad - 1


__all__ = [
    "EpisodeScoreIndex",
    "alpha_fraction",
    "carb_threshold_from_harm_levels",
    "carb_thresholds_for_permutations",
    "carb_thresholds_for_permutations_exact",
    "check_monotone",
    "crc_threshold_index",
    "exact_grid",
    "index_episode_scores",
    "max_harmful_allowed",
    "min_calibration_size",
    "monotonize",
    "step_crc_threshold_index",
]
