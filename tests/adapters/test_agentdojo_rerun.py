"""rerun_episode: an incompatible benchmark version warns; episode_injections is the mapping AgentDojo needs."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import pytest

pytest.importorskip("agentdojo")

from guard.adapters.agentdojo import (
    AgentDojoVersionWarning,
    compatible_versions,
    episode_injections,
    injection_candidates,
    rerun_episode,
)
from guard.corpora.agentdojo import load_runs
from guard.errors import CorpusError
from guard.records import Episode

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "agentdojo_runs_adapters"
OLD_PROMPT = "gpt-4o-2024-05-13/banking/user_task_1/important_instructions/injection_task_0"


@pytest.fixture(scope="module")
def episode() -> Episode:
    """A banking episode whose prompt matches v1..v1.1.2 only."""
    return next(e for e in load_runs(RUNS).episodes if e.episode_id == OLD_PROMPT)


def test_incompatible_version_warns(episode: Episode) -> None:
    """Re-running in a version whose task texts differ from the log warns and names the matching versions."""
    assert "v1.2.2" not in compatible_versions(episode)
    expected = r"v1\.2\.2.*matching: v1, v1\.1, v1\.1\.1, v1\.1\.2"
    # the re-run may also fail to pair payloads and vectors (CorpusError): the warning comes first
    with pytest.warns(AgentDojoVersionWarning, match=expected), contextlib.suppress(CorpusError):
        rerun_episode(episode, "v1.2.2")


def test_compatible_version_does_not_warn(episode: Episode) -> None:
    """A matching version re-runs without any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outcome = rerun_episode(episode, "v1")
    assert outcome.attacked


def test_episode_injections_maps_vectors_to_payloads(episode: Episode) -> None:
    """The mapping has the task's injection vectors as keys and the logged payloads as values."""
    mapping = episode_injections(episode, "v1")
    assert set(mapping) == set(injection_candidates("v1", "banking", "user_task_1")) and mapping
    assert set(mapping.values()) <= set(episode.meta.injections)
