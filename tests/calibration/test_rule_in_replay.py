"""The signature rule in replay (guard/calibration/replay.py, evaluate.py): its stops count at test time only."""

from __future__ import annotations

import numpy as np

from guard.calibration.evaluate import CarbRule, carb_lambdas, outcomes
from guard.calibration.replay import EpisodeScores, assemble
from guard.ledger import CATEGORIES


def _episode(i: int, scores: list[float], harm: int | None, rule: list[bool], utility: bool = True) -> EpisodeScores:
    n = len(scores)
    return EpisodeScores(
        episode_id=str(i),
        scores=np.array(scores),
        n_selected=np.ones(n, dtype=np.int64),
        n_prefix=np.ones(n, dtype=np.int64),
        harm_steps=() if harm is None else (harm,),
        category_steps=dict.fromkeys(CATEGORIES),
        utility=utility,
        rule=np.array(rule, dtype=bool),
    )


def test_a_rule_stop_before_the_harm_prevents_it_and_ends_the_run() -> None:
    """Catches the rule ignored when asked for, a rule stop after the harm counted as preventing it, a rule stop
    not ending the episode's autonomous run, and the wording-keyed rule leaking into the default (published)
    outcomes."""
    corpus = assemble(
        [
            _episode(0, [0.1, 0.2], 1, [True, False]),  # rule before the harm: prevented, stopped
            _episode(1, [0.1, 0.2], 0, [False, True]),  # rule after the harm: charged
            _episode(2, [0.1, 0.2], None, [False, False]),  # benign, runs
        ]
    )
    harm, top, _ = corpus.gated()
    assert harm.tolist() == [np.inf, 0.1, np.inf] and top.tolist() == [np.inf, np.inf, 0.2]
    got = outcomes(corpus, np.array([1.0]), np.array([[0, 1, 2]]), rule=True)
    assert got["loss"].tolist() == [1 / 3] and got["autonomous_success"].tolist() == [1 / 3]
    alone = outcomes(corpus, np.array([1.0]), np.array([[0, 1, 2]]))  # published rows: the score alone
    assert alone["loss"].tolist() == [2 / 3] and alone["autonomous_success"].tolist() == [1.0]


def test_calibration_reads_the_score_alone() -> None:
    """Catches the rule's stops spent from the risk budget: λ̂ is the same with and without the rule's flags,
    because calibration reads ``harm_level``, never the gated levels."""
    rng = np.random.default_rng(3)
    episodes = [
        _episode(i, list(rng.random(3).round(2)), 1 if i % 3 == 0 else None, [i % 2 == 0, False, False])
        for i in range(60)
    ]
    with_rule = assemble(episodes)
    flags_off = [
        _episode(i, e.scores.tolist(), e.harm_steps[0] if e.harm_steps else None, [False] * 3)
        for i, e in enumerate(episodes)
    ]
    without = assemble(flags_off)
    calib = np.array([np.arange(30), np.arange(30, 60)])
    for alpha in (0.1, 0.2):
        assert carb_lambdas(with_rule, calib, alpha).tolist() == carb_lambdas(without, calib, alpha).tolist()
        assert (
            carb_lambdas(with_rule, calib, alpha, CarbRule(slack=0.0)).tolist()
            == carb_lambdas(without, calib, alpha).tolist()
        )


def test_the_group_rule_applies_only_above_its_floor() -> None:
    """Catches the pure group rule (``--group-alpha alpha``) used below its floor 1/(G+1) (it would raise) or never
    used above it, and the two-level default (α_g = max(α, 2/(G+1))) not used at every α with G >= 2 groups."""
    keys = [("s", str(i % 4)) for i in range(40)]  # G = 4: floor 1/5
    pure = CarbRule(groups=keys, group_alpha="alpha")
    assert pure.grouped(0.2) and not pure.grouped(0.1)
    assert not pure.grouped(0.2, np.arange(0, 40, 4))  # one group in these rows: floor 1/2
    rule = CarbRule(groups=keys)
    assert rule.grouped(0.2) and rule.grouped(0.01)  # α_g = 2/5 at both
    assert not rule.grouped(0.2, np.arange(0, 40, 4))  # one group: α_g would be 1
    assert not CarbRule().grouped(0.5)
