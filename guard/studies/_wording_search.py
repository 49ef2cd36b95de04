"""The objective and the search of the wording-defaults study (:mod:`guard.studies.wording_defaults`).

A weight vector is judged on the development corpora of :mod:`guard.studies._wording_data`: λ̂ of the
CARB rule (group rule over (suite, injection task), utility slack) on calibration halves of the corpus *as
logged*, then the loss and the harm-free ratio on the test halves of every wording (as logged, each
template style, each goal family).  The objective is the **worst** wording's excess loss over α, with a
penalty below the harm-free floor, over both α; among non-negative logistic fits at a few fixed
regularisations (all wordings' development proposals pooled), the one of lowest objective is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from guard.calibration.evaluate import CarbRule, carb_lambdas, outcomes, ungated
from guard.calibration.fit import FeatureTable, FitSpec, feature_table, fit_weights_pooled, rescore
from guard.calibration.replay import ScoredCorpus
from guard.calibration.slack import DEFAULT_SLACK
from guard.features import FEATURES

#: α and the harm-free floor the defaults must keep there.
FLOORS: dict[float, float] = {0.05: 0.90, 0.10: 0.95}
#: the regularisations of the candidate fits (fixed before any run) and the decimals a weight keeps.
L2: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
DECIMALS = 2
#: how much one point of harm-free ratio under the floor costs, in loss.
PENALTY = 1.0
TIE = 1e-3


@dataclass(frozen=True, slots=True)
class Metric:
    """Loss and harm-free ratio (to no guard's) of one wording at one α, means over test sets."""

    loss: float
    harm_free_ratio: float


@dataclass(frozen=True)
class Bench:
    """The corpora of one search: each wording's scored corpus, their feature tables, the splits and the rule."""

    scored: Mapping[str, ScoredCorpus]
    tables: Mapping[str, FeatureTable]
    calib: np.ndarray
    test: np.ndarray
    rule: CarbRule

    @classmethod
    def of(
        cls, scored: Mapping[str, ScoredCorpus], groups: Sequence[object], calib: np.ndarray, test: np.ndarray
    ) -> Bench:
        """A bench over ``scored`` (``as is`` first) with the group rule over ``groups``."""
        tables = {name: feature_table(corpus) for name, corpus in scored.items()}
        return cls(scored, tables, calib, test, CarbRule(groups=list(groups), slack=DEFAULT_SLACK))

    def metrics(self, weights: np.ndarray, wordings: Sequence[str] | None = None) -> dict[tuple[str, float], Metric]:
        """(wording, α) → the metric at ``weights`` (feature order; λ̂ from the ``as is`` corpus)."""
        names = list(self.scored) if wordings is None else [next(iter(self.scored)), *wordings]
        rescored = {n: rescore(self.scored[n], weights, self.tables[n]) for n in dict.fromkeys(names)}
        base = rescored[next(iter(self.scored))]
        out: dict[tuple[str, float], Metric] = {}
        for alpha in FLOORS:
            lam = carb_lambdas(base, self.calib, alpha, self.rule)
            for name, corpus in rescored.items():
                got, none = outcomes(corpus, lam, self.test), ungated(corpus, self.test)
                ref = float(none["harm_free_success"].mean())
                ratio = float(got["harm_free_success"].mean()) / ref if ref else float("nan")
                out[name, alpha] = Metric(float(got["loss"].mean()), ratio)
        return out


def metrics_json(metrics: Mapping[tuple[str, float], Metric], wordings: Sequence[str] | None = None) -> dict[str, Any]:
    """``metrics`` as JSON, wording → α → loss and harm-free ratio (only ``wordings`` when given)."""
    out: dict[str, Any] = {}
    for (name, alpha), m in metrics.items():
        if wordings is None or name in wordings:
            out.setdefault(name, {})[f"{alpha:g}"] = {"loss": m.loss, "harm_free_ratio": m.harm_free_ratio}
    return out


def objective(metrics: Mapping[tuple[str, float], Metric], wordings: Sequence[str]) -> float:
    """The worst excess loss over α among ``wordings``, plus :data:`PENALTY` per point under a harm-free floor,
    less :data:`TIE` times the lowest harm-free ratio (between equal losses, the weights that stop less)."""
    worst, lowest = -1.0, 1.0
    for (name, alpha), m in metrics.items():
        if name not in wordings:
            continue
        ratio = m.harm_free_ratio if np.isfinite(m.harm_free_ratio) else 1.0
        worst = max(worst, m.loss - alpha + PENALTY * max(0.0, FLOORS[alpha] - ratio))
        lowest = min(lowest, ratio)
    return worst - TIE * lowest


def choose(
    bench: Bench,
    episodes: np.ndarray,
    free: Sequence[str],
    wordings: Sequence[str],
) -> tuple[dict[str, float], float, float]:
    """The weights of the :data:`L2` candidate whose objective over ``wordings`` is lowest (ties: the first):
    each candidate is one non-negative logistic fit (:func:`guard.calibration.fit.fit_weights_pooled`, no tool
    weights, only ``free`` features) over the development proposals of ``episodes`` in every one of
    ``wordings``, rounded to :data:`DECIMALS`.  Returns the weights, their objective and the L2 chosen."""
    items = [(bench.scored[name], bench.tables[name], episodes) for name in wordings]
    best: tuple[dict[str, float], float, float] | None = None
    for l2 in L2:
        fitted = fit_weights_pooled(items, FitSpec(l2=l2, features=tuple(free), tools=False))
        weights = {name: round(float(v), DECIMALS) for name, v in zip(FEATURES, fitted, strict=False) if v > 0}
        score = objective(bench.metrics(_vector(weights), wordings), wordings)
        if best is None or score < best[1] - 1e-12:
            best = (weights, score, l2)
    assert best is not None
    return best


def _vector(weights: Mapping[str, float]) -> np.ndarray:
    return np.array([float(weights.get(name, 0.0)) for name in FEATURES], dtype=np.float64)


vector = _vector
