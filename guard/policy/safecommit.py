"""The ``safecommit:`` section of a policy file: strict, frozen models (docs/safecommit.md).

::

    safecommit:
      kappa: 0.85                     # a number, or {artifact: path}, or {calibrate: true, scores: path}
      alpha: 0.10                     # the coverage target κ was (or is) calibrated for
      budget: 2                       # probes per proposal
      eta: 0.0                        # smallest expected shrinkage per cost worth a probe
      nonconformity: {provenance: 1.0, age: 0.25, inconsistency: 0.5, tool_disagreement: 0.5, policy: 1.0}
      worlds:                         # world constructors, per side-effectful tool
        send_money: {values: [recipient]}
        delete_file: {resources: [{arg: file_id, protected_patterns: ['^/shared/']}]}
      probes:                         # read-only tools that tell worlds apart
        - name: scheduled_recipient
          tool: get_scheduled_transactions
          applies_to: {send_money: [recipient]}
          rules: [{match: '{value}', label: known}, {match: 'recipient:', label: unknown}]
          outcomes: {legit: known, untrusted: unknown}
      alternatives:                   # safer candidate actions, per tool
        delete_path: [{name: stage_move, tool: move_path, args: {src: '{path}', dst: '/trash'}}]

World kinds: a checked *value* (recipient, IBAN, e-mail, URL, file id, channel, user) has the
worlds ``user`` (the user named it), ``trusted`` (a private/public record holds it) and
``untrusted`` (third-party text holds it: the proposal is unsafe there); a checked *resource*
of a deletion/overwrite has ``disposable`` and ``shared`` (shared/protected: the proposal is
unsafe there).  Probe outcomes are given per *outcome class*: ``legit`` (user or trusted) and
``untrusted`` for value probes, ``disposable`` and ``shared`` for resource probes.

κ paths are relative to the policy file and are read when the certifier is built, not when the
policy is parsed (:func:`guard.calibration.kappa.resolve_kappa`).  This module must not
import :mod:`guard.policy` (which imports it); the cross-checks against the policy's tools live
in :meth:`SafeCommitSpec.check_tools`, which ``Policy`` calls from a validator.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

WorldKind = Literal["user", "trusted", "untrusted", "disposable", "shared"]
WORLD_KINDS: tuple[WorldKind, ...] = ("user", "trusted", "untrusted", "disposable", "shared")
VALUE_KINDS: tuple[WorldKind, ...] = ("user", "trusted", "untrusted")
RESOURCE_KINDS: tuple[WorldKind, ...] = ("disposable", "shared")
VALUE_OUTCOMES = frozenset({"legit", "untrusted"})
RESOURCE_OUTCOMES = frozenset({"disposable", "shared"})
FallbackKind = Literal["escalate", "defer", "abstain"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_regexes(patterns: tuple[str, ...], where: str) -> tuple[str, ...]:
    for pattern in patterns:
        try:
            re.compile(pattern.replace("{value}", "v"))
        except re.error as exc:
            raise ValueError(f"{where}: {pattern!r} is not a valid regular expression: {exc}") from exc
    return patterns


class KappaArtifact(_Strict):
    """κ read from a SafeCommit κ artifact (``calibrate_kappa`` writes them)."""

    artifact: str = Field(min_length=1, description="Path of the κ artifact, relative to the policy file.")


class KappaCalibrate(_Strict):
    """κ computed at load time from calibration scores q_i = s(ω*_i) at the policy's α."""

    calibrate: Literal[True] = Field(description="Must be true: compute κ from the scores file at load time.")
    scores: str = Field(
        min_length=1, description="JSON file: a list of q_i or an object with a 'scores' list; relative to the policy."
    )


KappaSource = float | KappaArtifact | KappaCalibrate


class Nonconformity(_Strict):
    """Weights of s(ω) = Σ weight · component, each component in [0, 1] (docs/safecommit.md)."""

    provenance: float = Field(default=1.0, ge=0, description="No record of the world's kind carries the value.")
    age: float = Field(default=0.25, ge=0, description="Records since the supporting source, / age_horizon.")
    inconsistency: float = Field(default=0.5, ge=0, description="Cross-evidence inconsistency.")
    tool_disagreement: float = Field(default=0.5, ge=0, description="Disagreement with tool outputs.")
    policy: float = Field(default=1.0, ge=0, description="Policy incompatibility (soft; hard rules drop worlds).")
    age_horizon: int = Field(default=20, ge=1, le=100_000, description="Records at which the age component is 1.")
    injection_window: int = Field(
        default=600,
        ge=0,
        le=100_000,
        description="Not read (kept so older policy files load): a value counts as injected when an "
        "instruction-shaped clause of untrusted text holds it, whatever the text's wording.",
    )

    @model_validator(mode="after")
    def _finite(self) -> Nonconformity:
        for name in ("provenance", "age", "inconsistency", "tool_disagreement", "policy"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"nonconformity.{name} must be finite")
        return self


