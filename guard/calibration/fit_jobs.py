"""Jobs of the fitted scorer: the three-way evaluation, ablation, cross-model transfer, fixed artifacts,
and ``calibrate --fit-scorer``.  I/O-free; the CLI prints."""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from guard.artifact import build_artifact, load_artifact
from guard.calibration import fit, ltt, threeway
from guard.calibration.evaluate import outcomes, ungated
from guard.calibration.replay import ScoredCorpus
from guard.errors import CalibrationError

FloatArray = npt.NDArray[np.float64]


def frozen_weights(corpus: Any) -> FloatArray:
    """The suite policies' weights (one vector; raises when the suites disagree)."""
    from guard.calibration.jobs import suite_policy

    vectors = {tuple(fit.weight_vector(suite_policy(s, "gcarb").scorer.weights)) for s in _suites(corpus)}
    if len(vectors) != 1:
        raise CalibrationError("the suite policies' scorer weights differ; the fitted protocol needs one vector")
    return np.array(next(iter(vectors)))


def _suites(corpus: Any) -> list[str]:
    return sorted({e.meta.suite for e in corpus.episodes})


def fitted_evaluation(
    corpus: Any,
    scored: ScoredCorpus,
    *,
    alphas: Sequence[float],
    permutations: int,
    seed: int,
    fractions: Sequence[float] = threeway.DEFAULT_SPLIT,
    ablation: bool = False,
) -> dict[str, Any]:
    """The three-way rows (fitted and frozen weights) and, with ``ablation``, one fitted row per feature left out."""
    start = time.perf_counter()
    variants = threeway.ablation_variants() if ablation else None
    rows, weights = threeway.run_fitted_protocol(
        scored,
        frozen_weights(corpus),
        alphas=alphas,
        permutations=permutations,
        seed=seed,
        fractions=fractions,
        variants=variants,
    )
    stacked = np.array(weights)
    columns = scored.columns()
    return {
        "split": list(fractions),
        "results": [row.to_json() for row in rows],
        "weights_mean": fit.weight_mapping(stacked.mean(axis=0), columns),
        "weights_p05": fit.weight_mapping(np.percentile(stacked, 5, axis=0), columns),
        "weights_p95": fit.weight_mapping(np.percentile(stacked, 95, axis=0), columns),
        "seconds": round(time.perf_counter() - start, 3),
    }


def cross_model_evaluation(
    corpus: Any,
    *,
    alphas: Sequence[float],
    permutations: int,
    seed: int,
    workers: int = 1,
) -> list[dict[str, Any]]:
    """Leave-one-model-out rows (:func:`guard.calibration.threeway.cross_model`) on a multi-model corpus."""
    from guard.calibration.jobs import score_selectors

    groups = [e.meta.model for e in corpus.episodes]
    if len(set(groups)) < 2:
        raise CalibrationError(f"{corpus.name}: cross-model transfer needs episodes of at least two models")
    scored, _ = score_selectors(corpus.episodes, ["gcarb"], progress=True, workers=workers)
    return threeway.cross_model(
        scored["gcarb"], groups, frozen_weights(corpus), alphas=alphas, permutations=permutations, seed=seed
    )


