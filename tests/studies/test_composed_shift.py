"""The composed gate under shift (guard/studies/composed_shift.py): stops, composition, rows, probe answers."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from guard.calibration.kappa import calibration_episodes
from guard.corpora.reword import STYLES
from guard.decision import ProbeCall
from guard.records import Episode, Record
from guard.runtime import Guard
from guard.studies.composed_shift import (
    PROBE,
    RUNS,
    Decider,
    Replay,
    Stops,
    compose,
    composed_shift_study,
    replay_corpus,
)

KAPPA = 1.25


@pytest.fixture(scope="module")
def episodes() -> list[Episode]:
    """Forty gpt-4o episodes of the banking and slack suites (attacked and benign)."""
    found = [e for e in calibration_episodes("gpt-4o-2024-05-13") if e.meta.suite in ("banking", "slack")]
    return found[:: max(len(found) // 40, 1)][:40]


@pytest.fixture(scope="module")
def replayed(episodes: list[Episode]) -> tuple[Replay, Decider]:
    guards: dict[str, Guard] = {}
    return replay_corpus(episodes, guards, "test", False), Decider(guards, None)


def _by_hand(replay: Replay, decider: Decider, lam: float) -> tuple[list[bool], list[str]]:
    """Each episode's loss at λ and what stopped it first, walking its proposals in order."""
    loss, first = [], []
    for r in replay.replayed:
        codes = {p.ordinal: decider.code(r, p, KAPPA, "probe_stop") for p in r.proposals}
        harm = set(r.scores.harm_steps)
        what, hit = "", False
        for k, score in enumerate(r.scores.scores):
            if score > lam:
                what = "score"
                break
            if codes.get(k, RUNS) != RUNS:
                what = "probe" if codes[k] == PROBE else "safecommit"
                break
            if k in harm:
                hit = True
                break
        loss.append(hit)
        first.append(what)
    return loss, first


def test_the_composed_gate_stops_where_a_walk_through_each_episode_stops(replayed: tuple[Replay, Decider]) -> None:
    """Catches the vectorised stop attribution and composed loss disagreeing with the protocol read step by step:
    a SafeCommit stop dated one proposal late or early (the running max up to it, inclusive), a stop the score
    makes first credited to SafeCommit, an episode without a SafeCommit stop counted as one at λ = +inf, a probe
    not told from the other refusals, or a SafeCommit refusal that does not stop the episode."""
    replay, decider = replayed
    composed = compose(replay, decider, KAPPA, "probe_stop")
    finite = np.unique(replay.scored.scores[np.isfinite(replay.scored.scores)])
    test = np.arange(replay.scored.n)[None, :]
    assert np.isfinite(composed.sc_level).any() and composed.sc_probe.any()
    for lam in [-math.inf, *finite.tolist(), math.inf]:
        loss, first = _by_hand(replay, decider, lam)
        stops = Stops().plus(replay.scored, composed, np.array([lam]), test)
        assert stops.score == first.count("score")
        assert stops.safecommit == first.count("probe") + first.count("safecommit")
        assert stops.probe == first.count("probe")
        level = composed.scored.harm_level
        assert np.array_equal(np.isfinite(level) & (level <= lam), np.array(loss)), lam
        assert stops.alone == int((replay.scored.max_score > lam).sum())


def test_every_registered_rewording_style_is_a_row_and_unanswerable_probes_stay_stops(
    episodes: list[Episode],
) -> None:
    """Catches a study that lists its rewording styles itself (a style registered in guard.corpora.reword must
    appear without touching the study), the composed gate losing more than the score alone (it executes a subset),
    and an answerer that runs nothing changing any verdict (the probe then stays a stop, as online)."""

    def nothing(_: Episode) -> Any:
        def answer(_: ProbeCall) -> Record | None:
            return None

        return answer

    result = composed_shift_study(
        "test", (0.10,), permutations=4, folds=(2,), episodes=episodes, answers=nothing, answers_name="nothing"
    )
    assert [n for n in result["rows"] if n.startswith("reworded: ")] == [f"reworded: {s}" for s in STYLES]
    assert result["probes_run"] == 0
    for row in result["rows"].values():
        cell = row["0.1"]
        assert cell["probe_stop"] == cell["probe_answered"]
        assert cell["probe_stop"]["loss"] <= cell["alone"]["loss"] + 1e-12
        assert cell["probe_stop"]["stopped"] >= cell["alone"]["stopped"] - 1e-12


def test_the_cli_runs_the_study_with_probes_answered_in_agentdojo(
    episodes: list[Episode], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a broken ``carbguard safecommit study --shift`` as a user runs it (on forty episodes here): the
    probe-answering environment not reaching the study, a --folds row missing, and the shift-only options
    accepted without --shift (they would be silently ignored)."""
    pytest.importorskip("agentdojo")
    import guard.calibration.kappa as kappa_module
    import guard.studies.composed_shift as study
    from guard.cli import main

    monkeypatch.setattr(study, "calibration_episodes", lambda model: episodes)
    monkeypatch.setattr(kappa_module, "calibration_episodes", lambda model: episodes)
    argv = ["safecommit", "study", "--shift", "--alpha", "0.1", "--permutations", "3", "--folds", "2"]
    assert main([*argv, "--probe-answers", "agentdojo", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["probe_answers"] == "AgentDojo's environment" and body["probes_run"] > 0
    assert set(body["modes"]) == {"probe_stop", "probe_answered"} and "leave-one-goal-out, 2 folds" in body["rows"]
    assert main(argv) == 0
    assert "probes answered: not measured" in capsys.readouterr().out
    assert main(["safecommit", "study", "--folds", "2"]) == 2
    assert "options of --shift" in capsys.readouterr().err
