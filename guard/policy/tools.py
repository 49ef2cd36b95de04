"""Tool schemas against a policy: read them, cross-check them, and write a policy skeleton from them.

A :class:`ToolSchema` is the framework-neutral view of one agent tool (name, description, argument
names, hints).  :func:`check_tools` is the start-up check every adapter runs: each agent tool must be
in the policy, and every ``payload_args`` / ``identifier_args`` entry must name a real argument.
:func:`skeleton_yaml` writes a policy that lists every tool with guessed metadata, each guess marked
``# check:``.  Nothing here imports a framework: LangChain tools are read by duck typing, MCP and
OpenAI schemas are plain JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from guard.errors import PolicyError
from guard.policy import Policy


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """One agent tool as the policy sees it.  ``args`` is None when the tool declares no argument schema."""

    name: str
    description: str = ""
    args: tuple[str, ...] | None = ()
    read_only: bool | None = None
    destructive: bool | None = None
    open_world: bool | None = None
    arg_types: Mapping[str, str] = field(default_factory=dict)


# ----------------------------------------------------------------------------- reading schemas


def _properties(schema: Any, where: str) -> tuple[tuple[str, ...] | None, dict[str, str]]:
    if schema is None:
        return None, {}
    if not isinstance(schema, Mapping):
        raise PolicyError(f"{where}: the argument schema must be a JSON object, got {type(schema).__name__}")
    props = schema.get("properties")
    if props is None:
        return None, {}
    if not isinstance(props, Mapping) or not all(isinstance(k, str) for k in props):
        raise PolicyError(f"{where}: 'properties' must be an object keyed by argument name")
    types = {k: str(v.get("type", "")) for k, v in props.items() if isinstance(v, Mapping)}
    return tuple(props), types


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise PolicyError(f"{where}: a tool needs a non-empty string 'name', got {value!r}")
    return value


def from_mcp_tools(tools: Sequence[Any], source: str = "tools/list") -> list[ToolSchema]:
    """Schemas from MCP ``tools/list`` entries (wire dicts with ``inputSchema`` and ``annotations``)."""
    out = []
    for i, tool in enumerate(tools):
        where = f"{source}[{i}]"
        if not isinstance(tool, Mapping):
            raise PolicyError(f"{where}: a tool must be a JSON object, got {type(tool).__name__}")
        args, types = _properties(tool.get("inputSchema"), f"{where}.inputSchema")
        raw_notes = tool.get("annotations")
        notes: Mapping[str, Any] = raw_notes if isinstance(raw_notes, Mapping) else {}
        out.append(
            ToolSchema(
                name=_name(tool.get("name"), where),
                description=str(tool.get("description") or ""),
                args=args,
                read_only=_hint(notes, "readOnlyHint"),
                destructive=_hint(notes, "destructiveHint"),
                open_world=_hint(notes, "openWorldHint"),
                arg_types=types,
            )
        )
    return _unique(out, source)


def _hint(notes: Mapping[str, Any], key: str) -> bool | None:
    value = notes.get(key)
    return value if isinstance(value, bool) else None


def from_openai_tools(data: Any, source: str = "<openai tools>") -> list[ToolSchema]:
    """Schemas from OpenAI function tools: a list (or ``{"tools": [...]}``) of Chat or Responses API entries."""
    if isinstance(data, Mapping) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        raise PolicyError(f"{source}: expected a JSON list of function tools (or an object with 'tools')")
    out = []
    for i, entry in enumerate(data):
        where = f"{source}[{i}]"
        if not isinstance(entry, Mapping):
            raise PolicyError(f"{where}: a tool must be a JSON object, got {type(entry).__name__}")
        if entry.get("type", "function") != "function":
            raise PolicyError(f"{where}: only function tools are supported, got type {entry.get('type')!r}")
        fn = entry.get("function", entry)
        if not isinstance(fn, Mapping):
            raise PolicyError(f"{where}.function: must be a JSON object")
        args, types = _properties(fn.get("parameters"), f"{where}.parameters")
        out.append(ToolSchema(_name(fn.get("name"), where), str(fn.get("description") or ""), args, arg_types=types))
    return _unique(out, source)


def read_openai_tools(path: str | Path) -> list[ToolSchema]:
    """Schemas from a JSON file of OpenAI function tools."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyError(f"{file}: cannot read tool schemas: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{file}: not a JSON file of tool schemas: {exc}") from None
    return from_openai_tools(data, str(file))


