"""Ledger readings that compare a call with earlier records: numeric bounds and third-party-supplied values.

:func:`out_of_bounds` reads a ``bounds`` rule (docs/ledger-rules.md#numeric-bounds): a call's argument
above a field of the private record its key names (a refund above the order amount) charges the rule's
category, and so does a call no earlier record bounds (an order never read) or whose value is not a number.
:func:`third_party_only` reads ``supplied_args`` (docs/ledger-rules.md#supplied-values): a new value
(an address, a phone) that only third-party text supplied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from guard.evidence.destinations import exact_key
from guard.evidence.normalize import normalize_value
from guard.evidence.owned import free_texts, owner_keys, system_keys
from guard.evidence.trust import trusted_value
from guard.policy import Policy
from guard.policy.ledger import BoundRule
from guard.records import Record, RecordKind

__all__ = ["number", "out_of_bounds", "third_party_only"]

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def number(value: Any) -> Decimal | None:
    """``value`` as a number: an int or float, or a text that is one number (a currency sign, a currency
    code and thousands separators aside: ``"$1,250.00"``, ``"40 EUR"``); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", value).strip().strip("$€£¥").strip()
    text = re.sub(r"\s*[A-Za-z]{3}$", "", text).strip("$€£¥ ")
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def _records(text: str) -> Iterable[dict[str, Any]]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return ()
    items = [data] if isinstance(data, dict) else data
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else ()


def out_of_bounds(policy: Policy, rule: BoundRule, record: Record, earlier: Sequence[Record]) -> bool:
    """Whether the executed call ``record`` (a call of ``rule.tool``) is out of the rule's bound: its
    ``arg`` is not a number, or no earlier successful private result of ``rule.source`` holds a record whose
    ``key_field`` is exactly (:func:`guard.evidence.destinations.exact_key`) the call's ``key_arg`` and whose
    ``field`` is a number, or the value exceeds the newest such record's ``field``."""
    value = number(record.args.get(rule.arg))
    key = record.args.get(rule.key_arg)
    if value is None or not isinstance(key, str | int) or isinstance(key, bool):
        return True
    wanted = exact_key(str(key))
    bound: Decimal | None = None
    for source in earlier:
        if source.kind is not RecordKind.RESULT or source.tool != rule.source or source.status != "ok":
            continue
        if not source.trust.private:
            continue
        for item in _records(source.text):
            named = item.get(rule.key_field)
            if isinstance(named, str | int) and not isinstance(named, bool) and exact_key(str(named)) == wanted:
                bound = number(item.get(rule.field))  # the newest record read counts
    return bound is None or value > bound


def third_party_only(policy: Policy, value: str, earlier: Sequence[Record], turns: Sequence[str]) -> bool:
    """Whether only third-party text supplied ``value`` (docs/ledger-rules.md#supplied-values): it stands in
    the free text of an earlier untrusted result (:func:`guard.evidence.owned.free_texts`), and no user turn
    names it (exactly), no trusted field or record owner holds it exactly, and no private result no third
    party writes holds it."""
    if any(trusted_value(value, turn) for turn in turns):
        return False
    key, loose = exact_key(value), normalize_value(value)
    results = [r for r in earlier if r.kind is RecordKind.RESULT and r.status == "ok"]
    for source in results:
        if key in system_keys(policy, source) or key in owner_keys(policy, source):
            return False
        if source.trust.private and not source.trust.untrusted and loose in normalize_value(source.text):
            return False
    return any(
        loose in normalize_value(text)
        for source in results
        if source.trust.untrusted
        for text in free_texts(policy, source)
    )
