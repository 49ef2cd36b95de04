"""What every adapter tells the model when the guard does not run a call (one wording for all frameworks)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from guard.decision import Decision, Verdict


def refusal_text(decision: Decision) -> str:
    """What the model is told when the guard does not run a call (with SafeCommit's certified replacement)."""
    text = (
        f"carbguard did not run `{decision.tool}` ({decision.verdict.value}: {decision.reason.value}). "
        f"{decision.message}"
    )
    if decision.verdict is Verdict.PROBE:
        text += " The probes it asked for could not settle the decision."
    replacement = (decision.safecommit or {}).get("replacement")
    if isinstance(replacement, Mapping) and replacement.get("tool"):
        args = json.dumps(replacement.get("args") or {}, sort_keys=True, default=str)
        text += f" Suggested instead: {replacement['tool']}({args})."
    return text


__all__ = ["refusal_text"]
