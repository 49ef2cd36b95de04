"""carbguard: a runtime guard for tool-calling LLM agents.

For every proposed tool call the guard extends a provenance graph of the episode, selects the
evidence along it (G-CARB), scores it with a frozen weighted scorer, compares the score with a
threshold calibrated by conformal risk control (CARB), and, for side-effectful calls, certifies the
action across the plausible worlds (SafeCommit).  Guarantee, exactly: for exchangeable episodes and
a frozen pipeline, the expected loss on the declared harm ledger of a new episode is at most α.
"""

from __future__ import annotations

from guard.decision import Decision, Mode, ProbeCall, Reason, Verdict
from guard.errors import (
    ArtifactError,
    AuditError,
    CalibrationError,
    CorpusError,
    GuardError,
    InputError,
    PolicyError,
)
from guard.policy import Policy, load_policy
from guard.records import Episode, Record
from guard.runtime import Guard, Session

__version__ = "0.1.0"

__all__ = [
    "ArtifactError",
    "AuditError",
    "CalibrationError",
    "CorpusError",
    "Decision",
    "Episode",
    "Guard",
    "GuardError",
    "InputError",
    "Mode",
    "Policy",
    "PolicyError",
    "ProbeCall",
    "Reason",
    "Record",
    "Session",
    "Verdict",
    "__version__",
    "load_policy",
]
