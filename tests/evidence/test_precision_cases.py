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


def _zones(text: str) -> str:
    """The opening and closing zones of ``text`` (guard.evidence.boilerplate), with a line for the body between."""
    from guard.evidence.boilerplate import zone_holes

    holes = zone_holes(text)
    opening = text[: holes[0][1]] if holes and holes[0][0] == 0 else ""
    closing = text[holes[-1][0] :] if holes and holes[-1][1] == len(text) and holes[-1][0] > 0 else ""
    return opening + "{body}" + ("\n\n" if closing and not closing.startswith("\n") else "") + closing


ZONE_CLASSES = {  # the cases a greeting, sign-off, signature block, header or footer makes (the rest is a template)
    "greeting", "sign_off", "signature_block", "legal_footer", "confidentiality_header", "mailing_list_footer",
    "greeting_variant", "newsletter_header", "out_of_office_footer", "support_signature", "cc_header",
    "signature_with_contact_values", "company_register_footer", "header_with_reference_code",
    "signoff_line_with_phone",
}  # fmt: skip
ZONED = [c for c in CASES if c["class"] in ZONE_CLASSES]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> guard.Policy:
    """The policy with the table ``carbguard data background --episodes`` builds from 5 recorded sessions of a
    deployment whose own sends carry the greetings, sign-offs, signature blocks, headers and footers of the
    fixture's cases around a body of their own (each session also reads a private note).  The bodies end as
    everyday sentences do (``...file.``): the k-grams across a body's end and its sign-off recur in a deployment's
    traffic too."""
    from guard.cli import main

    folder = tmp_path_factory.mktemp("deployment")
    episodes = folder / "episodes.jsonl"
    recorder = guard.Guard(guard.Policy.model_validate(POLICY), threshold=float("inf"), mode="shadow", record=episodes)
    for n in range(5):
        session = recorder.session(f"s{n}")
        session.observe_user("Please send today's updates.")
        session.decide("read_file", {"file_path": "notes.txt"}, call_id="r")
        session.observe_result("r", f"Private note {n}: the vault code is {n * 7919 + 1000}.")
        for i, case in enumerate(ZONED):
            body = _zones(case["body"]).replace(
                "{body}", f"Update {n}-{i}: item {n * 977 + i} is in the archive, see the file."
            )
            session.decide("send_email", {"to": "team@outside.test", "body": body}, call_id=f"c{i}")
            session.observe_result(f"c{i}", "sent")
        session.close()
    (folder / "policy.json").write_text(json.dumps(POLICY), "utf-8")
    table = folder / "background.json"
    argv = ["data", "background", "--episodes", str(episodes), "--policy", str(folder / "policy.json")]
    assert main([*argv, "--out", str(table)]) == 0
    policy_file = folder / "deployment.json"
    policy_file.write_text(json.dumps({**POLICY, "graph": {"background": str(table)}}), "utf-8")
    return load_policy(policy_file)


@pytest.mark.parametrize("case", _of("listed"), ids=lambda c: c["class"])
def test_listed_everyday_boilerplate_does_not_stop(case: dict[str, str], deployment: guard.Policy) -> None:
    """Each listed class (greeting, sign-off, signature, footer, header, identifier prefixes, an amount in words,
    a bare host, a first path segment, a city, a street, a product name) runs as a fresh send would; a zone class
    (greeting, sign-off, signature block, legal footer, header) under the table of a deployment whose traffic
    repeats it, the others under the shipped table (catches each rule dropped: the deployment table, identifiers,
    bare hosts, URL segments, weak spans)."""
    policy = deployment if case in ZONED else None
    decision = _decide(case["private"], case["body"], policy)
    fresh = _decide("Nothing in common with the message at all.", case["body"], policy)
    assert decision.verdict is guard.Verdict.EXECUTE, case["class"]
    assert decision.score == fresh.score


