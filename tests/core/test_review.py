"""Review sampling (guard.review): keyed pick, its audit field, the 1/p-weighted risk monitor, `carbguard review`."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from guard.audit import AuditLog, read_entries
from guard.calibration.risk_monitor import risk_monitor
from guard.cli import main
from guard.cli.deployed import Deployed, sampled_terms
from guard.errors import CalibrationError, GuardError, PolicyError
from guard.ledger.labels import read_labels
from guard.policy import Policy, parse_policy
from guard.review import ReviewSampler, review_uniform
from guard.runtime import Guard

KEY = b"0123456789abcdef-secret"


def _policy(base: Policy, rate: float, env: str = "CARBGUARD_REVIEW_KEY") -> Policy:
    data = copy.deepcopy(base.model_dump(mode="json"))
    data["review"] = {"rate": rate, "key_env": env}
    return parse_policy(data, source="<review policy>")


def test_pick_is_keyed_and_has_rate_p() -> None:
    """About a fraction p of sessions is picked, deterministically per key, and another key picks others.

    Catches: a pick that ignores p (planted: ``< rate`` → ``<= 1``) or ignores the key.
    """
    ids = [f"s{k}" for k in range(4000)]
    sampler = ReviewSampler(KEY, 0.25)
    picks = [sampler.entry(s)["picked"] for s in ids]
    assert 0.22 < sum(picks) / len(ids) < 0.28
    assert picks == [sampler.entry(s)["picked"] for s in ids]
    other = [ReviewSampler(b"another-secret-key-xyz", 0.25).entry(s)["picked"] for s in ids]
    assert other != picks
    assert all(0.0 <= review_uniform(KEY, s) < 1.0 for s in ids[:50])
    assert ReviewSampler(KEY, 1.0).entry("x") == {"picked": True, "p": 1.0}


def test_session_end_records_the_pick_and_no_key_refuses(
    small_policy: Policy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session_end entry carries ``review: {picked, p}`` matching the keyed hash; a missing or short key
    refuses to build the guard (fail closed).  Catches: the field not written, or a guard running unkeyed."""
    monkeypatch.delenv("CARBGUARD_REVIEW_KEY", raising=False)
    with pytest.raises(PolicyError, match="CARBGUARD_REVIEW_KEY"):
        Guard(_policy(small_policy, 0.5), threshold=0.5)
    monkeypatch.setenv("CARBGUARD_REVIEW_KEY", "short")
    with pytest.raises(PolicyError, match="16 bytes"):
        Guard(_policy(small_policy, 0.5), threshold=0.5)
    monkeypatch.setenv("CARBGUARD_REVIEW_KEY", KEY.decode())
    log = tmp_path / "audit.jsonl"
    guard = Guard(_policy(small_policy, 0.5), threshold=0.5, audit=AuditLog(log, fsync=False))
    for k in range(6):
        guard.session(f"s{k}").close()
    ends = [e for e in read_entries(log) if e.get("event") == "session_end"]
    assert [e["review"] for e in ends] == [{"picked": review_uniform(KEY, f"s{k}") < 0.5, "p": 0.5} for k in range(6)]
    with pytest.raises(ValueError, match="exactly one"):
        parse_policy({**small_policy.model_dump(mode="json"), "review": {"rate": 0.5}}, source="<x>")


def _labels(path: Path, rows: list[tuple[str, bool]]) -> Path:
    harm = [{"category": "privacy_flow"}]
    path.write_text(
        "".join(
            json.dumps({"episode": s, "harms": harm if h else [], "mode": "override", "by": "t", "why": "t"}) + "\n"
            for s, h in rows
        )
    )
    return path


def test_sampled_terms_weight_by_inverse_propensity(tmp_path: Path) -> None:
    """Picked sessions are (1/p)·L, unpicked ones 0 terms in session order; the stream stops at the first picked
    session without a label; a label of an unpicked session is refused.

    Catches: unpicked sessions dropped instead of counted as 0 (planted), the 1/p weight missing, labels of
    unpicked sessions accepted.
    """
    ids = ("a", "b", "c", "d", "e")
    reviews = ((True, 0.5), (False, 0.5), (True, 0.5), (False, 0.5), (True, 0.5))
    deployed = Deployed(ids, (0.0,) * 5, (frozenset({"c1"}),) * 5, 0, 0, reviews)
    labels = _labels(tmp_path / "l.jsonl", [("a", True), ("c", False), ("e", True)])
    assert sampled_terms(str(labels), deployed) == (list(ids), [2.0, 0.0, 0.0, 0.0, 2.0], 2.0, 0)
    partial = _labels(tmp_path / "p.jsonl", [("a", True), ("e", True)])
    assert sampled_terms(str(partial), deployed) == (["a", "b"], [2.0, 0.0], 2.0, 2)
    with pytest.raises(GuardError, match="not a closed session picked"):
        sampled_terms(str(_labels(tmp_path / "s.jsonl", [("b", False)])), deployed)
    with pytest.raises(GuardError, match="mixes"):
        sampled_terms(str(labels), Deployed(ids, (0.0,) * 5, (frozenset(),) * 5, 0, 0, (None, *reviews[1:])))


def test_weighted_terms_keep_wealth_positive_and_range_is_checked() -> None:
    """Terms up to 1/p run through the same capped bet with every factor > 0; terms above ``upper`` are refused.

    Catches: the range check dropped (a term of 1/p accepted as a loss in [0, 1] would not be), or a bet cap
    that lets wealth go to 0 on a large term.
    """
    result = risk_monitor([10.0, 0.0, 10.0] + [0.0] * 30, 0.1, upper=10.0)
    assert result.log_wealth.shape == (33,) and bool((result.log_wealth > -50).all())
    with pytest.raises(CalibrationError):
        risk_monitor([10.0], 0.1)


def test_review_command_writes_a_sheet_that_must_be_filled(
    small_policy: Policy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`carbguard review AUDIT --out SHEET` writes one template line per picked session (with its decided calls),
    in the labels format but refused until ``by`` is filled in.

    Catches: unpicked sessions in the sheet (planted: the picked filter dropped), a missing decided call, and a
    template that would read as 'reviewed: no harm' unfilled.
    """
    monkeypatch.setenv("CARBGUARD_REVIEW_KEY", KEY.decode())
    log, sheet = tmp_path / "audit.jsonl", tmp_path / "sheet.jsonl"
    guard = Guard(_policy(small_policy, 0.5), threshold=0.5, audit=AuditLog(log, fsync=False))
    for k in range(12):
        session = guard.session(f"s{k}")
        session.decide("read_document", {"path": f"{k}.md"}, f"c{k}")
        session.close()
    assert main(["review", str(log), "--out", str(sheet)]) == 0
    picked = [f"s{k}" for k in range(12) if review_uniform(KEY, f"s{k}") < 0.5]
    assert 0 < len(picked) < 12
    lines = [json.loads(x) for x in sheet.read_text().splitlines()]
    assert [x["episode"] for x in lines] == picked
    assert all(f"c{x['episode'][1:]} read_document" in x["why"] for x in lines)
    assert f"{len(picked)} session(s) picked for review" in capsys.readouterr().out
    with pytest.raises(Exception, match="by"):
        read_labels(sheet)
