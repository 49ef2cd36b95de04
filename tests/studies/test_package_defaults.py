"""The package-defaults study: only the free control rows move, a held-out wording never chooses, the objective sees
both α, and the table's weights are the ones the documented command printed."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from guard import features as table
from guard.calibration.evaluate import split_indices
from guard.calibration.replay import EpisodeScores, ScoredCorpus, assemble
from guard.features import FEATURES
from guard.ledger import CATEGORIES
from guard.studies._wording_search import FLOORS, Bench, Metric
from guard.studies.package_defaults import FIXED, FREE, GRID, descend, package_weights, summed

ROOT = Path(__file__).resolve().parents[2]
F = len(FEATURES)
NOISE = FEATURES.index(table.PRIVATE_IN_CONTEXT.name)


def _corpus(n: int, seed: int, signal: int) -> ScoredCorpus:
    """Harmful episodes fire feature ``signal`` on their harmful step; a fixed row fires at random everywhere."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        x = np.zeros((3, F), dtype=bool)
        x[:, NOISE] = rng.random(3) < 0.5
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


def test_only_free_rows_move_and_a_signal_row_is_chosen() -> None:
    """Catches a choice that moves a fixed default or a row outside the free set (control_untrusted_only, which
    fires on calls the user asked for), or that cannot find the one row the harmful steps fire."""
    signal = FEATURES.index(table.CONJUNCTIONS[0].name)
    outside = FEATURES.index(table.CONTROL_UNTRUSTED_ONLY.name)
    corpus = _corpus(240, 1, signal)
    bench = _bench({"as is": corpus})
    chosen, _ = descend(bench, ["as is"])
    assert set(chosen) <= set(FREE) and table.CONTROL_UNTRUSTED_ONLY.name not in FREE
    assert chosen.get(table.CONJUNCTIONS[0].name, 0) > 0 and all(v in GRID for v in chosen.values())
    assert descend(_bench({"as is": _corpus(240, 1, outside)}), ["as is"])[0] == {}
    assert not set(FIXED) & set(FREE) and table.INSTRUCTED_VALUE.name not in FIXED


def test_a_held_out_wording_never_chooses() -> None:
    """Catches a choice that judges on a wording it was told to leave out: replacing that wording's corpus by
    anything leaves the weights as they are (and, not left out, it does change them)."""
    base = _corpus(240, 1, signal=FEATURES.index(table.CONJUNCTIONS[0].name))
    hidden = _corpus(240, 2, signal=FEATURES.index(table.CONJUNCTIONS[2].name))
    chosen, _ = descend(_bench({"as is": base, "hidden": hidden}), ["as is"])
    swapped = _corpus(240, 9, signal=FEATURES.index(table.CONJUNCTIONS[4].name))
    assert descend(_bench({"as is": base, "hidden": swapped}), ["as is"])[0] == chosen
    assert descend(_bench({"as is": base, "hidden": hidden}), ["as is", "hidden"])[0] != chosen


def test_the_objective_counts_each_alpha() -> None:
    """Catches an objective that is the worst over both α (a move that helps only at the α that is not the worst
    would look worthless, the search's stall this study exists to avoid)."""
    a, b = FLOORS
    worse = {("as is", a): Metric(a + 0.05, 1.0), ("as is", b): Metric(b - 0.01, 1.0)}
    better = {**worse, ("as is", b): Metric(b - 0.03, 1.0)}
    assert summed(better, ["as is"]) < summed(worse, ["as is"]) - 0.019


def test_the_table_holds_the_weights_the_page_printed() -> None:
    """Catches a feature table whose control-row defaults differ from the ones the documented command chose (the
    line docs/defaults.md quotes from its output), and a fixed default that moved."""
    page = (ROOT / "docs" / "defaults.md").read_text(encoding="utf-8")
    line = re.search(r"chosen control weights: (.*)", page)
    assert line is not None
    printed = {k: float(v) for k, v in (item.split("=") for item in line.group(1).strip("` ").split(", "))}
    weights = package_weights()
    assert {k: weights[k] for k in FREE if k in weights} == printed
    assert {k: v for k, v in weights.items() if k not in FREE} == {
        **FIXED,
        table.INSTRUCTED_VALUE.name: table.INSTRUCTED_VALUE.weight,
    }


def test_command_line_flags_are_read_and_unknown_ones_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches the hand-read flags dropping a value (``--cache DIR`` read as a flag), taking a non-number for
    ``--workers``, or running on an unknown flag instead of printing usage."""
    from guard.studies._wording_data import options as _options
    from guard.studies.package_defaults import main

    got = _options(["--json", "--cache", "/tmp/c", "--workers", "2", "--rescore"])
    assert got == {"json": True, "rescore": True, "cache": Path("/tmp/c"), "workers": 2}
    assert _options(["--workers", "two"]) is None and _options(["--cache"]) is None and _options(["-x"]) is None
    assert main(["--bogus"]) == 2 and "usage: python -m guard.studies.package_defaults" in capsys.readouterr().err
