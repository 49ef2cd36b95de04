"""Scoring and metrics of the constructed-suite diagnostics (see :mod:`guard.studies.diagnostics`).

Each episode's graph is built once and scored by every selector (:func:`score_items`,
:func:`score_dropout`); :func:`method_row` and :func:`cohort_rows` turn scores into the bench's
per-method rows over seeded 50/50 permutations (:class:`Split`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from guard.calibration.evaluate import METHOD_SELECTORS, carb_lambdas, method_name, split_indices
from guard.calibration.replay import EpisodeScores, ScoredCorpus, assemble, replay_session_id
from guard.graph import PrefixGraph
from guard.ledger import CATEGORIES, Ledger
from guard.policy import Policy
from guard.progress import Progress
from guard.protocols import Selector
from guard.records import Episode
from guard.scorer import WeightedScorer
from guard.selectors import make_selector
from guard.studies._graph_transforms import EdgeFilterGraph, GraphFactory, standard_graph
from guard.studies.constructed import ConstructedEpisode

ALPHA = 0.10
PERMUTATIONS = 200
DROPOUT_RATES = (0.0, 0.05, 0.10, 0.15, 0.20)
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
Row = dict[str, Any]


# --------------------------------------------------------------------------- scoring


@dataclass(frozen=True, slots=True)
class ScoredItems:
    """Episodes scored under one evidence condition: per-method scores plus graph facts."""

    items: tuple[ConstructedEpisode, ...]
    scores: dict[str, tuple[EpisodeScores, ...]]
    recall: BoolArray  # harmful sink reachable from a private source (False for harmless episodes)

    def subset(self, keep: Sequence[int]) -> ScoredItems:
        """The same scores for the episodes at positions ``keep``."""
        return ScoredItems(
            tuple(self.items[i] for i in keep),
            {m: tuple(s[i] for i in keep) for m, s in self.scores.items()},
            self.recall[list(keep)],
        )

    def corpus(self, method: str) -> ScoredCorpus:
        """The flat arrays of one method."""
        return assemble(self.scores[method_name(method)])


def score_items(
    items: Sequence[ConstructedEpisode],
    policy: Policy,
    *,
    methods: Iterable[str] = METHOD_SELECTORS,
    graph: GraphFactory = standard_graph,
    transform: Callable[[Episode, Policy], Episode] | None = None,
    label: str = "scoring",
    progress: bool = False,
) -> ScoredItems:
    """Build each episode's graph once (from the gate's view of it) and score every method."""
    scorer = Scoring(policy, methods)
    rows: list[tuple[dict[str, EpisodeScores], bool]] = []
    with Progress(len(items), label, enabled=progress) as tick:
        for count, item in enumerate(items, start=1):
            seen = transform(item.episode, policy) if transform is not None else item.episode
            built = graph(policy, item.episode.episode_id)
            for record in seen.records:
                built.add(record)
            rows.append(scorer.score(built, seen, item))
            tick(count)
    return scorer.collect(items, rows)


def score_dropout(
    items: Sequence[ConstructedEpisode],
    policy: Policy,
    rates: Sequence[float],
    *,
    seed: int = 0,
    method: str = "carb_gcarb",
    progress: bool = False,
) -> dict[float, ScoredItems]:
    """One method under every dropout rate; each episode's full graph is built once, then thinned."""
    scorer = Scoring(policy, [method])
    rows: dict[float, list[tuple[dict[str, EpisodeScores], bool]]] = {rate: [] for rate in rates}
    with Progress(len(items), "edge dropout", enabled=progress) as tick:
        for count, item in enumerate(items, start=1):
            base = standard_graph(policy, item.episode.episode_id)
            for record in item.episode.records:
                base.add(record)
            for rate in rates:
                thinned = EdgeFilterGraph.dropped_from(
                    base, episode_id=item.episode.episode_id, dropout=rate, seed=seed
                )
                rows[rate].append(scorer.score(thinned, item.episode, item))
            tick(count)
    return {rate: scorer.collect(items, r) for rate, r in rows.items()}


class Scoring:
    """The selectors of some methods and the policy's scorer, applied to built graphs."""

    def __init__(self, policy: Policy, methods: Iterable[str]) -> None:
        self.policy = policy
        self.selectors: dict[str, Selector] = {
            name: make_selector(policy.with_selector(METHOD_SELECTORS[name]).selector)  # type: ignore[arg-type]
            for name in map(method_name, methods)
        }
        self.scorer = WeightedScorer(policy)

    def score(
        self, graph: PrefixGraph, seen: Episode, item: ConstructedEpisode
    ) -> tuple[dict[str, EpisodeScores], bool]:
        """Every method's scores of ``seen`` on ``graph`` (ledger of the original), and harmful-path recall."""
        harm, steps = _ledger_steps(self.policy, item)
        scores = {m: _episode_scores(graph, seen, sel, self.scorer, harm, steps) for m, sel in self.selectors.items()}
        recall = item.harmful and all(graph.is_reachable_sink(_node(seen, k)) for k in item.harmful_sinks)
        return scores, recall

    def collect(
        self, items: Sequence[ConstructedEpisode], rows: list[tuple[dict[str, EpisodeScores], bool]]
    ) -> ScoredItems:
        """Stack per-episode rows into :class:`ScoredItems`."""
        per = {m: tuple(r[0][m] for r in rows) for m in self.selectors}
        return ScoredItems(tuple(items), per, np.array([r[1] for r in rows], dtype=bool))


