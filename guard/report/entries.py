"""Checks of the audit entries a report shows: types and index ranges, so a hostile line is one clear error.

:func:`check_entry` refuses a decision or review entry whose fields have the wrong types, or whose
record indices lie outside what the entry can refer to; :func:`guard.report.model.views_from_audit`
and ``carbguard report`` (naming file and line) call it before building any view.  :func:`audit_indices`
keeps the records a view draws proportional to the indices the entries name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from guard.errors import AuditError
from guard.jsonio import decode_float
from guard.limits import MAX_SESSION_RECORDS


class EntryError(AuditError):
    """An audit entry the report cannot show: ``field`` names the offending field."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"field {field!r}: {why}")
        self.field = field


def _int(value: Any) -> bool:
    return type(value) is int


def _finite_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def _bad(field: str, value: Any, want: str) -> EntryError:
    shown = repr(value)
    return EntryError(field, f"{shown[:60]}{'…' if len(shown) > 60 else ''} is not {want}")


_TEXT_FIELDS = ("session", "call_id", "tool", "verdict", "reason", "message", "artifact", "error")
_REVIEW_TEXT = ("session", "call_id", "tool", "answer", "reviewer", "edited_call_id")


def check_entry(entry: Mapping[str, Any]) -> None:
    """Refuse (EntryError naming the field) a decision or review entry of the wrong types or out of range.

    Record indices are bounded by what the entry itself shows: ``proposal_index`` lies in
    ``[-1, MAX_SESSION_RECORDS)`` (a guard never indexes more records in a session), and every
    ``selected`` index and ``edges_in`` source lies before the proposal (the prefix it was decided on).
    Entries with an ``event`` (e.g. ``session_end``) are not decisions and are not checked.
    """
    if "event" in entry:
        return
    review = entry.get("kind") == "review"
    for name in _REVIEW_TEXT if review else _TEXT_FIELDS:
        value = entry.get(name)
        if value is not None and not isinstance(value, str):
            raise _bad(name, value, "a string")
    ts = entry.get("ts")
    if ts is not None and not _finite_number(ts):
        raise _bad("ts", ts, "a finite number")
    node = entry.get("proposal_index")
    if node is not None and (not _int(node) or not -1 <= node < MAX_SESSION_RECORDS):
        raise _bad("proposal_index", node, f"an integer in [-1, {MAX_SESSION_RECORDS})")
    if review:
        return
    bound = node if node is not None and node >= 0 else 0
    selected = entry.get("selected")
    if selected is not None:
        if not isinstance(selected, list):
            raise _bad("selected", selected, "a list of record indices")
        for item in selected:
            if not _int(item) or not 0 <= item < bound:
                raise _bad("selected", item, f"a record index before the proposal (0 to {bound - 1})")
    edges = entry.get("edges_in")
    if edges is not None:
        if not isinstance(edges, list):
            raise _bad("edges_in", edges, "a list of [source index, edge type] pairs")
        for pair in edges:
            if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
                raise _bad("edges_in", pair, "a [source index, edge type] pair")
            if not _int(pair[0]) or not 0 <= pair[0] < bound:
                raise _bad("edges_in", pair[0], f"a record index before the proposal (0 to {bound - 1})")
    for name in ("score", "latency_us"):
        value = entry.get(name)
        if value is not None and not _finite_number(value):
            raise _bad(name, value, "a finite number")
    threshold = entry.get("threshold")
    if threshold is not None:
        try:
            decode_float(threshold, "threshold", ValueError)
        except ValueError:
            raise _bad("threshold", threshold, 'a finite number, "inf" or "-inf"') from None
    features = entry.get("features")
    if features is not None:
        if not isinstance(features, Mapping):
            raise _bad("features", features, "an object of feature values")
        for name, value in features.items():
            if not isinstance(value, bool) and not _finite_number(value):
                raise _bad(f"features.{name}", value, "a boolean")
    safecommit = entry.get("safecommit")
    if safecommit is not None and not isinstance(safecommit, Mapping):
        raise _bad("safecommit", safecommit, "an object")
    probes = entry.get("probes")
    if probes is not None and (not isinstance(probes, list) or not all(isinstance(p, str) for p in probes)):
        raise _bad("probes", probes, "a list of strings")


GAP_RECORDS_PER_KNOWN = 8
"""Unknown records an audit view draws between the known ones, at most, per known record."""


def audit_indices(known: set[int]) -> Iterable[int]:
    """Every index up to the highest known one, or (when the gaps would dwarf the log) the known ones only.

    Keeps the report's work proportional to what the entries hold: one entry naming index 19 999
    draws one record, not 20 000 placeholders.
    """
    if not known:
        return range(0)
    top = max(known) + 1
    return range(top) if top <= (GAP_RECORDS_PER_KNOWN + 1) * len(known) else sorted(known)
