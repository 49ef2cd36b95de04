"""The documentation site: generated references match the code, results regions exist, the strict build passes."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_{name}", ROOT / "docs" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


hooks = _load("hooks")
gen = _load("gen_results")


def test_policy_reference_covers_the_schema() -> None:
    """Catches a policy key or schema definition that the generated reference leaves out."""
    from guard.policy import policy_json_schema

    schema = policy_json_schema()
    text = hooks.policy_reference()
    for key in schema["properties"]:
        assert f"| `{key}` |" in text, key
    for name, sub in schema["$defs"].items():
        assert f"### {name}" in text, name
        for key in sub.get("properties", {}):
            assert f"| `{key}` |" in text, (name, key)


def test_cli_reference_covers_every_command_and_option() -> None:
    """Catches a subcommand or option of the parsers that the generated CLI reference leaves out, and a hidden
    option (help suppressed: kept only to refuse it) shown with argparse's ``==SUPPRESS==`` marker as its meaning."""
    import argparse

    from guard.cli import build_parser

    text = hooks.cli_reference()
    assert argparse.SUPPRESS not in text

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        assert f"### `{path}`" in text, path
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help") and action.help != argparse.SUPPRESS:
                    assert f"`{option}`" in text, (path, option)
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")

    walk(build_parser(), "carbguard")


def test_generated_text_has_no_outside_pointers() -> None:
    """Catches a design-document pointer (METHOD §N) leaking from docstrings or help into the pages."""
    assert hooks.clean("the gate (METHOD §6) decides") == "the gate decides"  # a planted outside pointer
    for text in (hooks.policy_reference(), hooks.cli_reference()):
        assert "METHOD §" not in text


def test_markers_are_filled() -> None:
    """Catches an include line that the build would leave as a bare link (a missing file or a changed wording),
    or a reference page that lost its generated block."""
    pages = sorted((ROOT / "docs").rglob("*.md"))
    includes = [(p, m) for p in pages for m in hooks.MARKER.finditer(p.read_text(encoding="utf-8"))]
    assert {m.group(1) for _, m in includes} >= {"CHANGELOG.md"}
    for page, match in includes:
        shown = hooks.expand(page.read_text(encoding="utf-8"))
        assert not hooks.MARKER.search(shown), page
        assert (ROOT / match.group(1)).read_text(encoding="utf-8").split("\n", 2)[1] in shown, page
    assert "## [Unreleased]" in hooks.expand((ROOT / "docs" / "changelog.md").read_text(encoding="utf-8"))
    blocks = {m.group(1) for p in pages for m in hooks.GENERATED.finditer(p.read_text(encoding="utf-8"))}
    assert blocks == set(hooks.GENERATORS)


#: The HTML comments a page may hold: markers around committed text (generated references, results tables, the
#: monitor's delay table, a note for readers of the raw Markdown).  Any other comment may be a placeholder that
#: only the built site fills, which a reader on GitHub or in an editor never sees filled.
WRAPPERS = re.compile(r"<!-- (?:/?generated: [\w-]+|/?results:[\w.-]+|/?markdown-only|delay-table) -->")
PAIRED = re.compile(r"<!-- (generated: [\w-]+|results:[\w.-]+|markdown-only) -->(.*?)<!-- /\1 -->", re.DOTALL)


def placeholders(markdown: str) -> list[str]:
    """The HTML comments of ``markdown`` that are not markers around committed text, and marker pairs around
    nothing (the text a reader would need is missing from the page)."""
    found = [c for c in re.findall(r"<!--.*?-->", markdown, flags=re.DOTALL) if not WRAPPERS.fullmatch(c)]
    found += [f"<!-- {name} --> (empty)" for name, body in PAIRED.findall(markdown) if not body.strip()]
    if re.search(r"<!-- delay-table -->\s*(?:<!--|\Z)", markdown):
        found.append("<!-- delay-table --> (empty)")
    return found


def test_no_page_holds_a_placeholder_comment() -> None:
    """Every page reads the same in its Markdown as in the site: catches a placeholder comment that only the
    built site fills (the changelog was ``<!-- include: CHANGELOG.md -->``, blank on GitHub) and a generated or
    results block committed empty."""
    assert placeholders("# Changelog\n\n<!-- include: CHANGELOG.md -->\n")
    assert placeholders("<!-- generated: cli-reference -->\n\n<!-- /generated: cli-reference -->")
    assert not placeholders("<!-- results:x -->\nCommand: `x`\n<!-- /results:x -->")
    found = {}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        if shown := placeholders(page.read_text(encoding="utf-8")):
            found[str(page.relative_to(ROOT))] = shown
    assert not found


