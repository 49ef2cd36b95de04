"""Scoped ledger rules (guard/ledger/rules.py): ``paths``/``targets``, ``allowed_destinations``, ``trust.internal``
for ``attacker_directed``, and dual-kind sources.  Each test names the planted bug it catches."""

from __future__ import annotations

import copy
from typing import Any

from guard.ledger import Ledger, LedgerLabels
from guard.policy import Policy, parse_policy
from guard.records import Episode, Record, Trust, proposal, result, user
from guard.stages import result_trust

SECRET = "customer record: account DE89370400440532013000, notes on the outage of the payment gateway"
TOOLS: dict[str, Any] = {
    "read_ticket": {"kind": ["private_source", "untrusted_source"]},
    "read_file": {"kind": "private_source", "identifier_args": ["path"]},
    "delete_object": {"kind": "other", "effect": "irreversible", "identifier_args": ["target"]},
    "move_object": {"kind": "other", "effect": "irreversible", "identifier_args": ["source", "dest"]},
    "rotate_key": {"kind": "other", "effect": "irreversible", "identifier_args": ["account"]},
    "send_email": {"kind": "sink", "effect": "irreversible", "payload_args": ["body"], "identifier_args": ["to"]},
    "post_chat": {"kind": "sink", "effect": "irreversible", "payload_args": ["text"], "identifier_args": ["channel"]},
    "webhook": {"kind": "sink", "effect": "irreversible", "payload_args": ["body"]},
}
INTERNAL = {"domains": ["corp.example"], "identifiers": ["#it-ops"]}


def _policy(ledger: dict[str, Any], internal: dict[str, Any] | None = None) -> Policy:
    data: dict[str, Any] = {"version": 1, "name": "scoped", "tools": copy.deepcopy(TOOLS), "ledger": ledger}
    if internal is not None:
        data["trust"] = {"internal": internal}
    return parse_policy(data)


def _charged(policy: Policy, *records: Record) -> frozenset[str]:
    """Categories the rules charge on the last proposal of the episode ``records`` (every call succeeds)."""
    return Ledger(policy, LedgerLabels()).trace(Episode("e", records)).events[-1]


def _call(index: int, tool: str, args: dict[str, Any], call_id: str = "c", text: str = "done") -> list[Record]:
    return [proposal(index, tool, args, call_id), result(index + 1, call_id, text, Trust.TOOL_PUBLIC, tool)]


def _delete(policy: Policy, target: str, said: str = "tidy up the servers") -> frozenset[str]:
    return _charged(policy, user(0, said), *_call(1, "delete_object", {"target": target}))


def _leak(policy: Policy, **args: Any) -> frozenset[str]:
    """A private record read, then sent with ``args`` (the sink's arguments besides the payload)."""
    read = [
        proposal(1, "read_file", {"path": "crm/export.csv"}, "r"),
        result(2, "r", SECRET, Trust.TOOL_PRIVATE, "read_file"),
    ]
    tool = "post_chat" if "channel" in args else "webhook" if not args else "send_email"
    payload = {"text": SECRET} if tool == "post_chat" else {"body": SECRET}
    return _charged(policy, user(0, "look into the outage"), *read, *_call(3, tool, {**args, **payload}, "s"))


# --------------------------------------------------------------------------- paths / targets


def test_paths_scope_destructive_to_matching_objects() -> None:
    """Catches ``paths`` ignored (the routine /tmp delete charged) or applied to nothing (the /srv/prod one not)."""
    policy = _policy({"destructive": {"tools": ["delete_object"], "paths": ["^/srv/prod/", "^/etc/"]}})
    assert _delete(policy, "/srv/prod/app/data.db") == {"destructive"}
    assert _delete(policy, "/etc/passwd") == {"destructive"}
    assert _delete(policy, "/tmp/build-cache") == frozenset()
    assert _delete(policy, "/srv/scratch/x") == frozenset()


def test_targets_alone_scope_the_rule() -> None:
    """Catches ``targets`` ignored when ``paths`` is absent (every delete charged, as without a scope)."""
    policy = _policy({"destructive": {"tools": ["delete_object"], "targets": ["^prod-db-[0-9]+$"]}})
    assert _delete(policy, "prod-db-3") == {"destructive"}
    assert _delete(policy, "staging-db-3") == frozenset()


