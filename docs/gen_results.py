"""Rewrite every generated results table of the documentation from the commands' ``--json`` output.

    .venv/bin/python docs/gen_results.py            # run every command, rewrite the tables
    .venv/bin/python docs/gen_results.py --check    # exit 1 if a committed table differs from fresh output
    .venv/bin/python docs/gen_results.py --only evaluate --save /tmp/json   # one job; keep its JSON
    .venv/bin/python docs/gen_results.py --load /tmp/json                   # reuse saved JSON

A table lives in a page between ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``; the
generator replaces what is between them with the command that printed the JSON and the table the
project's own formatter makes of it. Nothing else of the page changes.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ALPHAS_CROSS = ["--alpha", "0.01", "--alpha", "0.025", "--alpha", "0.05", "--alpha", "0.1"]

#: job name → the carbguard arguments that print its JSON
JOBS: dict[str, list[str]] = {
    "evaluate": ["evaluate", "--fit-scorer", "--json"],
    "ablation": ["evaluate", "--corpus", "all", "--fit-scorer", "--ablation", "--json"],
    "cross_model": ["evaluate", "--cross-model", *ALPHAS_CROSS, "--json"],
    "ledger": ["ledger", "check", "--corpus", "all", "--json"],
    "constructed": ["bench", "constructed", "--json"],
    "safecommit_bench": ["bench", "safecommit", "--json"],
    "evasion": ["bench", "evasion", "--json"],
    "safecommit_study": ["safecommit", "study", "--json"],
    "shift": ["evaluate", "--shift", "--ablation", "--json"],
    "composed_shift": ["safecommit", "study", "--shift", "--probe-answers", "agentdojo", "--json"],
}
#: jobs too long for the test suite's check (the composed gate under shift: about 15 minutes on 2 cores);
#: ``gen_results.py`` runs them, ``tests/test_docs_results.py`` checks them only with CARBGUARD_LONG_RESULTS=1
LONG_JOBS = frozenset({"composed_shift"})


def _shift(corpus: str | None) -> Callable[[Mapping[str, Any]], str]:
    """The shift report of ``corpus`` (None: every corpus, the pooled one with its ablation)."""

    def render(data: Mapping[str, Any]) -> str:
        from guard.studies.shift import format_shift

        found = [c for c in _corpora(data) if corpus is None or c["corpus"] == corpus]
        return "\n\n".join(format_shift(c) for c in found)

    return render


def _corpora(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(data["corpora"]) if "corpora" in data else [dict(data)]


def _summary(data: Mapping[str, Any]) -> str:
    from guard.calibration.evaluate import format_summary

    return format_summary(_corpora(data))


def _methods(corpus: str) -> Callable[[Mapping[str, Any]], str]:
    def render(data: Mapping[str, Any]) -> str:
        from guard.calibration.evaluate import format_rows

        (found,) = [c for c in _corpora(data) if c["corpus"] == corpus]
        head = (
            f"corpus {found['corpus']}: {found['n_episodes']} episodes ({found['n_dropped']} dropped, "
            f"{found['n_excluded_injection_goal_runs']} injection-goal runs excluded), "
            f"{found['permutations']} permutations, 50/50 splits"
        )
        return head + "\n" + format_rows(found["results"])

    return render


def _fitted(data: Mapping[str, Any]) -> str:
    from guard.calibration.fit_jobs import format_side_by_side

    parts = [format_side_by_side(c).splitlines() for c in _corpora(data)]
    return "\n".join([*parts[0][:3], *(line for part in parts for line in part[3:])])


def _weights(data: Mapping[str, Any]) -> str:
    lines = []
    for c in _corpora(data):
        mean = ", ".join(f"{k}={v:.3f}" for k, v in c["fitted"]["weights_mean"].items())
        lines.append(f"{c['corpus']:<36}{mean}")
    return "\n".join(lines)


def _ablation(data: Mapping[str, Any]) -> str:
    from guard.calibration.fit_jobs import format_ablation

    return format_ablation(dict(data))


def _cross_model(data: Any) -> str:
    from guard.calibration.threeway import format_cross_model

    return format_cross_model(data)


def _ledger(data: Any) -> str:
    from guard.studies.ledger_check import format_check

    return format_check(data)


def _constructed(data: Any) -> str:
    from guard.studies._diagnostics_report import format_constructed

    return format_constructed(data)


def _safecommit_bench(data: Any) -> str:
    from guard.studies.safecommit_bench import format_tables

    return format_tables(data)


def _evasion(data: Any) -> str:
    from guard.studies.evasion import format_evasion

    return format_evasion(data)


def _composed_shift(data: Any) -> str:
    from guard.studies.composed_shift import format_composed

    return format_composed(data)


def _safecommit_study(data: Any) -> str:
    from guard.studies.safecommit_agentdojo import format_study

    return format_study(data)


@dataclass(frozen=True)
class Table:
    """One generated table: where it goes, which job's JSON it reads, how it is rendered."""

    page: str
    name: str
    job: str
    render: Callable[[Any], str]
    #: the carbguard arguments that print this table as is (its text form), when they differ from the job's
    printed_by: tuple[str, ...] = ()


MODELS = (
    "claude-3-7-sonnet-20250219",
    "command-r-plus",
    "gpt-4o-2024-05-13",
    "meta-llama_Llama-3-70b-chat-hf",
    "meta-llama_Llama-3.3-70B-Instruct",
)

