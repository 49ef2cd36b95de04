"""``carbguard ledger check`` on the test fixture, against the numbers the ledger and calibrate pages quote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from guard.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "episodes"
QUOTES = {
    "docs/ledger.md": re.compile(
        r"the rules charge (?P<rules>\d+) of (?P<episodes>\d+) episodes and the ledger after labels (?P<ledger>\d+), "
        r"with (?P<disagreements>\d+)\s+disagreements"
    ),
    "docs/calibrate.md": re.compile(
        r"(?P<episodes>\d+) episodes, the rules charge (?P<rules>\d+), the\s+ledger after labels (?P<ledger>\d+), "
        r"(?P<disagreements>\d+) disagreements"
    ),
}


@pytest.mark.parametrize("page", sorted(QUOTES))
def test_the_quoted_fixture_numbers_are_what_the_command_prints(page: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a docs page quoting stale ``ledger check`` counts (or a command that stops matching them)."""
    argv = ["ledger", "check", "--policy", str(FIXTURE / "assistant_policy.yaml")]
    argv += ["--episodes", str(FIXTURE / "assistant.jsonl"), "--labels", str(FIXTURE / "assistant.labels.jsonl")]
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    found = QUOTES[page].search((ROOT / page).read_text(encoding="utf-8"))
    assert found is not None, f"{page}: the sentence quoting the fixture's counts is gone"
    quoted = {name: int(value) for name, value in found.groupdict().items()}
    measured = {
        "episodes": result["episodes"],
        "rules": result["episodes_charged"]["rules"],
        "ledger": result["episodes_charged"]["ledger"],
        "disagreements": len(result["disagreements"]),
    }
    assert quoted == measured
