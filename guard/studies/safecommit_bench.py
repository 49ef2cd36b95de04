"""SafeCommitBench-Controlled (docs/safecommit.md): generator, frozen splits, methods, tables.

Each episode has 3–6 candidate worlds, one true world, 3 actions, a nonconformity score per
world, a safety map Γ and deterministic identity probes ("is world j the true one?").

**Scores.**  A world's score is the sum of four non-negative components — provenance/age,
cross-evidence inconsistency, disagreement with current tool output, policy incompatibility —
each drawn ``Gamma(shape=2, mean=m)`` with means set by (family, role).  Roles: the true world,
at most one *deceptive* decoy, and plain decoys.  Plain decoys score high in every family; the
deceptive decoy is what makes a family hard:

- ``stale``: the true world is the current state; half the episodes resurface an old record
  with fresh-looking provenance (a deceptive decoy slightly above the true world);
- ``conflicting``: two records conflict; the deceptive decoy scores like the true world;
- ``poisoned``: an injected record gives its world strong support (lower mean than the true
  world, which takes a modest penalty from the contradiction);
- ``authorization_drift``: memory of the old authorization scores low; the true (current) world
  takes a policy-incompatibility penalty.

**Safety map.**  Every world has a primary action (safe) and each other action is safe with
probability 0.25.  The deceptive decoy's primary action differs from the true world's with a
family-specific probability.  Weights (for probe values only) are ``exp(-score)``.

**Methods** (all see the same episodes and support): ``single_world`` acts on the lowest-score
world; ``generic_one_probe`` asks about one random retained world, then acts on the best
remaining hypothesis; ``conflict_abstention`` falls back when the two best scores are closer
than a margin (the median gap on the train split); ``safecommit_no_probe`` certifies or falls
back; ``safecommit`` probes by expected certificate shrinkage.  A commit is *safe* if the chosen
action is in Γ(true world); task success = safe commit.  Nothing here is tuned to a target
number: the constants below were written down from the family descriptions, once.

**Frozen splits** (``guard/data/safecommit_bench/{train,validation,calibration,test}.jsonl.gz``,
protocol seed 0; ``carbguard data safecommit-bench --write DIR`` regenerates them byte
for byte).  One JSON object per line: ``id``, ``family``, ``actions`` (name, reward,
severity_penalty, reversible), ``worlds`` (name ``w<slot>``, facts, score, weight), ``safe``
(world -> safe action names), ``probes`` (name ``is_w<slot>``, cost, outcomes world -> yes/no),
``true_world``.  Facts: every ``stale`` world has ``evidence = pending``; an
``authorization_drift`` world where the first action is unsafe has ``authority = missing``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from guard.errors import CorpusError
from guard.safecommit.certificate import certified_actions, choose_action
from guard.safecommit.conformal import conformal_threshold, retained_mask
from guard.safecommit.probes import best_blocked_action, expected_shrinkage, filter_by_outcome, select_probe
from guard.studies._safecommit_bench_data import ACTION_NAMES as ACTION_NAMES
from guard.studies._safecommit_bench_data import BASE_SEED as BASE_SEED
from guard.studies._safecommit_bench_data import DATA_DIR as DATA_DIR
from guard.studies._safecommit_bench_data import DEFAULT_ETA as DEFAULT_ETA
from guard.studies._safecommit_bench_data import FAMILIES as FAMILIES
from guard.studies._safecommit_bench_data import (
    IDENTITY,
    stream_rng,
)
from guard.studies._safecommit_bench_data import MAX_WORLDS as MAX_WORLDS
from guard.studies._safecommit_bench_data import METHODS as METHODS
from guard.studies._safecommit_bench_data import PENALTY as PENALTY
from guard.studies._safecommit_bench_data import REVERSIBLE as REVERSIBLE
from guard.studies._safecommit_bench_data import REWARD as REWARD
from guard.studies._safecommit_bench_data import SPLIT_SIZES as SPLIT_SIZES
from guard.studies._safecommit_bench_data import SPLITS as SPLITS
from guard.studies._safecommit_bench_data import UTILITY as UTILITY
from guard.studies._safecommit_bench_data import BoolArray as BoolArray
from guard.studies._safecommit_bench_data import Episodes as Episodes
from guard.studies._safecommit_bench_data import FloatArray as FloatArray
from guard.studies._safecommit_bench_data import IntArray as IntArray
from guard.studies._safecommit_bench_data import Row as Row
from guard.studies._safecommit_bench_data import generate as generate
from guard.studies._safecommit_bench_data import split_episodes as split_episodes
from guard.studies._safecommit_bench_io import episode_problem as episode_problem
from guard.studies._safecommit_bench_io import episode_records as episode_records
from guard.studies._safecommit_bench_io import read_split as read_split
from guard.studies._safecommit_bench_io import split_bytes as split_bytes
from guard.studies._safecommit_bench_io import write_splits as write_splits

# Component means [family, role (true, deceptive, plain), component (age, inconsistency, tool, policy)].


# --- frozen JSONL -------------------------------------------------------------------------------


# --- methods ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """Per-episode result of one method: action committed (-1 = fallback), unsafe?, probes used."""

    action: IntArray
    unsafe: BoolArray
    probes: IntArray

    @property
    def committed(self) -> BoolArray:
        return np.asarray(self.action >= 0, dtype=np.bool_)


def _act_on(eps: Episodes, world: IntArray, commit: BoolArray, probes: IntArray) -> Outcome:
    """Commit the best action of ``world``'s safe set where ``commit``."""
    rows = np.arange(len(eps))
    action = choose_action(eps.gamma[rows, world], UTILITY)
    return _outcome(eps, np.where(commit, action, -1), probes)


