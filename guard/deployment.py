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
    fallback: float | str = -math.inf
    fallback_id: str | None = None
    if policy.calibration.fallback == "escalate_risky":
        fallback = "escalate_risky"
    elif policy.calibration.fallback not in FALLBACK_WORDS:
        strict = load_artifact(policy.resolve(policy.calibration.fallback), policy)
        if strict.threshold > artifact.threshold:
            raise PolicyError(f"{path}: calibration.fallback's threshold is looser than the artifact's")
        fallback, fallback_id = strict.threshold, strict.artifact_id
    return Deployment(policy, artifact.threshold, artifact.artifact_id, audit, fallback, fallback_id)


__all__ = ["Deployment", "load_deployment"]
