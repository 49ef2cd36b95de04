"""The decision floor's values (guard/decision.py): the Mode enum."""

from __future__ import annotations

import pytest

from guard import Mode
from guard.errors import PolicyError


def test_mode_values_are_the_documented_texts() -> None:
    """Catches a Mode whose members no longer equal the texts policies, CLIs and audit entries use."""
    assert [m.value for m in Mode] == ["enforce", "shadow"]
    assert Mode.SHADOW == "shadow" and Mode.parse("enforce") is Mode.ENFORCE and Mode.parse(Mode.SHADOW) is Mode.SHADOW


@pytest.mark.parametrize("bad", ["Shadow", "block", "", None, 1])
def test_mode_parse_refuses_anything_else_with_policy_error(bad: object) -> None:
    """Catches a parse that lets an unknown mode through (fail open) or raises a bare ValueError."""
    with pytest.raises(PolicyError, match=r"mode must be one of enforce, shadow, got"):
        Mode.parse(bad)
