"""``carbguard report``: the HTML decision explorer."""

from __future__ import annotations

import argparse
from typing import Any

from guard.errors import GuardError


def register(sub: Any) -> None:
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
