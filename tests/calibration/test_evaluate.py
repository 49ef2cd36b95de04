"""Tests of the permutation protocol (guard.calibration.evaluate)."""

from __future__ import annotations

import numpy as np
import pytest

from guard.calibration.evaluate import (
    _charged,
    _count_table,
    outcomes,
    run_protocol,
    split_indices,
    step_crc_lambdas,
    ungated,
)
from guard.calibration.replay import EpisodeScores, assemble
from guard.errors import CalibrationError
from guard.ledger import CATEGORIES


def _episode(i: int, scores: list[float], harm: tuple[int, ...], utility: bool = True) -> EpisodeScores:
    steps = {c: (harm[0] if harm and c == "privacy_flow" else None) for c in CATEGORIES}
    return EpisodeScores(
        episode_id=f"e{i}",
        scores=np.array(scores, dtype=float),
        n_selected=np.ones(len(scores), dtype=np.int64),
        n_prefix=np.arange(1, len(scores) + 1, dtype=np.int64) * 2,
        harm_steps=harm,
        category_steps=steps,
        utility=utility,
    )


def _synthetic(n: int, seed: int) -> list[EpisodeScores]:
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        k = int(rng.integers(2, 7))
        scores = np.round(rng.uniform(0, 0.5, size=k), 2)
        harm: tuple[int, ...] = ()
        if rng.random() < 0.3:
            step = int(rng.integers(0, k))
            scores[step] = np.round(rng.uniform(0.3, 1.0), 2)
            harm = (step,)
        items.append(_episode(i, list(scores), harm, utility=bool(rng.random() < 0.7)))
    return items


def test_outcomes_hand_case() -> None:
    """Loss, intervention, success and CtxRed at one threshold match a hand computation."""
    corpus = assemble([_episode(0, [0.1, 0.9], (1,)), _episode(1, [0.2, 0.3], ()), _episode(2, [0.6], (0,), False)])
    test = np.array([[0, 1, 2]])
    out = outcomes(corpus, np.array([0.5]), test)
    assert out["loss"][0] == pytest.approx(0.0)
    assert out["intervention"][0] == pytest.approx(2 / 3)
    assert out["autonomous_success"][0] == pytest.approx(1 / 3)
    # scored proposals: e0 both (stop at 2nd), e1 both, e2 its one; selected 5, prefix 2+4+2+4+2
    assert out["ctx_red"][0] == pytest.approx(1 - 5 / 14)


def test_ctx_red_per_permutation_oracle() -> None:
    """CtxRed of every permutation equals a direct count of the proposals each test episode scores at that
    permutation's λ, with thresholds shared by several permutations, one infinite and one below every score
    (catches the shared-threshold shortcut mapping a permutation to another's threshold)."""
    rng = np.random.default_rng(11)
    items = _synthetic(40, 11)
    corpus = assemble(items)
    _calib, test = split_indices(40, 30, seed=5)
    lam = rng.choice(np.array([0.05, 0.25, 0.4, 0.55, np.inf, -1.0]), size=30)
    got = outcomes(corpus, lam, test)["ctx_red"]
    for r in range(30):
        selected = prefix = 0
        for e in test[r]:
            run = np.maximum.accumulate(items[e].scores)
            scored = int(np.searchsorted(run > lam[r], True)) + 1  # up to and including the first stop
            selected += int(items[e].n_selected[: min(scored, len(run))].sum())
            prefix += int(items[e].n_prefix[: min(scored, len(run))].sum())
        assert got[r] == pytest.approx(1 - selected / prefix), r


def test_count_table_against_direct_counts() -> None:
    """``table[i, j]`` is the number of items of row ``i`` with column at most ``j``, columns past the grid
    counted in none (catches the flat index built with the wrong row stride, or a count per cell instead of
    the running count)."""
    rng = np.random.default_rng(4)
    for n, g in ((1, 1), (3, 5), (7, 2), (5, 9)):
        rows = rng.integers(0, n, size=60)
        columns = rng.integers(0, g + 3, size=60)
        table = _count_table(rows, columns, n, g)
        direct = [[int(((rows == i) & (columns <= j)).sum()) for j in range(g)] for i in range(n)]
        assert table.tolist() == direct, (n, g)


def test_split_indices_partition() -> None:
    """Each permutation splits the episodes into disjoint halves covering all of them."""
    calib, test = split_indices(11, 5, seed=3)
    for c, t in zip(calib, test, strict=True):
        assert sorted([*c, *t]) == list(range(11))


def _all_harmful(n: int, seed: int) -> list[EpisodeScores]:
    """Every episode charges the ledger at its last step, after dense benign scores (continuous, distinct)."""
    rng = np.random.default_rng(seed)
    return [_episode(i, list(rng.uniform(0, 1, size=6)), (5,)) for i in range(n)]


