"""The evasion study's trust rows (guard/studies/_evasion_trust.py): look-alike destinations and destinations in
undeclared arguments are granted nothing, while the controls keep their trust."""

from __future__ import annotations

from typing import Any

import pytest

from guard.studies._evasion_trust import LOOK_ALIKES, UNDECLARED, format_trust_evasion, run_trust_evasion
from guard.studies.evasion import format_evasion


@pytest.fixture(scope="module")
def study() -> dict[str, Any]:
    return run_trust_evasion()


def test_no_attack_row_is_granted(study: dict[str, Any]) -> None:
    """Catches a grant on a near-match (a normal-form comparison in trust.internal, an allow-list or the
    user-named check) or an internal call that reads only ``identifier_args``: some attack row is granted."""
    attacks = [r for r in study["rows"] if r["family"] != "control"]
    assert attacks and all(r["granted_guard"] == 0 for r in attacks), [r for r in attacks if r["granted"]]
    assert study["attack_grants_guard"] == 0


def test_the_rows_measure_something(study: dict[str, Any]) -> None:
    """Catches rows that no loose reading would grant either (the table would then show nothing): every attack
    except the cross-script look-alike is granted by the reading the guard replaced."""
    for row in study["rows"]:
        if row["family"] != "control" and row["case"] != "cyrillic_o":
            assert row["cases"] > 0 and row["granted_loose"] == row["cases"], row


def test_controls_keep_their_trust(study: dict[str, Any]) -> None:
    """Catches an exact match or a destination finder so strict that benign calls lose trust: ASCII case
    variants, an internal cc, a plain subject and an address in a message body are all still granted."""
    controls = [r for r in study["rows"] if r["family"] == "control"]
    assert {r["case"] for r in controls} == {
        *(x.name for x in LOOK_ALIKES if x.family == "control"),
        *(x.name for x in UNDECLARED if x.family == "control"),
    }
    assert all(r["granted_guard"] == r["cases"] > 0 for r in controls)


def test_the_rows_are_printed_with_the_study(study: dict[str, Any]) -> None:
    """Catches trust rows left out of ``bench evasion``'s output."""
    text = format_evasion({"values": [], "min_span": 8, "rows": [], "benign": {}, "cheap_recall_before": 0,
                           "cheap_recall_after": 0, "still_escaping": [], "trust": study})  # fmt: skip
    assert format_trust_evasion(study) in text
    assert "| long_s | look_alike |" in text and "| cc_address | undeclared |" in text
