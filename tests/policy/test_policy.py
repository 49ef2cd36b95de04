"""Policy files: strict models and the YAML/TOML/JSON loaders (docs/policy.md, STYLE 11)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from guard.decision import Verdict
from guard.errors import PolicyError
from guard.policy import (
    Effect,
    Policy,
    ToolKind,
    load_policy,
    parse_policy,
    policy_json_schema,
    policy_schema_text,
)
from guard.runtime import Guard

YAML_POLICY = """\
version: 1
name: files
tools:
  read_certificate:
    kind: private_source
  send_email:
    kind: sink
    effect: irreversible
    severity: 3
    payload_args: [body]
    identifier_args: [to]
graph:
  min_span: 10
"""

TOML_POLICY = """\
version = 1
name = "files"

[tools.read_certificate]
kind = "private_source"

[tools.send_email]
kind = "sink"
effect = "irreversible"
severity = 3
payload_args = ["body"]
identifier_args = ["to"]

[graph]
min_span = 10
"""

JSON_POLICY = {
    "version": 1,
    "name": "files",
    "tools": {
        "read_certificate": {"kind": "private_source"},
        "send_email": {
            "kind": "sink",
            "effect": "irreversible",
            "severity": 3,
            "payload_args": ["body"],
            "identifier_args": ["to"],
        },
    },
    "graph": {"min_span": 10},
}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _comparable(policy: Policy) -> dict[str, Any]:
    return policy.model_dump(exclude={"base_dir"})


@pytest.mark.parametrize(
    ("name", "text"),
    [("p.yaml", YAML_POLICY), ("p.yml", YAML_POLICY), ("p.toml", TOML_POLICY), ("p.json", json.dumps(JSON_POLICY))],
)
def test_formats_load_the_same_policy(tmp_path: Path, name: str, text: str) -> None:
    """YAML, TOML and JSON files describing the same policy load to equal models."""
    loaded = load_policy(_write(tmp_path, name, text))
    assert _comparable(loaded) == _comparable(parse_policy(JSON_POLICY))
    assert loaded.tools["send_email"].effect is Effect.IRREVERSIBLE
    assert loaded.graph.min_span == 10


def test_loader_records_base_dir(tmp_path: Path) -> None:
    """Relative paths in a loaded policy resolve against the policy file's folder."""
    loaded = load_policy(_write(tmp_path, "p.yaml", YAML_POLICY))
    assert loaded.resolve("artifact.json") == (tmp_path / "artifact.json").resolve()


def test_unknown_key_names_key_path_and_yaml_line(tmp_path: Path) -> None:
    """A typo is an error that names its key path and the YAML line it is on."""
    text = YAML_POLICY.replace("    severity: 3\n", "    severity: 3\n    severty: 2\n")
    with pytest.raises(PolicyError) as info:
        load_policy(_write(tmp_path, "p.yaml", text))
    message = str(info.value)
    assert "tools.send_email.severty (line 10)" in message
    assert "p.yaml" in message


def test_unknown_top_level_key(tmp_path: Path) -> None:
    """An unknown top-level key is named with its line."""
    with pytest.raises(PolicyError, match=r"selectr \(line 14\)"):
        load_policy(_write(tmp_path, "p.yaml", YAML_POLICY + "selectr:\n  name: gcarb\n"))


def test_several_errors_reported_at_once(tmp_path: Path) -> None:
    """Every problem of a file is listed in one error, each with its line."""
    text = (
        YAML_POLICY.replace("severity: 3", "severity: 9")
        .replace("kind: private_source", "kind: secret_source")
        .replace("min_span: 10", "min_span: 2")
    )
    with pytest.raises(PolicyError) as info:
        load_policy(_write(tmp_path, "p.yaml", text))
    message = str(info.value)
    assert "3 problem(s)" in message
    assert "tools.read_certificate.kind (line 5)" in message
    assert "tools.send_email.severity (line 9)" in message
    assert "graph.min_span (line 13)" in message


def test_bad_value_pattern_regex(policy_data: dict[str, Any]) -> None:
    """A value pattern that does not compile is a PolicyError naming the pattern."""
    policy_data["graph"] = {"value_patterns": {"email": "([a-z"}}
    with pytest.raises(PolicyError, match=r"value_patterns\[email\] is not a valid regular expression"):
        parse_policy(policy_data)


def test_bad_injection_regex(policy_data: dict[str, Any]) -> None:
    """An injection pattern that does not compile is a PolicyError."""
    policy_data["scorer"] = {"injection_patterns": ["ok", "*bad"]}
    with pytest.raises(PolicyError, match=r"scorer.injection_patterns.*not a valid regular expression"):
        parse_policy(policy_data)


