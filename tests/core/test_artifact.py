"""Tests of calibration artifacts: fingerprints, tamper evidence, shipped artifacts reproduce."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from guard.artifact import build_artifact, load_artifact, write_artifact
from guard.cli import main
from guard.corpora.agentdojo import load_suite_policy
from guard.errors import ArtifactError
from guard.policy import Policy

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "calibration_artifacts" / "agentdojo"
PACKAGED = ROOT / "guard" / "data" / "calibration_artifacts" / "agentdojo"


def _body(policy: Policy, threshold: float = 0.5) -> dict[str, object]:
    return build_artifact(
        [policy],
        alpha=0.1,
        n=99,
        threshold=threshold,
        calibration_risk=0.05,
        grid=[float("-inf"), 0.5],
        rule="carb",
        calibration_fingerprint="abc",
        command="carbguard calibrate ...",
    )


def test_round_trip(tmp_path: Path, small_policy: Policy) -> None:
    """A written artifact loads back with its threshold and α."""
    write_artifact(_body(small_policy), tmp_path / "a.json")
    art = load_artifact(tmp_path / "a.json", small_policy)
    assert (art.threshold, art.alpha, art.n) == (0.5, 0.1, 99)


def test_edited_threshold_refused(tmp_path: Path, small_policy: Policy) -> None:
    """Editing the threshold breaks the checksum and the error names the file."""
    path = tmp_path / "a.json"
    write_artifact(_body(small_policy), path)
    data = json.loads(path.read_text())
    data["threshold"] = 9.0
    path.write_text(json.dumps(data))
    with pytest.raises(ArtifactError, match=r"a\.json.*checksum"):
        load_artifact(path, small_policy)


def test_truncated_refused(tmp_path: Path, small_policy: Policy) -> None:
    """A truncated file is a clear ArtifactError."""
    path = tmp_path / "a.json"
    write_artifact(_body(small_policy), path)
    path.write_text(path.read_text()[:50])
    with pytest.raises(ArtifactError, match="not valid JSON"):
        load_artifact(path)


def test_mismatched_pipeline_names_the_part(tmp_path: Path, small_policy: Policy) -> None:
    """An artifact of another selector is refused, naming the selector component."""
    path = tmp_path / "a.json"
    write_artifact(_body(small_policy), path)
    with pytest.raises(ArtifactError, match="selector"):
        load_artifact(path, small_policy.with_selector("full_prefix"))


def test_other_policy_refused(tmp_path: Path, small_policy: Policy) -> None:
    """An artifact calibrated for other policies names them."""
    path = tmp_path / "a.json"
    write_artifact(_body(small_policy), path)
    with pytest.raises(ArtifactError, match="not for policy 'agentdojo-banking'"):
        load_artifact(path, load_suite_policy("banking"))


def test_packaged_copies_identical() -> None:
    """The artifacts the packaged policies point at equal the top-level ones byte for byte."""
    names = sorted(p.name for p in SHIPPED.glob("*.json"))
    assert names and names == sorted(p.name for p in PACKAGED.glob("*.json"))
    for name in names:
        assert (SHIPPED / name).read_bytes() == (PACKAGED / name).read_bytes()


def test_suite_policies_load_their_artifact() -> None:
    """Every suite policy's default artifact matches its pipeline."""
    from guard import Guard
    from guard.corpora.agentdojo import suite_policy_path

    for suite in ("banking", "slack", "travel", "workspace"):
        guard = Guard.from_policy(suite_policy_path(suite))
        assert guard.artifact_id is not None and guard.artifact_id.startswith("pooled_a0.10.json")


@pytest.mark.slow
def test_shipped_artifact_reproduces_bit_for_bit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-running the command recorded inside a shipped artifact writes identical bytes."""
    shipped = SHIPPED / "gpt-4o-2024-05-13_a0.10.json"
    argv = shlex.split(json.loads(shipped.read_text())["command"])[1:]
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    assert (tmp_path / argv[argv.index("--out") + 1]).read_bytes() == shipped.read_bytes()


def test_shipped_agentdojo_artifacts_carry_monitor_statistics() -> None:
    """Every shipped AgentDojo artifact stores one sorted monitoring statistic per calibration episode,
    so `carbguard monitor` works on a deployment of the shipped policies: catches artifacts shipped
    without them (or with a count that does not match n)."""
    import json

    root = Path(__file__).resolve().parents[2] / "guard" / "data" / "calibration_artifacts" / "agentdojo"
    files = sorted(root.glob("*.json"))
    assert len(files) == 13
    for path in files:
        body = json.loads(path.read_text(encoding="utf-8"))
        values = [float(v) for v in body["monitor"]["values"]]  # ±inf are stored as "+inf" / "-inf"
        assert body["monitor"]["statistic"] == "stop_max"
        assert len(values) == body["n"] and values == sorted(values), path.name


def test_the_feature_set_is_in_every_scorer_fingerprint(policy_data: dict[str, Any], monkeypatch: Any) -> None:
    """Catches the feature table's version left out of a scorer fingerprint (a row whose meaning changed would
    keep old artifacts loading), and an opt-in feature at weight 0 changing it (adding a row at weight 0 would
    invalidate every artifact)."""
    from guard import artifact
    from guard.policy import parse_policy

    def scorer_print(weights: dict[str, float], tools: dict[str, float]) -> tuple[str, str]:
        data = {**policy_data, "scorer": {**policy_data["scorer"], "weights": weights, "tool_weights": tools}}
        policy = parse_policy(data, source="<test>")
        before = artifact.pipeline_components(policy)["scorer"]
        monkeypatch.setattr(artifact, "FEATURE_SET", "another feature set")
        after = artifact.pipeline_components(policy)["scorer"]
        monkeypatch.undo()
        return before, after

    for weights, tools in (({"recipient_from_untrusted": 0.1}, {}), ({}, {"post_note": 0.2}), ({}, {})):
        before, after = scorer_print(weights, tools)
        assert before != after
    assert scorer_print({"severity_high": 0.0}, {})[0] == scorer_print({}, {})[0]