class ValueCheck(_Strict):
    """A payload/identifier argument whose value(s) get user / trusted / untrusted worlds."""

    arg: str = Field(min_length=1, description="The argument whose value(s) are checked.")
    extract: Literal["whole", "tokens"] = Field(
        default="whole", description="whole: each leaf value; tokens: value tokens found in it (bodies)."
    )
    patterns: tuple[str, ...] = Field(
        default=(), description="For tokens: names of graph.value_patterns (all if empty)."
    )
    allow_patterns: tuple[str, ...] = Field(default=(), description="Values the policy authorizes (soft).")
    deny_patterns: tuple[str, ...] = Field(default=(), description="Values that cannot be legitimate (hard).")
    fallback: FallbackKind = Field(default="escalate", description="Fallback when the untrusted world blocks.")

    @field_validator("allow_patterns", "deny_patterns")
    @classmethod
    def _compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _check_regexes(value, "value check pattern")


class ResourceCheck(_Strict):
    """The resource a deletion/overwrite acts on: ``disposable`` versus ``shared``/protected worlds."""

    arg: str = Field(min_length=1, description="The argument that names the resource (a path, a file id).")
    operation: Literal["delete", "overwrite"] = Field(default="delete", description="What the tool does to it.")
    protected_patterns: tuple[str, ...] = Field(default=(), description="Matched → the disposable world is dropped.")
    disposable_patterns: tuple[str, ...] = Field(default=(), description="Matched → the shared world is dropped.")
    fallback: FallbackKind = Field(default="escalate", description="Fallback when the shared world blocks.")

    @field_validator("protected_patterns", "disposable_patterns")
    @classmethod
    def _compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _check_regexes(value, "resource pattern")


def _as_checks(value: Any) -> Any:
    """Allow ``[recipient, {arg: body, extract: tokens}]``: a bare name is ``{arg: name}``."""
    if isinstance(value, list | tuple):
        return [{"arg": v} if isinstance(v, str) else v for v in value]
    return value


def _short_checks_schema(schema: dict[str, Any]) -> None:
    """The schema of ``values``/``resources`` items: a check object or a bare argument name (as the loader)."""
    for key in ("values", "resources"):
        prop = schema.get("properties", {}).get(key)
        if isinstance(prop, dict) and "items" in prop:
            prop["items"] = {"anyOf": [prop["items"], {"type": "string", "minLength": 1}]}


