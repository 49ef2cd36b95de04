"""Precision cases through the public API (docs/evidence.md#boilerplate-by-position-and-shape).

``tests/fixtures/precision/cases.json`` holds one case per everyday boilerplate class the issue lists (``listed``),
negatives of other shapes (``negative``), positives (``positive``: a private value sent whole, in a sentence,
inside a URL, percent-encoded, reformatted) and a deployment's own boilerplate (``deployment``).  Each case is a
private record read by the agent and a send whose body shares only that text with it.  A linked send scores
0.70 with the default weights, a clean one 0.08; the threshold is 0.5.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import guard
from guard.artifact import pipeline_components
from guard.policy import load_policy

CASES = json.loads((Path(__file__).parent.parent / "fixtures" / "precision" / "cases.json").read_text("utf-8"))
THRESHOLD = 0.5
POLICY: dict[str, Any] = {
    "name": "precision",
    "tools": {
        "read_file": {"kind": "private_source"},
        "send_email": {
            "kind": "sink",
            "effect": "irreversible",
            "payload_args": ["body", "subject"],
            "identifier_args": ["to"],
        },
    },
}


def _of(group: str) -> list[dict[str, str]]:
    return [c for c in CASES if c["group"] == group]


def _decide(private: str, body: str, policy: guard.Policy | None = None) -> guard.Decision:
    session = guard.Guard(policy or guard.Policy.model_validate(POLICY), threshold=THRESHOLD).session("precision")
    session.observe_user("Please handle my mail.")
    session.decide("read_file", {"file_path": "notes.txt"}, call_id="c1")
    session.observe_result("c1", private)
    return session.decide("send_email", {"to": "partner@outside.test", "body": body}, call_id="c2")


def test_the_fixture_has_the_cases_the_issue_asks_for() -> None:
    """At least 30 negatives of other shapes, one case per listed class, positives of each form (catches a
    fixture trimmed until it passes)."""
    assert len(_of("negative")) >= 30
    assert len(_of("listed")) == 13
    assert len(_of("positive")) >= 12


@pytest.mark.parametrize("case", _of("listed"), ids=lambda c: c["class"])
def test_listed_everyday_boilerplate_does_not_stop(case: dict[str, str]) -> None:
    """Each listed class (greeting, sign-off, signature, footer, header, identifier prefixes, an amount in words,
    a bare host, a first path segment, a city, a street, a product name) runs as a fresh send would (catches
    each rule of guard.evidence.boilerplate dropped: zones, identifiers, bare hosts, URL segments, weak spans)."""
    decision = _decide(case["private"], case["body"])
    fresh = _decide("Nothing in common with the message at all.", case["body"])
    assert decision.verdict is guard.Verdict.EXECUTE, case["class"]
    assert decision.score == fresh.score


@pytest.mark.parametrize("case", _of("negative"), ids=lambda c: c["class"])
def test_everyday_negatives_run(case: dict[str, str]) -> None:
    """Mailing-list footers, calendar invites, shipping and ticket templates, SKUs sharing a prefix, ... run
    (catches the cold-start table replaced by one that does not know everyday templates, or a rule dropped)."""
    assert _decide(case["private"], case["body"]).verdict is guard.Verdict.EXECUTE, case["class"]


@pytest.mark.parametrize("case", _of("positive"), ids=lambda c: c["class"])
def test_private_values_still_stop(case: dict[str, str]) -> None:
    """A private id, account, secret, e-mail, phone, IBAN, card or passage sent whole, in a sentence, in a URL's
    path, query or fragment, as a file name or host label, percent-encoded or reformatted stops (catches an
    identifier no longer matched whole, or matched only in free text; a zone or weak rule that eats a passage)."""
    assert _decide(case["private"], case["body"]).verdict is guard.Verdict.ESCALATE, case["class"]


def test_a_deployments_own_table_discounts_its_own_boilerplate(tmp_path: Path) -> None:
    """A sentence of the deployment's own policy, common in its recorded episodes, links under the cold-start
    table and runs under the table ``carbguard data background --episodes`` builds from those episodes
    (catches the episodes table ignored by the policy, or built without the calls' arguments)."""
    case = _of("deployment")[0]
    assert _decide(case["private"], case["body"]).verdict is guard.Verdict.ESCALATE
    episodes = tmp_path / "episodes.jsonl"
    guarded = guard.Guard(guard.Policy.model_validate(POLICY), threshold=float("inf"), mode="shadow", record=episodes)
    for n in range(12):
        session = guarded.session(f"e{n}")
        session.observe_user("Please handle my mail.")
        session.decide("read_file", {"file_path": f"doc{n}.txt"}, call_id="c1")
        session.observe_result("c1", f"Trip {n} for colleague {n * 7919}. {case['body']}")
        session.decide("send_email", {"to": "hr@outside.test", "body": f"Approved trip {n}. {case['body']}"}, "c2")
        session.close()
    table = tmp_path / "background.json"
    command = [sys.executable, "-m", "guard", "data", "background", "--episodes", str(episodes), "--out", str(table)]
    subprocess.run(command, check=True, capture_output=True)
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps({**POLICY, "graph": {"background": "background.json"}}), "utf-8")
    policy = load_policy(policy_file)
    assert _decide(case["private"], case["body"], policy).verdict is guard.Verdict.EXECUTE
    assert pipeline_components(policy)["graph"] != pipeline_components(guard.Policy.model_validate(POLICY))["graph"]


