"""Results read record by record: whose data a record is (``owner``) and which of its fields the system wrote
(``trusted_fields``), docs/policy.md#owners and docs/policy.md#trusted-fields.

A tool that declares ``owner`` or ``trusted_fields`` returns records: a JSON object, or a list of them.
:func:`rows_of` reads a result into :class:`Row` s, one per record: the exact key of its owner's
destination (:func:`guard.evidence.destinations.exact_key`: the owner match grants trust, so it is exact),
the leaf texts of its trusted fields and the rest (the free text a customer or a third party wrote).  A
result that is not records (not JSON, a scalar, a list holding something else) has no rows: nothing in it
is attributed, so every reading below keeps its evidence.

Provenance inside a result is per record: a call shares a record's data when an argument holds one of the
record's leaf values (four characters or more), a leaf holds a whole argument value, or the two share a
span of ``k`` characters (the policy's ``graph.min_span``, at least 16: a shorter span of free text is
phrasing), read loosely (:func:`guard.evidence.normalize.normalize_value`).  Finding a shared span keeps
evidence, so this reading is loose on purpose; only the owner match, which lowers evidence, is exact.

* :func:`owner_flow` -- a sink call whose every destination is one owner ``O`` (or internal), whose
  private sources are all records of tools declaring ``owner``, and whose arguments share data with no
  record of another owner.  The gate leaves the private-data evidence out for it, the ledger does not
  charge ``privacy_flow``.
* :func:`system_only` -- every untrusted source of the call declares ``trusted_fields``, some argument
  value is exactly a trusted field's value, and no other value shares the records' free text.  The gate
  leaves the untrusted data-flow evidence out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from guard.evidence.destinations import carried, exact_key
from guard.evidence.normalize import normalize_value
from guard.evidence.trust import internal_value
from guard.policy import Policy, ToolSpec
from guard.policy.trust import InternalSpec
from guard.records import Record

__all__ = [
    "Probe",
    "Row",
    "call_destinations",
    "foreign_data",
    "free_texts",
    "owner_flow",
    "owner_keys",
    "probe",
    "related",
    "rows_of",
    "shares",
    "system_keys",
    "system_only",
    "trusted_only",
]

_MIN_LEAF = 4  # a shorter leaf (a count, a flag, "yes") is not evidence of a flow
_MIN_SPAN = 16  # a shorter common span of free text ("on file: ") is phrasing, not a record's data


@dataclass(frozen=True, slots=True)
class Row:
    """One record of a result: its owner's exact key (None: no owner field, or the tool declares none), the
    leaf texts of its trusted fields, and its other leaf texts (nested keys of free fields included)."""

    owner: str | None
    trusted: tuple[str, ...]
    free: tuple[str, ...]

    @property
    def texts(self) -> tuple[str, ...]:
        """Every leaf text of the record."""
        return self.trusted + self.free


def _leaves(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            out.append(str(key))
            _leaves(item, out)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out)
    elif value is not None and not isinstance(value, bool):
        out.append(str(value))


def _row(obj: dict[str, Any], owner: str | None, trusted: frozenset[str]) -> Row:
    raw = obj.get(owner) if owner is not None else None
    key = exact_key(str(raw)) if isinstance(raw, str | int) and not isinstance(raw, bool) and str(raw).strip() else None
    kept: list[str] = []
    free: list[str] = []
    for field, value in obj.items():
        _leaves(value, kept if field in trusted else free)
    return Row(key, tuple(kept), tuple(free))


@lru_cache(maxsize=1024)
def rows_of(text: str, owner: str | None, trusted: tuple[str, ...]) -> tuple[Row, ...] | None:
    """The records of a result ``text`` (a JSON object or a list of objects) as rows, or None when it is not
    records (module docstring)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list) or not items or not all(isinstance(item, dict) for item in items):
        return None
    fields = frozenset(trusted)
    return tuple(_row(item, owner, fields) for item in items)


def _fold(text: str) -> str:
    return normalize_value(text)


def _grams(folded: str, k: int) -> frozenset[str]:
    return frozenset(folded[i : i + k] for i in range(len(folded) - k + 1))


@dataclass(frozen=True, slots=True)
class Probe:
    """A call's argument values in the form :func:`shares` compares (folded once per call, not once per row)."""

    values: tuple[str, ...]
    grams: frozenset[str]
    k: int
    joined: str = ""  # the values joined by NUL: one substring search per leaf


def probe(values: Sequence[str], k: int) -> Probe:
    """The argument ``values`` of a call, folded, with their spans of ``k`` characters."""
    folded = tuple(_fold(v) for v in values if len(v.strip()) >= _MIN_LEAF)
    return Probe(folded, frozenset().union(*(_grams(v, k) for v in folded)), k, "\0".join(folded))