def test_negative_weight_rejected(policy_data: dict[str, Any]) -> None:
    """A negative scorer weight is a PolicyError that names the weight."""
    policy_data["scorer"] = {"weights": {"canary": -0.1}}
    with pytest.raises(PolicyError, match="weight canary must be a finite number >= 0"):
        parse_policy(policy_data)


def test_nan_weight_rejected_from_yaml(tmp_path: Path) -> None:
    """A YAML ``.nan`` weight is rejected."""
    text = YAML_POLICY + "scorer:\n  weights:\n    provenance_path: .nan\n"
    with pytest.raises(PolicyError, match="weight provenance_path must be a finite number"):
        load_policy(_write(tmp_path, "p.yaml", text))


def test_infinite_weight_rejected(policy_data: dict[str, Any]) -> None:
    """An infinite weight is rejected."""
    policy_data["scorer"] = {"weights": {"canary": float("inf")}}
    with pytest.raises(PolicyError, match="weight canary"):
        parse_policy(policy_data)


@pytest.mark.parametrize("verdict", ["execute", "probe"])
def test_on_unknown_never_executes(policy_data: dict[str, Any], verdict: str) -> None:
    """``on_unknown: execute`` (or probe) is rejected: unknown input never executes."""
    policy_data["on_unknown"] = verdict
    with pytest.raises(PolicyError, match="on_unknown"):
        parse_policy(policy_data)


def test_on_unknown_defer_allowed(policy_data: dict[str, Any]) -> None:
    """``on_unknown: defer`` is accepted."""
    policy_data["on_unknown"] = "defer"
    assert parse_policy(policy_data).on_unknown is Verdict.DEFER


def test_yaml_alias_rejected(tmp_path: Path) -> None:
    """YAML anchors used through an alias are rejected with the alias's line."""
    text = YAML_POLICY + "selector: &sel\n  name: gcarb\nextra: *sel\n"
    with pytest.raises(PolicyError, match=r"line 16: YAML aliases \(\*sel\) are not allowed"):
        load_policy(_write(tmp_path, "p.yaml", text))


def test_invalid_yaml_names_line(tmp_path: Path) -> None:
    """A YAML syntax error names the file and line."""
    with pytest.raises(PolicyError, match=r"p.yaml: line \d+, column \d+: invalid YAML"):
        load_policy(_write(tmp_path, "p.yaml", "name: [unclosed\n"))


def test_invalid_json_names_line(tmp_path: Path) -> None:
    """A JSON syntax error names the line."""
    with pytest.raises(PolicyError, match=r"line 2, column \d+: invalid JSON"):
        load_policy(_write(tmp_path, "p.json", '{\n"name": }\n'))


def test_invalid_toml(tmp_path: Path) -> None:
    """A TOML syntax error is a PolicyError."""
    with pytest.raises(PolicyError, match="invalid TOML"):
        load_policy(_write(tmp_path, "p.toml", "name = \n"))


def test_unknown_suffix(tmp_path: Path) -> None:
    """An unknown file suffix names the supported ones."""
    with pytest.raises(PolicyError, match=r"unknown policy format '.ini'; use .yaml"):
        load_policy(_write(tmp_path, "p.ini", "x"))


def test_missing_file(tmp_path: Path) -> None:
    """A missing file is a PolicyError, not a bare OSError."""
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "absent.yaml")


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    """A policy that is a list at the top level is rejected."""
    with pytest.raises(PolicyError, match="must be a mapping at the top level, got list"):
        load_policy(_write(tmp_path, "p.yaml", "- a\n- b\n"))


def test_also_source_only_on_sinks(policy_data: dict[str, Any]) -> None:
    """``also_source`` on a non-sink tool is rejected."""
    policy_data["tools"]["read_inbox"]["also_source"] = "private_source"
    with pytest.raises(PolicyError, match="also_source is only allowed on tools with kind: sink"):
        parse_policy(policy_data)


def test_also_source_sets_source_kind(policy_data: dict[str, Any]) -> None:
    """A sink that is also an untrusted source reports that as its source kind."""
    policy_data["tools"]["send_email"]["also_source"] = "untrusted_source"
    assert parse_policy(policy_data).tools["send_email"].source_kind is ToolKind.UNTRUSTED_SOURCE


def test_policy_needs_a_tool(policy_data: dict[str, Any]) -> None:
    """A policy with no tools is rejected."""
    policy_data["tools"] = {}
    with pytest.raises(PolicyError, match="tools"):
        parse_policy(policy_data)


def test_policy_is_frozen(small_policy: Policy) -> None:
    """Policies cannot be changed in place."""
    with pytest.raises(ValueError, match="frozen"):
        small_policy.name = "other"


