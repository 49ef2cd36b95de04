"""Labels files (guard/ledger/labels.py) and the rules-versus-labels check (guard/ledger/check.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guard.corpora.episodes import read_episodes
from guard.errors import CorpusError
from guard.ledger import Ledger, LedgerLabels
from guard.ledger.check import format_check, ledger_check
from guard.ledger.labels import attach, read_labels
from guard.policy import load_policy

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "episodes"
POLICY = load_policy(FIX / "assistant_policy.yaml")
READ = read_episodes(FIX / "assistant.jsonl", POLICY)
BY_ID = {e.episode_id: e for e in READ.episodes}


def _labels(tmp_path: Path, *lines: Any) -> Path:
    path = tmp_path / "l.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def _label(episode: str, harms: list[dict[str, Any]], mode: str = "override") -> dict[str, Any]:
    return {"episode": episode, "mode": mode, "harms": harms, "by": "tester", "why": "test"}


def _trace(tmp_path: Path, *lines: Any) -> dict[str, tuple[frozenset[str], ...]]:
    attached = attach(read_labels(_labels(tmp_path, *lines)), READ.episodes)
    return {eid: Ledger(POLICY, lab).trace(BY_ID[eid]).events for eid, lab in attached.items()}


def test_override_replaces_the_rules(tmp_path: Path) -> None:
    """An override label with no harms clears what the rules charged: catches override treated as add."""
    rules = Ledger(POLICY, LedgerLabels()).trace(BY_ID["injected-delete"]).events
    assert any(rules)
    assert not any(_trace(tmp_path, _label("injected-delete", []))["injected-delete"])


def test_add_unions_with_the_rules(tmp_path: Path) -> None:
    """An add label keeps the rules' events and adds its own at the named call: catches add treated as override."""
    events = _trace(tmp_path, _label("exfiltration", [{"category": "untrusted_instruction", "call_id": "c3"}], "add"))
    assert events["exfiltration"][2] == frozenset({"privacy_flow", "attacker_directed", "untrusted_instruction"})


def test_harm_without_a_step_charges_the_first_executed_proposal(tmp_path: Path) -> None:
    """A harm without step or call_id sits on the first executed proposal (conservative): catches it placed last."""
    events = _trace(tmp_path, _label("exfiltration", [{"category": "destructive"}]))
    assert events["exfiltration"] == (frozenset({"destructive"}), frozenset(), frozenset())


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{not json", "not valid JSON"),
        ({"episode": "x", "harms": [], "by": "me"}, "why: missing"),
        ({**_label("x", []), "extra": 1}, "extra: unknown field"),
        (_label("x", [{"category": "theft"}]), "harms[0].category"),
        (_label("x", [{"category": "destructive", "step": -1}]), "harms[0].step"),
        (_label("x", [{"category": "destructive", "step": 0, "call_id": "c1"}]), "not both"),
        ({**_label("x", []), "mode": "replace"}, "mode"),
        ({**_label("x", []), "by": ""}, "by: must be"),
    ],
)
def test_label_line_errors_name_line_and_field(tmp_path: Path, line: Any, needle: str) -> None:
    """Each malformed label line is refused naming file:line and the field: catches a silently ignored label."""
    path = _labels(tmp_path, _label("benign-inbox", []), line)
    with pytest.raises(CorpusError) as err:
        read_labels(path)
    assert f"{path}:2:" in str(err.value) and needle in str(err.value)


def test_label_for_unknown_episode_and_duplicate_label(tmp_path: Path) -> None:
    """A label for no episode of the file, or an episode labelled twice, is refused: catches labels that never apply."""
    with pytest.raises(CorpusError, match="unknown episode 'ghost'"):
        attach(read_labels(_labels(tmp_path, _label("ghost", []))), READ.episodes)
    with pytest.raises(CorpusError, match="already labelled on line 1"):
        read_labels(_labels(tmp_path, _label("exfiltration", []), _label("exfiltration", [])))


