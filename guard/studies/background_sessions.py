"""Background tables counted over sessions (docs/evidence.md#the-background-table).

A k-gram is boilerplate only when it is *observed* common: held by at least
:func:`session_floor` ``= max(min_sessions, ceil(min_share * n))`` of the ``n`` sessions (episodes) the table is
built from.  Three rules keep a table from taking in what must stay evidence:

- **Private text never enters.**  A k-gram that any private-source record of the input holds (a
  ``private_source`` tool's result, private content) is left out, whatever else holds it: a document read in
  every session, or read and mailed out in every session, stays evidence.
- **Sessions, not records or tools.**  A k-gram counts once per session, however many records or tools of the
  session hold it: a search result and the read of the same document, or a newsletter reaching two tools, is
  one session's worth.  An attacker that wants its text discounted must reach the floor's number of sessions.
- **A floor that means something at small sizes.**  At least ``min_sessions`` (3) sessions, so a table built
  from one or two sessions is empty: a string seen in two sessions is not yet common.

Every k-gram of a record's text counts, values included (a deployment's own signature phone number is common
once each of its k-grams is), and the report says what the table discounts, by origin (``user``,
``call:TOOL``, ``result:TOOL``, ``content:ORIGIN``) and by data class (``user``, ``agent``, ``public``,
``untrusted``), so an operator can read it before naming the table in a policy.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from guard.evidence.node_facts import record_text
from guard.evidence.specificity import K
from guard.records import Episode, Record, RecordKind, Trust, is_content

__all__ = [
    "DEFAULT_MIN_SESSIONS",
    "DEFAULT_SESSION_SHARE",
    "common_grams",
    "data_class",
    "discount_report",
    "private_grams",
    "session_counts",
    "session_floor",
]

DEFAULT_MIN_SESSIONS = 3
DEFAULT_SESSION_SHARE = 0.05

_CLASS = {Trust.USER: "user", Trust.AGENT: "agent", Trust.TOOL_PUBLIC: "public", Trust.TOOL_UNTRUSTED: "untrusted"}


def session_floor(sessions: int, min_share: float, min_sessions: int) -> int:
    """How many distinct sessions must hold a k-gram for it to be boilerplate: ``max(min_sessions,
    ceil(min_share * sessions))`` (raises ValueError on a share outside (0, 1) or fewer than 3 sessions)."""
    if not 0 < min_share < 1:
        raise ValueError(f"--min-share must be in (0, 1), got {min_share}")
    if min_sessions < DEFAULT_MIN_SESSIONS:
        raise ValueError(f"--min-sessions must be at least {DEFAULT_MIN_SESSIONS}, got {min_sessions}")
    return max(min_sessions, math.ceil(min_share * sessions))


def text_grams(text: str, k: int = K) -> set[str]:
    """Every k-gram of ``text`` (free text and values alike)."""
    return {text[i : i + k] for i in range(len(text) - k + 1)}


def data_class(record: Record) -> str | None:
    """The data class of ``record``'s text for a table: ``user``, ``agent``, ``public``, ``untrusted``; None for
    private text (a private-source result or content, private-and-untrusted included), which never counts."""
    return None if record.trust.private else _CLASS[record.trust]


def origin(record: Record, tools: Mapping[str, str]) -> str:
    """Where ``record``'s text came from: ``user``, ``call:TOOL``, ``result:TOOL``, ``content:ORIGIN``, ``final``."""
    if record.kind is RecordKind.PROPOSAL:
        return f"call:{record.tool}"
    if is_content(record):
        return f"content:{record.tool}"
    if record.kind is RecordKind.RESULT:
        return f"result:{tools.get(record.call_id or '', record.tool or '?')}"
    return record.kind.value


def private_grams(episodes: Iterable[Episode], k: int = K) -> set[str]:
    """The k-grams any private-source record of ``episodes`` holds: none of them enters a table."""
    held: set[str] = set()
    for episode in episodes:
        for record in episode.records:
            if data_class(record) is None:
                held |= text_grams(record_text(record), k)
    return held


def session_counts(episodes: Iterable[Episode], private: set[str], k: int = K) -> tuple[Counter[str], int]:
    """For each k-gram, how many of ``episodes`` (one session each) hold it in text that is not private-source
    and not in ``private``; and the number of sessions."""
    counts: Counter[str] = Counter()
    sessions = 0
    for episode in episodes:
        sessions += 1
        held: set[str] = set()
        for record in episode.records:
            if data_class(record) is not None:
                held |= text_grams(record_text(record), k)
        counts.update(held - private)
    return counts, sessions


def common_grams(
    episodes: Sequence[Episode], min_share: float, min_sessions: int, private: set[str] | None = None
) -> tuple[dict[str, int], int, int]:
    """``(grams, floor, sessions)``: the k-grams at least :func:`session_floor` sessions of ``episodes`` hold
    outside private text (``private``: the k-grams left out, by default those of :func:`private_grams`), with
    their session counts."""
    left_out = private_grams(episodes) if private is None else private
    counts, sessions = session_counts(episodes, left_out)
    floor = session_floor(sessions, min_share, min_sessions)
    return {g: c for g, c in sorted(counts.items()) if c >= floor}, floor, sessions


def discount_report(episodes: Iterable[Episode], grams: Iterable[str]) -> dict[str, dict[str, int]]:
    """How many of the table's ``grams`` the records of each origin and each data class hold (a gram held by
    several counts for each): what the table discounts, for an operator to read."""
    table = set(grams)
    by_origin: dict[str, set[str]] = {}
    by_class: dict[str, set[str]] = {}
    for episode in episodes:
        tools = {r.call_id or "": r.tool or "" for r in episode.records if r.kind is RecordKind.PROPOSAL}
        for record in episode.records:
            kind = data_class(record)
            if kind is None:
                continue
            held = text_grams(record_text(record)) & table
            if held:
                by_origin.setdefault(origin(record, tools), set()).update(held)
                by_class.setdefault(kind, set()).update(held)
    return {
        "by_origin": {name: len(held) for name, held in sorted(by_origin.items())},
        "by_class": {name: len(held) for name, held in sorted(by_class.items())},
    }