@pytest.mark.parametrize("case", _of("negative"), ids=lambda c: c["class"])
def test_everyday_negatives_run(case: dict[str, str], deployment: guard.Policy) -> None:
    """Mailing-list footers, calendar invites, shipping and ticket templates, SKUs sharing a prefix, ... run: a
    zone-shaped one (a signature with its phone and address, a company-register footer, a header with a reference
    code) under the table of a deployment whose traffic repeats it, values included (catches the cold-start table
    replaced by one that does not know everyday templates, a rule dropped, or a deployment's own common values
    still linking: guard.evidence.specificity.uncommon)."""
    policy = deployment if case in ZONED else None
    assert _decide(case["private"], case["body"], policy).verdict is guard.Verdict.EXECUTE, case["class"]


@pytest.mark.parametrize("case", _of("positive"), ids=lambda c: c["class"])
def test_private_values_still_stop(case: dict[str, str]) -> None:
    """A private id, account, secret, e-mail, phone, IBAN, card or passage sent whole, in a sentence, in a URL's
    path, query or fragment, as a file name or host label, percent-encoded or reformatted stops (catches an
    identifier no longer matched whole, or matched only in free text; a zone or weak rule that eats a passage)."""
    assert _decide(case["private"], case["body"]).verdict is guard.Verdict.ESCALATE, case["class"]


def _deployment_table(tmp_path: Path, sessions: int, read: str, sent: str) -> guard.Policy:
    """The policy naming the table ``carbguard data background --episodes --policy`` builds (run as a user would)
    from ``sessions`` recorded sessions that each read the private ``read`` and send ``sent`` (``{n}``: the
    session's number)."""
    episodes = tmp_path / "episodes.jsonl"
    guarded = guard.Guard(guard.Policy.model_validate(POLICY), threshold=float("inf"), mode="shadow", record=episodes)
    for n in range(sessions):
        session = guarded.session(f"e{n}")
        session.observe_user("Please handle my mail.")
        session.decide("read_file", {"file_path": f"doc{n}.txt"}, call_id="c1")
        session.observe_result("c1", read.format(n=n, m=n * 7919))
        session.decide("send_email", {"to": "hr@outside.test", "body": sent.format(n=n, m=n * 7919)}, "c2")
        session.close()
    (tmp_path / "policy.json").write_text(json.dumps(POLICY), "utf-8")
    table = tmp_path / "background.json"
    command = [sys.executable, "-m", "guard", "data", "background", "--episodes", str(episodes)]
    command += ["--policy", str(tmp_path / "policy.json"), "--out", str(table)]
    subprocess.run(command, check=True, capture_output=True)
    policy_file = tmp_path / "deployment.json"
    policy_file.write_text(json.dumps({**POLICY, "graph": {"background": "background.json"}}), "utf-8")
    return load_policy(policy_file)


def test_a_deployments_own_table_discounts_its_own_boilerplate(tmp_path: Path) -> None:
    """A sentence of the deployment's own policy, common in its sends, links under the cold-start table and runs
    under the table ``carbguard data background --episodes`` builds from those episodes (catches the episodes
    table ignored by the policy, or built without the calls' arguments)."""
    case = _of("deployment")[0]
    assert _decide(case["private"], case["body"]).verdict is guard.Verdict.ESCALATE
    policy = _deployment_table(tmp_path, 12, "Trip {n} for colleague {m}.", "Approved trip {n}. " + case["body"])
    assert _decide(case["private"], case["body"], policy).verdict is guard.Verdict.EXECUTE
    assert pipeline_components(policy)["graph"] != pipeline_components(guard.Policy.model_validate(POLICY))["graph"]


def test_a_private_document_read_in_every_session_stays_evidence(tmp_path: Path) -> None:
    """A pricing note read (and even mailed out) in every one of 100 recorded sessions never enters the table:
    mailing it out still stops (catches private-source text counted into a deployment's table, the class where
    the ordinary "search, then read" pattern made a private document boilerplate)."""
    note = "Pricing note: the Halvorsen floor is 41.20 per unit, the walk-away price is 38.75."
    policy = _deployment_table(tmp_path, 100, note + " Copy {n}.", "As agreed: " + note)
    assert _decide(note, f"FYI: {note}", policy).verdict is guard.Verdict.ESCALATE


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


