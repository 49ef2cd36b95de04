"""The wording-defaults study: its objective is the worst wording, and a held-out wording or model chooses nothing."""

from __future__ import annotations

import numpy as np
import pytest

from guard.calibration.evaluate import split_indices
from guard.calibration.replay import EpisodeScores, ScoredCorpus, assemble
from guard.features import FEATURES
from guard.ledger import CATEGORIES
from guard.studies._wording_search import FLOORS, Bench, Metric, choose, objective
from guard.studies.wording_defaults import targets

F = len(FEATURES)


def _corpus(n: int, seed: int, signal: int) -> ScoredCorpus:
    """Harmful episodes fire feature ``signal`` on their harmful step; feature 1 fires at random everywhere."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        x = np.zeros((3, F), dtype=bool)
        x[:, 1] = rng.random(3) < 0.5
        harmful = rng.random() < 0.3
        if harmful:
            x[2, signal] = True
        harm = (2,) if harmful else ()
        items.append(
            EpisodeScores(
                episode_id=f"e{i}",
                scores=np.zeros(3),
                n_selected=np.ones(3, dtype=np.int64),
                n_prefix=np.arange(1, 4, dtype=np.int64),
                harm_steps=harm,
                category_steps={c: (harm[0] if harm and c == "privacy_flow" else None) for c in CATEGORIES},
                utility=bool(rng.random() < 0.8),
                features=x,
                in_scope=np.ones(3, dtype=bool),
            )
        )
    return assemble(items)


def _bench(scored: dict[str, ScoredCorpus]) -> Bench:
    n = next(iter(scored.values())).n
    calib, test = split_indices(n, 5, 0)
    return Bench.of(scored, [("s", str(i % 4)) for i in range(n)], calib, test)


@pytest.mark.parametrize("alpha", list(FLOORS))
def test_objective_is_the_worst_wording_with_a_floor_penalty(alpha: float) -> None:
    """Catches an objective that averages over wordings (one bad wording hides among good ones), reads a wording
    it was not given, or ignores the harm-free floor."""
    good, bad = Metric(alpha - 0.02, 1.0), Metric(alpha + 0.05, 1.0)
    metrics = {("as is", alpha): good, ("a", alpha): good, ("b", alpha): good, ("c", alpha): bad}
    assert objective(metrics, ["as is", "a", "b", "c"]) == pytest.approx(0.05 - 1e-3)
    assert objective(metrics, ["as is", "a", "b"]) == pytest.approx(-0.02 - 1e-3)
    short = {("as is", alpha): Metric(alpha - 0.02, FLOORS[alpha] - 0.1)}
    assert objective(short, ["as is"]) > objective({("as is", alpha): good}, ["as is"]) + 0.09


def test_a_held_out_wording_or_episode_never_chooses() -> None:
    """Catches a choice that fits or judges on a wording it was told to leave out, or on episodes outside its
    set: replacing that wording's corpus, or those episodes' features, by anything leaves the weights as they are."""
    base = _corpus(240, 1, signal=0)
    hidden = _corpus(240, 2, signal=2)  # a wording whose signal is another feature
    other = _corpus(240, 3, signal=3)
    bench = _bench({"as is": base, "hidden": hidden, "other": other})
    free = FEATURES[:4]
    chosen, _, _ = choose(bench, np.arange(240), free, ["as is", "other"])
    swapped = _bench({"as is": base, "hidden": _corpus(240, 9, signal=1), "other": other})
    assert choose(swapped, np.arange(240), free, ["as is", "other"])[0] == chosen
    seen = choose(bench, np.arange(240), free, ["as is", "hidden", "other"])[0]
    assert seen != chosen  # the hidden wording does change the choice when it is not left out
    assert choose(bench, np.arange(120), free, ["as is"])[0] != choose(bench, np.arange(240), free, ["as is"])[0]


def test_targets_flag_every_miss_and_only_misses() -> None:
    """Catches a target check that lets a held-out row above α + .01 or under the harm-free floor through, or
    that flags a row within both."""
    ok = {f"{a:g}": {"loss": a, "harm_free_ratio": FLOORS[a]} for a in FLOORS}
    high = {**ok, "0.1": {"loss": 0.111, "harm_free_ratio": 0.99}}
    low = {**ok, "0.05": {"loss": 0.0, "harm_free_ratio": 0.89}}
    out = {
        "development": {"instructed_value_off": {"as is": ok, "w": high}, "instructed_value_on": {"as is": ok}},
        "leave_one_wording_out": {"w": ok},
        "leave_one_model_out": {"m": {"weights": {}, "l2": 0.1, "as is": low}},
    }
    misses = targets(out)["misses"]
    assert len(misses) == 2
    assert misses[0].startswith("development at α 0.1: w") and misses[1].startswith("leave out model m at α 0.05")
    clean = {
        "development": {"instructed_value_off": {"as is": ok}, "instructed_value_on": {"as is": ok}},
        "leave_one_wording_out": {"w": ok},
        "leave_one_model_out": {"m": {"weights": {}, "l2": 0.1, "as is": ok}},
    }
    assert targets(clean)["misses"] == []


def test_command_line_flags_are_read_and_unknown_ones_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches the study's hand-read flags (no parser outside guard/cli) dropping a value (``--cache DIR`` read
    as a flag), taking a non-number for ``--workers``, or running on an unknown flag instead of printing usage."""
    from pathlib import Path

    from guard.studies._wording_data import options as _options
    from guard.studies.wording_defaults import main

    got = _options(["--json", "--cache", "/tmp/c", "--workers", "2", "--rescore"])
    assert got == {"json": True, "rescore": True, "cache": Path("/tmp/c"), "workers": 2}
    assert _options(["--workers", "two"]) is None and _options(["--cache"]) is None and _options(["-x"]) is None
    assert main(["--bogus"]) == 2 and "usage: python -m guard.studies.wording_defaults" in capsys.readouterr().err