class WorldConstructor(_Strict):
    """Which values and resources of one tool's arguments get candidate worlds."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_short_checks_schema)

    values: tuple[ValueCheck, ...] = Field(
        default=(), description="Checked values: an argument name, or a value check (a bare name is {arg: name})."
    )
    resources: tuple[ResourceCheck, ...] = Field(
        default=(), description="Checked resources: an argument name, or a resource check ({arg: name} for short)."
    )

    _values_short = field_validator("values", "resources", mode="before")(_as_checks)

    def checked(self) -> dict[str, Literal["value", "resource"]]:
        """Argument name → the kind of its check."""
        out: dict[str, Literal["value", "resource"]] = {c.arg: "value" for c in self.values}
        out.update({c.arg: "resource" for c in self.resources})
        return out


class OutcomeRule(_Strict):
    """Result text → outcome label: the first rule whose regex matches wins (``{value}`` = the value)."""

    match: str = Field(min_length=1, description="Regex over the probe's result text; {value} is the checked value.")
    label: str = Field(min_length=1, description="The label a match gives (outcomes map labels to classes).")
    status: Literal["ok", "error", "any"] = Field(default="ok", description="Result status the rule reads.")

    @field_validator("match")
    @classmethod
    def _compile(cls, value: str) -> str:
        _check_regexes((value,), "rules.match")
        return value


class ProbeConfig(_Strict):
    """A probe: a read-only tool call whose result tells the worlds of one checked value apart."""

    name: str = Field(pattern=r"^[A-Za-z][\w.-]*$", description="The probe's name (unique).")
    tool: str = Field(min_length=1, description="A read-only tool of this policy (effect: none).")
    args: dict[str, Any] = Field(default_factory=dict, description="Templates: {value} or {<proposal arg>}.")
    cost: float = Field(default=1.0, gt=0, description="Cost of one run of the probe (against eta and the budget).")
    applies_to: dict[str, tuple[str, ...]] = Field(min_length=1, description="Tool → checked arguments it probes.")
    rules: tuple[OutcomeRule, ...] = Field(min_length=1, description="Result text → label; none matches = unparsed.")
    outcomes: dict[str, str] = Field(description="Label per outcome class: legit/untrusted or disposable/shared.")

    @model_validator(mode="after")
    def _consistent(self) -> ProbeConfig:
        keys = set(self.outcomes)
        if keys not in (VALUE_OUTCOMES, RESOURCE_OUTCOMES):
            raise ValueError(
                f"probe {self.name!r}: outcomes must name exactly {sorted(VALUE_OUTCOMES)} (value probes) or "
                f"{sorted(RESOURCE_OUTCOMES)} (resource probes), got {sorted(keys)}"
            )
        if len(set(self.outcomes.values())) < 2:
            raise ValueError(
                f"probe {self.name!r}: its outcomes give every world the same label; it tells nothing apart"
            )
        unknown = {r.label for r in self.rules} - set(self.outcomes.values())
        if unknown:
            raise ValueError(f"probe {self.name!r}: rules give labels {sorted(unknown)} that no outcome class has")
        return self

    @property
    def checks(self) -> Literal["value", "resource"]:
        """Whether it tells value worlds or resource worlds apart."""
        return "value" if set(self.outcomes) == VALUE_OUTCOMES else "resource"


class AlternativeSpec(_Strict):
    """A safer candidate action: a reversible staging variant (``stage``) or doing nothing (``noop``)."""

    name: str = Field(pattern=r"^[A-Za-z][\w.-]*$", description="The alternative's name (unique per tool).")
    kind: Literal["stage", "noop"] = Field(
        default="stage", description="stage: call a reversible or read-only tool instead; noop: do nothing."
    )
    tool: str | None = Field(default=None, description="stage: the tool to call instead (reversible or read-only).")
    args: dict[str, Any] = Field(default_factory=dict, description="stage: argument templates {<proposal arg>}.")
    reward: float = Field(default=0.5, description="Task reward; the proposal's is 1.")
    severity_penalty: float = Field(default=0.0, ge=0, description="Subtracted from the reward when chosen.")
    safe_in: tuple[WorldKind, ...] = Field(
        default=("user", "trusted", "disposable", "shared"), description="World kinds where it is safe (stage)."
    )

    @model_validator(mode="after")
    def _shape(self) -> AlternativeSpec:
        if not math.isfinite(self.reward) or not math.isfinite(self.severity_penalty):
            raise ValueError(f"alternative {self.name!r}: reward and severity_penalty must be finite")
        if self.kind == "stage" and self.tool is None:
            raise ValueError(f"alternative {self.name!r}: a stage alternative needs a tool")
        if self.kind == "noop" and (self.tool is not None or self.args):
            raise ValueError(f"alternative {self.name!r}: a noop alternative has no tool or args")
        return self


class SafeCommitSpec(_Strict):
    """The ``safecommit:`` section of a policy."""

    kappa: KappaSource = Field(description="κ: a number, {artifact: path} or {calibrate: true, scores: path}.")
    alpha: float = Field(default=0.05, gt=0, lt=1, description="Coverage target of κ.")
    budget: int = Field(default=2, ge=0, le=16, description="Probes per proposal.")
    eta: float = Field(default=0.0, ge=0, description="Smallest expected shrinkage per cost worth a probe.")
    nonconformity: Nonconformity = Field(
        default_factory=Nonconformity, description="Weights of the world nonconformity score s(ω)."
    )
    worlds: dict[str, WorldConstructor] = Field(default_factory=dict, description="World constructors per tool.")
    unconfigured: Literal["identifier_args", "none"] = Field(
        default="identifier_args", description="Tools without a constructor: check their identifier_args, or nothing."
    )
    probes: tuple[ProbeConfig, ...] = Field(default=(), description="Read-only tool calls that tell worlds apart.")
    alternatives: dict[str, tuple[AlternativeSpec, ...]] = Field(
        default_factory=dict, description="Safer candidate actions per tool (staging variants, doing nothing)."
    )

    @field_validator("kappa")
    @classmethod
    def _kappa_not_nan(cls, value: KappaSource) -> KappaSource:
        if isinstance(value, float) and math.isnan(value):
            raise ValueError("kappa must be a number (±inf allowed), not NaN")
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> SafeCommitSpec:
        names = [p.name for p in self.probes]
        if len(names) != len(set(names)):
            raise ValueError(f"probe names must be unique, got {names}")
        for tool, alts in self.alternatives.items():
            alt_names = [a.name for a in alts]
            if len(alt_names) != len(set(alt_names)) or "proposal" in alt_names:
                raise ValueError(f"alternatives of {tool!r}: names must be unique and not 'proposal', got {alt_names}")
        return self

    def constructor(self, tool: str, identifier_args: tuple[str, ...]) -> WorldConstructor:
        """The tool's world constructor (the configured one, else per ``unconfigured``)."""
        found = self.worlds.get(tool)
        if found is not None:
            return found
        if self.unconfigured == "none":
            return WorldConstructor()
        return WorldConstructor(values=tuple(ValueCheck(arg=a) for a in identifier_args))

    def check_tools(self, tools: Mapping[str, tuple[str, tuple[str, ...]]], value_patterns: tuple[str, ...]) -> None:
        """Cross-check against the policy: ``tools`` maps name → (effect, declared payload/identifier args).

        Raises ValueError (the policy turns it into a PolicyError) when a probe names an unknown or
        side-effectful tool, a constructor or alternative names an unknown tool or undeclared argument.
        """
        problems: list[str] = []
        for tool, ctor in self.worlds.items():
            problems += _constructor_problems(tool, ctor, tools, value_patterns)
        for probe in self.probes:
            problems += _probe_problems(probe, self.worlds, tools)
        for tool, alts in self.alternatives.items():
            if tool not in tools:
                problems.append(f"alternatives: tool {tool!r} is not in the policy's tools")
            for alt in alts:
                if alt.tool is not None and alt.tool not in tools:
                    problems.append(f"alternative {alt.name!r} of {tool!r}: tool {alt.tool!r} is not in the policy")
                elif alt.tool is not None and tools[alt.tool][0] == "irreversible":
                    problems.append(
                        f"alternative {alt.name!r} of {tool!r}: tool {alt.tool!r} is irreversible; a staging "
                        "alternative must be reversible or read-only"
                    )
        if problems:
            raise ValueError("safecommit: " + "; ".join(problems))


