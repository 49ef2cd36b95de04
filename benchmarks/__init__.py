"""Performance benchmarks (not timed tests): ``carbguard bench NAME [--json] [--quick]``.

- :mod:`benchmarks.latency` — per-decision latency against episode length (G-CARB incremental,
  full-prefix, from-scratch rebuild) and scorer-input records per episode;
- :mod:`benchmarks.peer` — the same prefixes through invariant-ai's local analyzer;
- :mod:`benchmarks.calibration` — scoring throughput on the AgentDojo corpus, the vectorized CRC
  step on 10^6 synthetic episodes x 200 permutations, peak memory;
- :mod:`benchmarks.perf` — all of them, one table or one JSON object (``carbguard bench perf``).
"""