def _outcome(eps: Episodes, action: IntArray, probes: IntArray) -> Outcome:
    rows = np.arange(len(eps))
    unsafe = (action >= 0) & ~eps.gamma[rows, eps.true, np.maximum(action, 0)]
    return Outcome(np.asarray(action, dtype=np.intp), unsafe, np.asarray(probes, dtype=np.intp))


def _argmin(scores: FloatArray) -> IntArray:
    return np.asarray(np.argmin(scores, axis=1), dtype=np.intp)


def _none(eps: Episodes) -> IntArray:
    return np.zeros(len(eps), dtype=np.intp)


def single_world(eps: Episodes) -> Outcome:
    """Act on the lowest-score world of the support."""
    return _act_on(eps, _argmin(eps.scores), np.ones(len(eps), np.bool_), _none(eps))


def conflict_abstention(eps: Episodes, margin: float) -> Outcome:
    """Single-world, but fall back when the two best scores differ by less than ``margin``."""
    two = np.sort(eps.scores, axis=1)[:, :2]
    return _act_on(eps, _argmin(eps.scores), (two[:, 1] - two[:, 0]) >= margin, _none(eps))


def conflict_margin(train: Episodes) -> float:
    """The median gap between the two best scores on the train split."""
    two = np.sort(train.scores, axis=1)[:, :2]
    return float(np.median(two[:, 1] - two[:, 0]))


def generic_one_probe(eps: Episodes, kappa: float, rng: np.random.Generator) -> Outcome:
    """Probe one random retained world; act on it if confirmed, else on the best remaining one."""
    rows = np.arange(len(eps))
    retained = eps.present & retained_mask(eps.scores, kappa)
    asked = retained.any(axis=1)
    pick = np.argmax(np.where(retained, rng.random(retained.shape), -1.0), axis=1)
    confirmed = asked & (pick == eps.true)
    left = retained.copy()
    left[rows, pick] &= ~asked
    pool = np.where(left.any(axis=1, keepdims=True), left, eps.present)
    pool[rows, pick] &= ~asked
    world = np.where(confirmed, pick, _argmin(np.where(pool, eps.scores, np.inf)))
    return _act_on(eps, world, np.ones(len(eps), np.bool_), np.asarray(asked, dtype=np.intp))


