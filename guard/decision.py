"""Verdicts and decisions: values, not exceptions (METHOD §12)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any


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

