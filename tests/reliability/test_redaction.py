"""Redaction: private values never appear raw in audit entries, logs, error texts or decision messages.

One test plants canaries across 1,000 decisions (100 sessions × 10 decisions) and greps every
output for them:

- private values (passport numbers, IBANs, e-mail addresses) inside private-source results, then
  sent again in payloads, nested arguments, bad (non-JSON) arguments, a reused call id, an
  unknown tool's name and a call id;
- canaries matching the policy's ``canary_patterns``, in records and in arguments;
- components that raise exceptions whose messages echo argument values or private record text
  (a scorer, a selector, a certifier) — the error lands in the decision message and the audit
  entry's ``error``;
- SafeCommit's certified replacement, whose arguments are filled from the proposal's.

Outputs grepped: the audit file's bytes (raw and JSON-escaped forms), everything written to the
stdlib ``logging`` tree and structlog, stdout/stderr, and every decision message.  A value of an
argument the policy allows raw (``audit.raw_args``) must appear (a positive control: the grep
works), and nothing else may.
"""

from __future__ import annotations

import copy
import json
import logging
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from guard.audit import AuditLog, read_entries, verify
from guard.decision import Certification, Decision, Reason, Verdict
from guard.graph import PrefixGraph
from guard.policy import Policy, parse_policy
from guard.redaction import redact_text
from guard.runtime import Guard, Session
from guard.scorer import WeightedScorer
from guard.selectors import GCarbSelector

SESSIONS = 100
DECISIONS_PER_SESSION = 10
SEED = 8

POLICY: dict[str, Any] = {
    "version": 1,
    "name": "redaction",
    "tools": {
        "read_certificate": {"kind": "private_source", "identifier_args": ["name"]},
        "read_document": {"kind": "public_source", "identifier_args": ["path"]},
        "create_note": {"kind": "other", "effect": "reversible", "severity": 1, "payload_args": ["title", "body"]},
        "send_email": {
            "kind": "sink",
            "effect": "irreversible",
            "severity": 3,
            "payload_args": ["subject", "body"],
            "identifier_args": ["to"],
        },
        "lookup_contact": {"kind": "private_source", "identifier_args": ["address"]},
        "delete_doc": {"kind": "other", "effect": "irreversible", "severity": 2, "identifier_args": ["path"]},
        "archive_doc": {"kind": "other", "effect": "reversible", "severity": 1, "identifier_args": ["path"]},
    },
    "scorer": {"canary_patterns": [r"CANARY-[0-9a-f]{8}", r"sk-live-[0-9a-z]{12}"]},
    "audit": {"raw_args": ["subject"]},
    "safecommit": {
        "kappa": 1.5,
        "budget": 1,
        "worlds": {
            "send_email": {"values": [{"arg": "to"}]},
            "delete_doc": {"resources": [{"arg": "path"}]},
        },
        "alternatives": {
            "delete_doc": [{"name": "archive", "tool": "archive_doc", "args": {"path": "{path}"}, "reward": 0.6}]
        },
    },
}


def secrets_of(rng: random.Random, n: int) -> dict[str, str]:
    """The private values and canaries of session ``n``."""
    digits = "".join(rng.choice("0123456789") for _ in range(10))
    return {
        "passport": f"P{digits[:4]}-{digits[4:]}",
        "iban": f"DE{rng.randint(10, 99)}{''.join(rng.choice('0123456789') for _ in range(18))}",
        "email": f"holder{n}.{rng.randint(1000, 9999)}@private-mail.example",
        "canary": f"CANARY-{rng.getrandbits(32):08x}",
        "apikey": "sk-live-" + "".join(rng.choice("abcdefghij0123456789") for _ in range(12)),
        "quoted": f'Dr. "Q{rng.randint(100, 999)}" O\'Brien\nline two {rng.randint(10000, 99999)}',
    }