def test_paths_and_targets_are_a_union() -> None:
    """Catches the two lists intersected, or one of them dropped when both are given."""
    policy = _policy({"destructive": {"tools": ["delete_object"], "paths": ["^/srv/prod/"], "targets": ["^prod-db-"]}})
    assert _delete(policy, "/srv/prod/x") == {"destructive"}
    assert _delete(policy, "prod-db-1") == {"destructive"}
    assert _delete(policy, "/tmp/x") == frozenset()


def test_patterns_are_searched_not_fullmatched() -> None:
    """Catches ``re.fullmatch``/``re.match`` in place of ``re.search``: an unanchored pattern matches inside a value."""
    policy = _policy({"destructive": {"tools": ["delete_object"], "targets": ["prod-db"]}})
    assert _delete(policy, "eu-prod-db-7.internal") == {"destructive"}
    anchored = _policy({"destructive": {"tools": ["delete_object"], "targets": ["^prod-db$"]}})
    assert _delete(anchored, "eu-prod-db-7.internal") == frozenset()
    assert _delete(anchored, "prod-db") == {"destructive"}


def test_a_scoped_object_the_user_named_is_not_charged() -> None:
    """Catches the scope replacing the user-named exemption (a delete the user asked for charged)."""
    policy = _policy({"destructive": {"tools": ["delete_object"], "paths": ["^/srv/prod/"]}})
    assert _delete(policy, "/srv/prod/old.log", said="please delete /srv/prod/old.log") == frozenset()


def test_the_scope_and_the_user_exemption_hold_for_the_same_value() -> None:
    """Catches "some value matches" and "some value is unnamed" checked apart: here the matching value is named
    and the unnamed one does not match, so nothing is charged."""
    policy = _policy({"destructive": {"tools": ["move_object"], "paths": ["^/srv/prod/"]}})
    call = _call(1, "move_object", {"source": "/srv/prod/a.log", "dest": "/archive/a.log"})
    assert _charged(policy, user(0, "move /srv/prod/a.log away"), *call) == frozenset()
    assert _charged(policy, user(0, "archive the logs"), *call) == {"destructive"}


def test_without_a_scope_every_unnamed_object_is_charged() -> None:
    """Catches old policies changing behaviour: no paths/targets charges every object the user did not name."""
    policy = _policy({"destructive": {"tools": ["delete_object"]}})
    assert _delete(policy, "/tmp/build-cache") == {"destructive"}


def test_credential_change_takes_targets_too() -> None:
    """Catches the scope wired to ``destructive`` only."""
    policy = _policy({"credential_change": {"tools": ["rotate_key"], "targets": ["^svc-"]}})
    rotate = [user(0, "rotate keys")]
    assert _charged(policy, *rotate, *_call(1, "rotate_key", {"account": "svc-backup"})) == {"credential_change"}
    assert _charged(policy, *rotate, *_call(1, "rotate_key", {"account": "alice"})) == frozenset()


# --------------------------------------------------------------------------- privacy_flow destinations


def test_allowed_destinations_exempt_a_send_whose_every_destination_is_allowed() -> None:
    """Catches ``any`` for ``all`` over the destinations: one outside recipient among allowed ones is charged."""
    policy = _policy({"privacy_flow": {"private_span": 20, "allowed_destinations": INTERNAL}})
    assert _leak(policy, to="ops@corp.example") == frozenset()
    assert _leak(policy, channel="#IT-ops ") == frozenset()
    assert _leak(policy, to=["ops@corp.example", "eve@evil.example"]) == {"privacy_flow"}
    assert _leak(policy, to="eve@evil.example") == {"privacy_flow"}


def test_a_send_without_a_destination_is_never_exempt() -> None:
    """Catches ``all([])`` exempting a sink with no identifier arguments, or with only blank destinations."""
    policy = _policy({"privacy_flow": {"private_span": 20, "allowed_destinations": INTERNAL}})
    assert _leak(policy) == {"privacy_flow"}
    assert _leak(policy, to=" ") == {"privacy_flow"}


