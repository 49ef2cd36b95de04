"""``carbguard bench NAME``: every benchmark and bench-style study, one subcommand each.

The studies (``safecommit``, ``constructed``, ``evasion``) ship in :mod:`guard.studies`; the
performance benchmarks live in the source checkout's ``benchmarks/`` folder and are listed in
:data:`BENCHMARKS` (module, its ``run(quick, progress)`` and table formatter, and the exceptions it
raises for an environment it cannot measure, reported as errors).
"""

from __future__ import annotations

import argparse
import builtins
import sys
from pathlib import Path
from typing import Any, NamedTuple

from guard.cli._common import add_json, emit
from guard.errors import GuardError


class Benchmark(NamedTuple):
    """A performance benchmark of ``benchmarks/``: its module, formatter, help line, and what it raises."""

    module: str
    formatter: str
    help: str
    errors: tuple[str, ...] = ()


BENCHMARKS: dict[str, Benchmark] = {
    "perf": Benchmark("perf", "format_perf", "all performance benchmarks: latency, peer comparison, calibration"),
    "latency": Benchmark("latency", "format_latency", "decision latency against episode length"),
    "peer": Benchmark(
        "peer", "format_peer", "the same prefixes through invariant-ai's local analyzer", ("PeerUnavailableError",)
    ),
    "calibration": Benchmark("calibration", "format_calibration", "calibration throughput (scoring and CRC step)"),
    "mcp": Benchmark(
        "mcp_overhead",
        "render",
        "per-call overhead of the MCP guard proxy against a direct MCP call",
        ("RuntimeError",),
    ),
    "monitor": Benchmark(
        "monitor_incremental",
        "format_monitor",
        "carbguard monitor with its state file against a full re-read, 100 entries appended to a 100k-entry log",
        ("RuntimeError",),
    ),
}
STUDIES = {
    "safecommit": "SafeCommitBench-Controlled: the seed's Tables 2-5 and the support-miss table",
    "constructed": "CES and graph-braid: where dependency selection matters",
    "evasion": "recall of harmful paths when the agent transforms a private value",
}


def register(sub: Any) -> None:
    """``carbguard bench`` with one subcommand per study and benchmark."""
    names = [*STUDIES, *BENCHMARKS, "paired", "decisions"]
    group = sub.add_parser(
        "bench", help=f"benchmarks: {', '.join(names)}", description="Benchmarks and bench-style studies."
    )
    bench = group.add_subparsers(dest="bench", required=True, metavar="{" + ",".join(names) + "}")
    sc = bench.add_parser("safecommit", help=STUDIES["safecommit"])
    sc.add_argument("--seeds", type=int, default=10, help="protocol seeds (default 10)")
    add_json(sc)
    sc.set_defaults(func=_bench_safecommit)
    con = bench.add_parser("constructed", help=STUDIES["constructed"])
    con.add_argument("--permutations", type=int, default=200, help="random calibration/test splits (default 200)")
    add_json(con)
    con.add_argument("--plot", help="write the edge-dropout plot (PNG) to this file")
    con.set_defaults(func=_bench_constructed)
    ev = bench.add_parser("evasion", help=STUDIES["evasion"])
    add_json(ev)
    ev.set_defaults(func=_bench_evasion)
    _register_paired(bench)
    _register_decisions(bench)
    for name, spec in BENCHMARKS.items():
        parser = bench.add_parser(name, help=spec.help, description=spec.help)
        parser.add_argument("--quick", action="store_true", help="small repeat counts")
        add_json(parser)
        parser.set_defaults(func=_bench_module, benchmark=name)


def _bench_safecommit(args: argparse.Namespace) -> int:
    from guard.studies import safecommit_bench

    if args.seeds < 1:
        raise GuardError(f"--seeds must be >= 1, got {args.seeds}")
    return emit(safecommit_bench.run_bench(args.seeds), args.json, safecommit_bench.format_tables)


def _bench_constructed(args: argparse.Namespace) -> int:
    from guard.studies import diagnostics

    if args.permutations < 1:
        raise GuardError(f"--permutations must be >= 1, got {args.permutations}")
    result = diagnostics.run_bench_constructed(permutations=args.permutations, progress=not args.json)
    if args.plot:
        diagnostics.dropout_plot(result, args.plot)
    return emit(result, args.json, diagnostics.format_constructed)


