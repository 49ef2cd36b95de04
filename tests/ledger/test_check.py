"""``carbguard ledger check`` on the test fixture: the numbers the ledger, ledger-rules and calibrate pages quote,
from the commands those pages show, and the per-rule report (charged, overridden, added)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guard.cli import main
from guard.corpora.episodes import read_episodes
from guard.ledger.check import format_check, ledger_check, rule_overrides
from guard.ledger.labels import attach, read_labels
from guard.policy import load_policy

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
_COMMAND = re.compile(r"^\.venv/bin/carbguard (ledger check --policy tests/fixtures/(?:\\\n|[^\n\\])*)$", re.M)


def _page_command(page: str) -> list[str]:
    """The argv of the page's first ``ledger check`` of the test fixture, as the page writes it."""
    found = _COMMAND.search((ROOT / page).read_text(encoding="utf-8"))
    assert found is not None, f"{page}: no `.venv/bin/carbguard ledger check --policy tests/fixtures/...` line"
    argv = shlex.split(found.group(1).replace("\\\n", " "))
    return [str(ROOT / a) if a.startswith("tests/") else a for a in argv]


@pytest.mark.parametrize("page", sorted(QUOTES))
def test_the_quoted_fixture_numbers_are_what_the_command_prints(page: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a docs page quoting stale ``ledger check`` counts (the "3 charges and 1 disagreement" the pages once
    said), or a page whose command is not the one the numbers come from: the page's own command runs here."""
    assert main([*_page_command(page), "--json"]) == 0
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


def test_the_ledger_rules_page_quotes_what_its_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches docs/ledger-rules.md quoting lines its own ``ledger check`` command no longer prints."""
    assert main(_page_command("docs/ledger-rules.md")) == 0
    out = capsys.readouterr().out
    page = (ROOT / "docs" / "ledger-rules.md").read_text(encoding="utf-8").replace("\n", " ")
    quotes = re.findall(r'prints "([^"]+)" \(`injected-delete`\) and "([^"]+)"', page)
    assert quotes
    for quoted in quotes[0]:
        assert " ".join(quoted.split()) in out


def test_the_per_rule_example_is_what_its_block_prints(tmp_path: Path) -> None:
    """Catches the per-rule example of docs/ledger-rules.md going stale: its bash block runs here, in a directory
    laid out as the snippet runner lays it out, and every line of the quoted output must be printed."""
    page = (ROOT / "docs" / "ledger-rules.md").read_text(encoding="utf-8")
    section = page.split("### The per-rule report", 1)[1]
    found = re.search(r"```bash\n(.*?)```.*?```text\n(.*?)```", section, re.S)
    assert found is not None
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", found.group(1)], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    printed = [line.rstrip() for line in run.stdout.splitlines()]
    for line in found.group(2).strip().splitlines():
        assert line.rstrip() in printed


POLICY = load_policy(FIXTURE / "assistant_policy.yaml")
READ = read_episodes(FIXTURE / "assistant.jsonl", POLICY)


def _check(tmp_path: Path, *labels: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "l.jsonl"
    lines = [{"mode": "override", "by": "tester", "why": "test", **label} for label in labels]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    read = read_labels(path)
    return ledger_check(READ.episodes, READ.policy_of, read, attach(read, READ.episodes))


def test_per_rule_counts_charged_overridden_and_added(tmp_path: Path) -> None:
    """Catches per-rule counts off by one or mixed up: a removed charge (injected-delete cleared), a moved one
    (exfiltration's privacy_flow labelled at the first call instead of the send) and an added one (an
    untrusted_instruction the rules missed) each count once, a confirmed charge counts as charged only, and
    ``charged`` counts overridden episodes too."""
    result = _check(
        tmp_path,
        {"episode": "injected-delete", "harms": []},
        {
            "episode": "exfiltration",
            "harms": [
                {"category": "privacy_flow", "step": 0},
                {"category": "attacker_directed", "call_id": "c3"},
                {"category": "untrusted_instruction", "call_id": "c3"},
            ],
        },
    )
    rules = result["per_rule"]
    assert rules["destructive"] == {"charged": 1, "overridden": 1, "added": 0, "declared": True}
    assert rules["privacy_flow"] == {"charged": 1, "overridden": 1, "added": 0, "declared": True}
    assert rules["attacker_directed"] == {"charged": 1, "overridden": 0, "added": 0, "declared": True}
    assert rules["untrusted_instruction"] == {"charged": 0, "overridden": 0, "added": 1, "declared": True}
    assert rules["credential_change"] == {"charged": 0, "overridden": 0, "added": 0, "declared": False}
    text = format_check(result)
    assert f"{'destructive':<24}{1:>8}{1:>12}{0:>8}" in text.splitlines()
    assert f"{'credential_change':<24}{0:>8}{0:>12}{0:>8}  (no rule declared)" in text.splitlines()


def test_an_add_label_on_a_charged_episode_is_an_added_charge_only_for_a_new_category(tmp_path: Path) -> None:
    """Catches an add label counted as overriding the charges it keeps, or an added category not counted."""
    label = {"episode": "exfiltration", "mode": "add", "harms": [{"category": "destructive", "call_id": "c3"}]}
    rules = _check(tmp_path, label)["per_rule"]
    assert rules["privacy_flow"]["overridden"] == rules["attacker_directed"]["overridden"] == 0
    assert rules["destructive"] == {"charged": 1, "overridden": 0, "added": 1, "declared": True}


def test_rule_overrides_per_episode() -> None:
    """Catches the comparison made on categories instead of calls (a moved charge read as kept)."""
    a, b, none = frozenset({"destructive"}), frozenset({"privacy_flow"}), frozenset[str]()
    assert rule_overrides([a, none], [a, none]) == {"destructive": "kept"}
    assert rule_overrides([a, none], [none, a]) == {"destructive": "overridden"}
    assert rule_overrides([a, none], [b, none]) == {"destructive": "overridden", "privacy_flow": "added"}
    assert rule_overrides([none], [none]) == {}
