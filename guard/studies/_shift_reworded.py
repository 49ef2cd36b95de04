"""The reworded corpora of the shift report, scored: one rewording per episode and style per process.

Reworded episodes are kept by the original episode object, so the pooled corpus (whose episodes are
the per-model corpora's own objects) reuses the per-model rewordings, and their scores, which
:func:`guard.calibration.jobs.score_selectors` keeps per episode object.  A benign episode's rewording
is the episode itself, so its scores are never recomputed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from guard.calibration.jobs import Corpus, score_selectors
from guard.calibration.replay import ScoredCorpus
from guard.corpora.reword import (
    STYLES,
    Reworded,
    RewordReport,
    check_style,
    goal_table,
    reword_episode,
    shipped_injection_patterns,
)
from guard.errors import CorpusError
from guard.policy import SelectorName
from guard.records import Episode

SELECTOR: SelectorName = "gcarb"

#: (style, seed, id of the original episode) → (the original, kept alive so no other object takes its id; its rewording)
_MEMO: dict[tuple[str, int, int], tuple[Episode, Reworded]] = {}
_MEMO_MAX = 200_000


def reword_all(episodes: Sequence[Episode], style: str, seed: int = 0) -> tuple[list[Episode], RewordReport]:
    """``episodes`` reworded in ``style`` (memoised per episode object) and the counts."""
    if style not in STYLES:
        raise CorpusError(f"unknown rewording style {style!r}; choose from {', '.join(STYLES)}")
    patterns = shipped_injection_patterns()
    check_style(STYLES[style], patterns)
    goals = goal_table(episodes)
    if len(_MEMO) > _MEMO_MAX:
        _MEMO.clear()
    report = RewordReport(style)
    out: list[Episode] = []
    for episode in episodes:
        key = (style, seed, id(episode))
        hit = _MEMO.get(key)
        if hit is None:
            hit = _MEMO[key] = (
                episode,
                reword_episode(episode, STYLES[style], seed=seed, goals=goals, patterns=patterns),
            )
        report.add(hit[1])
        out.append(hit[1].episode)
    return out, report


def reworded_corpus(
    corpus: Corpus, styles: Sequence[str] | None, *, seed: int = 0, progress: bool = False, workers: int = 1
) -> tuple[dict[str, ScoredCorpus], dict[str, dict[str, Any]]]:
    """Style → the scored reworded corpus, and style → the rewording counts."""
    scored: dict[str, ScoredCorpus] = {}
    counts: dict[str, dict[str, Any]] = {}
    for style in styles if styles is not None else tuple(STYLES):
        episodes, report = reword_all(corpus.episodes, style, seed)
        data, _ = score_selectors(episodes, [SELECTOR], progress=progress, workers=workers)
        scored[style] = data[SELECTOR]
        counts[style] = {
            "episodes_changed": sum(1 for a, b in zip(corpus.episodes, episodes, strict=True) if a is not b),
            "injected_texts": report.n_texts,
            "left_unchanged": report.n_left,
            "occurrences_reworded": report.n_occurrences,
        }
    return scored, counts
