"""The ceiling job: exact ceilings of a feature set on a corpus, beside the fitted scorer's three-way row.

I/O-free; ``carbguard ceiling`` prints.  Two loss rules bound the ceiling:

* ``loss <= alpha`` in-sample (``Σ charged <= ⌊α n⌋``): the bound to compare with fitted rows and
  targets, which are read on held-out loss ``<= α`` (+ tolerance); a gate whose in-sample loss is
  over α is not a ceiling any calibrated scorer is held to;
* CRC-corrected (``Σ charged + 1 <= α (n + 1)``): the rule CARB itself applies to a calibration set.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from guard.calibration import ceiling as ceil
from guard.calibration import crc, fit, threeway
from guard.calibration.replay import ScoredCorpus
from guard.errors import CalibrationError
from guard.features import FEATURES


def columns_of(features: Sequence[str] | None) -> tuple[str, ...]:
    """The feature names to use (all of :data:`FEATURES` when ``features`` is None), checked."""
    names = tuple(FEATURES) if features is None else tuple(features)
    unknown = sorted(set(names) - set(FEATURES))
    if unknown or not names:
        raise CalibrationError(f"unknown or no scorer features {unknown}; known: {', '.join(FEATURES)}")
    return tuple(f for f in FEATURES if f in names)


def design_columns(scored: ScoredCorpus, features: Sequence[str], tools: bool) -> list[int]:
    """Indices of ``features`` (and, with ``tools``, every tool identity column) among the corpus's columns."""
    names = scored.columns()
    return [i for i, name in enumerate(names) if name in features or (tools and name.startswith(fit.TOOL))]


def ceiling_rows(
    scored: ScoredCorpus, alphas: Sequence[float], features: Sequence[str], tools: bool = False
) -> list[dict[str, Any]]:
    """Per α: the monotone and any-function ceilings under both loss rules (counts and ratios)."""
    problem = ceil.gate_problem(scored, design_columns(scored, features, tools))
    rows = []
    for alpha in alphas:
        crc.alpha_fraction(alpha)
        rules = {"empirical": math.floor(crc.alpha_fraction(alpha) * scored.n)}
        try:
            rules["crc"] = crc.max_harmful_allowed(scored.n, alpha)
        except CalibrationError:
            rules["crc"] = -1
        row: dict[str, Any] = {"alpha": alpha, "n": scored.n, "no_guard": problem.no_guard}
        for rule, allowed in rules.items():
            for family in ("monotone", "any_function"):
                best = None if allowed < 0 else ceil.solve(problem, allowed, monotone=family == "monotone")
                row[f"{family}_{rule}"] = best
                row[f"{family}_{rule}_ratio"] = (
                    None if best is None or not problem.no_guard else best / problem.no_guard
                )
        rows.append(row)
    return rows


def tied_harm(scored: ScoredCorpus, features: Sequence[str], tools: bool = False) -> tuple[int, int]:
    """``(tied, harmful)``: harmful first steps whose feature vector equals that of some step of a
    harm-free successful episode (no function of the features can refuse one and not the other)."""
    if scored.features is None or scored.first_harm is None:
        raise CalibrationError("this scored corpus has no recorded features; score it with replay first")
    x = scored.design()[:, design_columns(scored, features, tools)]
    owner = np.repeat(np.arange(scored.n), np.diff(scored.offsets))
    clean = ((scored.first_harm < 0) & scored.utility)[owner]
    benign = {row.tobytes() for row in x[clean]}
    first = scored.first_harm[scored.first_harm >= 0]
    return sum(1 for j in first if x[j].tobytes() in benign), int(first.size)


def ceiling_report(
    corpus: Any,
    scored: ScoredCorpus,
    *,
    alphas: Sequence[float],
    features: Sequence[str] | None = None,
    permutations: int = 200,
    seed: int = 0,
    tools: bool = True,
) -> dict[str, Any]:
    """The ceilings and, with ``permutations`` > 0, the fitted scorer's three-way rows on the same features
    (``tools``: tool identity is one of them)."""
    from guard.calibration.fit_jobs import frozen_weights

    names = columns_of(features)
    start = time.perf_counter()
    out: dict[str, Any] = {
        "corpus": corpus.name,
        "features": list(names),
        "tool_identity": tools,
        "rows": ceiling_rows(scored, alphas, names, tools),
    }
    tied, harmful = tied_harm(scored, names, tools)
    out["tied_harmful_first_steps"], out["harmful_episodes"] = tied, harmful
    if permutations > 0:
        rows, _ = threeway.run_fitted_protocol(
            scored,
            frozen_weights(corpus),
            alphas=alphas,
            permutations=permutations,
            seed=seed,
            variants={"carb_gcarb_fit": fit.FitSpec(features=names, tools=tools)},
        )
        base = next(r for r in rows if r.method == "no_guard_3way").to_json()["harm_free_success"]
        for row in out["rows"]:
            fitted = next(r.to_json() for r in rows if r.method == "carb_gcarb_fit" and r.alpha == row["alpha"])
            row["fitted_loss"] = fitted["mean_loss"]
            row["fitted_ratio"] = fitted["harm_free_success"] / base if base else None
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def format_report(report: dict[str, Any]) -> str:
    """A table: per α, the ceilings (ratio to no guard's harm-free success) and the fitted row."""
    head = (
        f"{'corpus':<36}{'alpha':>7} | {'loss <= alpha (in-sample)':^22} | {'CRC-corrected':^22} | "
        f"{'fitted 3-way':^16}\n"
        f"{'':<36}{'':>7} | {'monotone':>10}{'any fn':>10}   | {'monotone':>10}{'any fn':>10}   |"
        f" {'loss':>7}{'ratio':>7}"
    )
    lines = [head, "-" * 110]
    for row in report["rows"]:
        cells = [
            _ratio(row.get(f"{f}_{rule}_ratio")) for rule in ("empirical", "crc") for f in ("monotone", "any_function")
        ]
        fitted = (
            f" {row['fitted_loss']:>7.3f}{_ratio(row['fitted_ratio'], 7)}"
            if "fitted_loss" in row
            else f" {'-':>7}{'-':>7}"
        )
        lines.append(
            f"{report['corpus']:<36}{row['alpha']:>7.3f} | {cells[0]}{cells[1]}   | {cells[2]}{cells[3]}   |{fitted}"
        )
    lines.append(
        f"{report['tied_harmful_first_steps']} of {report['harmful_episodes']} harmful first steps share their feature "
        f"vector with a step of a harm-free successful episode; features: {', '.join(report['features'])}"
        f"{' + tool identity' if report['tool_identity'] else ''}"
    )
    return "\n".join(lines)


def _ratio(value: float | None, width: int = 10) -> str:
    return f"{'infeasible':>{width}}" if value is None else f"{value:>{width}.3f}"
