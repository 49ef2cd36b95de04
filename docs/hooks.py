"""The generated reference pages, and the MkDocs hooks of the site.

The policy and command-line references are committed Markdown, so they read the same on GitHub as in
the built site.  Each lives between a pair of markers in its page, and ``python docs/hooks.py --write``
rewrites the text between them from the code (``tests/test_docs_site.py`` fails when it is stale):

- ``<!-- generated: policy-reference -->`` … ``<!-- /generated: policy-reference -->`` (``docs/policy.md``):
  the policy reference, walked from ``guard.policy.policy_json_schema()`` (every key, its type, default
  and description);
- ``<!-- generated: feature-table -->`` … ``<!-- /generated: feature-table -->`` (``docs/evidence.md``): every
  scorer feature, its group, default weight, meaning and computing function, from ``guard/features.py``;
- ``<!-- generated: cli-reference -->`` … ``<!-- /generated: cli-reference -->`` (``docs/cli.md``): the
  command-line reference, walked from the argparse tree of ``guard.cli.build_parser()`` (every command,
  option and help text);
- ``<!-- generated: api-signatures -->`` … ``<!-- /generated: api-signatures -->`` (``docs/api.md``, inside its
  Markdown-only note): every object of the page's ``:::`` directives with its signature and docstring summary,
  so the API reference reads as Markdown too (the site renders the docstrings themselves);
- ``<!-- generated: init-guesses -->`` … ``<!-- /generated: init-guesses -->`` (``docs/policy.md``): what
  ``carbguard policy init`` guesses for the tool sets of ``examples/policy_init/toolsets.json``.

``python docs/hooks.py --check`` only reports the stale pages (exit code 1).  At build time the hooks
leave the generated text as committed (a stale block is a build warning, so ``--strict`` fails) and:

- a line ``This page is the repository's [PATH](../PATH).`` becomes the file ``PATH`` of the repository
  (the changelog): a reader of the raw Markdown follows the link, the site shows the file.  No page holds
  a placeholder comment that only the built site fills (``tests/test_docs_site.py`` checks);
- ``<!-- markdown-only -->`` … ``<!-- /markdown-only -->`` is dropped: a note for readers of the raw
  Markdown (``docs/api.md``'s pointer to the source files, whose links leave the site);
- fence lines lose the snippet runner's older marks (``bash notest``, which superfences renders as text;
  the attribute form ``bash {.notest}`` needs nothing).

Internal references to the design documents that live outside this repository (``METHOD §N``) are
dropped from generated text. ``tests/test_docs_site.py`` imports this module by path.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: A page that is a repository file: ``This page is the repository's [CHANGELOG.md](../CHANGELOG.md).``
MARKER = re.compile(r"^This page is the repository's \[([\w./-]+)\]\(\.\./\1\)\.$", re.MULTILINE)
#: The opening marker of a generated block; its end is ``<!-- /generated: NAME -->``.
GENERATED = re.compile(r"<!-- generated: ([\w-]+) -->")
MARKDOWN_ONLY = re.compile(r"<!-- markdown-only -->.*?<!-- /markdown-only -->\n?", re.DOTALL)
COMMAND = "python docs/hooks.py --write"
log = logging.getLogger("mkdocs.hooks.carbguard")
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
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue  # a hidden option (kept only to refuse it with a clear error) is not documented
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


def feature_table() -> str:
    """Every scorer feature as a Markdown table, read from the feature table (``guard/features.py``)."""
    from guard.features import TABLE

    rows = [
        "| feature | group | default weight | fires when | lowered by | computed by |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in TABLE:
        evidence = _cell(row.evidence)
        lowered = ", ".join(w for w, on in (("trust", row.dataflow), ("internal", row.private)) if on) or "never"
        rows.append(
            f"| `{row.name}` | {row.group} | {row.weight:g} | {_cell(row.description)} | {lowered} | {evidence} |"
        )
    return "\n".join(rows)


# --------------------------------------------------------------------------- committed blocks


def _signature(obj: Any, name: str) -> str:
    """``name(params) -> ret`` as the code declares it (annotations as written; no memory addresses)."""
    import inspect

    try:
        text = f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        text = name
    text = re.sub(r"(: |-> )'([^']*)'", r"\1\2", text)  # annotations as written, not as strings
    text = re.sub(r"\((?:self|cls)(?:, |\))", lambda m: "(" if m.group(0).endswith(" ") else "()", text)
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def _summary(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring, on one line."""
    import inspect

    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def _members(obj: Any) -> list[tuple[str, Any]]:
    """A class's public methods and properties, or a module's public names (``__all__``), in source order."""
    import inspect

    if inspect.ismodule(obj):
        names = list(getattr(obj, "__all__", ()))
        return [(n, getattr(obj, n)) for n in names if not isinstance(getattr(obj, n), str | int | float | tuple)]
    own = [(n, v) for n, v in vars(obj).items() if not n.startswith("_")]  # the class line shows __init__'s
    return [(n, v) for n, v in own if callable(v) or isinstance(v, property | classmethod | staticmethod)]


