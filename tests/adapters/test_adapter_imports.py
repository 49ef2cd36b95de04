"""Adapters import only guard's public surface and the flow module (the import-linter contract in pyproject)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = "adapters: only the public surface of guard and the flow module"
PUBLIC = {"guard.decision", "guard.errors", "guard.policy", "guard.records", "guard.runtime", "guard.session"}
PUBLIC |= {"guard.protocols"}
PUBLIC |= {"guard.progress", "guard.adapters"}


def _contract() -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (found,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == CONTRACT]
    return dict(found)


def test_every_top_level_module_is_public_or_forbidden_to_adapters() -> None:
    """Catches a new module of guard that adapters could import because nobody classified it."""
    top = {f"guard.{p.stem}" for p in (ROOT / "guard").glob("*.py") if p.stem not in ("__init__", "__main__")}
    top |= {f"guard.{p.name}" for p in (ROOT / "guard").iterdir() if (p / "__init__.py").exists()}
    top.discard("guard.data")  # the shipped policies and artifacts: files, no code
    forbidden = set(_contract()["forbidden_modules"])  # type: ignore[arg-type]
    assert not forbidden & PUBLIC
    assert top == forbidden | PUBLIC, sorted(top ^ (forbidden | PUBLIC))


@pytest.mark.slow
def test_the_contract_fails_on_a_planted_import(tmp_path: Path) -> None:
    """A copy whose flow module imports the session's call bookkeeping directly breaks the adapters contract."""
    shutil.copytree(ROOT / "guard", tmp_path / "guard", ignore=shutil.ignore_patterns("data", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    flow = tmp_path / "guard" / "adapters" / "flow.py"
    flow.write_text(flow.read_text(encoding="utf-8") + "\nimport guard.calls  # planted\n", encoding="utf-8")
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--config", str(tmp_path / "pyproject.toml"), "--no-cache"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0
    assert f"{CONTRACT} BROKEN" in " ".join(done.stdout.split())
    assert "guard.adapters.flow -> guard.calls" in done.stdout
