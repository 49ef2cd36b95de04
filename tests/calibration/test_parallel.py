"""Tests of parallel scoring (guard.calibration.parallel): same arrays, bit for bit, in the same order."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from guard.calibration.jobs import load_corpus, policy_for
from guard.calibration.parallel import episode_from_wire, episode_to_wire, score_parallel, score_selectors_rows
from guard.calibration.replay import ScoredCorpus, assemble, score_episode, score_episode_selectors
from guard.corpora import agentdojo
from guard.errors import CalibrationError
from guard.records import Episode

SELECTORS = ("gcarb", "random_equal_size")


@pytest.fixture(scope="module")
def episodes() -> list[Episode]:
    """Forty embedded AgentDojo episodes, ten from each suite (sinks, SafeCommit, injections)."""
    corpus = load_corpus(None, "gpt-4o-2024-05-13")
    out: list[Episode] = []
    for suite in ("banking", "slack", "travel", "workspace"):
        out += [e for e in corpus.episodes if e.meta.suite == suite][:10]
    return out


@pytest.fixture(scope="module")
def reference(episodes: list[Episode]) -> ScoredCorpus:
    """The single-process result the parallel runs must reproduce."""
    pick = policy_for("gcarb")
    return assemble([score_episode(pick(e), e, agentdojo.episode_ledger_labels(e)) for e in episodes])


def assert_identical(a: ScoredCorpus, b: ScoredCorpus) -> None:
    """Every field equal, arrays equal in dtype, shape and bytes."""
    assert a.episode_ids == b.episode_ids
    for field in dataclasses.fields(ScoredCorpus):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), field.name
        elif isinstance(x, dict):
            assert x.keys() == y.keys()
            assert all(x[k].tobytes() == y[k].tobytes() for k in x), field.name
    assert a.fingerprint() == b.fingerprint()


def test_wire_round_trip_is_equal_and_picklable(episodes: list[Episode]) -> None:
    """An episode survives episode_to_wire → pickle → episode_from_wire unchanged."""
    for episode in episodes:
        back = episode_from_wire(pickle.loads(pickle.dumps(episode_to_wire(episode))))
        assert back == episode


def test_one_worker_equals_single_process(episodes: list[Episode], reference: ScoredCorpus) -> None:
    """workers=1 scores in this process and gives the reference arrays."""
    ticks: list[int] = []
    out = score_parallel(episodes, policy_for("gcarb"), agentdojo.episode_ledger_labels, progress=ticks.append)
    assert_identical(out, reference)
    assert ticks[-1] == len(episodes)


def test_spawned_processes_equal_single_process(episodes: list[Episode], reference: ScoredCorpus) -> None:
    """Two spawned processes, small chunks, lambdas for policy_for: identical arrays in order."""
    ticks: list[int] = []
    out = score_parallel(
        episodes,
        policy_for("gcarb"),
        lambda e: agentdojo.episode_ledger_labels(e),
        workers=2,
        chunk=7,
        progress=ticks.append,
        mp_context="spawn",
    )
    assert_identical(out, reference)
    assert ticks == sorted(ticks) and ticks[-1] == len(episodes)


def test_several_selectors_equal_single_process(episodes: list[Episode]) -> None:
    """score_selectors_rows in two processes equals one score_episode_selectors pass per episode, per selector, in
    order (catches rows of one selector filed under another, or episodes out of order across chunks)."""
    pick = policy_for(SELECTORS[0])
    rows = [score_episode_selectors(pick(e), SELECTORS, e, agentdojo.episode_ledger_labels(e)) for e in episodes]
    out = score_selectors_rows(episodes, pick, agentdojo.episode_ledger_labels, SELECTORS, workers=2, chunk=16)
    for name in SELECTORS:
        assert_identical(assemble([r[name] for r in out]), assemble([r[name] for r in rows]))


def test_dask_local_cluster_equals_single_process(episodes: list[Episode], reference: ScoredCorpus) -> None:
    """A LocalCluster's scheduler address gives the reference arrays (skipped without dask)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None, silence_logs=50
    ) as cluster:
        out = score_parallel(
            episodes,
            policy_for("gcarb"),
            agentdojo.episode_ledger_labels,
            dask_scheduler=cluster.scheduler_address,
            chunk=9,
        )
    assert_identical(out, reference)


@pytest.mark.parametrize("bad", [{"workers": 0}, {"workers": 1.5}, {"chunk": 0}, {"workers": True}])
def test_bad_workers_or_chunk_is_a_calibration_error(episodes: list[Episode], bad: dict[str, object]) -> None:
    """workers and chunk must be positive integers."""
    with pytest.raises(CalibrationError, match="positive integer"):
        score_parallel(episodes[:2], policy_for("gcarb"), agentdojo.episode_ledger_labels, **bad)  # type: ignore[arg-type]


def test_empty_corpus_gives_an_empty_corpus() -> None:
    """No episodes: an empty ScoredCorpus, with or without a pool."""
    for workers in (1, 2):
        out = score_parallel([], policy_for("gcarb"), agentdojo.episode_ledger_labels, workers=workers)
        assert out.n == 0 and out.scores.size == 0
