"""The one ``carbguard`` parser: every option documented, one name per command, ``--version``, the bench list.

Every argument parser lives under ``guard/cli/``; the walk below goes through every subcommand of
:func:`guard.cli.build_parser` and fails on an option or subcommand without help text.
"""

from __future__ import annotations

import argparse
import ast
import json
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
    assert shipped == {spec.module for spec in BENCHMARKS.values()} | {"paired", "paired_worker", "decision_diff"}
    for name in [*STUDIES, *BENCHMARKS, "paired", "decisions"]:
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


FIXTURE_RUNS = ROOT / "tests" / "fixtures" / "agentdojo_runs"


def test_progress_lines_name_the_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches progress lines on stderr that do not say which corpus is being loaded and scored."""
    out = tmp_path / "a.json"
    assert main(["calibrate", "--runs", str(FIXTURE_RUNS), "--alpha", "0.5", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"{FIXTURE_RUNS}: loading AgentDojo runs: " in err
    assert f"{FIXTURE_RUNS}: scoring episodes: " in err


def test_evaluate_writes_a_few_progress_lines_per_job_to_a_log(capsys: pytest.CaptureFixture[str]) -> None:
    """``evaluate`` with stderr in a log (not a terminal): at most five lines per progress bar, its first
    and its final count among them (catches a line per tenth of every job: nine for these nine run files)."""
    assert main(["evaluate", "--runs", str(FIXTURE_RUNS), "--alpha", "0.5", "--permutations", "2"]) == 0
    lines = capsys.readouterr().err.splitlines()
    per_bar: dict[str, list[str]] = {}
    for line in lines:
        label, count = line.rsplit(": ", 1)
        per_bar.setdefault(label, []).append(count.split(" (")[0])
    assert f"{FIXTURE_RUNS}: loading AgentDojo runs" in per_bar and "\r" not in "".join(lines)
    for label, counts in per_bar.items():
        total = counts[-1].split("/")[1]
        assert len(counts) <= 5 and counts[0].startswith("1/") and counts[-1] == f"{total}/{total}", (label, counts)


def test_agentdojo_run_prints_each_row_as_its_suite_completes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches ``agentdojo run`` holding every row back until the last suite is done."""
    import importlib

    from guard.corpora import agentdojo

    # the module object ``from guard.adapters.agentdojo import run_suite`` reads (sys.modules), even when
    # another test re-imported it and left a different object as the package attribute
    adapter = importlib.import_module("guard.adapters.agentdojo")

    seen_before: dict[str, str] = {}

    def fake_run_suite(loaded: object, suite: str, **kwargs: object) -> dict[str, object]:
        seen_before[suite] = capsys.readouterr().out
        rates = {"utility": 0.5, "attack_success": 0.25}
        return {
            "suite": suite,
            "episodes": 2,
            "without_guard": rates,
            "with_guard": rates,
            "decisions_equal": 1,
            "decisions_compared": 1,
        }

    monkeypatch.setattr(agentdojo, "load_embedded", lambda name: object())
    monkeypatch.setattr(adapter, "run_suite", fake_run_suite)
    assert main(["agentdojo", "run", "--suite", "banking", "--suite", "slack"]) == 0
    assert "corpus gpt-4o-2024-05-13" in seen_before["banking"]
    assert "banking" in seen_before["slack"] and "slack" not in seen_before["slack"]
    assert capsys.readouterr().out.startswith("slack")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["ledger", "check"], "needs --policy P --episodes E"),
        (["ledger", "check", "--corpus", "all", "--episodes", "e.jsonl"], "cannot be combined"),
        (["ledger", "check", "--episodes", "e.jsonl"], "needs --policy P --episodes E"),
        (["data", "constructed"], "needs --write DIR or --check"),
    ],
)
def test_merged_commands_refuse_bad_combinations(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches ``ledger check``/``data`` running (or crashing) on an incomplete or mixed set of sources."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("carbguard: error: ") and needle in err and err.count("\n") == 1


def test_ledger_check_corpus_is_the_agentdojo_agreement(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches ``ledger check --corpus`` not running the AgentDojo agreement check that ``ledger-check`` ran."""
    assert main(["ledger", "check", "--corpus", "command-r-plus", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["corpus"] == "command-r-plus" and result["attacked"] > 0


def test_safecommit_calibrate_refuses_to_write_over_its_gate_artifact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches ``safecommit calibrate -o`` overwriting the CARB artifact it reads (nothing may be written)."""
    gate = tmp_path / "gate.json"
    gate.write_text("{}", encoding="utf-8")
    assert main(["safecommit", "calibrate", "--alpha", "0.1", "--gate-artifact", str(gate), "-o", str(gate)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("carbguard: error: ") and "is the input" in err
    assert gate.read_text(encoding="utf-8") == "{}"


@pytest.mark.parametrize(("module", "name"), [(spec.module, name) for name, spec in BENCHMARKS.items()])
def test_python_m_benchmarks_is_the_bench_command(module: str, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a ``python -m benchmarks.NAME`` that parses its own options instead of ``carbguard bench NAME``'s."""
    import importlib

    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module(f"benchmarks.{module}").main(["--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: carbguard bench {name} [-h] [--quick] [--json]")


def test_out_and_json_are_spelled_the_same_everywhere() -> None:
    """Catches an output file spelled only ``--out`` or only ``-o``, or a ``--json`` that takes a value."""
    for path, action in _walk(build_parser()):
        flags = set(action.option_strings)
        if flags & {"-o", "--out"}:
            assert flags == {"-o", "--out"}, path
        if "--json" in flags:
            assert isinstance(action, argparse._StoreTrueAction), path


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["evaluate", "--bogus-flag"], "usage: carbguard evaluate"),
        (["policy", "init", "--bogus-flag"], "usage: carbguard policy init"),
    ],
)
def test_an_unknown_option_shows_the_usage_of_its_own_subcommand(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown option names the subcommand's own usage, exit 2 (catches a return to the top-level usage)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage), err[:200]
    assert "--bogus-flag" in err


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback() -> None:
    """``carbguard ... | head``: exit 141 and an empty stderr (catches a BrokenPipeError traceback)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from guard.cli._common import run_command\n"
        "def spill(_):\n"
        "    for _ in range(100000):\n"
        "        print('x' * 200)\n"
        "    return 0\n"
        "sys.exit(run_command(spill, None))\n"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(10)
        proc.stdout.close()  # the reader goes away, as `head` does
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_an_mcp_server_that_does_not_start_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``policy init --from-mcp`` with a missing server: one stderr line, exit 2 (catches the old traceback)."""
    pytest.importorskip("mcp")
    missing = str(tmp_path / "no-such-server")
    assert main(["policy", "init", "--from-mcp", "--", missing]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("carbguard: error: MCP server") and missing in err[0], err


def test_kappa_hint_names_the_artifact_relative_to_the_policy_folder(tmp_path: Path) -> None:
    """Catches `safecommit calibrate` printing the κ path as given on the command line (relative to the working
    directory) while calling it relative to the policy file: pasted into a policy in another folder, it names
    nothing."""
    from guard.cli.studies import kappa_hint

    policy = tmp_path / "deploy" / "policy.yaml"
    out = tmp_path / "artifacts" / "kappa.json"
    hint = kappa_hint(out, policy, 0.1)
    assert hint.endswith("safecommit: {alpha: 0.1, kappa: {artifact: ../artifacts/kappa.json}}")
    assert (policy.parent / "../artifacts/kappa.json").resolve() == out.resolve()
    assert kappa_hint(tmp_path / "deploy" / "k.json", policy, 0.05).endswith("{artifact: k.json}}")
