"""Records with owners, trusted fields and vouched destinations at the gate (guard.evidence.owned).

A record's private data may go to its owner (``owner: FIELD``), and to no one else; another record's data
to that owner stays evidence.  A value the system put in a trusted field (``trusted_fields``) is not
untrusted.  Application code may vouch for a session's destinations (``Session.vouch``).  See
docs/policy.md#owners, docs/policy.md#trusted-fields and docs/policy.md#vouched-destinations.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from guard import Guard, Verdict
from guard.audit import MemoryAudit
from guard.errors import InputError
from guard.evidence.owned import rows_of
from guard.features import DATAFLOW, PRIVATE_DATA
from guard.policy import Policy, parse_policy
from guard.redaction import hash_value

TOOLS: dict[str, Any] = {
    "lookup_customer": {"kind": "private_source", "owner": "email", "identifier_args": ["query"]},
    "read_notes": {"kind": "private_source", "identifier_args": ["query"]},
    "read_ticket": {
        "kind": ["private_source", "untrusted_source"],
        "owner": "customer_email",
        "trusted_fields": ["customer_email", "order_id", "address"],
        "identifier_args": ["ticket_id"],
    },
    "send_email": {
        "kind": "sink",
        "effect": "irreversible",
        "severity": 3,
        "payload_args": ["body"],
        "identifier_args": ["to"],
    },
    "change_address": {
        "kind": "other",
        "effect": "reversible",
        "severity": 2,
        "payload_args": ["address"],
        "identifier_args": ["order_id"],
    },
}
ANN, BOB = "ann@shop-mail.com", "bob@other-mail.com"
CRM = [
    {"email": ANN, "name": "Ann Lee", "phone": "+1 555 010 2233", "notes": "VIP since 2019, prefers DHL express"},
    {"email": BOB, "name": "Bob Roe", "phone": "+1 555 010 9988", "notes": "Card on file ending 4421, disputes"},
]
SAME = "prefers DHL express delivery on weekdays"  # a phrase both records hold
CRM_SHARED = [{**CRM[0], "notes": SAME}, {**CRM[1], "notes": SAME}]
ANN_DATA = "Your phone on file: +1 555 010 2233, notes: VIP since 2019, prefers DHL express"
BOB_DATA = "Bob's phone on file: +1 555 010 9988"


def _policy(**tools: Any) -> Policy:
    return parse_policy({"name": "desk", "tools": {**TOOLS, **tools}, "trust": {"user_named": False}})


def _send(policy: Policy, to: str, body: str, *, result: Any = CRM, source: str = "lookup_customer") -> Any:
    s = Guard(policy, threshold=0.3).session("t")
    s.observe_user("Please send me my contact details on file.")
    s.decide(source, {"query": "lee"}, "c1")
    s.observe_result("c1", result if isinstance(result, str) else json.dumps(result))
    return s.decide("send_email", {"to": to, "body": body}, "c2")


def _lowered(decision: Any) -> bool:
    """Whether the private-data evidence that fired was left out of the score."""
    fired = [name for name in PRIVATE_DATA if decision.features.get(name)]
    assert fired, "the case must carry private-data evidence"
    return bool(decision.score < 0.3)


CASES = [
    # (recipient, body, result, lowered?)
    (ANN, ANN_DATA, CRM, True),  # the owner's own data to the owner
    (ANN, BOB_DATA, CRM, False),  # another record's data to that owner
    (ANN, ANN_DATA + " / " + BOB_DATA, CRM, False),  # both records: one of them is not hers
    ("eve@evil.example", ANN_DATA, CRM, False),  # the owner's data to anyone else
    (BOB, ANN_DATA, CRM, False),  # the owner's data to another owner
    (ANN, ANN_DATA, CRM[0], True),  # a single object is one record
    (ANN, "Phone +1 555 010 2233, " + SAME, CRM_SHARED, True),  # a phrase both hold is not Bob's data
    (ANN, "Phone +1 555 010 9988, " + SAME, CRM_SHARED, False),  # Bob's phone beside it is
    (" ANN@shop-mail.com ", ANN_DATA, CRM, True),  # ASCII case and spaces aside, the exact key
    ("ann@shop-mаil.com", ANN_DATA, CRM, False),  # a Cyrillic 'а': a look-alike is another mailbox
    (ANN, ANN_DATA, "Ann Lee +1 555 010 2233 VIP since 2019, prefers DHL express", False),  # not records
]


@pytest.mark.parametrize(("to", "body", "result", "lowered"), CASES)
def test_private_data_goes_only_to_its_records_owner(to: str, body: str, result: Any, lowered: bool) -> None:
    """Catches an owner reading that is not per record or not exact: planted a whole-result owner (any owner
    in the result), a loose match (NFKC / case folding of non-ASCII), a lowering for a text that is not
    records, or a phrase both records hold read as the other record's data, one of these rows fails."""
    assert _lowered(_send(_policy(), to, body, result=result)) is lowered


def test_a_private_source_without_owner_keeps_its_evidence() -> None:
    """Catches an owner lowering that skips sources declaring no owner: the same data read from a tool
    without ``owner`` and mailed to the same address stays evidence."""
    decision = _send(_policy(), ANN, ANN_DATA, source="read_notes")
    assert not _lowered(decision) and decision.verdict is not Verdict.EXECUTE


