"""The one ``carbguard`` parser: every option documented, one name per command, ``--version``, the bench list.

Every argument parser lives under ``guard/cli/``; the walk below goes through every subcommand of
:func:`guard.cli.build_parser` and fails on an option or subcommand without help text.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import guard
from guard.cli import build_parser, main
from guard.cli.bench import BENCHMARKS, STUDIES

ROOT = Path(__file__).resolve().parents[1]


def _walk(parser: argparse.ArgumentParser, path: str = "carbguard") -> Iterator[tuple[str, argparse.Action]]:
    """``(command path, action)`` for every action of ``parser`` and of its subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                yield f"{path} {name}", argparse.Action([name], name, help=helps.get(name))
                yield from _walk(child, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield path, action


def undocumented(parser: argparse.ArgumentParser) -> list[str]:
    """The options, positionals and subcommands of ``parser`` (recursively) that have no help text.

    An option hidden on purpose (``help=argparse.SUPPRESS``, e.g. a removed option kept to name its
    replacement in an error) is not listed by ``--help`` and counts as documented.
    """
    return [
        f"{path}: {'/'.join(a.option_strings) or a.dest}"
        for path, a in _walk(parser)
        if not (isinstance(a.help, str) and a.help.strip())
    ]


def test_every_option_and_subcommand_has_help() -> None:
    """Catches an option, positional argument or subcommand added without help text."""
    assert undocumented(build_parser()) == []


def test_the_help_walk_finds_a_planted_option_without_help() -> None:
    """Catches a walk that misses options of nested subcommands (so the check above could never fail)."""
    parser = build_parser()
    ledger = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["ledger"]
    check = next(a for a in ledger._actions if isinstance(a, argparse._SubParsersAction)).choices["check"]
    check.add_argument("--planted")
    assert undocumented(parser) == ["carbguard ledger check: --planted"]


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a missing or wrong ``carbguard --version``."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"carbguard {guard.__version__}"


def test_bench_help_lists_every_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a benchmark in benchmarks/ or a bench study that ``carbguard bench --help`` does not list."""
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out = capsys.readouterr().out
    shipped = {p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.stem.startswith("_")} - {"__init__"}
    assert shipped == {spec.module for spec in BENCHMARKS.values()}
    for name in [*STUDIES, *BENCHMARKS]:
        assert f"    {name} " in out or f"    {name}\n" in out, name


def test_one_name_per_command() -> None:
    """Catches a second spelling of a command (``ledger-check`` next to ``ledger check``)."""
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert "ledger-check" not in top and "ledger" in top
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["ledger-check"])
    assert exit_info.value.code == 2


def _argparse_users(root: Path, folders: tuple[str, ...]) -> list[str]:
    users = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
            mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            if ("argparse" in names or "argparse" in mods) and not rel.startswith("guard/cli/"):
                users.append(rel)
    return users


def test_every_parser_lives_under_guard_cli(tmp_path: Path) -> None:
    """Catches an argument parser added outside guard/cli/ (in the package or the benchmarks)."""
    assert _argparse_users(ROOT, ("guard", "benchmarks")) == []
    (tmp_path / "guard").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "guard" / "study.py").write_text("import argparse\n", encoding="utf-8")
    assert _argparse_users(tmp_path, ("guard", "benchmarks")) == ["guard/study.py"]
