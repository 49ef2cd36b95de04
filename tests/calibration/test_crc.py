"""Tests of guard.calibration.crc: exact finite-sample rules, oracles, and seeded Monte Carlo."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.calibration.crc import (
    alpha_fraction,
    carb_threshold_from_harm_levels,
    carb_thresholds_for_permutations,
    carb_thresholds_for_permutations_exact,
    check_monotone,
    crc_threshold_index,
    exact_grid,
    index_episode_scores,
    max_harmful_allowed,
    min_calibration_size,
    monotonize,
    step_crc_threshold_index,
)
from guard.errors import CalibrationError

ALPHAS = ("0.01", "0.05", "0.07", "0.1", "0.15", "0.2", "0.25", "0.3", "0.5", "0.9")
NEG_INF, POS_INF = float("-inf"), float("inf")


# --------------------------------------------------------------------------- independent oracle


def oracle_index(rows: list[list[Fraction]] | list[list[int]], alpha: str, bound: int = 1) -> int | None:
    """Pure-Python CRC: walk the grid, stop at the first violation; None if column 0 fails."""
    budget = Fraction(alpha) * (len(rows) + 1)
    best = None
    for j in range(len(rows[0]) if rows else 1):
        if sum(row[j] for row in rows) + bound > budget:
            break
        best = j
    return best


def oracle_binary_threshold(levels: list[float], grid: list[float], alpha: str) -> float | None:
    """Oracle lambda_hat for binary losses [lam >= M_i] on ``grid`` (None if infeasible)."""
    rows = [[int(g >= m) for g in grid] for m in levels]
    index = oracle_index(rows, alpha) if levels else None
    return None if index is None else grid[index]


def random_episodes(rnd: random.Random, n: int) -> tuple[list[list[float]], list[float]]:
    """Small integer-scored episodes (many ties) and their harm levels (running max at harm)."""
    scores, levels = [], []
    for _ in range(n):
        steps = [float(rnd.randint(0, 9)) for _ in range(rnd.randint(0, 4))]
        harm = rnd.randrange(len(steps)) if steps and rnd.random() < 0.6 else None
        scores.append(steps)
        levels.append(POS_INF if harm is None else max(steps[: harm + 1]))
    return scores, levels


def flat_index(scores: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Flatten per-episode scores into (scores, episode_ids)."""
    ids = [e for e, steps in enumerate(scores) for _ in steps]
    return np.array([s for steps in scores for s in steps], dtype=float), np.array(ids, dtype=np.int64)


# --------------------------------------------------------------------------- exact budget


def test_alpha_fraction_reads_the_decimal() -> None:
    """0.1 is read as exactly 1/10 and 0.3 as 3/10, not as their binary floats."""
    assert alpha_fraction(0.1) == Fraction(1, 10)
    assert alpha_fraction(0.3) == Fraction(3, 10)
    assert alpha_fraction(np.float64(0.05)) == Fraction(1, 20)
    assert alpha_fraction(Fraction(1, 3)) == Fraction(1, 3)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5, float("nan"), float("inf"), True, "0.1"])
def test_alpha_fraction_rejects_values_outside_the_open_unit_interval(bad: object) -> None:
    """alpha outside (0, 1), NaN, a bool or a string raise CalibrationError."""
    with pytest.raises(CalibrationError, match="alpha"):
        alpha_fraction(bad)  # type: ignore[arg-type]


def test_equality_is_feasible_n19_alpha_01() -> None:
    """n=19, alpha=0.1: S + 1 <= 2 holds with equality, so one harmful episode is allowed."""
    assert max_harmful_allowed(19, 0.1) == 1
    assert max_harmful_allowed(18, 0.1) == 0
    assert max_harmful_allowed(29, 0.1) == 2
    assert max_harmful_allowed(19, 0.1, bound=2) == 0


def test_min_calibration_size_matches_the_definition() -> None:
    """The minimum n is the smallest n with B <= alpha (n + 1), checked by brute force."""
    for alpha in ALPHAS:
        for bound in (1, 2, 3):
            need = min_calibration_size(float(alpha), bound)
            assert bound <= Fraction(alpha) * (need + 1)
            assert bound > Fraction(alpha) * need


