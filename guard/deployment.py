"""What a policy file deploys: the policy with fitted weights, the artifact's threshold and id, the fallback.

:meth:`guard.runtime.Guard.from_policy` builds a guard from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from guard.artifact import apply_fitted_weights, load_artifact
from guard.errors import PolicyError
from guard.policy import FALLBACK_WORDS, Policy, load_policy


@dataclass(frozen=True, slots=True)
class Deployment:
    """A loaded policy and its calibration: threshold, artifact id, audit path, fallback threshold and id.

    ``fallback`` is ``-inf`` for ``calibration.fallback: escalate`` (as it always was), the word
    ``"escalate_risky"`` for that fallback, or the stricter artifact's threshold.
    """

    policy: Policy
    threshold: float
    artifact_id: str
    audit: Path | None
    fallback: float | str
    fallback_id: str | None


def load_deployment(path: str | Path) -> Deployment:
    """Load a policy, the calibration artifact it names (weights, threshold, id) and its breaker fallback.

    Raises :class:`PolicyError` when the policy names no artifact, or a fallback looser than the artifact.
    """
    policy = load_policy(path)
    if policy.calibration.artifact is None:
        raise PolicyError(f"{path}: calibration.artifact is not set; use Guard(policy, threshold=...) instead")
    artifact_path = policy.resolve(policy.calibration.artifact)
    policy = apply_fitted_weights(load_artifact(artifact_path).body, policy, artifact_path)  # frozen pipeline
    artifact = load_artifact(artifact_path, policy)
    audit = None if policy.audit.path is None else policy.resolve(policy.audit.path)
    fallback, fallback_id = policy_fallback(policy, artifact.threshold, f"{path}: calibration.fallback's", "artifact's")
    return Deployment(policy, artifact.threshold, artifact.artifact_id, audit, fallback, fallback_id)


def policy_fallback(policy: Policy, threshold: float, what: str, than: str) -> tuple[float | str, str | None]:
    """The breaker fallback ``policy.calibration.fallback`` names, and its artifact id (None for a word).

    ``escalate`` is ``-inf`` (as it always was), ``escalate_risky`` the word; a path is the stricter
    artifact's threshold, loaded and checked against ``policy`` (:func:`guard.artifact.load_artifact`).
    Raises :class:`PolicyError` when that threshold is looser than ``threshold`` ("``what`` threshold is
    looser than the ``than``").
    """
    named = policy.calibration.fallback
    if named in FALLBACK_WORDS:
        return (-math.inf if named == "escalate" else named), None
    strict = load_artifact(policy.resolve(named), policy)
    if strict.threshold > threshold:
        raise PolicyError(f"{what} threshold is looser than the {than}")
    return strict.threshold, strict.artifact_id


__all__ = ["Deployment", "load_deployment", "policy_fallback"]
