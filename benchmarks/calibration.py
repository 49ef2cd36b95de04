"""Calibration throughput: ``python -m benchmarks.calibration [--json] [--quick]``.

- **Scoring**: episodes scored per second (every proposal through ``Session.decide`` + the ledger
  trace, :func:`guard.calibration.replay.score_episode`, G-CARB selector) on the embedded AgentDojo
  corpus of ``gpt-4o-2024-05-13`` (``guard.calibration.jobs.load_corpus``); if the corpus loader is
  missing, on synthetic episodes (and the result says so).  Timed without tracemalloc; peak memory
  from a second pass under tracemalloc.
- **CRC step**: λ̂ for 200 permutations (50/50 splits) of 10^6 synthetic episodes, vectorized
  (:func:`guard.calibration.crc.carb_thresholds_for_permutations` on the corpus-wide exact grid,
  in blocks of permutations to bound memory).  Reported separately: generating the splits, and
  the per-permutation exact grid (``carb_thresholds_for_permutations_exact``, full run only).
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from guard.calibration import crc

MODEL = "gpt-4o-2024-05-13"
N_EPISODES = 10**6
PERMUTATIONS = 200
ALPHA = 0.10
BLOCK = 25  # permutations per call: 25 x 500,000 int64 indices = 100 MB


def _peak_mb(fn: Callable[[], Any]) -> tuple[Any, float]:
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak / 2**20


# --------------------------------------------------------------------------- scoring throughput


def _corpus(quick: bool) -> tuple[list[Any], Callable[[Any], Any], Callable[[Any], Any], str]:
    """Episodes, policy_for, labels_for and a description of where they came from."""
    try:
        from guard.calibration.jobs import load_corpus, policy_for
        from guard.corpora import agentdojo

        corpus = load_corpus(None, MODEL)
        episodes = corpus.episodes[:150] if quick else corpus.episodes
        return episodes, policy_for("gcarb"), agentdojo.episode_ledger_labels, f"embedded AgentDojo corpus {MODEL}"
    except ImportError as exc:
        from benchmarks import latency
        from guard.ledger import LedgerLabels

        policy = latency.bench_policy()
        lengths = np.random.default_rng(0).integers(4, 40, size=150 if quick else 700)
        episodes = [latency.make_episode(int(t), seed, policy) for seed, t in enumerate(lengths)]
        labels = LedgerLabels()
        return episodes, lambda _e: policy, lambda _e: labels, f"SYNTHETIC episodes (corpus loader unavailable: {exc})"


def scoring(quick: bool, workers: int = 2) -> dict[str, Any]:
    """Episodes scored per second (one selector, G-CARB), peak traced memory, speed-up with ``workers``."""
    from guard.calibration.parallel import score_parallel
    from guard.calibration.replay import assemble, score_episode

    episodes, policy_for, labels_for, source = _corpus(quick)
    for episode in episodes[:5]:  # warm the policy caches (loading YAML is not scoring)
        policy_for(episode)
        labels_for(episode)

    def work() -> Any:
        return assemble([score_episode(policy_for(e), e, labels_for(e)) for e in episodes])

    start, cpu = time.perf_counter(), _cpu()
    single = work()
    seconds, cpu_seconds = time.perf_counter() - start, _cpu() - cpu
    start, cpu = time.perf_counter(), _cpu()
    pooled = score_parallel(episodes, policy_for, labels_for, workers=workers)
    pooled_seconds, pooled_cpu = time.perf_counter() - start, _cpu() - cpu
    subset = episodes[: min(len(episodes), 200)]
    _, peak = _peak_mb(lambda: assemble([score_episode(policy_for(e), e, labels_for(e)) for e in subset]))
    n_props = sum(1 for e in episodes for r in e.records if r.kind.value == "proposal")
    return {
        "source": source,
        "selector": "gcarb",
        "episodes": len(episodes),
        "proposals": n_props,
        "seconds": round(seconds, 3),
        "episodes_per_second": round(len(episodes) / seconds, 1),
        "decisions_per_second": round(n_props / seconds, 1),
        "peak_mb": round(peak, 1),
        "peak_mb_episodes": len(subset),
        "workers": workers,
        "workers_seconds": round(pooled_seconds, 3),
        "workers_speedup": round(seconds / pooled_seconds, 2),
        "workers_identical": single.fingerprint() == pooled.fingerprint(),
        # CPU seconds (this process + finished children) and the cores' worth obtained (CPU / wall):
        # on a shared machine a low speed-up with a low share means the cores were busy elsewhere.
        "cpu_seconds": round(cpu_seconds, 3),
        "cores_obtained": round(cpu_seconds / seconds, 2),
        "workers_cpu_seconds": round(pooled_cpu, 3),
        "workers_cores_obtained": round(pooled_cpu / pooled_seconds, 2),
    }


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (user + system; this process only off Unix)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return time.process_time()
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


# --------------------------------------------------------------------------- the CRC step


def synthetic_corpus(n: int, seed: int = 0, k: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Scores (n·k, sums of the default feature weights) and harm levels (n) of synthetic episodes."""
    rng = np.random.default_rng(seed)
    weights = np.array([0.52, 0.10, 0.15, 0.15, 0.20, 0.08])
    features = rng.random((n, k, weights.size)) < np.array([0.15, 0.35, 0.03, 0.10, 0.12, 0.30])
    scores = np.round(features @ weights, 12)
    cummax = np.maximum.accumulate(scores, axis=1)
    step = rng.integers(0, k, size=n)
    harmful = rng.random(n) < np.where(features[np.arange(n), step, 0], 0.6, 0.08)
    levels = np.where(harmful, cummax[np.arange(n), step], np.inf)
    return scores.ravel(), levels


