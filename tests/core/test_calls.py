"""The calls of a session (guard/calls.py): where each call id stands, and views readers cannot write."""

from __future__ import annotations

import pytest

from guard.calls import CallState
from guard.errors import BindingError
from guard.runtime import Guard


def test_call_state_follows_decide_authorize_observe(guard: Guard) -> None:
    """Catches a session whose call_state query disagrees with what authorize and observe_result did."""
    session = guard.session("s")
    session.observe_user("Tidy up my documents.")
    assert session.call_state("c1") is CallState.UNKNOWN and session.decision("c1") is None
    decision = session.decide("read_certificate", {"name": "passport"}, "c1")
    assert session.call_state("c1") is CallState.PROPOSED and session.decision("c1") is decision
    session.authorize("c1", "read_certificate", {"name": "passport"})
    assert session.call_state("c1") is CallState.RAN
    session.observe_result("c1", "Passport number X4821-99317")
    assert session.call_state("c1") is CallState.ANSWERED
    with pytest.raises(BindingError, match="already ran"):
        session.authorize("c1", "read_certificate", {"name": "passport"})


def test_readers_get_views_they_cannot_write(guard: Guard) -> None:
    """Catches a session that hands readers its own mutable bookkeeping (a reader could forge an approval)."""
    session = guard.session("s")
    session.observe_user("hi")
    session.decide("read_certificate", {"name": "passport"}, "c1")
    with pytest.raises(TypeError):
        session.decisions["c2"] = session.decisions["c1"]  # type: ignore[index]
    with pytest.raises(TypeError):
        session.proposals["c2"] = session.proposals["c1"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        session.executed.add("c1")  # type: ignore[attr-defined]
    assert session.call_state("c2") is CallState.UNKNOWN


def test_refuse_audits_without_replacing_a_standing_decision(guard: Guard) -> None:
    """Catches a refused attempt (an adapter error) that overwrites the decision its call id already has."""
    session = guard.session("s")
    session.observe_user("hi")
    decision = session.decide("read_certificate", {"name": "passport"}, "c1")
    refusal = session.refuse("read_certificate", {"name": "other"}, "c1", BindingError("arguments differ"))
    assert refusal.reason.value == "call_reused" and session.decision("c1") is decision
    fresh = session.refuse("read_certificate", {"name": "passport"}, "c9", RuntimeError("adapter fault"))
    assert fresh.reason.value == "internal_error" and session.decision("c9") is fresh
    assert guard.audit.entries[-1]["error"].startswith("RuntimeError")  # type: ignore[union-attr]
