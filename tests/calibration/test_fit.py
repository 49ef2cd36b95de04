"""Tests of the fitted scorer (guard.calibration.fit) and the three-way protocol (guard.calibration.threeway)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from guard.calibration import fit, threeway
from guard.calibration.replay import EpisodeScores, assemble, score_episode
from guard.corpora.agentdojo import episode_ledger_labels, load_runs, load_suite_policy
from guard.errors import CalibrationError
from guard.features import DEFAULT_WEIGHTS, FEATURES
from guard.graph import build_graph
from guard.ledger import CATEGORIES, LedgerLabels
from guard.records import Trust

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agentdojo_runs"
F = len(FEATURES)


def _episode(i: int, features: np.ndarray, harm: tuple[int, ...], utility: bool) -> EpisodeScores:
    k = len(features)
    return EpisodeScores(
        episode_id=f"e{i}",
        scores=np.zeros(k),
        n_selected=np.ones(k, dtype=np.int64),
        n_prefix=np.arange(1, k + 1, dtype=np.int64),
        harm_steps=harm,
        category_steps={c: (harm[0] if harm and c == "privacy_flow" else None) for c in CATEGORIES},
        utility=utility,
        features=features.astype(bool),
        in_scope=np.ones(k, dtype=bool),
    )


def _planted(n: int, seed: int, signal: int = 0, noise: int = 1) -> list[EpisodeScores]:
    """Harmful steps always fire feature ``signal``; feature ``noise`` fires at random everywhere."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        x = np.zeros((3, F), dtype=bool)
        x[:, noise] = rng.random(3) < 0.5
        harmful = rng.random() < 0.3
        x[:, signal] = rng.random(3) < 0.05
        if harmful:
            x[2, signal] = True
        items.append(_episode(i, x, (2,) if harmful else (), utility=bool(rng.random() < 0.8)))
    return items


def test_fit_recovers_a_planted_signal() -> None:
    """The feature that marks harmful steps gets the largest weight; an uninformative one stays near 0."""
    corpus = assemble(_planted(400, seed=1))
    w = fit.fit_weights(corpus, np.arange(corpus.n))
    assert w[0] == w.max() and w[0] > 1.0
    assert w[1] < 0.2
    assert (w >= 0).all()


def test_fit_never_sees_calibration_or_test_episodes() -> None:
    """Permuting the labels and features of non-development episodes leaves the weights unchanged;
    permuting the development labels (negative control) changes them."""
    items = _planted(300, seed=2)
    dev = np.arange(0, 300, 3)
    corpus = assemble(items)
    w = fit.fit_weights(corpus, dev)
    rng = np.random.default_rng(7)
    others = [i for i in range(300) if i not in set(dev.tolist())]
    shuffled = list(items)
    donors = rng.permutation(others)
    for i, j in zip(others, donors, strict=True):  # swap harm labels, utility and features among non-dev episodes
        shuffled[i] = replace(
            items[i],
            harm_steps=items[j].harm_steps,
            utility=not items[j].utility,
            features=~items[j].features,
            category_steps=items[j].category_steps,
        )
    assert np.array_equal(fit.fit_weights(assemble(shuffled), dev), w)
    control = list(items)
    for i, j in zip(dev.tolist(), rng.permutation(dev).tolist(), strict=True):
        control[i] = replace(items[i], harm_steps=items[j].harm_steps, category_steps=items[j].category_steps)
    assert not np.array_equal(fit.fit_weights(assemble(control), dev), w)


