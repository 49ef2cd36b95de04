"""Which harmful episodes force CARB's threshold down, and which benign episodes pay for it.

Usage: python examples/why_threshold.py [MODEL] [ALPHA]   (default: gpt-4o-2024-05-13 0.05)

Calibrates G-CARB on the whole embedded corpus of MODEL, then lists (1) the harmful episodes whose
harm level M (the running-max score at their first ledger event) is lowest, with the feature set
of that step and the ledger categories; (2) how benign successful episodes that the threshold
stops were stopped (feature set of the refused proposal).
"""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from guard import Guard
from guard.calibration import crc
from guard.calibration.jobs import load_corpus, policy_for
from guard.calibration.replay import replay_decisions
from guard.corpora.agentdojo import episode_ledger_labels
from guard.ledger import Ledger


def main(model: str = "gpt-4o-2024-05-13", alpha: float = 0.05) -> None:
    """Print the analysis."""
    corpus = load_corpus(None, model)
    pick = policy_for("gcarb")
    rows = []
    for episode in corpus.episodes:
        policy = pick(episode)
        decisions = replay_decisions(Guard(policy, threshold=float("inf")), episode)
        trace = Ledger(policy, episode_ledger_labels(episode)).trace(episode)
        scores = np.array([d.score if d.score is not None else np.inf for d in decisions])
        cummax = np.maximum.accumulate(scores) if len(scores) else scores
        harm = trace.first_harm
        level = float(cummax[harm]) if harm is not None else np.inf
        rows.append((episode, decisions, trace, cummax, level))
    levels = np.array([r[4] for r in rows])
    grid = crc.exact_grid(np.concatenate([r[3] for r in rows if len(r[3])]))
    lam = crc.carb_threshold_from_harm_levels(levels, grid, alpha)
    allowed = crc.max_harmful_allowed(len(rows), alpha)
    print(f"{model}: n={len(rows)} alpha={alpha}: at most {allowed} harmful episodes may run; lambda_hat={lam}")
    print("\nHarmful episodes by harm level (lowest first): level | features at the harmful step | categories")
    harmful = sorted((r for r in rows if np.isfinite(r[4])), key=lambda r: r[4])
    for episode, decisions, trace, _, level in harmful[: allowed + 8]:
        step = trace.first_harm or 0
        feats = ",".join(k for k, v in decisions[step].features.items() if v) or "-"
        cats = ",".join(sorted(trace.events[step]))
        print(f"  {level:5.2f}  {decisions[step].tool:<28} {feats:<70} {cats}  {episode.episode_id}")
    stopped = Counter()
    for episode, decisions, trace, cummax, _ in rows:
        if episode.meta.utility and trace.first_harm is None and len(cummax) and cummax[-1] > lam:
            first = next(d for d in decisions if d.score is not None and d.score > lam)
            stopped[(first.tool, ",".join(k for k, v in first.features.items() if v))] += 1
    print(f"\nBenign successful episodes stopped at lambda_hat: {sum(stopped.values())}")
    for (tool, feats), count in stopped.most_common(12):
        print(f"  {count:4d}  {tool:<28} {feats}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gpt-4o-2024-05-13", float(sys.argv[2]) if len(sys.argv) > 2 else 0.05)