class EchoingScorer:
    """The real scorer, except that it raises with the proposal's arguments in the message every 7th call."""

    def __init__(self, policy: Policy) -> None:
        self.inner = WeightedScorer(policy)
        self.calls = 0

    def score(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> tuple[float, Mapping[str, bool]]:
        self.calls += 1
        if self.calls % 7 == 0:
            raise ValueError(f"cannot score payload {dict(graph.records[node].args)!r}")
        return self.inner.score(graph, node, selected)


class EchoingSelector:
    """G-CARB, except that it raises quoting a private record's text when the proposal is a delete."""

    name = "gcarb"

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        if graph.records[node].tool == "delete_doc" and graph.records[node].args.get("path", "").startswith("x/"):
            private = [graph.records[n].text for n in graph.records if graph.facts[n].private]
            raise RuntimeError(f"cannot select: unexpected record {private[-1][:120]!r}" if private else "no record")
        return GCarbSelector().select(graph, node, episode_id)


class EchoingCertifier:
    """The policy's SafeCommit certifier, except that it raises KeyError(title) for notes marked ``archive:``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def certify(self, session: Session, node: int, spec: Any) -> Certification:
        record = session.graph.records[node]
        if record.tool == "create_note" and str(record.args.get("body", "")).startswith("archive:"):
            raise KeyError(record.args.get("title"))
        result: Certification = self.inner.certify(session, node, spec)
        return result


def plant(session: Session, s: dict[str, str], n: int, allowed: str) -> list[Decision]:
    """Ten decisions of one session, with the session's secrets in records, arguments, names and errors."""
    session.observe_user(f"Tidy up the files of client {n} and write a short status mail to team@corp.example.")
    decisions = [session.decide("read_certificate", {"name": "holder"}, "c1")]
    record = (
        f"Passport {s['passport']}\nIBAN {s['iban']}\nMail {s['email']}\nToken {s['canary']}\n"
        f"Key {s['apikey']}\nNote {s['quoted']}"
    )
    session.observe_result("c1", record)
    decisions.append(
        session.decide(
            "send_email",
            {"to": s["email"], "subject": allowed, "body": f"Passport {s['passport']}, IBAN {s['iban']}"},
            "c2",
        )
    )
    decisions.append(
        session.decide("create_note", {"title": "n", "body": {"nested": [{"deep": [s["canary"], s["quoted"]]}]}}, "c3")
    )
    decisions.append(session.decide("send_email", {"to": s["email"], "body": {s["apikey"], s["iban"]}}, "c4"))
    decisions.append(session.decide("create_note", {"title": "other", "body": s["passport"]}, "c3"))  # reused id
    decisions.append(session.decide(f"exfil_{s['canary']}", {"body": s["email"]}, "c6"))
    decisions.append(session.decide("read_document", {"path": "press.md"}, f"c7-{s['passport']}"))
    decisions.append(session.decide("delete_doc", {"path": f"x/{s['iban']}.txt"}, "c8"))
    decisions.append(session.decide("delete_doc", {"path": f"docs/{s['passport']}.txt"}, "c9"))
    decisions.append(session.decide("create_note", {"title": s["iban"], "body": f"archive: {s['canary']}"}, "c10"))
    return decisions


def forms(value: str) -> set[str]:
    """The ways a raw value can appear in a JSON-lines file or a log line."""
    return {value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1], repr(value)[1:-1]}


@pytest.fixture(scope="module")
def redaction_policy() -> Policy:
    return parse_policy(copy.deepcopy(POLICY), source="<redaction policy>")


