"""Group-exchangeable CARB threshold (docs/calibrate.md, "the group rule"): CRC over groups of episodes.

``carbguard calibrate`` runs it inside the two-level rule (:mod:`guard.calibration.two_level`) unless
``--group-alpha alpha`` asks for this pure rule alone.

Episodes carry a group key (an attack goal, a task, a customer).  Group ``g`` of ``n_g`` episodes has
loss ``l_g(lam) = (1/n_g) * sum_{i in g} L_i(lam)``, the mean of its episodes' losses.  The rule picks
the largest grid value ``lam`` with ``sum_g l_g(lam) + B <= alpha * (G + 1)``, ``B = 1`` the loss
bound and ``G`` the number of groups: plain CRC with the groups as its units.  Every sum is exact
(integers and :class:`~fractions.Fraction`, never a float sum); ``alpha`` is read as the decimal it
was written as (:func:`~guard.calibration.crc.alpha_fraction`).

Guarantee (only this): when groups are exchangeable (a new group is drawn exchangeably with the G
calibration groups) and the pipeline is frozen, the expected mean declared-ledger loss over a new
group's episodes is at most ``alpha``.  It needs ``alpha >= 1/(G+1)`` (the floor).  It says nothing
per episode within a group, nor about episodes of a seen group's distribution beyond that.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from guard.calibration import crc
from guard.calibration._arrays import FloatArray, IntArray, as_grid, as_index_matrix, as_levels
from guard.errors import CalibrationError
from guard.records import Episode, EpisodeMeta

if TYPE_CHECKING:
    from guard.calibration.replay import ScoredCorpus
    from guard.policy import Policy

#: the rule's name as an artifact records it.
GROUP_CRC_RULE = "group_crc"


def group_codes(groups: Sequence[Hashable], n: int) -> tuple[IntArray, IntArray]:
    """``(codes, sizes)``: episode ``i``'s group as ``codes[i]`` in ``[0, G)`` (first-seen order), each group's size.

    ``groups`` holds one hashable key per episode (a string, a tuple such as ``(suite, goal)``).
    """
    if len(groups) != n:
        raise CalibrationError(f"{len(groups)} group keys for {n} episodes: give one key per episode")
    if n == 0:
        raise CalibrationError("no episodes: the group rule needs at least one group")
    if isinstance(groups, np.ndarray) and groups.dtype.kind in "iu":  # codes already: renumber what is present
        present, inverse = np.unique(groups, return_inverse=True)
        return inverse.astype(np.int64), np.bincount(inverse, minlength=present.size).astype(np.int64)
    seen: dict[Hashable, int] = {}
    codes = np.fromiter((seen.setdefault(key, len(seen)) for key in groups), dtype=np.int64, count=n)
    return codes, np.bincount(codes, minlength=len(seen)).astype(np.int64)


def group_budget(n_groups: int, alpha: float | Fraction, bound: int = 1) -> Fraction:
    """``alpha * (G + 1) - B``, the most ``sum_g l_g`` may reach; raises below the floor ``alpha < B/(G+1)``."""
    cap = crc.alpha_fraction(alpha) * (n_groups + 1) - bound
    if cap < 0:
        need = crc.min_calibration_size(alpha, bound)
        raise CalibrationError(
            f"the group rule needs alpha >= B/(G+1) = {bound}/{n_groups + 1} (its floor) with G={n_groups} groups; "
            f"got alpha={alpha}: collect at least G={need} groups at this alpha, or raise alpha"
        )
    return cap


def mean_loss_total(sums: Sequence[int], sizes: Sequence[int]) -> Fraction:
    """``sum_g sums[g] / sizes[g]`` exactly (groups of one size are added as integers first)."""
    by_size: dict[int, int] = {}
    for total, size in zip(sums, sizes, strict=True):
        by_size[size] = by_size.get(size, 0) + total
    return sum((Fraction(total, size) for size, total in by_size.items()), Fraction(0))


def group_crc_threshold_index(
    losses: npt.ArrayLike, groups: Sequence[Hashable], alpha: float | Fraction, bound: int = 1
) -> int:
    """Return the largest grid column ``j`` with ``sum_g l_g(j) + bound <= alpha * (G + 1)``.

    ``losses`` is ``(n, J)``: episode ``i``'s loss at grid column ``j``, each row non-decreasing
    (checked), values in ``[0, bound]``; ``groups[i]`` is episode ``i``'s key.  The answer is the
    last column before the first violation.  Raises :class:`CalibrationError` below the floor
    ``alpha < bound / (G + 1)`` or when column 0 is already infeasible.
    """
    checked = _checked_table(np.asarray(losses), bound)
    codes, sizes = group_codes(groups, checked.shape[0])
    cap = group_budget(sizes.size, alpha, bound)
    first_bad = _first_violation(checked.shape[1], lambda j: _column_total(checked[:, j], codes, sizes) > cap)
    if first_bad == 0:
        raise CalibrationError(_column_zero_message(alpha, sizes.size))
    return first_bad - 1


def group_crc_threshold(
    harm_levels: npt.ArrayLike, groups: Sequence[Hashable], grid: npt.ArrayLike, alpha: float | Fraction
) -> float:
    """Return λ̂ of the group rule for binary episode losses ``L_i(lam) = [lam >= M_i]``.

    ``harm_levels[i] = M_i`` is the running-max score at episode ``i``'s first harmful executed step
    (``+inf`` if none); ``groups[i]`` its group key; ``grid`` increases strictly.  The result is the
    largest grid value with ``sum_g #{i in g : M_i <= lam} / n_g + 1 <= alpha * (G + 1)``.  With every
    episode its own group it is :func:`~guard.calibration.crc.carb_threshold_from_harm_levels`.
    """
    levels, grid_values = as_levels(harm_levels), as_grid(grid)
    codes, sizes = group_codes(groups, levels.size)
    cap = group_budget(sizes.size, alpha)
    sizes_list = sizes.tolist()

    def violates(j: int) -> bool:
        charged = np.bincount(codes[levels <= grid_values[j]], minlength=sizes.size)
        return mean_loss_total(charged.tolist(), sizes_list) > cap

    first_bad = _first_violation(grid_values.size, violates)
    if first_bad == 0:
        raise CalibrationError(_column_zero_message(alpha, sizes.size))
    return float(grid_values[first_bad - 1])


def group_calibration_risk(
    harm_levels: npt.ArrayLike, groups: Sequence[Hashable], threshold: float
) -> tuple[Fraction, int]:
    """``((sum_g l_g(threshold) + 1) / (G + 1), G)``: the corrected group risk at ``threshold`` and the group count."""
    levels = as_levels(harm_levels)
    codes, sizes = group_codes(groups, levels.size)
    charged = np.bincount(codes[levels <= threshold], minlength=sizes.size)
    total = mean_loss_total(charged.tolist(), sizes.tolist())
    return (total + 1) / (sizes.size + 1), int(sizes.size)


def group_lambdas(
    corpus: ScoredCorpus, calib_rows: npt.ArrayLike, groups: Sequence[Hashable], alpha: float | Fraction
) -> FloatArray:
    """λ̂ of the group rule for each row of ``calib_rows`` (``(R, n_cal)`` episode indices), each on its own grid.

    Row ``r``'s grid is the exact grid (:func:`~guard.calibration.crc.exact_grid`) of its calibration
    episodes' scores, as in :func:`guard.calibration.evaluate.carb_lambdas`; ``groups[i]`` is corpus
    episode ``i``'s key, and ``G`` counts the groups present in each row.  For the guarantee, split
    by group (whole groups to calibration or test), not by episode.  One exact rule per row.
    """
    index = as_index_matrix(calib_rows, corpus.n)
    if len(groups) != corpus.n:
        raise CalibrationError(f"{len(groups)} group keys for {corpus.n} corpus episodes")
    codes = group_codes(list(groups), corpus.n)[0]  # once for the corpus; each row takes its slice
    cuts = np.empty(index.shape[0])
    for r, rows in enumerate(index):
        levels = corpus.harm_level[rows]
        grid = np.concatenate(([-np.inf], np.unique(levels[np.isfinite(levels)])))  # the loss steps only here
        try:
            last = group_crc_threshold(levels, codes[rows], grid, alpha)
        except CalibrationError as exc:
            raise CalibrationError(f"permutation {r}: {exc}") from None
        after = grid[grid > last]
        cuts[r] = after[0] if after.size else np.inf  # the first harm level the rule does not allow
    owner = np.repeat(np.arange(corpus.n), np.diff(corpus.offsets))
    return crc.scores_below(crc.index_episode_scores(corpus.scores, owner, corpus.n), index, cuts)


# --------------------------------------------------------------------------- group keys of episodes

#: ``--group-by`` keys of AgentDojo corpora: the injection goal ``(suite, injection_task)`` (runs without
#: an injection task: ``(suite, "none")``, one group per suite), the user task ``(suite, user_task)``, the suite.
AGENTDOJO_GROUP_KEYS: tuple[str, ...] = ("injection_task", "user_task", "suite")
#: ``--group-by`` keys of an episodes file: a field of the episode's ``meta``, or ``tags.NAME`` (a free tag).
EPISODE_GROUP_FIELDS: tuple[str, ...] = ("attack", "injection_task", "model", "policy", "suite", "task")
_TAG = "tags."


#: the help of ``carbguard calibrate --group-by``: the rule, its guarantee and its floor.
GROUP_BY_HELP = (
    "the group rule over KEY: lambda_hat = min(CRC over episodes at alpha, the largest lambda with sum_g loss_g + 1 "
    "<= alpha_g*(G+1)), loss_g the mean loss of group g's episodes, alpha_g = max(alpha, 2/(G+1)) by default "
    "(--group-alpha). Two statements, both for a frozen pipeline: for exchangeable episodes, the expected "
    "declared-ledger loss of a new episode is <= alpha; when groups are exchangeable (a new group is drawn "
    "exchangeably with the G calibration groups), the expected mean declared-ledger loss over a new group's episodes "
    "is <= alpha_g; nothing per episode within a group. KEY: injection_task (the goal; no injection: "
    "one group per suite), user_task or suite (--corpus, --runs); a meta field "
    f"({', '.join(EPISODE_GROUP_FIELDS)}) or tags.NAME (--episodes)"
)


def check_group_by(key: str | None, *, agentdojo: bool, rule: str = "carb", fit_scorer: bool = False) -> None:
    """CalibrationError naming ``key`` and the allowed keys of this kind of corpus; CRC's only (``None``: no groups)."""
    if key is None:
        return
    if rule != "carb" or fit_scorer:
        raise CalibrationError("--group-by is the group form of --rule carb: not with --rule ltt or --fit-scorer")
    if agentdojo and key not in AGENTDOJO_GROUP_KEYS:
        raise CalibrationError(
            f"unknown --group-by key {key!r} for an AgentDojo corpus (--corpus, --runs); "
            f"allowed: {', '.join(AGENTDOJO_GROUP_KEYS)}"
        )
    if not agentdojo and key not in EPISODE_GROUP_FIELDS and not (key.startswith(_TAG) and len(key) > len(_TAG)):
        raise CalibrationError(
            f"unknown --group-by key {key!r} for --episodes; allowed: a meta field "
            f"({', '.join(EPISODE_GROUP_FIELDS)}) or {_TAG}NAME, one of the episodes' free tags"
        )


