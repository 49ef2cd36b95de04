"""Per-record facts of the prefix graph, computed once when a record is added (docs/evidence.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from guard.errors import InputError
from guard.evidence.regex_screen import GROUP_REFERENCE, gated, live
from guard.limits import MAX_RECORD_CHARS, MAX_SESSION_CHARS, MAX_SESSION_RECORDS
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
    if len(text) <= _CACHED_CHARS:
        injection_at, has_canary = _cached(_key(tuple(injection)), _key(tuple(canary)), text)
    else:
        injection_at, has_canary = _matches(tuple(injection), tuple(canary), text)
    return NodeFacts(
        index=record.index,
        kind=record.kind,
        trust=record.trust,
        private=record.kind is RecordKind.RESULT and record.trust.private,
        injection=bool(injection_at),
        injection_at=injection_at,
        canary=has_canary,
        truncated=truncated,
    )


_CACHED_CHARS = 4096  # texts up to this long keep their matches (8,192 of them at most)


def _matches(
    injection: tuple[re.Pattern[str], ...], canary: tuple[re.Pattern[str], ...], text: str
) -> tuple[tuple[int, ...], bool]:
    """Where the injection patterns match in ``text``, and whether a canary pattern does: a pure function of
    its arguments, kept for the texts that repeat (tool outputs recur across the episodes of a corpus)."""
    return _scan(_plan(_key(injection), _key(canary)), text)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What :func:`_scan` reads for one pair of pattern tuples, built once: the patterns in one tuple (its screens
    are then found by identity, :func:`guard.evidence.regex_screen.live`), the one-scan gate, and each pattern
    behind its first-character lookahead (:func:`guard.evidence.regex_screen.gated`: the same matches)."""

    patterns: tuple[re.Pattern[str], ...]
    injection: int  # how many of ``patterns`` are injection patterns (the first ones)
    gate: re.Pattern[str] | None
    gated: tuple[re.Pattern[str], ...]


@lru_cache(maxsize=64)
def _plan(injection: _Key, canary: _Key) -> _Plan:
    patterns = injection.patterns + canary.patterns
    return _Plan(patterns, len(injection.patterns), _gate(patterns), tuple(gated(p) for p in patterns))


def _scan(plan: _Plan, text: str) -> tuple[tuple[int, ...], bool]:
    """:func:`_matches` by a plan: an ASCII text runs only the patterns whose screen strings it holds; another
    first tries the gate, which no text without a match of some pattern passes."""
    kept = live(plan.patterns, text)
    n, patterns = plan.injection, plan.gated
    if kept is not None:
        injection, canary = tuple(patterns[i] for i in kept if i < n), tuple(patterns[i] for i in kept if i >= n)
    else:
        if plan.gate is not None and plan.gate.search(text) is None:  # no pattern matches anywhere: one scan
            return (), False
        injection, canary = patterns[:n], patterns[n:]
    injection_at = tuple(sorted(m.start() for p in injection for m in p.finditer(text)))
    return injection_at, any(p.search(text) for p in canary)


_LEADING_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")
_FLAG_LETTERS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.ASCII, "a"))


@lru_cache(maxsize=64)
def _gate(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str] | None:
    """One regex that matches at a position exactly when one of ``patterns`` does (their alternation, each
    under its own flags), or None where that cannot be built (a group reference, a flag group past the start).

    An alternation matches at a position if and only if one of its branches does, so a text the gate does
    not match holds no match of any pattern.
    """
    branches = []
    for pattern in patterns:
        source = pattern.pattern
        if not isinstance(source, str) or pattern.flags & re.VERBOSE or GROUP_REFERENCE.search(source):
            return None  # a comment or a group reference would change meaning inside an alternation
        lead = _LEADING_FLAGS.match(source)
        body = source[lead.end() :] if lead else source
        letters = "".join(letter for flag, letter in _FLAG_LETTERS if pattern.flags & flag)
        branches.append(f"(?{letters}:{body})" if letters else f"(?:{body})")
    try:
        return re.compile("|".join(branches)) if branches else None
    except re.error:
        return None


class _Key:
    """A pattern tuple as a memo key whose hash is computed once: a compiled pattern hashes its whole program
    at every call, which made each memo lookup cost as much as a short scan."""

    __slots__ = ("hash", "patterns")

    def __init__(self, patterns: tuple[re.Pattern[str], ...]) -> None:
        self.patterns = patterns
        self.hash = hash(patterns)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and (other.patterns is self.patterns or other.patterns == self.patterns)


_KEYS: dict[int, _Key] = {}  # id of a pattern tuple → its key (the key holds the tuple, so the id stays its own)


def _key(patterns: tuple[re.Pattern[str], ...]) -> _Key:
    key = _KEYS.get(id(patterns))
    if key is None or key.patterns is not patterns:
        if len(_KEYS) >= 256:
            _KEYS.clear()
        key = _KEYS[id(patterns)] = _Key(patterns)
    return key


@lru_cache(maxsize=8192)
def _cached(injection: _Key, canary: _Key, text: str) -> tuple[tuple[int, ...], bool]:
    """:func:`_matches` of a text of at most :data:`_CACHED_CHARS` characters, kept (texts repeat)."""
    return _scan(_plan(injection, canary), text)


def admitted_text(
    record: Record, text: str, records: int, indexed_chars: int, limited: str | None
) -> tuple[str, str | None]:
    """The part of ``text`` a graph of ``records`` records and ``indexed_chars`` indexed characters
    indexes, and the graph's ``limited`` note after it (:mod:`guard.limits`).

    A proposal is refused (:class:`InputError`) when the graph is limited or its text would exceed
    the session budget; an observed text beyond a limit is cut and marks the graph limited.
    """
    if record.kind is RecordKind.PROPOSAL:
        if limited is not None:
            raise InputError(f"refused: {limited}")
        if records >= MAX_SESSION_RECORDS or indexed_chars + len(text) > MAX_SESSION_CHARS:
            raise InputError(
                f"refused: the session holds {records} records and {indexed_chars} indexed "
                f"characters; this proposal's {len(text)} would exceed the session limits "
                f"({MAX_SESSION_RECORDS} records, {MAX_SESSION_CHARS} characters)"
            )
        return text, limited
    room = 0 if records >= MAX_SESSION_RECORDS else max(0, MAX_SESSION_CHARS - indexed_chars)
    keep = min(len(text), MAX_RECORD_CHARS, room)
    if keep < len(text) and limited is None:
        limited = (
            f"the session's index is limited: record {record.index} ({record.kind.value}) has {len(text)} "
            f"characters and only the first {keep} were indexed (limits: {MAX_RECORD_CHARS} per record, "
            f"{MAX_SESSION_CHARS} per session, {MAX_SESSION_RECORDS} records), so every later proposal "
            "of this session is refused"
        )
    return text[:keep], limited
