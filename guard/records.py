"""Immutable records of an episode (docs/concepts.md) and prefix visibility by construction.

A :class:`Record` is one item of an episode: a user turn, an assistant proposal (one tool call
that has not run yet), a tool result, or a final answer.  An :class:`Episode` is an ordered tuple of
records.  :meth:`Episode.decision_points` yields each proposal together with the tuple of records
*before* it and nothing else, so the gate for proposal ``k`` cannot see its result or anything
after it: those records are simply not in what it is handed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from guard.errors import InputError
from guard.limits import MAX_DEPTH


class RecordKind(StrEnum):
    """What a record is."""

    USER = "user"
    PROPOSAL = "proposal"
    RESULT = "result"
    FINAL = "final"


class Trust(StrEnum):
    """Where the text of a record comes from (from the policy's tool metadata)."""

    USER = "user"
    AGENT = "agent"
    TOOL_PRIVATE = "tool_private"
    TOOL_PUBLIC = "tool_public"
    TOOL_UNTRUSTED = "tool_untrusted"
    TOOL_PRIVATE_UNTRUSTED = "tool_private_untrusted"
    """Results of a tool declared both ``private_source`` and ``untrusted_source`` (docs/policy.md#kind):
    private data that third parties write (tickets, shared inboxes)."""

    @property
    def private(self) -> bool:
        """Whether text of this trust is private data (a ``private_source`` result)."""
        return self in _PRIVATE_TRUST

    @property
    def untrusted(self) -> bool:
        """Whether text of this trust may carry a third party's instructions (an ``untrusted_source`` result)."""
        return self in _UNTRUSTED_TRUST


_PRIVATE_TRUST = frozenset({Trust.TOOL_PRIVATE, Trust.TOOL_PRIVATE_UNTRUSTED})
_UNTRUSTED_TRUST = frozenset({Trust.TOOL_UNTRUSTED, Trust.TOOL_PRIVATE_UNTRUSTED})


def freeze_args(args: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return a read-only deep copy of JSON-like arguments; raise InputError if not JSON."""
    try:
        text = _ENCODER.encode(args)
    except (TypeError, ValueError) as exc:
        raise InputError(f"tool arguments are not valid JSON: {exc}") from exc
    return MappingProxyType(_DECODER.raw_decode(text)[0])


# built once: ``json.dumps`` with options builds an encoder at every call, a third of the copy's cost
_ENCODER = json.JSONEncoder(sort_keys=True, allow_nan=False, separators=(",", ":"))
_DECODER = json.JSONDecoder()


def canonical_args(args: Any) -> dict[str, Any]:
    """The canonical copy of well-formed arguments: a fresh tree of exact dict/list/str/int/float/bool/None.

    What is scored, audited and handed to the tool is this copy, never the caller's object.  It is built
    by walking the arguments and accepting only *exact* built-in types (``type(x) is dict``, not
    ``isinstance``), reading dicts through the C-level ``dict.items``: no method the caller can
    override runs, so a mapping subclass whose views hide keys, a ``str`` subclass that compares equal
    to another value, or a number whose ``__str__``/``__repr__`` lies cannot make the decision see
    something other than what the tool receives.  A subclass of any type, a non-string key, a
    non-finite float or nesting deeper than ``MAX_DEPTH`` raises :class:`InputError` naming where.
    Tuples (exact) become lists, as in JSON.
    """
    if type(args) is not dict:
        raise InputError(f"arguments must be a plain JSON object (dict), got {_type_name(args)}")
    canon: dict[str, Any] = _canonical(args, (), 0)  # an exact dict walks to a plain dict
    return canon


def _type_name(value: Any) -> str:
    """The name of ``value``'s type for messages (``MyStr (a str subclass)``), never raising."""
    try:
        kind = type(value)
        name = type.__dict__["__name__"].__get__(kind)
        if any(kind is plain for plain in _PLAIN):
            return str.__str__(name)
        mro = type.__dict__["__mro__"].__get__(kind)
        base = next((plain for b in mro for plain in _PLAIN if b is plain), None)
        return f"{str.__str__(name)} (a {base.__name__} subclass)" if base is not None else str.__str__(name)
    except Exception:  # noqa: BLE001 - a message must not raise
        return "<unnamed type>"


_PLAIN = (dict, list, tuple, str, int, float, bool, type(None))


_Path = tuple[str | int, ...]  # where a value sits: keys (str) and list positions (int) from the top


def _canonical(value: Any, path: _Path, depth: int) -> Any:
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise InputError(f"{_where(path)}: {float.__repr__(value)} is not a finite number")
        return value
    if kind is dict or kind is list or kind is tuple:
        if depth + 1 > MAX_DEPTH:
            raise InputError(f"arguments nest deeper than {MAX_DEPTH} levels (at {_where(path)})")
        if kind is dict:
            out: dict[str, Any] = {}
            for key, inner in dict.items(value):
                if type(key) is not str:
                    raise InputError(
                        f"{_where(path)}: key {safe_repr(key)[:80]} is a {_type_name(key)}, not a plain string"
                    )
                out[key] = _canonical(inner, (*path, key), depth + 1)
            return out
        return [_canonical(inner, (*path, i), depth + 1) for i, inner in enumerate(value)]
    raise InputError(
        f"{_where(path)}: a {_type_name(value)} is not a plain JSON value "
        "(exact dict, list, str, int, float, bool or None; subclasses are refused)"
    )


def _where(path: _Path) -> str:
    """``arguments['a'][0]...``: the place of ``path`` for a message, built only when one is raised (a path
    formatted at every key cost a third of the copy)."""
    return "arguments" + "".join(f"[{step}]" if type(step) is int else f"[{safe_repr(step)[:80]}]" for step in path)


def safe_repr(value: Any) -> str:
    """``repr(value)`` for messages, never raising (a hostile ``__repr__`` gives a placeholder)."""
    try:
        text = repr(value)
        return text if type(text) is str else f"<{type(value).__name__}>"
    except Exception:  # noqa: BLE001 - the fail-closed path must not raise
        return f"<unrepresentable {type(value).__name__}>"


@dataclass(frozen=True, slots=True)
class Record:
    """One immutable item of an episode."""

    index: int
    kind: RecordKind
    trust: Trust
    text: str = ""
    tool: str | None = None
    args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    call_id: str | None = None
    status: str = "ok"
    _leaf_values: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the strings are read at many places of one decision; the arguments are frozen, so read them once
        object.__setattr__(self, "_leaf_values", argument_strings(self.args))

    def args_json(self) -> str:
        """The arguments as canonical JSON (sorted keys)."""
        return json.dumps(dict(self.args), sort_keys=True, ensure_ascii=False)

    def arg_values(self) -> Iterator[tuple[str, str]]:
        """Yield ``(argument name, text)`` for every string the tool receives in an argument: each leaf
        value, then each key of an object nested in it (at any depth, inside lists too), under the name of
        the top-level argument that holds it (see :func:`argument_strings`)."""
        return iter(self._leaf_values)


def argument_strings(args: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """``(argument name, text)`` of every leaf value of ``args``, in order, and then of every key of an
    object nested in an argument, in order: the tool receives the keys too, so a value placed as a key
    is evidence like a value (docs/evidence.md#every-string-the-tool-receives).

    The leaves come first, so that the text of arguments without nested objects is what it always was;
    a top-level argument's own name is the tool's parameter, not a value, and is not yielded.
    """
    leaves: list[tuple[str, str]] = []
    keys: list[tuple[str, str]] = []
    for name, value in args.items():
        _walk(name, value, leaves, keys)
    return tuple(leaves + keys)


def _walk(name: str, value: Any, leaves: list[tuple[str, str]], keys: list[tuple[str, str]]) -> None:
    """Collect the leaf values of ``value`` into ``leaves`` and the keys of its objects into ``keys``."""
    if type(value) is str:  # the common case first: no isinstance check against an ABC
        leaves.append((name, value))
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            keys.append((name, str(key)))
            _walk(name, inner, leaves, keys)
    elif isinstance(value, list | tuple):
        for inner in value:
            _walk(name, inner, leaves, keys)
    elif value is None:
        return
    elif isinstance(value, bool):
        leaves.append((name, "true" if value else "false"))
    else:
        leaves.append((name, str(value)))


def user(index: int, text: str) -> Record:
    """A user turn."""
    return Record(index=index, kind=RecordKind.USER, trust=Trust.USER, text=text)


def proposal(index: int, tool: str, args: Mapping[str, Any], call_id: str) -> Record:
    """A proposed tool call (not yet executed)."""
    return Record(
        index=index,
        kind=RecordKind.PROPOSAL,
        trust=Trust.AGENT,
        tool=tool,
        args=freeze_args(args),
        call_id=call_id,
    )


def result(index: int, call_id: str, text: str, trust: Trust, tool: str, status: str = "ok") -> Record:
    """A tool result, linked to its proposal by ``call_id``."""
    if status not in ("ok", "error"):
        raise InputError(f"result status must be 'ok' or 'error', got {status!r}")
    return Record(
        index=index,
        kind=RecordKind.RESULT,
        trust=trust,
        text=text,
        tool=tool,
        call_id=call_id,
        status=status,
    )


def content(index: int, text: str, trust: Trust, origin: str) -> Record:
    """Content the model was shown that no decided call of this session returned (a channel record).

    An MCP resource or prompt, or a tool output from an earlier turn of a continued conversation:
    a result-kind record with no call id (nothing links it to a proposal) whose trust is given by
    the observer, from the policy's declaration of that channel.  ``origin`` names the channel
    (e.g. ``mcp:resource:file:///notes.txt``); it is provenance, never a tool.
    """
    if trust not in (Trust.TOOL_PRIVATE, Trust.TOOL_PUBLIC, Trust.TOOL_UNTRUSTED):
        raise InputError(f"content trust must be a tool source trust, got {trust!r}")
    if type(origin) is not str or not origin:
        raise InputError("content origin must be a non-empty string")
    return Record(index=index, kind=RecordKind.RESULT, trust=trust, text=text, tool=origin, call_id=None)


def is_content(record: Record) -> bool:
    """Whether ``record`` is a channel record (:func:`content`): a result that answers no call."""
    return record.kind is RecordKind.RESULT and record.call_id is None


def final(index: int, text: str) -> Record:
    """The agent's final answer."""
    return Record(index=index, kind=RecordKind.FINAL, trust=Trust.AGENT, text=text)


@dataclass(frozen=True, slots=True)
class EpisodeMeta:
    """What is known about an episode beyond its records (never read by the gate)."""

    suite: str = ""
    model: str = ""
    user_task: str = ""
    injection_task: str | None = None
    attack: str | None = None
    utility: bool | None = None
    security: bool | None = None
    source: str = ""
    injections: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Episode:
    """One agent run as an ordered tuple of records."""

    episode_id: str
    records: tuple[Record, ...]
    meta: EpisodeMeta = field(default_factory=EpisodeMeta)

    def __post_init__(self) -> None:
        for position, record in enumerate(self.records):
            if record.index != position:
                raise InputError(f"episode {self.episode_id!r}: record at position {position} has index {record.index}")

    def proposals(self) -> tuple[Record, ...]:
        """The proposals, in order."""
        return tuple(r for r in self.records if r.kind is RecordKind.PROPOSAL)

    def decision_points(self) -> Iterator[tuple[tuple[Record, ...], Record]]:
        """Yield ``(prefix, proposal)``: the prefix holds only records with a smaller index."""
        for record in self.records:
            if record.kind is RecordKind.PROPOSAL:
                yield self.records[: record.index], record

    def result_of(self, call_id: str | None) -> Record | None:
        """The result record answering ``call_id`` (ledger and replay use only)."""
        for record in self.records:
            if record.kind is RecordKind.RESULT and record.call_id == call_id:
                return record
        return None
