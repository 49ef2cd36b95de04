"""``carbguard ledger-check`` and ``carbguard safecommit study|calibrate``."""

from __future__ import annotations

import argparse
from typing import Any

from guard.cli._common import emit


def add_ledger_check(sub: Any) -> None:
    """``carbguard ledger-check``."""
    led = sub.add_parser("ledger-check", help="agreement of the declared ledger with AgentDojo's security flag")
    led.add_argument("--corpus", default="all", help="embedded model name or 'all'")
    led.add_argument("--json", action="store_true")
    led.set_defaults(func=_ledger_check)


def _ledger_check(args: argparse.Namespace) -> int:
    from guard.studies.ledger_check import format_check, ledger_check

    return emit(ledger_check(args.corpus), args.json, format_check)


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
    from guard.calibration.kappa_cli import main as calibrate_main

    return calibrate_main(args.rest)


def register(sub: Any) -> None:
    """``carbguard ledger-check`` and ``carbguard safecommit``."""
    add_ledger_check(sub)
    add_safecommit(sub)