def test_a_policy_naming_a_missing_table_fails_at_load_naming_the_file(tmp_path: Path) -> None:
    """graph.background as a path is read when the policy is loaded (catches a table read only at the first
    decision, or a missing file silently meaning no table)."""
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps({**POLICY, "graph": {"background": "missing.json"}}), "utf-8")
    with pytest.raises(guard.PolicyError, match=r"missing\.json"):
        load_policy(policy_file)
    (tmp_path / "bad.json").write_text('{"format": "carbguard-background/1", "k": 8, "records": 0, "grams": {}}')
    policy_file.write_text(json.dumps({**POLICY, "graph": {"background": "bad.json"}}), "utf-8")
    with pytest.raises(guard.PolicyError, match=r"bad\.json"):
        load_policy(policy_file)


def test_the_same_table_by_path_or_by_true_has_one_fingerprint(tmp_path: Path) -> None:
    """The pipeline fingerprint holds the table's hash, not how it is named (catches the path itself hashed, so a
    moved table would refuse every artifact, or the table left out)."""
    from guard.evidence.specificity import BACKGROUND_PATH

    (tmp_path / "copy.json").write_bytes(BACKGROUND_PATH.read_bytes())
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps({**POLICY, "graph": {"background": "copy.json"}}), "utf-8")
    named = pipeline_components(load_policy(policy_file))["graph"]
    assert named == pipeline_components(guard.Policy.model_validate(POLICY))["graph"]
    off = {**POLICY, "graph": {"background": False}}
    assert named != pipeline_components(guard.Policy.model_validate(off))["graph"]


def _send(private: str, args: dict[str, str], tool: str = "send_email") -> guard.Decision:
    policy = guard.Policy.model_validate(
        {**POLICY, "tools": {**POLICY["tools"], "reserve_hotel": {"kind": "sink", "effect": "irreversible"}}}
    )
    session = guard.Guard(policy, threshold=THRESHOLD).session("precision")
    session.observe_user("Please handle my mail.")
    session.decide("read_file", {"file_path": "notes.txt"}, call_id="c1")
    session.observe_result("c1", private)
    return session.decide(tool, args, call_id="c2")


NOTE = "Consultation note\nPatient: Lukas Keller, born 26 Sep 1980\nDiagnosis: Coeliac disease\nReview: in 4 weeks"


def test_two_weak_values_of_one_record_link_across_a_calls_arguments() -> None:
    """A name in the subject and a diagnosis in the body, each weak alone, link together (catches weak runs read
    per argument only, or not at all: guard.evidence.weak_spans.reuse_bits); each alone still runs as fresh."""
    subject, body = "Lukas Keller - follow-up", "As discussed, the diagnosis is Coeliac disease."
    to = "partner@outside.test"
    both = _send(NOTE, {"to": to, "subject": subject, "body": body})
    assert both.verdict is guard.Verdict.ESCALATE
    for alone in ({"to": to, "subject": subject, "body": "See you soon."}, {"to": to, "body": body}):
        fresh = _send("Nothing in common with the message at all.", alone)
        assert _send(NOTE, alone).score == fresh.score, alone


def test_a_template_skeleton_is_not_two_weak_values() -> None:
    """Two tickets of one template share labels, an opening and a whole closing line, never values in a line
    (catches guard.evidence.weak_spans.in_line_value dropped, which links every pair of templated texts)."""
    private = "Ticket #48213 has been updated.\nStatus: Resolved\nRefund issued to Marta.\nPlease do not reply to this."
    body = "Ticket #48377 has been updated.\nStatus: Open\nThe printer is jammed.\nPlease do not reply to this."
    assert _send(private, {"to": "partner@outside.test", "body": body}).verdict is guard.Verdict.EXECUTE


def test_a_name_that_is_the_whole_argument_links() -> None:
    """A hotel name the call books, taken whole from a record, links; the same name inside a sentence is weak
    (catches the whole-argument rule of guard.evidence.weak_spans.strong_keys dropped)."""
    private = "Shortlist from the travel desk: Riverside View Hotel, three nights, breakfast included."
    booked = _send(private, {"hotel": "Riverside View Hotel"}, tool="reserve_hotel")
    assert booked.verdict is guard.Verdict.ESCALATE
    mentioned = {"to": "partner@outside.test", "body": "We stayed at the Riverside View Hotel last spring, lovely."}
    assert _send(private, mentioned).verdict is guard.Verdict.EXECUTE