def test_with_selector_returns_changed_copy(small_policy: Policy) -> None:
    """``with_selector`` changes the copy's selector and leaves the original alone."""
    other = small_policy.with_selector("fixed_window", window=2)
    assert (other.selector.name, other.selector.window) == ("fixed_window", 2)
    assert small_policy.selector.name == "gcarb"


@pytest.mark.parametrize(("name", "params"), [("bogus", {}), ("fixed_window", {"window": 0})])
def test_with_selector_validates(small_policy: Policy, name: str, params: dict[str, int]) -> None:
    """``with_selector`` rejects an unknown selector name or an invalid parameter."""
    with pytest.raises(PolicyError, match="selector"):
        small_policy.with_selector(name, **params)  # type: ignore[arg-type]


def test_guard_without_threshold_is_policy_error(small_policy: Policy) -> None:
    """``Guard(policy)`` without a threshold refuses to guess one."""
    with pytest.raises(PolicyError, match="no threshold given"):
        Guard(small_policy)


def test_guard_nan_threshold_is_policy_error(small_policy: Policy) -> None:
    """A NaN threshold is refused."""
    with pytest.raises(PolicyError, match="NaN"):
        Guard(small_policy, threshold=float("nan"))


def test_from_policy_without_artifact(tmp_path: Path) -> None:
    """``Guard.from_policy`` on a policy that names no artifact says what to do instead."""
    with pytest.raises(PolicyError, match=r"calibration.artifact is not set; use Guard\(policy, threshold=...\)"):
        Guard.from_policy(_write(tmp_path, "p.yaml", YAML_POLICY))


def test_schema_forbids_extra_keys_and_hides_base_dir() -> None:
    """The exported JSON Schema has no ``base_dir`` and forbids unknown keys."""
    schema = policy_json_schema()
    assert "base_dir" not in schema["properties"]
    assert schema["additionalProperties"] is False
    assert json.loads(policy_schema_text()) == schema


def test_policy_error_is_value_error() -> None:
    """PolicyError can be caught as ValueError (STYLE 4)."""
    with pytest.raises(ValueError, match=re.escape("<policy>")):
        parse_policy([1, 2])


# --------------------------------------------------------------------------- duplicate keys

DUPLICATES = {
    "sink-redefined.yaml": (
        "version: 1\nname: dup\ntools:\n  send_email: {kind: sink, effect: irreversible}\n"
        "  read: {kind: private_source}\n  send_email: {kind: other}\n",
        r"line 6: duplicate key 'tools\.send_email' \(first defined at line 4\)",
    ),
    "second-on-unknown.yaml": (
        "version: 1\nname: dup\non_unknown: escalate\ntools: {t: {kind: sink}}\non_unknown: abstain\n",
        r"line 5: duplicate key 'on_unknown' \(first defined at line 3\)",
    ),
    "nested-weights.yaml": (
        "version: 1\nname: dup\ntools: {t: {kind: sink}}\nscorer:\n  weights: {canary: 0.1, canary: 0.9}\n",
        r"line 5: duplicate key 'scorer\.weights\.canary' \(first defined at line 5\)",
    ),
    "sink-redefined.json": (
        '{"version": 1, "name": "dup",\n "tools": {"send_email": {"kind": "sink"},\n'
        '   "read": {"kind": "private_source", "identifier_args": ["a", "b"]},\n   "send_email": {"kind": "other"}}}',
        r"line 4: duplicate key 'tools\.send_email' \(first defined at line 2\)",
    ),
    "top-level.json": (
        '{"version": 1, "name": "dup", "on_unknown": "escalate",\n"tools": {"t": {"kind": "sink"}},\n'
        '"on_unknown": "abstain"}',
        r"line 3: duplicate key 'on_unknown' \(first defined at line 1\)",
    ),
}


@pytest.mark.parametrize("name", sorted(DUPLICATES))
def test_duplicate_keys_are_refused_with_key_path_and_line(name: str, tmp_path: Path) -> None:
    """A key defined twice (a sink redefined as `other`, a second on_unknown) is refused (the last one used to win)."""
    text, message = DUPLICATES[name]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PolicyError, match=re.escape(str(path)) + ": " + message):
        load_policy(path)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_same_key_in_different_mappings_is_fine(suffix: str, tmp_path: Path) -> None:
    """The negative control: one key name in two different mappings is not a duplicate."""
    data = {"version": 1, "name": "ok", "tools": {"a": {"kind": "sink"}, "b": {"kind": "sink"}}}
    path = tmp_path / f"policy{suffix}"
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")  # JSON is also YAML
    assert set(load_policy(path).tools) == {"a", "b"}
