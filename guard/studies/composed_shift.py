"""The composed gate under shift: the calibrated score alone beside score + SafeCommit (docs/studies.md).

The shift report (:mod:`guard.studies.shift`) measures the score alone.  Here the same rows are measured
for the run-time gate, score plus SafeCommit, on the same episodes:

1. Every ``user_task_*`` episode (one embedded model, or all) is replayed through ``Session`` as the
   SafeCommit study replays it (:func:`~guard.studies.safecommit_agentdojo.study_guard`: suite policy,
   signature rule off, threshold +inf), then every registered rewording style of
   :data:`guard.corpora.reword.STYLES` (reworded as the shift report rewords, :func:`reword_all`; a
   benign episode's rewording is itself and is not replayed twice).
2. Rows as the shift report's: ``as is`` (seeded 50/50 splits), ``reworded: STYLE`` (the same
   calibration halves, the test halves reworded), ``leave-one-goal-out`` (5 seeded goal folds, and 2:
   calibration on half the goals, G about 20 groups on the pooled corpus), ``leave-one-model-out: MODEL``.
3. On each calibration set: λ̂ of the shift rule (the group rule over goals, the utility slack) on the
   G-CARB scores, and κ (:func:`~guard.calibration.kappa.kappa_from_cases`) on its episodes' SafeCommit
   cases, in the original wording.  Nothing of a test set enters either.
4. At κ every side-effectful proposal gets SafeCommit's decision, two ways.  ``probe = stop``: the first
   decision; a logged run holds no answer to a probe, so ``probe`` stops the episode like ``defer``,
   ``escalate`` and ``abstain``.  ``probes answered`` (when an answerer is given, e.g. AgentDojo's
   environment, :mod:`guard.adapters._agentdojo_probes`): the probes run and the proposal is decided
   again, as the adapter's flow does online (:meth:`PolicyCertifier.decide_answered`).  The composed
   score is the G-CARB score, +inf where SafeCommit does not certify; λ̂ stays the score's, so the
   composed gate executes a subset of what the score alone executes.
5. Per row and α: loss, harm-free ratio (harm-free success over no guard's), and for the test episodes
   what stopped each first: the score, a SafeCommit probe, or another SafeCommit refusal.  Then the
   composed gate once more with λ̂ calibrated by the same rule on its own loss (``..._own_lambda``): the
   loss of the frozen pipeline score + SafeCommit at κ, monotone in λ, so the rule applies to it as is.

What replay leaves out: a probe's result is not added to the episode, so later proposals are scored as
logged; an executed probe is a new read-only call the gate would decide (taken as allowed).

Run: ``carbguard safecommit study --shift [--model M] [--alpha A ...] [--probe-answers none|agentdojo]``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from guard.calibration.evaluate import CarbRule, split_indices
from guard.calibration.group_crc import episode_group_keys
from guard.calibration.kappa import Case, calibration_episodes, kappa_from_cases
from guard.calibration.replay import assemble
from guard.calibration.slack import DEFAULT_SLACK
from guard.corpora.reword import STYLES
from guard.errors import CalibrationError
from guard.progress import Progress
from guard.records import Episode
from guard.runtime import Guard
from guard.safecommit.conformal import SmallCalibrationWarning
from guard.studies._composed_gate import (
    MODES,
    PROBE,
    RUNS,
    Answers,
    Composed,
    Decider,
    Replay,
    Stops,
    Sums,
    compose,
)
from guard.studies._composed_report import format_composed as format_composed
from guard.studies._shift_reworded import reword_all
from guard.studies.safecommit_agentdojo import Replayed, replay_episode, study_guard
from guard.studies.shift import goal_splits, group_keys, lambdas, model_splits

# --------------------------------------------------------------------------- the study


Rows = dict[str, dict[float, Sums]]
Cache = dict[tuple[int, float, str], Composed]


@dataclass(frozen=True)
class Setting:
    """What every row shares."""

    original: Replay
    reworded: dict[str, Replay]
    cases: tuple[tuple[Case, ...], ...]
    groups: list[tuple[str, str]]
    episodes: Sequence[Episode]
    rule: CarbRule
    decider: Decider
    modes: tuple[str, ...]


def _kappa(s: Setting, calib: np.ndarray, alpha: float) -> float:
    cases = [c for i in calib.tolist() for c in s.cases[i]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallCalibrationWarning)
        return kappa_from_cases(cases, alpha)


@dataclass
class Calibrated:
    """One α on calibration sets (rows of ``calib``, original wording): the score's λ̂ and κ per set, and λ̂ of
    the composed gate's own loss per (κ, mode), computed when first asked for."""

    calib: np.ndarray
    alpha: float
    lam: np.ndarray
    kappas: np.ndarray
    tuned: dict[tuple[float, str], np.ndarray] = field(default_factory=dict)

    def tuned_lambdas(self, s: Setting, kappa: float, mode: str, rows: np.ndarray, cache: Cache) -> np.ndarray:
        """λ̂ of the rule on the composed gate's loss at ``kappa`` in ``mode``, for the sets ``rows``."""
        key = (kappa, mode)
        if key not in self.tuned:
            lam = np.full(self.calib.shape[0], np.nan)
            mine = np.flatnonzero(self.kappas == kappa)
            lam[mine] = lambdas(
                _composed(s, s.original, kappa, mode, cache).scored, self.calib[mine], self.alpha, s.rule
            )
            self.tuned[key] = lam
        return np.asarray(self.tuned[key][rows], dtype=np.float64)