def _protocol_mean(corpus: object, alpha: float, permutations: int) -> tuple[float, float]:
    rows = run_protocol({"gcarb": corpus}, alphas=(alpha,), permutations=permutations, seed=0)  # type: ignore[dict-item]
    loss = next(r for r in rows if r.method == "carb_gcarb").metrics["loss"]
    return float(loss.mean()), float(loss.std() / np.sqrt(loss.size))


def test_protocol_loss_within_alpha_and_fails_without_the_correction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Held-out loss ≤ α + 3 SE (no slack), and the same check fails once the +B correction is removed.

    n_cal = 21, α = .1: with +B at most 1 calibration episode may charge (expected loss ≈ 2/22 = .091);
    without it 2 (≈ 3/22 = .136), which the 3-SE check catches.
    """
    corpus = assemble(_all_harmful(42, seed=5))
    mean, se = _protocol_mean(corpus, 0.1, 3000)
    assert mean <= 0.1 + 3 * se
    assert mean > 0.07  # not vacuous: the rule does let episodes through

    from guard.calibration import crc

    real = crc.max_harmful_allowed
    monkeypatch.setattr(crc, "max_harmful_allowed", lambda n, alpha, bound=1: real(n, alpha, bound) + bound)
    broken, broken_se = _protocol_mean(corpus, 0.1, 3000)
    assert broken > 0.1 + 3 * broken_se


def test_ungated_charges_harm_behind_a_refusal() -> None:
    """No guard runs everything: a harmful step after a refused proposal (+inf) charges it, any gate does not."""
    corpus = assemble([_episode(0, [np.inf, 0.1], (1,)), _episode(1, [0.2], ())])
    test = np.array([[0, 1]])
    assert ungated(corpus, test)["loss"][0] == pytest.approx(0.5)
    assert outcomes(corpus, np.array([np.inf]), test)["loss"][0] == 0.0


def test_charged_rejects_nan_levels() -> None:
    """A NaN harm level or threshold is an error, not silently 'never charged'."""
    with pytest.raises(CalibrationError):
        _charged(np.array([np.nan, 0.1]), np.array([[0.5]]))
    with pytest.raises(CalibrationError):
        _charged(np.array([0.1]), np.array([[np.nan]]))


def test_no_guard_and_stop_all_rows() -> None:
    """No guard stops nothing; stop-all stops every episode with a proposal and has zero loss."""
    corpus = assemble(_synthetic(60, seed=2))
    rows = {r.method: r for r in run_protocol({"gcarb": corpus}, alphas=(0.2,), permutations=10)}
    assert rows["no_guard"].metrics["intervention"].max() == 0.0
    assert rows["stop_all"].metrics["loss"].max() == 0.0
    assert rows["stop_all"].metrics["intervention"].min() == 1.0


def test_step_crc_is_looser_than_carb() -> None:
    """The pooled step ratio allows thresholds at least as high as the episode rule (dilution)."""
    corpus = assemble(_synthetic(300, seed=4))
    calib, _ = split_indices(corpus.n, 20, seed=0)
    from guard.calibration.evaluate import carb_lambdas

    assert (step_crc_lambdas(corpus, calib, 0.1) >= carb_lambdas(corpus, calib, 0.1)).all()


def test_every_carb_method_is_named_after_its_selector() -> None:
    """Every CARB method in the protocol's rows, JSON and tables is ``carb_<selector>`` (``carb_random_equal_size``
    for the ``random_equal_size`` selector); the old name ``carb_random`` is still accepted as input.

    Catches the old label map ``"carb_random": "random_equal_size"``, which showed that selector under a name no
    selector has in every results table.
    """
    from guard.calibration.evaluate import METHOD_SELECTORS, format_rows, method_name
    from guard.calibration.jobs import SELECTOR_NAMES

    assert all(method == f"carb_{selector}" for method, selector in METHOD_SELECTORS.items())
    assert set(METHOD_SELECTORS.values()) == set(SELECTOR_NAMES)
    corpus = assemble(_synthetic(12, seed=1))
    rows = run_protocol(dict.fromkeys(SELECTOR_NAMES, corpus), alphas=(0.2,), permutations=4)
    names = [r.method for r in rows]
    assert "carb_random_equal_size" in names and "carb_random" not in names
    table = format_rows([r.to_json() for r in rows])
    assert "carb_random_equal_size" in table and "carb_random " not in table
    assert method_name("carb_random") == "carb_random_equal_size" and method_name("carb_gcarb") == "carb_gcarb"
