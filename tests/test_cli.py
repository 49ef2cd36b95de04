"""The command line: bad input is one clear line on stderr, exit code 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guard.cli import main

FIXTURE_RUNS = Path(__file__).resolve().parent / "fixtures" / "agentdojo_runs"
ROOT = Path(__file__).resolve().parents[1]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["evaluate", "--runs", "/nonexistent/runs"], "/nonexistent/runs"),
        (["evaluate", "--corpus", "gpt-4o-2024-05-13", "--alpha", "1.5"], "alpha"),
        (["evaluate", "--corpus", "gpt-4o-2024-05-13", "--alpha", "0"], "alpha"),
        (["evaluate", "--corpus", "gpt-4o-2024-05-13", "--permutations", "0"], "permutations"),
        (["evaluate", "--corpus", "no-such-model"], "no-such-model"),
        (["policy", "validate", "/nonexistent.yaml"], "/nonexistent.yaml"),
        (["audit", "verify", "/nonexistent.jsonl"], "/nonexistent.jsonl"),
    ],
)
def test_bad_input_exit_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each bad input gives exit code 2 and one error line naming the problem."""
    code, _, err = _run(argv, capsys)
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[0].startswith("carbguard: error:") and needle in lines[0]


def test_empty_runs_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder with no episodes is refused and nothing is written."""
    out = tmp_path / "a.json"
    code, _, err = _run(["calibrate", "--runs", str(tmp_path), "--alpha", "0.1", "--out", str(out)], capsys)
    assert code == 2 and "carbguard: error:" in err and not out.exists()


def test_calibrate_alpha_too_small_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """α below 1/(n+1) on a tiny corpus names the minimum n and writes no artifact."""
    out = tmp_path / "a.json"
    argv = ["calibrate", "--runs", str(FIXTURE_RUNS), "--alpha", "0.01", "--out", str(out)]
    code, _, err = _run(argv, capsys)
    assert code == 2 and "n" in err and not out.exists()


def test_calibrate_refuses_too_small_alpha_before_scoring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches a calibration that scores every episode of an AgentDojo corpus before it refuses an α below
    1/(n+1): the refusal must come first, naming n, with nothing scored and nothing written."""
    import guard.calibration.jobs as jobs

    def scored(*_: object, **__: object) -> None:
        raise AssertionError("scored before refusing")

    monkeypatch.setattr(jobs, "calibrate", scored)
    out = tmp_path / "a.json"
    code, _, err = _run(["calibrate", "--runs", str(FIXTURE_RUNS), "--alpha", "0.001", "--out", str(out)], capsys)
    assert code == 2 and "scored before refusing" not in err and "needs at least n=" in err and not out.exists()


def test_calibrate_writes_loadable_artifact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Calibrating on the fixture runs writes an artifact that the banking policy can load."""
    from guard.artifact import load_artifact
    from guard.corpora.agentdojo import load_suite_policy

    out = tmp_path / "a.json"
    code, _, _ = _run(["calibrate", "--runs", str(FIXTURE_RUNS), "--alpha", "0.5", "--out", str(out)], capsys)
    assert code == 0
    body = json.loads(out.read_text())
    suites = [p.removeprefix("agentdojo-") for p in body["policies"]]
    art = load_artifact(out, load_suite_policy(suites[0]))
    assert art.alpha == 0.5 and art.n == body["n"]


def test_artifact_for_another_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Loading a guard whose policy names an artifact of other policies fails with exit 2 in report."""
    policy = tmp_path / "p.yaml"
    artifact = Path(__file__).resolve().parents[1] / "calibration_artifacts" / "agentdojo" / "pooled_a0.10.json"
    policy.write_text("name: other\ntools:\n  t: {kind: other}\ncalibration:\n  artifact: " + str(artifact) + "\n")
    from guard import Guard
    from guard.errors import ArtifactError

    with pytest.raises(ArtifactError, match="not for policy 'other'"):
        Guard.from_policy(policy)


def test_evaluate_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints one object with the contract's keys and method names."""
    code, out, _ = _run(
        ["evaluate", "--runs", str(FIXTURE_RUNS), "--alpha", "0.5", "--permutations", "3", "--json"], capsys
    )
    assert code == 0
    result = json.loads(out)
    assert {"corpus", "n_episodes", "n_dropped", "results"} <= set(result)
    methods = {r["method"] for r in result["results"]}
    assert {
        "no_guard",
        "step_crc",
        "carb_gcarb",
        "carb_full_prefix",
        "carb_fixed_window",
        "carb_ledger_current",
        "carb_random_equal_size",
    } <= methods
    keys = {
        "method",
        "alpha",
        "mean_loss",
        "loss_p05",
        "loss_p95",
        "intervention",
        "autonomous_success",
        "harm_free_success",
        "ctx_red",
    }
    assert all(keys <= set(r) for r in result["results"])


def test_policy_schema_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`policy schema` prints a JSON Schema with the policy's top-level keys."""
    code, out, _ = _run(["policy", "schema"], capsys)
    assert code == 0 and "tools" in json.loads(out)["properties"]


def test_evaluate_workers_identical(capsys: pytest.CaptureFixture[str]) -> None:
    """--workers 2 gives the same results as the single-process run, bit for bit."""
    base = ["evaluate", "--runs", str(FIXTURE_RUNS), "--alpha", "0.5", "--permutations", "5", "--json"]
    assert main(base) == 0
    single = json.loads(capsys.readouterr().out)
    assert main([*base, "--workers", "2"]) == 0
    double = json.loads(capsys.readouterr().out)
    assert single["results"] == double["results"]


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_policy_validate_help_after_the_file(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches `policy validate FILE --help` failing with "unrecognized arguments" (argparse leaves a flag
    after the positional FILE in the remainder): it prints the command's usage and exits 0, validating nothing."""
    code, out, _ = _run(["policy", "validate", str(ROOT / "policies/examples/mail_agent.yaml"), flag], capsys)
    assert code == 0 and out.startswith("usage: carbguard policy validate") and "--tools" in out


def test_policy_warnings_are_one_line_per_file(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a command that prints every feature warning of a deliberate policy at each run (the worked
    example's pinned weights gave four lines per command): one line per policy file names the count and the
    command that lists them, and `policy validate` still lists each."""
    policy = str(ROOT / "examples" / "own_deployment" / "policy.yaml")
    episodes = str(ROOT / "tests" / "fixtures" / "episodes" / "assistant.jsonl")
    code, _, err = _run(["episodes", "validate", episodes, "--policy", policy], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 0 and lines == [
        f"carbguard: policy {policy}: 4 feature warnings (carbguard policy validate {policy} lists them)"
    ]
    code, _, err = _run(["policy", "validate", policy], capsys)
    assert code == 0 and err.count("warning:") == 4
