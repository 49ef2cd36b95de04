"""The paired latency benchmark: its arithmetic exactly, and one small real run of both workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.paired import summarise

ROOT = Path(__file__).resolve().parents[2]


def test_summary_takes_medians_over_passes_then_the_ratios_of_candidate_to_baseline() -> None:
    """A decision's latency is its median over the passes, and the ratios are candidate / baseline (catches a
    mean over passes, which the slow pass would move, and a ratio upside down)."""
    baseline = {(0, 8): [(100.0, 10.0), (900.0, 90.0), (110.0, 11.0)], (1, 9): [(200.0, 20.0)] * 3}
    candidate = {key: [(2 * a, 2 * b) for a, b in values] for key, values in baseline.items()}
    out = summarise({"candidate": candidate, "baseline": baseline})
    p99 = {"incl_p99_us": 200.0, "decide_p99_us": 20.0}  # nearest rank: the larger of the two medians
    assert out["baseline"] == {"incl_p50_us": 155.0, "decide_p50_us": 15.5, **p99}
    doubled = {"incl_p99_us": 400.0, "decide_p99_us": 40.0}
    assert out["candidate"] == {"incl_p50_us": 310.0, "decide_p50_us": 31.0, **doubled}
    assert out["ratio_incl_p50"] == 2.0 and out["ratio_decide_p50"] == 2.0 and out["ratio_incl_p99"] == 2.0
    assert out["median_decision_ratio_incl"] == 2.0 and out["decisions"] == 2


def test_summary_refuses_two_versions_that_timed_different_decisions() -> None:
    """Samples of different episodes are not compared (catches a driver feeding each version other seeds)."""
    with pytest.raises(ValueError, match="different decisions"):
        summarise({"candidate": {(0, 8): [(1.0, 1.0)]}, "baseline": {(1, 8): [(1.0, 1.0)]}})


def test_a_small_paired_run_of_this_checkout_against_itself() -> None:
    """Both workers start, answer every episode, and the report holds both versions' p50s and ratios near one
    for a version against itself (catches a worker protocol that hangs or drops decisions)."""
    command = [sys.executable, "-m", "guard", "bench", "paired", "--baseline", str(ROOT), "--episodes", "6"]
    done = subprocess.run([*command, "--passes", "1", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["decisions"] >= 5 and out["T"] == 10
    assert out["candidate"]["incl_p50_us"] > 0 and out["baseline"]["incl_p50_us"] > 0
    assert 0.2 < out["ratio_incl_p50"] < 5


def test_a_baseline_that_is_not_a_checkout_is_refused(tmp_path: Path) -> None:
    """A clear error names the bad ``--baseline`` (catches a run that starts workers on a folder without the
    benchmark, which would fail later with a traceback)."""
    done = subprocess.run(
        [sys.executable, "-m", "guard", "bench", "paired", "--baseline", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode != 0 and "not a source checkout" in done.stderr
