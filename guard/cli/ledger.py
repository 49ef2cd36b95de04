"""``carbguard ledger check``: the declared ledger on your episodes (rules and labels) or on an AgentDojo corpus."""

from __future__ import annotations

import argparse
from typing import Any

from guard.cli._common import add_json, emit
from guard.errors import GuardError


def _check(args: argparse.Namespace) -> int:
    if args.corpus is not None:
        if args.episodes is not None or args.policy or args.labels is not None:
            raise GuardError("ledger check: --corpus (AgentDojo) cannot be combined with --policy/--episodes/--labels")
        from guard.studies.ledger_check import format_check as format_agentdojo
        from guard.studies.ledger_check import ledger_check as agentdojo_check

        return emit(agentdojo_check(args.corpus), args.json, format_agentdojo)
    if args.episodes is None or not args.policy:
        raise GuardError("ledger check needs --policy P --episodes E [--labels L], or --corpus NAME for AgentDojo")
    from guard.corpora.episodes import read_episodes
    from guard.ledger.check import format_check, ledger_check
    from guard.ledger.labels import attach, read_labels
    from guard.policy import load_policy

    read = read_episodes(args.episodes, [load_policy(p) for p in args.policy])
    labels = read_labels(args.labels) if args.labels else {}
    attached = attach(labels, read.episodes, args.labels or "labels")
    return emit(ledger_check(read.episodes, read.policy_of, labels, attached), args.json, format_check)


def register(sub: Any) -> None:
    """``carbguard ledger check``."""
    led = sub.add_parser(
        "ledger",
        help="the declared harm ledger: policy rules and labels",
        description="The ledger is what calibration charges; the gate never reads it.",
    )
    cmds = led.add_subparsers(dest="ledger_command", required=True)
    chk = cmds.add_parser(
        "check",
        help="which episodes the rules and labels charge, per category, and every disagreement",
        description="With --policy/--episodes: per-category counts (rules, labels, ledger), per rule the episodes "
        "it charges and the labels that override or add to its charges, the episodes the rules charge, charged "
        "episodes without a label, and every disagreement between rules and labels. "
        "With --corpus: how the AgentDojo ledger agrees with AgentDojo's own security verdict.",
    )
    chk.add_argument("--policy", action="append", default=[], help="policy file with a ledger: section (repeatable)")
    chk.add_argument("--episodes", help="a carbguard-episodes/1 file")
    chk.add_argument("--labels", help="a labels file (JSON lines)")
    chk.add_argument(
        "--corpus",
        help="instead of your episodes: an embedded AgentDojo model name or 'all' (agreement with "
        "AgentDojo's security flag)",
    )
    add_json(chk)
    chk.set_defaults(func=_check)
