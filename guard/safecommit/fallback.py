"""Which refusal fits when nothing is certified and no probe is run (docs/safecommit.md, Fallback).

The fallback matches what is missing, read from the retained and blocking worlds:

1. ``abstain`` / ``empty_world_set`` — no world survives filtering (score threshold, probes);
2. ``abstain`` / ``no_safe_action`` — no candidate action is safe in any retained world;
3. ``escalate`` / ``authority_missing`` — a blocking world has the fact
   ``authority = missing``: approval, not information, is what is missing;
4. ``defer`` / ``evidence_pending`` — a blocking world has the fact ``evidence = pending``:
   a fresh observation is expected later;
5. ``abstain`` / ``no_certified_action`` — otherwise: no action can be certified now.

World constructors set the two facts; nothing else about a world's facts is read here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from guard.safecommit.types import Verdict, World

AUTHORITY_FACT = "authority"
AUTHORITY_MISSING = "missing"
EVIDENCE_FACT = "evidence"
EVIDENCE_PENDING = "pending"


def choose_fallback(
    retained: Sequence[World], gamma_retained: npt.ArrayLike, blocking: Sequence[World]
) -> tuple[Verdict, str]:
    """The fallback verdict and its reason code, by the rules in the module docstring."""
    if not retained:
        return "abstain", "empty_world_set"
    if not np.asarray(gamma_retained, dtype=np.bool_).any():
        return "abstain", "no_safe_action"
    if any(w.facts.get(AUTHORITY_FACT) == AUTHORITY_MISSING for w in blocking):
        return "escalate", "authority_missing"
    if any(w.facts.get(EVIDENCE_FACT) == EVIDENCE_PENDING for w in blocking):
        return "defer", "evidence_pending"
    return "abstain", "no_certified_action"


__all__ = [
    "AUTHORITY_FACT",
    "AUTHORITY_MISSING",
    "EVIDENCE_FACT",
    "EVIDENCE_PENDING",
    "choose_fallback",
]
