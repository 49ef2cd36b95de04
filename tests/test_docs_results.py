"""The committed results tables of the documentation equal fresh output of the commands that print them."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_gen_results_check", ROOT / "docs" / "gen_results.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen
    spec.loader.exec_module(gen)
    return gen


gen = _generator()


@pytest.mark.slow
@pytest.mark.parametrize(
    "job",
    [
        pytest.param(
            job,
            marks=pytest.mark.skipif(
                job in gen.LONG_JOBS and not os.environ.get("CARBGUARD_LONG_RESULTS"),
                reason="a long job (docs/gen_results.py LONG_JOBS): set CARBGUARD_LONG_RESULTS=1 to check it",
            ),
        )
        for job in sorted(gen.JOBS)
    ],
)
def test_results_tables_are_up_to_date(job: str) -> None:
    """Catches a results table that no longer matches its command (rerun .venv/bin/python docs/gen_results.py)."""
    tables = [t for t in gen.TABLES if t.job == job]
    assert tables, job
    pages = gen.generate(tables)
    for page, text in pages.items():
        committed = (ROOT / "docs" / page).read_text(encoding="utf-8")
        fresh = {t.name: gen._region(t.name).search(text) for t in tables if t.page == page}
        for name, found in fresh.items():
            old = gen._region(name).search(committed)
            assert found is not None and old is not None, name
            assert old.group(2) == found.group(2), (
                f"docs/{page}: table {name} is out of date; run .venv/bin/python docs/gen_results.py"
            )
