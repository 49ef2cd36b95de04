"""Diagnostics on the constructed suites (docs/studies.md).

- :func:`bench_constructed`: CES clean, CES near-miss and graph-braid, each calibrated per the
  replay protocol of docs/studies.md (seeded 50/50 permutations, CARB on the calibration half, metrics on
  the test half; α = 0.10 and 200 permutations by default) for no guard and CARB with each selector.
- :func:`evidence_removal`: on CES clean, G-CARB's threshold is calibrated with all evidence (per
  permutation) and reused, unchanged, when structured provenance (E1 call→result and E3
  shared-identifier edges), exact sink text (every span or value token a sink's payload copies from
  an earlier record, rewritten), or both are removed.  The ledger is always the original episode's:
  the harm happened, only the gate's evidence is degraded.  Not a four-cell conformal certificate.
- :func:`edge_dropout`: on graph-braid, a deterministic fraction of edges is dropped (per seed,
  episode and edge, nested across rates) and G-CARB is recalibrated at every rate.

Scores come from the same graph, selectors and scorer as :class:`guard.session.Session` (a test
checks they equal :func:`guard.calibration.replay.score_episode`); each episode's graph is built
once and scored by every selector.  Metric definitions: ``utility`` = autonomous
success (every constructed episode succeeds when it runs to its end), ``benign_stop`` = CES: stopped
non-leaks over non-leaks; braid: trajectories whose *first* stop is a benign-branch sink, over all
trajectories; ``harm_stop`` = harmful episodes stopped at or before their first harmful sink, over
harmful episodes.  All figures are means over permutations of the test halves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from guard.calibration.evaluate import carb_lambdas
from guard.policy import Policy
from guard.records import Episode
from guard.studies._diagnostics_report import SEED_REFERENCE as SEED_REFERENCE
from guard.studies._diagnostics_report import dropout_plot, format_constructed
from guard.studies._diagnostics_scoring import (
    ALPHA,
    DROPOUT_RATES,
    PERMUTATIONS,
    masked_mean,
    score_dropout,
    score_items,
)
from guard.studies._diagnostics_scoring import BoolArray as BoolArray
from guard.studies._diagnostics_scoring import FloatArray as FloatArray
from guard.studies._diagnostics_scoring import Row as Row
from guard.studies._diagnostics_scoring import ScoredItems as ScoredItems
from guard.studies._diagnostics_scoring import Scoring as Scoring
from guard.studies._diagnostics_scoring import Split as Split
from guard.studies._diagnostics_scoring import benign_first_stops as benign_first_stops
from guard.studies._diagnostics_scoring import cohort_rows as cohort_rows
from guard.studies._diagnostics_scoring import method_row as method_row
from guard.studies._graph_transforms import PARAPHRASE_MARK as PARAPHRASE_MARK
from guard.studies._graph_transforms import STRUCTURED_EDGES as STRUCTURED_EDGES
from guard.studies._graph_transforms import EdgeFilterGraph, paraphrase_sink_text
from guard.studies._graph_transforms import GraphFactory as GraphFactory
from guard.studies._graph_transforms import edge_draw as edge_draw
from guard.studies._graph_transforms import no_provenance_graph as no_provenance_graph
from guard.studies._graph_transforms import standard_graph as standard_graph
from guard.studies.constructed import ConstructedEpisode, ces_cohorts, constructed_policy, load_braid, load_ces

# --------------------------------------------------------------------------- the suites


@dataclass(frozen=True, slots=True)
class Suites:
    """Both suites scored once under the standard graph, every method."""

    policy: Policy
    ces: ScoredItems
    braid: ScoredItems

    def cohort(self, name: str) -> ScoredItems:
        """CES ``clean`` or ``near_miss``: the leaks first, then that cohort's non-leaks."""
        position = {e.episode.episode_id: i for i, e in enumerate(self.ces.items)}
        return self.ces.subset([position[e.episode.episode_id] for e in ces_cohorts(self.ces.items)[name]])


def score_suites(
    policy: Policy | None = None,
    *,
    ces: Sequence[ConstructedEpisode] | None = None,
    braid: Sequence[ConstructedEpisode] | None = None,
    progress: bool = False,
) -> Suites:
    """Score the shipped (or given) CES and braid episodes with every method."""
    pol = policy or constructed_policy()
    ces_items = load_ces(policy=pol) if ces is None else ces
    braid_items = load_braid(policy=pol) if braid is None else braid
    return Suites(
        pol,
        score_items(ces_items, pol, label="scoring CES", progress=progress),
        score_items(braid_items, pol, label="scoring graph-braid", progress=progress),
    )


def bench_constructed(
    *,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
    alpha: float = ALPHA,
    suites: Suites | None = None,
    progress: bool = False,
) -> dict[str, list[Row]]:
    """``{"ces_clean": rows, "ces_near_miss": rows, "braid": rows}``, each calibrated per the protocol."""
    s = suites or score_suites(progress=progress)
    out: dict[str, list[Row]] = {}
    for name in ("clean", "near_miss"):
        cohort = s.cohort(name)
        out[f"ces_{name}"] = cohort_rows(
            cohort, Split.protocol(len(cohort.items), permutations, seed), alpha, braid=False
        )
    out["braid"] = cohort_rows(s.braid, Split.protocol(len(s.braid.items), permutations, seed), alpha, braid=True)
    return out


