"""The policy file's ``safecommit:`` section: strict models, cross-checks against the tools, κ sources."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from guard.calibration.kappa import KAPPA_FORMAT, resolve_kappa, scoring_fingerprint
from guard.errors import PolicyError
from guard.policy import Policy, parse_policy, policy_json_schema
from guard.policy.safecommit import KappaArtifact, KappaCalibrate, ValueCheck
from guard.safecommit.conformal import SmallCalibrationWarning, conformal_threshold
from guard.safecommit.runtime import fill_template

EXTRA_TOOLS: dict[str, Any] = {
    "lookup_contact": {"kind": "private_source", "identifier_args": ["address"]},
    "delete_doc": {"kind": "other", "effect": "irreversible", "severity": 2, "identifier_args": ["path"]},
    "archive_doc": {"kind": "other", "effect": "reversible", "severity": 1, "identifier_args": ["path"]},
}

SECTION: dict[str, Any] = {
    "kappa": 1.0,
    "alpha": 0.1,
    "budget": 2,
    "worlds": {
        "send_email": {"values": ["to", {"arg": "body", "extract": "tokens", "patterns": ["url", "email"]}]},
        "delete_doc": {"resources": [{"arg": "path", "protected_patterns": ["^shared/"]}]},
    },
    "probes": [
        {
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
    ],
    "alternatives": {"delete_doc": [{"name": "archive", "tool": "archive_doc", "args": {"path": "{path}"}}]},
}


def with_section(policy_data: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The small policy plus the probe/deletion tools and a (changed) safecommit section."""
    data = copy.deepcopy(policy_data)
    data["tools"].update(copy.deepcopy(EXTRA_TOOLS))
    section = copy.deepcopy(SECTION)
    section.update(changes)
    data["safecommit"] = section
    return data


def test_a_full_section_parses_into_frozen_models(policy_data: dict[str, Any]) -> None:
    policy = parse_policy(with_section(policy_data))
    spec = policy.safecommit
    assert spec is not None and spec.kappa == 1.0 and spec.budget == 2
    assert spec.worlds["send_email"].values[0] == ValueCheck(arg="to")
    assert spec.worlds["send_email"].checked() == {"to": "value", "body": "value"}
    assert spec.probes[0].checks == "value"
    with pytest.raises(Exception, match="frozen"):
        spec.budget = 3


def test_the_policy_schema_includes_the_section() -> None:
    schema = json.dumps(policy_json_schema())
    assert "SafeCommitSpec" in schema and "ProbeConfig" in schema


def test_a_probe_naming_a_side_effectful_tool_is_a_policy_error(policy_data: dict[str, Any]) -> None:
    probes = copy.deepcopy(SECTION["probes"])
    probes[0]["tool"] = "post_note"
    with pytest.raises(PolicyError, match=r"tool 'post_note' has effect 'reversible'; a probe must be a read-only"):
        parse_policy(with_section(policy_data, probes=probes))


