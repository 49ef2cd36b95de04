"""Tamper evidence and safe YAML: edited artifacts are refused naming the file; YAML cannot run code.

- a calibration artifact whose threshold was edited (in its JSON, or as raw text) fails its content
  checksum and is refused with a message naming the artifact, by ``load_artifact`` and by
  ``Guard.from_policy``;
- policy YAML is read with a safe loader: ``!!python/...`` tags are refused (and nothing runs),
  anchors and aliases — recursive or not — are refused;
- an edited, removed or reordered audit line is detected (``carbguard audit verify`` exits 1).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from guard.artifact import build_artifact, load_artifact, write_artifact
from guard.audit import AuditLog, verify
from guard.cli import main as cli_main
from guard.errors import ArtifactError, PolicyError
from guard.policy import Policy, load_policy, parse_policy
from guard.runtime import Guard

POLICY_YAML = """version: 1
name: tamper
tools:
  read_certificate: {kind: private_source}
  send_email: {kind: sink, effect: irreversible, payload_args: [body], identifier_args: [to]}
calibration:
  artifact: artifact.json
"""


@pytest.fixture
def deployment(tmp_path: Path) -> tuple[Path, Path, Policy]:
    """A policy file and the calibration artifact it names."""
    policy_path = tmp_path / "policy.yaml"
    policy_path.write_text(POLICY_YAML, encoding="utf-8")
    policy = load_policy(policy_path)
    body = build_artifact(
        [policy],
        alpha=0.1,
        n=300,
        threshold=0.42,
        calibration_risk=0.09,
        grid=[0.1, 0.42, 0.6],
        rule="crc",
        calibration_fingerprint="c" * 64,
        command="carbguard calibrate",
    )
    artifact = tmp_path / "artifact.json"
    write_artifact(body, artifact)
    return policy_path, artifact, policy


def test_the_untouched_artifact_loads(deployment: tuple[Path, Path, Policy]) -> None:
    policy_path, artifact, policy = deployment
    assert load_artifact(artifact, policy).threshold == 0.42
    assert Guard.from_policy(policy_path).threshold == 0.42


@pytest.mark.parametrize("threshold", [0.9, 1e9, 0.4200001, "inf"])
def test_an_edited_threshold_is_refused_naming_the_artifact(
    deployment: tuple[Path, Path, Policy], threshold: Any
) -> None:
    """Raising λ̂ by hand (to let more through) breaks the checksum; the error names the file."""
    policy_path, artifact, policy = deployment
    body = json.loads(artifact.read_text(encoding="utf-8"))
    body["threshold"] = threshold
    artifact.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    with pytest.raises(ArtifactError, match=r"artifact\.json: checksum does not match"):
        load_artifact(artifact, policy)
    with pytest.raises(ArtifactError) as info:
        Guard.from_policy(policy_path)
    assert str(artifact) in str(info.value)


def test_a_raw_text_edit_of_the_threshold_is_refused(deployment: tuple[Path, Path, Policy]) -> None:
    """The same edit made with a text editor (no JSON round trip)."""
    _, artifact, policy = deployment
    text = artifact.read_text(encoding="utf-8")
    assert '"threshold": 0.42' in text
    artifact.write_text(text.replace('"threshold": 0.42', '"threshold": 0.99'), encoding="utf-8")
    with pytest.raises(ArtifactError, match=r"artifact\.json.*edited or corrupted"):
        load_artifact(artifact, policy)


def test_an_artifact_for_another_pipeline_is_refused(deployment: tuple[Path, Path, Policy]) -> None:
    """Changing the policy's weights after calibration invalidates the artifact, naming the part."""
    _, artifact, policy = deployment
    data = policy.model_dump(mode="json", exclude={"base_dir"})
    data["scorer"]["weights"]["provenance_path"] = 0.3
    with pytest.raises(ArtifactError, match=r"artifact\.json.*scorer"):
        load_artifact(artifact, parse_policy(copy.deepcopy(data)))


PYTHON_TAGS = {
    "object_apply": "!!python/object/apply:pathlib.Path.touch [['{marker}']]",
    "object_new": "!!python/object/new:pathlib.Path ['{marker}']",
    "object": "!!python/object:pathlib.Path {{}}",
    "name": "!!python/name:os.system",
    "module": "!!python/module:os",
}