def safecommit(eps: Episodes, kappa: float, budget: int, eta: float = DEFAULT_ETA) -> Outcome:
    """The controller of :mod:`guard.safecommit.controller`, run on all episodes at once."""
    retained = eps.present & retained_mask(eps.scores, kappa)
    used = _none(eps)
    active = np.ones(len(eps), np.bool_)
    costs = np.ones(MAX_WORLDS)
    for _ in range(budget):
        active &= choose_action(certified_actions(eps.gamma, retained), UTILITY) < 0
        blocked = best_blocked_action(eps.gamma, retained, eps.weights, UTILITY)
        shrink = expected_shrinkage(eps.gamma, retained, eps.weights, IDENTITY, blocked)
        probe = select_probe(shrink, costs, eta)
        active &= probe >= 0
        if not active.any():
            break
        seen = filter_by_outcome(retained, IDENTITY, np.maximum(probe, 0), (probe == eps.true).astype(np.intp))
        retained = np.where(active[:, None], seen, retained)
        used += active
    return _outcome(eps, choose_action(certified_actions(eps.gamma, retained), UTILITY), used)


def drop_true_world(eps: Episodes, beta: float, rng: np.random.Generator) -> Episodes:
    """Remove the true world from the support with probability ``beta`` (support-miss study)."""
    rows = np.arange(len(eps))
    miss = np.zeros_like(eps.present)
    miss[rows, eps.true] = rng.random(len(eps)) < beta
    return replace(
        eps,
        present=eps.present & ~miss,
        scores=np.where(miss, np.inf, eps.scores),
        weights=np.where(miss, 0.0, eps.weights),
    )


# --- protocol -----------------------------------------------------------------------------------


def metrics(out: Outcome, mask: BoolArray | None = None) -> dict[str, float]:
    """UCR, task success, commit coverage, fallback rate and mean probes over ``mask``."""
    m = np.ones(out.committed.size, np.bool_) if mask is None else mask
    committed, unsafe = out.committed[m], out.unsafe[m]
    return {
        "ucr": float(unsafe.mean()),
        "task_success": float((committed & ~unsafe).mean()),
        "commit_coverage": float(committed.mean()),
        "fallback_rate": float(1.0 - committed.mean()),
        "mean_probes": float(out.probes[m].mean()),
    }


def _concat(outs: Sequence[Outcome]) -> Outcome:
    return Outcome(*(np.concatenate([getattr(o, f) for o in outs]) for f in ("action", "unsafe", "probes")))


def _methods(
    eps: Episodes, kappa: float, margin: float, budget: int, eta: float, rng: np.random.Generator
) -> dict[str, Outcome]:
    return {
        "single_world": single_world(eps),
        "generic_one_probe": generic_one_probe(eps, kappa, rng),
        "conflict_abstention": conflict_abstention(eps, margin),
        "safecommit_no_probe": safecommit(eps, kappa, 0, eta),
        "safecommit": safecommit(eps, kappa, budget, eta),
    }


@dataclass(frozen=True)
class Protocol:
    """The settings of one :func:`run_bench` call (see its signature for the defaults)."""

    n_cal: int
    n_test: int
    n_train: int
    alpha: float
    budget: int
    eta: float
    alphas: tuple[float, ...]
    budgets: tuple[int, ...]
    betas: tuple[float, ...]
    base_seed: int


def _seed_outcomes(seed: int, pr: Protocol) -> tuple[IntArray, dict[tuple[str, Any], Outcome]]:
    """Every table's per-episode outcomes for one protocol seed, and the test families."""
    cal = split_episodes("calibration", pr.n_cal, seed=seed, base_seed=pr.base_seed)
    test = split_episodes("test", pr.n_test, seed=seed, base_seed=pr.base_seed)
    margin = conflict_margin(split_episodes("train", pr.n_train, seed=seed, base_seed=pr.base_seed))
    q = cal.scores[np.arange(len(cal)), cal.true]
    kappa = {a: conformal_threshold(q, a) for a in {pr.alpha, *pr.alphas}}
    probe_rng = stream_rng(pr.base_seed, seed, "generic_probe")
    miss_rng = stream_rng(pr.base_seed, seed, "support_miss")
    out: dict[tuple[str, Any], Outcome] = {}
    for name, res in _methods(test, kappa[pr.alpha], margin, pr.budget, pr.eta, probe_rng).items():
        out["main", name] = res
    for b in pr.budgets:
        out["budget", b] = safecommit(test, kappa[pr.alpha], b, pr.eta)
    for a in pr.alphas:
        out["alpha", a] = safecommit(test, kappa[a], pr.budget, pr.eta)
    for beta in pr.betas:
        missed = drop_true_world(test, beta, miss_rng)
        for name, res in _methods(missed, kappa[pr.alpha], margin, pr.budget, pr.eta, probe_rng).items():
            out["beta", (beta, name)] = res
    return test.family, out


