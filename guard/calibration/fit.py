"""Scorer weights fitted on development episodes (docs/calibrate.md), and exact re-scoring under any weights.

The decision path is untouched: the scorer still computes binary features and one weighted sum.
Fitting produces the weights of that sum.  Replay records every proposal's binary features once
(:class:`~guard.calibration.replay.ScoredCorpus.features`), so the scores under other weights are
recomputed here without re-running an episode, bit-identical to :class:`guard.scorer.WeightedScorer`
(same feature order, same Python float sum, same ``round(·, 12)``), and a test checks it.

The fit is an L2-regularised logistic regression with non-negative weights (the policy's weights
must be ``>= 0``) and a free intercept that the scorer drops (a constant shift orders nothing).
Its examples are the in-scope, scored proposals of the **development episodes only**: label 1 for a
step that charges the ledger, 0 otherwise.  :func:`fit_weights` takes the development rows and
reads nothing else of the corpus (a test permutes every other episode's labels and features and
gets the same weights).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from guard.calibration.replay import ScoredCorpus
from guard.errors import CalibrationError
from guard.features import FEATURES
from guard.ledger import CATEGORIES
from guard.policy import FeatureWeights, Policy

FloatArray = npt.NDArray[np.float64]

#: default regularisation (per example, on the weights only) and weight rounding of a fit.
DEFAULT_L2 = 1e-3
WEIGHT_DECIMALS = 6


#: prefix of a tool identity column's name (:meth:`guard.calibration.replay.ScoredCorpus.columns`).
TOOL = "tool:"


@dataclass(frozen=True, slots=True)
class FitSpec:
    """How weights are fitted: regularisation, the features the fit may use (others get weight 0) and
    whether it may weigh tool identity (one indicator per tool)."""

    l2: float = DEFAULT_L2
    features: tuple[str, ...] = FEATURES
    tools: bool = True

    def mask(self, columns: tuple[str, ...] = FEATURES) -> npt.NDArray[np.bool_]:
        """Which of ``columns`` (features, then ``tool:NAME``) the fit may give a weight."""
        unknown = set(self.features) - set(FEATURES)
        if unknown:
            raise CalibrationError(f"unknown scorer features {sorted(unknown)}; known: {', '.join(FEATURES)}")
        return np.array([name in self.features or (self.tools and name.startswith(TOOL)) for name in columns])


def weight_vector(weights: FeatureWeights | Mapping[str, float], columns: tuple[str, ...] = FEATURES) -> FloatArray:
    """The weights in ``columns`` order (absent names weigh 0)."""
    values = weights.model_dump() if isinstance(weights, FeatureWeights) else dict(weights)
    return np.array([float(values.get(name, 0.0)) for name in columns], dtype=np.float64)


def weight_mapping(vector: FloatArray, columns: tuple[str, ...] = FEATURES) -> dict[str, float]:
    """A weight vector as a mapping: feature names, and ``tool:NAME`` for tool identity."""
    return {name: float(v) for name, v in zip(columns, vector, strict=True)}


def split_weights(weights: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """``(feature weights, tool weights)`` of a mapping with ``tool:NAME`` keys (zero tool weights dropped)."""
    features = {k: v for k, v in weights.items() if not k.startswith(TOOL)}
    tools = {k[len(TOOL) :]: v for k, v in weights.items() if k.startswith(TOOL) and v != 0}
    return features, tools


def with_weights(policy: Policy, weights: Mapping[str, float]) -> Policy:
    """A copy of ``policy`` whose scorer uses ``weights`` (validated by the policy model); ``tool:NAME``
    weights apply to the tools ``policy`` declares."""
    features, tools = split_weights(weights)
    spec = FeatureWeights.model_validate(features)
    own = {k: v for k, v in tools.items() if k in policy.tools}
    return policy.model_copy(update={"scorer": policy.scorer.model_copy(update={"weights": spec, "tool_weights": own})})


# --------------------------------------------------------------------------- exact re-scoring


@dataclass(frozen=True, slots=True)
class FeatureTable:
    """The distinct feature rows of a corpus and, per proposal, which row it has."""

    rows: npt.NDArray[np.bool_]
    inverse: npt.NDArray[np.int64]
    refused: npt.NDArray[np.bool_]
    in_scope: npt.NDArray[np.bool_]
    owner: npt.NDArray[np.int64]


def feature_table(corpus: ScoredCorpus) -> FeatureTable:
    """Index a corpus's recorded features (raises if replay recorded none)."""
    if corpus.features is None or corpus.in_scope is None or corpus.first_harm is None:
        raise CalibrationError("this scored corpus has no recorded features; score it with replay first")
    rows, inverse = np.unique(corpus.design(), axis=0, return_inverse=True)
    owner = np.repeat(np.arange(corpus.n), np.diff(corpus.offsets)).astype(np.int64)
    return FeatureTable(rows, inverse.ravel().astype(np.int64), ~np.isfinite(corpus.scores), corpus.in_scope, owner)


