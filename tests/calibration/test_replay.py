"""Tests of replay: scores once per episode, shadow selectors equal separate sessions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from guard import Guard
from guard.calibration.replay import assemble, replay_decisions, score_episode, score_episode_selectors
from guard.corpora.agentdojo import episode_ledger_labels, load_runs, load_suite_policy
from guard.records import Episode

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agentdojo_runs"
SELECTORS = ("gcarb", "full_prefix", "fixed_window", "ledger_current", "random_equal_size")


@pytest.fixture(scope="module")
def episodes() -> tuple[Episode, ...]:
    """The real AgentDojo fixture episodes."""
    return load_runs(FIXTURES).episodes


def test_shadow_selectors_equal_separate_sessions(episodes: tuple[Episode, ...]) -> None:
    """One pass scoring five selectors gives each selector's scores and selection sizes of its own session."""
    for episode in episodes:
        policy = load_suite_policy(episode.meta.suite)
        multi = score_episode_selectors(policy, SELECTORS, episode, episode_ledger_labels(episode))
        for name in SELECTORS:
            decisions = replay_decisions(Guard(policy.with_selector(name), threshold=float("inf")), episode)
            scores = [np.inf if d.score is None else d.score for d in decisions]
            assert multi[name].scores.tolist() == scores, (episode.episode_id, name)
            assert multi[name].n_selected.tolist() == [len(d.selected) for d in decisions]


def test_harm_level_is_running_max_at_first_harm(episodes: tuple[Episode, ...]) -> None:
    """An episode's harm level is its running-max score at its first ledger event (+inf without one)."""
    items = [
        score_episode(load_suite_policy(e.meta.suite), e, episode_ledger_labels(e)) for e in episodes
    ]
    corpus = assemble(items)
    for i, item in enumerate(items):
        if item.harm_steps:
            assert corpus.harm_level[i] == np.maximum.accumulate(item.scores)[item.harm_steps[0]]
        else:
            assert np.isinf(corpus.harm_level[i])


def test_replay_never_sees_the_future(episodes: tuple[Episode, ...]) -> None:
    """Every decision's selected records lie strictly before its proposal."""
    for episode in episodes:
        guard = Guard(load_suite_policy(episode.meta.suite), threshold=float("inf"))
        for decision in replay_decisions(guard, episode):
            assert all(i < decision.proposal_index for i in decision.selected)
