"""Artifacts and ``carbguard calibrate`` state the guarantee of their own rule; α in words; the small-n warning."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from guard.artifact import CRC_GUARANTEE, build_artifact
from guard.calibration import crc, ltt
from guard.cli import main
from guard.cli.calibration import alpha_table
from guard.policy import Policy

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_RUNS = ROOT / "tests" / "fixtures" / "agentdojo_runs"


def _chosen(rule: str, delta: float = 0.05) -> ltt.RuleThreshold:
    rng = np.random.default_rng(7)
    scores = rng.random(400)
    harm = np.where(rng.random(200) < 0.5, rng.random(200), np.inf)
    return ltt.threshold_by_rule(scores, harm, rule, 0.2, delta)


def _artifact(policy: Policy, chosen: ltt.RuleThreshold) -> dict[str, object]:
    return build_artifact(
        [policy],
        alpha=0.2,
        n=200,
        threshold=chosen.threshold,
        calibration_risk=chosen.risk,
        grid=chosen.grid,
        rule=chosen.rule,
        calibration_fingerprint="abc",
        command="carbguard calibrate ...",
        risk_fields=ltt.rule_fields(chosen.rule, alpha=0.2, n=200, calibration_risk=chosen.risk),
    )


def test_ltt_artifact_states_the_ltt_guarantee_with_its_delta(small_policy: Policy) -> None:
    """An LTT artifact states P(R(λ̂) <= α) >= 1 - δ with its δ and names its empirical risk and p-value.

    Catches: LTT artifacts sharing the CRC in-expectation text, or labelling the corrected CRC
    figure (k+1)/(n+1) as their calibration risk.
    """
    chosen = _chosen("ltt", delta=0.05)
    body = _artifact(small_policy, chosen)
    text = str(body["guarantee"])
    assert "P(R(lambda_hat) <= alpha) >= 1 - delta" in text and "delta=0.05" in text and "alpha=0.2" in text
    assert "in expectation" not in text and "calibration_risk" not in body
    grid = np.asarray(chosen.grid)
    rng = np.random.default_rng(7)  # the harm levels of _chosen, recomputed
    rng.random(400)
    harm = np.where(rng.random(200) < 0.5, rng.random(200), np.inf)
    k = int((grid[grid.tolist().index(chosen.threshold)] >= harm).sum())
    assert body["empirical_calibration_risk"] == k / 200
    fields = body["ltt"]
    assert isinstance(fields, dict) and fields["charged"] == k and fields["delta"] == 0.05
    expected_p = sum(math.comb(200, i) * 0.2**i * 0.8 ** (200 - i) for i in range(k + 1))
    assert fields["p_value"] == pytest.approx(expected_p, rel=1e-9) and fields["p_value"] <= 0.05


def test_crc_artifact_states_the_crc_guarantee(small_policy: Policy) -> None:
    """A CRC artifact keeps the in-expectation text and the corrected risk (k+1)/(n+1), byte for byte.

    Catches: the rule switch leaking the LTT text or fields into CRC artifacts (which would change
    the shipped artifacts' bytes).
    """
    body = _artifact(small_policy, _chosen("carb"))
    assert body["guarantee"] == CRC_GUARANTEE and "in expectation" in CRC_GUARANTEE
    assert "ltt" not in body and "empirical_calibration_risk" not in body and "calibration_risk" in body


def test_calibrate_cli_prints_the_rule_s_guarantee(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`calibrate --rule ltt` prints the empirical risk, the p-value and the LTT guarantee; carb the CRC one.

    Catches: the CLI labelling an LTT artifact's figure "calibration risk (corrected)".
    """
    out = tmp_path / "ltt.json"
    assert (
        main(
            [
                "calibrate",
                "--runs",
                str(FIXTURE_RUNS),
                "--alpha",
                "0.5",
                "--rule",
                "ltt",
                "--delta",
                "0.2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "empirical calibration risk=" in printed and "LTT p-value" in printed and "delta=0.2" in printed
    assert "corrected" not in printed and "P(R(lambda_hat) <= alpha) >= 1 - delta" in printed
    assert "delta=0.2" in json.loads(out.read_text())["guarantee"]
    plain = ["calibrate", "--runs", str(FIXTURE_RUNS), "--alpha", "0.5", "--group-by", "none"]
    assert main([*plain, "--out", str(tmp_path / "c.json")]) == 0
    printed = capsys.readouterr().out
    assert "calibration risk (corrected)=" in printed and CRC_GUARANTEE in printed


def test_readme_alpha_table_is_the_command_output(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's α table is exactly `carbguard calibrate --alpha-table`, and its entries are α/s.

    Catches: the table drifting from the command (edited by hand, or the command changed).
    """
    assert main(["calibrate", "--alpha-table"]) == 0
    printed = capsys.readouterr().out
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- alpha-table -->\n(.*?)<!-- /alpha-table -->", readme, re.S)
    assert found is not None and "`carbguard calibrate --alpha-table`" in readme
    assert found.group(1) == printed == alpha_table() + "\n"
    row = alpha_table(alphas=[0.05], shares=[0.5, 0.05]).splitlines()[-1]
    assert row == "| 0.05 | 0.10 | none (≥ 1) |"


def test_calibrate_help_says_what_alpha_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    """The --alpha help says it bounds loss per episode over all traffic, not per attack, and points to ltt.

    Catches: the help describing α as a bare "risk level".
    """
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "over ALL traffic, not a per-attack rate" in text and "alpha/s" in text and "--rule ltt" in text


def _monte_carlo_exceeds(n: int, alpha: float, level: float, draws: int = 4000) -> float:
    """P(R(λ̂) > level) for CRC by simulation: uniform harm levels (R(λ) = λ), a dense grid, the CRC rule itself."""
    rng = np.random.default_rng(2024)
    levels = rng.random(n * draws)
    grid = np.concatenate([[-np.inf], np.linspace(0.0, 1.0, 20001)])
    lam = crc.carb_thresholds_for_permutations(levels, grid, np.arange(n * draws).reshape(draws, n), alpha)
    return float(np.mean(np.maximum(lam, 0.0) > level))


def test_small_n_warning_matches_a_simulation() -> None:
    """At n < 100 the warning quotes P(R(λ̂) > 2α), and it matches a seeded simulation of the CRC rule.

    Catches: a wrong Beta parameter (e.g. Beta(m, n - m + 1)) or a wrong tail in the quoted figure.
    """
    warning = ltt.small_n_warning("carb", 40, 0.1, 0.1)
    assert warning is not None
    for label, level in (("2*alpha", 0.2), ("alpha", 0.1)):
        found = re.search(rf"P\(R\(lambda_hat\) > {re.escape(label)}\) = ([0-9]+\.[0-9]+)", warning)
        assert found is not None
        assert float(found.group(1)) == pytest.approx(_monte_carlo_exceeds(40, 0.1, level), abs=0.02)


def test_small_n_warning_on_stderr_only_at_small_n(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`calibrate` on the tiny fixture corpus warns on stderr; the warning is absent at n >= 100.

    Catches: the warning never printed, printed at every n, or printed on stdout.
    """
    plain = ["calibrate", "--runs", str(FIXTURE_RUNS), "--alpha", "0.5", "--group-by", "none"]
    assert main([*plain, "--out", str(tmp_path / "a.json")]) == 0
    out, err = capsys.readouterr()
    assert "warning: only n=" in err and "P(R(lambda_hat) > 2*alpha)" in err and "warning: only" not in out
    assert ltt.small_n_warning("carb", 100, 0.1, 0.1) is None and ltt.small_n_warning("ltt", 500, 0.1, 0.1) is None
    assert ltt.small_n_warning("ltt", 99, 0.1, 0.1) is not None