@pytest.mark.parametrize("seed", [0, 1])
def test_rescore_equals_the_online_scorer(seed: int) -> None:
    """Oracle: re-scoring recorded features with random weights gives exactly the scores a Session with
    those weights computes (new features included)."""
    episodes = load_runs(FIXTURES).episodes
    rng = np.random.default_rng(seed)
    weights = fit.weight_mapping(np.round(rng.uniform(0, 1, F), 3))
    frozen = assemble([score_episode(load_suite_policy(e.meta.suite), e, episode_ledger_labels(e)) for e in episodes])
    online = assemble(
        [
            score_episode(fit.with_weights(load_suite_policy(e.meta.suite), weights), e, episode_ledger_labels(e))
            for e in episodes
        ]
    )
    again = fit.rescore(frozen, fit.weight_vector(weights))
    assert again.scores.tolist() == online.scores.tolist()
    assert again.harm_level.tolist() == online.harm_level.tolist()
    assert again.max_score.tolist() == online.max_score.tolist()
    assert np.isfinite(online.scores).any() and len(set(online.scores.tolist())) > 2


@pytest.mark.parametrize("seed", [0, 1])
def test_rescore_with_tool_identity_equals_the_online_scorer(seed: int) -> None:
    """Oracle: random weights on every feature and every tool identity column re-score exactly as a Session whose
    policy carries them as ``scorer.tool_weights`` (catches a tool column mis-ordered, dropped or added twice)."""
    episodes = load_runs(FIXTURES).episodes
    frozen = assemble([score_episode(load_suite_policy(e.meta.suite), e, episode_ledger_labels(e)) for e in episodes])
    columns = frozen.columns()
    assert len(columns) > F and len(set(frozen.tools)) == len(frozen.tools)
    rng = np.random.default_rng(seed)
    weights = fit.weight_mapping(np.round(rng.uniform(0, 1, len(columns)), 3), columns)
    online = assemble(
        [
            score_episode(fit.with_weights(load_suite_policy(e.meta.suite), weights), e, episode_ledger_labels(e))
            for e in episodes
        ]
    )
    again = fit.rescore(frozen, fit.weight_vector(weights, columns))
    assert again.scores.tolist() == online.scores.tolist()
    assert again.harm_level.tolist() == online.harm_level.tolist()


def test_fit_weighs_a_tool_that_marks_harm() -> None:
    """A tool whose calls are exactly the harmful steps gets the largest weight; without tool identity
    (``tools=False``) every tool weight is 0."""
    items = []
    for item in _planted(300, seed=5, signal=2, noise=1):
        tools = tuple("wire" if k in item.harm_steps else "read" for k in range(len(item.scores)))
        features = item.features.copy() if item.features is not None else None
        if features is not None:
            features[:, 2] = False
        items.append(replace(item, tools=tools, features=features))
    corpus = assemble(items)
    columns = corpus.columns()
    w = fit.weight_mapping(fit.fit_weights(corpus, np.arange(corpus.n)), columns)
    assert w["tool:wire"] == max(w.values()) and w["tool:wire"] > 1.0
    off = fit.weight_mapping(fit.fit_weights(corpus, np.arange(corpus.n), fit.FitSpec(tools=False)), columns)
    assert off["tool:wire"] == off["tool:read"] == 0.0


def test_split3_is_disjoint_and_sized() -> None:
    """Each permutation's development, calibration and test sets are disjoint, cover every episode, 30/35/35."""
    dev, cal, test = threeway.split3(200, 7, seed=1)
    assert (dev.shape[1], cal.shape[1], test.shape[1]) == (60, 70, 70)
    for d, c, t in zip(dev, cal, test, strict=True):
        assert sorted([*d, *c, *t]) == list(range(200))
    with pytest.raises(CalibrationError):
        threeway.split3(200, 1, 0, (0.5, 0.5, 0.1))


def test_fitted_protocol_loss_at_most_alpha() -> None:
    """With weights fitted on development episodes, held-out loss ≤ α + 3 SE (no slack) for every α."""
    corpus = assemble(_planted(600, seed=3))
    rows, _ = threeway.run_fitted_protocol(corpus, np.zeros(F), alphas=(0.05, 0.1), permutations=300, seed=0)
    fitted = [r for r in rows if r.method == "carb_gcarb_fit"]
    assert fitted
    for row in fitted:
        loss = row.metrics["loss"]
        assert loss.mean() <= row.alpha + 3 * loss.std() / np.sqrt(loss.size)
        assert row.metrics["harm_free_success"].mean() > 0


