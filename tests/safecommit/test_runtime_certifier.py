"""PolicyCertifier in Session.decide: probes, re-decisions after observe_result, fallbacks, alternatives, audit."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.audit import MemoryAudit
from guard.decision import Decision, Reason, Verdict
from guard.errors import PolicyError
from guard.policy import Policy, parse_policy
from guard.runtime import Guard, Session
from guard.safecommit.runtime import STATE_KEY, PolicyCertifier
from guard.safecommit.worlds import PROPOSAL_SAFE

TOOLS: dict[str, Any] = {
    "lookup_contact": {"kind": "private_source", "identifier_args": ["address"]},
    "delete_doc": {"kind": "other", "effect": "irreversible", "severity": 2, "identifier_args": ["path"]},
    "archive_doc": {"kind": "other", "effect": "reversible", "severity": 1, "identifier_args": ["path"]},
}
CONTACT_PROBE: dict[str, Any] = {
    "name": "contact",
    "tool": "lookup_contact",
    "args": {"address": "{value}"},
    "applies_to": {"send_email": ["to"]},
    "rules": [
        {"match": "^{value}$", "label": "known"},
        {"match": "no contact", "label": "unknown", "status": "any"},
    ],
    "outcomes": {"legit": "known", "untrusted": "unknown"},
}
SECTION: dict[str, Any] = {
    "kappa": 1.5,
    "budget": 2,
    "worlds": {
        "send_email": {"values": [{"arg": "to", "deny_patterns": ["@blocked\\.example$"]}]},
        "delete_doc": {"resources": [{"arg": "path"}]},
    },
    "probes": [CONTACT_PROBE],
    "alternatives": {
        "delete_doc": [{"name": "archive", "tool": "archive_doc", "args": {"path": "{path}"}, "reward": 0.6}]
    },
}
USER = "Send the summary to the address in my inbox."
INBOX = "From: dana@corp.example\nPlease send me the summary."
SEND = {"to": "dana@corp.example", "subject": "summary", "body": "Here it is."}


def make_policy(base: Policy, **changes: Any) -> Policy:
    """``base`` plus the probe/deletion tools and the safecommit section (with ``changes``)."""
    data = base.model_dump(mode="json", exclude={"base_dir"})
    data["tools"].update(copy.deepcopy(TOOLS))
    data["safecommit"] = {**copy.deepcopy(SECTION), **changes}
    return parse_policy(data)


@pytest.fixture(scope="module")
def policy(small_policy: Policy) -> Policy:
    """The small policy with a contact probe, a deletion and its reversible alternative."""
    return make_policy(small_policy)


@pytest.fixture
def audit() -> MemoryAudit:
    return MemoryAudit()


@pytest.fixture
def session(policy: Policy, audit: MemoryAudit) -> Session:
    """User turn + an inbox read that names the recipient: the next proposal is the e-mail."""
    s = Guard(policy, threshold=math.inf, audit=audit).session("sc")
    s.observe_user(USER)
    s.decide("read_inbox", {}, "r1")
    s.observe_result("r1", INBOX)
    return s


def run_probe(session: Session, decision: Decision, answer: str) -> None:
    """What an adapter does: run the probe call through the gate, report its result."""
    (call,) = decision.probes
    assert session.decide(call.tool, dict(call.args), call.call_id).allowed
    session.observe_result(call.call_id, answer)


def test_the_guard_builds_a_policy_certifier(policy: Policy) -> None:
    assert isinstance(Guard(policy, threshold=1.0).certifier, PolicyCertifier)


def test_a_probe_decision_carries_the_probe_call(session: Session) -> None:
    decision = session.decide("send_email", SEND, "e1")
    assert (decision.verdict, decision.reason) == (Verdict.PROBE, Reason.PROBE_NEEDED)
    (call,) = decision.probes
    assert call.tool == "lookup_contact" and dict(call.args) == {"address": "dana@corp.example"}
    assert call.call_id == "e1::probe1:contact" and call.name == "contact[to#" + call.name.split("#")[1]
    assert session.guard.policy.tools[call.tool].effect.value == "none"
    log = decision.safecommit
    assert log is not None and log["log"]["reason"] == "probe_selected" and log["log"]["expected_shrinkage"] > 0
    assert log["probe_calls"] == [{"probe": call.name, "tool": "lookup_contact", "call_id": call.call_id}]


def test_re_deciding_after_the_probe_removes_contradicted_worlds(session: Session) -> None:
    first = session.decide("send_email", SEND, "e1")
    run_probe(session, first, "dana@corp.example")
    second = session.decide("send_email", SEND, "e1")
    assert (second.verdict, second.reason) == (Verdict.EXECUTE, Reason.CERTIFIED)
    log = second.safecommit
    assert log is not None
    assert [w.split(":")[0] for w in log["log"]["removed_by_probes"]] == ["untrusted"]
    assert log["log"]["probes_run"] == [{"probe": first.probes[0].name, "outcome": "known", "raw_type": "str"}]
    assert log["support"]["candidates"] == first.safecommit["support"]["candidates"]  # type: ignore[index]
    assert second.proposal_index == first.proposal_index


def test_a_probe_outcome_that_rules_out_the_legitimate_worlds_leaves_no_safe_action(session: Session) -> None:
    first = session.decide("send_email", SEND, "e1")
    run_probe(session, first, "no contact dana@corp.example")
    second = session.decide("send_email", SEND, "e1")
    assert (second.verdict, second.reason) == (Verdict.ABSTAIN, Reason.NOT_CERTIFIED)
    assert second.safecommit is not None and second.safecommit["log"]["reason"] == "no_safe_action"


def test_an_unparseable_probe_result_changes_nothing_and_spends_budget(session: Session) -> None:
    first = session.decide("send_email", SEND, "e1")
    run_probe(session, first, "directory busy, try later")
    second = session.decide("send_email", SEND, "e1")
    assert second.verdict is Verdict.PROBE and second.probes[0].call_id == "e1::probe2:contact"
    log2 = second.safecommit
    assert log2 is not None and log2["log"]["retained"] == first.safecommit["log"]["retained"]  # type: ignore[index]
    assert log2["log"]["probes_run"][0]["outcome"] is None and log2["log"]["probes_used"] == 1
    run_probe(session, second, "still busy")
    third = session.decide("send_email", SEND, "e1")
    assert (third.verdict, third.reason) == (Verdict.ESCALATE, Reason.NOT_CERTIFIED)
    log3 = third.safecommit
    assert log3 is not None and log3["log"]["reason"] == "authority_missing"
    assert log3["log"]["probe_stop"] == "budget_spent" and log3["log"]["probes_used"] == 2
    assert log3["log"]["retained"] == first.safecommit["log"]["retained"]  # type: ignore[index]


def test_deciding_again_before_the_probe_result_asks_for_the_same_call(session: Session) -> None:
    first = session.decide("send_email", SEND, "e1")
    again = session.decide("send_email", SEND, "e1")
    assert again.verdict is Verdict.PROBE and again.probes == first.probes
    assert session.certifier_state[STATE_KEY]["e1"].issued == [(first.probes[0].name, first.probes[0])]


def test_an_empty_world_set_abstains_with_its_reason(policy: Policy) -> None:
    s = Guard(policy, threshold=math.inf).session("empty")
    s.observe_user("Mail x@blocked.example")
    decision = s.decide("send_email", {"to": "x@blocked.example"}, "e1")
    assert (decision.verdict, decision.reason) == (Verdict.ABSTAIN, Reason.NOT_CERTIFIED)
    assert "empty_world_set" in decision.message and "contradicts hard evidence" in decision.message
    assert decision.safecommit is not None and decision.safecommit["log"]["reason"] == "empty_world_set"


def test_a_certified_reversible_alternative_replaces_the_proposal(session: Session) -> None:
    decision = session.decide("delete_doc", {"path": "q3.txt"}, "d1")
    assert (decision.verdict, decision.reason) == (Verdict.DEFER, Reason.CERTIFIED)
    log = decision.safecommit
    assert log is not None and log["phase"] == "alternatives"
    assert log["replacement"] == {"action": "archive", "tool": "archive_doc", "args": {"path": "q3.txt"}}
    assert log["log"]["chosen_action"] == "archive"


def test_a_noop_alternative_is_only_offered_instead_of_abstaining(small_policy: Policy) -> None:
    noop = {"send_email": [{"name": "skip", "kind": "noop", "reward": 0.1}]}
    s = Guard(make_policy(small_policy, alternatives=noop), threshold=math.inf).session("noop")
    s.observe_user(USER)
    s.decide("read_inbox", {}, "r1")
    s.observe_result("r1", INBOX)
    first = s.decide("send_email", SEND, "e1")
    assert first.verdict is Verdict.PROBE  # the no-op does not pre-empt the probe
    run_probe(s, first, "no contact")
    second = s.decide("send_email", SEND, "e1")
    assert second.verdict is Verdict.ABSTAIN and "no-op alternative 'skip'" in second.message


def test_the_audit_entry_carries_the_safecommit_log(session: Session, audit: MemoryAudit) -> None:
    session.decide("send_email", SEND, "e1")
    entry = audit.entries[-1]
    assert entry["verdict"] == "probe" and entry["safecommit"]["log"]["kappa"] == 1.5
    assert entry["probes"] == [entry["safecommit"]["probe_calls"][0]["probe"]]
    assert "dana" not in str(entry["safecommit"])  # values are hashed unless the policy logs them raw


def test_kappa_can_be_overridden_and_zero_budget_falls_back_at_once(policy: Policy, small_policy: Policy) -> None:
    guard = Guard(policy, threshold=math.inf, certifier=PolicyCertifier(policy, kappa=0.0))
    s = guard.session("k")
    s.observe_user(USER)
    s.decide("read_inbox", {}, "r1")
    s.observe_result("r1", INBOX)
    assert s.decide("send_email", SEND, "e1").safecommit["log"]["reason"] == "empty_world_set"  # type: ignore[index]
    s2 = Guard(make_policy(small_policy, budget=0), threshold=math.inf).session("b")
    s2.observe_user(USER)
    s2.decide("read_inbox", {}, "r1")
    s2.observe_result("r1", INBOX)
    decision = s2.decide("send_email", SEND, "e1")
    assert decision.verdict is Verdict.ESCALATE and decision.safecommit["log"]["probe_stop"] == "budget_spent"  # type: ignore[index]


def test_a_policy_without_safecommit_cannot_build_the_certifier(small_policy: Policy) -> None:
    with pytest.raises(PolicyError, match="no safecommit section"):
        PolicyCertifier(small_policy)


def test_over_threshold_proposals_never_reach_the_certifier(policy: Policy) -> None:
    s = Guard(policy, threshold=-1.0).session("gate")
    s.observe_user(USER)
    decision = s.decide("send_email", SEND, "e1")
    assert decision.reason is Reason.RISK_BUDGET and decision.safecommit is None
    assert STATE_KEY not in s.certifier_state


@given(data=st.data(), kappa=st.sampled_from([0.3, 0.8, 1.3, 2.0, math.inf]))
def test_a_certified_action_is_safe_in_every_retained_world(
    policy: Policy,
    script_strategy: st.SearchStrategy[list[tuple[Any, ...]]],
    script_runner: Callable[..., tuple[Session, list[Decision]]],
    data: st.DataObject,
    kappa: float,
) -> None:
    guard = Guard(policy, threshold=math.inf, certifier=PolicyCertifier(policy, kappa=kappa))
    _, decisions = script_runner(guard, data.draw(script_strategy))
    for decision in decisions:
        if decision.verdict is not Verdict.EXECUTE or decision.safecommit is None:
            continue
        log = decision.safecommit
        kinds = {c["world"]: c["kind"] for c in log["support"]["candidates"]}
        assert log["log"]["retained"], "a certificate needs at least one retained world"
        assert all(kinds[w] in PROPOSAL_SAFE for w in log["log"]["retained"])
        assert all(c["signature"]["proposal"] for c in log["log"]["classes"])
        assert all(c["score"] <= kappa for c in log["support"]["candidates"] if c["world"] in log["log"]["retained"])


@pytest.mark.parametrize(
    ("answers", "verdict", "ran"),
    [
        (["dana@corp.example"], Verdict.EXECUTE, 1),
        (["no contact dana@corp.example"], Verdict.ABSTAIN, 1),
        (["directory busy, try later", "still busy"], Verdict.ESCALATE, 2),
        ([], Verdict.PROBE, 0),
    ],
)
def test_deciding_with_answered_probes_equals_the_online_flow(
    session: Session, answers: list[str], verdict: Verdict, ran: int
) -> None:
    """Catches ``decide_answered`` (the replay study's probe model) drifting from what the flow does online: not
    deciding again after a probe ran, dropping or reordering the probe outcomes it feeds back, or going on after a
    round in which no probe could run (``[]``: the answerer runs nothing, so the verdict stays ``probe``), or
    issuing its probes on the session's own state."""
    from guard.records import Record, RecordKind, Trust

    certifier = session.guard.certifier
    assert isinstance(certifier, PolicyCertifier)
    online = session.decide("send_email", SEND, "e1")
    node = max(session.graph.records)
    record = session.graph.records[node]
    state = certifier.state_for(session, record, node)
    pending = list(answers)

    def answer(call: Any) -> Record | None:
        if not pending:
            return None
        return Record(0, RecordKind.RESULT, Trust.TOOL_PRIVATE, pending.pop(0), call.tool, call_id=call.call_id)

    before = list(state.issued)
    replayed, count = certifier.decide_answered(state, record, session.guard.policy.tools["send_email"], answer)
    assert state.issued == before  # the session's own state is left as it was
    for text in answers:  # the same answers, online
        run_probe(session, online, text)
        online = session.decide("send_email", SEND, "e1")
    assert (replayed.verdict, count) == (verdict, ran)
    assert (replayed.verdict, replayed.reason) == (online.verdict, online.reason)
