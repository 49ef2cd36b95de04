"""SafeCommit reads a session's vouch as the gate does (docs/safecommit.md#the-certificate-reads-the-gates-trust):
a destination application code vouched for loses its untrusted world, exactly, and only in that session."""

from __future__ import annotations

import math

from guard import Guard, Reason, Verdict
from guard.safecommit.evidence import VOUCHED_INTERNAL
from tests.safecommit.test_own_tools import TICKET, dropped, ops_policy


def _mail(vouched: list[str], to: str) -> tuple[Verdict, Reason, dict[str, str]]:
    session = Guard(ops_policy(), threshold=math.inf).session("ops")
    session.observe_user("Handle ticket OPS-7.")
    if vouched:
        session.vouch(recipients=vouched)
    session.decide("get_ticket", {"ticket_id": "OPS-7"}, "t1")
    session.observe_result("t1", TICKET)
    decision = session.decide("send_mail", {"to": to, "body": "logs"}, "c1")
    return decision.verdict, decision.reason, dropped(decision)


def test_a_vouched_recipient_certifies_and_a_look_alike_does_not() -> None:
    """Catches a certificate that ignores the session's vouch (the vendor address the ticket names escalates
    even after the application vouched for it) or matches it loosely (a Cyrillic look-alike certifies)."""
    vendor = "help@vendor-desk.example"
    assert _mail([], vendor)[:2] == (Verdict.ESCALATE, Reason.NOT_CERTIFIED)
    verdict, reason, why = _mail([vendor], vendor)
    assert (verdict, reason) == (Verdict.EXECUTE, Reason.CERTIFIED) and why == {"untrusted": VOUCHED_INTERNAL}
    assert _mail([vendor], "help@vendor-dеsk.example")[:2] == (Verdict.ESCALATE, Reason.NOT_CERTIFIED)
