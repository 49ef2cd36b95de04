"""Verdicts, decisions and the guard's mode: values, not exceptions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from guard.errors import PolicyError


class Mode(StrEnum):
    """How a guard acts on its decisions.

    ``ENFORCE`` lets a call run only once the guard authorized it; ``SHADOW`` decides and audits every
    call exactly as enforcing would, but never blocks (for recording a deployment's own episodes).
    """

    ENFORCE = "enforce"
    SHADOW = "shadow"

    @classmethod
    def parse(cls, value: object) -> Mode:
        """``value`` (a Mode or its text) as a Mode; PolicyError naming the value and the modes otherwise."""
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                pass
        raise PolicyError(f"mode must be one of {', '.join(m.value for m in cls)}, got {value!r}")


class Verdict(StrEnum):
    """What the adapter must do with a proposal."""

    EXECUTE = "execute"
    PROBE = "probe"
    DEFER = "defer"
    ESCALATE = "escalate"
    ABSTAIN = "abstain"


class Reason(StrEnum):
    """Stable reason codes carried by every decision."""

    UNDER_THRESHOLD = "under_threshold"
    RISK_BUDGET = "risk_budget"
    CERTIFIED = "certified"
    PROBE_NEEDED = "probe_needed"
    NOT_CERTIFIED = "not_certified"
    UNKNOWN_TOOL = "unknown_tool"
    BAD_ARGUMENTS = "bad_arguments"
    CALL_REUSED = "call_reused"
    INTERNAL_ERROR = "internal_error"
    SIGNATURE = "signature"


@dataclass(frozen=True, slots=True)
class ProbeCall:
    """A side-effect-free call the adapter should run before deciding again."""

    tool: str
    args: Mapping[str, Any]
    call_id: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """The gate's answer for one proposal."""

    verdict: Verdict
    reason: Reason
    message: str
    score: float | None
    threshold: float | None
    features: Mapping[str, bool] = field(default_factory=lambda: MappingProxyType({}))
    selected: tuple[int, ...] = ()
    proposal_index: int = -1
    tool: str = ""
    call_id: str = ""
    latency_us: float = 0.0
    probes: tuple[ProbeCall, ...] = ()
    safecommit: Mapping[str, Any] | None = None
    args: Mapping[str, Any] | None = None

    @property
    def allowed(self) -> bool:
        """True only for ``execute``."""
        return self.verdict is Verdict.EXECUTE


@dataclass(frozen=True, slots=True)
class Certification:
    """What the certify stage (SafeCommit) says about a side-effectful proposal under the threshold."""

    verdict: Verdict
    reason: Reason
    message: str
    probes: tuple[ProbeCall, ...] = ()
    log: Mapping[str, Any] | None = None


def threshold_words(tripped: bool, artifact_id: str | None) -> str:
    """How a refusal names the threshold in force: calibrated only when an artifact set it (a threshold typed
    by hand, ``Guard(policy, threshold=0.5)``, is not calibrated; after a trip, the fallback artifact's is)."""
    if tripped:
        return "the fallback artifact's calibrated threshold" if artifact_id else "the fallback threshold"
    return "the calibrated threshold" if artifact_id else "the threshold set by hand"
