"""The summary ``carbguard safecommit calibrate`` prints (the parser lives in :mod:`guard.cli.studies`)."""

from __future__ import annotations

from typing import Any


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


__all__ = ["summary"]
