"""``carbguard agentdojo run``: logged AgentDojo episodes re-run offline with the guard in the loop."""

from __future__ import annotations

import argparse
import json
from typing import Any

from guard.cli._common import add_json

SUITES = ["banking", "slack", "travel", "workspace"]


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
    run.add_argument("--suite", action="append", choices=SUITES, help="a suite to run (repeatable; default all four)")
    run.add_argument(
        "--mode",
        choices=["abort", "deny"],
        default="abort",
        help="abort: a refused call ends the episode (default); deny: refuse it and let the agent go on",
    )
    run.add_argument("--artifact", help="calibration artifact for the threshold (default: the suite policy's)")
    run.add_argument("--limit", type=int, help="at most this many episodes per suite")
    add_json(run, "every suite's row")
    run.set_defaults(func=_agentdojo_run)


def _agentdojo_run(args: argparse.Namespace) -> int:
    from guard.adapters.agentdojo import run_suite
    from guard.artifact import load_artifact
    from guard.corpora import agentdojo
    from guard.runtime import Guard

    name = args.runs or args.corpus or "gpt-4o-2024-05-13"
    loaded = agentdojo.load_runs(args.runs, progress=not args.json) if args.runs else agentdojo.load_embedded(name)

    def make_guard(suite: str) -> Guard:
        if args.artifact is None:
            return Guard.from_policy(agentdojo.suite_policy_path(suite))
        policy = agentdojo.load_suite_policy(suite)
        art = load_artifact(args.artifact, policy)
        return Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id)

    if not args.json:
        print(f"corpus {name}, mode {args.mode}", flush=True)
        print("\n".join(HEADER), flush=True)
    results = []
    for suite in args.suite or SUITES:
        row = run_suite(
            loaded, suite, guard_factory=make_guard, mode=args.mode, limit=args.limit, progress=not args.json
        )
        results.append(row)
        if not args.json:
            print(format_row(row), flush=True)  # each row as soon as its suite is done
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=1))
    return 0


_HEAD = (
    f"{'suite':<11}{'episodes':>9}{'utility':>9}{'->':>4}{'guard':>7}"
    f"{'attack':>9}{'->':>4}{'guard':>7}{'online=offline':>17}"
)
HEADER = (_HEAD, "-" * len(_HEAD))


def format_row(r: dict[str, Any]) -> str:
    """One suite's table row: utility and attack success without and with the guard, online = offline checks."""
    w, g = r["without_guard"], r["with_guard"]
    return (
        f"{r['suite']:<11}{r['episodes']:>9}{w['utility']:>9.3f}{'':>4}{g['utility']:>7.3f}"
        f"{w['attack_success']:>9.3f}{'':>4}{g['attack_success']:>7.3f}"
        f"{r['decisions_equal']:>10}/{r['decisions_compared']}"
    )
