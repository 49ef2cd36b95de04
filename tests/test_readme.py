"""The README is a README: short, with the exact setup and test lines, the α table the CLI prints, live links.

Its code blocks run in tests/test_snippets.py, like every block of the documentation.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.snippets import ROOT, snippets

README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")
SETUP = 'python3 -m venv .venv && .venv/bin/pip install -e ".[all,dev]" && .venv/bin/carbguard evaluate'
INTEGRATIONS = (
    "LangChain `create_agent`",
    "LangGraph `ToolNode`",
    "Your own loop",
    "OpenAI Agents SDK",
    "MCP proxy",
    "AgentDojo",
)


def test_at_most_400_lines() -> None:
    """Catches a README that grows back into a reference manual."""
    assert len(TEXT.splitlines()) <= 400


def test_setup_and_test_commands() -> None:
    """Catches a changed setup line, or a test command that is not one line (CI runs the README's)."""
    blocks = [s for s in snippets(README) if s.language == "bash"]
    assert blocks[0].source.strip() == SETUP
    (test_command,) = [s.source.strip() for s in blocks if "pytest" in s.source]
    assert "\n" not in test_command and test_command.startswith(".venv/bin/python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    argv = shlex.split(test_command)[1:]
    assert f'"$WORK/venv/bin/python" {" ".join(argv)}' in ci


def test_one_quick_start_per_integration() -> None:
    """Catches an integration whose quick start is missing or is not followed by a runnable block."""
    python = [s for s in snippets(README) if s.language == "python" and s.runs]
    for name in INTEGRATIONS:
        at = TEXT.index(f"**{name}**")
        line = TEXT.count("\n", 0, at) + 1
        following = [s for s in snippets(README) if s.line > line and s.runs]
        assert following, name
    assert len(python) >= 6


def test_alpha_table_is_the_cli_output() -> None:
    """Catches a README α table that differs from `carbguard calibrate --alpha-table`."""
    printed = subprocess.run(
        [sys.executable, "-m", "guard", "calibrate", "--alpha-table"], capture_output=True, text=True, check=True
    ).stdout.strip()
    table = TEXT.split("<!-- alpha-table -->\n", 1)[1].split("\n<!-- /alpha-table -->", 1)[0].strip()
    assert table == printed


def test_relative_links_exist() -> None:
    """Catches a README link into docs/ (or any file) that points at nothing."""
    prose = re.sub(r"```.*?```", "", TEXT, flags=re.S)  # links live in prose, not in code blocks
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", prose)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


def test_no_lab_notes() -> None:
    """Catches tracker numbers, design-document pointers and 'today' in the README and the docs."""
    pattern = re.compile(r"(?i:issue \d+|\btoday\b|item \d+)|METHOD §|ARCHITECTURE\.md")
    pages = [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
    prose = {p: re.sub(r"```.*?```|`[^`\n]*`", "", p.read_text("utf-8"), flags=re.S) for p in pages}  # quoted text
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p, text in prose.items() for m in pattern.finditer(text)]
    assert not found, found


def test_no_tracker_citations_in_code_policies_or_tests() -> None:
    """Catches code, shipped policies, examples or tests that cite a tracker number ("Issue 35:") or a
    design document's section ("METHOD §3") instead of this repository's own pages."""
    pattern = re.compile(r"(?i:\bissue \d+|\btracker item\b)|METHOD §|ARCHITECTURE\.md")
    folders = ("guard", "adapters", "examples", "policies", "tests", "benchmarks")
    files = [f for d in folders for ext in ("*.py", "*.yaml", "*.toml") for f in sorted((ROOT / d).rglob(ext))]
    checkers = {Path(__file__).resolve(), ROOT / "tests" / "test_docs_site.py"}  # tests that plant such a pointer
    files = [f for f in files if f.resolve() not in checkers]
    assert len(files) > 100
    found = [f"{f.relative_to(ROOT)}: {m.group(0)}" for f in files for m in pattern.finditer(f.read_text("utf-8"))]
    assert not found, found


def test_readme_paths_are_relative_to_the_root() -> None:
    """Catches a README that names files which do not exist in the repository (typos in paths)."""
    names = set(re.findall(r"`((?:policies|examples|tests|docs|guard)/[\w./-]+)`", TEXT))
    assert names
    assert [n for n in names if not (ROOT / n).exists()] == []
    assert Path(ROOT / "CHANGELOG.md").exists()


def _pooled_shift_rows() -> dict[str, tuple[str, str, str, str]]:
    """The pooled corpus's rows of the shift report on docs/shift.md: row → (loss, hfree) at α .05 and .10."""
    text = (ROOT / "docs" / "shift.md").read_text(encoding="utf-8")
    pooled = text[text.index("corpus all:") :]
    pooled = pooled[: pooled.index("worst row:")]
    rows = {}
    for line in pooled.splitlines():
        match = re.match(r"(\S.*?)\s{2,}\d+\s+[\d.]+ \|\s+([\d.]+)\s+([\d.]+) \|\s+([\d.]+)\s+([\d.]+)$", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3), match.group(4), match.group(5))
    return rows


def test_headline_numbers_are_the_shift_reports() -> None:
    """Catches a README headline (worst row, in-distribution loss and harm-free ratio) left behind when the
    shift report on docs/shift.md was regenerated (docs/gen_results.py rewrites the page, not the README)."""
    rows = _pooled_shift_rows()
    text = (ROOT / "docs" / "shift.md").read_text(encoding="utf-8")
    pooled = text[text.index("corpus all:") :]
    line = pooled[pooled.index("worst row:") :].splitlines()[0]
    named = re.findall(r"a=(0\.05|0\.1): (.+?) \(loss ([\d.]+)\)", line)
    assert len(named) == 2, line
    for (alpha, row, loss), column in zip(named, (0, 2), strict=True):
        shown = row.replace("-2024-05-13", "")  # the README names a model without its date
        cells = rows[row]
        assert cells[column] == loss
        assert f"| {'0.05' if alpha == '0.05' else '0.10'} | {shown} | {loss} | {cells[column + 1]} |" in TEXT
    asis = rows["as is"]
    assert f"is {asis[0]} / {asis[2]} at α = .05 / .10 with {asis[1]} / {asis[3]} of no guard's" in TEXT
    lowest = min(r[1] for r in rows.values())
    assert f"The lowest harm-free ratio of any row is {lowest}" in TEXT
