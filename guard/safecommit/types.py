"""Value types of SafeCommit (docs/safecommit.md): worlds, actions, probes, certificates and the log.

Every type is a frozen dataclass that checks its own fields, so a bad world or probe fails
where it is built, with a message that names the field.  The numerics in ``conformal``,
``certificate`` and ``probes`` work on arrays; these types are what a caller hands in and gets
back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from guard.errors import InputError
from guard.jsonio import encode_float

Verdict = Literal["execute", "probe", "defer", "escalate", "abstain"]
VERDICTS: tuple[Verdict, ...] = ("execute", "probe", "defer", "escalate", "abstain")

JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]


def _frozen_mapping(value: Mapping[str, str], owner: str) -> Mapping[str, str]:
    """Copy ``value`` into a read-only mapping of str to str, or raise InputError."""
    if not isinstance(value, Mapping):
        raise InputError(f"{owner}: expected a mapping of str to str, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise InputError(f"{owner}: key {key!r} -> {item!r} must map str to str")
    return MappingProxyType(dict(value))


def _finite(value: float, what: str, *, positive: bool = False) -> float:
    """Return ``value`` as float if it is a finite (optionally positive) number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{what} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise InputError(f"{what} must be > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class World:
    """One interpretation of the safety-relevant facts, with its nonconformity score.

    ``score`` may be ``+inf`` (the world is never retained at a finite threshold) but not NaN;
    ``weight`` is the world's prior plausibility mass, used only to value probes.
    """

    name: str
    facts: Mapping[str, str] = field(default_factory=dict, hash=False)
    score: float = 0.0
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"World.name must be a non-empty str, got {self.name!r}")
        object.__setattr__(self, "facts", _frozen_mapping(self.facts, f"World {self.name!r}.facts"))
        score = self.score
        if isinstance(score, bool) or not isinstance(score, (int, float)) or math.isnan(score):
            raise InputError(f"World {self.name!r}.score must be a number (not NaN), got {score!r}")
        if score == -math.inf:
            raise InputError(f"World {self.name!r}.score must not be -inf")
        object.__setattr__(self, "score", float(score))
        weight = _finite(self.weight, f"World {self.name!r}.weight", positive=True)
        object.__setattr__(self, "weight", weight)


@dataclass(frozen=True)
class Action:
    """A candidate side-effectful action; utility = ``reward - severity_penalty``."""

    name: str
    reward: float = 1.0
    severity_penalty: float = 0.0
    reversible: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"Action.name must be a non-empty str, got {self.name!r}")
        object.__setattr__(self, "reward", _finite(self.reward, f"Action {self.name!r}.reward"))
        penalty = _finite(self.severity_penalty, f"Action {self.name!r}.severity_penalty")
        object.__setattr__(self, "severity_penalty", penalty)
        if not isinstance(self.reversible, bool):
            raise InputError(f"Action {self.name!r}.reversible must be a bool")

    @property
    def utility(self) -> float:
        """Reward minus severity penalty: the tie-break among certified actions."""
        return self.reward - self.severity_penalty


@dataclass(frozen=True)
class ProbeSpec:
    """A side-effect-free probe: its cost and the outcome label it returns in each world.

    ``outcomes`` must name every world the probe is used with; an observed outcome removes the
    worlds whose label differs.
    """

    name: str
    cost: float = 1.0
    outcomes: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"ProbeSpec.name must be a non-empty str, got {self.name!r}")
        cost = _finite(self.cost, f"ProbeSpec {self.name!r}.cost", positive=True)
        object.__setattr__(self, "cost", cost)
        owner = f"ProbeSpec {self.name!r}.outcomes"
        object.__setattr__(self, "outcomes", _frozen_mapping(self.outcomes, owner))

    @property
    def labels(self) -> tuple[str, ...]:
        """The distinct outcome labels, sorted."""
        return tuple(sorted(set(self.outcomes.values())))


@dataclass(frozen=True)
class Certificate:
    """Certified actions over the retained worlds, the one chosen, and who blocks the rest."""

    certified: tuple[str, ...]
    chosen: str | None
    blocking: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class SafetyClass:
    """One safety-equivalence class: a signature, its member worlds and their summed weight."""

    signature: tuple[bool, ...]
    worlds: tuple[str, ...]
    weight: float


@dataclass(frozen=True)
class ProbeRecord:
    """A probe that ran: its name and the parsed outcome (``None`` = could not be parsed)."""

    probe: str
    outcome: str | None
    raw_type: str


@dataclass(frozen=True)
class SafeCommitLog:
    """What one SafeCommit decision saw and why it ended where it did (docs/safecommit.md, Log)."""

    verdict: Verdict
    reason: str
    kappa: float
    actions: tuple[str, ...]
    worlds: tuple[str, ...]
    retained: tuple[str, ...]
    excluded_by_score: tuple[str, ...]
    removed_by_probes: tuple[str, ...]
    classes: tuple[SafetyClass, ...]
    certificate: Certificate
    probes_run: tuple[ProbeRecord, ...]
    budget: int
    probe: str | None = None
    expected_shrinkage: float | None = None
    probe_value: float | None = None
    probe_stop: str | None = None

    def to_dict(self) -> dict[str, JsonValue]:
        """A JSON-serialisable dict (``kappa`` = ``"inf"`` when infinite); no raw outcomes."""
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "kappa": encode_float(self.kappa),
            "actions": list(self.actions),
            "worlds": list(self.worlds),
            "retained": list(self.retained),
            "excluded_by_score": list(self.excluded_by_score),
            "removed_by_probes": list(self.removed_by_probes),
            "classes": [
                {
                    "signature": dict(zip(self.actions, c.signature, strict=True)),
                    "worlds": list(c.worlds),
                    "weight": c.weight,
                }
                for c in self.classes
            ],
            "certified": list(self.certificate.certified),
            "chosen_action": self.certificate.chosen,
            "blocking": {a: list(ws) for a, ws in self.certificate.blocking.items()},
            "probes_run": [{"probe": r.probe, "outcome": r.outcome, "raw_type": r.raw_type} for r in self.probes_run],
            "budget": self.budget,
            "probes_used": len(self.probes_run),
            "probe": self.probe,
            "expected_shrinkage": self.expected_shrinkage,
            "probe_value": self.probe_value,
            "probe_stop": self.probe_stop,
        }


@dataclass(frozen=True)
class SafeCommitResult:
    """The controller's answer: a verdict, the action to run or the probe to run, and the log."""

    verdict: Verdict
    action: str | None
    probe: str | None
    log: SafeCommitLog

    def to_dict(self) -> dict[str, JsonValue]:
        """The verdict, action, probe and the log as one JSON-serialisable dict."""
        return {
            "verdict": self.verdict,
            "action": self.action,
            "probe": self.probe,
            "log": self.log.to_dict(),
        }


__all__ = [
    "VERDICTS",
    "Action",
    "Certificate",
    "ProbeRecord",
    "ProbeSpec",
    "SafeCommitLog",
    "SafeCommitResult",
    "SafetyClass",
    "Verdict",
    "World",
]