def run_bench(
    seeds: int | Sequence[int] = 10,
    *,
    n_cal: int = 2000,
    n_test: int = 4000,
    n_train: int = 2000,
    alpha: float = 0.05,
    budget: int = 2,
    eta: float = DEFAULT_ETA,
    alphas: Sequence[float] = (0.01, 0.05, 0.10),
    budgets: Sequence[int] = (0, 1, 2, 3, 4),
    betas: Sequence[float] = (0.05, 0.10),
    base_seed: int = BASE_SEED,
) -> dict[str, list[Row]]:
    """The protocol of docs/safecommit.md: main, per-family, probe-budget, α and support-miss tables.

    Per seed: κ from the calibration split's true-world scores, the conflict margin from the train
    split, every method on the same test split.  Rates are pooled over seeds (equal sizes, so
    the pooled rate is the mean of the per-seed rates).
    """
    pr = Protocol(n_cal, n_test, n_train, alpha, budget, eta, tuple(alphas), tuple(budgets), tuple(betas), base_seed)
    seed_list = list(range(seeds) if isinstance(seeds, int) else seeds)
    if not seed_list:
        raise CorpusError(f"run_bench needs at least one seed, got {seeds!r}")
    runs = [_seed_outcomes(s, pr) for s in seed_list]
    fam = np.concatenate([f for f, _ in runs])
    out = {key: _concat([o[key] for _, o in runs]) for key in runs[0][1]}
    return {
        "main": [{"method": m, **metrics(out["main", m])} for m in METHODS],
        "families": [
            {"family": f, "method": m, **metrics(out["main", m], fam == i)}
            for i, f in enumerate(FAMILIES)
            for m in METHODS
        ],
        "budget": [{"method": "safecommit", "budget": b, **metrics(out["budget", b])} for b in budgets],
        "alpha": [{"method": "safecommit", "alpha": a, **metrics(out["alpha", a])} for a in alphas],
        "support_miss": [{"beta": b, "method": m, **metrics(out["beta", (b, m)])} for b in betas for m in METHODS],
    }


_METRICS = ("ucr", "task_success", "commit_coverage", "fallback_rate", "mean_probes")


def _table(title: str, rows: Sequence[Row], lead: Sequence[str]) -> str:
    head = [*lead, "UCR", "TS", "CC", "FR", "probes"]
    body = [
        [str(r[k]) for k in lead] + [f"{100 * r[k]:.1f}%" for k in _METRICS[:4]] + [f"{r['mean_probes']:.2f}"]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" if i < len(lead) else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join([title, fmt.format(*head), *(fmt.format(*row) for row in body)])


def format_tables(result: Mapping[str, Sequence[Row]]) -> str:
    """The five tables of :func:`run_bench` as readable text."""
    return "\n\n".join(
        [
            _table("Main (alpha, budget as run)", result["main"], ["method"]),
            _table("Per family", result["families"], ["family", "method"]),
            _table("Probe budget (safecommit)", result["budget"], ["budget"]),
            _table("Target level alpha (safecommit)", result["alpha"], ["alpha"]),
            _table("Support miss (true world dropped with prob. beta)", result["support_miss"], ["beta", "method"]),
        ]
    )


__all__ = [
    "BASE_SEED",
    "DATA_DIR",
    "FAMILIES",
    "METHODS",
    "SPLITS",
    "SPLIT_SIZES",
    "Episodes",
    "Outcome",
    "Protocol",
    "conflict_abstention",
    "conflict_margin",
    "drop_true_world",
    "episode_problem",
    "episode_records",
    "format_tables",
    "generate",
    "generic_one_probe",
    "metrics",
    "read_split",
    "run_bench",
    "safecommit",
    "single_world",
    "split_bytes",
    "split_episodes",
    "write_splits",
]
