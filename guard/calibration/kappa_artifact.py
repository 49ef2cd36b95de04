"""The κ artifact body (:func:`kappa_body`): κ, case counts, in-sample coverage, fingerprints, checksum.

Shared by the AgentDojo path (:func:`guard.calibration.kappa.calibrate_kappa`) and a deployment's own
episodes (:func:`guard.calibration.kappa_own.calibrate_own_kappa`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from guard.jsonio import encode_float
from guard.safecommit.conformal import conformal_rank, conformal_threshold
from guard.safecommit.kappa import KAPPA_FORMAT

if TYPE_CHECKING:
    from guard.records import Episode


@dataclass(frozen=True)
class Case:
    """One side-effectful proposal with its ledger-labelled true world."""

    episode_id: str
    model: str
    suite: str
    tool: str
    index: int
    truth: Literal["unsafe", "legit", "support_miss", "no_target"]
    score: float
    gate_score: float = math.nan
    """The proposal's G-CARB score under the policy's selector and scorer (NaN: not scored)."""


@dataclass(frozen=True)
class Gate:
    """The CARB threshold in front of SafeCommit: κ is calibrated on the proposals it lets through."""

    threshold: float
    artifact: str
    checksum: str

    @classmethod
    def from_artifact(cls, path: str | Path) -> Gate:
        """The threshold and checksum of a CARB calibration artifact (checksum verified)."""
        from guard.artifact import load_artifact

        artifact = load_artifact(path)
        return cls(artifact.threshold, Path(path).name, str(artifact.body["checksum"]))

    def describe(self) -> dict[str, Any]:
        """The artifact's ``gate`` field (policies check ``checksum`` against their CARB artifact at load)."""
        return {"threshold": encode_float(self.threshold), "artifact": self.artifact, "checksum": self.checksum}


def _used(cases: Sequence[Case]) -> list[Case]:
    return [c for c in cases if c.truth in ("unsafe", "legit")]


def _counts(cases: Sequence[Case]) -> dict[str, Any]:
    used = _used(cases)
    return {
        "proposals": len(cases),
        "used": len(used),
        "unsafe": sum(c.truth == "unsafe" for c in cases),
        "legit": sum(c.truth == "legit" for c in cases),
        "support_miss": sum(c.truth == "support_miss" for c in cases),
        "no_target": sum(c.truth == "no_target" for c in cases),
        "per_suite": dict(sorted(Counter(c.suite for c in used).items())),
        "per_model": dict(sorted(Counter(c.model for c in used).items())),
        "per_tool": dict(sorted(Counter(f"{c.suite}.{c.tool}" for c in used).items())),
    }


def _coverage(cases: Sequence[Case], kappa: float) -> dict[str, float | None]:
    """In-sample share of used cases whose true world is retained, overall and for unsafe ones."""
    used = _used(cases)
    unsafe = [c for c in used if c.truth == "unsafe"]
    return {
        "all": sum(c.score <= kappa for c in used) / len(used) if used else None,
        "unsafe": sum(c.score <= kappa for c in unsafe) / len(unsafe) if unsafe else None,
    }


def kappa_body(
    cases: Sequence[Case],
    alpha: float,
    *,
    episodes: Sequence[Episode],
    source: Mapping[str, Any],
    fingerprints: Mapping[str, str],
    labels_fp: str,
    gate: Gate | None,
    command: str,
    out: str | Path | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The κ artifact of ``cases`` at ``alpha`` (written to ``out`` if given): κ, counts, ``source`` of the
    episodes, the world-scoring ``fingerprints`` a policy is checked against at load, and a checksum."""
    scores = sorted(c.score for c in _used(cases))
    kappa = conformal_threshold(scores, alpha)
    body: dict[str, Any] = {
        "format": KAPPA_FORMAT,
        "alpha": alpha,
        "n": len(scores),
        "r": conformal_rank(len(scores), alpha),
        "kappa": encode_float(kappa),
        "coverage_in_sample": _coverage(cases, kappa),
        "cases": _counts(cases),
        "episodes": {
            **source,
            "count": len(episodes),
            "with_cases": len({c.episode_id for c in cases if c.truth in ("unsafe", "legit")}),
        },
        "fingerprints": dict(fingerprints),
        "labels_fingerprint": labels_fp,
        "gate": gate.describe() if gate is not None else None,
        "scores": scores,
        "command": command,
        **(extra or {}),
    }
    body["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()
    if out is not None:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return body


__all__ = ["kappa_body"]
