"""Policy files: strict, frozen models, loaders for YAML/TOML/JSON, and JSON Schema export.

A policy is per deployment.  It fixes the tool metadata (docs/policy.md), the graph rules (docs/evidence.md), the
selector (docs/concepts.md), the scorer (docs/evidence.md), the verdict for input the guard does not understand, the
calibration artifact, and the audit settings.  Everything is ``extra="forbid"`` and frozen: a typo
in a policy file is an error, not a silently ignored key.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from guard.decision import Verdict
from guard.errors import PolicyError
from guard.policy.background import read_table
from guard.policy.defaults import DEFAULT_CANARY_PATTERNS, DEFAULT_INJECTION_PATTERNS, policy_warnings
from guard.policy.ledger import LedgerSpec
from guard.policy.loader import KeyLines, format_validation_error, read_policy_mapping
from guard.policy.mcp import McpSpec
from guard.policy.safecommit import SafeCommitSpec
from guard.policy.toolspec import Effect as Effect
from guard.policy.toolspec import ToolKind as ToolKind
from guard.policy.toolspec import ToolSpec as ToolSpec
from guard.policy.trust import TrustSpec
from guard.policy.weights import FeatureWeights as FeatureWeights
from guard.policy.weights import check_tool_weights

DEFAULT_VALUE_PATTERNS: dict[str, str] = {
    # runs are anchored (look-behind + possessive / bounded) so that a long run without a match is linear
    "email": r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]++@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",
    "iban": r"\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b",
    "url": r"(?:https?://|www\.)[^\s'\"<>(){}\[\],]*[^\s'\"<>(){}\[\],.!?:;]",  # a full stop after it is not its own
    "phone": r"\+\d[\d ()-]{7,}\d",
    "number": r"\b\d{4,}\b",
    "path": r"(?<![\w.-])[\w.-]{1,128}\.(?:txt|pdf|docx?|xlsx?|csv|json|md|pptx?|png|jpe?g|zip)\b",
}

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:carbguard:schema:policy:1"
log = logging.getLogger("guard.policy")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _effect_label(tool: ToolSpec) -> str:
    return "egress" if tool.effect is Effect.NONE and tool.certified else tool.effect.value


def _compile_all(patterns: Any, where: str) -> None:
    items = patterns.items() if isinstance(patterns, dict) else enumerate(patterns)
    for key, pattern in items:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{where}[{key}] is not a valid regular expression: {exc}") from exc


class GraphSpec(_Strict):
    """Edge rules of the prefix graph (docs/evidence.md)."""

    min_span: int = Field(default=8, ge=4, le=256, description="Shortest exact span that makes an E2 edge.")
    value_patterns: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_VALUE_PATTERNS),
        description="Regexes of value tokens (e-mails, IBANs, URLs, ...) that make E2/E3 edges at any length.",
    )

    normalize: bool = Field(
        default=False,
        description="Also match values after cheap, sound normalization (case, whitespace, URL-decoding, "
        "digit-group separators, Unicode compatibility forms). Opt-in: it changes edges, so recalibrate.",
    )

    whole_values: bool = Field(
        default=True,
        description="Match structured values (e-mail addresses, URLs, IBANs, phone and card numbers, amounts, "
        "dates, paths) only as whole normalised values: a span covering only a part of one (its domain, host, a "
        "common prefix) makes no edge. Off: the lexical rules of earlier versions.",
    )
    background: bool | Annotated[str, Field(min_length=1)] = Field(
        default=True,
        description="The background table whose boilerplate spans make no edge: true (the shipped cold-start table, "
        "built from generic business boilerplate), false (none), or a table file built by `carbguard data "
        "background --episodes` from the deployment's own episodes: k-grams common across sessions, never "
        "private-source text (path relative to the policy file; read and checked when the policy is loaded). "
        "Applies when min_span is 8, the table's k.",
    )

    @field_validator("value_patterns")
    @classmethod
    def _patterns_compile(cls, value: dict[str, str]) -> dict[str, str]:
        _compile_all(value, "value_patterns")
        return value


SelectorName = Literal["gcarb", "full_prefix", "fixed_window", "ledger_current", "random_equal_size"]


class SelectorSpec(_Strict):
    """Which records the scorer sees (docs/concepts.md)."""

    name: SelectorName = Field(default="gcarb", description="The selector: which records the scorer sees.")
    window: int = Field(default=4, ge=1, le=10_000, description="k of fixed_window.")
    seed: int = Field(default=0, ge=0, description="Seed of random_equal_size.")


class ScorerSpec(_Strict):
    """The frozen weighted scorer."""

    weights: FeatureWeights = Field(default_factory=FeatureWeights, description="One weight per feature (>= 0).")
    tool_weights: dict[str, float] = Field(
        default_factory=dict,
        description="Tool identity: a weight (>= 0) added to the score of every call of the named tool (default none).",
    )
    injection_patterns: tuple[str, ...] = Field(
        default=DEFAULT_INJECTION_PATTERNS,
        description="Signature patterns: regexes of known attack wording in tool results (default: published "
        "prompt-injection phrasings). They drive the signature rule and the signature features, not the default score.",
    )
    signature_rule: Literal["escalate", "off"] = Field(
        default="escalate",
        description="escalate: a sink or side-effectful call carrying a value that stands inside a signature match "
        "of an untrusted record, in an instruction-shaped clause, is escalated whatever its score (the rule can only "
        "stop a call, is not calibrated, and does not count for lambda-hat); off: signatures act only through the "
        "signature features.",
    )
    canary_patterns: tuple[str, ...] = Field(
        default=DEFAULT_CANARY_PATTERNS,
        description="Regexes of secrets that must not leave (default: fixed-format API keys, tokens, private keys).",
    )
    injection_window: int = Field(
        default=1000,
        ge=0,
        le=100_000,
        description="Characters after an injection-pattern match that count as injected.",
    )
    scope: Literal["all", "actions"] = Field(
        default="all",
        description=(
            "all: every proposal is scored; actions: proposals of read-only tools that are not sinks score 0 "
            "(their features are still reported), since the ledger charges only sinks and side effects."
        ),
    )

    @field_validator("tool_weights")
    @classmethod
    def _tool_weights_non_negative(cls, value: dict[str, float]) -> dict[str, float]:
        return check_tool_weights(value)

    @field_validator("injection_patterns", "canary_patterns")
    @classmethod
    def _patterns_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _compile_all(value, "patterns")
        return value


FALLBACK_WORDS: dict[str, str] = {
    "escalate": "sinks and side effects",
    "escalate_risky": "calls with private or untrusted provenance, irreversible effects or unknown tools",
}
"""The words ``calibration.fallback`` accepts besides an artifact path, and what each escalates after a trip
(the ``to.escalate`` of the breaker's audit entry; docs/monitoring.md#the-circuit-breaker)."""


def _is_word(value: str) -> bool:
    """Whether a ``calibration.fallback`` value is a word, not a path: no directory part and no extension."""
    return not any(c in value for c in "/\\.")


class CalibrationSpec(_Strict):
    """Where the calibrated threshold comes from."""

    artifact: str | None = Field(default=None, description="Artifact path, relative to the policy file.")
    fallback: str = Field(
        default="escalate",
        min_length=1,
        description="What the circuit breaker switches to on an alarm: 'escalate' (every call of a sink or of a "
        "side-effectful tool escalates; reads keep the threshold), 'escalate_risky' (only sinks and side effects with "
        "private or untrusted provenance, irreversible effects and unknown tools escalate; reads and the rest keep the "
        "threshold) "
        "or a stricter artifact's path, relative to the policy file (with a directory or an extension, "
        "e.g. strict.json: any other word is refused).",
    )

    @field_validator("fallback")
    @classmethod
    def _known_word(cls, value: str) -> str:
        if _is_word(value) and value not in FALLBACK_WORDS:
            words = " or ".join(repr(word) for word in FALLBACK_WORDS)
            raise ValueError(
                f"unknown fallback {value!r}: use {words}, or a stricter artifact's path with a directory or an "
                "extension (e.g. strict.json or ./strict)"
            )
        return value


class ReviewSpec(_Strict):
    """Review sampling (guard.review): sessions picked for labelling by a keyed hash, at rate p."""

    rate: float = Field(gt=0.0, le=1.0, description="Probability p in (0, 1] that a session is picked for review.")
    key_env: str | None = Field(default=None, min_length=1, description="Environment variable holding the key.")
    key_file: str | None = Field(default=None, min_length=1, description="Key file, relative to the policy file.")

    @model_validator(mode="after")
    def _one_key(self) -> ReviewSpec:
        if (self.key_env is None) == (self.key_file is None):
            raise ValueError("review: give exactly one of key_env and key_file")
        return self


class AuditSpec(_Strict):
    """Audit log settings."""

    path: str | None = Field(default=None, description="JSON-lines audit file, relative to the policy file.")
    raw_args: tuple[str, ...] = Field(default=(), description="Argument names whose values may be logged raw.")


class Policy(_Strict):
    """One deployment's policy."""

    version: Literal[1] = Field(default=1, description="The policy format version: always 1.")
    name: str = Field(min_length=1, description="The policy's name (artifacts record the policies they calibrate).")
    tools: dict[str, ToolSpec] = Field(min_length=1, description="Metadata per tool name (docs/policy.md).")
    graph: GraphSpec = Field(
        default_factory=GraphSpec, description="Graph rules: spans, value patterns (docs/evidence.md)."
    )
    selector: SelectorSpec = Field(default_factory=SelectorSpec, description="Which records the scorer sees.")
    scorer: ScorerSpec = Field(default_factory=ScorerSpec, description="The frozen weighted scorer (docs/evidence.md).")
    on_unknown: Verdict = Field(
        default=Verdict.ESCALATE,
        description="Verdict for a tool the policy does not know: escalate, defer or abstain (never execute).",
        json_schema_extra={"enum": ["escalate", "defer", "abstain"]},
    )
    calibration: CalibrationSpec = Field(default_factory=CalibrationSpec, description="Where λ̂ comes from.")
    audit: AuditSpec = Field(default_factory=AuditSpec, description="Where the audit log goes, what it may log raw.")
    review: ReviewSpec | None = Field(default=None, description="Review sampling for the risk monitor; absent = none.")
    trust: TrustSpec = Field(
        default_factory=TrustSpec,
        description="Trusted evidence: user-named values and allow-lists that may lower the score of a call "
        "whose every argument value they name. Never raised by untrusted text.",
    )
    safecommit: SafeCommitSpec | None = Field(default=None, description="SafeCommit settings (docs/safecommit.md).")
    ledger: LedgerSpec | None = Field(
        default=None,
        description="The deployment's declared harm ledger (docs/ledger.md): rules per category over executed "
        "proposals. Calibration only; the gate never reads it and it is not part of the pipeline fingerprint.",
    )
    mcp: McpSpec = Field(
        default_factory=McpSpec,
        description="The MCP proxy: what resources, prompts and other server content are observed as.",
    )
    base_dir: str | None = Field(default=None, exclude=True, description="Set by the loader; not a policy key.")

    @field_validator("on_unknown")
    @classmethod
    def _never_execute(cls, value: Verdict) -> Verdict:
        if value in (Verdict.EXECUTE, Verdict.PROBE):
            raise ValueError("on_unknown must be escalate, defer or abstain: unknown input never executes")
        return value

    @model_validator(mode="after")
    def _safecommit_tools(self) -> Policy:
        if self.safecommit is not None:
            # a read-only tool that still carries data out is certified: "egress" (not a valid probe, may have worlds)
            declared = {n: (_effect_label(t), (*t.payload_args, *t.identifier_args)) for n, t in self.tools.items()}
            self.safecommit.check_tools(declared, tuple(self.graph.value_patterns))
        return self

    @model_validator(mode="after")
    def _background_table(self) -> Policy:
        if isinstance(self.graph.background, str):  # a deployment's table: read and checked now, naming the file
            read_table(self.resolve(self.graph.background))
        return self

    @model_validator(mode="after")
    def _tool_weights_declared(self) -> Policy:
        unknown = sorted(set(self.scorer.tool_weights) - set(self.tools))
        if unknown:
            raise ValueError(f"scorer.tool_weights names tools the policy does not declare: {', '.join(unknown)}")
        return self

    @model_validator(mode="after")
    def _ledger_tools(self) -> Policy:
        if self.ledger is not None:
            declared = {
                n: ("+".join(sorted(k.value for k in t.kinds)), (*t.payload_args, *t.identifier_args))
                for n, t in self.tools.items()
            }
            self.ledger.check_tools(declared)
        return self

    def tool(self, name: str) -> ToolSpec | None:
        """The metadata of ``name``, or None when the policy does not know it."""
        return self.tools.get(name)

    def resolve(self, relative: str) -> Path:
        """A path from the policy file, resolved against the policy file's folder."""
        base = Path(self.base_dir) if self.base_dir else Path.cwd()
        return (base / relative).resolve()

    def with_selector(self, name: SelectorName, **params: int) -> Policy:
        """A copy of this policy with another selector (validated: a bad name or parameter is a PolicyError)."""
        try:
            spec = SelectorSpec.model_validate({**self.selector.model_dump(), "name": name, **params})
        except ValidationError as exc:
            where = f"policy {self.name!r}: selector"
            raise PolicyError(format_validation_error(exc, where, {}, SelectorSpec)) from None
        return self.model_copy(update={"selector": spec})


def parse_policy(data: Any, *, source: str = "<policy>", lines: KeyLines | None = None) -> Policy:
    """Validate a mapping as a policy; raise PolicyError listing every problem with its location."""
    if not isinstance(data, dict):
        raise PolicyError(f"{source}: a policy must be a mapping at the top level, got {type(data).__name__}")
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        raise PolicyError(format_validation_error(exc, source, lines or {}, Policy)) from None


def load_policy(path: str | Path) -> Policy:
    """Load a policy file (``.yaml``/``.yml``, ``.toml`` or ``.json``)."""
    file = Path(path)
    data, lines = read_policy_mapping(file)
    if isinstance(data, dict):
        data = {**data, "base_dir": str(file.resolve().parent)}
    policy = parse_policy(data, source=str(file), lines=lines)
    for warning in policy_warnings(policy):
        log.warning("policy %s (%s): %s", policy.name, file, warning)
    return policy


def policy_json_schema() -> dict[str, Any]:
    """The JSON Schema of policy files (for editors and docs)."""
    schema = Policy.model_json_schema(mode="validation")
    schema["properties"].pop("base_dir", None)
    schema["title"] = "carbguard policy"
    return {"$schema": SCHEMA_DIALECT, "$id": SCHEMA_ID, **schema}


def policy_schema_text() -> str:
    """The JSON Schema as indented text."""
    return json.dumps(policy_json_schema(), indent=2, sort_keys=True)
