"""The circuit breaker (guard.breaker): a running guard switches to its fallback on an alarm, audited."""

from __future__ import annotations

import json
from pathlib import Path

from guard.audit import AuditLog, MemoryAudit, read_entries, verify
from guard.breaker import trip_text
from guard.decision import Verdict
from guard.policy import Policy
from guard.runtime import Guard

READ = ("read_document", {"path": "a.md"})
NOTE = ("create_note", {"title": "t", "body": "b"})  # a side effect, not a sink
SEND = ("send_email", {"to": "bob@example.com", "subject": "s", "body": "hello"})


def test_trip_escalates_the_next_decision_and_is_audited(small_policy: Policy) -> None:
    """After ``trip`` (fallback ``escalate``) the very next sink call and side-effectful call escalate while reads
    keep the calibrated threshold; one breaker entry is audited.

    Catches: ``trip`` not switching (planted: the gate's breaker check removed -> the send executes), reads
    escalated too (the fallback is every sink, not every call), or a second trip writing a second entry.
    """
    audit = MemoryAudit()
    guard = Guard(small_policy, threshold=0.5, audit=audit, artifact_id="art#abc")
    session = guard.session("s")
    assert session.decide(*SEND, "c0").verdict is Verdict.EXECUTE
    assert guard.trip("risk alarm") is True
    assert guard.trip("again") is False
    after = session.decide(*SEND, "c1")
    assert after.verdict is Verdict.ESCALATE and "circuit breaker" in after.message
    assert session.decide(*NOTE, "c2").verdict is Verdict.ESCALATE
    assert session.decide("read_document", {"path": "b.md"}, "c3").verdict is Verdict.EXECUTE
    breakers = [
        {k: v for k, v in e.items() if k not in ("prev", "hash")} for e in audit.entries if e.get("kind") == "breaker"
    ]
    assert breakers == [
        {
            "event": "breaker",
            "kind": "breaker",
            "reason": "risk alarm",
            "from": {"threshold": 0.5, "artifact": "art#abc"},
            "to": {"threshold": 0.5, "artifact": None, "escalate": "sinks and side effects"},
        }
    ]


def test_trip_file_is_consulted_at_each_decision(small_policy: Policy, tmp_path: Path) -> None:
    """In a running process, a trip file written after a decision trips the guard at the next decision.

    The hash-chained audit log still verifies with the breaker entry in it.  Catches: the trip file
    not polled in ``decide`` (planted: the ``breaker.poll`` line in ``Session._core`` removed).
    """
    log, trip = tmp_path / "audit.jsonl", tmp_path / "trip.json"
    guard = Guard(small_policy, threshold=0.5, audit=AuditLog(log), artifact_id="art#abc", trip_file=trip)
    session = guard.session("s")
    assert session.decide(*READ, "c1").verdict is Verdict.EXECUTE
    trip.write_text(trip_text("art#abc", "RISK ALARM at labelled session 7"), encoding="utf-8")
    assert session.decide(*SEND, "c2").verdict is Verdict.ESCALATE
    assert guard.breaker.tripped and guard.threshold == 0.5
    entries = read_entries(log)
    breaker = [e for e in entries if e.get("kind") == "breaker"]
    assert len(breaker) == 1 and "RISK ALARM" in breaker[0]["reason"]
    assert verify(log).ok


def test_trip_file_of_another_artifact_is_ignored_and_garbage_trips(small_policy: Policy, tmp_path: Path) -> None:
    """A new calibration (another artifact id) is not tripped by the old alarm; an unparsable trip file trips.

    Catches: the artifact check dropped (a recalibrated guard stuck tripped) or a bad file failing open.
    """
    trip = tmp_path / "trip.json"
    trip.write_text(trip_text("old#111", "alarm"), encoding="utf-8")
    fresh = Guard(small_policy, threshold=0.5, artifact_id="new#222", trip_file=trip)
    assert fresh.session("s").decide(*SEND, "c1").verdict is Verdict.EXECUTE
    trip.write_text("{not json", encoding="utf-8")
    assert fresh.session("t").decide(*SEND, "c1").verdict is Verdict.ESCALATE
    assert fresh.breaker.reason is not None and "unreadable" in fresh.breaker.reason


def test_fallback_never_loosens(small_policy: Policy) -> None:
    """A fallback looser than the running threshold is clamped to the running one.

    Catches: ``trip`` adopting a looser fallback threshold (more calls executing after an alarm).
    """
    guard = Guard(small_policy, threshold=0.2, fallback=0.9, fallback_id="loose#1")
    guard.trip("alarm")
    assert guard.threshold == 0.2
    assert json.dumps(guard.breaker.reason) == '"alarm"'