def row_scores(rows: npt.NDArray[np.bool_], weights: FloatArray) -> FloatArray:
    """Each feature row's score exactly as the scorer computes it (Python sum in feature order, then the
    tool weight, rounded); weights shorter than a row weigh the missing columns 0."""
    out = np.empty(len(rows))
    w = [float(x) for x in weights] + [0.0] * max(0, rows.shape[1] - len(weights))
    for r, row in enumerate(rows.tolist()):
        out[r] = round(sum(w[j] for j, on in enumerate(row) if on), 12)
    return out


def rescore(corpus: ScoredCorpus, weights: FloatArray, table: FeatureTable | None = None) -> ScoredCorpus:
    """The corpus as replay would have scored it with ``weights`` (refusals stay +inf, out of scope 0)."""
    table = table or feature_table(corpus)
    per_row = row_scores(table.rows, weights)
    scores = np.where(table.refused, np.inf, np.where(table.in_scope, per_row[table.inverse], 0.0))
    cummax = _segment_cummax(scores, table.owner)
    return replace(
        corpus,
        scores=scores,
        cummax=cummax,
        harm_level=_levels(cummax, corpus.first_harm),
        category_levels={c: _levels(cummax, (corpus.category_first or {})[c]) for c in CATEGORIES},
        max_score=_last(cummax, corpus.offsets),
    )


def _segment_cummax(scores: FloatArray, owner: npt.NDArray[np.int64]) -> FloatArray:
    """Running maximum within each episode (``owner`` sorted), exact: done on integer ranks."""
    if scores.size == 0:
        return scores.copy()
    values, ranks = np.unique(scores, return_inverse=True)
    stride = values.size + 1
    keys = owner * stride + ranks.ravel().astype(np.int64)
    result: FloatArray = values[np.maximum.accumulate(keys) - owner * stride]
    return result


def _levels(cummax: FloatArray, first: npt.NDArray[np.int64] | None) -> FloatArray:
    if first is None:
        raise CalibrationError("this scored corpus has no recorded harm steps")
    return np.where(first >= 0, cummax[np.maximum(first, 0)], np.inf) if cummax.size else np.full(first.size, np.inf)


def _last(cummax: FloatArray, offsets: npt.NDArray[np.int64]) -> FloatArray:
    ends = offsets[1:]
    has = ends > offsets[:-1]
    return np.where(has, cummax[np.maximum(ends - 1, 0)], -np.inf) if cummax.size else np.full(has.size, -np.inf)


# --------------------------------------------------------------------------- fitting


def fit_weights(
    corpus: ScoredCorpus,
    dev: Sequence[int] | npt.NDArray[np.int64],
    spec: FitSpec = FitSpec(),
    table: FeatureTable | None = None,
) -> FloatArray:
    """Non-negative logistic-regression weights from the proposals of the development episodes ``dev``."""
    table = table or feature_table(corpus)
    dev_idx = np.asarray(dev, dtype=np.int64)
    if dev_idx.size == 0:
        raise CalibrationError("the development split is empty; nothing to fit the scorer on")
    take = np.zeros(corpus.n, dtype=bool)
    take[dev_idx] = True
    positive, negative = _examples(corpus, table)
    use = take[table.owner] & table.in_scope & ~table.refused & (positive | negative)
    rows, pos, neg = _counts(table.inverse[use], positive[use], len(table.rows))
    mask = spec.mask(corpus.columns())
    x = table.rows[rows].astype(np.float64)[:, mask]
    w = _logistic_nonneg(x, pos[rows], neg[rows], spec.l2)
    full = np.zeros(mask.size)
    full[mask] = w
    return np.round(full, WEIGHT_DECIMALS)


