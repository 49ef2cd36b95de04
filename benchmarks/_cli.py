"""The one command-line shape every benchmark shares: ``python -m benchmarks.NAME [--json] [--quick]``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any


def bench_main(
    name: str,
    description: str,
    run: Callable[[bool, bool], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    argv: Sequence[str] | None = None,
    errors: tuple[type[Exception], ...] = (),
) -> int:
    """Parse ``--json``/``--quick``, run, print one JSON object or the table; errors → exit 2."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=description)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="small repeat counts")
    args = parser.parse_args(argv)
    try:
        out = run(args.quick, sys.stderr.isatty() and not args.json)
    except errors as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out) if args.json else render(out))
    return 0
