"""The committed results tables of the documentation equal fresh output of the commands that print them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_results_tables_are_up_to_date() -> None:
    """Catches a results table that no longer matches its command (rerun .venv/bin/python docs/gen_results.py)."""
    spec = importlib.util.spec_from_file_location("docs_gen_results_check", ROOT / "docs" / "gen_results.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen
    spec.loader.exec_module(gen)
    pages = gen.generate(gen.TABLES)
    stale = [page for page, text in pages.items() if (ROOT / "docs" / page).read_text(encoding="utf-8") != text]
    assert not stale, f"out of date: {stale}; run .venv/bin/python docs/gen_results.py"