def _calibrate(s: Setting, calib: np.ndarray, alpha: float) -> Calibrated:
    """λ̂ and κ for each calibration set (a row of ``calib``), in the original wording."""
    kappas = np.array([_kappa(s, row, alpha) for row in calib])
    return Calibrated(calib, alpha, lambdas(s.original.scored, calib, alpha, s.rule), kappas)


def _composed(s: Setting, target: Replay, kappa: float, mode: str, cache: Cache) -> Composed:
    key = (id(target), kappa, mode)
    if key not in cache:
        cache[key] = compose(target, s.decider, kappa, mode)
    return cache[key]


def _measure(s: Setting, target: Replay, cal: Calibrated, test: np.ndarray, sums: Sums, cache: Cache) -> Sums:
    """Add the test sets ``test`` of ``target`` at the calibration sets' λ̂ and κ (``cal``)."""
    for kappa in sorted(set(cal.kappas.tolist())):
        rows = np.flatnonzero(cal.kappas == kappa)
        composed = {mode: _composed(s, target, kappa, mode, cache) for mode in s.modes}
        tuned = {mode: cal.tuned_lambdas(s, kappa, mode, rows, cache) for mode in s.modes}
        sums = sums.plus(target.scored, composed, cal.lam[rows], test[rows], tuned)
    return sums


def _split_rows(s: Setting, alphas: Sequence[float], permutations: int, seed: int, cache: Cache) -> Rows:
    calib, test = split_indices(s.original.scored.n, permutations, seed)
    rows: Rows = {"as is": {}, **{f"reworded: {name}": {} for name in s.reworded}}
    for alpha in alphas:
        calibrated = _calibrate(s, calib, alpha)
        rows["as is"][alpha] = _measure(s, s.original, calibrated, test, Sums(), cache)
        for name, target in s.reworded.items():
            rows[f"reworded: {name}"][alpha] = _measure(s, target, calibrated, test, Sums(), cache)
    return rows


def goal_row_name(folds: int) -> str:
    """The row of leave-one-goal-out on ``folds`` goal folds (5: the shift report's own row)."""
    return "leave-one-goal-out" if folds == 5 else f"leave-one-goal-out, {folds} folds"


def _goal_rows(
    s: Setting, alphas: Sequence[float], folds: int, repeats: int, seed: int, cache: Cache, tick: Callable[[int], None]
) -> tuple[Rows, list[int]]:
    """The row of ``folds`` goal folds, and the number of calibration groups G of each calibration set."""
    sums = dict.fromkeys(alphas, Sums())
    groups: list[int] = []
    for r in range(repeats):
        for calib, test in goal_splits(s.groups, folds, np.random.default_rng([seed, r])):
            groups.append(len({s.groups[i] for i in calib.tolist()}))
            for alpha in alphas:
                calibrated = _calibrate(s, calib[None, :], alpha)
                sums[alpha] = _measure(s, s.original, calibrated, test[None, :], sums[alpha], cache)
        tick(r + 1)
    return {goal_row_name(folds): sums}, groups


def _model_rows(s: Setting, alphas: Sequence[float], cache: Cache) -> Rows:
    return {
        f"leave-one-model-out: {model}": {
            alpha: _measure(s, s.original, _calibrate(s, calib[None, :], alpha), test[None, :], Sums(), cache)
            for alpha in alphas
        }
        for model, (calib, test) in model_splits(s.episodes).items()
    }


