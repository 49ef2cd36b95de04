"""The shift report: its rows against direct replay, its held-out splits, and the command."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from guard.calibration import crc
from guard.calibration.evaluate import CarbRule, split_indices
from guard.calibration.jobs import Corpus, load_corpus, score_selectors
from guard.calibration.replay import EpisodeScores, ScoredCorpus, assemble, feed
from guard.cli import main
from guard.corpora import agentdojo
from guard.ledger import CATEGORIES, Ledger
from guard.records import Episode
from guard.runtime import Guard
from guard.stages import PassThroughCertifier
from guard.studies import shift
from guard.studies._shift_reworded import reword_all

FIXTURE_RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "agentdojo_runs"


@cache
def _tiny() -> Corpus:
    """Forty gpt-4o episodes of the banking suite, attacked and benign."""
    corpus = load_corpus(None, "gpt-4o-2024-05-13")
    banking = [e for e in corpus.episodes if e.meta.suite == "banking"]
    return Corpus("tiny", banking[::3][:40], 0)


def _direct_loss(episode: Episode, threshold: float) -> bool:
    """Whether the episode, replayed through a guard at ``threshold``, executes a harmful proposal before a stop."""
    policy = agentdojo.load_suite_policy(episode.meta.suite).with_selector("gcarb")
    off = policy.scorer.model_copy(update={"signature_rule": "off"})  # the report's rows: the score alone
    guard = Guard(policy.model_copy(update={"scorer": off}), threshold=threshold, certifier=PassThroughCertifier())
    decisions = feed(guard.session("direct"), episode)
    stop = next((k for k, d in enumerate(decisions) if not d.allowed), len(decisions))
    events = Ledger(policy, agentdojo.episode_ledger_labels(episode)).trace(episode).events
    first = next((k for k, e in enumerate(events) if e), None)
    return first is not None and first < stop


def test_reworded_row_at_fixed_lambda_equals_direct_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches a reworded row read off the original scores (or off episodes out of order with the splits): at a
    fixed lambda_hat its loss must equal a guard replaying the reworded test episodes one by one, and a reworded
    copy whose scores are planted to differ must move the reworded row, not the ``as is`` row."""
    corpus = _tiny()
    reworded, _ = reword_all(corpus.episodes, "email_forward")
    levels = score_selectors(corpus.episodes, ["gcarb"])[0]["gcarb"].harm_level
    threshold = float(np.unique(levels[np.isfinite(levels)])[0])
    _, test = split_indices(len(corpus.episodes), 3, 0)
    direct = np.mean([[_direct_loss(reworded[i], threshold) for i in row] for row in test], axis=1).mean()
    original = np.mean([[_direct_loss(corpus.episodes[i], threshold) for i in row] for row in test], axis=1).mean()
    monkeypatch.setattr(shift, "lambdas", lambda data, rows, *_: np.full(rows.shape[0], threshold))
    report = shift.shift_report(corpus, alphas=(0.5,), permutations=3, styles=["email_forward"], folds=2)
    assert report["rows"]["reworded: email_forward"]["0.5"]["loss"] == pytest.approx(direct)
    assert report["rows"]["as is"]["0.5"]["loss"] == pytest.approx(original)
    real = shift.reworded_corpus

    def planted(*args: object, **kwargs: object) -> object:
        scored, counts = real(*args, **kwargs)  # type: ignore[arg-type]
        return {k: replace(v, harm_level=np.zeros(v.n)) for k, v in scored.items()}, counts

    monkeypatch.setattr(shift, "reworded_corpus", planted)
    report = shift.shift_report(corpus, alphas=(0.5,), permutations=3, styles=["email_forward"], folds=2)
    assert report["rows"]["reworded: email_forward"]["0.5"]["loss"] == pytest.approx(1.0)
    assert report["rows"]["as is"]["0.5"]["loss"] == pytest.approx(original)


def _groups() -> list[tuple[str, str]]:
    return shift.group_keys(load_corpus(None, "all").episodes)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_leave_one_goal_out_never_calibrates_on_a_test_goal(seed: int) -> None:
    """Catches a leak: a held-out goal's episode in the calibration set, a benign episode on both sides, or an
    attacked episode tested in no fold or in two."""
    groups = _groups()
    splits = shift.goal_splits(groups, 5, np.random.default_rng(seed))
    assert len(splits) == 5
    tested = np.zeros(len(groups), dtype=np.int64)
    for calib, test in splits:
        held = {groups[i] for i in test if groups[i][1] != "none"}
        assert held and not held & {groups[i] for i in calib}
        assert not set(calib.tolist()) & set(test.tolist())
        tested[test] += 1
    attacked = np.array([g[1] != "none" for g in groups])
    assert (tested[attacked] == 1).all()  # each attacked episode in exactly one test fold
    benign = tested[~attacked]  # the benign test half: in every fold's test set, never calibrated on
    assert set(benign.tolist()) == {0, len(splits)} and abs(2 * (benign > 0).sum() - benign.size) <= 1


