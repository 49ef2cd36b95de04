"""One side of ``benchmarks.paired``: times decisions of this checkout on request (run as a script).

Started with ``PYTHONPATH`` set to a source checkout, it reads commands from stdin, one per line:
``run SEED`` feeds the synthetic episode of that seed through a fresh session and prints one JSON
line ``[[record index, incl. µs, decide µs], ...]`` for the decisions in the measured window;
``clear`` empties the per-text memos of the checkout's ``guard`` modules (every ``lru_cache`` of
1,024 entries or more), so each pass starts cold as a fresh process would.  It uses only what every
version of ``benchmarks.latency`` has: ``bench_policy``, ``make_episode``, ``time_session``,
``window`` and ``THRESHOLD``.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from typing import Any


def _clear_text_memos() -> None:
    for name, module in list(sys.modules.items()):
        if name != "guard" and not name.startswith("guard."):
            continue
        for value in list(vars(module).values()):
            info = getattr(value, "cache_info", None)
            if callable(info) and (info().maxsize or 0) >= 1024:
                value.cache_clear()


def main() -> int:
    """Answer ``run SEED`` and ``clear`` until stdin closes."""
    from benchmarks import latency
    from guard.runtime import Guard

    length, clock_name = int(sys.argv[1]), sys.argv[2]
    clock = time.thread_time_ns if clock_name == "thread" else time.perf_counter_ns
    policy = latency.bench_policy()
    guard = Guard(policy, threshold=latency.THRESHOLD)
    start = latency.window(length)
    episodes: dict[int, Any] = {}
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = line.split()
        if command == ["clear"]:
            _clear_text_memos()
            gc.collect()
            print("[]", flush=True)
            continue
        seed = int(command[1])
        if seed not in episodes:
            episodes[seed] = latency.make_episode(length, seed, policy)
        timing = latency.time_session(guard, episodes[seed], clock=clock)
        decide = dict(timing.decide_only)
        print(json.dumps([(i, us, decide[i]) for i, us in timing.samples if i >= start]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
