"""The exported JSON Schema matches the loader: every shipped policy validates against it with a real validator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from guard.policy import SCHEMA_DIALECT, SCHEMA_ID, parse_policy, policy_json_schema
from guard.policy.loader import read_policy_mapping

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(
    p
    for folder in (ROOT / "policies", ROOT / "guard" / "data" / "policies")
    for p in folder.rglob("*.yaml")
    if p.name != "ledger.yaml"  # the harm ledger's rules, not a policy
)


def _exported() -> dict[str, Any]:
    """The schema exactly as `carbguard policy schema` prints it."""
    out = subprocess.run(
        [sys.executable, "-m", "guard", "policy", "schema"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    schema: dict[str, Any] = json.loads(out.stdout)
    return schema


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = _exported()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_schema_names_dialect_and_id() -> None:
    """The exported schema declares its dialect ($schema, draft 2020-12) and an $id."""
    schema = _exported()
    assert schema["$schema"] == SCHEMA_DIALECT == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == SCHEMA_ID
    assert jsonschema.validators.validator_for(schema) is jsonschema.Draft202012Validator


def _properties(node: Any, path: str = "") -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        for name, sub in (node.get("properties") or {}).items():
            found.append((f"{path}.{name}", sub))
        for key, sub in node.items():
            found += _properties(sub, f"{path}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            found += _properties(sub, f"{path}[{i}]")
    return found


def test_every_property_has_a_description() -> None:
    """No property of the schema (top level or in $defs) lacks a non-empty description."""
    props = _properties(_exported())
    assert len(props) > 60
    missing = [where for where, sub in props if not str(sub.get("description", "")).strip()]
    assert missing == []


def test_shipped_policies_found() -> None:
    """The shipped-policy list holds the AgentDojo suites and the examples (a glob that finds nothing fails)."""
    names = {p.name for p in SHIPPED}
    assert {"banking.yaml", "slack.yaml", "travel.yaml", "workspace.yaml", "constructed.yaml"} <= names
    assert len(SHIPPED) >= 13


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_policy_validates(path: Path, validator: jsonschema.protocols.Validator) -> None:
    """Each shipped policy passes the loader and the exported schema (catches a schema stricter than the loader)."""
    data, _ = read_policy_mapping(path)
    parse_policy(data, source=str(path))
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]
    assert errors == []


SAFECOMMIT_SHORT = """
version: 1
name: short
tools:
  send_money: {kind: sink, effect: irreversible, payload_args: [amount], identifier_args: [recipient]}
  delete_file: {kind: other, effect: irreversible, identifier_args: [file_id]}
safecommit:
  kappa: 0.85
  worlds:
    send_money: {values: [recipient, {arg: amount}]}
    delete_file: {resources: [file_id]}
"""


def test_short_form_checks_accepted_by_both(validator: jsonschema.protocols.Validator) -> None:
    """A bare argument name in worlds.*.values/resources is valid for the loader and for the schema."""
    data = yaml.safe_load(SAFECOMMIT_SHORT)
    parse_policy(data)
    assert list(validator.iter_errors(data)) == []


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"tools": {"t": {"kind": "sink", "payloadargs": []}}}, "tools.t"),
        ({"on_unknown": "execute"}, "on_unknown"),
        ({"scorer": {"weights": {"provenance": 0.5}}}, "scorer.weights"),
        ({"selector": {"name": "best"}}, "selector.name"),
        ({"tools": {"t": {"kind": "sinks"}}}, "tools.t.kind"),
    ],
)
def test_schema_refuses_what_the_loader_refuses(
    patch: dict[str, Any], where: str, validator: jsonschema.protocols.Validator
) -> None:
    """Typos and unknown values the loader refuses are schema errors too (catches a schema that accepts anything)."""
    data = {"version": 1, "name": "x", "tools": {"t": {"kind": "sink"}}, **patch}
    with pytest.raises(Exception, match="problem"):
        parse_policy(data)
    errors = list(validator.iter_errors(data))
    assert errors, where
    assert any(".".join(map(str, e.absolute_path)).startswith(where.split(".")[0]) for e in errors)


def test_in_process_schema_equals_exported() -> None:
    """policy_json_schema() is what the CLI prints."""
    assert policy_json_schema() == _exported()