def replay_corpus(
    episodes: Sequence[Episode],
    guards: dict[str, Guard],
    label: str,
    progress: bool,
    reuse: dict[int, Replayed] | None = None,
) -> Replay:
    """Replay ``episodes`` (an episode object found in ``reuse`` is not replayed again)."""
    out: list[Replayed] = []
    with Progress(len(episodes), label, enabled=progress) as tick:
        for i, episode in enumerate(episodes, start=1):
            found = (reuse or {}).get(id(episode))
            if found is None:
                suite = episode.meta.suite
                guard = guards.get(suite) or guards.setdefault(suite, study_guard(suite))
                found = replay_episode(guard, episode)
            out.append(found)
            tick(i)
    return Replay(tuple(out), assemble([r.scores for r in out]))


def composed_shift_study(
    model: str = "all",
    alphas: Sequence[float] = (0.05, 0.10),
    *,
    permutations: int = 200,
    seed: int = 0,
    folds: Sequence[int] = (5, 2),
    styles: Sequence[str] | None = None,
    slack: float = DEFAULT_SLACK,
    answers: Answers | None = None,
    answers_name: str = "",
    progress: bool = False,
    episodes: Sequence[Episode] | None = None,
) -> dict[str, Any]:
    """The study of the module docstring, as JSON (``format_composed`` prints it).

    ``folds``: one leave-one-goal-out row per number of goal folds (``ceil(permutations / K)`` seeded fold
    assignments each; 2 folds calibrate on half the goals); ``styles``: the rewording styles (default: every
    registered one); ``answers``: how probes are answered
    (None: log replay only, ``probe = stop``); ``answers_name`` says what answers them, for the report;
    ``episodes``: these instead of the embedded ``model``'s (tests).
    """
    if permutations < 1 or not folds or min(folds) < 1:
        raise CalibrationError("permutations and every number of goal folds must be >= 1")
    names = tuple(STYLES) if styles is None else tuple(styles)
    episodes = calibration_episodes(model) if episodes is None else episodes
    if len(episodes) < 2:
        raise CalibrationError(f"model {model!r}: {len(episodes)} episodes; the study needs at least 2")
    guards: dict[str, Guard] = {}
    original = replay_corpus(episodes, guards, f"{model}: episodes replayed", progress)
    mine = {id(e): r for e, r in zip(episodes, original.replayed, strict=True)}
    reworded: dict[str, Replay] = {}
    counts: dict[str, dict[str, int]] = {}
    for name in names:
        texts, report = reword_all(episodes, name, seed)
        reworded[name] = replay_corpus(texts, guards, f"{model}: reworded {name}", progress, reuse=mine)
        counts[name] = {
            "episodes_changed": sum(1 for a, b in zip(episodes, texts, strict=True) if a is not b),
            "injected_texts": report.n_texts,
            "left_unchanged": report.n_left,
        }
    keys = episode_group_keys(episodes, "injection_task")
    modes = MODES if answers is not None else MODES[:1]
    setting = Setting(
        original,
        reworded,
        tuple(r.cases for r in original.replayed),
        group_keys(episodes),
        episodes,
        CarbRule(groups=keys, slack=slack),
        Decider(guards, answers),
        modes,
    )
    cache: Cache = {}
    rows = _split_rows(setting, alphas, permutations, seed, cache)
    goal_folds: dict[str, dict[str, int]] = {}
    for k in dict.fromkeys(folds):
        repeats = -(-permutations // k)
        with Progress(repeats, f"{model}: leave-one-goal-out, {k} folds", enabled=progress) as tick:
            found, groups = _goal_rows(setting, alphas, k, repeats, seed, cache, tick)
        rows |= found
        goal_folds[str(k)] = {"repeats": repeats, "groups_min": min(groups), "groups_max": max(groups)}
    rows |= _model_rows(setting, alphas, cache)
    table = {name: {f"{a:g}": sums[a].summary() for a in alphas} for name, sums in rows.items()}
    return {
        "model": model,
        "episodes": len(episodes),
        "side_effectful": sum(len(r.proposals) for r in original.replayed),
        "internal_errors": sum(r.errors for r in original.replayed)
        + sum(r.errors for rw in reworded.values() for r in rw.replayed if id(r.episode) not in mine),
        "alphas": [float(a) for a in alphas],
        "rule": setting.rule.describe(alphas),
        "permutations": permutations,
        "goal_folds": goal_folds,
        "seed": seed,
        "modes": list(modes),
        "probe_answers": answers_name if answers is not None else None,
        "probes_run": setting.decider.probes_run,
        "reworded": counts,
        "rows": table,
    }


__all__ = [
    "MODES",
    "PROBE",
    "RUNS",
    "Composed",
    "Decider",
    "Replay",
    "Stops",
    "compose",
    "composed_shift_study",
    "format_composed",
    "goal_row_name",
    "replay_corpus",
]