def test_alpha_one_over_n_plus_one_is_the_boundary() -> None:
    """n = 1..300: alpha = 1/(n+1) is feasible with no harm allowed; just below raises naming n+1."""
    for n in range(1, 301):
        assert max_harmful_allowed(n, Fraction(1, n + 1)) == 0
        assert crc_threshold_index(np.zeros((n, 2)), Fraction(1, n + 1)) == 1
        with pytest.raises(CalibrationError, match=rf"no threshold is feasible.*at least n={n + 1} "):
            max_harmful_allowed(n, Fraction(1, n + 1) - Fraction(1, 10**9))


def test_float_boundary_names_the_minimum_n() -> None:
    """alpha=0.05 is feasible at n=19 (equality) and raises at n=18, naming n=19."""
    assert crc_threshold_index(np.zeros((19, 3)), 0.05) == 2
    with pytest.raises(CalibrationError, match="at least n=19 calibration episodes"):
        crc_threshold_index(np.zeros((18, 3)), 0.05)


# --------------------------------------------------------------------------- hand-made tables


def test_hand_table_one_harmful_episode_allowed() -> None:
    """n=19, alpha=0.1: column sums 0,1,1,2 -> the last column with sum <= 1 is 2."""
    losses = np.zeros((19, 4), dtype=int)
    losses[0, 1:] = 1
    losses[1, 3:] = 1
    assert crc_threshold_index(losses, 0.1) == 2


def test_hand_table_last_point_before_first_violation() -> None:
    """n=9, alpha=0.3 (S <= 2): sums 0,1,3,3 stop at column 1."""
    losses = np.zeros((9, 4), dtype=bool)
    losses[0, 1:] = True
    losses[1:3, 2:] = True
    assert crc_threshold_index(losses, 0.3) == 1


def test_hand_table_all_columns_feasible_returns_last() -> None:
    """No violation anywhere returns the last column."""
    assert crc_threshold_index(np.zeros((40, 5)), 0.2) == 4


def test_hand_table_column_zero_infeasible_raises() -> None:
    """Two episodes charged at column 0 with one allowed: nothing is feasible."""
    losses = np.zeros((19, 3))
    losses[:2, :] = 1
    with pytest.raises(CalibrationError, match="column 0"):
        crc_threshold_index(losses, 0.1)


def test_hand_table_bounded_loss_b2() -> None:
    """B=2, n=9, alpha=0.5: sum + 2 <= 5, so sums 0,2,3,4 give column 2."""
    losses = np.array([[0, 2, 2, 2], [0, 0, 1, 2]] + [[0, 0, 0, 0]] * 7)
    assert crc_threshold_index(losses, 0.5, bound=2) == 2


def test_fractional_losses_feasible_at_exact_equality() -> None:
    """n=3, alpha=0.5: cap is 1; float losses summing exactly to 1 are feasible."""
    losses = np.array([[0.0, 0.5, 0.5], [0.0, 0.25, 0.25], [0.0, 0.25, 0.5]])
    assert crc_threshold_index(losses, 0.5) == 1


def test_fractional_losses_compare_exact_values_not_the_float_sum() -> None:
    """0.1 + 0.2 + 0.7 as floats sums exactly to just under 1: feasible at cap 1."""
    column = [0.1, 0.2, 0.7]
    exact = sum(map(Fraction, column), Fraction(0))
    losses = np.array([[0.0, v] for v in column])
    assert crc_threshold_index(losses, 0.5) == (1 if exact <= 1 else 0)
    assert exact < 1


def test_losses_outside_bound_raise() -> None:
    """A loss above B names its row and column."""
    with pytest.raises(CalibrationError, match=r"losses\[1, 2\] = 2"):
        crc_threshold_index(np.array([[0, 0, 0], [0, 1, 2]] + [[0, 0, 0]] * 20), 0.2)


# --------------------------------------------------------------------------- monotonicity


def test_check_monotone_names_first_row_and_column() -> None:
    """A decrease in row 2 between columns 2 and 3 is reported as such."""
    losses = np.zeros((5, 5))
    losses[2, 2] = 1.0
    losses[4, 1] = 1.0
    with pytest.raises(CalibrationError, match=r"episode row 2: .* at grid column 3"):
        check_monotone(losses)


def test_crc_rejects_a_non_monotone_table() -> None:
    """crc_threshold_index checks monotonicity before anything else."""
    losses = np.zeros((30, 3), dtype=int)
    losses[7, 1] = 1
    with pytest.raises(CalibrationError, match="episode row 7"):
        crc_threshold_index(losses, 0.2)