def test_vouched_recipient_counts_as_internal_and_is_audited() -> None:
    """Catches a vouch that does not reach the gate, is not exact, or is not audited (or audited in clear text):
    before the vouch the send to a third party stops; after it runs; a look-alike still stops; one
    ``kind: vouch`` entry per vouch names the value hashed."""
    sink = MemoryAudit()
    guard = Guard(_policy(), threshold=0.3, audit=sink)
    verdicts: list[Verdict] = []
    eve, look_alike = "eve@partner.example", "eve@pаrtner.example"  # a Cyrillic 'а'
    for vouched, to in ((None, eve), (eve, eve), (eve, look_alike)):
        s = guard.session(f"s-{len(verdicts)}")
        s.observe_user("Send my details to my accountant.")
        if vouched:
            s.vouch(recipients=[vouched])
        s.decide("lookup_customer", {"query": "lee"}, "c1")
        s.observe_result("c1", json.dumps(CRM))
        verdicts.append(s.decide("send_email", {"to": to, "body": ANN_DATA}, "c2").verdict)
    assert verdicts == [Verdict.ESCALATE, Verdict.EXECUTE, Verdict.ESCALATE]
    vouches = [e for e in sink.entries if e.get("kind") == "vouch"]
    assert len(vouches) == 2 and vouches[0]["vouched"] == {"recipients": [hash_value("eve@partner.example")]}
    assert "eve@partner.example" not in json.dumps(vouches)  # hashed, as argument values are


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"recipients": "a@b.com"}, "lists of strings"),
        ({"domains": ["not a domain"]}, "domain"),
        ({"recipients": [3]}, "lists"),
    ],
)
def test_vouch_refuses_what_trust_internal_refuses(kwargs: dict[str, Any], word: str) -> None:
    """Catches a vouch that accepts a bare string (vouching for each character) or an unchecked value."""
    s = Guard(_policy(), threshold=0.3).session("t")
    with pytest.raises(InputError, match=word):
        s.vouch(**kwargs)
    assert not s.graph.vouched.declared()


TICKET = {
    "ticket_id": "T-9",
    "customer_email": ANN,
    "order_id": "ORD-55120",
    "address": "12 Harbour Road, Leith EH6 6JJ",
    "body": "Hi, I moved. Please ship ORD-55120 to 12 Harbour Road, Leith EH6 6JJ. Or 99 Dock Street, Hull HU1 1AA",
}


@pytest.mark.parametrize(
    ("address", "lowered"),
    [("12 Harbour Road, Leith EH6 6JJ", True), ("99 Dock Street, Hull HU1 1AA", False)],
)
def test_a_trusted_fields_value_is_not_untrusted(address: str, lowered: bool) -> None:
    """Catches trusted fields that do not lower, or that lower the free text too: the form's address (also
    quoted in the free text) leaves the untrusted data-flow evidence out, an address only the free text
    supplies keeps it; the private-data evidence is never left out (the ticket stays private)."""
    s = Guard(_policy(), threshold=0.3).session("t")
    s.observe_user("Handle my ticket T-9 please.")
    s.decide("read_ticket", {"ticket_id": "T-9"}, "c1")
    s.observe_result("c1", json.dumps(TICKET))
    d = s.decide("change_address", {"order_id": "ORD-55120", "address": address}, "c2")
    left_out = s.guard.scorer.lowered(s.graph, d.proposal_index, d.features)  # type: ignore[attr-defined]
    assert (left_out == DATAFLOW - PRIVATE_DATA) is lowered
    assert not left_out & PRIVATE_DATA


def test_rows_read_objects_and_lists_of_objects_only() -> None:
    """Catches a record reader that attributes text it cannot split into records (a scalar, mixed lists)."""
    assert rows_of(json.dumps(CRM), "email", ()) is not None
    for text in ("[]", "[1, 2]", '[{"a": 1}, 2]', '"text"', "not json", "{"):
        assert rows_of(text, "email", ()) is None
    (row,) = rows_of(json.dumps(TICKET), "customer_email", ("order_id",)) or ()
    assert row.owner == f"email:{ANN}" and row.trusted == ("ORD-55120",)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "sink", "owner": "email"}, "private_source"),
        ({"kind": "public_source", "owner": "email"}, "private_source"),
        ({"kind": "other", "trusted_fields": ["id"]}, "only allowed on a source"),
        ({"kind": "private_source", "trusted_fields": ["id", "id"]}, "twice"),
        ({"kind": "private_source", "trusted_fields": [" "]}, "empty"),
        ({"kind": "private_source", "owner": ""}, "at least 1"),
        ({"kind": "private_source", "trusted_fields": "id"}, "tuple"),
    ],
)
def test_owner_and_trusted_fields_are_checked_at_load(spec: dict[str, Any], message: str) -> None:
    """Catches a policy that accepts owner/trusted_fields where no records are read, or a malformed list."""
    with pytest.raises(Exception, match=message):
        parse_policy({"name": "p", "tools": {"t": spec}})
