"""The scorer's weights in a policy: one per binary feature, and optional per-tool identity weights.

Every weight is a finite number >= 0, so adding evidence never lowers a score.  Features outside the
default group weigh 0 by default: a policy or ``calibrate --fit-scorer`` sets them.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from guard.features import TABLE


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _fields() -> dict[str, Any]:
    """One weight field per row of the feature table: its default weight and its description."""
    return {row.name: (float, Field(default=row.weight, description=row.description)) for row in TABLE}


#: The weight fields, made from the feature table (:mod:`guard.features`), in the scorer's order.
_Weights: type[_Strict] = create_model("_Weights", __base__=_Strict, **_fields())


class FeatureWeights(_Weights):  # type: ignore[misc,valid-type]
    """Weights of the scorer's binary features (docs/evidence.md): one field per row of :mod:`guard.features`."""

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
