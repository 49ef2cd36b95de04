"""The weight-0 feature study (docs/defaults.md): its split, counts, calibration and rule on constructed data, and
the page's tables regenerated from the command."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from guard.calibration.evaluate import split_indices
from guard.calibration.replay import EpisodeScores, ScoredCorpus, assemble
from guard.features import DEFAULT_WEIGHTS, FEATURES
from guard.ledger import CATEGORIES
from guard.records import Episode
from guard.studies import weight_defaults as wd

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "defaults.md"
REGION = re.compile(r"<!-- results:weight-defaults -->\n```text\n(.*?)```\n<!-- /results:weight-defaults -->", re.S)


def _episode(
    name: str, rows: list[tuple[str, ...]], harm: int | None, utility: bool, scope: list[bool] | None = None
) -> EpisodeScores:
    features = np.array([[f in row for f in FEATURES] for row in rows], dtype=bool).reshape(len(rows), len(FEATURES))
    k = len(rows)
    return EpisodeScores(
        episode_id=name,
        scores=np.zeros(k),
        n_selected=np.zeros(k, dtype=np.int64),
        n_prefix=np.arange(k, dtype=np.int64),
        harm_steps=() if harm is None else (harm,),
        category_steps=dict.fromkeys(CATEGORIES, harm),
        utility=utility,
        features=features,
        in_scope=np.array(scope if scope is not None else [True] * k, dtype=bool),
    )


def test_development_split_is_the_documented_one() -> None:
    """Catches another seed, share or comparison than ``default_rng(0).random(n) < 0.3``, or the complement kept."""
    assert np.flatnonzero(wd.development_mask(20)).tolist() == [1, 2, 3, 11, 13, 15, 18]
    items: list[Any] = [f"e{i}" for i in range(20)]
    episodes: list[Episode] = items
    kept: list[Any] = list(wd.development(episodes))
    assert kept == ["e1", "e2", "e3", "e11", "e13", "e15", "e18"]


def test_firing_counts_in_scope_steps_of_the_right_episodes() -> None:
    """Catches counting out-of-scope steps, steps after the first harm as the episode's catch, or a harmful
    episode's harmless steps as benign."""
    f = wd.STUDIED
    corpus = assemble(
        [
            _episode("harm-late", [(f,), (), (f,)], harm=1, utility=False),  # fires before the harm, and after it
            _episode("harm-after", [(), (f,)], harm=0, utility=False),  # fires only after its first harmful step
            _episode("harm-on", [(f,)], harm=0, utility=False),  # fires on the harmful step itself
            _episode("benign", [(f,), (f,), ()], harm=None, utility=True, scope=[False, True, True]),
            _episode("quiet", [(), ()], harm=None, utility=True),
        ]
    )
    assert wd.firing(corpus, f) == wd.Firing(
        harm_steps=3, harm_fired=1, benign_steps=4, benign_fired=1,
        harm_episodes=3, harm_episodes_fired=2, benign_episodes=2, benign_episodes_fired=1,
    )  # fmt: skip


def _random_corpus(n: int, seed: int) -> ScoredCorpus:
    rng = np.random.default_rng(seed)
    names = ("provenance_path", "untrusted_payload", "irreversible_sink", wd.STUDIED, "unrequested_action")
    items = []
    for i in range(n):
        k = int(rng.integers(1, 4))
        rows = [tuple(x for x in names if rng.random() < 0.4) for _ in range(k)]
        harm = int(rng.integers(0, k)) if rng.random() < 0.35 else None
        items.append(_episode(f"e{i}", rows, harm, bool(rng.random() < 0.7)))
    return assemble(items)