def crc_step(
    quick: bool, n: int = N_EPISODES, permutations: int = PERMUTATIONS, exact: bool | None = None
) -> dict[str, Any]:
    """Time λ̂ for ``permutations`` 50/50 splits of ``n`` synthetic episodes; peak traced memory."""
    scores, levels = synthetic_corpus(n)
    grid = crc.exact_grid(scores)
    rng = np.random.default_rng(1)
    half = n // 2
    split_s = crc_s = 0.0
    lambdas: list[np.ndarray] = []

    def run() -> None:
        nonlocal split_s, crc_s
        for start in range(0, permutations, BLOCK):
            rows = min(BLOCK, permutations - start)
            t0 = time.perf_counter()
            calib = np.stack([rng.permutation(n)[:half] for _ in range(rows)])
            t1 = time.perf_counter()
            lambdas.append(crc.carb_thresholds_for_permutations(levels, grid, calib, ALPHA))
            crc_s += time.perf_counter() - t1
            split_s += t1 - t0

    _, peak = _peak_mb(run)  # numpy-bound: tracemalloc's per-allocation cost is negligible here
    out: dict[str, Any] = {
        "episodes": n,
        "permutations": permutations,
        "grid_points": int(grid.size),
        "seconds": round(crc_s, 3),
        "split_seconds": round(split_s, 3),
        "total_seconds": round(crc_s + split_s, 3),
        "peak_mb": round(peak, 1),
        "lambda_hat_mean": round(float(np.concatenate(lambdas).mean()), 6),
    }
    if exact if exact is not None else not quick:
        owner = np.repeat(np.arange(n), scores.size // n)
        index = crc.index_episode_scores(scores, owner, n)
        calib = np.stack([np.random.default_rng(2 + r).permutation(n)[:half] for r in range(BLOCK)])
        t0 = time.perf_counter()
        crc.carb_thresholds_for_permutations_exact(levels, index, calib, ALPHA)
        per_block = time.perf_counter() - t0
        out["exact_grid_seconds_estimate"] = round(per_block * permutations / BLOCK, 3)
        out["exact_grid_note"] = f"timed on {BLOCK} permutations, scaled to {permutations}"
    return out


def run(quick: bool = False, progress: bool = False) -> dict[str, Any]:
    """Scoring throughput and the CRC step."""
    from benchmarks.latency import say

    began = time.perf_counter()
    out: dict[str, Any] = {"scoring": scoring(quick)}
    say(progress, f"scoring: {out['scoring']['episodes_per_second']} episodes/s  ({time.perf_counter() - began:.1f} s)")
    began = time.perf_counter()
    out["crc"] = crc_step(quick)
    say(progress, f"CRC step: {out['crc']['seconds']} s  ({time.perf_counter() - began:.1f} s)")
    return out


def format_calibration(result: dict[str, Any]) -> str:
    """The calibration table."""
    s, c = result["scoring"], result["crc"]
    lines = [
        f"Scoring ({s['source']}, selector {s['selector']}): {s['episodes']} episodes, {s['proposals']} proposals "
        f"in {s['seconds']} s = {s['episodes_per_second']} episodes/s ({s['decisions_per_second']} decisions/s); "
        f"peak traced memory {s['peak_mb']} MB over {s['peak_mb_episodes']} episodes",
        f"  {s['workers']} local worker processes: {s['workers_seconds']} s, speed-up {s['workers_speedup']}x "
        f"(arrays identical: {s['workers_identical']}); CPU {s['cpu_seconds']} s single / "
        f"{s['workers_cpu_seconds']} s pooled, cores obtained {s['cores_obtained']} / {s['workers_cores_obtained']}",
        f"CRC step: {c['episodes']:,} episodes x {c['permutations']} permutations, {c['grid_points']} grid points: "
        f"{c['seconds']} s (+ {c['split_seconds']} s generating the splits; total {c['total_seconds']} s); "
        f"peak traced memory {c['peak_mb']} MB",
    ]
    if "exact_grid_seconds_estimate" in c:
        estimate = c["exact_grid_seconds_estimate"]
        lines.append(f"  per-permutation exact grids instead: ~{estimate} s ({c['exact_grid_note']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.calibration [--json] [--quick]``: the same as ``carbguard bench calibration``."""
    from guard.cli import bench_main

    return bench_main("calibration", argv)


if __name__ == "__main__":
    raise SystemExit(main())