def episode_group_keys(
    episodes: Sequence[Episode],
    key: str,
    policy_of: Mapping[str, Policy] | None = None,
    tags_of: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Hashable]:
    """Each episode's group under ``key``, in order: AgentDojo's keys when ``policy_of`` is None, else an
    episodes file's (:data:`EPISODE_GROUP_FIELDS`, ``tags.NAME``), where episodes without a value share one group."""
    check_group_by(key, agentdojo=policy_of is None)
    if policy_of is None:
        return [_agentdojo_group(e.meta, key) for e in episodes]
    tags = tags_of or {}
    keys = [_episode_group(e, key, policy_of, tags.get(e.episode_id, {})) for e in episodes]
    if key.startswith(_TAG) and all(k is None for k in keys):
        raise CalibrationError(f"--group-by {key}: no episode has the tag {key[len(_TAG) :]!r}")
    return keys


def _agentdojo_group(meta: EpisodeMeta, key: str) -> Hashable:
    if key == "suite":
        return meta.suite
    if key == "user_task":
        return (meta.suite, meta.user_task)
    return (meta.suite, meta.injection_task or "none")


def _episode_group(episode: Episode, key: str, policy_of: Mapping[str, Policy], tags: Mapping[str, Any]) -> Hashable:
    if key.startswith(_TAG):
        name = key[len(_TAG) :]
        return json.dumps(tags[name], sort_keys=True) if name in tags else None
    meta = episode.meta
    fields = {
        "attack": meta.attack,
        "injection_task": meta.injection_task,
        "model": meta.model,
        "policy": policy_of[episode.episode_id].name,
        "suite": meta.suite,
        "task": meta.user_task,
    }
    return fields[key] or None


