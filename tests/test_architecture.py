"""The floors of the house, checked from the code's imports (README "Architecture").

The import-linter contracts in ``pyproject.toml`` state the floors and the forbidden imports; these
tests run them on this tree and on a copy with a planted violation (so the check itself can fail),
look for import circles with grimp's graph, and load every shipped policy in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
HIGH_FLOORS = ("guard.calibration", "guard.ledger", "guard.corpora", "guard.studies", "guard.report", "guard.cli")
MAX_LINES = 400


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _copy_tree(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "guard", tmp_path / "guard", ignore=shutil.ignore_patterns("data", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _plant(root: Path, module: str, line: str) -> None:
    path = root / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = root / module.replace(".", "/") / "__init__.py"
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


CYCLES = """
import json, grimp, networkx as nx
graph = grimp.build_graph("guard", cache_dir=None)
g = nx.DiGraph()
for module in graph.modules:
    g.add_node(module)
    for imported in graph.find_modules_directly_imported_by(module):
        g.add_edge(module, imported)
print(json.dumps([sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]))
"""


def _cycles(root: Path) -> list[list[str]]:
    """Import circles of the ``guard`` package found under ``root`` (a fresh interpreter, so that
    the copy, not the imported tree, is the one analysed)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", CYCLES], cwd=root, env=env, capture_output=True, text=True, timeout=300, check=True
    )
    found: list[list[str]] = json.loads(done.stdout)
    return found


def test_contracts_hold_on_this_tree() -> None:
    """The floors, the decision path's forbidden imports and the adapters' surface hold (import-linter)."""
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 kept, 0 broken" in done.stdout


@pytest.mark.slow
def test_contracts_fail_on_a_planted_violation(tmp_path: Path) -> None:
    """A copy whose ``stages`` imports the ledger breaks the decision-path and floors contracts."""
    root = _copy_tree(tmp_path)
    _plant(root, "guard.stages", "import guard.ledger  # planted")
    done = _lint(root)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout and "guard.stages -> guard.ledger" in done.stdout


@pytest.mark.slow
def test_adapter_contract_fails_when_an_adapter_reaches_an_internal(tmp_path: Path) -> None:
    """A copy whose LangChain adapter imports the graph module directly breaks the adapters contract."""
    root = _copy_tree(tmp_path)
    _plant(root, "guard.adapters.langchain", "import guard.graph  # planted")
    done = _lint(root)
    assert done.returncode != 0
    assert "adapters: only the public surface" in done.stdout
    assert "guard.adapters.langchain -> guard.graph" in done.stdout


def test_no_import_circles() -> None:
    """No module of guard/ (adapters included) reaches itself through imports, TYPE_CHECKING ones included."""
    assert _cycles(ROOT) == []


def test_circle_check_finds_a_planted_circle(tmp_path: Path) -> None:
    """A copy where ``graph`` imports ``runtime`` (which imports ``graph``) is reported as a circle."""
    root = _copy_tree(tmp_path)
    _plant(root, "guard.graph", "import guard.runtime  # planted")
    found = _cycles(root)
    assert any("guard.graph" in c and "guard.runtime" in c for c in found), found


def test_modules_stay_small() -> None:
    """Every module of guard/ is at most ~400 lines (STYLE: small pieces)."""
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "guard").rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


SHIPPED = sorted(p for p in (ROOT / "policies").rglob("*.yaml") if p.name != "ledger.yaml")

DECIDE_ALL = """
import sys, math
from pathlib import Path
from guard import Guard, load_policy
HIGH = tuple(sys.argv[1].split(","))
for path in sys.argv[2:]:
    policy = load_policy(path)
    guard = Guard.from_policy(path) if policy.calibration.artifact else Guard(policy, threshold=math.inf)
    s = guard.session("s")
    s.observe_user("please handle my requests")
    for i, (name, spec) in enumerate(sorted(policy.tools.items())):
        args = {a: "x" for a in (*spec.payload_args, *spec.identifier_args)}
        s.decide(name, args, f"c{i}")
assert "guard.safecommit.runtime" in sys.modules  # the SafeCommit certifier was built and ran
high = sorted(m for m in sys.modules if m.startswith(HIGH))
assert not high, high
print("ok", len(sys.argv) - 2)
"""


def test_every_shipped_policy_decides_without_high_floors() -> None:
    """In a fresh interpreter, loading every shipped policy (SafeCommit ones included) and deciding a call
    of every tool imports no calibration, ledger, corpus, study, report or CLI module."""
    assert any("agentdojo" in str(p) for p in SHIPPED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", DECIDE_ALL, ",".join(HIGH_FLOORS), *map(str, SHIPPED)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ok {len(SHIPPED)}"