def shares(call: Probe, texts: Iterable[str]) -> bool:
    """Whether an argument value of ``call`` shares data with one of ``texts`` (module docstring): a whole leaf
    of ``_MIN_LEAF`` characters or more in a value, a whole value in a leaf, or a common span of ``k``."""
    if not call.values:
        return False
    leaves, joined, grams = _side(tuple(texts), call.k)
    if not call.grams.isdisjoint(grams) or any(v in joined for v in call.values):
        return True
    return any(leaf in call.joined for leaf in leaves)


@lru_cache(maxsize=4096)
def _side(texts: tuple[str, ...], k: int) -> tuple[tuple[str, ...], str, frozenset[str]]:
    """The folded leaves of ``texts`` (``_MIN_LEAF`` characters or more), joined by NUL, and all their spans of
    ``k`` (read once per record, not once per call).  A value found across a NUL only adds a match: evidence."""
    leaves = tuple(leaf for leaf in map(_fold, texts) if len(leaf) >= _MIN_LEAF)
    return leaves, "\0".join(leaves), frozenset().union(*(_grams(leaf, k) for leaf in leaves))


def _probe_of(policy: Policy, record: Record) -> Probe:
    return probe(_values(record), max(policy.graph.min_span, _MIN_SPAN))


def call_destinations(spec: ToolSpec, record: Record) -> list[str] | None:
    """Every destination of the sink call ``record``: its non-blank ``identifier_args`` values, and what
    every other argument carries (:func:`guard.evidence.destinations.carried`); None when the tool is not a
    sink or no identifier argument names a destination."""
    if not spec.is_sink or not spec.identifier_args:
        return None
    names = set(spec.identifier_args)
    payload = set(spec.payload_args) - names
    out: list[str] = []
    declared = False
    for name, value in record.arg_values():
        if not value.strip():
            continue
        if name in names:
            out.append(value)
            declared = True
        else:
            out += carried(value, declared_payload=name in payload)
    return out if declared else None


def _values(record: Record) -> list[str]:
    return [value for _, value in record.arg_values() if value.strip()]


def owner_flow(
    policy: Policy,
    record: Record,
    sources: Iterable[Record],
    internal: InternalSpec,
) -> bool:
    """Whether the sink call ``record`` sends private data only to its owner (module docstring).

    Every destination is ``internal`` (:func:`guard.evidence.trust.internal_value`, the gate's exact matcher) or has one
    and the same exact key ``O``, and at least one is ``O``; every private record of ``sources`` the call
    shares data with is a row of a tool declaring ``owner`` whose owner is ``O``.  Every source must be
    records of an owner-declaring tool: the graph found a flow from it (``sources`` are the call's private
    ancestors), and a source no owner accounts for keeps the evidence.  At least one of ``O``'s records must
    share data with the call: a call that carries no owned record's data is not an owner's flow.
    """
    spec = policy.tool(record.tool or "")
    dests = call_destinations(spec, record) if spec is not None else None
    if not dests:
        return False
    owners = {exact_key(d) for d in dests if not (internal.declared() and internal_value(internal, d))}
    if len(owners) != 1:
        return False
    (owner,) = owners
    tables = []
    for source in sources:
        tool = policy.tool(source.tool or "")
        rows = rows_of(source.text, tool.owner, tool.trusted_fields) if tool is not None and tool.owner else None
        if rows is None:
            return False
        tables.append(rows)
    call = _probe_of(policy, record)
    theirs = [row for rows in tables for row in rows if row.owner == owner]
    return any(shares(call, row.texts) for row in theirs) and not _foreign(call, tables, owner, theirs)


def _foreign(call: Probe, tables: Iterable[tuple[Row, ...]], owner: str, theirs: Sequence[Row]) -> bool:
    """Whether the call shares data with a row whose owner is not ``owner``, counting only what that row does
    not share with ``owner``'s own rows ``theirs`` (a phrase every record holds, "prefers DHL delivery", is
    not another customer's data)."""
    mine = _side(tuple(t for row in theirs for t in row.texts), call.k)
    rest = Probe(tuple(v for v in call.values if v not in mine[1]), call.grams - mine[2], call.k)
    rest = replace(rest, joined="\0".join(rest.values))
    for rows in tables:
        for row in rows:
            if row.owner == owner:
                continue
            leaves = [leaf for leaf in row.texts if _fold(leaf) not in mine[0]]
            if shares(rest, leaves):
                return True
    return False


def _trusted_keys(rows: Iterable[Row]) -> frozenset[str]:
    return frozenset(exact_key(t) for row in rows for t in row.trusted if t.strip())


