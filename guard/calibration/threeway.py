"""The three-way protocol (docs/calibrate.md): development split fits the weights, calibration sets λ̂, test reports.

Per seeded permutation the episodes are split into disjoint development / calibration / test sets
(default 30/35/35).  The weights are fitted on the development episodes only
(:func:`guard.calibration.fit.fit_weights`), frozen, the corpus re-scored with them, λ̂ set by CARB
on the calibration episodes' exact grid, and every metric measured on the test episodes.  The frozen
docs/evidence.md weights on the same calibration/test sets are reported next to it, so the comparison is
at equal calibration size.

Cross-model transfer (:func:`cross_model`) fits and calibrates on four models and tests on the fifth;
exchangeability between models is not given there, and the rows say what happened, not a guarantee.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guard.calibration import crc, fit
from guard.calibration.evaluate import Row, outcomes, ungated
from guard.calibration.replay import ScoredCorpus
from guard.errors import CalibrationError
from guard.features import DEFAULT_WEIGHTS, FEATURE_GROUPS, FEATURES, SIGNATURE_FEATURES

DEFAULT_SPLIT: tuple[float, float, float] = (0.30, 0.35, 0.35)
IntMatrix = npt.NDArray[np.int64]


def split3(
    n: int, permutations: int, seed: int, fractions: Sequence[float] = DEFAULT_SPLIT
) -> tuple[IntMatrix, IntMatrix, IntMatrix]:
    """``(dev, calib, test)`` index matrices, disjoint per row, sizes from ``fractions`` (sum 1)."""
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise CalibrationError(f"split fractions must be three positive numbers summing to 1, got {tuple(fractions)}")
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((permutations, n)), axis=1)
    a = round(fractions[0] * n)
    b = a + round(fractions[1] * n)
    if min(a, b - a, n - b) < 1:
        raise CalibrationError(f"{n} episodes are too few for a {fractions} split")
    return order[:, :a], order[:, a:b], order[:, b:]


@dataclass(frozen=True, slots=True)
class Fitted:
    """One permutation's fitted weights and the corpus re-scored with them."""

    weights: npt.NDArray[np.float64]
    corpus: ScoredCorpus


def calibrated(corpus: ScoredCorpus, owner: IntMatrix, calib: IntMatrix, alpha: float) -> float:
    """CARB's λ̂ on the calibration episodes ``calib`` (their own exact grid)."""
    grid = crc.exact_grid(corpus.scores[np.isin(owner, calib)])
    return crc.carb_threshold_from_harm_levels(corpus.harm_level[calib], grid, alpha)


PerAlpha = dict[float, tuple[float, dict[str, np.ndarray]]]


def _rows_from(method: str, alphas: Sequence[float], per: list[PerAlpha]) -> list[Row]:
    out = []
    for alpha in alphas:
        lam = np.array([p[alpha][0] for p in per])
        keys = per[0][alpha][1].keys()
        metrics = {k: np.concatenate([p[alpha][1][k] for p in per]) for k in keys}
        out.append(Row(method, alpha, metrics, lam, True))
    return out


def run_fitted_protocol(
    corpus: ScoredCorpus,
    frozen: npt.NDArray[np.float64],
    *,
    alphas: Sequence[float],
    permutations: int = 200,
    seed: int = 0,
    fractions: Sequence[float] = DEFAULT_SPLIT,
    variants: dict[str, fit.FitSpec] | None = None,
    tick: Callable[[int], None] | None = None,
) -> tuple[list[Row], list[npt.NDArray[np.float64]]]:
    """Rows ``no_guard_3way``, ``carb_gcarb_frozen_3way`` and one per fit variant (default ``carb_gcarb_fit``).

    Returns the rows and the fitted weights of each permutation (first variant).
    """
    variants = variants or {"carb_gcarb_fit": fit.FitSpec()}
    dev, calib, test = split3(corpus.n, permutations, seed, fractions)
    table = fit.feature_table(corpus)
    frozen_corpus = fit.rescore(corpus, frozen, table)
    per: dict[str, list[PerAlpha]] = {"carb_gcarb_frozen_3way": [], **{name: [] for name in variants}}
    weights: list[npt.NDArray[np.float64]] = []
    for r in range(permutations):
        scored = {"carb_gcarb_frozen_3way": frozen_corpus}
        for k, (name, spec) in enumerate(variants.items()):
            w = fit.fit_weights(corpus, dev[r], spec, table)
            if k == 0:
                weights.append(w)
            scored[name] = fit.rescore(corpus, w, table)
        for name, sc in scored.items():
            per[name].append({a: _one(sc, table.owner, calib[r], test[r], a) for a in alphas})
        if tick is not None:
            tick(r + 1)
    rows = [Row("no_guard_3way", None, ungated(corpus, test), np.full(permutations, np.inf), False)]
    for name, items in per.items():
        rows += _rows_from(name, alphas, items)
    return rows, weights


def _one(
    sc: ScoredCorpus, owner: IntMatrix, calib: IntMatrix, test: IntMatrix, alpha: float
) -> tuple[float, dict[str, np.ndarray]]:
    lam = calibrated(sc, owner, calib, alpha)
    return lam, outcomes(sc, np.array([lam]), test[None, :])