def test_committed_references_match_the_code() -> None:
    """Catches a committed policy or CLI reference that differs from what ``python docs/hooks.py --write`` makes
    now (a schema key, command, option or help text changed without regenerating; a hand edit inside the block):
    the text between the markers must be the generators' output byte for byte."""
    stale = [str(p.relative_to(ROOT)) for p in hooks.stale_pages()]
    assert not stale, f"stale generated reference in {stale}; run {hooks.COMMAND}"
    for page, name in (("policy.md", "policy-reference"), ("cli.md", "cli-reference")):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        assert hooks.block(name, hooks.GENERATORS[name]()) in text, page


def test_a_planted_stale_line_is_caught_and_regenerated_away(tmp_path: Path) -> None:
    """The staleness check itself: one line planted inside a generated block makes the page stale (and
    ``--check`` fail), regenerating removes exactly that line, and text outside the markers is kept."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    end = "<!-- /generated: cli-reference -->"
    planted = text.replace(end, "| `--removed-option` | an option the parser no longer has |\n" + end)
    assert planted != text
    assert hooks.regenerate(planted, "cli.md") == text
    outside = "A hand-written line.\n\n" + text
    assert hooks.regenerate(outside, "cli.md") == outside
    page = tmp_path / "docs" / "cli.md"
    page.parent.mkdir()
    page.write_text(planted, encoding="utf-8")
    old_root = hooks.ROOT
    hooks.ROOT = tmp_path
    try:
        assert hooks.stale_pages() == [page]
        assert hooks.main(["--check"]) == 1
        assert hooks.main(["--write"]) == 0
        assert page.read_text(encoding="utf-8") == text
        assert hooks.main(["--check"]) == 0
    finally:
        hooks.ROOT = old_root


def test_unusable_generated_markers_are_refused() -> None:
    """Catches an opening marker without its end (regenerating would eat the rest of the page) or an unknown
    generator name passing silently."""
    with pytest.raises(hooks.StaleMarkersError, match="has no <!-- /generated: cli-reference -->"):
        hooks.regenerate("<!-- generated: cli-reference -->\nrest of the page\n", "x.md")
    with pytest.raises(hooks.StaleMarkersError, match="unknown generated block 'nope'"):
        hooks.regenerate("<!-- generated: nope -->\n<!-- /generated: nope -->\n", "x.md")


def test_the_build_keeps_committed_text_and_warns_when_stale(caplog: pytest.LogCaptureFixture) -> None:
    """Catches a build hook that rewrites the committed reference (the site would differ from the Markdown), or
    that lets a stale block through without the warning that fails ``mkdocs build --strict``."""
    text = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
    assert hooks.expand(text) == hooks.plain_fences(text)
    with caplog.at_level("WARNING", logger="mkdocs.hooks.carbguard"):
        hooks.on_page_markdown(text)
        assert not caplog.records
        stale = text.replace("<!-- /generated: policy-reference -->", "stale\n<!-- /generated: policy-reference -->")
        assert "stale" in hooks.on_page_markdown(stale)
    assert any("stale" in r.getMessage() and hooks.COMMAND in r.getMessage() for r in caplog.records)


def test_api_page_points_markdown_readers_to_the_source() -> None:
    """Catches an API page whose raw Markdown leaves a ``:::`` module without a link to its source file (or links
    a file that does not exist), or a Markdown-only note that reaches the built site (its links leave it)."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    note = hooks.MARKDOWN_ONLY.search(text)
    assert note is not None and text.index(note.group(0)) < text.index(":::")
    assert "mkdocs build" in note.group(0) and "mkdocs serve" in note.group(0)
    for directive in re.findall(r"^::: ([\w.]+)$", text, flags=re.MULTILINE):
        spec = None
        for cut in range(directive.count(".") + 1):  # the longest prefix that is a module (the rest: its members)
            with contextlib.suppress(ModuleNotFoundError):
                spec = importlib.util.find_spec(directive.rsplit(".", cut)[0])
            if spec is not None:
                break
        assert spec is not None and spec.origin is not None, directive
        source = Path(spec.origin).resolve().relative_to(ROOT).as_posix()
        assert f"[`{source}`](../{source})" in note.group(0), (directive, source)
    for target in re.findall(r"\]\(\.\./([^)]+)\)", note.group(0)):
        assert (ROOT / target).is_file(), target
    shown = hooks.expand(text)
    assert "markdown-only" not in shown and "](../" not in shown and "::: guard.runtime.Guard" in shown