def _bench_evasion(args: argparse.Namespace) -> int:
    from guard.studies.evasion import format_evasion, run_evasion_study

    return emit(run_evasion_study(), args.json, format_evasion)


def benchmark_module(name: str) -> Any:
    """``benchmarks.<name>`` from the source checkout (the working folder or the installed tree's parent)."""
    import importlib

    import guard

    for root in (Path.cwd(), Path(guard.__file__).resolve().parents[1]):
        if (root / "benchmarks" / f"{name}.py").exists() and str(root) not in sys.path:
            sys.path.insert(0, str(root))
            break
    try:
        return importlib.import_module(f"benchmarks.{name}")
    except ImportError as exc:
        raise GuardError(f"bench runs from a source checkout (benchmarks/{name}.py): {exc}") from exc


def _bench_module(args: argparse.Namespace) -> int:
    spec = BENCHMARKS[args.benchmark]
    module = benchmark_module(spec.module)
    errors = tuple(getattr(module, e, None) or getattr(builtins, e) for e in spec.errors)
    try:
        out = module.run(quick=args.quick, progress=not args.json and sys.stderr.isatty())
    except errors as exc:
        raise GuardError(f"bench {args.benchmark}: {exc}") from exc
    return emit(out, args.json, getattr(module, spec.formatter))


PAIRED = "decision latency of this checkout against another version's, interleaved in one run"


def _register_paired(bench: Any) -> None:
    p = bench.add_parser("paired", help=PAIRED, description=PAIRED)
    p.add_argument("--baseline", required=True, type=Path, help="the other version's source checkout")
    p.add_argument("--python", help="the other version's interpreter (default: this one)")
    p.add_argument("--episodes", type=int, default=1000, help="episodes per pass (default 1000)")
    p.add_argument("--passes", type=int, default=3, help="passes over the episodes (default 3)")
    p.add_argument("--length", type=int, default=10, help="records per episode, T (default 10)")
    p.add_argument("--clock", choices=("wall", "thread"), default="wall", help="perf_counter or thread CPU time")
    add_json(p)
    p.set_defaults(func=_bench_paired)


def _bench_paired(args: argparse.Namespace) -> int:
    if not (args.baseline / "benchmarks" / "latency.py").is_file():
        raise GuardError(f"--baseline {args.baseline}: not a source checkout with benchmarks/latency.py")
    if args.episodes < 1 or args.passes < 1 or args.length < 3:
        raise GuardError("--episodes and --passes must be >= 1 and --length >= 3")
    module = benchmark_module("paired")
    try:
        out = module.run(
            args.baseline.resolve(),
            args.python,
            args.episodes,
            args.passes,
            args.length,
            args.clock,
            progress=not args.json and sys.stderr.isatty(),
        )
    except RuntimeError as exc:
        raise GuardError(f"bench paired: {exc}") from exc
    return emit(out, args.json, module.format_paired)


DECISIONS = "every decision of the embedded AgentDojo corpus: dump this version's, or compare two dumps"


def _register_decisions(bench: Any) -> None:
    p = bench.add_parser("decisions", help=DECISIONS, description=DECISIONS)
    how = p.add_subparsers(dest="decisions", required=True)
    dump = how.add_parser("dump", help="replay the embedded corpus and write one JSON line per proposal")
    dump.add_argument("out", type=Path, help="output file (.jsonl, or .jsonl.gz for gzip)")
    dump.add_argument("--alpha", type=float, default=0.10, choices=(0.05, 0.10), help="whose pooled λ̂ (default 0.10)")
    dump.set_defaults(func=_bench_decisions)
    diff = how.add_parser("diff", help="compare two dumps proposal by proposal")
    diff.add_argument("old", type=Path, help="the earlier version's dump")
    diff.add_argument("new", type=Path, help="this version's dump")
    diff.add_argument("--show", type=int, default=40, help="changed proposals printed in full (default 40)")
    diff.set_defaults(func=_bench_decisions)


def _bench_decisions(args: argparse.Namespace) -> int:
    module = benchmark_module("decision_diff")
    if args.decisions == "dump":
        module.dump(args.out, args.alpha, sys.stderr.isatty())
    else:
        for path in (args.old, args.new):
            if not path.is_file():
                raise GuardError(f"bench decisions diff: {path} is not a file")
        module.diff(args.old, args.new, args.show)
    return 0
