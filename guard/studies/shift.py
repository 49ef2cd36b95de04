"""The shift report: does the calibrated guard's loss hold when the attacks, goals or model change?

Every row calibrates λ̂ of G-CARB (the ``crc`` rule, or the ``group_crc`` rule over (suite, goal)
groups) on one set of episodes and reads the declared-ledger loss and the harm-free success, relative
to no guard's on the same test episodes, on another (docs/shift.md):

- ``as is``: seeded 50/50 splits of the corpus, as ``carbguard evaluate``;
- ``reworded: STYLE``: λ̂ of the same calibration halves, tested on the test halves with every
  injected text reworded in STYLE (:mod:`guard.corpora.reword`); then their worst;
- ``leave-one-goal-out``: the (suite, injection task) goals in K seeded folds; calibrate on the other
  folds' attacked episodes plus half the benign ones, test on the fold's plus the other benign half;
- ``leave-one-model-out: MODEL`` (corpora of several models): calibrate on the other models, test on MODEL.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from guard.calibration.evaluate import CarbRule, carb_lambdas, outcomes, split_indices, ungated
from guard.calibration.group_crc import episode_group_keys
from guard.calibration.jobs import Corpus, score_selectors
from guard.calibration.replay import ScoredCorpus
from guard.calibration.slack import DEFAULT_SLACK
from guard.calibration.two_level import AUTO, GroupAlpha
from guard.errors import CalibrationError
from guard.policy import SelectorName
from guard.progress import Progress
from guard.records import Episode
from guard.studies._shift_report import format_shift as format_shift
from guard.studies._shift_reworded import reworded_corpus

SHIFT_ALPHAS: tuple[float, ...] = (0.05, 0.10)
SELECTOR: SelectorName = "gcarb"


def group_keys(episodes: Sequence[Episode]) -> list[tuple[str, str]]:
    """Each episode's goal: (suite, injection task), or (suite, "none") for a benign episode (the group rule's
    ``injection_task`` key)."""
    return [cast("tuple[str, str]", key) for key in episode_group_keys(episodes, "injection_task")]


def lambdas(corpus: ScoredCorpus, calib: np.ndarray, alpha: float, rule: CarbRule) -> np.ndarray:
    """λ̂ for each row of ``calib`` (``(R, m)`` episode indices) under ``rule``, as ``carbguard calibrate`` sets it."""
    return carb_lambdas(corpus, calib, alpha, rule)


@dataclass(frozen=True, slots=True)
class Cell:
    """Sums over tested sets: loss, harm-free success, and no guard's, each a mean per set, summed."""

    loss: float = 0.0
    harm_free: float = 0.0
    noguard_loss: float = 0.0
    noguard_harm_free: float = 0.0
    sets: int = 0
    n_test: int = 0

    def plus(self, corpus: ScoredCorpus, lam: np.ndarray, test: np.ndarray, rule: bool = False) -> Cell:
        """Add the test sets ``test`` (``(R, m)``) at thresholds ``lam`` (``(R,)``); ``rule``: with the signature
        rule's stops."""
        got, none = outcomes(corpus, lam, test, rule), ungated(corpus, test)
        return Cell(
            self.loss + float(got["loss"].sum()),
            self.harm_free + float(got["harm_free_success"].sum()),
            self.noguard_loss + float(none["loss"].sum()),
            self.noguard_harm_free + float(none["harm_free_success"].sum()),
            self.sets + test.shape[0],
            self.n_test + test.size,
        )

    def summary(self) -> dict[str, float]:
        """Means over the sets; harm-free ratio = harm-free success / no guard's."""
        k = max(self.sets, 1)
        base = self.noguard_harm_free / k
        return {
            "loss": self.loss / k,
            "harm_free_ratio": (self.harm_free / k) / base if base else float("nan"),
            "noguard_loss": self.noguard_loss / k,
            "n_test": self.n_test / k,
        }


# --------------------------------------------------------------------------- protocols


def goal_folds(groups: Sequence[tuple[str, str]], k: int, rng: np.random.Generator) -> dict[tuple[str, str], int]:
    """Attacked goals (groups whose task is not "none") into ``min(k, #goals)`` seeded folds."""
    goals = sorted({g for g in groups if g[1] != "none"})
    order = rng.permutation(len(goals))
    folds = max(min(k, len(goals)), 1)
    return {goals[j]: position % folds for position, j in enumerate(order)}


