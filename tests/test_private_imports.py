"""No module imports another module's ``_private`` names: what a sibling needs is public in its module.

The check reads every module of ``guard/`` (and a top-level ``adapters/`` when present) with
:mod:`ast` and reports ``from x import _name`` and ``x._name`` on a name bound to an imported
first-party module.  A private *module* (``from guard.cli import _common``) is fine: its public
names are its interface.  Dunder names are not private.  A planted violation in a copy of the tree
shows that the check can fail.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = ("guard", "adapters")


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(root: Path, dotted: str) -> bool:
    """Whether ``dotted`` names a module or package file under ``root``."""
    base = root.joinpath(*dotted.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` reads from (relative imports resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _violations_in(root: Path, path: Path) -> list[str]:
    module = _module_name(root, path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    bound: dict[str, str] = {}  # local name -> first-party module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, path, node)
            if source.split(".")[0] not in FIRST_PARTY:
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if _is_module(root, target):
                    bound[alias.asname or alias.name] = target
                elif _private(alias.name) and source != module:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: from {source} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FIRST_PARTY:
                    bound[alias.asname or alias.name] = alias.name if alias.asname else alias.name.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            dotted = _dotted(node.value, bound)
            if dotted is not None and dotted != module and not _is_module(root, f"{dotted}.{node.attr}"):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {dotted}.{node.attr}")
    return found


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The first-party module an expression like ``guard.cli`` or ``jobs`` names, else None."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value, bound)
        return None if head is None else f"{head}.{node.attr}"
    return None


def private_imports(root: Path) -> list[str]:
    """Every import of another module's private name under ``root``'s first-party folders."""
    found: list[str] = []
    for top in FIRST_PARTY:
        for path in sorted((root / top).rglob("*.py")) if (root / top).is_dir() else []:
            found.extend(_violations_in(root, path))
    return found


def _copy(tmp_path: Path) -> Path:
    for top in FIRST_PARTY:
        if (ROOT / top).is_dir():
            shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("data", "__pycache__"))
    return tmp_path


def test_no_module_imports_a_private_name_of_another() -> None:
    """Catches a module that imports (or reads through a module) another module's ``_private`` name."""
    assert private_imports(ROOT) == []


def test_a_planted_from_import_of_a_private_name_is_found(tmp_path: Path) -> None:
    """Catches a check that no longer sees ``from guard.x import _name``."""
    root = _copy(tmp_path)
    (root / "guard" / "_private_source.py").write_text("_hidden = 1\n", encoding="utf-8")
    planted = root / "guard" / "planted_user.py"
    planted.write_text("from guard._private_source import _hidden\n", encoding="utf-8")
    assert private_imports(root) == ["guard/planted_user.py:1: from guard._private_source import _hidden"]


def test_a_planted_attribute_read_of_a_private_name_is_found(tmp_path: Path) -> None:
    """Catches a check that no longer sees ``module._name`` on an imported first-party module."""
    root = _copy(tmp_path)
    (root / "guard" / "planted_relative.py").write_text(
        "from . import decision\nimport guard.decision as d\nX = decision._SECRET\nY = d._OTHER\n", encoding="utf-8"
    )
    assert private_imports(root) == [
        "guard/planted_relative.py:3: guard.decision._SECRET",
        "guard/planted_relative.py:4: guard.decision._OTHER",
    ]


def test_private_modules_and_third_party_names_are_allowed(tmp_path: Path) -> None:
    """Catches a check that flags a private module's public names, a private module itself, or a non-guard import."""
    root = _copy(tmp_path)
    (root / "guard" / "planted_ok.py").write_text(
        "import os\nfrom guard.cli import _common\nfrom guard.cli._common import SCOPE\nX = _common.SCOPE\n"
        "Y = os._exit\nZ = __name__\n",
        encoding="utf-8",
    )
    assert private_imports(root) == []


def test_adapters_are_checked_too(tmp_path: Path) -> None:
    """Catches a check that skips the adapters (top-level ``adapters/``, installed as ``guard.adapters``)."""
    root = _copy(tmp_path)
    (root / "guard" / "_src.py").write_text("_n = 1\n", encoding="utf-8")
    (root / "adapters" / "planted.py").write_text("from guard._src import _n\n", encoding="utf-8")
    assert private_imports(root) == ["adapters/planted.py:1: from guard._src import _n"]
