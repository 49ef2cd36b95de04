"""The ``carbguard`` command line, one module per command group.  Every error is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from guard.cli import (
    agentdojo,
    audit,
    bench,
    calibration,
    ceiling,
    episodes,
    ledger,
    mcp,
    monitor,
    policy,
    report,
    review,
    studies,
)
from guard.cli._common import SCOPE
from guard.errors import GuardError

GROUPS = (
    policy, audit, calibration, ceiling, episodes, ledger, monitor, review, report, bench, studies, agentdojo, mcp,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="carbguard", description="carbguard: a runtime guard for tool-calling LLM agents.", epilog=SCOPE
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(args_list)
    args.argv = args_list
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except GuardError as exc:
        print(f"carbguard: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("carbguard: interrupted", file=sys.stderr)
        return 130


__all__ = ["SCOPE", "build_parser", "main"]
