"""The scoped keys of the ``ledger:`` section (guard/policy/ledger.py): loading, refusals and the JSON Schema.
Each test names the planted bug it catches."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from guard.errors import PolicyError
from guard.policy import parse_policy, policy_json_schema
from guard.policy.ledger import ProtectedToolsRule, RecipientRule

TOOLS: dict[str, Any] = {
    "delete_object": {"kind": "other", "effect": "irreversible", "identifier_args": ["target"]},
    "send_email": {"kind": "sink", "effect": "irreversible", "payload_args": ["body"], "identifier_args": ["to"]},
}


def _data(ledger: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "name": "x", "tools": TOOLS, "ledger": ledger}


@pytest.mark.parametrize("key", ["paths", "targets"])
@pytest.mark.parametrize("category", ["destructive", "credential_change"])
def test_a_bad_scope_pattern_is_refused_naming_it(category: str, key: str) -> None:
    """Catches a scope key whose patterns are not compiled at load (the bad regex would fail mid-calibration, or
    match nothing): the error names the rule, the key and the pattern."""
    with pytest.raises(PolicyError) as err:
        parse_policy(_data({category: {"tools": ["delete_object"], key: ["^/srv/", "prod-(db"]}}))
    message = str(err.value)
    assert f"ledger.{category}.{key}" in message and "'prod-(db'" in message and "regular expression" in message


@pytest.mark.parametrize("key", ["paths", "targets"])
def test_an_empty_scope_list_is_refused(key: str) -> None:
    """Catches ``paths: []`` accepted: a rule that can never charge would silently drop the category."""
    with pytest.raises(PolicyError, match=f"destructive.{key}"):
        parse_policy(_data({"destructive": {"tools": ["delete_object"], key: []}}))


def test_scope_is_none_without_keys_and_the_union_with_both() -> None:
    """Catches ``scope()`` dropping one list when both are given, or giving () (charge nothing) when neither is."""
    assert ProtectedToolsRule(tools=("t",)).scope() is None
    both = ProtectedToolsRule(tools=("t",), paths=("^/a",), targets=("^b",))
    assert both.scope() == ("^/a", "^b")
    assert ProtectedToolsRule(tools=("t",), targets=("^b",)).scope() == ("^b",)


def test_allowed_destinations_absent_and_empty_differ() -> None:
    """Catches ``allowed_destinations: {}`` loaded as absent (None), which would fall back to trust.internal."""
    absent = parse_policy(_data({"privacy_flow": {}})).ledger
    empty = parse_policy(_data({"privacy_flow": {"allowed_destinations": {}}})).ledger
    assert absent is not None and absent.privacy_flow is not None and absent.privacy_flow.allowed_destinations is None
    assert empty is not None and empty.privacy_flow is not None
    assert empty.privacy_flow.allowed_destinations is not None
    assert not empty.privacy_flow.allowed_destinations.declared()


def test_allowed_destinations_are_validated_as_trust_internal() -> None:
    """Catches allowed_destinations accepting what trust.internal refuses (a bad domain, an unknown key)."""
    for bad in ({"domains": ["not a domain"]}, {"channels": ["#x"]}, {"identifiers": [" "]}):
        with pytest.raises(PolicyError, match="allowed_destinations"):
            parse_policy(_data({"privacy_flow": {"allowed_destinations": bad}}))


def test_attacker_directed_states_an_allow_list_only_when_written() -> None:
    """Catches an explicit ``allow_domains: []`` read as "no list" (trust.internal would then apply)."""
    assert not RecipientRule().states_allow_list()
    assert RecipientRule.model_validate({"allow_domains": []}).states_allow_list()
    assert RecipientRule.model_validate({"allow_identifiers": ["#x"]}).states_allow_list()


def test_new_keys_are_in_the_schema_with_descriptions_and_validate() -> None:
    """Catches a new key missing from the exported schema, without a description, or with a shape the schema
    refuses (allowed_destinations has trust.internal's keys)."""
    schema = policy_json_schema()
    defs = schema["$defs"]
    for model, key in (("ProtectedToolsRule", "paths"), ("ProtectedToolsRule", "targets")):
        assert defs[model]["properties"][key].get("description"), f"{model}.{key}"
    flow = defs["PrivacyFlowRule"]["properties"]["allowed_destinations"]
    assert "trust.internal" in flow.get("description", "")
    data = _data(
        {
            "privacy_flow": {"allowed_destinations": {"domains": ["corp.example"], "identifiers": ["#ops"]}},
            "destructive": {"tools": ["delete_object"], "paths": ["^/srv/"], "targets": ["^db-"]},
        }
    )
    parse_policy(data)
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(data)) == []
    data["ledger"]["privacy_flow"]["allowed_destinations"]["channels"] = ["#x"]
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(data))