def _entry(name: str, obj: Any, depth: int) -> Iterator[str]:
    import inspect

    indent = "  " * depth
    if isinstance(obj, property):
        yield f"{indent}- `{name}` (property): {_cell(_summary(obj))}"
        return
    target = obj.__func__ if isinstance(obj, classmethod | staticmethod) else obj
    if inspect.isclass(target):
        yield f"{indent}- `class {_signature(target, name)}`: {_cell(_summary(target))}"
        if depth == 0:
            for member, value in _members(target):
                yield from _entry(member, value, depth + 1)
        return
    yield f"{indent}- `{_signature(target, name)}`: {_cell(_summary(target))}"


def api_signatures() -> str:
    """Every object of ``docs/api.md``'s ``:::`` directives with its signature and summary, as Markdown (read on
    GitHub or in an editor; the built site renders the same docstrings with mkdocstrings)."""
    import importlib

    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    lines: list[str] = []
    for target in re.findall(r"^::: ([\w.]+)$", text, flags=re.MULTILINE):
        module_name, obj = target, None
        for cut in range(target.count(".") + 1):
            module_name = target.rsplit(".", cut)[0]
            try:
                obj = importlib.import_module(module_name)
            except ModuleNotFoundError:
                continue
            for attr in target.removeprefix(module_name).strip(".").split(".") if cut else ():
                obj = getattr(obj, attr)
            break
        lines += [f"#### `{target}`", ""]
        members = _members(obj) if cut == 0 else [(target.rsplit(".", 1)[-1], obj)]
        for name, value in members:
            lines += list(_entry(name, value, 0))
        lines.append("")
    return "\n".join(lines)


def init_guesses() -> str:
    """What ``carbguard policy init`` guesses for the three tool sets of ``examples/policy_init/toolsets.json``."""
    import yaml

    from guard.policy.skeleton import skeleton_yaml
    from guard.policy.tools import from_openai_tools

    sets = json.loads((ROOT / "examples" / "policy_init" / "toolsets.json").read_text(encoding="utf-8"))
    lines: list[str] = []
    for name, tools in sets.items():
        if name.startswith("_"):
            continue
        written = yaml.safe_load(skeleton_yaml(from_openai_tools(tools), "example", name))["tools"]
        lines += [
            f"**{name}**",
            "",
            "| tool | kind | effect | severity | identifier arguments |",
            "| --- | --- | --- | --- | --- |",
        ]
        for tool in tools:
            tool_name = tool["function"]["name"]
            spec = written.get(tool_name)
            if spec is None:
                lines.append(f"| `{tool_name}` | left out (unclear: its calls escalate) | | | |")
                continue
            kind = spec["kind"] if isinstance(spec["kind"], str) else "[" + ", ".join(spec["kind"]) + "]"
            ids = ", ".join(f"`{a}`" for a in spec.get("identifier_args", ())) or "none"
            lines.append(f"| `{tool_name}` | `{kind}` | {spec['effect']} | {spec['severity']} | {ids} |")
        lines.append("")
    return "\n".join(lines)


GENERATORS = {
    "policy-reference": policy_reference,
    "cli-reference": cli_reference,
    "feature-table": feature_table,
    "api-signatures": api_signatures,
    "init-guesses": init_guesses,
}


class StaleMarkersError(ValueError):
    """A page's generated markers are unusable: an unknown name, or an opening marker without its end."""


def block(name: str, body: str) -> str:
    """The committed block ``name``: its markers around ``body`` (blank lines keep the Markdown apart)."""
    return f"<!-- generated: {name} -->\n\n{body.strip()}\n\n<!-- /generated: {name} -->"


