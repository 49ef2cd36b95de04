"""SafeCommit: conformal action certificates over plausible worlds (docs/safecommit.md).

The pure core is importable from here: value types, the split-conformal κ, the certificate,
probe choice, fallbacks, the controller's :func:`step`, and the policy-file models of the
``safecommit:`` section.  The modules that need the runtime are imported by name, so that
``guard.policy`` can import this package without a cycle:

- :mod:`guard.safecommit.worlds` — world constructors for real tool calls;
- :mod:`guard.safecommit.runtime` — ``PolicyCertifier``, the runtime's certify stage;
- :mod:`guard.calibration.kappa` — κ from AgentDojo episodes with ledger-labelled true worlds;
- :mod:`guard.studies.safecommit_agentdojo` — G-CARB alone versus G-CARB + SafeCommit in replay.
"""

from __future__ import annotations

from guard.policy.safecommit import (
    AlternativeSpec,
    KappaArtifact,
    KappaCalibrate,
    Nonconformity,
    OutcomeRule,
    ProbeConfig,
    ResourceCheck,
    SafeCommitSpec,
    ValueCheck,
    WorldConstructor,
)
from guard.safecommit.conformal import (
    SmallCalibrationWarning,
    conformal_rank,
    conformal_threshold,
    minimum_calibration_size,
    pvalue_retained,
    retained_mask,
)
from guard.safecommit.controller import SafeCommitController, step
from guard.safecommit.fallback import choose_fallback
from guard.safecommit.types import (
    Action,
    Certificate,
    ProbeRecord,
    ProbeSpec,
    SafeCommitLog,
    SafeCommitResult,
    SafetyClass,
    World,
)

__all__ = [
    "Action",
    "AlternativeSpec",
    "Certificate",
    "KappaArtifact",
    "KappaCalibrate",
    "Nonconformity",
    "OutcomeRule",
    "ProbeConfig",
    "ProbeRecord",
    "ProbeSpec",
    "ResourceCheck",
    "SafeCommitController",
    "SafeCommitLog",
    "SafeCommitResult",
    "SafeCommitSpec",
    "SafetyClass",
    "SmallCalibrationWarning",
    "ValueCheck",
    "World",
    "WorldConstructor",
    "choose_fallback",
    "conformal_rank",
    "conformal_threshold",
    "minimum_calibration_size",
    "pvalue_retained",
    "retained_mask",
    "step",
]