def test_monotonize_takes_the_running_max() -> None:
    """monotonize gives max over columns <= j per row, which then passes the check."""
    losses = np.array([[0, 1, 0, 0, 1], [0.5, 0.2, 0.7, 0.1, 0.0]])
    fixed = monotonize(losses)
    assert fixed.tolist() == [[0, 1, 1, 1, 1], [0.5, 0.5, 0.7, 0.7, 0.7]]
    check_monotone(fixed)


# --------------------------------------------------------------------------- oracle sweeps


@pytest.mark.parametrize("alpha", ALPHAS)
def test_sweep_crc_and_binary_fast_path_against_fraction_oracle(alpha: str) -> None:
    """n = 1..300: crc_threshold_index and the harm-level fast path agree with the oracle."""
    rnd = random.Random(f"sweep-{alpha}")
    for n in range(1, 301):
        _, levels = random_episodes(rnd, n)
        if rnd.random() < 0.05:
            levels[0] = NEG_INF
        grid = [NEG_INF, *sorted({float(rnd.randint(0, 9)) for _ in range(6)})]
        expected = oracle_binary_threshold(levels, grid, alpha)
        table = np.array([[g >= m for g in grid] for m in levels])
        if expected is None:
            with pytest.raises(CalibrationError, match="no threshold is feasible"):
                crc_threshold_index(table, float(alpha))
            with pytest.raises(CalibrationError, match="no threshold is feasible"):
                carb_threshold_from_harm_levels(levels, grid, float(alpha))
            continue
        assert grid[crc_threshold_index(table, float(alpha))] == expected
        assert carb_threshold_from_harm_levels(levels, grid, float(alpha)) == expected


@pytest.mark.parametrize("alpha", ("0.05", "0.1", "0.3", "0.5"))
def test_sweep_fractional_losses_against_fraction_oracle(alpha: str) -> None:
    """Random monotone dyadic and decimal-float loss tables agree with exact Fraction sums."""
    rnd = random.Random(f"frac-{alpha}")
    for n in range(1, 61):
        rows = [sorted(rnd.choice((0.0, 0.1, 0.25, 0.3, 0.5, 0.7, 1.0)) for _ in range(5)) for _ in range(n)]
        expected = oracle_index([[Fraction(v) for v in row] for row in rows], alpha)
        if expected is None:
            with pytest.raises(CalibrationError):
                crc_threshold_index(np.array(rows), float(alpha))
        else:
            assert crc_threshold_index(np.array(rows), float(alpha)) == expected


@pytest.mark.parametrize("alpha", ("0.05", "0.1", "0.2", "0.25", "0.5"))
def test_sweep_permutations_against_fraction_oracle(alpha: str) -> None:
    """n_cal = 1..300: both permutation functions match the oracle row by row."""
    rnd = random.Random(f"perm-{alpha}")
    for n_cal in range(1, 301):
        scores, levels = random_episodes(rnd, 2 * n_cal)
        calib = np.array([rnd.sample(range(2 * n_cal), n_cal) for _ in range(2)])
        flat, ids = flat_index(scores)
        grid = exact_grid(flat)
        exp_global = [oracle_binary_threshold([levels[i] for i in row], grid.tolist(), alpha) for row in calib]
        exp_exact = [
            oracle_binary_threshold(
                [levels[i] for i in row], [NEG_INF, *sorted({s for i in row for s in scores[i]})], alpha
            )
            for row in calib
        ]
        if None in exp_global:
            with pytest.raises(CalibrationError):
                carb_thresholds_for_permutations(levels, grid, calib, float(alpha))
            continue
        got = carb_thresholds_for_permutations(levels, grid, calib, float(alpha))
        assert got.tolist() == exp_global
        index = index_episode_scores(flat, ids, len(levels))
        assert carb_thresholds_for_permutations_exact(levels, index, calib, float(alpha)).tolist() == exp_exact