def from_langchain_tools(tools: Any, source: str = "<langchain>") -> list[ToolSchema]:
    """Schemas from LangChain tools (a tool or a list of tools), read by duck typing (``name`` and ``args``)."""
    items = tools if isinstance(tools, list | tuple) else [tools]
    out = []
    for i, tool in enumerate(items):
        where = f"{source}[{i}]"
        name = getattr(tool, "name", None)
        raw_args = getattr(tool, "args", None)
        if not isinstance(name, str) or not isinstance(raw_args, Mapping):
            raise PolicyError(f"{where}: not a LangChain tool (needs a string .name and a mapping .args)")
        types = {k: str(v.get("type", "")) for k, v in raw_args.items() if isinstance(v, Mapping)}
        out.append(
            ToolSchema(
                _name(name, where), str(getattr(tool, "description", "") or ""), tuple(raw_args), arg_types=types
            )
        )
    return _unique(out, source)


def load_langchain_tools(spec: str) -> list[ToolSchema]:
    """Import ``module:attr`` (a tool, or a list of tools) and read its schemas."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise PolicyError(f"--from-langchain {spec!r}: expected module:attr, e.g. myagent.tools:TOOLS")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PolicyError(f"--from-langchain {spec!r}: cannot import {module_name!r}: {exc}") from None
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise PolicyError(f"--from-langchain {spec!r}: {module_name} has no attribute {attr!r}")
        value = getattr(value, part)
    return from_langchain_tools(value, spec)


def _unique(tools: list[ToolSchema], source: str) -> list[ToolSchema]:
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise PolicyError(f"{source}: tool {tool.name!r} is listed twice")
        seen.add(tool.name)
    return tools


# ----------------------------------------------------------------------------- cross-checks


def check_tools(policy: Policy, tool_schemas: Iterable[ToolSchema], *, policy_extra: bool = True) -> list[str]:
    """Every mismatch between a policy and the agent's real tools, one readable line each; [] when they agree.

    Reported: agent tools the policy does not know (the guard refuses calls to them, ``on_unknown``),
    ``payload_args`` / ``identifier_args`` entries that are not arguments of the tool, and (unless
    ``policy_extra=False``) policy tools the agent does not have.
    """
    schemas = {t.name: t for t in tool_schemas}
    problems = [
        f"agent tool {name!r} is not in policy {policy.name!r}: calls to it are refused ({policy.on_unknown.value})"
        for name in schemas
        if policy.tool(name) is None
    ]
    for name, spec in policy.tools.items():
        schema = schemas.get(name)
        if schema is None:
            if policy_extra:
                problems.append(f"policy tool {name!r} is not among the agent's tools")
            continue
        if schema.args is None:
            continue
        real = ", ".join(schema.args) or "none"
        for key in ("payload_args", "identifier_args"):
            for arg in getattr(spec, key):
                if arg not in schema.args:
                    problems.append(f"tools.{name}.{key}: {arg!r} is not an argument of {name} (its arguments: {real})")
    return problems


# ----------------------------------------------------------------------------- the skeleton


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


#
# Guessing rules (METHOD §3).  Names are split into words at snake_case, camelCase, kebab-case and digit
# boundaries; matching is on whole words, never substrings.  Server hints (MCP annotations) may only add
# caution: ``destructiveHint: true`` makes a tool a sink, ``readOnlyHint: false`` takes a read out of the
# sources, ``openWorldHint: true`` makes a source untrusted; ``readOnlyHint: true`` and
# ``destructiveHint: false`` never make a tool look safer than its name and description do.

_SINK_WORDS = _set(
    "send post forward upload pay transfer wire delete remove publish share invite tweet submit notify reply "
    "broadcast dispatch push webhook drop erase purge wipe destroy unlink rm kill terminate revoke cancel deploy "
    "exec execute run shell eval"
)
# in descriptions: the present-tense forms of the action verbs ("Sends an e-mail"), never past participles,
# which describe data ("messages sent to you", "files shared with me")
_DESC_SINK_WORDS = _set(
    "send sends sending post posts posting forward forwards forwarding upload uploads uploading pay pays paying "
    "transfer transfers transferring delete deletes deleting remove removes removing publish publishes publishing "
    "share shares sharing"
)
_DESC_WRITE_WORDS = _set("write writes writing")
_WRITE_WORDS = _set(
    "write create update set save add append edit modify book schedule rename move insert put patch upsert "
    "archive mark tag label assign enable disable reset change store"
)
_READ_WORDS = _set(
    "read get list search find lookup look query show view fetch describe count browse visit download "
    "load retrieve scrape crawl http"
)
_UNTRUSTED_WORDS = _set(
    "inbox email emails mail mails message messages web webpage website url page pages fetch browse comment "
    "comments review reviews feed news chat post posts tweet tweets forum internet online http scrape crawl"
)
_PUBLIC_WORDS = _set("public doc docs documentation wiki weather time clock calculator calculate")
_PRIVATE_WORDS = _set("private personal secret internal account accounts user users customer customers")
_URL_ARG_WORDS = _set("url urls uri uris link links href endpoint webhook website")
_IDENT = re.compile(
    r"(^|_)(to|cc|bcc|recipients?|email|address|url|uri|link|id|ids|name|path|file|filename|account|iban|user|"
    r"username|channel|phone|number|key|target|dest|destination|host|domain)(_|$)",
    re.I,
)
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _words(text: str) -> list[str]:
    """Lower-case words of a name or text: ``sendEmail``, ``send-email``, ``SEND_EMAIL`` are ``send email``."""
    return [w.lower() for w in _WORD.findall(text)]


@dataclass(frozen=True, slots=True)
class _Guess:
    """What init writes for one tool; ``spec`` is None when the tool is left out (unclear: its calls escalate)."""

    spec: dict[str, Any] | None
    why: str
    suggestion: dict[str, Any] | None = None


def _source_kind(tool: ToolSchema, names: set[str], words: set[str]) -> tuple[str, str]:
    """The source kind of a read; a description may make it untrusted or private, never public."""
    if tool.open_world is True or words & _UNTRUSTED_WORDS:
        return "untrusted_source", "it reads text that third parties may write"
    if names & _PUBLIC_WORDS and not words & _PRIVATE_WORDS:
        return "public_source", "it reads public information"
    return "private_source", "a read with no other sign: assumed private (the safe side)"


def _roles(args: Sequence[str], kind: str) -> tuple[list[str], list[str]]:
    identifiers = [a for a in args if _IDENT.search(a)]
    if kind == "sink":
        return list(args), identifiers
    if kind == "other":
        return [a for a in args if a not in identifiers], identifiers
    return [], identifiers


def _spec(kind: str, effect: str, severity: int, args: Sequence[str], also: str | None = None) -> dict[str, Any]:
    payload, identifiers = _roles(args, kind)
    spec: dict[str, Any] = {"kind": kind, "effect": effect, "severity": severity}
    if also is not None:
        spec["also_source"] = also
    if payload:
        spec["payload_args"] = payload
    if identifiers:
        spec["identifier_args"] = identifiers
    return spec


def _guess(tool: ToolSchema) -> _Guess:
    """The most cautious reading of one tool's name, description, argument names and (cautious) hints."""
    name_words = _words(tool.name)
    names = set(name_words)
    desc = set(_words(tool.description))
    args = tool.args or ()
    url_args = [a for a in args if set(_words(a)) & _URL_ARG_WORDS]
    reads = (bool(name_words) and name_words[0] in _READ_WORDS) or name_words[:2] == ["look", "up"]
    writes = bool(names & _WRITE_WORDS)
    desc_sink = bool(desc & _DESC_SINK_WORDS)
    if names & _SINK_WORDS:
        return _Guess(_spec("sink", "irreversible", 3, args), "its name says it acts outside the agent")
    if tool.destructive is True:
        return _Guess(_spec("sink", "irreversible", 3, args), "its MCP hints say it is destructive")
    if reads and writes:
        why = "its name both reads and changes state"
    elif writes:
        if desc_sink:
            return _Guess(_spec("sink", "irreversible", 3, args), "its description says it sends or deletes")
        return _Guess(_spec("other", "reversible", 1, args), "it changes state the user owns and sends nothing out")
    elif reads:
        source, why = _source_kind(tool, names, names | desc)
        if desc_sink:
            spec = _spec("sink", "irreversible", 3, args, source)
            return _Guess(spec, f"its description says it sends or deletes; its results: {why}")
        if tool.read_only is False or desc & _DESC_WRITE_WORDS:
            spec = _spec("sink", "reversible", 2, args, source)
            return _Guess(spec, f"a read that may change state (server hint or description); its results: {why}")
        if url_args:
            spec = _spec("sink", "none", 2, args, source)
            return _Guess(spec, f"its URL argument carries data out (a fetch is a send); its results: {why}")
        return _Guess(_spec(source, "none", 0, args), why)
    elif desc_sink:
        return _Guess(_spec("sink", "irreversible", 3, args), "its description says it sends or deletes")
    else:
        why = "neither its name nor its description says what it does"
    suggestion = _spec("sink", "irreversible", 3, args, "untrusted_source")
    return _Guess(None, why, suggestion)