def test_a_probe_naming_an_unknown_tool_is_a_policy_error(policy_data: dict[str, Any]) -> None:
    probes = copy.deepcopy(SECTION["probes"])
    probes[0]["tool"] = "ask_the_oracle"
    with pytest.raises(PolicyError, match="'ask_the_oracle' is not in the policy's tools"):
        parse_policy(with_section(policy_data, probes=probes))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"worlds": {"send_email": {"values": ["cc"]}}}, "argument 'cc' is not among the tool's"),
        ({"worlds": {"read_inbox": {"values": []}}}, "is read-only"),
        (
            {"worlds": {"send_email": {"values": [{"arg": "body", "extract": "tokens", "patterns": ["ssn"]}]}}},
            "unknown value pattern",
        ),
        ({"alternatives": {"delete_doc": [{"name": "mail", "tool": "send_email"}]}}, "irreversible"),
        ({"alternatives": {"delete_doc": [{"name": "s", "kind": "stage"}]}}, "needs a tool"),
        ({"kappa": float("nan")}, "NaN"),
        ({"alpha": 1.5}, "alpha"),
        ({"budget": -1}, "budget"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_sections_are_policy_errors(policy_data: dict[str, Any], change: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_policy(with_section(policy_data, **change))


def test_probe_outcomes_must_name_the_outcome_classes_and_cover_the_rules(policy_data: dict[str, Any]) -> None:
    probes = copy.deepcopy(SECTION["probes"])
    probes[0]["outcomes"] = {"legit": "known", "shared": "x"}
    with pytest.raises(PolicyError, match="outcomes must name exactly"):
        parse_policy(with_section(policy_data, probes=probes))
    probes = copy.deepcopy(SECTION["probes"])
    probes[0]["rules"].append({"match": "maybe", "label": "perhaps"})
    with pytest.raises(PolicyError, match="no outcome class has"):
        parse_policy(with_section(policy_data, probes=probes))


def test_a_probe_must_apply_to_a_checked_argument_of_the_right_kind(policy_data: dict[str, Any]) -> None:
    probes = copy.deepcopy(SECTION["probes"])
    probes[0]["applies_to"] = {"delete_doc": ["path"]}
    with pytest.raises(PolicyError, match=r"delete_doc\.path is not a checked value argument"):
        parse_policy(with_section(policy_data, probes=probes))


def test_templates_fill_proposal_arguments_and_the_checked_value() -> None:
    args = {"path": "a/b.txt", "n": 3}
    assert fill_template({"p": "{path}", "n": "{n}", "q": "x-{value}", "l": ["{n}"]}, args, "v") == {
        "p": "a/b.txt",
        "n": 3,
        "q": "x-v",
        "l": [3],
    }
    with pytest.raises(PolicyError, match="'missing'"):
        fill_template("{missing}", args)


def _policy_with(policy_data: dict[str, Any], tmp_path: Path, kappa: Any) -> Policy:
    data = with_section(policy_data, kappa=kappa)
    data["base_dir"] = str(tmp_path)
    return parse_policy(data)


def test_kappa_from_a_number_an_artifact_and_calibration_scores(policy_data: dict[str, Any], tmp_path: Path) -> None:
    policy = _policy_with(policy_data, tmp_path, 0.7)
    assert policy.safecommit is not None
    assert resolve_kappa(policy.safecommit, policy.resolve, policy.name, "fp") == 0.7

    scores = [i / 100 for i in range(100)]
    (tmp_path / "q.json").write_text(json.dumps({"scores": scores}))
    policy = _policy_with(policy_data, tmp_path, {"calibrate": True, "scores": "q.json"})
    assert isinstance(policy.safecommit and policy.safecommit.kappa, KappaCalibrate)
    assert policy.safecommit is not None
    got = resolve_kappa(policy.safecommit, policy.resolve, policy.name, "fp")
    assert got == conformal_threshold(scores, 0.1) == 0.9

    policy = _policy_with(policy_data, tmp_path, {"artifact": "k.json"})
    assert policy.safecommit is not None and isinstance(policy.safecommit.kappa, KappaArtifact)
    fingerprint = scoring_fingerprint(policy)
    body = {"format": KAPPA_FORMAT, "alpha": 0.1, "kappa": "+inf", "fingerprints": {policy.name: fingerprint}}
    (tmp_path / "k.json").write_text(json.dumps(body))
    assert resolve_kappa(policy.safecommit, policy.resolve, policy.name, fingerprint) == math.inf
    with pytest.raises(PolicyError, match="fingerprint"):
        resolve_kappa(policy.safecommit, policy.resolve, policy.name, "other")
    (tmp_path / "k.json").write_text(json.dumps({**body, "alpha": 0.05}))
    with pytest.raises(PolicyError, match=r"alpha=0\.05"):
        resolve_kappa(policy.safecommit, policy.resolve, policy.name, fingerprint)


def test_kappa_from_too_few_scores_is_inf_with_a_warning(policy_data: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "q.json").write_text(json.dumps([0.1, 0.2, 0.3]))
    policy = _policy_with(policy_data, tmp_path, {"calibrate": True, "scores": "q.json"})
    assert policy.safecommit is not None
    with pytest.warns(SmallCalibrationWarning, match="at least n=9"):
        assert resolve_kappa(policy.safecommit, policy.resolve, policy.name, "fp") == math.inf


def test_a_missing_kappa_file_is_a_policy_error(policy_data: dict[str, Any], tmp_path: Path) -> None:
    policy = _policy_with(policy_data, tmp_path, {"artifact": "nowhere.json"})
    assert policy.safecommit is not None
    with pytest.raises(PolicyError, match=r"nowhere\.json"):
        resolve_kappa(policy.safecommit, policy.resolve, policy.name, "fp")


def test_the_fingerprint_follows_scoring_inputs_not_kappa(policy_data: dict[str, Any]) -> None:
    base = parse_policy(with_section(policy_data))
    assert scoring_fingerprint(base) == scoring_fingerprint(
        parse_policy(with_section(policy_data, kappa=2.0, budget=0))
    )
    reweighted = parse_policy(with_section(policy_data, nonconformity={"age": 0.5}))
    assert scoring_fingerprint(base) != scoring_fingerprint(reweighted)
