"""Tests of the exact ceiling (guard.calibration.ceiling): brute force over every gate on tiny corpora."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from guard.calibration import ceiling as ceil
from guard.calibration.ceiling_jobs import ceiling_rows, tied_harm
from guard.calibration.replay import EpisodeScores, ScoredCorpus, assemble
from guard.ledger import CATEGORIES
from guard.scorer import FEATURES

F = len(FEATURES)


def _episode(
    i: int,
    rows: list[tuple[int, ...]],
    harm: int | None,
    utility: bool,
    refused: int | None = None,
    out_of_scope: int | None = None,
) -> EpisodeScores:
    """An episode whose step ``k`` fires features ``rows[k]`` (indices into FEATURES)."""
    k = len(rows)
    x = np.zeros((k, F), dtype=bool)
    for step, on in enumerate(rows):
        x[step, list(on)] = True
    scores = np.zeros(k)
    if refused is not None:
        scores[refused] = np.inf
    in_scope = np.ones(k, dtype=bool)
    if out_of_scope is not None:
        in_scope[out_of_scope] = False
    harms = () if harm is None else (harm,)
    return EpisodeScores(
        episode_id=f"e{i}",
        scores=scores,
        n_selected=np.ones(k, dtype=np.int64),
        n_prefix=np.arange(1, k + 1, dtype=np.int64),
        harm_steps=harms,
        category_steps={c: (harm if c == "privacy_flow" else None) for c in CATEGORIES},
        utility=utility,
        features=x,
        in_scope=in_scope,
    )


def _random_corpus(seed: int, n: int = 9, width: int = 3) -> ScoredCorpus:
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        k = int(rng.integers(1, 4))
        rows = [tuple(int(f) for f in np.flatnonzero(rng.random(width) < 0.5)) for _ in range(k)]
        harm = int(rng.integers(0, k)) if rng.random() < 0.45 else None
        refused = int(rng.integers(0, k)) if rng.random() < 0.1 else None
        scope = int(rng.integers(0, k)) if rng.random() < 0.2 else None
        items.append(_episode(i, rows, harm, bool(rng.random() < 0.8), refused, scope))
    return assemble(items)


def _replayed(corpus: ScoredCorpus, gate: set[bytes], width: int) -> tuple[int, int]:
    """``(charged, harm-free successes)`` replaying every episode step by step under ``gate`` (vector bytes)."""
    assert corpus.features is not None and corpus.in_scope is not None and corpus.first_harm is not None
    charged = kept = 0
    for i in range(corpus.n):
        lo, hi = int(corpus.offsets[i]), int(corpus.offsets[i + 1])
        stopped = harmed = False
        for j in range(lo, hi):
            refused = not np.isfinite(corpus.scores[j])
            gated = corpus.in_scope[j] and corpus.features[j, :width].tobytes() in gate
            if refused or gated:
                stopped = True
                break
            if j == corpus.first_harm[i]:
                harmed = True
        charged += harmed
        kept += bool(corpus.utility[i]) and not stopped and not harmed
    return charged, kept


def _brute_force(corpus: ScoredCorpus, allowed: int, width: int, monotone: bool) -> int | None:
    """Best kept count over every gate (every up-set when ``monotone``) of the observed in-scope vectors."""
    assert corpus.features is not None and corpus.in_scope is not None
    seen = {
        corpus.features[j, :width].tobytes(): corpus.features[j, :width]
        for j in range(corpus.scores.size)
        if corpus.in_scope[j] and np.isfinite(corpus.scores[j])
    }
    keys = list(seen)
    best: int | None = None
    for size in range(len(keys) + 1):
        for gate in itertools.combinations(keys, size):
            chosen = set(gate)
            if monotone and any(w not in chosen for v in chosen for w in keys if (seen[v] <= seen[w]).all()):
                continue
            charged, kept = _replayed(corpus, chosen, width)
            if charged <= allowed and (best is None or kept > best):
                best = kept
    return best


@pytest.mark.parametrize("seed", range(40))
def test_ceiling_equals_brute_force(seed: int) -> None:
    """Both ceilings equal brute force over every gate and every up-set, at every loss budget (catches a
    wrong reduction of a set to its maximal members, a missing order pair, an off-by-one in the budget)."""
    corpus = _random_corpus(seed)
    problem = ceil.gate_problem(corpus, [0, 1, 2])
    for allowed in range(0, 5):
        for monotone in (True, False):
            expected = _brute_force(corpus, allowed, 3, monotone)
            assert ceil.solve(problem, allowed, monotone=monotone) == expected, (seed, allowed, monotone)


def test_monotone_gate_cannot_split_a_dominated_pair() -> None:
    """A harmful step below a benign step's vector: the monotone ceiling must lose the benign success, any
    function need not (catches monotone constraints dropped or pointing the wrong way)."""
    items = [
        _episode(0, [(0,)], harm=0, utility=False),
        _episode(1, [(0, 1)], harm=None, utility=True),
        _episode(2, [(1,)], harm=None, utility=True),
    ]
    problem = ceil.gate_problem(assemble(items), [0, 1])
    assert ceil.solve(problem, 0, monotone=False) == 2
    assert ceil.solve(problem, 0, monotone=True) == 1


def test_up_set_check() -> None:
    """``is_up_set`` accepts closed gates and refuses one that misses a vector above a member."""
    vectors = np.array([[0, 0], [1, 0], [1, 1]], dtype=bool)
    assert ceil.is_up_set(vectors, frozenset({1, 2}))
    assert not ceil.is_up_set(vectors, frozenset({1}))


def test_rows_use_both_loss_rules() -> None:
    """The in-sample rule allows ⌊α n⌋ charged episodes, the CRC rule ⌊α (n+1)⌋ - 1 (catches the rules swapped)."""
    items = [_episode(i, [(0,)], harm=0, utility=False) for i in range(2)]
    items += [_episode(10 + i, [(0,)], harm=None, utility=True) for i in range(18)]
    corpus = assemble(items)
    row = ceiling_rows(corpus, [0.1], FEATURES[:1])[0]
    assert math.floor(0.1 * 20) == 2
    assert row["any_function_empirical"] == 18  # two charged harms fit the budget: gate nothing
    assert row["any_function_crc"] == 0  # budget 1: the shared vector must be refused
    assert row["no_guard"] == 18


def test_tied_harm_counts_shared_vectors() -> None:
    """A harmful first step counts as tied only when a harm-free successful episode has its vector."""
    items = [
        _episode(0, [(0,)], harm=0, utility=False),
        _episode(1, [(1,)], harm=0, utility=False),
        _episode(2, [(0,)], harm=None, utility=True),
        _episode(3, [(1,)], harm=None, utility=False),
    ]
    assert tied_harm(assemble(items), FEATURES[:2]) == (1, 2)


def test_cli_refuses_unknown_features(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown feature name is one stderr line naming it and exit 2, before any scoring."""
    from guard.cli import main

    assert main(["ceiling", "--without", "no_such_feature", "--corpus", "gpt-4o-2024-05-13"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no_such_feature" in err[0]
    assert main(["ceiling", "--features", "canary,bogus"]) == 2
    assert "bogus" in capsys.readouterr().err