def goal_splits(
    groups: Sequence[tuple[str, str]], k: int, rng: np.random.Generator
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(calib, test)`` index arrays per fold: a fold's goals only in its test set; benign split 50/50."""
    fold_of = goal_folds(groups, k, rng)
    benign = np.array([i for i, g in enumerate(groups) if g not in fold_of], dtype=np.int64)
    benign = benign[rng.permutation(benign.size)]
    half = benign.size // 2
    fold = np.array([fold_of.get(g, -1) for g in groups])
    out = []
    for f in sorted(set(fold_of.values())):
        calib = np.concatenate([benign[:half], np.flatnonzero((fold >= 0) & (fold != f))])
        test = np.concatenate([benign[half:], np.flatnonzero(fold == f)])
        out.append((np.sort(calib), np.sort(test)))
    return out


def model_splits(episodes: Sequence[Episode]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Model → (the other models' episodes, its own): empty when the corpus holds one model."""
    models = np.array([e.meta.model for e in episodes])
    names = sorted(set(models.tolist()))
    if len(names) < 2:
        return {}
    return {m: (np.flatnonzero(models != m), np.flatnonzero(models == m)) for m in names}


@dataclass(frozen=True, slots=True)
class Setting:
    """What every row shares: the scored corpora, the groups, α values, rule and seeds."""

    scored: ScoredCorpus
    reworded: dict[str, ScoredCorpus]
    groups: list[tuple[str, str]]
    episodes: Sequence[Episode]
    alphas: tuple[float, ...]
    rule: CarbRule
    permutations: int
    seed: int
    folds: int
    repeats: int
    gate: bool = False
    """Whether the signature rule's stops count at test time (the ablation's variant only)."""


Rows = dict[str, dict[float, Cell]]


def split_rows(s: Setting) -> Rows:
    """``as is`` and each ``reworded: STYLE`` on the same seeded 50/50 splits and λ̂."""
    calib, test = split_indices(s.scored.n, s.permutations, s.seed)
    rows: Rows = {"as is": {}, **{f"reworded: {name}": {} for name in s.reworded}}
    for alpha in s.alphas:
        lam = lambdas(s.scored, calib, alpha, s.rule)
        rows["as is"][alpha] = Cell().plus(s.scored, lam, test, s.gate)
        for name, data in s.reworded.items():
            rows[f"reworded: {name}"][alpha] = Cell().plus(data, lam, test, s.gate)
    return rows


def goal_rows(s: Setting, tick: Callable[[int], None] | None = None) -> Rows:
    """``leave-one-goal-out``: ``repeats`` seeded fold assignments, mean over folds and repeats."""
    cells = dict.fromkeys(s.alphas, Cell())
    for r in range(s.repeats):
        for calib, test in goal_splits(s.groups, s.folds, np.random.default_rng([s.seed, r])):
            for alpha in s.alphas:
                lam = lambdas(s.scored, calib[None, :], alpha, s.rule)
                cells[alpha] = cells[alpha].plus(s.scored, lam, test[None, :], s.gate)
        if tick is not None:
            tick(r + 1)
    return {"leave-one-goal-out": cells}


def model_rows(s: Setting) -> Rows:
    """``leave-one-model-out: MODEL`` per model of the corpus (none for a one-model corpus)."""
    rows: Rows = {}
    for model, (calib, test) in model_splits(s.episodes).items():
        rows[f"leave-one-model-out: {model}"] = {
            alpha: Cell().plus(s.scored, lambdas(s.scored, calib[None, :], alpha, s.rule), test[None, :], s.gate)
            for alpha in s.alphas
        }
    return rows


def _worst(rows: dict[str, dict[str, Any]], prefix: str, alphas: Sequence[float]) -> dict[str, Any] | None:
    """The row of highest loss among those named ``prefix...`` at each α (its name in ``of``)."""
    mine = {name: row for name, row in rows.items() if name.startswith(prefix)}
    if not mine:
        return None
    out: dict[str, Any] = {"of": {}}
    for alpha in alphas:
        key = _key(alpha)
        name = max(mine, key=lambda n: mine[n][key]["loss"])
        out[key] = mine[name][key]
        out["of"][key] = name
    return out


def _worst_name(table: dict[str, dict[str, Any]], key: str) -> str:
    """The row of highest loss at α ``key`` (the aggregate "worst" rows name a row, so they are skipped)."""
    return max((n for n, row in table.items() if "of" not in row), key=lambda n: table[n][key]["loss"])


def _key(alpha: float) -> str:
    return f"{alpha:g}"


def worst_first(body: dict[str, dict[str, Any]], prefix: str, alphas: Sequence[float]) -> list[str]:
    """The names of ``body``, those starting with ``prefix`` reordered among their places by highest loss over
    ``alphas`` first (ties keep their order)."""
    mine = [n for n in body if n.startswith(prefix)]
    ranked = iter(sorted(mine, key=lambda n: -max(body[n][_key(a)]["loss"] for a in alphas)))
    return [next(ranked) if n.startswith(prefix) else n for n in body]


def _table(rows: Rows, alphas: Sequence[float]) -> dict[str, dict[str, Any]]:
    """The rows as JSON, the reworded rows worst first, the worst reworded and worst held-out model rows added
    after their kind."""
    raw = {name: {_key(a): cells[a].summary() for a in alphas} for name, cells in rows.items()}
    body = {name: raw[name] for name in worst_first(raw, "reworded: ", alphas)}
    out: dict[str, dict[str, Any]] = {}
    for name, row in body.items():
        out[name] = row
        nxt = list(body).index(name) + 1
        following = list(body)[nxt] if nxt < len(body) else ""
        for prefix, label in (
            ("reworded: ", "reworded: worst"),
            ("leave-one-model-out: ", "leave-one-model-out: worst"),
        ):
            if name.startswith(prefix) and not following.startswith(prefix):
                worst = _worst(body, prefix, alphas)
                if worst is not None:
                    out[label] = worst
    return out


def shift_report(
    corpus: Corpus,
    *,
    alphas: Sequence[float] = SHIFT_ALPHAS,
    permutations: int = 50,
    seed: int = 0,
    group_by: str | None = "injection_task",
    slack: float = DEFAULT_SLACK,
    folds: int = 5,
    repeats: int | None = None,
    group_alpha: GroupAlpha = AUTO,
    styles: Sequence[str] | None = None,
    progress: bool = False,
    workers: int = 1,
    ablation: bool = False,
) -> dict[str, Any]:
    """Every row of the shift report for ``corpus`` (AgentDojo episodes), as JSON (``ablation``: every row again
    per feature variant, :mod:`guard.studies._shift_ablation`).

    ``repeats`` fold assignments of leave-one-goal-out (default: ``ceil(permutations / folds)``, about as
    many calibrations as the split rows).
    """
    repeats = -(-permutations // folds) if repeats is None and folds > 0 else repeats
    if permutations < 1 or folds < 1 or repeats is None or repeats < 1:
        raise CalibrationError("permutations, folds and repeats must be >= 1")
    start = time.perf_counter()
    scored, _ = score_selectors(corpus.episodes, [SELECTOR], progress=progress, workers=workers)
    reworded, counts = reworded_corpus(corpus, styles, seed=seed, progress=progress, workers=workers)
    keys = episode_group_keys(corpus.episodes, group_by) if group_by else None
    setting = Setting(
        scored[SELECTOR],
        reworded,
        group_keys(corpus.episodes),
        corpus.episodes,
        tuple(alphas),
        CarbRule(groups=keys, slack=slack, group_alpha=group_alpha),
        permutations,
        seed,
        folds,
        repeats,
    )
    scoring = time.perf_counter() - start
    with Progress(repeats, f"{corpus.name}: shift rows", enabled=progress) as tick:
        rows = {**split_rows(setting), **goal_rows(setting, tick), **model_rows(setting)}
    table = _table(rows, setting.alphas)
    extra = {"ablation": _ablation(setting)} if ablation else {}
    return {
        **extra,
        "corpus": corpus.name,
        "n_episodes": len(corpus.episodes),
        "rule": setting.rule.describe(setting.alphas),
        "selector": SELECTOR,
        "alphas": [float(a) for a in setting.alphas],
        "permutations": permutations,
        "folds": folds,
        "repeats": repeats,
        "seed": seed,
        "reworded": counts,
        "rows": table,
        "worst": {_key(a): _worst_name(table, _key(a)) for a in setting.alphas},
        "seconds": {"scoring": round(scoring, 3), "calibration": round(time.perf_counter() - start - scoring, 3)},
    }


def _ablation(s: Setting) -> dict[str, dict[str, Any]]:
    """The ablation of the suite policies' weights under every row of ``s``."""
    from dataclasses import replace

    from guard.calibration.jobs import suite_policy
    from guard.studies._shift_ablation import ablation

    weights = suite_policy(s.episodes[0].meta.suite, SELECTOR).scorer.weights.model_dump()

    def rows(scored: ScoredCorpus, reworded: dict[str, ScoredCorpus], gate: bool) -> dict[str, dict[str, Any]]:
        v = replace(s, scored=scored, reworded=reworded, gate=gate)
        return _table({**split_rows(v), **goal_rows(v), **model_rows(v)}, s.alphas)

    return ablation(weights, s.scored, s.reworded, rows, s.alphas)


def shift_reports(
    runs: str | None,
    corpus: str | None,
    *,
    alphas: Sequence[float],
    permutations: int,
    seed: int,
    group_by: str | None,
    slack: float,
    group_alpha: GroupAlpha = AUTO,
    ablation: bool = False,
    workers: int = 1,
    progress: bool = False,
    show: Callable[[str], None] | None = None,
    folds: int = 5,
) -> list[dict[str, Any]]:
    """The report of ``--runs``/``--corpus``, or of each embedded model then all pooled; ``show`` gets each table;
    ``folds``: the goal folds of leave-one-goal-out (2: calibrate on half the goals)."""
    from guard.calibration import crc
    from guard.calibration.jobs import EACH, load_corpus

    for alpha in alphas:
        crc.alpha_fraction(alpha)
    if permutations < 1:
        raise CalibrationError(f"--permutations must be >= 1, got {permutations}")
    results = []
    for name in [corpus] if (runs or corpus) else list(EACH):
        loaded = load_corpus(runs, name, progress=progress)
        result = shift_report(
            loaded,
            alphas=alphas,
            permutations=permutations,
            seed=seed,
            group_by=group_by,
            slack=slack,
            group_alpha=group_alpha,
            folds=folds,
            progress=progress,
            workers=workers,
            ablation=ablation and name in (None, "all"),
        )
        results.append(result)
        if show is not None:
            show(format_shift(result) + "\n")
    return results
