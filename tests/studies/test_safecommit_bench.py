"""SafeCommitBench-Controlled: frozen splits, generator shape, methods, and the α + β bound."""

from __future__ import annotations

import gzip
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from guard.cli import main as cli_main
from guard.safecommit.conformal import conformal_threshold
from guard.safecommit.controller import SafeCommitController
from guard.safecommit.types import ProbeSpec
from guard.studies import safecommit_bench as bench

Row = dict[str, Any]

ROW_KEYS = {"method", "ucr", "task_success", "commit_coverage", "fallback_rate", "mean_probes"}


@pytest.fixture(scope="module")
def small_result() -> dict[str, list[Row]]:
    """The protocol on 2 seeds with 500 calibration and 1,000 test episodes."""
    return bench.run_bench(2, n_cal=500, n_test=1000, n_train=500)


@pytest.fixture(scope="module")
def frozen_test() -> list[Row]:
    """The shipped test split as episode dicts."""
    return bench.read_split(bench.DATA_DIR / "test.jsonl.gz")


@pytest.mark.parametrize("split", bench.SPLITS)
def test_regenerating_frozen_split_gives_identical_bytes(split: str) -> None:
    """The generator at the base seed reproduces the shipped gzip file byte for byte."""
    shipped = (bench.DATA_DIR / f"{split}.jsonl.gz").read_bytes()
    fresh = bench.split_bytes(split)
    assert gzip.decompress(fresh) == gzip.decompress(shipped)
    assert fresh == shipped


def test_shipped_files_are_small() -> None:
    """All four splits together stay under 3 MB."""
    assert sum((bench.DATA_DIR / f"{s}.jsonl.gz").stat().st_size for s in bench.SPLITS) < 3_000_000