def test_label_on_an_unexecuted_proposal_is_refused(tmp_path: Path) -> None:
    """The ledger charges executed proposals only: a label on a failed send is refused (catches charging it)."""
    path = _labels(tmp_path, _label("failed-send", [{"category": "attacker_directed", "call_id": "c2"}]))
    with pytest.raises(CorpusError, match="did not execute"):
        attach(read_labels(path), READ.episodes)


def test_check_counts_and_lists_every_disagreement(tmp_path: Path) -> None:
    """ledger check on the fixture plus one overriding label: per-category counts and exactly that disagreement."""
    fixture = (FIX / "assistant.labels.jsonl").read_text(encoding="utf-8").splitlines()
    override = {**_label("injected-delete", []), "by": "carol (review)", "why": "the user wanted it deleted"}
    labels = read_labels(_labels(tmp_path, *fixture, override))
    result = ledger_check(READ.episodes, READ.policy_of, labels, attach(labels, READ.episodes))
    cats = result["categories"]
    assert cats["privacy_flow"] == {"rules": 1, "labels": 1, "ledger": 1}
    assert cats["untrusted_instruction"] == {"rules": 0, "labels": 0, "ledger": 0}  # slack-reuse: the user asked
    assert cats["destructive"] == {"rules": 1, "labels": 0, "ledger": 0}
    assert result["episodes_charged"] == {"rules": 2, "labels": 1, "ledger": 1}
    assert [d["episode"] for d in result["disagreements"]] == ["injected-delete"]
    assert "injected-delete" in format_check(result) and "carol (review)" in format_check(result)


def test_check_lists_the_episodes_the_rules_charge_and_flags_unlabelled_ones() -> None:
    """Catches a check that reports "0 disagreements" while the rules charge episodes nobody labelled."""
    labels = read_labels(FIX / "assistant.labels.jsonl")
    result = ledger_check(READ.episodes, READ.policy_of, labels, attach(labels, READ.episodes))
    charged = {row["episode"]: row for row in result["charged_by_rules"]}
    assert len(charged) == result["episodes_charged"]["rules"] == 2
    expected = sorted(e for e, row in charged.items() if e not in labels)
    assert expected and result["charged_unlabelled"] == expected
    assert all(charged[e]["labelled"] is (e in labels) for e in charged)
    text = format_check(result)
    assert f"2 episode(s) charged by the rules, {len(expected)} of them without a label" in text
    assert all(f"  {e}: " in text and "UNLABELLED" in text for e in expected)


def test_check_without_labels_flags_every_charged_episode() -> None:
    """Catches charged episodes passing silently when no labels file is given at all."""
    result = ledger_check(READ.episodes, READ.policy_of, {}, {})
    assert result["disagreements"] == [] and len(result["charged_unlabelled"]) == 2


def test_docs_ledger_page_example_parses_and_its_numbers_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches docs/ledger-rules.md drifting: its ledger example must parse and its quoted lines be printed."""
    import copy
    import re

    import yaml

    from guard.cli import main
    from guard.policy import parse_policy

    page = (Path(__file__).resolve().parents[2] / "docs" / "ledger-rules.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", page, re.S)
    assert block is not None
    data = copy.deepcopy(yaml.safe_load((FIX / "assistant_policy.yaml").read_text(encoding="utf-8")))
    data.update(yaml.safe_load(block.group(1)))
    assert parse_policy(data).ledger is not None
    files = ["--policy", str(FIX / "assistant_policy.yaml"), "--episodes", str(FIX / "assistant.jsonl")]
    assert main(["ledger", "check", *files, "--labels", str(FIX / "assistant.labels.jsonl")]) == 0
    out = capsys.readouterr().out
    for quoted in re.findall(r'prints "([^"]+)" \(`injected-delete`\) and "([^"]+)"', page.replace("\n", " "))[0]:
        assert " ".join(quoted.split()) in out
