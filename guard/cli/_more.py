"""Subcommands beyond policy/audit/calibrate/evaluate: report, bench, agentdojo."""

from __future__ import annotations

import argparse
import json
from typing import Any

from guard.errors import GuardError


def add_report(sub: Any) -> None:
    """``carbguard report``."""
    rep = sub.add_parser("report", help="a self-contained HTML report of why each call was allowed or refused")
    rep.add_argument("audit", nargs="?", help="an audit log (JSON lines) to render")
    rep.add_argument("--runs", help="an AgentDojo runs folder to replay an episode from")
    rep.add_argument("--corpus", help="an embedded corpus to replay an episode from (model name)")
    rep.add_argument("--episode", help="episode id (model/suite/user_task/attack/injection_task)")
    rep.add_argument("--threshold", type=float, help="threshold for replay (default: the policy's artifact)")
    rep.add_argument("--policy", help="policy file (audit mode: for feature weights)")
    rep.add_argument("--plot", help="a frontier PNG from `evaluate --plot` to embed")
    rep.add_argument("-o", "--out", required=True, help="HTML file to write")
    rep.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from guard import report

    if args.audit:
        policy = None
        if args.policy:
            from guard.policy import load_policy

            policy = load_policy(args.policy)
        path = report.write_audit_report(args.audit, args.out, frontier_png=args.plot, policy=policy)
    else:
        path = _replay_report(args)
    print(f"wrote {path}")
    return 0


def _replay_report(args: argparse.Namespace) -> Any:
    from guard import report
    from guard.corpora import agentdojo
    from guard.runtime import Guard

    if not args.episode or not (args.runs or args.corpus):
        raise GuardError("report needs an AUDIT file, or --runs PATH/--corpus MODEL with --episode ID")
    loaded = agentdojo.load_runs(args.runs) if args.runs else agentdojo.load_embedded(args.corpus)

    def guard_for(episode: Any) -> Guard:
        path = agentdojo.suite_policy_path(episode.meta.suite)
        if args.threshold is None:
            return Guard.from_policy(path)
        return Guard(agentdojo.load_suite_policy(episode.meta.suite), threshold=args.threshold)

    return report.write_episode_report(loaded.episodes, args.episode, guard_for, args.out, frontier_png=args.plot)


def add_bench(sub: Any) -> None:
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


def _emit(result: Any, as_json: bool, formatter: Any) -> int:
    print(json.dumps(result, indent=1) if as_json else formatter(result))
    return 0


def _bench_safecommit(args: argparse.Namespace) -> int:
    from guard.studies import safecommit_bench

    if args.seeds < 1:
        raise GuardError(f"--seeds must be >= 1, got {args.seeds}")
    return _emit(safecommit_bench.run_bench(args.seeds), args.json, safecommit_bench.format_tables)


def _bench_constructed(args: argparse.Namespace) -> int:
    from guard.studies import diagnostics

    if args.permutations < 1:
        raise GuardError(f"--permutations must be >= 1, got {args.permutations}")
    result = diagnostics.run_bench_constructed(permutations=args.permutations, progress=not args.json)
    if args.plot:
        diagnostics.dropout_plot(result, args.plot)
    return _emit(result, args.json, diagnostics.format_constructed)


def _bench_evasion(args: argparse.Namespace) -> int:
    from guard.studies.evasion import format_evasion, run_evasion_study

    return _emit(run_evasion_study(), args.json, format_evasion)


def _bench_perf(args: argparse.Namespace) -> int:
    import importlib
    import sys
    from pathlib import Path

    import guard

    for root in (Path.cwd(), Path(guard.__file__).resolve().parents[1]):
        if (root / "benchmarks" / "perf.py").exists() and str(root) not in sys.path:
            sys.path.insert(0, str(root))
            break
    try:
        perf = importlib.import_module("benchmarks.perf")
    except ImportError as exc:
        raise GuardError("bench perf runs from a source checkout (the benchmarks/ folder): " + str(exc)) from exc
    return _emit(perf.run(quick=args.quick), args.json, perf.format_perf)


