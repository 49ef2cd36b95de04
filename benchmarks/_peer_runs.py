"""Repeated runs of the peer comparison: ``python -m benchmarks._peer_runs [RUNS [LENGTH]]`` (default 3 at T = 10).

Each run is :func:`benchmarks.peer.measure` (our session's observe + decide and invariant-ai's local
analyzer on the same decisions, episode by episode, with the peer's cycle cap as shipped) on episodes of
its own seeds, so no run reuses the texts of another and the per-text memos start cold, as they do for a
new tool output.  One JSON line per run: the peer's p50, ours (decide alone and including indexing) and
the ratios ours / theirs.  Needs invariant-ai (the ``[bench]`` extra, in an environment of its own).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from benchmarks import latency, peer
from guard.runtime import Guard


def run(runs: int = 3, length: int = 10, episodes: int = 400, want: int = 200) -> list[dict[str, Any]]:
    """``runs`` paired measurements at T = ``length``, each on ``episodes`` fresh episodes (``want`` decisions)."""
    policy = latency.bench_policy()
    analyzer = peer.load_peer(policy)
    guard = Guard(policy, threshold=latency.THRESHOLD)
    peer.warm_up(analyzer, policy)
    rows = []
    for number in range(runs):
        seeds = range(10_000 * (number + 1), 10_000 * (number + 1) + episodes)
        row = peer.measure(analyzer, guard, [latency.make_episode(length, s, policy) for s in seeds], length, want)
        if row["completed"]:
            row["ratio"] = round(row["ours_p50_us"] / row["p50_us"], 4)
            row["ratio_incl"] = round(row["ours_incl_p50_us"] / row["p50_us"], 4)
        rows.append({"run": number + 1, **row})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print one JSON line per run."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 2 or not all(a.isdigit() and int(a) > 0 for a in args):  # no parser: parsers live in guard/cli
        sys.stderr.write("usage: python -m benchmarks._peer_runs [RUNS [LENGTH]]  (positive integers)\n")
        return 2
    values = [int(a) for a in args]
    runs, length = (values[0] if values else 3), (values[1] if len(values) > 1 else 10)
    for row in run(runs, length):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
