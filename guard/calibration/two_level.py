"""The two-level group rule (docs/calibrate.md, "the group rule"): plain CRC over episodes AND the group rule.

λ̂ = min(λ̂_CRC(α), λ̂_group(α_g)): ``λ̂_CRC(α)`` is plain CRC over the calibration episodes at ``alpha``
(:func:`~guard.calibration.crc.carb_threshold_from_harm_levels`), ``λ̂_group(α_g)`` the group rule over the
G calibration groups at the group level ``α_g`` (:func:`~guard.calibration.group_crc.group_crc_threshold`).
By default (``--group-alpha auto``) ``α_g = max(α, 2/(G+1))``, exactly: the group rule holds back 1 of its
budget ``α_g (G+1)`` for the new group, and at ``α_g >= 2/(G+1)`` that is at most half of it.

Guarantees (only these), both at once since every episode's loss is non-decreasing in λ and λ̂ is at or
below each rule's own threshold: for exchangeable episodes and a frozen pipeline, the expected
declared-ledger loss of a new episode is <= α; when groups are exchangeable (a new group is drawn
exchangeably with the G calibration groups) and the pipeline is frozen, the expected mean declared-ledger
loss over a new group's episodes is <= α_g.  ``--group-alpha alpha`` is the earlier pure group rule
(``α_g = α``, no episode rule): only the group statement, at α.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Final, Literal

import numpy as np
import numpy.typing as npt

from guard.calibration import crc, group_crc
from guard.calibration._arrays import FloatArray, as_index_matrix, as_levels
from guard.errors import CalibrationError

if TYPE_CHECKING:
    from guard.calibration.replay import ScoredCorpus

#: the two-level rule's name as an artifact records it (the pure group rule keeps ``group_crc``).
TWO_LEVEL_RULE = "group_crc_two_level"
#: ``--group-alpha`` words: ``auto`` (α_g = max(α, 2/(G+1))) and ``alpha`` (the pure group rule at α).
AUTO: Final = "auto"
SAME: Final = "alpha"
#: a parsed ``--group-alpha``: ``auto``, ``alpha`` or the group level itself.
GroupAlpha = Literal["auto", "alpha"] | Fraction
FLAG = "--group-alpha"

#: the help of ``--group-alpha``.
GROUP_ALPHA_HELP = (
    "the group level alpha_g of the group rule (with groups): auto (default) = max(alpha, 2/(G+1)), the "
    "two-level rule lambda_hat = min(CRC over episodes at alpha, group rule at alpha_g); a number in (0, 1) "
    "at or above the floor 1/(G+1) = that alpha_g in the same two-level rule; 'alpha' = the earlier pure group "
    "rule at alpha_g = alpha with no episode rule (docs/calibrate.md#the-two-level-rule)"
)


def parse_group_alpha(value: object) -> GroupAlpha:
    """``auto``, ``alpha`` or a number in (0, 1) read exactly; CalibrationError naming ``--group-alpha``, ``value``."""
    if isinstance(value, Fraction) and 0 < value < 1:
        return value
    text = str(value).strip()
    if text in (AUTO, SAME):
        return AUTO if text == AUTO else SAME
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if not 0 < number < 1:  # also NaN and the infinities
        raise CalibrationError(
            f"{FLAG} {value!r}: give auto, alpha, or a number with 0 < {FLAG} < 1 (the group level alpha_g)"
        )
    return crc.alpha_fraction(number, FLAG)


def group_level(alpha: float | Fraction, n_groups: int, setting: GroupAlpha = AUTO) -> Fraction:
    """α_g for ``n_groups`` calibration groups, exactly.

    ``auto``: ``max(α, 2/(G+1))``; ``alpha``: α; a Fraction: itself.  CalibrationError when the group rule
    cannot run at that level: below its floor ``1/(G+1)`` (naming ``--group-alpha`` when it was given as a
    number), or ``auto`` with ``G < 2`` (``α_g`` would be 1, a statement that says nothing).
    """
    a = crc.alpha_fraction(alpha)
    if not isinstance(setting, Fraction) and setting == AUTO:
        level = max(a, Fraction(2, n_groups + 1))
        if level >= 1:
            raise CalibrationError(
                f"the two-level group rule needs G >= 2 groups (alpha_g = max(alpha, 2/(G+1)) < 1); got G={n_groups}"
            )
        return level
    if not isinstance(setting, Fraction):
        group_crc.group_budget(n_groups, a)  # ``alpha``: the pure group rule's floor, naming G
        return a
    if setting * (n_groups + 1) < 1:
        raise CalibrationError(
            f"{FLAG} {format_level(setting)} is below the group rule's floor 1/(G+1) = 1/{n_groups + 1} with "
            f"G={n_groups} groups: give {FLAG} >= 1/{n_groups + 1}, or auto"
        )
    return setting


def group_rule_applies(alpha: float | Fraction, n_groups: int, setting: GroupAlpha = AUTO) -> bool:
    """Whether the group part runs (else plain CRC): ``auto`` at G >= 2, ``alpha`` at α >= 1/(G+1), a number always
    (it raises in :func:`group_level` below its floor, since it was asked for)."""
    if setting == AUTO:
        return n_groups >= 2
    if setting == SAME:
        return crc.alpha_fraction(alpha) * (n_groups + 1) >= 1
    return True


def format_level(level: Fraction) -> str:
    """A level as people read it: the decimal when it has at most 6 places (``0.0625``), else ``p/q (~0.3333)``."""
    for places in range(7):
        if (level * 10**places).denominator == 1:
            return f"{float(level):.{places}f}" if places else str(int(level))
    return f"{level.numerator}/{level.denominator} (~{float(level):.4f})"


@dataclass(frozen=True, slots=True)
class TwoLevel:
    """λ̂ of the two-level rule, both rules' thresholds, α_g and which constraint bound λ̂."""

    threshold: float
    episode_threshold: float
    group_threshold: float
    group_alpha: Fraction
    groups: int

    @property
    def bound_by(self) -> str:
        """``episodes`` (CRC over episodes is lower), ``groups`` (the group rule is lower) or ``both`` (equal)."""
        if self.episode_threshold == self.group_threshold:
            return "both"
        return "episodes" if self.episode_threshold < self.group_threshold else "groups"