def test_fit_variant_without_a_feature_gives_it_no_weight() -> None:
    """An ablation variant fits weight 0 on the feature it leaves out."""
    name = next(iter(DEFAULT_WEIGHTS))
    corpus = assemble(_planted(200, seed=4, signal=FEATURES.index(name)))
    spec = threeway.ablation_variants()[f"fit_without_{name}"]
    assert fit.fit_weights(corpus, np.arange(200), spec)[FEATURES.index(name)] == 0.0
    assert fit.fit_weights(corpus, np.arange(200))[FEATURES.index(name)] > 0.5


def test_fitted_artifact_weights_are_used_and_a_mismatch_fails_closed(
    tmp_path: Path, policy_data: dict[str, Any]
) -> None:
    """Guard.from_policy scores with the artifact's fitted weights; loading it against the policy's own
    weights is an error that names `carbguard calibrate --fit-scorer`."""
    import json

    from guard import Guard
    from guard.artifact import build_artifact, load_artifact, write_artifact
    from guard.errors import ArtifactError
    from guard.policy import load_policy

    policy_data["calibration"] = {"artifact": "art.json"}
    (tmp_path / "p.json").write_text(json.dumps(policy_data))
    policy = load_policy(tmp_path / "p.json")
    weights = {**policy.scorer.weights.model_dump(), "severity_max": 0.7, "irreversible_sink": 0.0}
    weights["unrequested_action"] = 0.0  # no user turn asks for the send: keep the score to severity_max alone
    body = build_artifact(
        [fit.with_weights(policy, weights)],
        alpha=0.1,
        n=10,
        threshold=0.5,
        calibration_risk=0.1,
        grid=[-np.inf, 0.5],
        rule="carb",
        calibration_fingerprint="x",
        command="carbguard calibrate --fit-scorer",
        extra={"scorer_weights": weights},
    )
    write_artifact(body, tmp_path / "art.json")
    guard = Guard.from_policy(tmp_path / "p.json")
    assert guard.policy.scorer.weights.severity_max == 0.7
    decision = guard.session("s").decide("send_email", {"to": "a@b.io", "body": "hi"}, "c1")
    assert decision.score == pytest.approx(0.7)
    with pytest.raises(ArtifactError, match="--fit-scorer"):
        load_artifact(tmp_path / "art.json", policy)


def test_bad_fitted_weights_are_an_artifact_error(small_policy: object) -> None:
    """A negative or unknown fitted weight in an artifact is refused naming the file, never applied."""
    from guard.artifact import apply_fitted_weights
    from guard.errors import ArtifactError

    for weights in ({"canary": -1.0}, {"no_such_feature": 1.0}, {"canary": "x"}):
        with pytest.raises(ArtifactError, match=r"art\.json"):
            apply_fitted_weights({"scorer_weights": weights}, small_policy, "art.json")  # type: ignore[arg-type]
    assert apply_fitted_weights({}, small_policy, "art.json") is small_policy  # type: ignore[arg-type]