def _constructor_problems(
    tool: str, ctor: WorldConstructor, tools: Mapping[str, tuple[str, tuple[str, ...]]], patterns: tuple[str, ...]
) -> list[str]:
    if tool not in tools:
        return [f"worlds: tool {tool!r} is not in the policy's tools"]
    effect, declared = tools[tool]
    out = []
    if effect == "none":
        out.append(
            f"worlds: tool {tool!r} is read-only (effect: none, not a sink with payload_args); "
            "SafeCommit never runs for it"
        )
    for arg in ctor.checked():
        if arg not in declared:
            out.append(f"worlds.{tool}: argument {arg!r} is not among the tool's payload_args/identifier_args")
    for check in ctor.values:
        bad = sorted(set(check.patterns) - set(patterns))
        if bad:
            out.append(f"worlds.{tool}.{check.arg}: unknown value pattern(s) {bad}; known: {sorted(patterns)}")
    return out


def _probe_problems(
    probe: ProbeConfig, worlds: Mapping[str, WorldConstructor], tools: Mapping[str, tuple[str, tuple[str, ...]]]
) -> list[str]:
    where = f"probe {probe.name!r}"
    if probe.tool not in tools:
        return [f"{where}: tool {probe.tool!r} is not in the policy's tools"]
    out = []
    if tools[probe.tool][0] != "none":
        out.append(
            f"{where}: tool {probe.tool!r} has effect {tools[probe.tool][0]!r}; a probe must be a read-only "
            "tool (effect: none)"
        )
    for tool, args in probe.applies_to.items():
        ctor = worlds.get(tool)
        if ctor is None:
            out.append(f"{where}: applies_to names {tool!r}, which has no world constructor under safecommit.worlds")
            continue
        kinds = ctor.checked()
        for arg in args:
            if kinds.get(arg) != probe.checks:
                out.append(f"{where}: {tool}.{arg} is not a checked {probe.checks} argument of worlds.{tool}")
    return out


__all__ = [
    "RESOURCE_KINDS",
    "VALUE_KINDS",
    "WORLD_KINDS",
    "AlternativeSpec",
    "KappaArtifact",
    "KappaCalibrate",
    "KappaSource",
    "Nonconformity",
    "OutcomeRule",
    "ProbeConfig",
    "ResourceCheck",
    "SafeCommitSpec",
    "ValueCheck",
    "WorldConstructor",
    "WorldKind",
]
