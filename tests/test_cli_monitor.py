"""`carbguard monitor` (guard/cli/monitor.py): the artifact's calibration statistics, the audit log's
per-episode statistics, exit codes 0 / 3 / 2, --json and --plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guard.artifact import load_artifact, write_artifact
from guard.audit import AuditLog, read_entries
from guard.calibration.monitor import read_artifact_statistics
from guard.calibration.replay import feed
from guard.cli import main
from guard.cli.monitor import deployed_statistics
from guard.corpora.episodes import load_episodes
from guard.policy import Policy, load_policy
from guard.recorder import stop_max
from guard.runtime import Guard

FIX = Path(__file__).resolve().parent / "fixtures" / "episodes"
POLICY, EPISODES = FIX / "assistant_policy.yaml", FIX / "assistant.jsonl"


@pytest.fixture(scope="module")
def policy() -> Policy:
    """The seven-tool assistant fixture policy."""
    return load_policy(POLICY)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An artifact calibrated on the fixture episodes (α = 0.3)."""
    out = tmp_path_factory.mktemp("art") / "a.json"
    assert main(["calibrate", "--policy", str(POLICY), "--episodes", str(EPISODES), "--alpha", "0.3",
                 "--out", str(out)]) == 0
    return out


def _deploy(policy: Policy, artifact: Path, audit: Path, ids: list[str], close: bool = True) -> None:
    art = load_artifact(artifact, policy)
    guard = Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id, audit=AuditLog(audit, fsync=False))
    episodes = {e.episode_id: e for e in load_episodes(EPISODES, policy)}
    for k, name in enumerate(ids):
        session = guard.session(f"{name}#{k}")
        feed(session, episodes[name])
        if close:
            session.close()


def test_artifact_stores_calibration_statistics(policy: Policy, artifact: Path) -> None:
    """Catches an artifact whose monitor values are not the replayed episodes' stop_max at λ̂."""
    art = load_artifact(artifact, policy)
    guard = Guard(policy, threshold=float("inf"))
    expected = sorted(
        stop_max([d.score for d in feed(guard.session(e.episode_id), e)], art.threshold)
        for e in load_episodes(EPISODES, policy)
    )
    assert read_artifact_statistics(art.body, "a") == expected


@pytest.mark.parametrize("close", [True, False])
def test_audit_statistics_match_replay(policy: Policy, artifact: Path, tmp_path: Path, close: bool) -> None:
    """Catches deployed statistics (from session_end or from decision entries) that differ from replay."""
    audit = tmp_path / "audit.jsonl"
    ids = [e.episode_id for e in load_episodes(EPISODES, policy)]
    _deploy(policy, artifact, audit, ids, close=close)
    art = load_artifact(artifact, policy)
    stats, ignored = deployed_statistics(read_entries(audit), art.body["checksum"], art.threshold)
    replay = Guard(policy, threshold=float("inf"))
    episodes = load_episodes(EPISODES, policy)
    assert stats == [stop_max([d.score for d in feed(replay.session(e.episode_id), e)], art.threshold)
                     for e in episodes]
    assert ignored == 0
    ends = [e for e in read_entries(audit) if e.get("event") == "session_end"]
    assert len(ends) == (len(ids) if close else 0)


