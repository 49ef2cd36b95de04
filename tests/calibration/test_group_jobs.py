"""The group rules as ``carbguard calibrate`` runs them (docs/calibrate.md#the-two-level-rule): λ̂ and fields."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from guard.artifact import GROUP_CRC_GUARANTEE, two_level_guarantee
from guard.calibration import crc, group_crc, two_level
from guard.calibration.group_jobs import group_rule
from guard.calibration.replay import ScoredCorpus


def _corpus(n: int, seed: int) -> ScoredCorpus:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=3 * n).round(2)
    offsets = np.arange(0, 3 * n + 1, 3)
    zeros = np.zeros(3 * n)
    return ScoredCorpus(
        episode_ids=tuple(f"e{i}" for i in range(n)),
        offsets=offsets,
        scores=scores,
        cummax=zeros,
        n_selected=zeros,
        n_prefix=zeros,
        harmful=zeros.astype(bool),
        harm_level=np.where(rng.random(n) < 0.3, scores[offsets[:-1] + 1], np.inf),
        category_levels={},
        max_score=np.zeros(n),
        utility=np.zeros(n, dtype=bool),
    )


@pytest.mark.parametrize("seed", range(12))
def test_group_rule_fields_match_both_rules(seed: int) -> None:
    """The two-level fields: λ̂ = min of plain CRC at α and the group rule at α_g = max(α, 2/(G+1)) on the exact
    grid, each rule's λ̂, which one bound it, α_g exactly, both corrected risks at λ̂ and both statements; with
    ``alpha`` the pure group rule's λ̂, guarantee and fields only.

    Planted bugs it catches (each tried): the corrected episode risk taken at the group rule's λ̂; group_alpha
    recorded as α; the pure rule given the two-level fields."""
    data = _corpus(80, seed)
    keys = [i % 9 for i in range(80)]  # G = 9: α_g = 1/5 at α = .1
    grid = crc.exact_grid(data.scores)
    chosen, risk, fields = group_rule(data, keys, 0.1, "task", two_level.AUTO)
    episodes = crc.carb_threshold_from_harm_levels(data.harm_level, grid, 0.1)
    grouped = group_crc.group_crc_threshold(data.harm_level, keys, grid, Fraction(1, 5))
    assert chosen.threshold == min(episodes, grouped) and chosen.rule == two_level.TWO_LEVEL_RULE
    assert (fields["threshold_episode_rule"], fields["threshold_group_rule"]) == (episodes, grouped)
    assert fields["bound_by"] == ("both" if episodes == grouped else "episodes" if episodes < grouped else "groups")
    assert (fields["group_alpha_exact"], fields["groups"], fields["group_alpha"]) == ("1/5", 9, 0.2)
    charged = int(np.count_nonzero(data.harm_level <= chosen.threshold))
    assert risk["calibration_risk"] == (charged + 1) / 81
    group_risk, _ = group_crc.group_calibration_risk(data.harm_level, keys, chosen.threshold)
    assert risk["group_calibration_risk"] == float(group_risk)
    assert risk["guarantee"] == two_level_guarantee("0.1", "0.2", 9)
    pure, pure_risk, pure_fields = group_rule(data, keys, 0.1, "task", two_level.SAME)
    assert pure.threshold == group_crc.group_crc_threshold(data.harm_level, keys, grid, 0.1)
    assert pure_risk["guarantee"] == GROUP_CRC_GUARANTEE and pure_fields == {"group_by": "task", "groups": 9}