def system_only(policy: Policy, record: Record, sources: Iterable[Record]) -> bool:
    """Whether only trusted fields of the untrusted ``sources`` reach the call ``record``: each source is
    records of a tool declaring ``trusted_fields``, at least one argument value is exactly
    (:func:`guard.evidence.destinations.exact_key`) the value of a trusted field, and no other argument
    value shares data with a record's free text.  A source that is not such records keeps the evidence:
    the graph found a flow from it that no field accounts for."""
    tables: list[tuple[Row, ...]] = []
    for source in sources:
        tool = policy.tool(source.tool or "")
        rows = rows_of(source.text, tool.owner, tool.trusted_fields) if tool and tool.trusted_fields else None
        if rows is None:
            return False
        tables.append(rows)
    keys = frozenset().union(*(_trusted_keys(rows) for rows in tables))
    values = _values(record)
    rest = [v for v in values if exact_key(v) not in keys]
    if len(rest) == len(values):
        return False
    call = probe(rest, max(policy.graph.min_span, _MIN_SPAN))
    return not any(shares(call, row.free) for rows in tables for row in rows)


def trusted_only(policy: Policy, source: Record, value: str) -> bool:
    """Whether ``value`` is exactly the value of a trusted field of a record of the result ``source``
    (SafeCommit's reading: the system, not the writer of the free text, supplied it)."""
    tool = policy.tool(source.tool or "")
    if tool is None or not tool.trusted_fields or not value.strip():
        return False
    rows = rows_of(source.text, tool.owner, tool.trusted_fields)
    return rows is not None and exact_key(value) in _trusted_keys(rows)


def owner_keys(policy: Policy, source: Record) -> frozenset[str]:
    """The exact keys of the owners of the records of the result ``source`` (none: not an owner source)."""
    tool = policy.tool(source.tool or "")
    rows = rows_of(source.text, tool.owner, tool.trusted_fields) if tool is not None and tool.owner else None
    return frozenset(row.owner for row in rows or () if row.owner is not None)


def system_keys(policy: Policy, source: Record) -> frozenset[str]:
    """The exact keys of the trusted fields' values of the records of the result ``source``."""
    tool = policy.tool(source.tool or "")
    rows = rows_of(source.text, tool.owner, tool.trusted_fields) if tool and tool.trusted_fields else None
    return _trusted_keys(rows or ())


def related(policy: Policy, record: Record, sources: Iterable[Record]) -> list[Record]:
    """The results of ``sources`` the call ``record`` shares data with (the ledger's reading, which has no
    graph): a whole leaf, a whole value or a span, as :func:`shares` reads them over the result's text."""
    call = _probe_of(policy, record)
    out = []
    for source in sources:
        tool = policy.tool(source.tool or "")
        rows = (
            rows_of(source.text, tool.owner, tool.trusted_fields) if tool is not None and tool.reads_records else None
        )
        texts = [t for row in rows for t in row.texts] if rows is not None else [source.text]
        if shares(call, texts):
            out.append(source)
    return out


def foreign_data(policy: Policy, record: Record, sources: Iterable[Record], internal: InternalSpec) -> bool:
    """Whether the sink call ``record`` carries data of an owned record to someone other than its owner: some
    row of an owner-declaring tool among ``sources`` shares data with the call, and the call's destinations
    (internal ones aside) are not exactly that row's owner alone (the ledger's ``privacy_flow`` charges it
    even when a user turn named the recipient: a customer's data sent to another customer is a leak)."""
    spec = policy.tool(record.tool or "")
    dests = call_destinations(spec, record) if spec is not None else None
    if not dests:
        return False
    owners = {exact_key(d) for d in dests if not (internal.declared() and internal_value(internal, d))}
    if not owners:
        return False
    call = _probe_of(policy, record)
    tables = []
    for source in sources:
        tool = policy.tool(source.tool or "")
        rows = rows_of(source.text, tool.owner, tool.trusted_fields) if tool is not None and tool.owner else None
        tables.append(rows or ())
    if len(owners) != 1:  # several recipients: any owned record's data goes to someone who is not its owner
        return any(shares(call, row.texts) for rows in tables for row in rows)
    (owner,) = owners
    theirs = [row for rows in tables for row in rows if row.owner == owner]
    return _foreign(call, tables, owner, theirs)


def free_texts(policy: Policy, source: Record) -> list[str]:
    """The texts of the result ``source`` a third party may have written: its records' free leaves when its
    tool declares ``trusted_fields`` and it is records, else its whole text."""
    tool = policy.tool(source.tool or "")
    rows = rows_of(source.text, tool.owner, tool.trusted_fields) if tool and tool.trusted_fields else None
    return [t for row in rows for t in row.free] if rows is not None else [source.text]
