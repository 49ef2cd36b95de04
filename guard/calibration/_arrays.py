"""Array checks and type aliases of the CRC rules (:mod:`guard.calibration.crc`): shapes, NaN, grids."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from guard.errors import CalibrationError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def as_levels(harm_levels: npt.ArrayLike) -> FloatArray:
    levels = np.asarray(harm_levels, dtype=np.float64)
    if levels.ndim != 1:
        raise CalibrationError(f"harm_levels must be 1-D, got shape {levels.shape}")
    return reject_nan(levels, "harm_levels")


def reject_nan(values: FloatArray, name: str) -> FloatArray:
    bad = np.argwhere(np.isnan(values))
    if bad.size:
        raise CalibrationError(f"{name}[{', '.join(map(str, bad[0]))}] is NaN")
    return values


def as_grid(grid: npt.ArrayLike) -> FloatArray:
    values = np.asarray(grid, dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or np.isnan(values).any():
        raise CalibrationError(f"grid must be a non-empty 1-D array without NaN, got {values!r}")
    steps = np.flatnonzero(np.diff(values) <= 0)
    if steps.size:
        j = int(steps[0]) + 1
        raise CalibrationError(f"grid must increase strictly: grid[{j}]={values[j]} <= grid[{j - 1}]")
    return values


def as_index_matrix(calib_idx: npt.ArrayLike, n_episodes: int) -> IntArray:
    index = np.asarray(calib_idx)
    if index.ndim != 2 or not np.issubdtype(index.dtype, np.integer):
        raise CalibrationError(f"calib_idx must be a 2-D integer array (R, n_cal), got {index.shape}")
    if index.size and (index.min() < 0 or index.max() >= n_episodes):
        raise CalibrationError(f"calib_idx must lie in [0, {n_episodes}), got {index.min()}..{index.max()}")
    return index.astype(np.int64)


def as_count_table(counts: npt.ArrayLike, name: str) -> IntArray:
    table = np.asarray(counts)
    if table.ndim != 2 or not np.issubdtype(table.dtype, np.integer) or (table < 0).any():
        raise CalibrationError(f"{name} must be a 2-D array of non-negative integer counts")
    return table.astype(np.int64)