def test_exit_0_without_shift_and_json(
    policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches an alarm on a stream like the calibration set, or --json missing the martingale fields."""
    audit = tmp_path / "audit.jsonl"
    _deploy(policy, artifact, audit, [e.episode_id for e in load_episodes(EPISODES, policy)])
    assert main(["monitor", str(audit), "--artifact", str(artifact), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["alarm"] is False and out["deployed"]["n"] == 7 and len(out["path"]) == 7
    assert out["alarm_level"] == pytest.approx(20.0)


def test_exit_3_on_a_shift_with_plot(
    policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a monitor that does not alarm when every deployed episode scores above the calibration ones."""
    from guard.artifact import content_checksum

    body = dict(load_artifact(artifact).body)
    body["monitor"] = {"statistic": "stop_max", "values": [0.0] * 50}  # calibration episodes that all scored 0
    body["checksum"] = content_checksum(body)
    calm = tmp_path / "a.json"
    write_artifact(body, calm)
    audit, png = tmp_path / "audit.jsonl", tmp_path / "m.png"
    _deploy(policy, calm, audit, ["exfiltration"] * 40)
    assert main(["monitor", str(audit), "--artifact", str(calm), "--plot", str(png)]) == 3
    out = capsys.readouterr().out
    assert "ALARM at deployed episode" in out and png.stat().st_size > 1000


def test_bad_input_exit_2(
    policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a tampered audit log, an artifact without statistics, or an unrelated log being accepted."""
    audit = tmp_path / "audit.jsonl"
    _deploy(policy, artifact, audit, ["benign-inbox"])
    lines = audit.read_text().splitlines()
    tampered = tmp_path / "t.jsonl"
    tampered.write_text("\n".join([lines[0].replace('"execute"', '"escalate"'), *lines[1:]]) + "\n")
    assert main(["monitor", str(tampered), "--artifact", str(artifact)]) == 2
    assert "does not verify" in capsys.readouterr().err
    body = load_artifact(artifact).body
    old = {k: v for k, v in body.items() if k not in ("monitor", "checksum")}
    from guard.artifact import content_checksum

    old["checksum"] = content_checksum(old)
    write_artifact(old, tmp_path / "old.json")
    assert main(["monitor", str(audit), "--artifact", str(tmp_path / "old.json")]) == 2
    assert "recalibrate" in capsys.readouterr().err
    other = tmp_path / "other.jsonl"
    Guard(policy, threshold=1.0, audit=AuditLog(other, fsync=False)).session("s").decide("read_inbox", {}, "c")
    assert main(["monitor", str(other), "--artifact", str(artifact)]) == 2
    assert "no decisions made under artifact" in capsys.readouterr().err


def test_report_skips_session_end_entries(policy: Policy, artifact: Path, tmp_path: Path) -> None:
    """Catches the decision explorer showing a session_end entry as an empty decision."""
    from guard.report.model import views_from_audit

    audit = tmp_path / "audit.jsonl"
    _deploy(policy, artifact, audit, ["benign-inbox"])
    views = views_from_audit(read_entries(audit))
    assert [d.tool for d in views[0].decisions] == ["read_inbox"]


def test_keyed_log_needs_and_takes_key_file(
    policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `monitor` unable to read a keyed log (planted: key not passed to verify -> exit 2 with
    "verify it with --key-file"), a wrong key accepted, and --plot allowed over an input (planted: monitor's
    input list emptied -> the audit log is overwritten by the PNG)."""
    key = b"m" * 32
    key_file, other = tmp_path / "k", tmp_path / "other.k"
    key_file.write_bytes(key)
    other.write_bytes(b"o" * 32)
    audit = tmp_path / "audit.jsonl"
    art = load_artifact(artifact, policy)
    guard = Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id,
                  audit=AuditLog(audit, fsync=False, key=key))
    for k, episode in enumerate(load_episodes(EPISODES, policy)[:3]):
        session = guard.session(f"{episode.episode_id}#{k}")
        feed(session, episode)
        session.close()
    capsys.readouterr()
    assert main(["monitor", str(audit), "--artifact", str(artifact)]) == 2
    assert "--key-file" in capsys.readouterr().err
    assert main(["monitor", str(audit), "--artifact", str(artifact), "--key-file", str(key_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["deployed"]["n"] == 3
    assert main(["monitor", str(audit), "--artifact", str(artifact), "--key-file", str(other)]) == 2
    assert "another key" in capsys.readouterr().err
    before = audit.read_bytes()
    assert main(["monitor", str(audit), "--artifact", str(artifact), "--key-file", str(key_file),
                 "--plot", str(audit)]) == 2
    assert "is the input" in capsys.readouterr().err and audit.read_bytes() == before