def two_level_threshold(
    harm_levels: npt.ArrayLike,
    groups: Sequence[Hashable],
    grid: npt.ArrayLike,
    alpha: float | Fraction,
    setting: GroupAlpha = AUTO,
) -> TwoLevel:
    """λ̂ = min(CRC over episodes at ``alpha``, the group rule at α_g) on ``grid`` (binary losses ``[λ >= M_i]``).

    ``setting`` gives α_g (:func:`group_level`; ``alpha`` here is α_g = α, still with the episode rule).
    Raises CalibrationError where either rule has no feasible threshold.
    """
    levels = as_levels(harm_levels)
    n_groups = int(group_crc.group_codes(groups, levels.size)[1].size)
    level = group_level(alpha, n_groups, setting)
    episodes = crc.carb_threshold_from_harm_levels(levels, grid, alpha)
    grouped = group_crc.group_crc_threshold(levels, groups, grid, level)
    return TwoLevel(min(episodes, grouped), episodes, grouped, level, n_groups)


def episode_calibration_risk(harm_levels: npt.ArrayLike, threshold: float) -> Fraction:
    """``(#{i : M_i <= threshold} + 1) / (n + 1)``: plain CRC's corrected calibration risk at ``threshold``."""
    levels = as_levels(harm_levels)
    return Fraction(int(np.count_nonzero(levels <= threshold)) + 1, levels.size + 1)


def two_level_lambdas(
    corpus: ScoredCorpus,
    calib_rows: npt.ArrayLike,
    groups: Sequence[Hashable],
    alpha: float | Fraction,
    setting: GroupAlpha = AUTO,
) -> FloatArray:
    """λ̂ of the two-level rule for each row of ``calib_rows`` (``(R, n_cal)`` episode indices), each on its own
    exact grid; α_g from each row's own G (:func:`group_level`).  Both rules' λ̂ are calibration scores of the
    row, so their minimum is λ̂ of the rule on that grid."""
    index = as_index_matrix(calib_rows, corpus.n)
    owner = np.repeat(np.arange(corpus.n), np.diff(corpus.offsets))
    scores = crc.index_episode_scores(corpus.scores, owner, corpus.n)
    episodes = crc.carb_thresholds_for_permutations_exact(corpus.harm_level, scores, index, alpha)
    codes = group_crc.group_codes(list(groups), corpus.n)[0]
    levels: list[Fraction] = []
    for r, rows in enumerate(index):
        try:
            levels.append(group_level(alpha, int(np.unique(codes[rows]).size), setting))
        except CalibrationError as exc:
            raise CalibrationError(f"permutation {r}: {exc}") from None
    grouped = np.empty(index.shape[0])
    for level in set(levels):  # rows of one G share α_g: one call each
        same = np.flatnonzero([x == level for x in levels])
        grouped[same] = group_crc.group_lambdas(corpus, index[same], codes.tolist(), level)
    return np.minimum(episodes, grouped)


__all__ = [
    "AUTO",
    "FLAG",
    "GROUP_ALPHA_HELP",
    "SAME",
    "TWO_LEVEL_RULE",
    "GroupAlpha",
    "TwoLevel",
    "episode_calibration_risk",
    "format_level",
    "group_level",
    "group_rule_applies",
    "parse_group_alpha",
    "two_level_lambdas",
    "two_level_threshold",
]