def ablation_variants() -> dict[str, fit.FitSpec]:
    """The full fit; without tool identity; without each opt-in group; without each default feature; the
    default features only; and the default features with the signature features (keyed on wording)."""
    out = {"carb_gcarb_fit": fit.FitSpec(), "fit_without_tool_identity": fit.FitSpec(tools=False)}
    for group, names in FEATURE_GROUPS.items():
        out[f"fit_without_{group}"] = fit.FitSpec(features=tuple(f for f in FEATURES if f not in names))
    for name in DEFAULT_WEIGHTS:
        out[f"fit_without_{name}"] = fit.FitSpec(features=tuple(f for f in FEATURES if f != name))
    defaults = tuple(DEFAULT_WEIGHTS)
    out["fit_default_features_only"] = fit.FitSpec(features=defaults, tools=False)
    out["fit_default_and_signatures"] = fit.FitSpec(features=defaults + SIGNATURE_FEATURES, tools=False)
    return out


# --------------------------------------------------------------------------- cross-model transfer


def cross_model(
    corpus: ScoredCorpus,
    groups: Sequence[str],
    frozen: npt.NDArray[np.float64],
    *,
    alphas: Sequence[float],
    permutations: int = 50,
    seed: int = 0,
    dev_fraction: float = 0.45,
) -> list[dict[str, object]]:
    """Leave one model out: fit and calibrate on the other models' episodes, test on all of its episodes.

    Per permutation the other models' episodes are split ``dev_fraction`` / rest into development and
    calibration.  Methods: frozen weights (λ̂ on the calibration part), fitted weights, and the
    conservative fitted variant whose λ̂ is the smallest of the per-source-model λ̂ (each source
    model's calibration episodes alone).
    """
    labels = np.asarray(groups)
    table = fit.feature_table(corpus)
    frozen_corpus = fit.rescore(corpus, frozen, table)
    rng = np.random.default_rng(seed)
    results: list[dict[str, object]] = []
    for held in sorted(set(labels.tolist())):
        target = np.flatnonzero(labels == held)
        source = np.flatnonzero(labels != held)
        none = ungated(corpus, target[None, :])
        acc: dict[tuple[str, float], list[tuple[float, float, float]]] = {}
        for _ in range(permutations):
            order = rng.permutation(source)
            cut = round(dev_fraction * source.size)
            dev, cal = order[:cut], order[cut:]
            fitted = fit.rescore(corpus, fit.fit_weights(corpus, dev, fit.FitSpec(), table), table)
            for alpha in alphas:
                lams = {
                    "frozen": calibrated(frozen_corpus, table.owner, cal, alpha),
                    "fitted": calibrated(fitted, table.owner, cal, alpha),
                    "fitted_conservative": min(
                        _maybe(fitted, table.owner, cal[labels[cal] == g], alpha) for g in sorted(set(labels[cal]))
                    ),
                }
                for method, lam in lams.items():
                    sc = frozen_corpus if method == "frozen" else fitted
                    o = outcomes(sc, np.array([lam]), target[None, :])
                    acc.setdefault((method, alpha), []).append(
                        (float(o["loss"][0]), float(o["harm_free_success"][0]), lam)
                    )
        for (method, alpha), values in acc.items():
            arr = np.array(values)
            results.append(
                {
                    "held_out": held,
                    "n": int(target.size),
                    "method": method,
                    "alpha": alpha,
                    "mean_loss": float(arr[:, 0].mean()),
                    "loss_p95": float(np.percentile(arr[:, 0], 95)),
                    "harm_free_success": float(arr[:, 1].mean()),
                    "no_guard_loss": float(none["loss"][0]),
                    "no_guard_harm_free": float(none["harm_free_success"][0]),
                    "lambda_floor": float(np.mean(arr[:, 2] == -np.inf)),
                }
            )
    return results


def _maybe(sc: ScoredCorpus, owner: IntMatrix, calib: IntMatrix, alpha: float) -> float:
    """λ̂ of one source model; -inf (stop everything) when too few of its episodes make α infeasible."""
    try:
        return calibrated(sc, owner, calib, alpha)
    except CalibrationError:
        return -np.inf


def format_cross_model(rows: Sequence[dict[str, object]]) -> str:
    """A readable table of :func:`cross_model` rows."""
    head = (
        f"{'held-out model':<36}{'n':>6}{'alpha':>7}{'method':>22}{'loss':>8}{'p95':>7}{'hfree':>7}{'ratio':>7}"
        f"{'floor':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        base = float(r["no_guard_harm_free"])  # type: ignore[arg-type]
        ratio = float(r["harm_free_success"]) / base if base else float("nan")  # type: ignore[arg-type]
        lines.append(
            f"{r['held_out']!s:<36}{r['n']!s:>6}{float(r['alpha']):>7.3f}{r['method']!s:>22}"  # type: ignore[arg-type]
            f"{float(r['mean_loss']):>8.3f}{float(r['loss_p95']):>7.3f}"  # type: ignore[arg-type]
            f"{float(r['harm_free_success']):>7.3f}{ratio:>7.2f}{float(r['lambda_floor']):>7.2f}"  # type: ignore[arg-type]
        )
    return "\n".join(lines)