TABLES: tuple[Table, ...] = (
    Table("results.md", "summary", "evaluate", _summary, ("evaluate",)),
    Table("results.md", "fitted", "evaluate", _fitted),
    Table("results.md", "methods-all", "evaluate", _methods("all"), ("evaluate",)),
    *(Table("results.md", f"methods-{m}", "evaluate", _methods(m), ("evaluate",)) for m in MODELS),
    Table("results.md", "cross-model", "cross_model", _cross_model),
    Table("results.md", "shift-all", "shift", _shift("all")),
    Table("shift.md", "shift", "shift", _shift(None)),
    Table("evidence-results.md", "weights", "evaluate", _weights),
    Table("evidence-results.md", "ablation", "ablation", _ablation),
    Table("ledger.md", "ledger-check", "ledger", _ledger),
    Table("studies.md", "constructed", "constructed", _constructed),
    Table("studies.md", "safecommit-bench", "safecommit_bench", _safecommit_bench),
    Table("studies.md", "evasion", "evasion", _evasion),
    Table("studies.md", "safecommit-study", "safecommit_study", _safecommit_study),
    Table("studies.md", "composed-shift", "composed_shift", _composed_shift),
)


def command(job: str) -> str:
    """The command line that prints ``job``'s JSON, as a reader types it."""
    return " ".join([".venv/bin/carbguard", *JOBS[job]])


def run_job(job: str) -> Any:
    """Run ``job``'s command with this interpreter and parse its JSON; raise with its stderr on failure."""
    argv = [sys.executable, "-m", "guard", *JOBS[job]]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603 - our own CLI
    if done.returncode != 0:
        raise SystemExit(f"gen_results: `{command(job)}` exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def _clean(text: str) -> str:
    """``text`` without pointers to design documents outside the repository (as the site's hooks drop them)."""
    return re.sub(r"\s*\((?:METHOD|seed 000) §[^)]*\)", "", text)


def label(table: Table) -> str:
    """The line above a table: the command that prints it, and the job this page renders it from if that differs.

    The README's ``carbguard evaluate`` prints the summary and the per-method tables exactly as shown; the page
    renders them from the JSON of ``evaluate --fit-scorer --json``, whose two-way rows are the same.
    """
    if not table.printed_by:
        return f"Command: `{command(table.job)}`"
    shown = " ".join([".venv/bin/carbguard", *table.printed_by])
    return f"Command: `{shown}` prints this table (this page renders it from `{command(table.job)}`)"


def block(table: Table, data: Any) -> str:
    """The generated Markdown between a table's markers."""
    text = _clean(table.render(data).rstrip())
    return f"\n{label(table)}\n\n```text\n{text}\n```\n"


def _region(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- results:{re.escape(name)} -->)(.*?)(<!-- /results:{re.escape(name)} -->)", re.S)


def rewrite(text: str, table: Table, data: Any) -> str:
    """``text`` with the region of ``table`` replaced by fresh output; error if the page lacks it."""
    pattern = _region(table.name)
    if not pattern.search(text):
        raise SystemExit(f"gen_results: docs/{table.page} has no <!-- results:{table.name} --> region")
    return pattern.sub(lambda m: m.group(1) + block(table, data) + m.group(3), text)


def generate(tables: Sequence[Table], load: Path | None = None, save: Path | None = None) -> dict[str, str]:
    """Fresh text of every page the tables touch (nothing written)."""
    cache: dict[str, Any] = {}
    pages: dict[str, str] = {}
    for table in tables:
        if table.job not in cache:
            if load is not None and (load / f"{table.job}.json").exists():
                cache[table.job] = json.loads((load / f"{table.job}.json").read_text(encoding="utf-8"))
            else:
                start = time.monotonic()
                print(f"gen_results: {command(table.job)}", file=sys.stderr)
                cache[table.job] = run_job(table.job)
                print(f"gen_results: {table.job} took {time.monotonic() - start:.0f} s", file=sys.stderr)
            if save is not None:
                save.mkdir(parents=True, exist_ok=True)
                (save / f"{table.job}.json").write_text(json.dumps(cache[table.job]), encoding="utf-8")
        text = pages.get(table.page) or (DOCS / table.page).read_text(encoding="utf-8")
        pages[table.page] = rewrite(text, table, cache[table.job])
    return pages


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="compare with the committed pages; exit 1 on a difference")
    parser.add_argument("--only", action="append", choices=sorted(JOBS), help="only the tables of this job")
    parser.add_argument("--load", type=Path, help="read JOB.json from this folder instead of running the job")
    parser.add_argument("--save", type=Path, help="write each job's JSON to this folder")
    args = parser.parse_args(argv)
    tables = [t for t in TABLES if not args.only or t.job in args.only]
    pages = generate(tables, load=args.load, save=args.save)
    stale = [page for page, text in pages.items() if (DOCS / page).read_text(encoding="utf-8") != text]
    if args.check:
        for page in stale:
            print(f"gen_results: docs/{page} is out of date: run .venv/bin/python docs/gen_results.py", file=sys.stderr)
        return 1 if stale else 0
    for page in stale:
        (DOCS / page).write_text(pages[page], encoding="utf-8")
        print(f"gen_results: rewrote docs/{page}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
