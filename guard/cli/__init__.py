"""The ``carbguard`` command line, one module per command group.  Every error is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import guard
from guard.cli import (
    agentdojo,
    audit,
    bench,
    calibration,
    ceiling,
    data,
    episodes,
    ledger,
    mcp,
    monitor,
    policy,
    report,
    review,
    studies,
)
from guard.cli._common import SCOPE, run_command

GROUPS = (
    policy,
    audit,
    calibration,
    ceiling,
    episodes,
    ledger,
    monitor,
    review,
    report,
    bench,
    studies,
    agentdojo,
    mcp,
    data,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="carbguard", description="carbguard: a runtime guard for tool-calling LLM agents.", epilog=SCOPE
    )
    parser.add_argument(
        "--version", action="version", version=f"carbguard {guard.__version__}", help="print the version and exit"
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
    return run_command(func, args)


def bench_main(name: str, argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.NAME [--quick] [--json]``: the same as ``carbguard bench NAME``."""
    return main(["bench", name, *(sys.argv[1:] if argv is None else argv)])


__all__ = ["SCOPE", "bench_main", "build_parser", "main"]
