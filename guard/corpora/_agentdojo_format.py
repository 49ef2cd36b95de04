"""AgentDojo ``runs/`` files → policy-free raw runs, and the compact line encoding of the embedded corpus.

A :class:`RawRun` holds everything an :class:`~guard.records.Episode` needs except the trust of
tool results (that comes from the suite policy when the episode is built).  Both the folder
loader and the embedded corpus go through :class:`RawRun`, so they build identical episodes.

Message handling (the data README describes the formats):

- ``system`` messages are skipped; ``user`` messages become user records;
- ``content`` is a string, ``null``, or a list of ``{"type": "text", "content": ...}`` blocks
  (Llama-3.3 runs); text blocks are joined with a newline, other block types are ignored;
- an assistant turn with tool calls becomes one proposal per call, in order; its text (if any) is
  dropped — a record has no kind for intermediate assistant text; an assistant turn without tool
  calls becomes a final record;
- a tool message answers the pending call whose ``id`` equals its ``tool_call_id``; when the ids
  are null or absent it answers the first pending call (order); a ``tool_call_id`` that matches
  none of the pending calls' ids makes the file fail.  Call ids that are missing, empty, or
  already used earlier in the episode (the OpenAI API sometimes reuses one) are replaced by
  ``t{message index}c{position in the turn}``;
- a tool message with a non-null ``error`` becomes a result with status ``error`` whose text is
  the error (after the content, if there is any);
- calls never answered (a run cut at the step limit) stay proposals without results.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard.errors import InputError
from guard.jsonio import loads_strict
from guard.records import freeze_args

SUITES: tuple[str, ...] = ("banking", "slack", "travel", "workspace")
FORMAT = "carbguard-agentdojo/1"

# Raw record tuples: ("u", text) | ("p", tool, args, call_id) | ("r", call_id, tool, text, status) | ("f", text)
RawRecord = tuple[Any, ...]


class FormatError(ValueError):
    """A run file that cannot be read as an AgentDojo run."""


@dataclass(frozen=True, slots=True)
class RawRun:
    """One run without trust labels: metadata plus raw record tuples."""

    model: str
    suite: str
    user_task: str
    injection_task: str | None
    attack: str | None
    utility: bool
    security: bool
    source: str
    injections: tuple[str, ...]
    records: tuple[RawRecord, ...]


@dataclass(frozen=True, slots=True)
class RunFile:
    """A run file found in a ``runs/`` folder, with the parts of its path."""

    path: Path
    model: str
    suite: str
    task: str
    attack: str
    stem: str

    @property
    def source(self) -> str:
        """The path relative to the folder that holds the model folders."""
        return f"{self.model}/{self.suite}/{self.task}/{self.attack}/{self.stem}.json"


# --------------------------------------------------------------------------- discovery


def _is_model_dir(path: Path) -> bool:
    return any((path / suite).is_dir() for suite in SUITES)


def model_dirs(root: Path) -> list[Path]:
    """``root`` itself when it is one model's folder, else its sub-folders that hold suite folders."""
    if _is_model_dir(root):
        return [root]
    return sorted(child for child in root.iterdir() if child.is_dir() and _is_model_dir(child))


def discover(root: Path, suites: Iterable[str]) -> list[RunFile]:
    """Every ``<model>/<suite>/<task>/<attack>/<injection>.json`` under ``root``, sorted by source."""
    found: list[RunFile] = []
    for model_dir in model_dirs(root):
        for suite in suites:
            suite_dir = model_dir / suite
            if not suite_dir.is_dir():
                continue
            for file in suite_dir.glob("*/*/*.json"):
                task, attack = file.parent.parent.name, file.parent.name
                found.append(RunFile(file, model_dir.name, suite, task, attack, file.stem))
    return sorted(found, key=lambda f: f.source)


# --------------------------------------------------------------------------- parsing


def read_run(run: RunFile) -> RawRun | str:
    """The run of ``run``, or its ``error`` string when the benchmark recorded one; FormatError if bad."""
    try:
        text = run.path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(f"cannot read: {exc}") from None
    data = loads_strict(text, "invalid JSON", FormatError)
    try:
        return parse_run(data, run)
    except RecursionError:
        raise FormatError("run nested too deeply") from None


def parse_run(data: Any, run: RunFile) -> RawRun | str:
    """Validate one decoded run; return the run, or its error string when ``error`` is not null."""
    if not isinstance(data, dict):
        raise FormatError(f"top level is {type(data).__name__}, expected an object")
    error = data.get("error")
    if error is not None:
        return str(error)
    suite = _field(data, "suite_name", str)
    user_task = _field(data, "user_task_id", str)
    injection_task = _optional(data, "injection_task_id")
    attack = _optional(data, "attack_type")
    _check(suite == run.suite, f"suite_name {suite!r} is not the folder's suite {run.suite!r}")
    _check(user_task == run.task, f"user_task_id {user_task!r} is not the folder's task {run.task!r}")
    _check((attack or "none") == run.attack, f"attack_type {attack!r} is not the folder's attack {run.attack!r}")
    _check((injection_task or "none") == run.stem, f"injection_task_id {injection_task!r} is not the file name")
    injections = data.get("injections") or {}
    _check(isinstance(injections, dict), "injections is not an object")
    payloads = tuple(str(injections[key]) for key in sorted(injections))
    messages = _field(data, "messages", list)
    return RawRun(
        model=run.model,
        suite=suite,
        user_task=user_task,
        injection_task=injection_task,
        attack=attack,
        utility=_field(data, "utility", bool),
        security=_field(data, "security", bool),
        source=run.source,
        injections=payloads,
        records=tuple(_records(messages)),
    )


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise FormatError(message)