def test_evaluate_fixed_artifact_agrees_with_the_online_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Oracle: `evaluate --artifact` on a fitted artifact reports the share of episodes the online gate,
    with the artifact's weights and threshold, refuses on the risk budget."""
    import json

    from guard import Guard
    from guard.artifact import apply_fitted_weights, build_artifact, write_artifact
    from guard.calibration.replay import replay_decisions
    from guard.cli import main
    from guard.corpora.agentdojo import is_injection_goal_run
    from guard.decision import Reason

    episodes = [e for e in load_runs(FIXTURES).episodes if not is_injection_goal_run(e)]  # as `evaluate` loads them
    suites = sorted({e.meta.suite for e in episodes})
    weights = {**fit.weight_mapping(np.zeros(F)), "severity_max": 1.0, "injection_text": 0.4}
    policies = [fit.with_weights(load_suite_policy(s), weights) for s in suites]
    body = build_artifact(
        policies,
        alpha=0.2,
        n=10,
        threshold=0.5,
        calibration_risk=0.1,
        grid=[-np.inf, 0.5],
        rule="carb",
        calibration_fingerprint="x",
        command="carbguard calibrate --fit-scorer",
        extra={"scorer_weights": weights},
    )
    write_artifact(body, tmp_path / "art.json")
    assert main(["evaluate", "--runs", str(FIXTURES), "--artifact", str(tmp_path / "art.json"), "--json"]) == 0
    reported = json.loads(capsys.readouterr().out)
    stopped = []
    for e in episodes:
        policy = apply_fitted_weights(body, load_suite_policy(e.meta.suite), "art.json")
        decisions = replay_decisions(Guard(policy, threshold=0.5), e)
        stopped.append(any(d.reason is Reason.RISK_BUDGET for d in decisions))
    assert 0 < sum(stopped) < len(stopped)  # the oracle is not trivial on the fixtures
    assert reported["fitted_weights"] is True and reported["n_episodes"] == len(episodes)
    assert reported["intervention"] == pytest.approx(sum(stopped) / len(stopped))


def test_trusted_call_is_recorded_with_the_features_that_count() -> None:
    """A call whose every risky argument the user named leaves its data-flow features out of the score; replay
    records them as off, so re-scoring under any weights equals the online score (catches replay recording the
    raw features, which re-scores a trusted call too high)."""
    from guard.policy import parse_policy
    from guard.records import Episode, proposal, result, user
    from guard.scorer import DATAFLOW, WeightedScorer

    tools = {
        "read_contacts": {"kind": "private_source", "identifier_args": ["name"]},
        "send_email": {"kind": "sink", "effect": "irreversible", "payload_args": ["body"], "identifier_args": ["to"]},
    }
    policy = parse_policy({"name": "trusted-replay", "tools": tools})
    records = (
        user(0, "Write to bob@partner.test: the meeting moved to 3pm"),
        proposal(1, "read_contacts", {"name": "all"}, "c1"),
        result(2, "c1", "Contacts: bob@partner.test (Bob), carol@partner.test", Trust.TOOL_PRIVATE, "read_contacts"),
        proposal(3, "send_email", {"to": "bob@partner.test", "body": "the meeting moved to 3pm"}, "c2"),
    )
    episode = Episode("trusted", records)
    scored = assemble([score_episode(policy, episode, LedgerLabels())])
    assert scored.features is not None
    counted = dict(zip(FEATURES, scored.features[-1].tolist(), strict=True))
    graph = build_graph(policy, records)
    raw = WeightedScorer(policy).features(graph, 3, frozenset({0, 1, 2}))
    assert any(raw[name] for name in DATAFLOW)
    assert not any(counted[name] for name in DATAFLOW)
    weights = fit.weight_mapping(np.ones(F))
    online = assemble([score_episode(fit.with_weights(policy, weights), episode, LedgerLabels())])
    assert fit.rescore(scored, fit.weight_vector(weights)).scores.tolist() == online.scores.tolist()


def test_pooled_fit_counts_every_corpus() -> None:
    """Catches a pooled fit that reads only its first corpus, or one corpus's examples twice: two corpora whose
    development halves are disjoint fit as one corpus fitted on both halves, and one item equals fit_weights."""
    corpus = assemble(_planted(300, seed=3))
    table = fit.feature_table(corpus)
    first, second = np.arange(0, 150), np.arange(150, 300)
    both = fit.fit_weights(corpus, np.arange(300))
    pooled = fit.fit_weights_pooled([(corpus, table, first), (corpus, table, second)])
    assert np.allclose(pooled, both, atol=1e-5)
    assert not np.allclose(fit.fit_weights(corpus, first), both, atol=1e-3)
    assert np.array_equal(fit.fit_weights_pooled([(corpus, table, first)]), fit.fit_weights(corpus, first))
    with pytest.raises(CalibrationError, match="no corpus"):
        fit.fit_weights_pooled([])
