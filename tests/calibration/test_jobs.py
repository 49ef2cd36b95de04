"""Scoring jobs (guard.calibration.jobs): each episode replayed once per process, arrays unchanged by reuse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from guard.calibration import jobs, parallel
from guard.calibration.replay import ScoredCorpus
from guard.corpora.agentdojo import load_runs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agentdojo_runs"
FIELDS = ("scores", "cummax", "n_selected", "harm_level", "max_score", "features", "in_scope", "tool_ids", "offsets")


def _same(a: ScoredCorpus, b: ScoredCorpus) -> None:
    assert a.episode_ids == b.episode_ids and a.tools == b.tools
    for name in FIELDS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = parallel.score_selectors_rows

    def spy(episodes: Any, *args: Any, **kwargs: Any) -> Any:
        episodes = list(episodes)
        calls.append(len(episodes))
        return real(episodes, *args, **kwargs)

    monkeypatch.setattr(parallel, "score_selectors_rows", spy)
    return calls


def test_pooled_corpus_reuses_each_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scoring two parts, then their concatenation, replays no episode twice and gives the arrays of a fresh
    scoring (catches reuse keyed wrongly, rows put back out of order, or a reused episode replayed again)."""
    monkeypatch.setattr(jobs, "_SCORED", {})
    episodes = list(load_runs(FIXTURES).episodes)
    assert len(episodes) >= 4
    half = len(episodes) // 2
    calls = _counting(monkeypatch)
    jobs.score_selectors(episodes[half:], jobs.SELECTOR_NAMES)
    jobs.score_selectors(episodes[:half], jobs.SELECTOR_NAMES)
    pooled, _ = jobs.score_selectors(episodes, jobs.SELECTOR_NAMES)
    assert calls == [len(episodes) - half, half, 0]
    gcarb, _ = jobs.score_selectors(episodes, ["gcarb"])
    assert calls[-1] == 0
    monkeypatch.setattr(jobs, "_SCORED", {})
    fresh, _ = jobs.score_selectors(episodes, jobs.SELECTOR_NAMES)
    for name in jobs.SELECTOR_NAMES:
        _same(pooled[name], fresh[name])
    _same(gcarb["gcarb"], fresh["gcarb"])


def test_equal_but_distinct_episodes_are_replayed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reuse is by episode object: a second load of the same runs is replayed again (never matched by id)."""
    monkeypatch.setattr(jobs, "_SCORED", {})
    calls = _counting(monkeypatch)
    first = list(load_runs(FIXTURES).episodes)
    second = list(load_runs(FIXTURES).episodes)
    jobs.score_selectors(first, ["gcarb"])
    jobs.score_selectors(second, ["gcarb"])
    assert calls == [len(first), len(second)]


def test_embedded_pooled_corpus_holds_the_model_episodes() -> None:
    """The pooled embedded corpus is the per-model corpora's episode objects, in model order."""
    from guard.corpora.agentdojo import EMBEDDED_MODELS

    one = jobs.load_corpus(None, EMBEDDED_MODELS[1])
    pooled = jobs.load_corpus(None, "all")
    ids = {id(e) for e in pooled.episodes}
    assert all(id(e) in ids for e in one.episodes)
    assert len(pooled.episodes) > len(one.episodes)


def test_agentdojo_corpus_object_reuses_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Passing the AgentDojo corpus itself (as ``evaluate`` does) still reuses scores; an episodes-file corpus
    (its own policies and labels) never does."""
    monkeypatch.setattr(jobs, "_SCORED", {})
    episodes = list(load_runs(FIXTURES).episodes)
    corpus = jobs.Corpus(name="fixture", episodes=episodes, n_dropped=0)
    calls = _counting(monkeypatch)
    jobs.score_selectors(episodes, ["gcarb"], corpus=corpus)
    jobs.score_selectors(episodes, ["gcarb"], corpus=corpus)
    assert calls == [len(episodes), 0]
