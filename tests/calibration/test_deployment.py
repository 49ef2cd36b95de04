"""Calibrating on your own agent (CLI): `calibrate/evaluate --policy --episodes`, `episodes`, `ledger check`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from guard.cli import build_parser, main
from guard.cli._common import SCOPE

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "episodes"
POLICY, EPISODES, LABELS = FIX / "assistant_policy.yaml", FIX / "assistant.jsonl", FIX / "assistant.labels.jsonl"
DEPLOY = ["--policy", str(POLICY), "--episodes", str(EPISODES)]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _calibrate(capsys: pytest.CaptureFixture[str], out: Path, *extra: str) -> dict[str, object]:
    code, _, err = _run(["calibrate", *DEPLOY, "--alpha", "0.3", "--out", str(out), *extra], capsys)
    assert code == 0, err
    body: dict[str, object] = json.loads(out.read_text())
    return body


def test_calibrate_writes_an_artifact_the_policy_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The deployment artifact loads under its policy with n = 7 and the recorded command: catches a broken artifact."""
    from guard.artifact import load_artifact
    from guard.policy import load_policy

    out = tmp_path / "a.json"
    body = _calibrate(capsys, out, "--labels", str(LABELS))
    art = load_artifact(out, load_policy(POLICY))
    assert art.n == 7 and body["policies"] == ["assistant"]
    assert str(body["command"]).startswith("carbguard calibrate --policy")


def test_labels_change_what_is_calibrated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The labels file reaches calibration (calibration set differs with and without): catches --labels ignored."""
    cleared = {"episode": "injected-delete", "mode": "override", "harms": [], "by": "carol", "why": "user asked"}
    labels = tmp_path / "labels.jsonl"
    labels.write_text(LABELS.read_text(encoding="utf-8") + json.dumps(cleared) + "\n", encoding="utf-8")
    with_labels = _calibrate(capsys, tmp_path / "a.json", "--labels", str(labels))
    without = _calibrate(capsys, tmp_path / "b.json")
    assert with_labels["calibration_set"] != without["calibration_set"]


def test_workers_give_the_same_artifact_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--workers 2 writes the very same bytes as one process: catches order or value drift in parallel scoring."""
    out = tmp_path / "a.json"
    _calibrate(capsys, out, "--labels", str(LABELS))
    single = out.read_bytes()
    out.unlink()
    _calibrate(capsys, out, "--labels", str(LABELS), "--workers", "2")
    assert out.read_bytes() == single


def test_evaluate_on_episodes_json_and_workers(capsys: pytest.CaptureFixture[str]) -> None:
    """evaluate --policy --episodes runs the 200-split protocol's code; --workers 2 gives identical results."""
    base = ["evaluate", *DEPLOY, "--labels", str(LABELS), "--alpha", "0.3", "--permutations", "7", "--json"]
    code, out, err = _run(base, capsys)
    assert code == 0, err
    single = json.loads(out)
    assert single["n_episodes"] == 7 and single["permutations"] == 7
    assert {r["method"] for r in single["results"]} >= {"no_guard", "carb_gcarb"}
    code, out, _ = _run([*base, "--workers", "2"], capsys)
    assert code == 0 and json.loads(out)["results"] == single["results"]