def test_leave_one_model_out_tests_an_unseen_model() -> None:
    """Catches a held-out model whose episodes reach the calibration set, or a model left untested."""
    episodes = load_corpus(None, "all").episodes
    splits = shift.model_splits(episodes)
    assert sorted(splits) == sorted(agentdojo.EMBEDDED_MODELS)
    for model, (calib, test) in splits.items():
        assert {episodes[i].meta.model for i in test} == {model}
        assert model not in {episodes[i].meta.model for i in calib}
        assert len(calib) + len(test) == len(episodes)
    assert shift.model_splits(_tiny().episodes) == {}


def _synthetic_scores(n: int = 40) -> ScoredCorpus:
    """Episodes of three proposals with distinct random scores, every other one harmful at its second step."""
    rng = np.random.default_rng(7)
    return assemble(
        [
            EpisodeScores(
                episode_id=str(i),
                scores=rng.random(3),
                n_selected=np.ones(3, dtype=np.int64),
                n_prefix=np.ones(3, dtype=np.int64),
                harm_steps=(1,) if i % 2 else (),
                category_steps=dict.fromkeys(CATEGORIES),
                utility=True,
            )
            for i in range(n)
        ]
    )


def test_group_rule_is_called_with_the_groups() -> None:
    """Catches the group rule fed the wrong harm levels, keys or grid (it must be the calibration rows' own exact
    grid, not the whole corpus's): with one group per episode it is plain CRC on each row; an unknown rule is
    lowered by a slack, never raised."""
    scored = _synthetic_scores()
    owner = np.repeat(np.arange(scored.n), 3)
    calib, _ = split_indices(scored.n, 6, 0)
    own = [(str(i), "x") for i in range(scored.n)]
    group = shift.lambdas(scored, calib, 0.2, CarbRule(groups=own))
    direct = [
        crc.carb_threshold_from_harm_levels(
            scored.harm_level[rows], crc.exact_grid(scored.scores[np.isin(owner, rows)]), 0.2
        )
        for rows in calib
    ]
    assert group.tolist() == direct == shift.lambdas(scored, calib, 0.2, CarbRule()).tolist()
    slack = shift.lambdas(scored, calib, 0.2, CarbRule(groups=own, slack=0.5))
    assert (slack <= group).all() and (slack < group).any()


def test_cli_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a broken --shift command: the table with every row kind and the worst line, the JSON, the plot."""
    base = ["evaluate", "--shift", "--runs", str(FIXTURE_RUNS), "--alpha", "0.5", "--permutations", "3"]
    assert main([*base, "--plot", str(tmp_path / "shift.png")]) == 0
    out = capsys.readouterr().out
    for needle in ("as is", "reworded: lowercase_chat", "reworded: worst", "leave-one-goal-out", "worst row:"):
        assert needle in out
    assert "leave-one-model-out: gpt-4o-2024-05-13" in out
    assert (tmp_path / "shift.png").stat().st_size > 1000
    assert main([*base, "--json", "--group-by", "injection_task", "--utility-slack", "0.05"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["rule"]["utility_slack"] == 0.05 and body["rule"]["groups"] >= 2
    assert body["reworded"]["plain_note"]["left_unchanged"] == 0
    assert {"as is", "leave-one-goal-out"} <= set(body["rows"]) and body["worst"]["0.5"] in body["rows"]


def test_cli_folds_reach_leave_one_goal_out(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches ``evaluate --shift --folds K`` not reaching the report (leave-one-goal-out on half the goals is how
    the group rule is measured at small G, docs/calibrate.md#small-groups) and --folds accepted without --shift."""
    base = ["evaluate", "--shift", "--runs", str(FIXTURE_RUNS), "--alpha", "0.5", "--permutations", "3", "--json"]
    assert main([*base, "--folds", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["folds"] == 2
    assert main(["evaluate", "--runs", str(FIXTURE_RUNS), "--folds", "2"]) == 2
    assert "--folds is an option of --shift" in capsys.readouterr().err


def test_reworded_rows_listed_worst_first() -> None:
    """Catches a report that lists the rewording rows in registry order (the worst family then hides among
    thirteen rows) or that moves a row of another kind: the reworded rows come by highest loss over α first,
    every other row keeps its place."""
    cell = {"0.05": {"loss": 0.0}, "0.1": {"loss": 0.0}}
    body = {
        "as is": cell,
        "reworded: a": {"0.05": {"loss": 0.01}, "0.1": {"loss": 0.02}},
        "reworded: b": {"0.05": {"loss": 0.09}, "0.1": {"loss": 0.01}},
        "reworded: c": {"0.05": {"loss": 0.03}, "0.1": {"loss": 0.04}},
        "leave-one-goal-out": cell,
    }
    order = shift.worst_first(body, "reworded: ", (0.05, 0.1))
    assert order == ["as is", "reworded: b", "reworded: c", "reworded: a", "leave-one-goal-out"]