def regenerate(markdown: str, where: str = "page") -> str:
    """``markdown`` with the text between every pair of generated markers replaced by fresh output.

    Text outside the markers is kept byte for byte.  An unknown generator name or an opening marker
    without its end raises :class:`StaleMarkersError` naming ``where``.
    """
    out, pos = [], 0
    for match in GENERATED.finditer(markdown):
        if match.start() < pos:
            continue
        name = match.group(1)
        if name not in GENERATORS:
            raise StaleMarkersError(f"{where}: unknown generated block {name!r} (known: {', '.join(GENERATORS)})")
        end_marker = f"<!-- /generated: {name} -->"
        end = markdown.find(end_marker, match.end())
        if end < 0:
            raise StaleMarkersError(f"{where}: <!-- generated: {name} --> has no {end_marker}")
        out += [markdown[pos : match.start()], block(name, GENERATORS[name]())]
        pos = end + len(end_marker)
    out.append(markdown[pos:])
    return "".join(out)


def generated_pages() -> list[Path]:
    """The documentation pages that hold a generated block."""
    return [p for p in sorted((ROOT / "docs").rglob("*.md")) if GENERATED.search(p.read_text(encoding="utf-8"))]


def stale_pages() -> list[Path]:
    """The pages whose committed generated text differs from fresh output."""
    stale = []
    for page in generated_pages():
        text = page.read_text(encoding="utf-8")
        if regenerate(text, str(page.relative_to(ROOT))) != text:
            stale.append(page)
    return stale


def main(argv: list[str] | None = None) -> int:
    """``python docs/hooks.py --write`` rewrites the generated blocks; ``--check`` lists stale pages (exit 1)."""
    parser = argparse.ArgumentParser(prog="docs/hooks.py", description=main.__doc__)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the generated blocks of every page")
    mode.add_argument("--check", action="store_true", help="list the pages whose generated blocks are stale")
    args = parser.parse_args(argv)
    stale = stale_pages()
    for page in stale:
        shown = page.relative_to(ROOT)
        if args.write:
            page.write_text(regenerate(page.read_text(encoding="utf-8"), str(shown)), encoding="utf-8")
            print(f"rewrote {shown}")
        else:
            print(f"{shown}: generated reference is stale; run {COMMAND}", file=sys.stderr)
    return 1 if stale and args.check else 0


# --------------------------------------------------------------------------- hooks

#: A fence whose info string carries words after the language (``bash notest``, ``bash slow``: the older form
#: of the snippet runner's marks, ``tests/snippets.py``).  superfences reads such a fence as text, not code;
#: pages still using it are listed in ``tests/test_docs_built_html.py`` (``PENDING``).
FENCE_MARKS = re.compile(r"^(?P<fence>[ \t]*(?:`{3,}|~{3,}))(?P<lang>[\w+-]+)(?:[ \t]+[\w-]+)+[ \t]*$", re.MULTILINE)


def plain_fences(markdown: str) -> str:
    """``markdown`` with the runner's marks dropped from fence lines, so every fence renders as code."""
    return FENCE_MARKS.sub(r"\g<fence>\g<lang>", markdown)


def expand(markdown: str) -> str:
    """``markdown`` as the site shows it: includes filled, Markdown-only notes dropped, fences without runner marks.

    Generated blocks are left as committed (:func:`regenerate` writes them).
    """

    def fill(match: re.Match[str]) -> str:
        text = (ROOT / match.group(1)).read_text(encoding="utf-8")
        return re.sub(r"\]\((?:docs/)?([\w/-]+\.md)", r"](\1", text.split("\n", 1)[1])

    return plain_fences(MARKDOWN_ONLY.sub("", MARKER.sub(fill, markdown)))


def on_page_markdown(markdown: str, page: Any = None, **kwargs: Any) -> str:
    """MkDocs hook: warn (a failure under ``--strict``) on a stale generated block, then :func:`expand`."""
    where = getattr(getattr(page, "file", None), "src_uri", "page")
    if GENERATED.search(markdown) and regenerate(markdown, where) != markdown:
        log.warning("%s: generated reference is stale; run %s", where, COMMAND)
    return expand(markdown)


def on_page_content(html: str, **kwargs: Any) -> str:
    """MkDocs hook: drop pointers to outside design documents from rendered API docstrings."""
    return clean(html)


if __name__ == "__main__":
    sys.exit(main())