def _field(data: Mapping[str, Any], name: str, kind: type) -> Any:
    if name not in data:
        raise FormatError(f"missing field {name!r}")
    value = data[name]
    if not isinstance(value, kind):
        raise FormatError(f"field {name!r} is {type(value).__name__}, expected {kind.__name__}")
    return value


def _optional(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    _check(value is None or isinstance(value, str), f"field {name!r} is {type(value).__name__}, expected a string")
    return value


def content_text(content: Any) -> str:
    """The text of a message ``content``: a string, null, or a list of text blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            _check(isinstance(block, dict), f"content block is {type(block).__name__}, expected an object")
            if block.get("type", "text") != "text":
                continue
            text = block.get("content", block.get("text"))
            _check(isinstance(text, str | None), "text block without string content")
            parts.append(text or "")
        return "\n".join(parts)
    raise FormatError(f"message content is {type(content).__name__}, expected a string, null or a list")


@dataclass
class _Pending:
    original_id: str | None
    call_id: str
    tool: str


def _records(messages: list[Any]) -> Iterator[RawRecord]:
    used: set[str] = set()
    pending: list[_Pending] = []
    for position, message in enumerate(messages):
        _check(isinstance(message, dict), f"message {position} is not an object")
        role = message.get("role")
        if role == "system":
            continue
        if role == "user":
            yield ("u", content_text(message.get("content")))
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            _check(isinstance(calls, list), f"message {position}: tool_calls is not a list")
            if not calls:
                yield ("f", content_text(message.get("content")))
                continue
            pending = []
            for j, call in enumerate(calls):
                pending.append(_proposal(call, position, j, used))
                yield ("p", pending[-1].tool, _args(call, position), pending[-1].call_id)
        elif role == "tool":
            yield _result(message, position, pending)
        else:
            raise FormatError(f"message {position} has unknown role {role!r}")


def _proposal(call: Any, position: int, j: int, used: set[str]) -> _Pending:
    _check(isinstance(call, dict), f"message {position}: tool call {j} is not an object")
    tool = call.get("function")
    _check(isinstance(tool, str) and bool(tool), f"message {position}: tool call {j} has no function name")
    original = call.get("id")
    original = original if isinstance(original, str) and original else None
    call_id = original if original is not None and original not in used else f"t{position}c{j}"
    while call_id in used:
        call_id += "_"
    used.add(call_id)
    return _Pending(original, call_id, tool)


def _args(call: Mapping[str, Any], position: int) -> dict[str, Any]:
    args = call.get("args")
    if args is None:
        return {}
    _check(isinstance(args, dict), f"message {position}: tool call args is not an object")
    try:
        return dict(freeze_args(args))
    except InputError as exc:
        raise FormatError(f"message {position}: {exc}") from None


def _result(message: Mapping[str, Any], position: int, pending: list[_Pending]) -> RawRecord:
    _check(bool(pending), f"message {position}: tool message without a pending tool call")
    wanted = message.get("tool_call_id")
    matches = [k for k, p in enumerate(pending) if p.original_id is not None and p.original_id == wanted]
    if matches:
        call = pending.pop(matches[0])
    else:
        has_ids = any(p.original_id is not None for p in pending)
        _check(not (wanted and has_ids), f"message {position}: tool_call_id {wanted!r} matches no pending call")
        call = pending.pop(0)
    text = content_text(message.get("content"))
    error = message.get("error")
    if error is None:
        return ("r", call.call_id, call.tool, text, "ok")
    error_text = str(error)
    return ("r", call.call_id, call.tool, f"{text}\n{error_text}" if text else error_text, "error")


# --------------------------------------------------------------------------- compact encoding


def header_line(model: str, dropped_error: Iterable[str], failed: Iterable[tuple[str, str]]) -> str:
    """The first line of an embedded model file."""
    head = {"format": FORMAT, "model": model, "dropped_error": list(dropped_error), "failed": [list(f) for f in failed]}
    return json.dumps(head, ensure_ascii=True, separators=(",", ":"))


def encode_run(run: RawRun) -> str:
    """One run as one compact JSON line (the record tuples stay positional)."""
    meta = [run.suite, run.user_task, run.injection_task, run.attack, run.utility, run.security, run.source]
    body = {"m": meta, "i": list(run.injections), "r": [list(r) for r in run.records]}
    return json.dumps(body, ensure_ascii=True, separators=(",", ":"))


def decode_run(line: str, model: str) -> RawRun:
    """The inverse of :func:`encode_run`."""
    body = loads_strict(line, f"embedded run of {model}")
    suite, user_task, injection_task, attack, utility, security, source = body["m"]
    return RawRun(
        model=model,
        suite=suite,
        user_task=user_task,
        injection_task=injection_task,
        attack=attack,
        utility=utility,
        security=security,
        source=source,
        injections=tuple(body["i"]),
        records=tuple(tuple(r) for r in body["r"]),
    )
