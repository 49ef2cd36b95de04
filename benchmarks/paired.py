"""Decision latency of this checkout against another version, side by side in one run.

``carbguard bench paired --baseline DIR`` (or ``python -m benchmarks.paired``) starts one worker
process per version (:mod:`benchmarks.paired_worker`): this checkout, and the source checkout
``DIR`` (with its own interpreter, ``--python``, when its dependencies differ).  Each worker keeps
its version's default policy and guard.  The driver then feeds the same synthetic episodes of
length T to both, episode by episode, alternating which goes first, so that a slow spell of a shared
machine falls on both sides alike.  Each pass starts with the workers' per-text memos cleared; a
decision's latency is its median over the passes.

Reported: the p50 and p99 of ``incl.`` (``Session.decide`` plus indexing the records observed since the
previous decision, as in ``bench latency``) and of ``decide`` alone, per version, their ratios
(this version over the baseline), and the median of the per-decision ratios.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
Samples = dict[tuple[int, int], list[tuple[float, float]]]


class Worker:
    """A worker process of one version, answering one command at a time."""

    def __init__(self, checkout: Path, python: str, length: int, clock: str) -> None:
        script = HERE / "benchmarks" / "paired_worker.py"
        env = {"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"}
        self.proc = subprocess.Popen(
            [python, str(script), str(length), clock], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        if self._read() != {"ready": True}:
            raise RuntimeError(f"the worker for {checkout} did not start")

    def _read(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a worker stopped (exit code {self.proc.wait()})")
        return json.loads(line)

    def ask(self, command: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def summarise(samples: dict[str, Samples]) -> dict[str, Any]:
    """p50s per version and the ratios ``candidate / baseline`` from per-decision samples (one list of
    ``(incl., decide)`` per decision and pass); every decision's latency is its median over the passes."""
    if samples["candidate"].keys() != samples["baseline"].keys():
        raise ValueError("the two versions timed different decisions")
    medians = {
        side: {key: tuple(statistics.median(x[c] for x in values) for c in (0, 1)) for key, values in per.items()}
        for side, per in samples.items()
    }
    out: dict[str, Any] = {}
    for side, per in medians.items():
        out[side] = {
            "incl_p50_us": round(statistics.median(v[0] for v in per.values()), 1),
            "decide_p50_us": round(statistics.median(v[1] for v in per.values()), 1),
            "incl_p99_us": round(_p99([v[0] for v in per.values()]), 1),
            "decide_p99_us": round(_p99([v[1] for v in per.values()]), 1),
        }
    out["ratio_incl_p50"] = round(out["candidate"]["incl_p50_us"] / out["baseline"]["incl_p50_us"], 3)
    out["ratio_decide_p50"] = round(out["candidate"]["decide_p50_us"] / out["baseline"]["decide_p50_us"], 3)
    out["ratio_incl_p99"] = round(out["candidate"]["incl_p99_us"] / out["baseline"]["incl_p99_us"], 3)
    pairs = [medians["candidate"][k][0] / medians["baseline"][k][0] for k in medians["baseline"]]
    out["median_decision_ratio_incl"] = round(statistics.median(pairs), 3)
    out["decisions"] = len(pairs)
    return out


def _p99(values: list[float]) -> float:
    """The 0.99-quantile by the nearest-rank rule, as ``bench latency`` reports it."""
    ordered = sorted(values)
    return ordered[max(1, -(-99 * len(ordered) // 100)) - 1]


def run(
    baseline: Path,
    python: str | None = None,
    episodes: int = 1000,
    passes: int = 3,
    length: int = 10,
    clock: str = "wall",
    progress: bool = True,
) -> dict[str, Any]:
    """Time both versions on ``episodes`` episodes of ``length`` records, ``passes`` times, interleaved."""
    workers = {
        "candidate": Worker(HERE, sys.executable, length, clock),
        "baseline": Worker(baseline, python or sys.executable, length, clock),
    }
    samples: dict[str, Samples] = {side: {} for side in workers}
    try:
        for p in range(passes):
            for worker in workers.values():
                worker.ask("clear")
            for seed in range(episodes):
                order = ("candidate", "baseline") if (seed + p) % 2 == 0 else ("baseline", "candidate")
                for side in order:
                    for index, incl, decide in workers[side].ask(f"run {seed}"):
                        samples[side].setdefault((seed, index), []).append((incl, decide))
            if progress:
                print(f"pass {p + 1}/{passes} done", file=sys.stderr)
    finally:
        for worker in workers.values():
            worker.close()
    result = summarise(samples)
    result.update(baseline_checkout=str(baseline), T=length, episodes=episodes, passes=passes, clock=clock)
    return result


def format_paired(result: dict[str, Any]) -> str:
    """The result as a small table."""
    lines = [
        f"T = {result['T']}, {result['episodes']} episodes x {result['passes']} passes, interleaved "
        f"({result['clock']} clock); baseline {result['baseline_checkout']}",
        f"{'version':<10} {'incl. p50 µs':>13} {'decide p50 µs':>14} {'incl. p99 µs':>13} {'decide p99 µs':>14}",
    ]
    for side in ("candidate", "baseline"):
        row = result[side]
        lines.append(
            f"{side:<10} {row['incl_p50_us']:>13.1f} {row['decide_p50_us']:>14.1f}"
            f" {row.get('incl_p99_us', float('nan')):>13.1f} {row.get('decide_p99_us', float('nan')):>14.1f}"
        )
    lines.append(
        f"ratio (this / baseline): incl. p50 {result['ratio_incl_p50']}, decide p50 {result['ratio_decide_p50']}, "
        f"median per-decision incl. {result['median_decision_ratio_incl']} over {result['decisions']} decisions; "
        f"incl. p99 {result.get('ratio_incl_p99')}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.paired --baseline DIR [...]``: the same as ``carbguard bench paired``."""
    from guard.cli import bench_main

    return bench_main("paired", argv)


if __name__ == "__main__":
    raise SystemExit(main())