def test_every_results_region_exists_once() -> None:
    """Catches a results table whose page region is missing or duplicated (the generator would fail or misplace)."""
    for table in gen.TABLES:
        text = (ROOT / "docs" / table.page).read_text(encoding="utf-8")
        assert text.count(f"<!-- results:{table.name} -->") == 1, table.name
        assert text.count(f"<!-- /results:{table.name} -->") == 1, table.name
        region = text.split(f"<!-- results:{table.name} -->", 1)[1].split("<!-- /results:", 1)[0]
        assert region.startswith(f"\n{gen.label(table)}\n"), table.name
        assert f"`{gen.command(table.job)}`" in region, table.name


@pytest.mark.slow
def test_tables_labelled_with_a_printing_command_are_what_it_prints() -> None:
    """Each table whose label names a command that prints it (the README's plain ``carbguard evaluate``) is, as
    committed, a part of that command's output.  Catches a label that names a command which prints other numbers
    (or none: the fitted table needs ``--fit-scorer``), and a table no longer printed as shown."""
    labelled = [t for t in gen.TABLES if t.printed_by]
    assert {t.name for t in labelled} >= {"summary", "methods-all"}
    assert "prints this table" in gen.label(labelled[0]) and "evaluate`" in gen.label(labelled[0])
    printed: dict[tuple[str, ...], str] = {}
    for table in labelled:
        if table.printed_by not in printed:
            argv = [sys.executable, "-m", "guard", *table.printed_by]
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900, check=True)
            printed[table.printed_by] = done.stdout
        committed = gen._region(table.name).search((ROOT / "docs" / table.page).read_text(encoding="utf-8"))
        assert committed is not None, table.name
        body = committed.group(2).split("```text\n", 1)[1].rsplit("\n```", 1)[0]
        assert body in printed[table.printed_by], f"{table.name}: not printed by {' '.join(table.printed_by)}"


def test_rewrite_replaces_only_the_region() -> None:
    """Catches a generator that touches text outside its markers or accepts a page without them."""
    table = gen.Table("x.md", "demo", "ledger", lambda data: f"n={data['n']}")
    page = "before\n<!-- results:demo -->\nold\n<!-- /results:demo -->\nafter\n"
    new = gen.rewrite(page, table, {"n": 3})
    assert new.startswith("before\n<!-- results:demo -->") and new.endswith("<!-- /results:demo -->\nafter\n")
    assert "n=3" in new and "old" not in new
    with pytest.raises(SystemExit, match="no <!-- results:demo --> region"):
        gen.rewrite("no markers here", table, {"n": 3})


def test_nav_lists_every_page() -> None:
    """Catches a page missing from mkdocs.yml's nav, or a nav entry without its page."""
    config: dict[str, Any] = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def files(nav: Any) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [f for item in nav for f in files(item)]
        return [f for value in nav.values() for f in files(value)]

    listed = set(files(config["nav"]))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert listed == pages


def test_fence_marks_are_dropped_so_the_fence_renders_as_code() -> None:
    """Catches a fence whose runner mark (``bash notest``) reaches superfences, which renders it as text."""
    page = "Install:\n\n```bash notest\npip install x\n```\n\n~~~python slow other\nprint(1)\n~~~\n"
    assert hooks.plain_fences(page) == "Install:\n\n```bash\npip install x\n```\n\n~~~python\nprint(1)\n~~~\n"
    assert hooks.expand(page) == hooks.plain_fences(page)
    assert hooks.plain_fences("```bash\nx\n```\n") == "```bash\nx\n```\n"  # an unmarked fence is kept


def test_api_page_reads_as_markdown_with_signatures() -> None:
    """Catches an API page whose raw Markdown holds only ``:::`` directives (a reader on GitHub had to open
    guard/runtime.py for ``Guard.from_policy``'s signature), and signature text leaking into the built site,
    where mkdocstrings renders the same docstrings."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    note = hooks.MARKDOWN_ONLY.search(text)
    assert note is not None
    for signature in ("from_policy(path: str | Path, *, audit:", "decide(tool: str, args: Any, call_id: str)"):
        assert signature in note.group(0), signature
    assert "<!-- generated: api-signatures -->" in note.group(0)
    assert "from_policy(path: str | Path" not in hooks.expand(text)