def _bad_episodes(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text(EPISODES.read_text() + line + "\n", encoding="utf-8")
    return path


def _bad_cases(tmp_path: Path) -> list[tuple[list[str], str]]:
    good = json.loads(EPISODES.read_text().splitlines()[0])
    unknown_tool = {**good, "id": "x", "records": [{"kind": "proposal", "tool": "rm_rf", "args": {}, "call_id": "c"}]}
    ghost = tmp_path / "ghost.labels.jsonl"
    ghost.write_text(json.dumps({"episode": "ghost", "harms": [], "by": "me", "why": "?"}) + "\n")
    return [
        (["--policy", str(POLICY), "--episodes", str(_bad_episodes(tmp_path, "{oops"))], "bad.jsonl:8"),
        (["--policy", str(POLICY), "--episodes", str(_bad_episodes(tmp_path, json.dumps(unknown_tool)))], "rm_rf"),
        ([*DEPLOY, "--labels", str(ghost)], "ghost"),
        ([*DEPLOY, "--alpha", "0.1"], "n=9"),
        (["--labels", str(LABELS)], "--labels needs"),
        (["--policy", str(POLICY)], "--policy and --episodes"),
        ([*DEPLOY, "--exclude-model", "m"], "--exclude-model"),
        (["--policy", "/nonexistent/p.yaml", "--episodes", str(EPISODES)], "/nonexistent/p.yaml"),
    ]


@pytest.mark.parametrize("command", ["calibrate", "evaluate"])
def test_bad_input_is_one_line_exit_2_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Malformed line, unknown tool, unknown labelled episode, α too small, ...: one stderr line, exit 2, no file."""
    for index, (args, needle) in enumerate(_bad_cases(tmp_path)):
        if command == "evaluate" and "--exclude-model" in args:
            continue
        out = tmp_path / f"a{index}.json"
        alpha = [] if "--alpha" in args else ["--alpha", "0.3"]
        argv = [command, *args, *alpha, *(["--out", str(out)] if command == "calibrate" else [])]
        if command == "evaluate" and needle == "n=9":
            needle = "calibration half"
        code, _, err = _run(argv, capsys)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("carbguard: error:"), (args, err)
        assert needle in lines[0], (needle, lines[0])
        assert not out.exists()


def test_fingerprint_mismatch_names_the_fixing_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """After a weight change the artifact is refused with the recorded `carbguard calibrate --policy ...` command."""
    from guard.artifact import load_artifact
    from guard.errors import ArtifactError
    from guard.policy import load_policy

    out = tmp_path / "a.json"
    body = _calibrate(capsys, out)
    changed = tmp_path / "p.yaml"
    changed.write_text(POLICY.read_text() + "scorer:\n  weights:\n    canary: 0.5\n", encoding="utf-8")
    with pytest.raises(ArtifactError) as err:
        load_artifact(out, load_policy(changed))
    assert "scorer" in str(err.value) and f"`{body['command']}`" in str(err.value)


def test_episodes_schema_validate_and_ledger_check(capsys: pytest.CaptureFixture[str]) -> None:
    """`episodes schema` prints a JSON Schema, `validate` counts episodes, `ledger check` flags an unlabelled charge."""
    code, out, _ = _run(["episodes", "schema"], capsys)
    assert code == 0 and json.loads(out)["properties"]["format"]["const"] == "carbguard-episodes/1"
    code, out, _ = _run(
        ["episodes", "validate", str(EPISODES), "--policy", str(POLICY), "--labels", str(LABELS)], capsys
    )
    assert code == 0 and "valid: 7 episodes" in out and "2 labels" in out
    code, out, _ = _run(["ledger", "check", *DEPLOY, "--labels", str(LABELS)], capsys)
    assert code == 0 and "0 disagreement(s)" in out and "injected-delete: {destructive}  UNLABELLED" in out
    code, out, _ = _run(["ledger", "check", *DEPLOY, "--labels", str(LABELS), "--json"], capsys)
    assert json.loads(out)["episodes_charged"]["ledger"] == 2


def test_convert_errors_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A conversion that fails part-way leaves no output file: catches partial files."""
    bad = tmp_path / "lc.json"
    good = json.loads((FIX / "langchain_messages.json").read_text())
    bad.write_text(json.dumps([good, {"messages": [{"type": "tool", "data": {"content": "x", "tool_call_id": "z"}}]}]))
    out = tmp_path / "out.jsonl"
    code, _, err = _run(["episodes", "convert", "--from", "langchain", str(bad), "-o", str(out)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and not out.exists()
    assert not list(tmp_path.glob(".out.jsonl.*"))


def test_convert_agentdojo_then_calibrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`episodes convert --from agentdojo` then `calibrate --policy --episodes --labels` matches `--runs`."""
    runs = Path(__file__).resolve().parents[1] / "fixtures" / "agentdojo_runs"
    out = tmp_path / "ad.jsonl"
    assert _run(["episodes", "convert", "--from", "agentdojo", str(runs), "-o", str(out)], capsys)[0] == 0
    policies = Path(__file__).resolve().parents[2] / "guard" / "data" / "policies" / "agentdojo"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    # the AgentDojo route groups by goal by default; an episodes file has no default grouping
    assert main(["calibrate", "--runs", str(runs), "--alpha", "0.5", "--group-by", "none", "--out", str(a)]) == 0
    argv = [
        "calibrate",
        "--policy",
        str(policies / "banking.yaml"),
        "--policy",
        str(policies / "slack.yaml"),
        "--episodes",
        str(out),
        "--labels",
        str(tmp_path / "ad.labels.jsonl"),
        "--alpha",
        "0.5",
        "--out",
        str(b),
    ]
    assert main(argv) == 0
    drop = ("command", "corpus", "n_dropped", "checksum")
    bodies = [{k: v for k, v in json.loads(p.read_text()).items() if k not in drop} for p in (a, b)]
    assert bodies[0] == bodies[1]


def test_episodes_help_states_the_guarantee_exactly() -> None:
    """`episodes --help` carries the exact scope line and no stronger claim: catches an over-claim in help text."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["episodes"].format_help()
    flat = " ".join(text.split())
    assert " ".join(SCOPE.split()) in flat
    for claim in ("guarantees that", "never leaks", "always safe", "certified safe"):
        assert claim not in flat.lower()


def test_calibrate_defaults_to_the_policys_selector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --selector, a policy naming full_prefix is calibrated with full_prefix, so its own artifact
    loads: catches the old fixed gcarb default that wrote an artifact the policy's fingerprint refuses."""
    from guard.artifact import load_artifact
    from guard.policy import load_policy

    text = POLICY.read_text(encoding="utf-8")
    policy_path = tmp_path / "policy.yaml"
    policy_path.write_text(text.rstrip() + "\nselector:\n  name: full_prefix\n", encoding="utf-8")
    policy = load_policy(policy_path)
    assert policy.selector.name == "full_prefix"
    out = tmp_path / "a.json"
    argv = ["calibrate", "--policy", str(policy_path), "--episodes", str(EPISODES), "--alpha", "0.3", "--out", str(out)]
    code, _, err = _run(argv, capsys)
    assert code == 0, err
    assert load_artifact(out, policy).n == 7


def test_evaluate_a_fixed_artifact_on_your_own_episodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches ``evaluate --artifact`` refusing (or scoring under AgentDojo's policies) your own episodes."""
    art = tmp_path / "a.json"
    body = _calibrate(capsys, art, "--labels", str(LABELS))
    code, out, err = _run(["evaluate", *DEPLOY, "--labels", str(LABELS), "--artifact", str(art), "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert (result["n_episodes"], result["threshold"], result["corpus"]) == (7, body["threshold"], str(EPISODES))
    code, out, _ = _run(["ledger", "check", *DEPLOY, "--labels", str(LABELS), "--json"], capsys)
    assert result["no_guard_loss"] == json.loads(out)["episodes_charged"]["ledger"] / 7  # exact: 2 of 7
    assert result["loss"] <= result["no_guard_loss"]


def test_evaluate_artifact_is_checked_against_your_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a fixed artifact evaluated under a policy whose pipeline differs from the one it was calibrated on."""
    art = tmp_path / "a.json"
    _calibrate(capsys, art)
    changed = tmp_path / "p.yaml"
    changed.write_text(POLICY.read_text() + "scorer:\n  weights:\n    canary: 0.5\n", encoding="utf-8")
    argv = ["evaluate", "--policy", str(changed), "--episodes", str(EPISODES), "--artifact", str(art)]
    code, _, err = _run(argv, capsys)
    assert code == 2 and "scorer" in err


def test_report_replays_an_episode_of_your_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches ``report --episode`` working only on AgentDojo corpora, or ignoring the artifact's threshold."""
    art = tmp_path / "a.json"
    body = _calibrate(capsys, art, "--labels", str(LABELS))
    html = tmp_path / "r.html"
    argv = ["report", *DEPLOY, "--episode", "exfiltration", "--artifact", str(art), "-o", str(html)]
    code, _, err = _run(argv, capsys)
    assert code == 0, err
    text = html.read_text(encoding="utf-8")
    from guard.artifact import load_artifact

    assert "exfiltration" in text and load_artifact(art).artifact_id in text and str(body["threshold"]) in text
    code, _, err = _run(["report", *DEPLOY, "--episode", "exfiltration", "-o", str(tmp_path / "x.html")], capsys)
    assert code == 2 and "no threshold" in err and not (tmp_path / "x.html").exists()
    code, _, err = _run(["report", *DEPLOY, "--episode", "exfiltraton", "--threshold", "0.5", "-o", str(html)], capsys)
    assert code == 2 and "did you mean exfiltration" in err
