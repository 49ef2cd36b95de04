"""Reading policy files: one loader per format, key-path → line maps, readable errors.

A key that appears twice in one mapping is refused in every format (YAML and JSON parsers would
keep the last one silently; TOML's parser refuses it itself), with its key path and both lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from guard.errors import PolicyError
from guard.jsonio import loads_strict, read_utf8
from guard.policy.suggest import did_you_mean

KeyLines = dict[tuple[str, ...], int]
MAX_POLICY_BYTES = 2_000_000


def read_policy_mapping(path: Path) -> tuple[Any, KeyLines]:
    """Parse ``path`` by its suffix; return the data and, for YAML, a key-path → line map."""
    text = read_utf8(path, "policy file", PolicyError, max_bytes=MAX_POLICY_BYTES, translate_newlines=False)
    suffix = path.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            return read_yaml(text, path)
        if suffix == ".toml":
            return _read_toml(text, path), {}
        if suffix == ".json":
            return _read_json(text, path), {}
    except RecursionError:
        raise PolicyError(f"{path}: policy file is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        if isinstance(exc, PolicyError):
            raise
        raise PolicyError(f"{path}: policy file holds a value that cannot be read: {exc}") from None
    raise PolicyError(f"{path}: unknown policy format {suffix!r}; use .yaml, .yml, .toml or .json")


class _NoAliasLoader(yaml.SafeLoader):
    """A safe loader that refuses anchors and aliases (no recursive or exploding documents)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise PolicyError(
                f"line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not allowed in policy files"
            )
        return super().compose_node(parent, index)


def read_yaml(text: str, path: Path) -> tuple[Any, KeyLines]:
    try:
        node = yaml.compose(text, Loader=_NoAliasLoader)
        data = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - safe loader subclass
    except PolicyError as exc:
        raise PolicyError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
        raise PolicyError(f"{path}:{where} invalid YAML: {getattr(exc, 'problem', exc)}") from None
    lines: KeyLines = {}
    if node is not None:
        duplicate = _yaml_duplicate(node, ())
        if duplicate is not None:
            raise PolicyError(f"{path}: {duplicate}")
        _collect_lines(node, (), lines)
    return data, lines


def _duplicate_message(key_path: tuple[str, ...], line: int, first: int) -> str:
    where = ".".join(key_path)
    return f"line {line}: duplicate key {where!r} (first defined at line {first}); each key may appear once"


def _yaml_duplicate(node: yaml.Node, prefix: tuple[str, ...]) -> str | None:
    """The first key defined twice in one mapping, as an error message; None when there is none."""
    stack: list[tuple[yaml.Node, tuple[str, ...]]] = [(node, prefix)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in current.value:
                name, line = str(key.value), key.start_mark.line + 1
                if name in seen:
                    return _duplicate_message((*where, name), line, seen[name])
                seen[name] = line
                stack.append((value, (*where, name)))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((item, (*where, str(i))) for i, item in enumerate(current.value))
    return None


def _collect_lines(node: yaml.Node, prefix: tuple[str, ...], lines: KeyLines) -> None:
    lines[prefix] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = (*prefix, str(key.value))
            lines[child] = key.start_mark.line + 1
            _collect_lines_children(value, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _collect_lines(item, (*prefix, str(i)), lines)


def _collect_lines_children(node: yaml.Node, prefix: tuple[str, ...], lines: KeyLines) -> None:
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        saved = lines.get(prefix)
        _collect_lines(node, prefix, lines)
        if saved is not None:
            lines[prefix] = saved


def _read_toml(text: str, path: Path) -> Any:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{path}: invalid TOML: {exc}") from None


def _read_json(text: str, path: Path) -> Any:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyError(f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}") from None
    return loads_strict(text, str(path), PolicyError)  # duplicate keys (key path, both lines), NaN, 1e999


def format_validation_error(
    exc: ValidationError, source: str, lines: KeyLines, model: type[BaseModel] | None = None
) -> str:
    """Every validation problem on its own line, with key path and (when known) file line.

    With ``model`` (the model validated), an unknown key gets the close matches among the keys
    accepted there ("did you mean").
    """
    out = [f"{source}: {exc.error_count()} problem(s) in policy"]
    for err in exc.errors(include_url=False):
        loc = tuple(str(p) for p in err["loc"])
        line = _nearest_line(loc, lines)
        where = ".".join(loc) or "<top level>"
        at = f" (line {line})" if line is not None else ""
        hint = did_you_mean(model, loc) if model is not None and err["type"] == "extra_forbidden" else ""
        out.append(f"  - {where}{at}: {err['msg']}{hint}")
    return "\n".join(out)


def _nearest_line(loc: tuple[str, ...], lines: KeyLines) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None
