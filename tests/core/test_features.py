"""The feature table (guard/features.py): the one place that names the scorer's features."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from guard import features
from guard.features import DATAFLOW, DEFAULT_WEIGHTS, FEATURE_GROUPS, FEATURES, TABLE, needing
from guard.graph import build_graph
from guard.policy import Policy
from guard.policy.weights import FeatureWeights
from guard.records import proposal, user
from guard.scorer import WeightedScorer

ROOT = Path(__file__).resolve().parents[2]
#: ``canary`` is also the name of a graph flag (a record matched a canary pattern): allowed as a flag.
_FLAG_CALLS = {"flagged_bits"}


def _spelled(path: Path, names: frozenset[str]) -> list[str]:
    """``file:line: name`` for each string literal equal to a feature name, outside graph-flag uses."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    flag_args = {
        id(arg)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FLAG_CALLS
        for arg in node.args
    }
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in flag_args:
            if path.name == "graph.py" and node.value == "canary":  # the graph's own flag names
                continue
            out.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{node.lineno}: {node.value}")
    return out


def _modules() -> list[Path]:
    files = [*sorted((ROOT / "guard").rglob("*.py")), *sorted((ROOT / "adapters").rglob("*.py"))]
    return [f for f in files if f != ROOT / "guard" / "features.py" and "__pycache__" not in f.parts]


def test_no_module_outside_the_table_spells_a_feature_name() -> None:
    """Catches a feature name written out in code again (a dict key, a comparison, a list of names) instead of
    being read from the table: such a copy goes stale when a row changes."""
    found = [hit for path in _modules() for hit in _spelled(path, frozenset(FEATURES))]
    assert found == []


def test_the_scan_finds_a_planted_spelling(tmp_path: Path) -> None:
    """Catches a scan that sees nothing (wrong node type, wrong set of names): a planted module that spells
    two feature names, one as a dict key and one in a list, is reported twice."""
    planted = tmp_path / "planted.py"
    planted.write_text('WEIGHTS = {"provenance_path": 1.0}\nGROUP = ["payload_private_half"]\nOK = "payload"\n')
    assert [hit.split(": ")[1] for hit in _spelled(planted, frozenset(FEATURES))] == [
        "provenance_path",
        "payload_private_half",
    ]


def test_everything_derived_follows_the_table() -> None:
    """Catches a derived list kept by hand: the order, the weight fields and defaults, the groups and the
    data-flow set must all be read from the rows."""
    assert tuple(row.name for row in TABLE) == FEATURES
    assert len(set(FEATURES)) == len(FEATURES)
    assert tuple(FeatureWeights.model_fields) == FEATURES
    assert FeatureWeights().model_dump() == {row.name: row.weight for row in TABLE}
    assert set(DEFAULT_WEIGHTS) == {row.name for row in TABLE if row.group == "default"}
    # the control rows carry package defaults of their own (docs/defaults.md#package-defaults-for-goals-stated-as-facts)
    assert all(row.weight == 0 for row in TABLE if row.group not in ("default", "control"))
    assert {n for names in FEATURE_GROUPS.values() for n in names} | set(DEFAULT_WEIGHTS) == set(FEATURES)
    assert {row.name for row in TABLE if row.dataflow} == DATAFLOW
    for row in TABLE:
        assert FeatureWeights.model_fields[row.name].description == row.description


def test_a_scorer_computes_exactly_the_table(small_policy: Policy) -> None:
    """Catches a row without a computing function, or a computed feature without a row: a scored proposal's
    feature map has exactly the table's names, in its order."""
    policy = small_policy
    sink = next(name for name, spec in policy.tools.items() if spec.kind.value == "sink")
    records = (user(0, "Pay my rent."), proposal(1, sink, {"to": "GB29NWBK60161331926819"}, "c1"))
    graph = build_graph(policy, records)
    values = WeightedScorer(policy).features(graph, 1, frozenset({0}))
    assert tuple(values) == FEATURES


@pytest.mark.parametrize("setting", ["untrusted_source", "payload_args", "canary_patterns"])
def test_warnings_name_the_features_a_setting_switches_off(setting: str) -> None:
    """Catches a load-time warning that names features by hand: each setting's list comes from the rows."""
    assert needing(setting) == tuple(r.name for r in TABLE if r.group == "default" and setting in r.needs)
    assert needing(setting)  # every setting the warnings check switches off at least one default feature
    assert features.needing(setting, "roles") == ()