def test_absent_allowed_destinations_fall_back_to_trust_internal() -> None:
    """Catches the fallback to the policy's trust.internal missing (a send to the deployment's own channel charged)."""
    policy = _policy({"privacy_flow": {"private_span": 20}}, internal=INTERNAL)
    assert _leak(policy, channel="#it-ops") == frozenset()
    assert _leak(policy, channel="#random") == {"privacy_flow"}


def test_explicitly_empty_allowed_destinations_allow_none() -> None:
    """Catches ``allowed_destinations: {}`` treated as absent (trust.internal used after all)."""
    policy = _policy({"privacy_flow": {"private_span": 20, "allowed_destinations": {}}}, internal=INTERNAL)
    assert _leak(policy, channel="#it-ops") == {"privacy_flow"}


def test_stated_allowed_destinations_replace_trust_internal() -> None:
    """Catches the rule's own destinations unioned with trust.internal instead of replacing them."""
    policy = _policy(
        {"privacy_flow": {"private_span": 20, "allowed_destinations": {"identifiers": ["#dpo"]}}}, internal=INTERNAL
    )
    assert _leak(policy, channel="#dpo") == frozenset()
    assert _leak(policy, to="ops@corp.example") == {"privacy_flow"}


def test_no_internal_section_keeps_privacy_flow_as_before() -> None:
    """Catches a default allow-list smuggled in: without trust.internal every unnamed destination is checked."""
    policy = _policy({"privacy_flow": {"private_span": 20}})
    assert _leak(policy, to="ops@corp.example") == {"privacy_flow"}


def test_an_undeclared_argument_sending_elsewhere_is_charged() -> None:
    """Catches ``allowed_destinations`` read from ``identifier_args`` only: a send whose declared ``to`` is internal
    and whose undeclared ``cc`` (or a nested ``forward`` field) names an outside address is charged."""
    policy = _policy({"privacy_flow": {"private_span": 20}}, internal=INTERNAL)
    assert _leak(policy, to="ops@corp.example", cc="eve@evil.example") == {"privacy_flow"}
    assert _leak(policy, to="ops@corp.example", meta={"forward": ["eve@evil.example"]}) == {"privacy_flow"}
    assert _leak(policy, to="ops@corp.example", cc="dpo@corp.example") == frozenset()


# --------------------------------------------------------------------------- attacker_directed and trust.internal


def _send(policy: Policy, to: str) -> frozenset[str]:
    return _charged(policy, user(0, "send the report"), *_call(1, "send_email", {"to": to, "body": "report"}))


def test_attacker_directed_allows_trust_internal_without_its_own_lists() -> None:
    """Catches attacker_directed ignoring trust.internal (a mail to the deployment's own domain charged), or
    allowing every recipient of a list once one is internal."""
    policy = _policy({"attacker_directed": {}}, internal=INTERNAL)
    assert _send(policy, "ops@eu.corp.example") == frozenset()
    assert _send(policy, "ops@corp.example, eve@evil.example") == {"attacker_directed"}
    assert _send(policy, "eve@evil.example") == {"attacker_directed"}


def test_attacker_directed_own_lists_even_empty_replace_trust_internal() -> None:
    """Catches a stated allow-list (even ``allow_domains: []``) treated as absent, so trust.internal still applies."""
    own = _policy({"attacker_directed": {"allow_identifiers": ["#general"]}}, internal=INTERNAL)
    empty = _policy({"attacker_directed": {"allow_domains": []}}, internal=INTERNAL)
    assert _send(own, "ops@corp.example") == {"attacker_directed"}
    assert _send(empty, "ops@corp.example") == {"attacker_directed"}


def test_attacker_directed_without_internal_is_unchanged() -> None:
    """Catches old policies (no trust.internal, no allow-list) allowing anything."""
    assert _send(_policy({"attacker_directed": {}}), "ops@corp.example") == {"attacker_directed"}