def test_permutation_column_zero_infeasible_names_the_permutation() -> None:
    """A calibration row with too many -inf harm levels raises naming its row."""
    levels = np.array([NEG_INF, NEG_INF, *([POS_INF] * 20)])
    calib = np.array([list(range(2, 22)), list(range(20))])
    with pytest.raises(CalibrationError, match="permutation 1"):
        carb_thresholds_for_permutations(levels, exact_grid([1.0]), calib, 0.1)
    index = index_episode_scores(np.array([1.0]), np.array([3]), 22)
    with pytest.raises(CalibrationError, match="permutation 1"):
        carb_thresholds_for_permutations_exact(levels, index, calib, 0.1)


def test_exact_grid_sorts_distinct_finite_scores_after_minus_inf() -> None:
    """exact_grid drops infinities and duplicates, prepends -inf, and rejects NaN."""
    assert exact_grid([0.5, 0.2, 0.5, POS_INF, NEG_INF]).tolist() == [NEG_INF, 0.2, 0.5]
    assert exact_grid(np.array([[3.0], [1.0]])).tolist() == [NEG_INF, 1.0, 3.0]
    assert exact_grid(iter(())).tolist() == [NEG_INF]
    with pytest.raises(CalibrationError, match="NaN"):
        exact_grid([0.1, float("nan")])


def test_grid_must_increase_strictly() -> None:
    """A repeated grid value is named."""
    with pytest.raises(CalibrationError, match=r"grid\[2\]"):
        carb_threshold_from_harm_levels([POS_INF] * 30, [NEG_INF, 0.1, 0.1], 0.1)


# --------------------------------------------------------------------------- properties


