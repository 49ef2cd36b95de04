"""The worked deployment (examples/own_deployment) of docs/calibrate.md: every command runs as written, and
every number the page quotes is the one those commands print."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "calibrate.md").read_text(encoding="utf-8")
SECTION = PAGE.split("## Worked example: a seven-tool assistant", 1)[1].split("\n## ", 1)[0]
EXPECTED_EXIT = {"monitor": 3}
ACCEPTS = re.compile(r"\s+\|\|\s+test \$\? -eq (\d+)(?:\s+#.*)?$")  # `cmd || test $? -eq N  # why`


def _commands() -> list[str]:
    block = re.search(r"```bash(?: notest| {\.notest})?\n(.*?)```", SECTION, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def _accepted(line: str) -> tuple[str, int]:
    """The command of a page line and the exit code its ``|| test $? -eq N`` accepts (0 without one)."""
    tail = ACCEPTS.search(line)
    return (line[: tail.start()], int(tail.group(1))) if tail else (line, 0)


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    words = [str(ROOT / w) if w.startswith("examples/") else w for w in words]
    if words[0] == ".venv/bin/carbguard":
        return [sys.executable, "-m", "guard", *words[1:]]
    assert words[0] == ".venv/bin/python"
    return [sys.executable, *words[1:]]


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Run the README's commands in order in a fresh folder; the stdout of each, by its step word."""
    where = tmp_path_factory.mktemp("own_deployment")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out: dict[str, str] = {"_dir": str(where)}
    for line in _commands():
        command, accepted = _accepted(line)
        argv = _argv(command)
        step = argv[3]  # the subcommand: python -m guard STEP ... or python -m examples...run STEP ...
        done = subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == EXPECTED_EXIT.get(step, 0), (command, done.stderr[-2000:])
        assert accepted == done.returncode, f"pasted, the block stops at: {line}"  # `|| test $? -eq N` for exit N
        out[step] = done.stdout
    return out


def test_at_most_ten_commands() -> None:
    """Catches a loop that grew past the ten commands the README promises."""
    assert 1 <= len(_commands()) <= 10


def test_the_block_accepts_each_expected_exit_code() -> None:
    """Catches a non-zero exit by design (``monitor``'s alarm, 3) without ``|| test $? -eq 3`` on its line, which
    stops the block when it is pasted into a shell that stops at errors, and an accepted code the step does not have."""
    accepted = {_argv(_accepted(line)[0])[3]: _accepted(line)[1] for line in _commands()}
    assert {step: code for step, code in accepted.items() if code} == EXPECTED_EXIT
    assert _accepted("x --y || test $? -eq 4  # why") == ("x --y", 4) and _accepted("x") == ("x", 0)


def test_recorded_in_shadow_mode_0600(loop: dict[str, str]) -> None:
    """Catches an episodes file that is world-readable or not recorded in shadow mode."""
    path = Path(loop["_dir"]) / "od" / "episodes.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = path.read_text().splitlines()
    assert len(lines) == 400
    assert {json.loads(x)["meta"]["tags"]["mode"] for x in lines} == {"shadow"}
    assert any("HONEY-" in x for x in lines)  # raw results with the planted honeytokens, as the README says


def test_ledger_and_calibration_numbers(loop: dict[str, str]) -> None:
    """Catches README claims about labels, disagreements and λ̂ that the commands do not print."""
    labels = re.search(r"the (\d+) episodes where the agent followed", SECTION)
    assert labels and f"{labels.group(1)} red-team labels" in loop["record"]
    disagree = re.search(r"agree except on (\d+) episodes", SECTION)
    assert disagree and f"{disagree.group(1)} disagreement(s) between rules and labels" in loop["ledger"]
    cal = re.search(r"λ̂ = ([\d.]+) on n = (\d+), corrected calibration risk ([0-9]+\.[0-9]+)", SECTION)
    assert cal is not None
    assert f"n={cal.group(2)} threshold={cal.group(1)} calibration risk (corrected)={cal.group(3)}" in loop["calibrate"]


@pytest.mark.parametrize(
    "label,method",
    [
        ("no guard", "no_guard"),
        ("guard, G-CARB selection", "carb_gcarb"),
        ("guard, full-prefix selection (this policy's)", "carb_full_prefix"),
    ],
)
def test_table_matches_evaluate(loop: dict[str, str], label: str, method: str) -> None:
    """Catches a README table row (loss, harm-free success, intervention) that evaluate does not print."""
    row = re.search(rf"\| {re.escape(label)} \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", SECTION)
    assert row is not None
    printed = next(line.split() for line in loop["evaluate"].splitlines() if line.startswith(method + " "))
    loss, interv, hfree = printed[2], printed[5], printed[7]
    assert (row.group(1), row.group(2), row.group(3)) == (loss, hfree, interv)


def test_demo_refuses_injected_allows_requested(loop: dict[str, str]) -> None:
    """Catches the enforcing guard letting the injected exfiltration through or blocking the user's own send."""
    lines = loop["demo"].splitlines()
    assert "→ escalate (risk_budget, score 1.20, threshold 1.00): refused" in lines[0]
    assert "→ execute (under_threshold, score 0.85, threshold 1.00): sent" in lines[1]
    assert "score 1.20 > λ̂ = 1.00" in SECTION and "(`execute`, score 0.85)" in SECTION


def test_monitor_alarm_matches(loop: dict[str, str]) -> None:
    """Catches a monitor that misses the planted attack campaign or a README alarm episode it did not print."""
    at = re.search(r"alarm at deployed episode (\d+)", SECTION)
    assert at and f"ALARM at deployed episode {at.group(1)}:" in loop["monitor"]
    rates = re.search(r"gate intervention rate ([\d.]+) in calibration vs ([\d.]+) deployed", SECTION)
    assert rates and re.search(rf"gate intervention rate\s+{rates.group(1)}\s+{rates.group(2)}", loop["monitor"])
    assert (Path(loop["_dir"]) / "od" / "monitor.png").stat().st_size > 1000


def test_monitor_figures_match(loop: dict[str, str]) -> None:
    """Catches README false-alarm / detection-delay figures that the figures command does not print."""
    fa = re.search(r"false alarms in ([\d.]+) of exchangeable", SECTION)
    found = re.search(
        r"within 100\s+episodes in ([\d.]+) of streams, delay median (\d+), 90th percentile (\d+)", SECTION
    )
    assert fa and found
    printed = loop["figures"]
    assert f"false alarms {fa.group(1)} of exchangeable streams" in printed
    assert (
        f"detected within 100 episodes in {found.group(1)}, delay median {found.group(2)}, "
        f"90th percentile {found.group(3)} episodes"
    ) in printed
    assert float(fa.group(1)) <= 0.05 + 3 * (0.05 * 0.95 / 200) ** 0.5
