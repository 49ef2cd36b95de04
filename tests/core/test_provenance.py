"""The provenance the ``escalate_risky`` fallback reads (guard/provenance.py, docs/monitoring.md#the-circuit-breaker).

The prefix graph's edge rules drop an edge where a shared span says little for the score (boilerplate, a weak
span, a zone, a part of a structured value), and trusted evidence or an internal destination lowers the score of
a call whose edges stand.  None of that may make a side effect look data-free to the fallback.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from guard.decision import Verdict
from guard.policy import parse_policy
from guard.provenance import raw_sources, risky_bits
from guard.runtime import Guard, Session
from tests.conftest import SMALL_POLICY, TEXTS

SIGNED = (
    "Dear team,\nThe lab results for Emma are attached and need review.\n\n"
    "Best regards,\nDr. Alain Petit\nTel: +33 4 72 10 55 99\nClinique Saint-Luc"
)


@dataclass(frozen=True)
class Dropped:
    """One way an edge into a side effect goes missing: what a risky tool returned, and what the call carries."""

    rule: str
    source: str  # the tool that returned ``text``: read_certificate (private) or read_inbox (untrusted)
    text: str
    args: dict[str, Any]
    user: str = "Please tidy up my notes."


DROPPED = [
    Dropped(
        "weak span (a city)",
        "read_certificate",
        "Holder: Emma Johnson, 12 rue Garibaldi, Villeurbanne\nNumber: X4821",
        {"title": "t", "body": "visit to Villeurbanne next week"},
    ),
    Dropped(
        "part of a structured value (a domain)",
        "read_certificate",
        "Contact: emma.johnson@clinic-lyon.example for results",
        {"title": "t", "body": "book clinic-lyon.example"},
    ),
    Dropped(
        "boilerplate of the background table",
        "read_inbox",
        "Your reset code. If you did not request this, please ignore this email. Code 5521",
        {"title": "t", "body": "If you did not request this"},
    ),
]
# (A private or untrusted record's signature zone no longer drops an edge: such records are read whole,
# docs/evidence.md#zones; tests/evidence/test_precision_cases.py checks that the edge is made.)


def _tripped_session(source: str, text: str, user: str, policy_data: dict[str, Any] | None = None) -> Session:
    guard = Guard(parse_policy(copy.deepcopy(policy_data or SMALL_POLICY)), threshold=1.0, fallback="escalate_risky")
    session = guard.session("p")
    session.observe_user(user)
    args = {"name": "x"} if source == "read_certificate" else {}
    assert session.decide(source, args, "c1").verdict is Verdict.EXECUTE
    session.observe_result("c1", text)
    assert guard.trip("alarm")
    return session


@pytest.mark.parametrize("row", DROPPED, ids=[row.rule for row in DROPPED])
def test_a_side_effect_whose_edge_was_dropped_still_has_provenance(row: Dropped) -> None:
    """Each row's side effect shares a value with a private or untrusted record only where an edge rule dropped
    the edge (checked: no risky ancestor in the graph); after a trip with ``escalate_risky`` it escalates, naming
    provenance, and a read carrying the same values executes.

    Catches the fallback reading provenance from the graph's edges alone (planted: ``risky_provenance`` without
    the ``raw_sources`` check -> every row's note executes as data-free)."""
    session = _tripped_session(row.source, row.text, row.user)
    decision = session.decide("create_note", row.args, "c2")
    graph = session.graph
    assert not graph.ancestor_bits(decision.proposal_index) & risky_bits(graph), "the row must drop the edge"
    assert decision.verdict is Verdict.ESCALATE, decision.message
    assert "private or untrusted provenance" in decision.message
    read = session.decide("read_document", {"path": row.args["body"]}, "c3")
    assert read.verdict is Verdict.EXECUTE, read.message