@st.composite
def integer_tables(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    """Monotone integer loss tables in [0, B] with their bound B."""
    bound = draw(st.integers(1, 3))
    n, g = draw(st.integers(1, 60)), draw(st.integers(1, 8))
    steps = draw(st.lists(st.lists(st.integers(0, 1), min_size=g, max_size=g), min_size=n, max_size=n))
    return np.minimum(np.cumsum(np.array(steps), axis=1), bound), bound


@settings(max_examples=300, deadline=None, database=None)
@given(table=integer_tables(), alpha=st.sampled_from([float(a) for a in ALPHAS]))
def test_property_index_is_feasible_and_next_is_not(table: tuple[np.ndarray, int], alpha: float) -> None:
    """The returned column is feasible and the next one is infeasible (or it is the last)."""
    losses, bound = table
    budget = Fraction(repr(alpha)) * (losses.shape[0] + 1)
    try:
        j = crc_threshold_index(losses, alpha, bound)
    except CalibrationError:
        assert int(losses[:, 0].sum()) + bound > budget
        return
    assert int(losses[:, j].sum()) + bound <= budget
    assert j == losses.shape[1] - 1 or int(losses[:, j + 1].sum()) + bound > budget


@settings(max_examples=200, deadline=None, database=None)
@given(
    levels=st.lists(st.one_of(st.integers(0, 12).map(float), st.just(POS_INF)), min_size=1, max_size=80),
    alpha=st.sampled_from([float(a) for a in ALPHAS]),
)
def test_property_fast_path_equals_table_rule(levels: list[float], alpha: float) -> None:
    """carb_threshold_from_harm_levels equals grid[crc_threshold_index(grid >= M)]."""
    grid = exact_grid([*levels[::2], 3.5])
    table = grid[None, :] >= np.array(levels)[:, None]
    try:
        expected = float(grid[crc_threshold_index(table, alpha)])
    except CalibrationError:
        with pytest.raises(CalibrationError):
            carb_threshold_from_harm_levels(levels, grid, alpha)
        return
    assert carb_threshold_from_harm_levels(levels, grid, alpha) == expected


# --------------------------------------------------------------------------- Monte Carlo


def synthetic_corpus(rng: np.random.Generator, n_episodes: int, prevalence: float) -> tuple[np.ndarray, ...]:
    """Episodes of 1-6 proposals, N(0,1) scores; a harmful step (if any) scores N(1.5, 1)."""
    lengths = rng.integers(1, 7, size=n_episodes)
    ids = np.repeat(np.arange(n_episodes), lengths)
    scores = rng.normal(size=ids.size)
    starts = np.cumsum(lengths) - lengths
    harmful = rng.random(n_episodes) < prevalence
    step = starts + (rng.random(n_episodes) * lengths).astype(int)
    scores[step[harmful]] += 1.5
    levels = np.full(n_episodes, POS_INF)
    for e in np.flatnonzero(harmful):
        levels[e] = scores[starts[e] : step[e] + 1].max()
    return scores, ids, levels


def split_indices(rng: np.random.Generator, n_total: int, n_cal: int, splits: int) -> np.ndarray:
    """``splits`` random calibration sets of size n_cal (rows of a random permutation)."""
    return np.argsort(rng.random((splits, n_total)), axis=1)[:, :n_cal]


def held_out_losses(levels: np.ndarray, calib: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Mean test-half loss per split: episodes outside calib with M <= lambda_hat."""
    charged_all = np.searchsorted(np.sort(levels), lam, side="right")
    charged_cal = (levels[calib] <= lam[:, None]).sum(axis=1)
    return (charged_all - charged_cal) / (levels.size - calib.shape[1])


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
def test_monte_carlo_mean_test_loss_is_at_most_alpha(alpha: float) -> None:
    """1000 seeded splits: mean test loss at lambda_hat <= alpha + 3 SE, on both grids."""
    rng = np.random.default_rng(int(alpha * 1000))
    scores, ids, levels = synthetic_corpus(rng, 300, prevalence=0.5)
    calib = split_indices(rng, 300, 100, 1000)
    global_lam = carb_thresholds_for_permutations(levels, exact_grid(scores), calib, alpha)
    exact_lam = carb_thresholds_for_permutations_exact(levels, index_episode_scores(scores, ids, 300), calib, alpha)
    for lam in (global_lam, exact_lam):
        loss = held_out_losses(levels, calib, lam)
        assert loss.mean() <= alpha + 3 * loss.std(ddof=1) / math.sqrt(loss.size)
    assert (exact_lam <= global_lam).all()


def test_negative_control_uncorrected_rule_exceeds_alpha() -> None:
    """Without +B and n+1 (mean calibration loss <= alpha), n=20 gives test loss clearly above alpha."""
    alpha, n_cal, splits = 0.1, 20, 2000
    rng = np.random.default_rng(7)
    scores, _, levels = synthetic_corpus(rng, 400, prevalence=0.9)
    calib = split_indices(rng, 400, n_cal, splits)
    grid = exact_grid(scores)
    naive_allowed = math.floor(alpha * n_cal)  # largest count with count / n <= alpha
    cuts = np.partition(levels[calib], naive_allowed, axis=1)[:, naive_allowed]
    naive = held_out_losses(levels, calib, grid[np.searchsorted(grid, cuts, side="left") - 1])
    corrected = held_out_losses(levels, calib, carb_thresholds_for_permutations(levels, grid, calib, alpha))
    assert naive.mean() > alpha + 5 * naive.std(ddof=1) / math.sqrt(splits)
    assert corrected.mean() <= alpha + 3 * corrected.std(ddof=1) / math.sqrt(splits)


# --------------------------------------------------------------------------- executed-step CRC


def test_step_crc_docstring_says_heuristic_without_guarantee() -> None:
    """The baseline is labelled a heuristic with no guarantee."""
    doc = step_crc_threshold_index.__doc__ or ""
    assert "HEURISTIC" in doc and "NO guarantee" in doc


def test_step_crc_hand_table() -> None:
    """n=9, alpha=0.2: limit (2-1)/9; pooled ratios 0, 1/10, 2/18 (equality), 3/19 stop at column 2."""
    executed = np.array([[0, 2, 10, 11]] + [[0, 1, 1, 1]] * 8)
    harmful = np.array([[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]] + [[0, 0, 0, 0]] * 6)
    assert step_crc_threshold_index(harmful, executed, 0.2) == 2


def test_step_crc_dilution_exceeds_alpha_in_episode_loss() -> None:
    """30 of 100 ten-step episodes hold one harmful step: step rate 0.03 <= 0.1, episode loss 0.3."""
    alpha, n, steps = 0.1, 100, 10
    executed = np.array([[0, steps, steps]] * n)
    harmful = np.zeros((n, 3), dtype=int)
    harmful[:30, 1:] = 1
    j = step_crc_threshold_index(harmful, executed, alpha)
    assert j == 2
    assert harmful[:, j].sum() / executed[:, j].sum() <= alpha
    episode_loss = (harmful[:, j] > 0).mean()
    assert episode_loss > alpha
    assert crc_threshold_index(harmful, alpha) == 0  # CARB on episode loss stops everything