def ces_transfer(suites: Suites, *, permutations: int = PERMUTATIONS, seed: int = 0, alpha: float = ALPHA) -> list[Row]:
    """Thresholds calibrated on CES clean (per permutation), applied to the near-miss cohort.

    The test set is the near-miss cohort minus the leaks used for calibration.  Near-misses never
    appear in calibration here, so a selector whose scores of disconnected records exceed every
    clean score stops them: the shift the near-miss cohort is built to show.
    """
    clean, near = suites.cohort("clean"), suites.cohort("near_miss")
    split = Split.protocol(len(clean.items), permutations, seed)
    position = {e.episode.episode_id: i for i, e in enumerate(near.items)}
    test = np.ones((permutations, len(near.items)), dtype=bool)
    for r, rows in enumerate(split.calib):
        test[r, [position[clean.items[i].episode.episode_id] for i in rows if clean.items[i].kind == "leak"]] = False
    kinds = np.array([e.kind for e in near.items])
    out = []
    for method in near.scores:
        lam = carb_lambdas(clean.corpus(method), split.calib, alpha)
        corpus = near.corpus(method)
        row = method_row(method, near, corpus, lam, test, braid=False)
        stopped = corpus.max_score[None, :] > lam[:, None]
        row["benign_stop_by_kind"] = {
            k: masked_mean(stopped, test & (kinds == k)[None, :]) for k in sorted(set(kinds) - {"leak"})
        }
        out.append(row)
    return out


def evidence_removal(
    suites: Suites, *, permutations: int = PERMUTATIONS, seed: int = 0, alpha: float = ALPHA, progress: bool = False
) -> list[Row]:
    """Seed G.1 on CES clean: G-CARB at the threshold calibrated with all evidence, four evidence cells."""
    full = suites.cohort("clean")
    items, pol = full.items, suites.policy
    method = "carb_gcarb"
    variants: dict[str, tuple[GraphFactory, Callable[[Episode, Policy], Episode] | None]] = {
        "no_provenance": (no_provenance_graph, None),
        "no_sink_text": (standard_graph, paraphrase_sink_text),
        "neither": (no_provenance_graph, paraphrase_sink_text),
    }
    cells = {"full": full}
    for name, (graph, transform) in variants.items():
        cells[name] = score_items(
            items, pol, methods=[method], graph=graph, transform=transform, label=name, progress=progress
        )
    split = Split.protocol(len(items), permutations, seed)
    lam = carb_lambdas(full.corpus(method), split.calib, alpha)
    harmful = np.array([e.harmful for e in items], dtype=bool)
    no_guard = method_row("no_guard", full, full.corpus(method), np.full(permutations, np.inf), split.test, braid=False)
    rows = []
    for cell, scored in cells.items():
        row = method_row(method, scored, scored.corpus(method), lam, split.test, braid=False)
        rows.append(
            {
                "cell": cell,
                "provenance": cell in ("full", "no_sink_text"),
                "sink_text": cell in ("full", "no_provenance"),
                "recall": float(scored.recall[harmful].mean()),
                "loss": row["loss"],
                "intervention": row["intervention"],
                "harm_stop": row["harm_stop"],
                "benign_stop": row["benign_stop"],
                "threshold": _finite_mean(lam),
                "no_guard_loss": no_guard["loss"],
            }
        )
    return rows


def edge_dropout(
    suites: Suites,
    *,
    rates: Sequence[float] = DROPOUT_RATES,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
    alpha: float = ALPHA,
    progress: bool = False,
) -> list[Row]:
    """Seed G.2 on graph-braid: drop a seeded fraction of edges, recalibrate G-CARB at every rate."""
    method = "carb_gcarb"
    items = suites.braid.items
    split = Split.protocol(len(items), permutations, seed)
    harmful = np.array([e.harmful for e in items], dtype=bool)
    rows = []
    for rate, scored in score_dropout(items, suites.policy, rates, seed=seed, method=method, progress=progress).items():
        lam = carb_lambdas(scored.corpus(method), split.calib, alpha)
        row = method_row(method, scored, scored.corpus(method), lam, split.test, braid=True)
        rows.append(
            {"rate": rate, **row, "recall": float(scored.recall[harmful].mean()), "threshold": _finite_mean(lam)}
        )
    return rows


def _finite_mean(values: FloatArray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def run_bench_constructed(*, permutations: int = PERMUTATIONS, seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Every constructed-suite diagnostic at α = 0.10: the bench, the transfer, evidence removal, dropout."""
    suites = score_suites(progress=progress)
    result: dict[str, Any] = dict(bench_constructed(permutations=permutations, seed=seed, suites=suites))
    result["ces_transfer"] = ces_transfer(suites, permutations=permutations, seed=seed)
    result["evidence_removal"] = evidence_removal(suites, permutations=permutations, seed=seed, progress=progress)
    result["edge_dropout"] = edge_dropout(suites, permutations=permutations, seed=seed, progress=progress)
    result["settings"] = {
        "alpha": ALPHA,
        "permutations": permutations,
        "seed": seed,
        "dropout_rates": list(DROPOUT_RATES),
    }
    return result


__all__ = [
    "ALPHA",
    "DROPOUT_RATES",
    "PERMUTATIONS",
    "EdgeFilterGraph",
    "Suites",
    "bench_constructed",
    "ces_transfer",
    "dropout_plot",
    "edge_dropout",
    "evidence_removal",
    "format_constructed",
    "paraphrase_sink_text",
    "run_bench_constructed",
    "score_dropout",
    "score_items",
    "score_suites",
]