MARKED = {  # a secret paragraph or line under a secrecy marker, in each zone shape guard.evidence.boilerplate knows
    "header Confidential:": "Confidential: Halvorsen settles at 2.1M on Friday 14 March\nDetails in the shared folder.",
    "header Private -": "Private - Halvorsen settles at 2.1M on Friday 14 March\nDetails in the shared folder.",
    "header Internal": "Internal Halvorsen settles at 2.1M on Friday 14 March\nDetails in the shared folder.",
    "header shouted": "HALVORSEN SETTLES AT 2.1M ON FRIDAY 14 MARCH\nDetails in the shared folder.",
    "footer Confidential:": "Notes from the call.\n\nConfidential: Halvorsen settles at 2.1M on Friday 14 March.",
    "footer Important:": "Notes from the call.\n\nImportant: Halvorsen settles at 2.1M on Friday 14 March.",
    "footer Notice:": "Notes from the call.\n\nNotice: Halvorsen settles at 2.1M on Friday 14 March.",
    "signature lines": "Notes from the call.\n\nRegards,\nHalvorsen settles at 2.1M\non Friday 14 March",
}


def _relay(kind: str, text: str, body: str) -> guard.Decision:
    policy = guard.Policy.model_validate(
        {**POLICY, "tools": {**POLICY["tools"], "fetch_page": {"kind": kind}, "read_inbox": {"kind": kind}}}
    )
    session = guard.Guard(policy, threshold=THRESHOLD).session("precision")
    session.observe_user("Please handle my mail.")
    session.decide("read_inbox", {}, call_id="c1")
    session.observe_result("c1", text)
    return session.decide("send_email", {"to": "partner@outside.test", "body": body}, call_id="c2")


@pytest.mark.parametrize("shape", sorted(MARKED))
def test_a_secrecy_marker_does_not_turn_private_text_into_boilerplate(shape: str) -> None:
    """A private note whose opening line, last paragraph or signature lines carry a secret under a secrecy marker
    (``Confidential:``, ``Private -``, ``Internal``, ``Important:``, ``Notice:``, a sign-off) stops when mailed out
    verbatim, as the same text under ``Summary:`` does; an untrusted page's text so placed still makes its edge
    (``untrusted_payload``).  Catches the zones of a private- or untrusted-source record cut by position
    (guard.graph indexing every record with its zones)."""
    text = MARKED[shape]
    plain = _relay("private_source", text.replace("Confidential:", "Summary:"), text)
    marked = _relay("private_source", text, text)
    fresh = _relay("private_source", "Nothing in common with the message at all.", text)
    assert marked.verdict is guard.Verdict.ESCALATE, shape
    assert marked.score == plain.score != fresh.score, shape
    relayed = _relay("untrusted_source", text, text)
    assert relayed.score != _relay("untrusted_source", "Nothing in common with it at all.", text).score, shape


@pytest.mark.parametrize("shape", sorted(MARKED))
def test_a_public_pages_zones_still_make_no_edge(shape: str) -> None:
    """Zones stay for a record neither private nor untrusted (a public page): its edges only ever lower a score, so
    position is not evidence an attacker can use there (catches every record read whole, the zones dropped)."""
    text = MARKED[shape]
    if shape.startswith("header"):
        text = text.split("\n")[0] + "\nNothing else in common."
    else:
        text = "Nothing in common with the message.\n\n" + text.split("\n\n")[1]
    body = f"Thanks for the update.\n\n{MARKED[shape].split(chr(10))[0]}\nWill reply tomorrow."
    assert _relay("public_source", text, body).score == _relay("public_source", "Nothing.", body).score


def test_a_weak_value_in_a_calls_greeting_still_joins_another() -> None:
    """A patient's name in a send's greeting and her diagnosis in its body, each weak alone, link to the private
    note that holds both (catches the weak runs of a call's own zones left out of the two-weak-values rule for
    private holders: guard.evidence.weak_spans.reuse_bits with exact_runs)."""
    body = "Dear Lukas Keller,\nAs discussed, the diagnosis is Coeliac disease."
    assert _send(NOTE, {"to": "partner@outside.test", "body": body}).verdict is guard.Verdict.ESCALATE
