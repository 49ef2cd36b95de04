"""The scorer's weights in a policy: one per binary feature, and optional per-tool identity weights.

Every weight is a finite number >= 0, so adding evidence never lowers a score.  Features added
after the six default features weigh 0 by default: a policy or ``calibrate --fit-scorer`` sets them.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from guard.policy.defaults import DEFAULT_WEIGHTS


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _zero(description: str) -> float:
    return Field(default=0.0, description=description)


class FeatureWeights(_Strict):
    """Weights of the scorer's binary features (docs/evidence.md)."""

    provenance_path: float = Field(
        default=DEFAULT_WEIGHTS["provenance_path"],
        description="A sink proposal has a retained path from a private record in the selection.",
    )
    private_in_context: float = Field(
        default=DEFAULT_WEIGHTS["private_in_context"], description="The selection holds a private record."
    )
    canary: float = Field(
        default=DEFAULT_WEIGHTS["canary"],
        description="A canary pattern matches a selected record or a payload argument of the proposal.",
    )
    injection_text: float = Field(
        default=DEFAULT_WEIGHTS["injection_text"], description="An injection pattern matches a selected record."
    )
    untrusted_payload: float = Field(
        default=DEFAULT_WEIGHTS["untrusted_payload"],
        description="A payload/identifier argument carries a value from an untrusted record the user did not name.",
    )
    irreversible_sink: float = Field(
        default=DEFAULT_WEIGHTS["irreversible_sink"], description="The proposal is an irreversible sink."
    )
    injected_value: float = Field(
        default=DEFAULT_WEIGHTS["injected_value"],
        description="A payload value of the proposal stands inside injection-like text of an untrusted record in "
        "the selection. Not in docs/evidence.md (weight 0 there); the default equals provenance_path, set a priori.",
    )
    injected_short_id: float = _zero(
        "A 1-12 character payload/identifier value of a sink or side-effectful call stands as a whole token inside "
        "injection-like text of an earlier untrusted record."
    )
    untrusted_only_value: float = _zero(
        "A sink argument is reused from untrusted records only (no user turn, private or trusted record is also its "
        "source)."
    )
    private_in_url: float = _zero(
        "A URL path or query in any argument carries a token of an earlier private record that no user turn contains."
    )
    severity_high: float = _zero("The tool's declared severity is >= 2.")
    severity_max: float = _zero("The tool's declared severity is 3.")
    recipient_from_untrusted: float = _zero("An identifier argument reuses a value of an earlier untrusted record.")
    recipient_from_private: float = _zero("An identifier argument reuses a value of an earlier private record.")
    payload_from_untrusted: float = _zero("A payload argument reuses a value of an earlier untrusted record.")
    payload_from_private: float = _zero("A payload argument reuses a value of an earlier private record.")
    payload_private_half: float = _zero("At least half of the payload characters are traced to private records.")
    payload_private_most: float = _zero("At least 4/5 of the payload characters are traced to private records.")
    payload_untrusted_half: float = _zero("At least half of the payload characters are traced to untrusted records.")
    payload_untrusted_most: float = _zero("At least 4/5 of the payload characters are traced to untrusted records.")
    long_private_span: float = _zero("An argument holds a run of >= 32 characters traced to private records.")
    long_untrusted_span: float = _zero("An argument holds a run of >= 32 characters traced to untrusted records.")
    private_values_2: float = _zero("The arguments carry at least two distinct value tokens of private records.")
    private_relayed: float = _zero("An argument reuses a record that descends from a private one (two hops or more).")

    @model_validator(mode="after")
    def _finite_non_negative(self) -> FeatureWeights:
        for name, value in self.model_dump().items():
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"weight {name} must be a finite number >= 0, got {value}")
        return self


def check_tool_weights(value: dict[str, float]) -> dict[str, float]:
    """Tool identity weights: finite and >= 0 (a tool name's weight only ever raises its calls' scores)."""
    for name, weight in value.items():
        if isinstance(weight, bool) or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"tool weight {name!r} must be a finite number >= 0, got {weight}")
    return value