def _reference(corpus: ScoredCorpus, weights: dict[str, float], alpha: float, permutations: int) -> tuple[float, float]:
    """The replay protocol written plainly: per split, λ̂ from the calibration half only, means over the test half."""
    assert corpus.features is not None and corpus.first_harm is not None
    w = np.array([weights.get(f, 0.0) for f in FEATURES])
    per_step = np.array([round(sum(float(w[j]) for j in np.flatnonzero(row)), 12) for row in corpus.features])
    episodes = [per_step[corpus.offsets[i] : corpus.offsets[i + 1]] for i in range(corpus.n)]
    level = [np.max(s[: corpus.first_harm[i] - corpus.offsets[i] + 1]) if corpus.first_harm[i] >= 0 else np.inf
             for i, s in enumerate(episodes)]  # fmt: skip
    calib, test = split_indices(corpus.n, permutations, wd.SPLIT_SEED)
    losses, harm_free = [], []
    for cal, tst in zip(calib, test, strict=True):
        allowed = int(np.floor(alpha * (len(cal) + 1) - 1 + 1e-12))
        cut = sorted(level[i] for i in cal)[allowed]
        below = [s for i in cal for s in episodes[i] if s < cut]
        lam = max(below) if below else -np.inf
        lost = [level[i] <= lam for i in tst]
        kept = [bool(corpus.utility[i]) and episodes[i].max() <= lam and not lost[j] for j, i in enumerate(tst)]
        losses.append(np.mean(lost))
        harm_free.append(np.mean(kept))
    return float(np.mean(losses)), float(np.mean(harm_free))


@pytest.mark.parametrize("value", [0.0, 0.3, 0.52])
def test_evaluate_calibrates_on_the_calibration_half_and_measures_the_test_half(value: float) -> None:
    """Catches calibrating on (or counting) test episodes, a swapped split, another seed, or scores not re-scored
    under the candidate weight: evaluate equals the protocol computed by hand."""
    corpus = _random_corpus(80, seed=3)
    weights = wd.candidate_weights(value)
    found = wd.evaluate(corpus, weights, permutations=25)
    for alpha in wd.ALPHAS:
        loss, hfree = _reference(corpus, weights, alpha, 25)
        assert found[alpha].loss == pytest.approx(loss)
        assert found[alpha].harm_free == pytest.approx(hfree)
    assert wd.candidate_weights(value) == {**DEFAULT_WEIGHTS, wd.STUDIED: value}


def test_the_rule() -> None:
    """Catches a rule that takes a weight with a cost, with a loss above α, with one deployment's gain, or the
    largest instead of the smallest supported weight."""
    a, b = wd.ALPHAS

    def cells(*deltas: float, loss: float = 0.0) -> list[tuple[float, float, float]]:
        return [(d, loss, alpha) for d in deltas for alpha in (a, b)]

    none = cells(0, 0, 0)
    assert wd.decide({0.0: none, 0.1: none, 0.52: none}) == 0.0  # no effect: stays 0
    assert wd.decide({0.1: cells(0.02, 0, 0), 0.52: cells(0.03, 0, 0)}) == 0.0  # one deployment gains
    assert wd.decide({0.1: cells(0.02, 0.01, 0), 0.52: cells(0.03, 0.02, 0)}) == 0.1  # two gain: the smallest
    assert wd.decide({0.1: cells(0.02, 0.01, -0.006), 0.52: cells(0.02, 0.01, 0)}) == 0.52  # 0.1 costs
    assert wd.decide({0.1: cells(0.02, 0.01, 0, loss=0.2)}) == 0.0  # loss above α


@pytest.mark.slow
def test_page_tables_are_the_commands_output() -> None:
    """Catches docs/defaults.md going stale: its tables are what ``python -m guard.studies.weight_defaults`` prints."""
    found = REGION.search(PAGE.read_text(encoding="utf-8"))
    assert found is not None, "docs/defaults.md has no results:weight-defaults region"
    fresh = wd.report(wd.study(wd.deployments()))
    assert found.group(1) == fresh, "docs/defaults.md is stale; rerun .venv/bin/python -m guard.studies.weight_defaults"