def fit_weights_pooled(
    items: Sequence[tuple[ScoredCorpus, FeatureTable, npt.NDArray[np.int64]]], spec: FitSpec = FitSpec()
) -> FloatArray:
    """One non-negative logistic fit over the development proposals of several corpora of the same episodes
    (``(corpus, its feature table, development episode indices)`` each: e.g. a corpus and its rewordings),
    every corpus's examples counted once.  With one item it equals :func:`fit_weights`."""
    if not items:
        raise CalibrationError("no corpus to fit the scorer on")
    columns = items[0][0].columns()
    mask = spec.mask(columns)
    rows: list[FloatArray] = []
    pos: list[FloatArray] = []
    neg: list[FloatArray] = []
    for corpus, table, dev in items:
        if corpus.columns() != columns:
            raise CalibrationError("the corpora of a pooled fit have different feature columns")
        take = np.zeros(corpus.n, dtype=bool)
        take[np.asarray(dev, dtype=np.int64)] = True
        positive, negative = _examples(corpus, table)
        use = take[table.owner] & table.in_scope & ~table.refused & (positive | negative)
        kept, p, n = _counts(table.inverse[use], positive[use], len(table.rows))
        rows.append(table.rows[kept].astype(np.float64)[:, mask])
        pos.append(p[kept])
        neg.append(n[kept])
    w = _logistic_nonneg(np.vstack(rows), np.concatenate(pos), np.concatenate(neg), spec.l2)
    full = np.zeros(mask.size)
    full[mask] = w
    return np.round(full, WEIGHT_DECIMALS)


def _examples(corpus: ScoredCorpus, table: FeatureTable) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Positives: each episode's first ledger-charging step; negatives: every step of a harm-free
    successful episode (the utility a threshold can lose).  Other steps change neither loss nor
    harm-free success at any threshold, so they are not examples."""
    first = corpus.first_harm if corpus.first_harm is not None else np.zeros(0, dtype=np.int64)
    positive = np.zeros(table.owner.size, dtype=bool)
    positive[first[first >= 0]] = True
    clean = (first < 0) & corpus.utility
    return positive, clean[table.owner]


def _counts(
    inverse: npt.NDArray[np.int64], label: npt.NDArray[np.bool_], n_rows: int
) -> tuple[npt.NDArray[np.int64], FloatArray, FloatArray]:
    pos = np.bincount(inverse[label], minlength=n_rows).astype(np.float64)
    neg = np.bincount(inverse[~label], minlength=n_rows).astype(np.float64)
    return np.flatnonzero(pos + neg > 0), pos, neg


def _logistic_nonneg(x: FloatArray, pos: FloatArray, neg: FloatArray, l2: float, iters: int = 100) -> FloatArray:
    """argmin over (b, w >= 0) of mean log-loss + l2/2·|w|² on counted rows, by projected Newton."""
    total = float(pos.sum() + neg.sum())
    if total == 0 or pos.sum() == 0:
        return np.zeros(x.shape[1])  # no harmful development step: nothing to separate, every weight 0
    design = np.hstack([np.ones((x.shape[0], 1)), x])
    theta = np.zeros(design.shape[1])
    theta[0] = np.log(pos.sum() / max(neg.sum(), 1.0))
    reg = np.full(design.shape[1], l2)
    reg[0] = 0.0

    def loss(t: FloatArray) -> float:
        z = design @ t
        return float((pos * np.logaddexp(0, -z) + neg * np.logaddexp(0, z)).sum() / total + 0.5 * (reg * t * t).sum())

    current = loss(theta)
    for _ in range(iters):
        z = design @ theta
        p = 0.5 * (1 + np.tanh(0.5 * z))  # sigmoid, overflow-free
        grad = design.T @ (neg * p - pos * (1 - p)) / total + reg * theta
        free = np.ones(theta.size, dtype=bool)
        free[1:] = (theta[1:] > 1e-12) | (grad[1:] < 0)
        h = (design[:, free].T * ((pos + neg) * p * (1 - p))) @ design[:, free] / total
        h += np.diag(reg[free] + 1e-9)
        step = np.zeros_like(theta)
        step[free] = np.linalg.solve(h, grad[free])
        t, improved = 1.0, False
        while t > 1e-8:
            cand = theta - t * step
            cand[1:] = np.maximum(cand[1:], 0.0)
            value = loss(cand)
            if value <= current - 1e-12:
                theta, current, improved = cand, value, True
                break
            t *= 0.5
        if not improved:
            break
    return np.maximum(theta[1:], 0.0)


__all__ = [
    "DEFAULT_L2",
    "FeatureTable",
    "FitSpec",
    "feature_table",
    "fit_weights",
    "fit_weights_pooled",
    "rescore",
    "row_scores",
    "split_weights",
    "weight_mapping",
    "weight_vector",
    "with_weights",
]