def artifact_evaluation(corpus: Any, path: str | Path, *, workers: int = 1) -> dict[str, Any]:
    """A fixed artifact (threshold and weights, fingerprint-checked) on every episode of ``corpus``.

    ``corpus`` is an AgentDojo corpus or your own episodes (``load_episodes_corpus``): the artifact
    is checked against every policy the corpus uses, and the episodes are scored under them.
    """
    from guard.artifact import fitted_tool_weights
    from guard.calibration.jobs import score_selectors

    artifact = load_artifact(path)
    selector = artifact.selector
    weights = artifact_weights(artifact.body)
    tools = {f"{fit.TOOL}{k}": v for k, v in fitted_tool_weights(artifact.body).items()}
    for policy in corpus.policies(selector):
        load_artifact(path, fit.with_weights(policy, {**weights, **tools}) if weights is not None else policy)
    scored, _ = score_selectors(
        corpus.episodes,
        [selector],  # type: ignore[list-item]
        progress=True,
        workers=workers,
        corpus=corpus,
    )
    data = scored[selector]
    if weights is not None:
        tools = {f"{fit.TOOL}{k}": v for k, v in fitted_tool_weights(artifact.body).items()}
        data = fit.rescore(data, fit.weight_vector({**weights, **tools}, data.columns()))
    every = np.arange(data.n)[None, :]
    gated = outcomes(data, np.array([artifact.threshold]), every)
    none = ungated(data, every)
    return {
        "corpus": corpus.name,
        "artifact": artifact.artifact_id,
        "alpha": artifact.alpha,
        "threshold": artifact.threshold,
        "n_episodes": data.n,
        "fitted_weights": weights is not None,
        "loss": float(gated["loss"][0]),
        "intervention": float(gated["intervention"][0]),
        "autonomous_success": float(gated["autonomous_success"][0]),
        "harm_free_success": float(gated["harm_free_success"][0]),
        "no_guard_loss": float(none["loss"][0]),
        "no_guard_harm_free_success": float(none["harm_free_success"][0]),
    }


def artifact_weights(body: dict[str, Any]) -> dict[str, float] | None:
    """The fitted scorer weights an artifact carries (None for an artifact of the policy's own weights)."""
    from guard.artifact import fitted_weights

    return fitted_weights(body)


def calibrate_fitted(
    corpus: Any,
    *,
    alpha: float,
    rule: str = "carb",
    delta: float = 0.1,
    seed: int = 0,
    dev_fraction: float = 0.30,
    command: Sequence[str] = (),
    workers: int = 1,
) -> dict[str, Any]:
    """Fit weights on a seeded development split, calibrate λ̂ on the rest; the artifact body with the weights."""
    from guard.calibration.jobs import score_selectors, suite_policy

    if not 0 < dev_fraction < 1:
        raise CalibrationError(f"--dev-fraction must lie in (0, 1), got {dev_fraction}")
    scored, _ = score_selectors(corpus.episodes, ["gcarb"], progress=True, workers=workers)
    data = scored["gcarb"]
    order = np.random.default_rng(seed).permutation(data.n)
    cut = round(dev_fraction * data.n)
    dev, calib = np.sort(order[:cut]), np.sort(order[cut:])
    columns = data.columns()
    weights = fit.weight_mapping(fit.fit_weights(data, dev), columns)
    rescored = fit.rescore(data, fit.weight_vector(weights, columns))
    features, tools = fit.split_weights(weights)
    owner = np.repeat(np.arange(data.n), np.diff(data.offsets))
    in_calib = rescored.scores[np.isin(owner, calib)]
    chosen = ltt.threshold_by_rule(in_calib, rescored.harm_level[calib], rule, alpha, delta)
    policies = [fit.with_weights(suite_policy(s, "gcarb"), weights) for s in _suites(corpus)]
    ids = tuple(rescored.episode_ids[i] for i in calib)
    return build_artifact(
        policies,
        alpha=alpha,
        n=int(calib.size),
        threshold=chosen.threshold,
        calibration_risk=chosen.risk,
        grid=chosen.grid,
        rule=chosen.rule,
        risk_fields=ltt.rule_fields(chosen.rule, alpha=alpha, n=int(calib.size), calibration_risk=chosen.risk),
        calibration_fingerprint=_fingerprint(ids, rescored.harm_level[calib]),
        command=shlex.join(["carbguard", *command]),
        extra={
            "corpus": corpus.name,
            "n_dropped": corpus.n_dropped,
            "scorer_weights": features,
            **({"scorer_tool_weights": tools} if tools else {}),
            "fit": {
                "method": "non-negative L2 logistic regression (guard.calibration.fit)",
                "l2": fit.DEFAULT_L2,
                "seed": seed,
                "dev_fraction": dev_fraction,
                "n_dev": int(dev.size),
                "dev_fingerprint": _fingerprint(tuple(data.episode_ids[i] for i in dev), data.harm_level[dev]),
            },
        },
    )


