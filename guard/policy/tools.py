"""Tool schemas against a policy: read them, cross-check them, and write a policy skeleton from them.

A :class:`ToolSchema` is the framework-neutral view of one agent tool (name, description, argument
names, hints).  :func:`check_tools` is the start-up check every adapter runs: each agent tool must be
in the policy, and every ``payload_args`` / ``identifier_args`` entry must name a real argument.
The policy skeleton `carbguard policy init` writes from these schemas is in
:mod:`guard.policy.skeleton`.  Nothing here imports a framework: LangChain tools are read by duck
typing, MCP and OpenAI schemas are plain JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guard.errors import PolicyError
from guard.jsonio import read_utf8
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
    text = read_utf8(file, "tool schemas file", PolicyError)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
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
    """Import ``module:attr`` (a tool, or a list of tools) and read its schemas.

    The module is looked up in the current folder first, as ``python -m`` would (an installed
    ``carbguard`` script otherwise only sees its own folder and the installed packages).
    """
    import importlib
    import sys

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise PolicyError(f"--from-langchain {spec!r}: expected module:attr, e.g. myagent.tools:TOOLS")
    here = str(Path.cwd())
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PolicyError(
            f"--from-langchain {spec!r}: cannot import {module_name!r} (from {here} or the installed packages): {exc}"
        ) from None
    finally:
        if added:
            sys.path.remove(here)
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


__all__ = [
    "ToolSchema",
    "check_tools",
    "from_langchain_tools",
    "from_mcp_tools",
    "from_openai_tools",
    "load_langchain_tools",
    "read_openai_tools",
]
