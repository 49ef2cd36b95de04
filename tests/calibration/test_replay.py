"""Tests of replay: scores once per episode, shadow selectors equal separate sessions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from guard import Guard
from guard.calibration.replay import (
    assemble,
    replay_decisions,
    replay_session_id,
    score_episode,
    score_episode_selectors,
)
from guard.corpora.agentdojo import episode_ledger_labels, load_runs, load_suite_policy
from guard.decision import Reason
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
            guard = Guard(policy.with_selector(name), threshold=float("inf"))
            decisions = replay_decisions(guard, episode, replay_session_id(episode))
            scores = [np.inf if d.score is None else d.score for d in decisions]
            assert multi[name].scores.tolist() == scores, (episode.episode_id, name)
            assert multi[name].n_selected.tolist() == [len(d.selected) for d in decisions]


def test_harm_level_is_where_the_online_gate_starts_to_let_the_harm_through(episodes: tuple[Episode, ...]) -> None:
    """Oracle: the online gate at λ = harm level lets every step up to the first harm pass the threshold,
    and at the next float below it refuses one of them on the risk budget (+inf without a harm step)."""
    items = [score_episode(load_suite_policy(e.meta.suite), e, episode_ledger_labels(e)) for e in episodes]
    corpus = assemble(items)
    checked = 0
    for i, (episode, item) in enumerate(zip(episodes, items, strict=True)):
        if not item.harm_steps:
            assert corpus.harm_level[i] == np.inf
            continue
        level, k = float(corpus.harm_level[i]), item.harm_steps[0]
        policy = load_suite_policy(episode.meta.suite)
        at = replay_decisions(Guard(policy, threshold=level), episode)[: k + 1]
        below = replay_decisions(Guard(policy, threshold=float(np.nextafter(level, -np.inf))), episode)[: k + 1]
        assert all(d.reason is not Reason.RISK_BUDGET for d in at)
        assert any(d.reason is Reason.RISK_BUDGET for d in below)
        checked += 1
    assert checked > 0


def _future_violations(guard: Guard, episodes: tuple[Episode, ...]) -> tuple[int, int]:
    """(decisions that selected a record at or after their proposal or failed closed, non-empty selections)."""
    bad = nonempty = 0
    for episode in episodes:
        for decision in replay_decisions(guard, episode):
            nonempty += bool(decision.selected)
            future = any(i >= decision.proposal_index for i in decision.selected)
            bad += decision.reason is Reason.INTERNAL_ERROR or future
    return bad, nonempty


def test_replay_never_sees_the_future(episodes: tuple[Episode, ...]) -> None:
    """Every decision selects only earlier records, with no fail-closed error hiding a future selection.

    Not vacuous: selections are non-empty, and a planted selector that returns the proposal's own
    node (which makes the pipeline fail closed with ``selected=()``) is caught by the same check.
    """
    total_bad = total_nonempty = 0
    for suite in sorted({e.meta.suite for e in episodes}):
        mine = tuple(e for e in episodes if e.meta.suite == suite)
        bad, nonempty = _future_violations(Guard(load_suite_policy(suite), threshold=float("inf")), mine)
        total_bad += bad
        total_nonempty += nonempty
    assert total_bad == 0
    assert total_nonempty > 0

    class Peeking:
        def select(self, graph: object, node: int, episode_id: str) -> list[int]:
            return [node]

    suite = episodes[0].meta.suite
    planted = Guard(load_suite_policy(suite), threshold=float("inf"), selector=Peeking())  # type: ignore[arg-type]
    bad, _ = _future_violations(planted, tuple(e for e in episodes if e.meta.suite == suite))
    assert bad > 0


def test_replay_session_id_carries_no_episode_label(episodes: tuple[Episode, ...]) -> None:
    """Calibration scoring seeds the random selector from a session id that does not depend on the
    episode id (which names the attack): renaming an episode changes none of its scores."""
    from dataclasses import replace

    episode = episodes[0]
    renamed = replace(episode, episode_id=episode.episode_id + "/injection_task_9")
    assert replay_session_id(renamed) == replay_session_id(episode)
    assert episode.episode_id not in replay_session_id(episode)
    for original in episodes:
        policy = load_suite_policy(original.meta.suite)
        labels = episode_ledger_labels(original)
        pair = (original, replace(original, episode_id="renamed/" + original.episode_id))
        scored = [score_episode_selectors(policy, ("gcarb", "random_equal_size"), e, labels) for e in pair]
        assert scored[0]["random_equal_size"].scores.tolist() == scored[1]["random_equal_size"].scores.tolist()
