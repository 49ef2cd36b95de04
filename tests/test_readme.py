"""The README's quick start runs as written, and its policy reference matches the schema."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_quick_start_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first Python block of the README executes and its assertions hold."""
    block = re.search(r"```python\n(import guard\n.*?)```", README, re.S)
    assert block is not None
    monkeypatch.chdir(ROOT)
    code = block.group(1).replace('audit="audit.jsonl"', f'audit="{tmp_path / "audit.jsonl"}"')
    exec(compile(code, "README.md", "exec"), {})


def test_policy_reference_matches_schema() -> None:
    """Every top-level policy key of the schema is documented in the README's reference, and no other."""
    from guard.policy import policy_json_schema

    keys = set(policy_json_schema()["properties"])
    section = README.split("## Policy files", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))
    assert documented == keys
