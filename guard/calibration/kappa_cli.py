"""``carbguard safecommit calibrate``: κ from the embedded AgentDojo episodes (:mod:`guard.calibration.kappa`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from guard.calibration.kappa import Gate, calibrate_kappa
from guard.errors import GuardError


def summary(body: dict[str, Any]) -> str:
    """A few lines: α, n, r, κ, case counts, coverage."""
    cases, cov = body["cases"], body["coverage_in_sample"]
    return "\n".join(
        [
            f"alpha={body['alpha']} n={body['n']} r={body['r']} kappa={body['kappa']}",
            f"episodes: {body['episodes']['count']} ({', '.join(body['episodes']['models'])}); "
            f"{body['episodes']['with_cases']} with calibration cases",
            f"cases: {cases['used']} used ({cases['unsafe']} unsafe, {cases['legit']} legit); "
            f"{cases['support_miss']} support misses, {cases['no_target']} proposals with nothing to check",
            f"per suite: {cases['per_suite']}",
            f"in-sample coverage: all {cov['all']}, unsafe {cov['unsafe']}",
            _gate_line(body.get("gate")),
        ]
    )


def _gate_line(gate: dict[str, Any] | None) -> str:
    if gate is None:
        return "gate: none (every certified proposal is a case)"
    return f"gate: G-CARB score <= {gate['threshold']} of {gate['artifact']} (checksum {gate['checksum'][:12]})"


def main(argv: Sequence[str] | None = None) -> int:
    """``carbguard safecommit calibrate --alpha A [--model M] [--exclude-model M ...] [--out FILE] [--json]``."""
    parser = argparse.ArgumentParser(
        prog="carbguard safecommit calibrate", description="κ from ledger-labelled AgentDojo cases (METHOD §10)"
    )
    parser.add_argument("--alpha", type=float, required=True)
    parser.add_argument("--model", default="all", help="embedded model, or 'all'")
    parser.add_argument("--exclude-model", action="append", default=[], help="leave a model out (repeatable)")
    parser.add_argument(
        "--gate-artifact",
        help="CARB artifact in front of SafeCommit: calibrate κ only on proposals with G-CARB score ≤ its threshold",
    )
    parser.add_argument("--out", help="artifact path")
    parser.add_argument("--json", action="store_true", help="print the artifact body instead of a summary")
    args = parser.parse_args(argv)
    command = "carbguard safecommit calibrate " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        gate = Gate.from_artifact(args.gate_artifact) if args.gate_artifact else None
        body = calibrate_kappa(
            args.model, args.alpha, exclude_models=args.exclude_model, out=args.out, command=command, gate=gate
        )
    except GuardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(body, indent=1, sort_keys=True) if args.json else summary(body))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
