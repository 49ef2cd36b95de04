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
    evaluate,
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
    evaluate,
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
    args, unknown = parser.parse_known_args(args_list)
    if unknown:  # the usage of the subcommand that was given, not the top level's
        _deepest(parser, args_list).error(f"unrecognized arguments: {' '.join(unknown)}")
    args.argv = args_list
    func: Callable[[argparse.Namespace], int] = args.func
    return run_command(func, args)


def _deepest(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The innermost subcommand parser that ``argv`` names (the top-level parser when none)."""
    for token in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            break
        choice = subs[0].choices.get(token)
        if choice is not None:
            parser = choice
    return parser


def bench_main(name: str, argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.NAME [--quick] [--json]``: the same as ``carbguard bench NAME``."""
    return main(["bench", name, *(sys.argv[1:] if argv is None else argv)])


__all__ = ["SCOPE", "bench_main", "build_parser", "main"]
