"""Fixtures of the adapter tests; makes ``guard.adapters`` importable from a plain source checkout.

An installed carbguard (``pip install -e .`` or a wheel) maps the top-level ``adapters/`` folder to
``guard.adapters`` (pyproject ``[tool.setuptools.package-dir]``).  When the tests run from a
source tree that was never installed, the same mapping is made here with a ``sys.modules`` entry.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def _alias_adapters() -> None:
    """Register ``ROOT/adapters`` as ``guard.adapters`` unless it already resolves."""
    import guard

    try:
        if importlib.util.find_spec("guard.adapters") is not None:
            return
    except ModuleNotFoundError:
        pass
    spec = importlib.util.spec_from_file_location(
        "guard.adapters", ROOT / "adapters" / "__init__.py", submodule_search_locations=[str(ROOT / "adapters")]
    )
    if spec is None or spec.loader is None:  # pragma: no cover - the folder is part of the checkout
        raise ImportError(f"cannot load {ROOT / 'adapters'} as guard.adapters")
    module = importlib.util.module_from_spec(spec)
    sys.modules["guard.adapters"] = module
    spec.loader.exec_module(module)
    guard.adapters = module  # type: ignore[attr-defined]


_alias_adapters()