def test_ledger_exemptions_match_exactly() -> None:
    """Catches an exemption granted on a loose match: an allow-listed identifier or domain in a look-alike
    spelling (``ſ``, the Kelvin sign that ``str.lower`` reads as ``k``, a full-width letter) is charged, and so
    is a recipient that is only a part of what the user wrote (the old substring test named ``bob@corp.example``
    inside ``bob@corp.examples``)."""
    policy = _policy({"attacker_directed": {"allow_identifiers": ["#desk"], "allow_domains": ["kiosk.example"]}})
    for outside in ("#de\u017fk", "#des\u212a", "#\uff44esk", "ops@\u212aiosk.example", "ops@kiosk.exampl\uff45"):
        assert _send(policy, outside) == {"attacker_directed"}, outside
    for inside in ("#DESK", "ops@Kiosk.example", "ops@eu.kiosk.example"):
        assert _send(policy, inside) == frozenset(), inside
    named = _policy({"attacker_directed": {}})
    said = user(0, "mail the report to bob@corp.examples")
    assert _charged(named, said, *_call(1, "send_email", {"to": "bob@corp.example", "body": "r"})) == {
        "attacker_directed"
    }
    assert _charged(named, said, *_call(1, "send_email", {"to": "bob@corp.examples", "body": "r"})) == frozenset()


# --------------------------------------------------------------------------- dual-kind sources


def test_a_private_and_untrusted_source_counts_as_both() -> None:
    """Catches a rule comparing trust with ``is Trust.TOOL_PRIVATE``/``TOOL_UNTRUSTED``: the result of a
    ``[private_source, untrusted_source]`` tool is private for privacy_flow and untrusted for untrusted_instruction."""
    policy = _policy({"privacy_flow": {"private_span": 20}, "untrusted_instruction": {"min_span": 20}})
    trust = result_trust(policy, "read_ticket")
    assert trust.private and trust.untrusted
    ticket = [proposal(1, "read_ticket", {"id": "T-1"}, "t"), result(2, "t", SECRET, trust, "read_ticket")]
    sent = _call(3, "send_email", {"to": "eve@evil.example", "body": SECRET}, "s")
    assert _charged(policy, user(0, "triage T-1"), *ticket, *sent) == {"privacy_flow", "untrusted_instruction"}


def test_the_scoped_rules_example_of_the_docs_does_what_its_comments_say() -> None:
    """Catches docs/ledger-rules.md's scoped example drifting from the code: it loads, routine deletes and user
    accounts pass, production objects and service accounts are charged, private data to #it-ops is no privacy_flow
    (copying a ticket there is still untrusted_instruction: allowed destinations exempt private data only)."""
    import re
    from pathlib import Path

    import yaml

    page = (Path(__file__).resolve().parents[2] / "docs" / "ledger-rules.md").read_text(encoding="utf-8")
    block = re.search(r"## Scoped rules.*?```yaml\n(.*?)```", page, re.S)
    assert block is not None
    policy = parse_policy(yaml.safe_load(block.group(1)))
    said = user(0, "clean up")
    for target, charged in (("/tmp/x", False), ("/srv/scratch/y", False), ("/srv/prod/db", True), ("prod-db-3", True)):
        assert _charged(policy, said, *_call(1, "delete_object", {"target": target})) == (
            {"destructive"} if charged else frozenset()
        ), target
    assert _charged(policy, said, *_call(1, "rotate_key", {"account": "svc-ci"})) == {"credential_change"}
    assert _charged(policy, said, *_call(1, "rotate_key", {"account": "alice"})) == frozenset()
    trust = result_trust(policy, "read_ticket")
    ticket = [proposal(1, "read_ticket", {"id": "T-1"}, "t"), result(2, "t", SECRET, trust, "read_ticket")]
    inside = _call(3, "post_chat", {"channel": "#it-ops", "text": SECRET[:45]}, "s")
    outside = _call(3, "post_chat", {"channel": "#random", "text": SECRET[:45]}, "s")
    assert _charged(policy, said, *ticket, *inside) == {"untrusted_instruction"}  # a ticket is untrusted text too
    assert _charged(policy, said, *ticket, *outside) == {"privacy_flow", "attacker_directed", "untrusted_instruction"}
