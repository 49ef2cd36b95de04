"""``carbguard agentdojo run``: logged AgentDojo episodes re-run offline with the guard in the loop."""

from __future__ import annotations

import argparse
from typing import Any

from guard.cli._common import emit


def register(sub: Any) -> None:
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
    return emit(results[0] if len(results) == 1 else results, args.json, _format_agentdojo)


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
