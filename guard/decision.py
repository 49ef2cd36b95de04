"""Verdicts, decisions and the guard's mode: values, not exceptions."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping
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


def with_latency(decision: Decision, latency_us: float) -> Decision:
    """The decision with its measured latency: ``dataclasses.replace(decision, latency_us=latency_us)``, every
    field passed to the class in its order, read by two attribute getters (half the time of ``replace``, which
    looks each field up by name; every decision takes this step)."""
    make: Callable[..., Decision] = type(decision)
    return make(*_BEFORE_LATENCY(decision), latency_us, *_AFTER_LATENCY(decision))


def _field_getters() -> tuple[operator.attrgetter[Any], operator.attrgetter[Any]]:
    """The getters of the fields of :class:`Decision` before and after ``latency_us`` (each a tuple of two or more:
    a getter of one name returns the value, not a tuple), checked when this module is imported."""
    fields = dataclasses.fields(Decision)
    names = [f.name for f in fields]
    at = names.index("latency_us")
    before, after = names[:at], names[at + 1 :]
    if not all(f.init for f in fields) or len(before) < 2 or len(after) < 2:
        raise TypeError("with_latency passes every field of Decision in order: two or more on each side")
    return operator.attrgetter(*before), operator.attrgetter(*after)


_BEFORE_LATENCY, _AFTER_LATENCY = _field_getters()
