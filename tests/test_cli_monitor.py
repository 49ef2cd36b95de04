"""`carbguard monitor` (guard/cli/monitor.py): the artifact's calibration statistics, the audit log's
per-episode statistics (closed sessions, session-start order), the seed derived from the artifact, the
label-fed risk monitor (--labels), exit codes 0 / 3 / 2, --json and --plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from guard.artifact import load_artifact, write_artifact
from guard.audit import AuditLog, read_entries
from guard.calibration.monitor import Summary, monitor, read_artifact_statistics
from guard.calibration.replay import feed
from guard.calibration.risk_monitor import log_wealth
from guard.cli import main
from guard.cli.deployed import deployed_sessions, deployed_statistics
from guard.cli.monitor import tie_seed
from guard.corpora.episodes import load_episodes
from guard.errors import GuardError
from guard.jsonio import loads_strict
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
    assert (
        main(["calibrate", "--policy", str(POLICY), "--episodes", str(EPISODES), "--alpha", "0.3", "--out", str(out)])
        == 0
    )
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
    """Catches deployed statistics that differ from replay, and sessions never closed taken in (planted: the
    closed-only filter dropped -> the open sessions' statistics appear)."""
    audit = tmp_path / "audit.jsonl"
    ids = [e.episode_id for e in load_episodes(EPISODES, policy)]
    _deploy(policy, artifact, audit, ids, close=close)
    art = load_artifact(artifact, policy)
    stats, ignored = deployed_statistics(read_entries(audit), art.body["checksum"], art.threshold)
    replay = Guard(policy, threshold=float("inf"))
    episodes = load_episodes(EPISODES, policy)
    expected = [stop_max([d.score for d in feed(replay.session(e.episode_id), e)], art.threshold) for e in episodes]
    assert stats == (expected if close else [])
    assert ignored == 0
    assert deployed_sessions(read_entries(audit), art.body["checksum"], art.threshold).open_sessions == (
        0 if close else len(ids)
    )
    ends = [e for e in read_entries(audit) if e.get("event") == "session_end"]
    assert len(ends) == (len(ids) if close else 0)


def test_sessions_in_start_order(policy: Policy, artifact: Path, tmp_path: Path) -> None:
    """Catches sessions ordered by their last entry (planted: sort key = last line) instead of their first: A starts,
    B starts and closes, A closes — the order is A, B."""
    art = load_artifact(artifact, policy)
    audit = tmp_path / "audit.jsonl"
    guard = Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id, audit=AuditLog(audit, fsync=False))
    episodes = {e.episode_id: e for e in load_episodes(EPISODES, policy)}
    first = guard.session("A")
    first.decide("read_inbox", {}, "c0")
    second = guard.session("B")
    feed(second, episodes["benign-inbox"])
    second.close()
    first.close()
    deployed = deployed_sessions(read_entries(audit), art.body["checksum"], art.threshold)
    assert deployed.sessions == ("A", "B") and deployed.call_ids[0] == frozenset({"c0"})