class _SkeletonDumper(yaml.SafeDumper):
    """A safe dumper whose strings are plain only when they are simple words, else double-quoted with escapes."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", value) is not None and value.lower() not in _YAML_WORDS
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=None if plain else '"')


_SkeletonDumper.add_representer(str, _represent_str)
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _dump(data: Any, *, flow: bool | None = None) -> str:
    """YAML text of ``data``: ASCII only (every other character escaped), one scalar per line, never wrapped."""
    text = yaml.dump(
        data,
        Dumper=_SkeletonDumper,
        sort_keys=False,
        allow_unicode=False,
        default_flow_style=flow,
        width=2**30,
    )
    if not text.isascii():  # allow_unicode=False escapes everything else; guard the invariant the comments need
        raise PolicyError("policy init: the YAML emitter wrote a non-ASCII character")
    return text


def _comment(text: str) -> str:
    """A one-line YAML comment body: ASCII, no line break of any kind (\\n, \\r, U+0085, U+2028, U+2029)."""
    if not text.isascii() or any(ch in text for ch in "\n\r\x0b\x0c"):
        raise PolicyError(f"policy init: refusing to write a comment that is not one line of ASCII: {text!r}")
    return text


def _quoted(text: str) -> str:
    """``text`` JSON-escaped (ASCII, newline-free) for use inside a comment."""
    return json.dumps(text, ensure_ascii=True)


def _skeleton(tools: Sequence[ToolSchema], name: str) -> tuple[dict[str, Any], list[tuple[ToolSchema, _Guess]]]:
    guesses = [(tool, _guess(tool)) for tool in tools]
    specs: dict[str, Any] = {}
    for tool, guess in guesses:
        if guess.spec is not None:
            spec = dict(guess.spec)
            if tool.description:
                spec["description"] = tool.description.strip().splitlines()[0][:200] if tool.description.strip() else ""
            specs[tool.name] = spec
    data = {
        "version": 1,
        "name": name,
        "tools": specs,
        "selector": {"name": "gcarb"},
        "on_unknown": "escalate",
        "audit": {"path": "audit.jsonl", "raw_args": []},
    }
    return data, guesses


def skeleton_yaml(tools: Sequence[ToolSchema], name: str, source: str) -> str:
    """A policy file for ``tools``: every clear tool with guessed metadata, each guess marked ``# check:``.

    The YAML is written by a YAML emitter from a data structure (no tool name, argument name or
    description is spliced into the text); review notes are comments built only from fixed text and
    JSON-escaped, single-line ASCII.  A tool whose role is unclear is left out of ``tools`` (so its calls
    escalate under ``on_unknown: escalate`` until a person adds it) and listed in a ``# check:`` comment
    with the most cautious entry.  The text is read back with the strict policy loader and must give
    exactly the intended data, or :class:`PolicyError` is raised.
    """
    if not tools:
        raise PolicyError(f"{source}: no tools found; a policy needs at least one tool")
    data, guesses = _skeleton(tools, name)
    left_out = [(tool, guess) for tool, guess in guesses if guess.spec is None]
    if not data["tools"]:
        names = ", ".join(_quoted(t.name) for t, _ in left_out)
        raise PolicyError(
            f"{source}: no tool's role is clear from its name and description ({names}); write the policy by hand"
        )
    body = _dump(data, flow=False).splitlines()
    notes = iter([(tool, guess) for tool, guess in guesses if guess.spec is not None])
    lines = [
        _comment(f"# carbguard policy skeleton written by `carbguard policy init` from {_quoted(source)}."),
        "# Every line marked `# check:` is a guess from the tool's name, description and schema: read each",
        "# one (METHOD §3).  No threshold is set: run with --threshold, or calibrate and name the artifact",
        "# under calibration.artifact.  `carbguard policy validate FILE --tools ...` cross-checks it.",
        "# Unknown tools and arguments the guard cannot read never execute (on_unknown: escalate).",
    ]
    in_tools = False
    for line in body:
        if line == "tools:":
            in_tools = True
        elif not line.startswith(" "):
            if in_tools:
                lines.extend(_left_out_block(left_out))
            in_tools = False
        key_line = line.startswith("  ") and not line.startswith(("   ", "  : "))  # `  name:` or `  ? "name"`
        if in_tools and key_line:
            tool, guess = next(notes)
            args = "unknown (no argument schema)" if tool.args is None else json.dumps(list(tool.args))
            lines.append(line)
            lines.append(_comment(f"    # check: arguments {args}; guessed because {guess.why}"))
            continue
        guessed = _GUESSED_LINE.match(line)
        if in_tools and guessed is not None:
            lines.append(_comment(f"{line}  # check: {_NOTES[guessed.group(1)]}"))
            continue
        if line.startswith("  path: audit.jsonl"):
            line = f"{line}  # check: where the audit log goes (relative to this file)"
        lines.append(line)
    text = "\n".join(lines) + "\n"
    _check_reads_back(text, data, source)
    return text


_GUESSED_LINE = re.compile(r"(?:    |  : )(kind|effect|severity|also_source): [a-z0-9_]+")
_NOTES = {
    "kind": "guessed (private_source, public_source, untrusted_source, sink or other)",
    "effect": "guessed from the kind and name",
    "severity": "0 harmless .. 3 severe",
    "also_source": "a sink whose results are also read (a fetch: its URL carries data out)",
}


def _left_out_block(left_out: Sequence[tuple[ToolSchema, _Guess]]) -> list[str]:
    if not left_out:
        return []
    out = [
        "# check: tools left out because their role is unclear; every call to them escalates (on_unknown)",
        "# until you add them under tools: with the right metadata.  The most cautious entries:",
    ]
    for tool, guess in left_out:
        entry = _dump({tool.name: guess.suggestion}, flow=True).strip()
        out.append(_comment(f"#   {entry}  ({guess.why})"))
    return out


def _check_reads_back(text: str, data: Mapping[str, Any], source: str) -> None:
    """Read ``text`` with the strict policy loader; it must give exactly ``data`` and a valid policy."""
    from guard.policy import parse_policy
    from guard.policy.loader import _read_yaml

    loaded, _ = _read_yaml(text, Path("the written skeleton"))
    if loaded != data:
        raise PolicyError(f"{source}: the written skeleton does not read back as the policy init meant to write")
    parse_policy(loaded, source="the written skeleton")


__all__ = [
    "ToolSchema",
    "check_tools",
    "from_langchain_tools",
    "from_mcp_tools",
    "from_openai_tools",
    "load_langchain_tools",
    "read_openai_tools",
    "skeleton_yaml",
]