def add_ledger_check(sub: Any) -> None:
    """``carbguard ledger-check``."""
    led = sub.add_parser("ledger-check", help="agreement of the declared ledger with AgentDojo's security flag")
    led.add_argument("--corpus", default="all", help="embedded model name or 'all'")
    led.add_argument("--json", action="store_true")
    led.set_defaults(func=_ledger_check)


def _ledger_check(args: argparse.Namespace) -> int:
    from guard.studies.ledger_check import format_check, ledger_check

    return _emit(ledger_check(args.corpus), args.json, format_check)


def add_safecommit(sub: Any) -> None:
    """``carbguard safecommit study|calibrate`` (the options are those of the modules' own CLIs)."""
    sc = sub.add_parser("safecommit", help="SafeCommit on AgentDojo: replay study, kappa calibration")
    sc.add_argument("action", choices=["study", "calibrate"], help="study: replay counts and loss; calibrate: kappa")
    sc.add_argument("rest", nargs=argparse.REMAINDER, help="options (see `carbguard safecommit ACTION --help`)")
    sc.set_defaults(func=_safecommit)


def _safecommit(args: argparse.Namespace) -> int:
    if args.action == "study":
        from guard.studies.safecommit_agentdojo import main as study_main

        return study_main(args.rest)
    from guard.calibration.kappa import main as calibrate_main

    return calibrate_main(args.rest)


def add_agentdojo(sub: Any) -> None:
    """``carbguard agentdojo run``."""
    ad = sub.add_parser("agentdojo", help="re-run logged AgentDojo episodes offline with the guard in the loop")
    ad_sub = ad.add_subparsers(dest="action", required=True)
    run = ad_sub.add_parser(
        "run",
        help="AgentDojo's own utility and attack success with and without the guard, and online = offline checks",
    )
    source = run.add_mutually_exclusive_group()
    source.add_argument("--runs", help="a folder in AgentDojo's runs/ layout")
    source.add_argument("--corpus", help="an embedded model name (default gpt-4o-2024-05-13)")
    run.add_argument("--suite", action="append", choices=["banking", "slack", "travel", "workspace"],
                     help="repeatable; default all four")
    run.add_argument("--mode", choices=["abort", "deny"], default="abort")
    run.add_argument("--artifact", help="calibration artifact for the threshold (default: the suite policy's)")
    run.add_argument("--limit", type=int, help="at most this many episodes per suite")
    run.add_argument("--json", action="store_true")
    run.set_defaults(func=_agentdojo_run)


def _agentdojo_run(args: argparse.Namespace) -> int:
    from guard.adapters.agentdojo import run_suite
    from guard.artifact import load_artifact
    from guard.corpora import agentdojo
    from guard.runtime import Guard

    loaded = agentdojo.load_runs(args.runs) if args.runs else agentdojo.load_embedded(
        args.corpus or "gpt-4o-2024-05-13"
    )

    def make_guard(suite: str) -> Guard:
        if args.artifact is None:
            return Guard.from_policy(agentdojo.suite_policy_path(suite))
        policy = agentdojo.load_suite_policy(suite)
        art = load_artifact(args.artifact, policy)
        return Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id)

    results = [
        run_suite(loaded, suite, guard_factory=make_guard, mode=args.mode, limit=args.limit, progress=not args.json)
        for suite in (args.suite or ["banking", "slack", "travel", "workspace"])
    ]
    return _emit(results[0] if len(results) == 1 else results, args.json, _format_agentdojo)


def _format_agentdojo(results: Any) -> str:
    rows = results if isinstance(results, list) else [results]
    head = (
        f"{'suite':<11}{'episodes':>9}{'utility':>9}{'->':>4}{'guard':>7}"
        f"{'attack':>9}{'->':>4}{'guard':>7}{'online=offline':>17}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        w, g = r["without_guard"], r["with_guard"]
        lines.append(
            f"{r['suite']:<11}{r['episodes']:>9}{w['utility']:>9.3f}{'':>4}{g['utility']:>7.3f}"
            f"{w['attack_success']:>9.3f}{'':>4}{g['attack_success']:>7.3f}"
            f"{r['decisions_equal']:>10}/{r['decisions_compared']}"
        )
    return "\n".join(lines)
