"""``carbguard ledger check``: the declared ledger (policy rules plus labels) on an episodes file."""

from __future__ import annotations

import argparse
from typing import Any

from guard.cli._common import emit


def _check(args: argparse.Namespace) -> int:
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
        "ledger", help="the declared harm ledger: policy rules and labels",
        description="The ledger is what calibration charges; the gate never reads it.",
    )
    cmds = led.add_subparsers(dest="ledger_command", required=True)
    chk = cmds.add_parser(
        "check", help="per-category counts (rules, labels, ledger) and every disagreement between rules and labels"
    )
    chk.add_argument("--policy", action="append", required=True, help="policy file with a ledger: section (repeatable)")
    chk.add_argument("--episodes", required=True, help="a carbguard-episodes/1 file")
    chk.add_argument("--labels", help="a labels file (JSON lines)")
    chk.add_argument("--json", action="store_true", help="print JSON instead of the table")
    chk.set_defaults(func=_check)