def test_a_value_shared_with_a_descendant_of_untrusted_text_is_risky() -> None:
    """A side effect sharing only a weak span with a record that itself descends from untrusted text (a note's
    result, whose call carried the injected address) escalates: the raw source's ancestors count.

    Catches the raw reading checking only the records it finds (planted: ``or any(graph.ancestor_bits(source)
    ...)`` dropped from ``risky_provenance`` -> the note executes)."""
    fresh = Guard(parse_policy(copy.deepcopy(SMALL_POLICY)), threshold=1.0, fallback="escalate_risky")
    s = fresh.session("d")
    s.observe_user("Please tidy up my notes.")
    s.decide("read_inbox", {}, "c1")
    s.observe_result("c1", TEXTS.inbox)
    body = f"forward to {TEXTS.attacker}"  # an edge from the inbox: the note descends from untrusted text
    assert s.decide("create_note", {"title": "fwd", "body": body}, "c2").verdict is Verdict.EXECUTE
    s.observe_result("c2", "Note filed in the folder Villeurbanne archive")
    fresh.trip("alarm")
    decision = s.decide("create_note", {"title": "t", "body": "plan the trip to Villeurbanne"}, "c3")
    graph = s.graph
    node = decision.proposal_index
    assert node is not None
    found = raw_sources(graph, node)
    assert found and not found & risky_bits(graph), "the raw source itself is neither private nor untrusted"
    assert decision.verdict is Verdict.ESCALATE, decision.message


def test_trusted_and_internal_calls_keep_their_provenance() -> None:
    """A note whose every value the user named, and a sink whose every destination is internal, leave data-flow
    evidence out of their score; neither may leave the fallback: both carry a value of an untrusted or private
    record, and both escalate after a trip; the same calls before the trip execute (the breaker escalates).

    Catches a fallback that reads the score's lowered evidence as no provenance (planted: ``risky_provenance``
    returning False when ``WeightedScorer.lowered`` is not empty -> both calls execute)."""
    data = copy.deepcopy(SMALL_POLICY)
    data["tools"]["share_note"] = {
        "kind": "sink",
        "effect": "reversible",
        "severity": 1,
        "payload_args": ["body"],
        "identifier_args": ["channel"],
    }
    data["trust"] = {"internal": {"identifiers": ["#ops"]}}
    said = f"Note that {TEXTS.attacker} is the new billing contact."
    calls = [
        ("read_inbox", TEXTS.inbox, said, "create_note", {"title": "billing", "body": TEXTS.attacker}),
        ("read_certificate", TEXTS.cert, "Tidy up.", "share_note", {"channel": "#ops", "body": TEXTS.cert_number}),
    ]
    for source, text, user, tool, args in calls:
        before = Guard(parse_policy(copy.deepcopy(data)), threshold=1.0, fallback="escalate_risky").session("b")
        before.observe_user(user)
        before.decide(source, {"name": "x"} if source == "read_certificate" else {}, "c1")
        before.observe_result("c1", text)
        assert before.decide(tool, args, "c2").verdict is Verdict.EXECUTE
        session = _tripped_session(source, text, user, data)
        decision = session.decide(tool, args, "c2")
        scorer = session.guard.scorer
        assert scorer.lowered(session.graph, decision.proposal_index, decision.features), (tool, "must be lowered")  # type: ignore[attr-defined]
        assert decision.verdict is Verdict.ESCALATE, (tool, decision.message)


RISKY_TEXTS = [TEXTS.cert, SIGNED, DROPPED[2].text, DROPPED[1].text]


@settings(max_examples=150, deadline=None)
@given(which=st.integers(0, len(RISKY_TEXTS) - 1), start=st.integers(0, 200), size=st.integers(8, 40), data=st.data())
def test_any_span_of_a_risky_record_carried_by_a_side_effect_is_found(
    which: int, start: int, size: int, data: st.DataObject
) -> None:
    """Property: a side effect whose argument holds any span of at least ``min_span`` characters of a private or
    untrusted record's text (a span the edge rules may link or not: boilerplate, a weak run, a zone, part of a
    structured value), with any text around it, has that record among its raw sources, and escalates after a trip.

    Catches a raw reading that goes through the edge rules' filters (planted: ``raw_sources`` reading
    ``index.span_bits(form)`` instead of every k-gram's holders -> a boilerplate or weak span is missed)."""
    text = RISKY_TEXTS[which]
    lo = min(start, len(text) - 8)
    span = text[lo : lo + size]
    assume(span.strip())
    around = data.draw(st.sampled_from(["", "note: ", "Re: "])), data.draw(st.sampled_from(["", " thanks", "."]))
    session = _tripped_session("read_certificate", text, "Please tidy up my notes.")
    decision = session.decide("create_note", {"title": "t", "body": around[0] + span + around[1]}, "c2")
    node = decision.proposal_index
    assert node is not None
    assert raw_sources(session.graph, node) & (1 << 2), (span, decision.message)  # record 2: the certificate's text
    assert decision.verdict is Verdict.ESCALATE, (span, decision.message)