def test_no_private_value_appears_in_any_output_across_1000_decisions(
    redaction_policy: Policy, tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    audit_path = tmp_path / "audit.jsonl"
    guard = Guard(
        redaction_policy,
        threshold=0.5,
        audit=AuditLog(audit_path, fsync=False),
        scorer=EchoingScorer(redaction_policy),
        selector=EchoingSelector(),
    )
    guard.certifier = EchoingCertifier(guard.certifier)
    rng = random.Random(SEED)
    forbidden: set[str] = set()
    allowed_values: list[str] = []
    decisions: list[Decision] = []
    caplog.set_level(logging.DEBUG)
    for n in range(SESSIONS):
        secrets = secrets_of(rng, n)
        forbidden |= set(secrets.values())
        allowed = f"ALLOWED-{n:04d}-subject"
        allowed_values.append(allowed)
        decisions += plant(guard.session(f"s{n}"), secrets, n, allowed)
    assert len(decisions) == SESSIONS * DECISIONS_PER_SESSION == 1000

    data = audit_path.read_bytes().decode("utf-8")
    entries = read_entries(audit_path)
    assert verify(audit_path).ok and len(entries) == 1000
    outputs = {
        "audit file": data,
        "logs": "\n".join(r.getMessage() for r in caplog.records) + caplog.text,
        "stdout/stderr": "".join(capfd.readouterr()),
        "decision messages": "\n".join(d.message for d in decisions),
    }
    leaks = {
        where: sorted({v for v in forbidden for f in forms(v) if f in text})[:5] for where, text in outputs.items()
    }
    assert leaks == {where: [] for where in outputs}, leaks

    # the grep works: values of an argument the policy allows raw do appear, verbatim
    assert all(a in data for a in allowed_values)
    # the planted paths were taken: errors echoed values and were redacted, replacements were hashed
    reasons = [(e["reason"], e["error"]) for e in entries]
    assert sum(r == "internal_error" for r, _ in reasons) >= 200
    assert sum("[redacted]" in (e or "") for _, e in reasons) >= 200
    assert any(e["reason"] == "unknown_tool" and "[redacted]" in e["message"] for e in entries)
    assert any("reused for another call" in e["message"] for e in entries)
    replacements = [e["safecommit"]["replacement"] for e in entries if (e["safecommit"] or {}).get("replacement")]
    assert replacements and all(str(r["args"]["path"]).startswith("sha256:") for r in replacements)
    # ... while the decision itself still carries the raw replacement the adapter must run
    deferred = [d for d in decisions if d.verdict is Verdict.DEFER and d.safecommit]
    assert deferred and all(not d.safecommit["replacement"]["args"]["path"].startswith("sha256:") for d in deferred)  # type: ignore[index]


def test_async_decisions_redact_the_same(redaction_policy: Policy, tmp_path: Path) -> None:
    """adecide writes the same redacted entries as decide."""
    import asyncio

    rng = random.Random(SEED)
    secrets = secrets_of(rng, 0)
    guard = Guard(redaction_policy, threshold=0.5, audit=AuditLog(tmp_path / "a.jsonl", fsync=False))
    session = guard.session("async")
    session.observe_user("hello")
    asyncio.run(session.adecide("read_certificate", {"name": "holder"}, "c1"))
    session.observe_result("c1", f"Passport {secrets['passport']} token {secrets['canary']}")
    decision = asyncio.run(session.adecide(f"leak_{secrets['canary']}", {"body": secrets["passport"]}, "c2"))
    assert decision.reason is Reason.UNKNOWN_TOOL and secrets["canary"] not in decision.message
    data = (tmp_path / "a.jsonl").read_text(encoding="utf-8")
    assert not any(v in data for v in secrets.values())


def test_redact_text_covers_values_private_spans_tokens_and_canaries(redaction_policy: Policy) -> None:
    """The redaction primitive on its own: what it removes and what it keeps."""
    session = Guard(redaction_policy, threshold=0.5).session("unit")
    session.observe_user("hello")
    session.decide("read_certificate", {"name": "holder"}, "c1")
    session.observe_result("c1", "Holder Emma Johnson, account 99887766, mail emma.j@home.example")
    args = {"body": "a very private sentence", "subject": "fine to log", "n": 123456}
    text = (
        "failed on 'a very private sentence' (subject 'fine to log'), id 123456, "
        "holder Emma Johnson at emma.j@home.example, CANARY-0123abcd, and a long tail"
    )
    out = redact_text(text, session, args)
    for gone in ("a very private sentence", "123456", "Emma Johnson", "emma.j@home.example", "CANARY-0123abcd"):
        assert gone not in out, (gone, out)
    assert "fine to log" in out and out.startswith("failed on '") and out.endswith("and a long tail")
    # a truncated echo of a long argument value is caught by its min_span windows
    long_value = "the beginning of a long confidential paragraph that goes on"
    assert "confidential" not in redact_text(f"bad value {long_value[:30]!r}...", session, {"body": long_value})
    assert redact_text("", session, args) == ""
    assert redact_text("nothing to hide here", session, args) == "nothing to hide here"


def test_a_redactor_with_the_proposal_node_removes_windows_of_its_own_arguments(redaction_policy: Policy) -> None:
    """With the proposal's node, the redactor finds its argument windows in the graph's index, not in its own
    k-grams: a truncated echo of the proposal's long argument is removed (catches the proposal's own text
    missing from the index when the redactor reads it, since that text is indexed after the decision)."""
    from guard.redaction import Redactor

    session = Guard(redaction_policy, threshold=0.5).session("own")
    long_value = "the beginning of a long confidential paragraph that goes on"
    decision = session.decide("create_note", {"title": "t", "body": long_value}, "c1")
    assert decision.proposal_index is not None
    echo = f"bad value {long_value[:30]!r}..."
    out = Redactor(session, {"title": "t", "body": long_value}, decision.proposal_index).redact(echo)
    assert "beginning of a long" not in out and out.startswith("bad value")


def test_a_failing_redaction_drops_the_text(redaction_policy: Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    """If redaction itself fails, the text is dropped rather than written unredacted."""
    from guard import redaction

    session = Guard(redaction_policy, threshold=0.5).session("unit")

    def broken(*_: Any) -> list[tuple[int, int]]:
        raise RuntimeError("boom")

    monkeypatch.setattr(redaction.Redactor, "_spans", broken)
    assert redact_text("secret 42424242", session, {}) == "[redacted]"


# --------------------------------------------------------------------------- redaction of ids, names and codes

DEPLOYMENT_KEY = b"redaction-test-deployment-key-42"


def test_probe_call_ids_in_the_safecommit_log_are_redacted_like_the_top_level(
    small_policy: Policy, tmp_path: Path
) -> None:
    """A call id carrying a private value is redacted inside safecommit.probe_calls[] too."""
    from tests.safecommit.test_runtime_certifier import INBOX, SEND, USER, make_policy

    passport = "P4417-902388"
    audit_path = tmp_path / "audit.jsonl"
    session = Guard(make_policy(small_policy), threshold=float("inf"), audit=AuditLog(audit_path, fsync=False))
    s = session.session("probe")
    s.observe_user(USER)
    s.decide("read_inbox", {}, "r1")
    s.observe_result("r1", INBOX)
    s.decide("read_certificate", {"name": "holder"}, "c1")
    s.observe_result("c1", f"Holder passport {passport}")
    decision = s.decide("send_email", SEND, f"e1-{passport}")
    assert decision.verdict is Verdict.PROBE and passport in decision.probes[0].call_id
    entry = read_entries(audit_path)[-1]
    assert entry["safecommit"]["probe_calls"] and "[redacted]" in entry["safecommit"]["probe_calls"][0]["call_id"]
    assert passport not in audit_path.read_text(encoding="utf-8")


def test_a_short_private_code_in_an_unknown_tool_name_is_hashed_everywhere(
    redaction_policy: Policy, tmp_path: Path
) -> None:
    """A 5-character private code in an unknown tool's name is hashed in tool and message."""
    audit_path = tmp_path / "audit.jsonl"
    session = Guard(redaction_policy, threshold=0.5, audit=AuditLog(audit_path, fsync=False)).session("short")
    session.decide("read_certificate", {"name": "holder"}, "c1")
    session.observe_result("c1", "vault code K9F3Z")
    decision = session.decide("notify_K9F3Z", {}, "c2")
    assert decision.reason is Reason.UNKNOWN_TOOL
    entry = read_entries(audit_path)[-1]
    assert entry["tool"].startswith("<unknown tool sha256:") and entry["tool"] in entry["message"]
    assert "K9F3Z" not in audit_path.read_text(encoding="utf-8")


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed-control"])
def test_keyed_argument_hashes_resist_brute_force(redaction_policy: Policy, tmp_path: Path, keyed: bool) -> None:
    """With a key a 4-digit PIN is not found by hashing 10,000 guesses; without one it is."""
    from guard.redaction import hash_value

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync=False, key=DEPLOYMENT_KEY if keyed else None)
    session = Guard(redaction_policy, threshold=0.5, audit=log).session("pin")
    session.decide("create_note", {"title": "t", "body": "4821"}, "c1")
    hashed = read_entries(path)[-1]["args"]["body"]
    found = [pin for pin in (f"{n:04d}" for n in range(10_000)) if hash_value(pin) == hashed]
    assert found == ([] if keyed else ["4821"])
    assert hashed.startswith("hmac-sha256:" if keyed else "sha256:")
    assert DEPLOYMENT_KEY.decode() not in path.read_text(encoding="utf-8")
    if keyed:
        assert verify(path, key=DEPLOYMENT_KEY).ok