def _node(episode: Episode, ordinal: int) -> int:
    return episode.proposals()[ordinal].index


def _ledger_steps(policy: Policy, item: ConstructedEpisode) -> tuple[tuple[int, ...], dict[str, int | None]]:
    trace = Ledger(policy, item.labels).trace(item.episode)
    steps = {c: next((k for k, e in enumerate(trace.events) if c in e), None) for c in CATEGORIES}
    return tuple(k for k, e in enumerate(trace.events) if e), steps


def _episode_scores(
    graph: PrefixGraph,
    episode: Episode,
    selector: Selector,
    scorer: WeightedScorer,
    harm: tuple[int, ...],
    steps: dict[str, int | None],
) -> EpisodeScores:
    nodes = [r.index for r in episode.proposals()]
    session_id = replay_session_id(episode)  # as calibration replay: never the label-carrying episode id
    selections = [selector.select(graph, n, session_id) for n in nodes]
    return EpisodeScores(
        episode_id=episode.episode_id,
        scores=np.array([scorer.score(graph, n, s)[0] for n, s in zip(nodes, selections, strict=True)]),
        n_selected=np.array([len(s) for s in selections], dtype=np.int64),
        n_prefix=np.array(nodes, dtype=np.int64),
        harm_steps=harm,
        category_steps=steps,
        utility=bool(episode.meta.utility),
    )


# --------------------------------------------------------------------------- metrics


@dataclass(frozen=True, slots=True)
class Split:
    """Per-permutation calibration index rows and test masks over one cohort."""

    calib: npt.NDArray[np.int64]
    test: BoolArray

    @classmethod
    def protocol(cls, n: int, permutations: int, seed: int) -> Split:
        """The 50/50 permutations of :func:`guard.calibration.evaluate.split_indices`."""
        calib, test = split_indices(n, permutations, seed)
        mask = np.zeros((permutations, n), dtype=bool)
        np.put_along_axis(mask, test, True, axis=1)
        return cls(calib, mask)


def masked_mean(hit: BoolArray, mask: BoolArray) -> float:
    """Mean over permutations of the per-permutation rate of ``hit`` among ``mask``."""
    counts = mask.sum(axis=1)
    rates = np.where(counts > 0, (hit & mask).sum(axis=1) / np.maximum(counts, 1), np.nan)
    return float(np.nanmean(rates)) if np.isfinite(rates).any() else float("nan")


def benign_first_stops(scored: ScoredItems, corpus: ScoredCorpus, lam: FloatArray) -> BoolArray:
    """``[r, i]``: trajectory ``i``'s first stop at ``lam[r]`` is a benign-branch sink."""
    owner, lo, hi = [], [], []
    for i, item in enumerate(scored.items):
        start = int(corpus.offsets[i])
        for b in item.benign_sinks:
            owner.append(i)
            lo.append(corpus.cummax[start + b - 1] if b > 0 else -np.inf)
            hi.append(corpus.scores[start + b])
    out = np.zeros((lam.size, corpus.n), dtype=bool)
    if owner:
        col = lam[:, None]
        first = (np.array(lo)[None, :] <= col) & (col < np.array(hi)[None, :])
        for r in range(lam.size):
            out[r, np.array(owner)[first[r]]] = True
    return out


def method_row(
    method: str, scored: ScoredItems, corpus: ScoredCorpus, lam: FloatArray, test: BoolArray, *, braid: bool
) -> Row:
    """One row of the bench JSON for thresholds ``lam`` (one per permutation) on the test masks."""
    col = lam[:, None]
    harmful = np.array([it.harmful for it in scored.items], dtype=bool)
    loss = np.isfinite(corpus.harm_level)[None, :] & (corpus.harm_level[None, :] <= col)  # inf <= inf is no harm
    stopped = corpus.max_score[None, :] > col
    benign = benign_first_stops(scored, corpus, lam) if braid else stopped
    benign_mask = test if braid else test & ~harmful[None, :]
    return {
        "method": method,
        "loss": masked_mean(loss, test),
        "intervention": masked_mean(stopped, test),
        "utility": masked_mean(corpus.utility[None, :] & ~stopped, test),
        "benign_stop": masked_mean(benign, benign_mask),
        "harm_stop": masked_mean(~loss, test & harmful[None, :]),
    }


def cohort_rows(scored: ScoredItems, split: Split, alpha: float, *, braid: bool) -> list[Row]:
    """No guard, then CARB with every selector, calibrated per permutation."""
    any_method = next(iter(scored.scores))
    base = scored.corpus(any_method)
    rows = [method_row("no_guard", scored, base, np.full(split.test.shape[0], np.inf), split.test, braid=braid)]
    for method in scored.scores:
        corpus = scored.corpus(method)
        lam = carb_lambdas(corpus, split.calib, alpha)
        rows.append(method_row(method, scored, corpus, lam, split.test, braid=braid))
    return rows