def test_seed_is_derived_from_the_artifact(
    policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a free tie-breaking seed: --seed is refused (exit 2, says why), and the martingale path is the one
    of the seed derived from the artifact's checksum (planted: seed 0 -> the path differs)."""
    audit = tmp_path / "audit.jsonl"
    _deploy(policy, artifact, audit, [e.episode_id for e in load_episodes(EPISODES, policy)])
    assert main(["monitor", str(audit), "--artifact", str(artifact), "--seed", "3"]) == 2
    assert "derived from the artifact" in capsys.readouterr().err
    assert main(["monitor", str(audit), "--artifact", str(artifact), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    art = load_artifact(artifact, policy)
    stats, _ = deployed_statistics(read_entries(audit), art.body["checksum"], art.threshold)
    cal = read_artifact_statistics(art.body, "a")
    seeded = monitor(cal, stats, art.threshold, seed=tie_seed(art.body))
    assert out["path"] == [round(float(v), 6) for v in seeded.path]
    assert out["path"] != [round(float(v), 6) for v in monitor(cal, stats, art.threshold, seed=0).path]
    assert tie_seed(art.body) != tie_seed({**art.body, "threshold": 0.123})
    assert tie_seed(art.body) == tie_seed({**art.body, "command": "elsewhere"})


def _labels(path: Path, rows: list[tuple[str, list[dict[str, object]], str]]) -> Path:
    path.write_text(
        "".join(
            json.dumps({"episode": sid, "harms": harms, "mode": mode, "by": "test", "why": "t"}) + "\n"
            for sid, harms, mode in rows
        )
    )
    return path


HARM: list[dict[str, object]] = [{"category": "privacy_flow"}]


def test_labels_quiet_stream_exits_0(
    policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches --labels without a `risk` member or with wrong fields, a risk alarm on a stream below α
    (1 harm in 14 sessions, α = 0.3), and labels not taken in session-start order (planted: label-file order)."""
    ids = [e.episode_id for e in load_episodes(EPISODES, policy)] * 2
    audit = tmp_path / "audit.jsonl"
    _deploy(policy, artifact, audit, ids)
    sessions = [f"{name}#{k}" for k, name in enumerate(ids)]
    rows = [(sid, HARM if k == 3 else [], "override") for k, sid in enumerate(sessions)]
    labels = _labels(tmp_path / "labels.jsonl", rows[::-1])
    assert main(["monitor", str(audit), "--artifact", str(artifact), "--labels", str(labels), "--json"]) == 0
    risk = json.loads(capsys.readouterr().out)["risk"]
    assert risk["alarm"] is False and risk["alarm_at_episode"] is None and risk["n"] == 14
    assert risk["alpha"] == pytest.approx(0.3) and risk["delta"] == 0.05
    assert risk["sessions"] == sessions and len(risk["lower_bounds"]) == 14
    assert risk["mean_loss"] == pytest.approx(1 / 14)
    assert risk["wealth"] == [round(float(v), 6) for v in np.exp(log_wealth(np.eye(14)[3], 0.3))]
    assert main(["monitor", str(audit), "--artifact", str(artifact), "--labels", str(labels)]) == 0
    assert "no risk alarm" in capsys.readouterr().out


def test_labels_alarm_exits_3_with_plot(
    policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a risk alarm that does not set exit code 3 (planted: exit 3 on the score alarm only) while the score
    monitor is quiet (harm that scores low), a wrong 1-based alarm position, and --plot failing with labels."""
    ids = [e.episode_id for e in load_episodes(EPISODES, policy)] * 3
    audit, png = tmp_path / "audit.jsonl", tmp_path / "m.png"
    _deploy(policy, artifact, audit, ids)
    labels = _labels(tmp_path / "labels.jsonl", [(f"{name}#{k}", HARM, "add") for k, name in enumerate(ids)])
    argv = ["monitor", str(audit), "--artifact", str(artifact), "--labels", str(labels)]
    assert main([*argv, "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    risk = out["risk"]
    assert out["alarm"] is False and risk["alarm"] is True
    first = int(np.argmax(log_wealth(np.ones(21), 0.3) >= np.log(20))) + 1
    assert risk["alarm_at_episode"] == first and risk["lower_bounds"][-1] > 0.3
    assert main([*argv, "--plot", str(png)]) == 3
    assert f"RISK ALARM at labelled session {first}" in capsys.readouterr().out and png.stat().st_size > 1000
    assert main([*argv, "--plot", str(labels)]) == 2  # the labels file is an input: never overwritten
    assert "is the input" in capsys.readouterr().err


def test_bad_labels_exit_2(policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches labels accepted for a session not in the log (planted: unknown labels skipped), an 'add' label with
    no harms read as no harm, and a harm on a call the session never decided."""
    audit = tmp_path / "audit.jsonl"
    _deploy(policy, artifact, audit, ["benign-inbox", "exfiltration"])
    argv = ["monitor", str(audit), "--artifact", str(artifact), "--labels"]
    cases: list[tuple[list[tuple[str, list[dict[str, object]], str]], str]] = [
        ([("nobody", [], "override")], "not a closed session"),
        ([("benign-inbox#0", [], "add")], "'add' label with no harms"),
        ([("exfiltration#1", [{"category": "privacy_flow", "call_id": "zz"}], "override")], "no decision for call"),
    ]
    for k, (rows, message) in enumerate(cases):
        assert main([*argv, str(_labels(tmp_path / f"l{k}.jsonl", rows))]) == 2
        assert message in capsys.readouterr().err


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


def test_bad_input_exit_2(policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
    assert "no closed sessions decided under artifact" in capsys.readouterr().err


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
    guard = Guard(
        policy, threshold=art.threshold, artifact_id=art.artifact_id, audit=AuditLog(audit, fsync=False, key=key)
    )
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
    assert (
        main(["monitor", str(audit), "--artifact", str(artifact), "--key-file", str(key_file), "--plot", str(audit)])
        == 2
    )
    assert "is the input" in capsys.readouterr().err and audit.read_bytes() == before


def test_trip_file_on_alarm_trips_a_running_guard(
    policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`monitor --trip FILE` writes the trip file on an alarm only, and a running guard of that artifact then
    escalates its very next sink call (a read still executes) with one breaker entry audited (which the monitor
    itself skips).

    Catches: a trip file written without an alarm, none written on a risk alarm (planted: written on the score
    alarm only), and breaker entries counted as entries of other artifacts."""
    episodes = load_episodes(EPISODES, policy)
    ids = [e.episode_id for e in episodes] * 3
    audit, trip = tmp_path / "audit.jsonl", tmp_path / "trip.json"
    _deploy(policy, artifact, audit, ids)
    quiet = _labels(tmp_path / "quiet.jsonl", [(f"{name}#{k}", [], "override") for k, name in enumerate(ids)])
    assert main(["monitor", str(audit), "--artifact", str(artifact), "--labels", str(quiet), "--trip", str(trip)]) == 0
    assert not trip.exists()
    art = load_artifact(artifact, policy)
    running = Guard(
        policy, threshold=float("inf"), artifact_id=art.artifact_id, audit=AuditLog(audit, fsync=False), trip_file=trip
    )
    session = running.session("live")
    feed(session, episodes[0])
    assert all(d.allowed for d in session.decisions.values())
    harmed = _labels(tmp_path / "harm.jsonl", [(f"{name}#{k}", HARM, "add") for k, name in enumerate(ids)])
    argv = ["monitor", str(audit), "--artifact", str(artifact), "--labels", str(harmed), "--trip", str(trip)]
    assert main(argv) == 3
    assert json.loads(trip.read_text())["artifact"] == art.artifact_id
    assert session.decide("post_to_slack", {"channel": "#general", "text": "hi"}, "after").verdict.value == "escalate"
    assert session.decide("read_inbox", {}, "read-after").verdict.value == "execute"  # reads keep the threshold
    entries = read_entries(audit)
    assert [e["reason"] for e in entries if e.get("kind") == "breaker"] == [
        f"trip file {trip}: carbguard monitor: risk alarm on {audit}"
    ]
    capsys.readouterr()
    assert main([*argv, "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["ignored_entries"] == 0


def test_from_policy_fallback_artifact(policy: Policy, artifact: Path, tmp_path: Path) -> None:
    """`calibration.fallback: STRICT.json` trips to the stricter artifact's threshold, and a looser fallback is
    refused at load.  Catches: the fallback artifact ignored (planted: always -inf) or a looser one accepted."""
    import yaml

    strict, artifact = tmp_path / "strict.json", tmp_path / "main.json"
    base = ["calibrate", "--policy", str(POLICY), "--episodes", str(EPISODES)]
    assert main([*base, "--alpha", "0.15", "--out", str(strict)]) == 0
    # seven episodes: the utility slack would bring alpha 0.3 down to the stricter threshold; keep it apart
    assert main([*base, "--alpha", "0.3", "--utility-slack", "0", "--out", str(artifact)]) == 0
    data = yaml.safe_load(POLICY.read_text())
    for name, main_art, fallback in (("ok", artifact, strict), ("loose", strict, artifact)):
        data["calibration"] = {"artifact": str(main_art), "fallback": str(fallback)}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data))
    guard = Guard.from_policy(tmp_path / "ok.yaml", audit=tmp_path / "a.jsonl")
    main_t, strict_t = load_artifact(artifact, policy).threshold, load_artifact(strict, policy).threshold
    assert strict_t < main_t and guard.threshold == main_t
    guard.trip("alarm")
    assert guard.threshold == strict_t
    (entry,) = [e for e in read_entries(tmp_path / "a.jsonl") if e.get("kind") == "breaker"]
    assert entry["to"]["artifact"] == load_artifact(strict, policy).artifact_id
    with pytest.raises(GuardError, match="looser"):
        Guard.from_policy(tmp_path / "loose.yaml")


def test_json_of_a_summary_of_no_finite_statistic_reads_back_strictly(
    policy: Policy, artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches ``--json`` output that the project's strict reader refuses: sessions without proposals have the
    statistic -inf, so the deployed mean of finite statistics is undefined; the old writer printed it as the text
    ``"nan"`` (refused by ``decode_float``), it is now ``null`` (and ``n/a`` in the table)."""
    art = load_artifact(artifact, policy)
    guard = Guard(
        policy, threshold=art.threshold, artifact_id=art.artifact_id, audit=AuditLog(tmp_path / "a.jsonl", fsync=False)
    )
    for k in range(3):
        session = guard.session(f"empty#{k}")
        session.observe_user("hello")
        session.close()
    argv = ["monitor", str(tmp_path / "a.jsonl"), "--artifact", str(artifact)]
    assert main([*argv, "--json"]) == 0
    out = loads_strict(capsys.readouterr().out, "monitor --json", GuardError)
    assert out["deployed"]["mean_finite"] is None and out["deployed"]["median"] == "-inf"
    deployed = Summary.from_json(out["deployed"], "deployed")
    assert deployed.n == 3 and math.isnan(deployed.mean_finite) and deployed.p90 == -math.inf
    Summary.from_json(out["calibration"], "calibration")
    assert main(argv) == 0
    assert "max score, mean (finite)" in (table := capsys.readouterr().out) and "n/a" in table
