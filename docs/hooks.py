"""MkDocs hooks: the reference pages are generated from the code at build time.

- ``<!-- generated: policy-reference -->`` becomes the policy reference, walked from
  ``guard.policy.policy_json_schema()`` (every key, its type, default and description);
- ``<!-- generated: cli-reference -->`` becomes the command-line reference, walked from the
  argparse tree of ``guard.cli.build_parser()`` (every command, option and help text);
- ``<!-- include: PATH -->`` becomes the file ``PATH`` of the repository (the changelog).

Internal references to the design documents that live outside this repository (``METHOD §N``) are
dropped from generated text. ``tests/test_docs_site.py`` imports this module by path.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!-- (generated|include): ([\w./-]+) -->")
OUTSIDE = re.compile(r"\s*\((?:METHOD|seed 000) §[^)]*\)|,? ?METHOD §[\d.]+(?:[,;] ?§[\d.]+)*'?s?")


def clean(text: str) -> str:
    """``text`` without pointers to design documents outside the repository."""
    return OUTSIDE.sub("", text)


# --------------------------------------------------------------------------- policy reference


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return f"[{prop['$ref'].rsplit('/', 1)[-1]}](#{prop['$ref'].rsplit('/', 1)[-1].lower()})"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"mapping of name → {_type(prop['additionalProperties'])}"
    return str(kind)


def _cell(text: str) -> str:
    escaped = clean(text).replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")
    return escaped.replace("\n", " ")


def _default(prop: dict[str, Any]) -> str:
    if "default" not in prop:
        return "required" if prop.get("_required") else "—"
    return f"`{json.dumps(prop['default'], ensure_ascii=False)}`"


def _table(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, prop in schema.get("properties", {}).items():
        shown = {**prop, "_required": key in required}
        lines.append(f"| `{key}` | {_type(prop)} | {_default(shown)} | {_cell(prop.get('description', ''))} |")
    return lines


def policy_reference() -> str:
    """The policy reference as Markdown: the top level, then every definition the schema uses."""
    from guard.policy import policy_json_schema

    schema = policy_json_schema()
    out = [f"Schema `{schema['$id']}` ({schema['$schema']}); `carbguard policy schema` prints it.", ""]
    out += ["### Top level", "", *_table(schema), ""]
    for name, sub in sorted(schema.get("$defs", {}).items()):
        out += [f"### {name}", "", _cell(sub.get("description", "")), ""]
        if "enum" in sub:
            out += ["One of " + ", ".join(f"`{json.dumps(v)}`" for v in sub["enum"]) + ".", ""]
        elif "properties" in sub:
            out += [*_table(sub), ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- CLI reference


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name, "")


def _walk(parser: argparse.ArgumentParser, path: str, help_text: str) -> Iterator[str]:
    subs = list(_subcommands(parser))
    yield f"### `{path}`"
    yield ""
    about = help_text or parser.description or ""
    if about:
        yield _cell(about)
        yield ""
    usage = " ".join(parser.format_usage().split())
    yield f"Usage: `{usage.removeprefix('usage: ')}`"
    yield ""
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
        choices = f" (one of {', '.join(str(c) for c in action.choices)})" if action.choices else ""
        text = (action.help or "") % {"default": action.default, "prog": parser.prog} if action.help else ""
        default = action.default
        empty = default is None or default is False or default == [] or default == argparse.SUPPRESS
        shown = not empty and "default" not in text.lower()
        suffix = f" (default: `{default}`)" if shown else ""
        rows.append(f"| {names} | {_cell(text)}{choices}{suffix} |")
    if rows:
        yield "| argument | meaning |"
        yield "| --- | --- |"
        yield from rows
        yield ""
    for name, sub, sub_help in subs:
        yield from _walk(sub, f"{path} {name}", sub_help)


def cli_reference() -> str:
    """The command-line reference as Markdown: every command of ``carbguard``, depth first."""
    from guard.cli import build_parser

    parser = build_parser()
    return "\n".join(_walk(parser, "carbguard", parser.description or ""))


# --------------------------------------------------------------------------- hooks

GENERATORS = {"policy-reference": policy_reference, "cli-reference": cli_reference}


#: A fence whose info string carries words after the language (``bash notest``, ``bash slow``: marks
#: for the snippet runner, ``tests/snippets.py``).  superfences reads such a fence as text, not code.
FENCE_MARKS = re.compile(r"^(?P<fence>[ \t]*(?:`{3,}|~{3,}))(?P<lang>[\w+-]+)(?:[ \t]+[\w-]+)+[ \t]*$", re.MULTILINE)


def plain_fences(markdown: str) -> str:
    """``markdown`` with the runner's marks dropped from fence lines, so every fence renders as code."""
    return FENCE_MARKS.sub(r"\g<fence>\g<lang>", markdown)


def expand(markdown: str) -> str:
    """``markdown`` with every generated or included block filled in, and fence lines without runner marks."""

    def fill(match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2)
        if kind == "generated":
            return GENERATORS[name]()
        text = (ROOT / name).read_text(encoding="utf-8")
        return re.sub(r"\]\((?:docs/)?([\w/-]+\.md)", r"](\1", text.split("\n", 1)[1])

    return plain_fences(MARKER.sub(fill, markdown))


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs hook: fill the generated blocks of a page."""
    return expand(markdown)


def on_page_content(html: str, **kwargs: Any) -> str:
    """MkDocs hook: drop pointers to outside design documents from rendered API docstrings."""
    return clean(html)
