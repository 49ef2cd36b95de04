"""κ on the population SafeCommit guards: coverage of held-out gated cases, κ calibrated ungated or gated.

At run time only proposals whose G-CARB score is at most λ̂ reach SafeCommit (a higher one
escalates), so the coverage that matters is the true world's over those.  Per permutation of the
replay study, λ̂ comes from the calibration half; the held-out cases are the test half's cases with
G-CARB score ≤ λ̂; κ is leave-one-model-out either on every case of the other models (*ungated*,
as shipped) or on their cases under the same λ̂ (*gated*).  The other models' cases are disjoint
from both halves, so the gated κ is calibrated on data independent of the test cases given λ̂ —
across models, where exchangeability is itself an assumption (the study says so).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from guard.calibration.kappa import Case
from guard.safecommit.conformal import SmallCalibrationWarning, conformal_threshold

USED = ("unsafe", "legit")


def _arrays(cases: Sequence[Case], models: Sequence[str]) -> dict[str, np.ndarray]:
    """Scores, gate scores, model index (-1: a model outside the study, in every leave-one-out pool) and truth."""
    used = [c for c in cases if c.truth in USED]
    index = {m: i for i, m in enumerate(models)}
    return {
        "score": np.array([c.score for c in used], dtype=np.float64),
        "gate": np.array([c.gate_score for c in used], dtype=np.float64),
        "model": np.array([index.get(c.model, -1) for c in used], dtype=np.int64),
        "unsafe": np.array([c.truth == "unsafe" for c in used], dtype=bool),
    }


def _kappa(scores: np.ndarray, alpha: float) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallCalibrationWarning)
        return conformal_threshold(scores.tolist(), alpha)


def _share(hit: np.ndarray) -> float:
    return float(hit.mean()) if hit.size else math.nan


def gated_coverage(
    per_episode: Sequence[Sequence[Case]],
    calibration_cases: Sequence[Case],
    models: Sequence[str],
    alpha: float,
    lam: np.ndarray,
    test: np.ndarray,
    kappa: Mapping[str, float],
) -> dict[str, Any]:
    """Mean held-out coverage over permutations (module docstring) at the ungated and the gated κ.

    ``per_episode[i]`` are the cases of episode ``i`` of the study; ``test[p]`` the test episodes and
    ``lam[p]`` the λ̂ of permutation ``p``; ``kappa`` the ungated leave-one-model-out κ per model.
    """
    owner = np.repeat(np.arange(len(per_episode)), [sum(c.truth in USED for c in cs) for cs in per_episode])
    held = _arrays([c for cs in per_episode for c in cs], models)
    pool = _arrays(calibration_cases, models)
    ungated_k = np.array([kappa[m] for m in models])
    out: dict[str, list[float]] = {k: [] for k in ("ungated_all", "ungated_unsafe", "gated_all", "gated_unsafe", "n")}
    gated_k: list[list[float]] = []
    for p in range(lam.shape[0]):
        mask = np.isin(owner, test[p]) & (held["gate"] <= lam[p])
        k_p = np.array(
            [_kappa(pool["score"][(pool["model"] != j) & (pool["gate"] <= lam[p])], alpha) for j in range(len(models))]
        )
        gated_k.append(k_p.tolist())
        score, model, unsafe = held["score"][mask], held["model"][mask], held["unsafe"][mask]
        for name, k in (("ungated", ungated_k), ("gated", k_p)):
            out[f"{name}_all"].append(_share(score <= k[model]))
            out[f"{name}_unsafe"].append(_share(score[unsafe] <= k[model][unsafe]))
        out["n"].append(float(mask.sum()))
    result: dict[str, Any] = {k: float(np.nanmean(v)) if v else None for k, v in out.items()}
    means = np.mean(np.array(gated_k), axis=0) if gated_k else np.array([])
    result["kappa_gated_mean"] = {m: float(k) for m, k in zip(models, means, strict=True)}
    result["lambda_mean"] = float(np.mean(lam[np.isfinite(lam)])) if np.isfinite(lam).any() else None
    return result


def format_gate(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Lines: per α, held-out coverage of gated cases at the ungated and the gated κ."""
    lines = [
        "",
        "kappa on the gated population (held-out test cases with G-CARB score <= lambda-hat, leave-one-model-out):",
        f"{'alpha':>6} {'lambda':>7} {'cases':>7} {'ungated all':>12} {'unsafe':>7} {'gated all':>10} {'unsafe':>7}"
        "  mean gated kappa per model",
    ]
    for row in rows:
        g = row["gate"]
        lam = "-" if g["lambda_mean"] is None else f"{g['lambda_mean']:.3f}"
        kappas = ", ".join(f"{m} {k:.3g}" for m, k in g["kappa_gated_mean"].items())
        lines.append(
            f"{row['alpha']:>6.2f} {lam:>7} {g['n']:>7.1f} {g['ungated_all']:>12.3f} {g['ungated_unsafe']:>7.3f} "
            f"{g['gated_all']:>10.3f} {g['gated_unsafe']:>7.3f}  {kappas}"
        )
    return lines
