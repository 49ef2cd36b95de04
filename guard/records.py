"""Immutable records of an episode (METHOD §2) and prefix visibility by construction.

A :class:`Record` is one item of an episode: a user turn, an assistant proposal (one tool call
that has not run yet), a tool result, or a final answer.  An :class:`Episode` is an ordered tuple of
records.  :meth:`Episode.decision_points` yields each proposal together with the tuple of records
*before* it and nothing else, so the gate for proposal ``k`` cannot see its result or anything
after it: those records are simply not in what it is handed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from guard.errors import InputError


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


def freeze_args(args: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return a read-only deep copy of JSON-like arguments; raise InputError if not JSON."""
    try:
        text = json.dumps(args, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"tool arguments are not valid JSON: {exc}") from exc
    return MappingProxyType(json.loads(text))


def canonical_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical copy of well-formed arguments: plain dict/list/str/number/bool/None, via a JSON round trip.

    What is scored, audited and handed to the tool is this copy, never the caller's object: a mapping
    subclass whose views hide keys, or a ``str`` subclass that compares equal to another name, cannot
    make the tool receive something other than what was decided.
    """
    canon = json.loads(json.dumps(args, allow_nan=False, sort_keys=True, ensure_ascii=False))
    if not isinstance(canon, dict):
        raise TypeError(f"arguments are a {type(canon).__name__} after canonicalisation, expected an object")
    return canon


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

    def args_json(self) -> str:
        """The arguments as canonical JSON (sorted keys)."""
        return json.dumps(dict(self.args), sort_keys=True, ensure_ascii=False)

    def arg_values(self) -> Iterator[tuple[str, str]]:
        """Yield ``(argument name, value as text)`` for every leaf value of the arguments."""
        for name, value in self.args.items():
            yield from _leaves(name, value)


def _leaves(name: str, value: Any) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for inner in value.values():
            yield from _leaves(name, inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from _leaves(name, inner)
    elif value is None:
        return
    elif isinstance(value, bool):
        yield name, "true" if value else "false"
    else:
        yield name, str(value)


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
                raise InputError(
                    f"episode {self.episode_id!r}: record at position {position} has index {record.index}"
                )

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