@pytest.mark.parametrize("kind", sorted(PYTHON_TAGS))
def test_yaml_python_tags_are_refused_and_nothing_runs(kind: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    tag = PYTHON_TAGS[kind].format(marker=marker)
    path = tmp_path / "policy.yaml"
    path.write_text(f"version: 1\nname: {tag}\ntools: {{t: {{kind: sink}}}}\n", encoding="utf-8")
    with pytest.raises(PolicyError, match=r"policy\.yaml.*(constructor|tag)"):
        load_policy(path)
    top = tmp_path / "top.yaml"
    top.write_text(tag + "\n", encoding="utf-8")
    with pytest.raises(PolicyError):
        load_policy(top)
    assert not marker.exists()


@pytest.mark.parametrize(
    "document",
    [
        "version: 1\nname: x\ntools: &t\n  a: *t\n",
        "a: &x [*x]\nversion: 1\nname: x\ntools: {t: {kind: sink}}\n",
        "version: 1\nname: x\nbase: &b {kind: sink}\ntools: {t: *b}\n",
        "a: &a [1, 1]\nb: &b [*a, *a]\nc: &c [*b, *b]\nversion: 1\nname: x\ntools: {t: {kind: sink}}\n",
    ],
    ids=["recursive-mapping", "recursive-list", "plain-alias", "alias-bomb"],
)
def test_yaml_anchors_and_aliases_are_refused(document: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(document, encoding="utf-8")
    with pytest.raises(PolicyError, match=r"policy\.yaml: line \d+: YAML aliases .* are not allowed"):
        load_policy(path)


def test_an_edited_or_removed_audit_line_is_detected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync=False)
    for k in range(4):
        log.write({"session": "s", "call_id": f"c{k}", "verdict": "escalate" if k == 2 else "execute"})
    original = path.read_bytes()
    lines = original.split(b"\n")[:-1]

    assert original.count(b'"escalate"') == 1
    path.write_bytes(original.replace(b'"escalate"', b'"execute"'))
    assert (verify(path).ok, verify(path).line) == (False, 3)
    path.write_bytes(b"\n".join(lines[:1] + lines[2:]) + b"\n")
    assert (verify(path).ok, verify(path).line) == (False, 2)
    path.write_bytes(b"\n".join([lines[1], lines[0], *lines[2:]]) + b"\n")
    assert not verify(path).ok
    capsys.readouterr()
    assert cli_main(["audit", "verify", str(path)]) == 1
    assert "FAILED at line 1" in capsys.readouterr().out


# ------------------------------------------------------------- keyed chain, checkpoints, strict lines


def _write_keyed(path: Path, key: bytes, n: int) -> list[bytes]:
    log = AuditLog(path, fsync=False, key=key)
    for k in range(n):
        log.write({"session": "s", "call_id": f"c{k}", "verdict": "execute"})
    return path.read_bytes().splitlines(keepends=True)


def test_cli_checkpoint_then_truncation_is_detected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`audit checkpoint` + `audit verify --key-file --checkpoint`: a cut at a line boundary fails naming the line."""
    key = b"k3y-material-for-the-deployment-0001"
    key_file, log, point = tmp_path / "audit.key", tmp_path / "audit.jsonl", tmp_path / "audit.checkpoint"
    key_file.write_bytes(key + b"\n")
    lines = _write_keyed(log, key, 5)
    assert cli_main(["audit", "checkpoint", str(log), "--key-file", str(key_file), "-o", str(point)]) == 0
    assert cli_main(["audit", "verify", str(log), "--key-file", str(key_file), "--checkpoint", str(point)]) == 0
    assert "OK: 5 entries verify (keyed chain); the checkpoint of 5 entries matches" in capsys.readouterr().out
    log.write_bytes(b"".join(lines[:4]))
    assert cli_main(["audit", "verify", str(log), "--key-file", str(key_file)]) == 0  # no checkpoint: unseen
    capsys.readouterr()
    assert cli_main(["audit", "verify", str(log), "--key-file", str(key_file), "--checkpoint", str(point)]) == 1
    out = capsys.readouterr()
    assert "FAILED at line 5: checkpoint check: the checkpoint records 5 entries; the log ends after 4" in out.out
    assert cli_main(["audit", "verify", str(log)]) == 1  # keyed log, no key: the key check names line 1
    assert "FAILED at line 1: key check" in capsys.readouterr().out
    everything = log.read_bytes() + point.read_bytes() + out.out.encode() + out.err.encode()
    assert key not in everything and key.hex().encode() not in everything


@pytest.mark.parametrize(
    "planted", [b'"verdict":NaN', b'"verdict":"\\udc80"', b'"verdict":"escalate","verdict":"execute"']
)
def test_cli_and_report_name_a_non_strict_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: bytes
) -> None:
    """NaN, a lone surrogate, a duplicate "verdict": "FAILED at line N: why" in verify and report (traceback before)."""
    from guard.report import render_audit_report

    log = tmp_path / "audit.jsonl"
    writer = AuditLog(log, fsync=False)
    for k in range(3):
        writer.write({"session": "s", "call_id": f"c{k}", "verdict": "execute"})
    lines = log.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"verdict": "execute"', planted)
    assert planted in lines[1]
    log.write_bytes(b"".join(lines))
    assert cli_main(["audit", "verify", str(log)]) == 1
    out = capsys.readouterr()
    assert out.out.startswith("FAILED at line 2: parse check: not strict JSON") and "Traceback" not in out.err
    html = render_audit_report(log)
    assert "FAILED at line 2" in html and "1 lines could not be parsed" in html
    assert cli_main(["report", str(log), "-o", str(tmp_path / "r.html")]) == 0


def test_cli_refuses_a_short_or_missing_key_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A key file under 16 bytes or missing is one line on stderr and exit 2 (bad input, not a verdict)."""
    log = tmp_path / "audit.jsonl"
    _write_keyed(log, b"0123456789abcdef", 1)
    short = tmp_path / "short.key"
    short.write_bytes(b"abc")
    assert cli_main(["audit", "verify", str(log), "--key-file", str(short)]) == 2
    assert cli_main(["audit", "verify", str(log), "--key-file", str(tmp_path / "none.key")]) == 2
    err = capsys.readouterr().err
    assert "short.key: key file holds 3 bytes" in err and "none.key: cannot read key file" in err
