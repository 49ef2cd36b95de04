"""The shift report's ablation: every row again with one default feature out, and with the signatures in.

A variant rescores the replayed corpus and its reworded copies from their recorded features
(:func:`guard.calibration.fit.rescore`: the scores a replay under those weights gives), so no episode is
replayed again.  Variants: the defaults (the calibrated score alone, as every published row); each
default feature left out (weight 0); the signature features added to the score at their former weights
(``injection_text`` 0.15, ``injected_value`` 0.52, the wording-keyed score the shipped policies used to
have); and the signature rule's run-time stops added (they key on attack wording, so only here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from guard.calibration.fit import rescore
from guard.calibration.replay import ScoredCorpus
from guard.features import DEFAULT_WEIGHTS, FEATURES, INJECTED_VALUE, INJECTION_TEXT

#: The weights the signature features had in the shipped score before signatures became a rule.
FORMER_SIGNATURE_WEIGHTS = {INJECTION_TEXT.name: 0.15, INJECTED_VALUE.name: 0.52}

Variant = tuple[dict[str, float], bool]
"""Feature weights, and whether the signature rule's stops count at test time."""


def variants(weights: dict[str, float]) -> dict[str, Variant]:
    """The ablation variants of the policy weights ``weights``."""
    out: dict[str, Variant] = {"defaults": (weights, False)}
    for name in DEFAULT_WEIGHTS:
        out[f"without {name}"] = ({**weights, name: 0.0}, False)
    out["signatures in the score"] = ({**weights, **FORMER_SIGNATURE_WEIGHTS}, False)
    out["signature rule stops added"] = (weights, True)
    return out


def variant_corpus(corpus: ScoredCorpus, weights: dict[str, float]) -> ScoredCorpus:
    """``corpus`` rescored with ``weights``."""
    return rescore(corpus, np.array([weights.get(name, 0.0) for name in FEATURES]))


def ablation(
    weights: dict[str, float],
    scored: ScoredCorpus,
    reworded: dict[str, ScoredCorpus],
    rows: Callable[[ScoredCorpus, dict[str, ScoredCorpus], bool], dict[str, dict[str, Any]]],
    alphas: Sequence[float],
) -> dict[str, dict[str, Any]]:
    """Per variant: the loss and harm-free ratio of every shift row (``rows`` computes a table for a corpus and
    its reworded copies, with or without the rule's stops), and the worst row per α."""
    out: dict[str, dict[str, Any]] = {}
    for name, (chosen, gate) in variants(weights).items():
        rescored = {k: variant_corpus(v, chosen) for k, v in reworded.items()}
        table = rows(variant_corpus(scored, chosen), rescored, gate)
        worst = {}
        for alpha in alphas:
            key = f"{alpha:g}"
            row = max((n for n, r in table.items() if "of" not in r), key=lambda n: table[n][key]["loss"])
            worst[key] = {"row": row, **table[row][key]}
        out[name] = {"rows": table, "worst": worst}
    return out


def format_ablation(result: dict[str, dict[str, Any]], alphas: Sequence[float]) -> str:
    """One line per variant: the worst row's loss and harm-free ratio at each α, and which row it is."""
    keys = [f"{a:g}" for a in alphas]
    head = f"{'variant':34s} " + " ".join(f"{'α ' + k + ' worst loss / hfree':>30s}" for k in keys)
    lines = [head]
    for name, data in result.items():
        cells = []
        for key in keys:
            w = data["worst"][key]
            cells.append(f"{w['loss']:.3f} / {w['harm_free_ratio']:.3f} ({_short(w['row'])})".rjust(30))
        lines.append(f"{name:34s} " + " ".join(cells))
    return "\n".join(lines)


def _short(row: str) -> str:
    return row.replace("leave-one-model-out: ", "LOMO ").replace("leave-one-goal-out", "LOGO").replace("reworded: ", "")