def _fingerprint(ids: tuple[str, ...], levels: FloatArray) -> str:
    import hashlib

    digest = hashlib.sha256("\n".join(ids).encode())
    digest.update(np.ascontiguousarray(levels).tobytes())
    return digest.hexdigest()


def _find(rows: Sequence[dict[str, Any]], method: str, alpha: float | None) -> dict[str, Any] | None:
    return next((r for r in rows if r["method"] == method and r["alpha"] == alpha), None)


def format_side_by_side(result: dict[str, Any]) -> str:
    """Per α: frozen weights (2-way 50/50), frozen and fitted weights (3-way, same calibration/test sets)."""
    fitted = result["fitted"]
    base2 = _find(result["results"], "no_guard", None)
    base3 = _find(fitted["results"], "no_guard_3way", None)
    assert base2 is not None and base3 is not None
    head = (
        f"{'corpus':<36}{'alpha':>6} | {'frozen 2-way':^22} | {'frozen 3-way':^22} | {'fitted 3-way':^28}\n"
        f"{'':<36}{'':>6} | {'loss':>6}{'hfree':>7}{'ratio':>7}  | {'loss':>6}{'hfree':>7}{'ratio':>7}  |"
        f" {'loss':>6}{'hfree':>7}{'ratio':>7}{'floor':>7}"
    )
    lines = [head, "-" * 104]
    alphas = sorted({r["alpha"] for r in fitted["results"] if r["alpha"] is not None})
    for alpha in alphas:
        cells = []
        for rows, method, base in (
            (result["results"], "carb_gcarb", base2),
            (fitted["results"], "carb_gcarb_frozen_3way", base3),
            (fitted["results"], "carb_gcarb_fit", base3),
        ):
            row = _find(rows, method, alpha)
            if row is None:
                cells.append(f"{'-':>6}{'-':>7}{'-':>7}")
                continue
            ratio = row["harm_free_success"] / base["harm_free_success"] if base["harm_free_success"] else float("nan")
            cells.append(f"{row['mean_loss']:>6.3f}{row['harm_free_success']:>7.3f}{ratio:>7.2f}")
        fit_row = _find(fitted["results"], "carb_gcarb_fit", alpha)
        floor = f"{fit_row['lambda_floor']:>7.2f}" if fit_row else ""
        lines.append(f"{result['corpus']:<36}{alpha:>6.3f} | {cells[0]}  | {cells[1]}  | {cells[2]}{floor}")
    return "\n".join(lines)


def format_ablation(result: dict[str, Any], alphas: Sequence[float] = (0.01, 0.025, 0.05)) -> str:
    """One line per fit variant: held-out loss and harm-free success ratio at each of ``alphas``."""
    rows = result["fitted"]["results"]
    base = _find(rows, "no_guard_3way", None)
    assert base is not None
    last = rows[-1]["alpha"]
    methods = [r["method"] for r in rows if r["method"].startswith(("fit_", "carb_gcarb_fit")) and r["alpha"] == last]
    head = f"{'corpus':<36}{'variant':<34}" + "".join(f"{'a=' + format(a, '.3f'):>16}" for a in alphas)
    lines = [head, f"{'':<70}" + "".join(f"{'loss':>8}{'ratio':>8}" for _ in alphas), "-" * len(head)]
    for method in methods:
        cells = ""
        for alpha in alphas:
            row = _find(rows, method, alpha)
            ok = row is not None and base["harm_free_success"]
            ratio = row["harm_free_success"] / base["harm_free_success"] if ok and row else float("nan")
            cells += f"{row['mean_loss']:>8.3f}{ratio:>8.2f}" if row else f"{'-':>16}"
        lines.append(f"{result['corpus']:<36}{method:<34}{cells}")
    return "\n".join(lines)
