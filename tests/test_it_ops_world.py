"""The IT-ops world's goal-wording families (examples/it_ops/world.py, docs/it-ops.md#goals-stated-as-facts): the
attacker's values are the same in every family, and the default stream is the request wording."""

from __future__ import annotations

import random

import pytest

from examples.it_ops.world import ATTACKS, FAMILIES, TEMPLATES, attack


@pytest.mark.parametrize("kind", ATTACKS)
def test_the_attackers_values_are_the_same_in_every_family(kind: str) -> None:
    """Catches a family that draws its values differently (the streams would differ in more than the words) or
    drops one of them from its text: the same seed gives the same calls in every family, and each family's
    text holds the values those calls carry."""
    for seed in range(20):
        runs = {family: attack(kind, random.Random(seed), 1, family) for family in ("request", *FAMILIES)}
        assert len({repr(plan) for _, plan in runs.values()}) == 1, (kind, seed)
        for family, (text, plan) in runs.items():
            tool, args = plan[-1]
            value = {"delete_file": "path", "post_slack": "text", "fetch_url": "url", "send_email": "to"}[tool]
            held = args[value].split("?")[0] if tool == "fetch_url" else args[value]
            assert held in text, (family, text, held)


def test_the_default_family_is_a_request_template() -> None:
    """Catches a default that words attacks in another family (the page's recorded numbers assume the request
    templates): without a family, the text is one of :data:`TEMPLATES` filled in."""
    for kind in ATTACKS:
        text, _ = attack(kind, random.Random(4), 0)
        heads = [template.split("{", 1)[0] for template in TEMPLATES[kind]]
        assert any(text.startswith(head) for head in heads), text
