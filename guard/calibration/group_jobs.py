"""The group rules of ``carbguard calibrate`` (docs/calibrate.md#the-two-level-rule): λ̂ with the artifact fields of
the two-level rule or of the pure group rule."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from guard.artifact import GROUP_CRC_GUARANTEE, two_level_guarantee
from guard.calibration import crc, group_crc, ltt, two_level
from guard.jsonio import encode_float

if TYPE_CHECKING:
    from guard.calibration.replay import ScoredCorpus


def group_rule(
    data: ScoredCorpus, keys: Sequence[Hashable], alpha: float, group_by: str, group_alpha: two_level.GroupAlpha
) -> tuple[ltt.RuleThreshold, dict[str, Any], dict[str, Any]]:
    """λ̂ of the group rule on the exact grid (two-level unless ``group_alpha`` is ``alpha``), its risk fields
    (corrected risks, guarantee) and its group fields."""
    grid = crc.exact_grid(data.scores)
    if group_alpha != two_level.SAME:
        return _two_level_rule(data, keys, grid, alpha, group_by, group_alpha)
    threshold = group_crc.group_crc_threshold(data.harm_level, keys, grid, alpha)
    risk, n_groups = group_crc.group_calibration_risk(data.harm_level, keys, threshold)
    chosen = ltt.RuleThreshold(threshold, float(risk), [float(g) for g in grid], group_crc.GROUP_CRC_RULE)
    risk_fields = {"calibration_risk": float(risk), "guarantee": GROUP_CRC_GUARANTEE}
    return chosen, risk_fields, {"group_by": group_by, "groups": n_groups}


def _two_level_rule(
    data: ScoredCorpus,
    keys: Sequence[Hashable],
    grid: Any,
    alpha: float,
    group_by: str,
    group_alpha: two_level.GroupAlpha,
) -> tuple[ltt.RuleThreshold, dict[str, Any], dict[str, Any]]:
    """The two-level rule's λ̂, risk fields (both corrected risks at λ̂, both statements) and group fields (both
    levels, both rules' thresholds, which one bound λ̂)."""
    got = two_level.two_level_threshold(data.harm_level, keys, grid, alpha, group_alpha)
    risk = two_level.episode_calibration_risk(data.harm_level, got.threshold)
    group_risk, _ = group_crc.group_calibration_risk(data.harm_level, keys, got.threshold)
    level = two_level.format_level(got.group_alpha)
    chosen = ltt.RuleThreshold(got.threshold, float(risk), [float(g) for g in grid], two_level.TWO_LEVEL_RULE)
    risk_fields = {
        "calibration_risk": float(risk),
        "group_calibration_risk": float(group_risk),
        "guarantee": two_level_guarantee(repr(alpha), level, got.groups),
    }
    return (
        chosen,
        risk_fields,
        {
            "group_by": group_by,
            "groups": got.groups,
            "group_alpha": float(got.group_alpha),
            "group_alpha_exact": f"{got.group_alpha.numerator}/{got.group_alpha.denominator}",
            "group_alpha_setting": str(group_alpha) if group_alpha == two_level.AUTO else "value",
            "threshold_episode_rule": encode_float(got.episode_threshold),
            "threshold_group_rule": encode_float(got.group_threshold),
            "bound_by": got.bound_by,
        },
    )
