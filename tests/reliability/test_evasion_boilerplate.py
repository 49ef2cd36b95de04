"""The evasion study's rows for text made to look like boilerplate: secrecy markers and table poisoning
(guard/studies/_evasion_boilerplate.py, docs/studies.md#evasion)."""

from __future__ import annotations

from typing import Any

import pytest

from guard.studies._evasion_boilerplate import MARKERS, POISONING, boilerplate_rows, format_boilerplate
from guard.studies.evasion import VALUES, study_policy


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return boilerplate_rows(study_policy(), VALUES)


def test_every_secrecy_marker_and_poisoning_case_is_caught(rows: list[dict[str, Any]]) -> None:
    """Each secrecy-marker shape and each table-poisoning scenario keeps its edge for every private value (catches
    a private or untrusted record's zones cut by position, a call's own zones not read against it, private text
    counted into a table, or repetition counted over records or tools instead of sessions)."""
    assert [r["transform"] for r in rows] == [*MARKERS, *POISONING]
    for row in rows:
        assert row["caught_after"] == row["cases"] == len(VALUES), row


def test_the_old_rules_let_each_family_out(rows: list[dict[str, Any]]) -> None:
    """Under the rules as they were (every record's zones cut; a table of records common to two origins) each
    footer, signature and poisoning case gets out: the rows measure the hole they close (catches a 'before' that
    no longer reproduces the old rules, which would make the study's comparison empty)."""
    for row in rows:
        if row["family"] == "table poisoning" or row["transform"].startswith(("footer", "signature")):
            assert row["caught_before"] == 0, row
        assert row["caught_before"] <= row["caught_after"], row


def test_the_rows_are_formatted(rows: list[dict[str, Any]]) -> None:
    """Catches the table left out of the study's text."""
    text = "\n".join(format_boilerplate(rows))
    assert all(f"| {r['transform']} | {r['family']} |" in text for r in rows)
    assert format_boilerplate([]) == []