def test_cli_write_regenerates_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--write DIR`` writes the four splits, identical to the shipped ones."""
    assert cli_main(["data", "safecommit-bench", "--write", str(tmp_path)]) == 0
    for split in bench.SPLITS:
        assert (tmp_path / f"{split}.jsonl.gz").read_bytes() == (bench.DATA_DIR / f"{split}.jsonl.gz").read_bytes()
    assert "wrote" in capsys.readouterr().out


def test_episode_shape(frozen_test: list[Row]) -> None:
    """3–6 worlds, 3 actions, the true world in the support, one identity probe per world."""
    assert len(frozen_test) == bench.SPLIT_SIZES["test"]
    for rec in frozen_test[:500]:
        worlds, actions, safe, probes = bench.episode_problem(rec)
        names = [w.name for w in worlds]
        assert 3 <= len(worlds) <= 6 and len(actions) == 3
        assert rec["true_world"] in names and rec["family"] in bench.FAMILIES
        assert all(safe[n] for n in names), "every world has a safe primary action"
        for p in probes:
            assert sorted(p.outcomes.values()) == ["no"] * (len(names) - 1) + ["yes"]


def test_true_world_scores_lower_than_decoys_on_average() -> None:
    """The score model is informative: true worlds score below decoys in every family."""
    eps = bench.split_episodes("train")
    rows = np.arange(len(eps))
    true_score = eps.scores[rows, eps.true]
    decoy = eps.present.copy()
    decoy[rows, eps.true] = False
    for f in range(len(bench.FAMILIES)):
        m = eps.family == f
        assert true_score[m].mean() < eps.scores[m][decoy[m]].mean()


def answer_as(truth: str) -> Callable[[ProbeSpec], str]:
    """A probe runner for the deterministic bench: the outcome in the true world."""
    return lambda probe: probe.outcomes[truth]


def test_batched_safecommit_equals_the_controller(frozen_test: list[Row]) -> None:
    """On 300 frozen test episodes the vectorised bench and SafeCommitController decide alike."""
    cal = bench.split_episodes("calibration")
    kappa = conformal_threshold(cal.scores[np.arange(len(cal)), cal.true], 0.05)
    eps = bench.split_episodes("test")
    batched = bench.safecommit(eps, kappa, budget=2)
    controller = SafeCommitController(kappa=kappa, budget=2, eta=bench.DEFAULT_ETA)
    for i, rec in enumerate(frozen_test[:300]):
        worlds, actions, safe, probes = bench.episode_problem(rec)
        result = controller.run(worlds, actions, safe, probes, observe=answer_as(rec["true_world"]))
        want = actions[int(batched.action[i])].name if batched.action[i] >= 0 else None
        assert result.action == want, rec["id"]
        assert len(result.log.probes_run) == batched.probes[i]
        assert (result.verdict == "execute") == bool(batched.committed[i])


def test_run_bench_schema(small_result: dict[str, list[Row]]) -> None:
    """Exactly the five tables; each row has the metric keys plus its own key."""
    assert set(small_result) == {"main", "families", "budget", "alpha", "support_miss"}
    assert [r["method"] for r in small_result["main"]] == list(bench.METHODS)
    assert all(set(r) == ROW_KEYS for r in small_result["main"])
    assert all(set(r) == ROW_KEYS | {"family"} for r in small_result["families"])
    assert [r["budget"] for r in small_result["budget"]] == [0, 1, 2, 3, 4]
    assert [r["alpha"] for r in small_result["alpha"]] == [0.01, 0.05, 0.10]
    assert {r["beta"] for r in small_result["support_miss"]} == {0.05, 0.10}
    for rows in small_result.values():
        for r in rows:
            assert math.isclose(r["task_success"] + r["ucr"], r["commit_coverage"])
            assert math.isclose(r["commit_coverage"] + r["fallback_rate"], 1.0)


def test_format_tables_names_every_method(small_result: dict[str, list[Row]]) -> None:
    """The text tables mention every method, family and table."""
    text = bench.format_tables(small_result)
    for word in (*bench.METHODS, *bench.FAMILIES, "Probe budget", "Support miss"):
        assert word in text


def test_run_bench_is_deterministic() -> None:
    """The same arguments give the same tables."""
    first = bench.run_bench(1, n_cal=200, n_test=300, n_train=200)
    assert first == bench.run_bench(1, n_cal=200, n_test=300, n_train=200)


@pytest.mark.parametrize(("alpha", "beta"), [(0.01, 0.0), (0.05, 0.0), (0.10, 0.0), (0.05, 0.05), (0.05, 0.10)])
def test_unsafe_commit_rate_within_alpha_plus_beta(alpha: float, beta: float) -> None:
    """Seeded Monte Carlo: SafeCommit's UCR ≤ α + β + 3 SE over 4 seeds × 3,000 test episodes."""
    outs = []
    for seed in range(4):
        cal = bench.split_episodes("calibration", 1000, seed=seed)
        kappa = conformal_threshold(cal.scores[np.arange(len(cal)), cal.true], alpha)
        test = bench.split_episodes("test", 3000, seed=seed)
        test = bench.drop_true_world(test, beta, np.random.default_rng(seed))
        outs.append(bench.safecommit(test, kappa, budget=2).unsafe)
    unsafe = np.concatenate(outs)
    bound = alpha + beta
    assert unsafe.mean() <= bound + 3 * math.sqrt(bound * (1 - bound) / unsafe.size)


def test_negative_control_single_world_is_far_above_alpha(small_result: dict[str, list[Row]]) -> None:
    """Acting on one plausible world commits unsafely far more often than α = 0.05."""
    rows = {r["method"]: r for r in small_result["main"]}
    assert rows["single_world"]["ucr"] > 4 * 0.05
    assert rows["safecommit"]["ucr"] < rows["single_world"]["ucr"]


def test_probes_recover_task_success(small_result: dict[str, list[Row]]) -> None:
    """Certification alone falls back often; targeted probes recover most of the tasks."""
    rows = {r["method"]: r for r in small_result["main"]}
    assert rows["safecommit"]["task_success"] > rows["safecommit_no_probe"]["task_success"]
    assert rows["safecommit"]["mean_probes"] <= 2
