"""The worked deployment after calibration (docs/monitoring.md, "Worked example, continued"): its commands run as
written — a quiet attack campaign whose harm scores in the benign range, review sampling, the scripted reviewer's
labels, `carbguard monitor --labels`, and the breaker in a running guard — and every number the page quotes is
the one they print.  The same commands on an exchangeable stream (no campaign) stay quiet."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "monitoring.md").read_text(encoding="utf-8")
SECTION = PAGE.split("## Worked example, continued", 1)[1].split("\n## ", 1)[0]
EXPECTED_EXIT = {"monitor": 3}
ACCEPTS = re.compile(r"\s+\|\|\s+test \$\? -eq (\d+)(?:\s+#.*)?$")  # `cmd || test $? -eq N  # why`
pytestmark = pytest.mark.slow


def _commands() -> list[str]:
    block = re.search(r"```bash(?: notest| {\.notest})?\n(.*?)```", SECTION, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def _folder(where: Path) -> dict[str, str]:
    """``where`` set up like a checkout: ``examples`` linked in, ``.venv/bin/python`` and ``.venv/bin/carbguard``
    running this interpreter; the environment to run the page's commands in."""
    (where / "examples").symlink_to(ROOT / "examples")
    bin_dir = where / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, tail in (("python", '"$@"'), ("carbguard", '-m guard "$@"')):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" {tail}\n', encoding="utf-8")
        script.chmod(0o755)
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _run(line: str, where: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=where, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _accepted(line: str) -> tuple[str, int]:
    """The command of a page line and the exit code its ``|| test $? -eq N`` accepts (0 without one)."""
    tail = ACCEPTS.search(line)
    return (line[: tail.start()], int(tail.group(1))) if tail else (line, 0)


def _step(line: str) -> str:
    words = line.split()
    return words[3] if words[0].endswith("python") and words[1] == "-m" else words[1]


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Run the page's commands in order in a fresh folder; the stdout of each, by its step word (last one wins)."""
    where = tmp_path_factory.mktemp("own_deployment_after")
    env = _folder(where)
    out: dict[str, str] = {"_dir": str(where)}
    for line in _commands():
        command, accepted = _accepted(line)
        done = _run(command, where, env)
        step = _step(command)
        assert done.returncode == EXPECTED_EXIT.get(step, 0), (line, done.stdout[-2000:], done.stderr[-2000:])
        assert accepted == done.returncode, f"pasted, the block stops at: {line}"  # `|| test $? -eq N` for exit N
        out[step] = done.stdout
    return out


def test_at_most_ten_commands() -> None:
    """Catches a continuation that grew past ten commands."""
    assert 1 <= len(_commands()) <= 10


def test_the_block_accepts_each_expected_exit_code() -> None:
    """Catches ``monitor``'s alarm (exit 3) without ``|| test $? -eq 3`` on its line: pasted into a shell that
    stops at errors, the block would stop there and never reach the breaker."""
    accepted = {_step(_accepted(line)[0]): _accepted(line)[1] for line in _commands()}
    assert {step: code for step, code in accepted.items() if code} == EXPECTED_EXIT


def test_quiet_campaign_is_about_two_and_a_half_alpha(loop: dict[str, str]) -> None:
    """Catches a campaign that is not the one the page describes: its realised loss must lie within 3 standard
    errors of 2.5α over the deployed sessions, and the page quotes what deploy printed."""
    printed = re.search(r"deployed (\d+) episodes.* (\d+) sessions did a declared harm \(([\d.]+)\)", loop["deploy"])
    assert printed is not None
    n, harmed, share = int(printed.group(1)), printed.group(2), float(printed.group(3))
    assert abs(share - 0.25) <= 3 * (0.25 * 0.75 / n) ** 0.5, share
    assert f"{harmed} of the {n} sessions did a declared harm ({printed.group(3)})" in SECTION


def test_risk_monitor_alarms_within_150_reviewed_sessions(loop: dict[str, str]) -> None:
    """Catches a risk monitor that misses harm scoring in the benign range (or alarms after 150 reviewed
    sessions), and page figures (alarm position, realised loss, the score monitor's peak) the monitor did not
    print."""
    out = loop["monitor"]
    at = re.search(r"RISK ALARM at closed session (\d+)", out)
    assert at is not None and int(at.group(1)) <= 150
    assert f"**risk alarm at reviewed session {at.group(1)}**" in SECTION
    loss = re.search(r"mean realised loss ([\d.]+)", out)
    peak = re.search(r"jumper martingale: final [\d.e+]+, max ([\d.e+]+)", out)
    assert loss and peak and f"mean realised loss {loss.group(1)}" in SECTION
    assert f"score monitor's martingale peaks at {peak.group(1)}" in SECTION
    quiet = "no alarm (this is not evidence" in out
    assert ("the score monitor does not alarm" in SECTION) == quiet
    assert (Path(loop["_dir"]) / "od" / "risk.png").stat().st_size > 1000


def test_breaker_switches_a_running_guard(loop: dict[str, str]) -> None:
    """Catches a running guard that does not switch at its next decision after `monitor --trip` (planted: the trip
    file not polled in decide -> send_email executes), a restart on the same artifact that is not tripped, a
    fallback that stops reads too, a new calibration that stays tripped, or breaker lines on the page that the
    step did not print."""
    lines = loop["breaker"].splitlines()
    assert lines[0].endswith("read_file -> execute")
    assert lines[1].endswith(": exit 3")
    assert "send_email -> escalate (circuit breaker tripped" in lines[2] and "risk alarm" in lines[2]
    assert lines[3] == "restarted on the same artifact: read_file -> execute, send_email -> escalate"
    assert lines[4].endswith("read_file -> execute, send_email -> execute")
    entries = [json.loads(x) for x in (Path(loop["_dir"]) / "od" / "agent.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in entries if e.get("kind") == "breaker"] == ["breaker", "breaker"]
    reason = lines[2].split("breaker audit entry: ", 1)[1]
    for shown in (
        lines[0].rsplit(": ", 1)[1],
        "send_email -> escalate",
        reason,
        lines[3].rsplit(": ", 1)[1],
        lines[4].rsplit(": ", 1)[1],
    ):
        assert shown in SECTION, shown


def test_exchangeable_stream_stays_quiet(loop: dict[str, str]) -> None:
    """The same commands on a stream without a campaign (the calibration distribution, seed 2): the risk monitor
    does not alarm.  Catches a monitor that alarms on traffic whose realised loss is below α (planted: α and δ
    swapped in the sampled risk test -> alarm at level 0.05)."""
    where, env = Path(loop["_dir"]), {**os.environ, "PYTHONPATH": str(ROOT)}
    commands = [
        ".venv/bin/python -m examples.own_deployment.run deploy --artifact od/artifact.json --audit od/calm.jsonl "
        "--episodes 300 --seed 2 --review-rate 1 --review-key-file od/review.key --truth od/calm_truth.jsonl",
        ".venv/bin/carbguard review od/calm.jsonl --out od/calm_sheet.jsonl",
        ".venv/bin/python -m examples.own_deployment.run label --sheet od/calm_sheet.jsonl "
        "--truth od/calm_truth.jsonl --out od/calm_labels.jsonl",
        ".venv/bin/carbguard monitor od/calm.jsonl --artifact od/artifact.json --labels od/calm_labels.jsonl --json",
    ]
    for line in commands:
        done = _run(line, where, env)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
    risk = json.loads(done.stdout)["risk"]
    assert risk["alarm"] is False and risk["n"] == 300, risk["mean_loss"]


def test_review_rate_quarter_weights_picked_sessions_by_four(loop: dict[str, str]) -> None:
    """The same commands at review rate 0.25: the sheet holds only the picked sessions, and the risk monitor's terms
    are 4·L for them and 0 for the others, in start order.  Catches unpicked sessions dropped from the stream or
    the 1/p weight missing (planted: terms picked·L -> the 4.0 terms are 1.0), and the text output not saying
    that the stream is 1/p-weighted."""
    where, env = Path(loop["_dir"]), {**os.environ, "PYTHONPATH": str(ROOT)}
    for line in (
        ".venv/bin/python -m examples.own_deployment.run deploy --artifact od/artifact.json --audit od/q.jsonl "
        "--episodes 80 --shift-after 0 --campaign quiet --seed 3 --review-rate 0.25 --review-key-file od/review.key "
        "--truth od/q_truth.jsonl",
        ".venv/bin/carbguard review od/q.jsonl --out od/q_sheet.jsonl",
        ".venv/bin/python -m examples.own_deployment.run label --sheet od/q_sheet.jsonl --truth od/q_truth.jsonl "
        "--out od/q_labels.jsonl",
    ):
        done = _run(line, where, env)
        assert done.returncode == 0, (line, done.stderr[-2000:])
    argv = ".venv/bin/carbguard monitor od/q.jsonl --artifact od/artifact.json --labels od/q_labels.jsonl"
    risk = json.loads(_run(argv + " --json", where, env).stdout)["risk"]
    rows = (where / "od/q_truth.jsonl").read_text().splitlines()
    truth = {row["session"]: bool(row["harms"]) for row in map(json.loads, rows)}
    picked = {json.loads(x)["episode"] for x in (where / "od/q_sheet.jsonl").read_text().splitlines()}
    assert 0 < len(picked) < 80 and risk["n"] == 80 and risk["review_sampling"]["pending_reviews"] == 0
    terms = [4.0 * truth[s] if s in picked else 0.0 for s in risk["sessions"]]
    assert risk["mean_loss"] == pytest.approx(sum(terms) / 80) and 4.0 in terms
    assert "1/p-weighted estimate" in _run(argv, where, env).stdout
