"""Per-record facts of the prefix graph, computed once when a record is added (METHOD §4, §6)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from guard.records import Record, RecordKind, Trust


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """Per-node flags computed once when the node is added (the scorer reads these)."""

    index: int
    kind: RecordKind
    trust: Trust
    private: bool
    injection: bool
    canary: bool
    injection_at: tuple[int, ...] = ()
    truncated: bool = False


def record_text(record: Record) -> str:
    """The text a record contributes to the index: its text, or a proposal's argument values."""
    if record.kind is RecordKind.PROPOSAL:
        return "\n".join(value for _, value in record.arg_values())
    return record.text


def node_facts(
    record: Record,
    text: str,
    injection: Sequence[re.Pattern[str]],
    canary: Sequence[re.Pattern[str]],
    truncated: bool = False,
) -> NodeFacts:
    """The facts of ``record`` whose indexed text is ``text``: where injection patterns match, canaries."""
    injection_at = tuple(sorted(m.start() for p in injection for m in p.finditer(text)))
    return NodeFacts(
        index=record.index,
        kind=record.kind,
        trust=record.trust,
        private=record.kind is RecordKind.RESULT and record.trust is Trust.TOOL_PRIVATE,
        injection=bool(injection_at),
        injection_at=injection_at,
        canary=any(p.search(text) for p in canary),
        truncated=truncated,
    )
