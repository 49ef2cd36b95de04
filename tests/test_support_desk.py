"""The support-desk worked example (examples/support_desk, docs/support-desk.md): the page's command runs as
written, its results block and the numbers its prose quotes are what the command prints, and its policy block
is the example's policy file."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from examples.support_desk import run

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "support-desk.md").read_text(encoding="utf-8")


def _printed(capsys: pytest.CaptureFixture[str]) -> str:
    block = re.search(r"```bash \{\.notest\}\n\.venv/bin/python -m examples\.support_desk\.run (.*)\n```", PAGE)
    assert block is not None, "the page's command is gone"
    run.main(shlex.split(block.group(1)))
    return capsys.readouterr().out


def test_the_results_block_is_what_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a stale results block: the page's own command runs here and must print the block exactly."""
    block = PAGE.split("## Results", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    assert _printed(capsys) == block


def test_the_quoted_numbers_are_the_measured_ones(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches prose quoting numbers the command no longer prints (labels and charges of each policy), and a
    ledger in which the spellings stop paying off (more labels with them than without)."""
    rows = {line.split()[0]: [int(x) for x in line.split()[1:]] for line in _printed(capsys).splitlines()[2:]}
    prose = " ".join(PAGE.split("## Results", 1)[1].split("```", 2)[2].split())
    plain, owned = rows["plain"], rows["owned"]
    assert f"need {plain[2]} override labels for {plain[0]} rule charges" in prose
    assert f"the rules charge {owned[0]} episodes and need {owned[2]} override labels" in prose
    assert owned[2] < plain[2] and owned[3] <= plain[3]


def test_the_policy_block_is_the_example_policy() -> None:
    """Catches a page whose policy drifted from examples/support_desk/policy.yaml."""
    text = (ROOT / "examples" / "support_desk" / "policy.yaml").read_text(encoding="utf-8")
    body = text[text.index("version: 1") :]
    assert f"```yaml\n{body}```" in PAGE


@pytest.mark.slow
def test_the_gate_block_is_what_the_commands_print(tmp_path: Path) -> None:
    """Catches a stale gate block, or a gate that stops a benign task of the example (a planted owner or
    trusted-field reading that no longer lowers its evidence) or lets a planted harm run: the page's commands
    run here, in order, in a fresh folder, and their output must be the block."""
    import os
    import subprocess
    import sys

    section = PAGE.split("## The gate", 1)[1]
    commands = section.split("```bash {.notest}\n", 1)[1].split("```", 1)[0].splitlines()
    expected = section.split("```text\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    printed = ""
    for command in commands:
        words = [str(ROOT / w) if w.startswith("examples/") else w for w in shlex.split(command)]
        head = ["-m", "guard"] if words[0] == ".venv/bin/carbguard" else []
        done = subprocess.run(
            [sys.executable, *head, *words[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, (command, done.stderr[-2000:])
        if words[0] != ".venv/bin/carbguard":
            printed += done.stdout
    assert printed == expected
