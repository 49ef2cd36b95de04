"""``carbguard bench safecommit|constructed|evasion|perf``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from guard.cli._common import emit
from guard.errors import GuardError


def register(sub: Any) -> None:
    """``carbguard bench safecommit|constructed|perf``."""
    bench = sub.add_parser("bench", help="benchmarks: safecommit, constructed, perf").add_subparsers(
        dest="bench", required=True
    )
    sc = bench.add_parser("safecommit", help="SafeCommitBench-Controlled: the seed's Tables 2-5 + support miss")
    sc.add_argument("--seeds", type=int, default=10)
    sc.add_argument("--json", action="store_true")
    sc.set_defaults(func=_bench_safecommit)
    con = bench.add_parser("constructed", help="CES and graph-braid: where dependency selection matters")
    con.add_argument("--permutations", type=int, default=200)
    con.add_argument("--json", action="store_true")
    con.add_argument("--plot", help="write the edge-dropout plot (PNG)")
    con.set_defaults(func=_bench_constructed)
    ev = bench.add_parser("evasion", help="recall of harmful paths when the agent transforms a private value")
    ev.add_argument("--json", action="store_true")
    ev.set_defaults(func=_bench_evasion)
    perf = bench.add_parser("perf", help="decision latency, peer comparison, calibration throughput")
    perf.add_argument("--quick", action="store_true", help="fewer repetitions")
    perf.add_argument("--json", action="store_true")
    perf.set_defaults(func=_bench_perf)
    mcp = bench.add_parser("mcp", help="per-call overhead of the MCP guard proxy against a direct MCP call")
    mcp.add_argument("--quick", action="store_true", help="fewer calls")
    mcp.add_argument("--json", action="store_true")
    mcp.set_defaults(func=_bench_mcp)


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


def _benchmark_module(name: str) -> Any:
    """``benchmarks.<name>`` from the source checkout (the working folder or the installed tree's parent)."""
    import importlib
    import sys

    import guard

    for root in (Path.cwd(), Path(guard.__file__).resolve().parents[1]):
        if (root / "benchmarks" / f"{name}.py").exists() and str(root) not in sys.path:
            sys.path.insert(0, str(root))
            break
    try:
        return importlib.import_module(f"benchmarks.{name}")
    except ImportError as exc:
        raise GuardError(f"bench runs from a source checkout (benchmarks/{name}.py): {exc}") from exc


def _bench_perf(args: argparse.Namespace) -> int:
    perf = _benchmark_module("perf")
    return emit(perf.run(quick=args.quick), args.json, perf.format_perf)


def _bench_mcp(args: argparse.Namespace) -> int:
    bench = _benchmark_module("mcp_overhead")
    return emit(bench.run(quick=args.quick, progress=not args.json), args.json, bench.render)