# --------------------------------------------------------------------------- helpers


def _checked_table(table: npt.NDArray[np.generic], bound: int) -> npt.NDArray[np.int64] | FloatArray:
    """The loss table as int64 or float64, checked 2-D, in ``[0, bound]`` and non-decreasing along rows."""
    if table.ndim != 2:
        raise CalibrationError(f"losses must be a 2-D (episodes, grid) array, got shape {table.shape}")
    if table.dtype == np.bool_ or np.issubdtype(table.dtype, np.integer):
        checked: npt.NDArray[np.int64] | FloatArray = table.astype(np.int64)
    elif np.issubdtype(table.dtype, np.floating):
        checked = table.astype(np.float64)
        if np.isnan(checked).any():
            raise CalibrationError("losses must not be NaN")
    else:
        raise CalibrationError(f"losses must be numeric, got dtype {table.dtype}")
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
        raise CalibrationError(f"the loss bound B must be a positive integer, got {bound!r}")
    bad = np.argwhere((checked < 0) | (checked > bound))
    if bad.size:
        i, j = int(bad[0][0]), int(bad[0][1])
        raise CalibrationError(f"losses[{i}, {j}] = {checked[i, j]} is outside [0, B={bound}]")
    crc.check_monotone(checked)
    return checked


def _column_total(column: npt.NDArray[np.int64] | FloatArray, codes: IntArray, sizes: IntArray) -> Fraction:
    """``sum_g (1/n_g) sum_{i in g} column[i]``, exactly."""
    if np.issubdtype(column.dtype, np.integer):
        sums = np.zeros(sizes.size, dtype=np.int64)
        np.add.at(sums, codes, column)
        return mean_loss_total(sums.tolist(), sizes.tolist())
    per_group = [Fraction(0)] * sizes.size
    for code, value in zip(codes.tolist(), column.tolist(), strict=True):
        per_group[code] += Fraction(value)
    return sum((total / int(size) for total, size in zip(per_group, sizes.tolist(), strict=True)), Fraction(0))


def _first_violation(columns: int, violates: Callable[[int], bool]) -> int:
    """The first column ``j`` with ``violates(j)`` (``columns`` if none); ``violates`` is monotone in ``j``."""
    low, high = 0, columns
    while low < high:
        mid = (low + high) // 2
        if violates(mid):
            high = mid
        else:
            low = mid + 1
    return low


def _column_zero_message(alpha: float | Fraction, n_groups: int) -> str:
    return (
        "no threshold is feasible: at grid column 0 (the most conservative lambda) the summed group losses "
        f"already exceed alpha*(G+1) - 1 for alpha={alpha}, G={n_groups}"
    )


__all__ = [
    "AGENTDOJO_GROUP_KEYS",
    "EPISODE_GROUP_FIELDS",
    "GROUP_CRC_RULE",
    "check_group_by",
    "episode_group_keys",
    "group_budget",
    "group_calibration_risk",
    "group_codes",
    "group_crc_threshold",
    "group_crc_threshold_index",
    "group_lambdas",
    "mean_loss_total",
]
