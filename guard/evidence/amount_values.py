"""Amounts are values: the number of an amount in text and a call's numeric argument are one value.

A page that says ``$1,110.90`` and a refund call with ``amount: 1110.9`` carry one value in two writings, so the
page is a provenance source of the call (docs/evidence.md#amounts-link-across-formats).  Each amount that
:mod:`guard.evidence.values` recognises in text (a currency sign or code next to a number, in any of its
writings: ``$1,110.90``, ``1.110,90 €``, ``EUR 1110.9``, ``1 110,90 EUR``) keeps its key
``amount:CUR:value`` and also gives the currency-free key :func:`amount_value_key` (``amount-value:1110.9``); a
call's argument that is one plain decimal number (a JSON number, or a string such as ``"1110.90"``) looks that
key up (:func:`number_key`).  Both keys are the value's canonical decimal: no trailing zeros, no separators, so
``1110.90``, ``1110.9`` and ``1,110.90`` meet and ``1110.09`` or ``11109`` never do.

What does not link, by construction:

- a number without a currency in text (an id, a count, ``order 1110``): it posts no key;
- an argument that is not one plain decimal number (a sign, an exponent, a leading zero as in an id ``01110``,
  digit groups, any other character): it looks nothing up, and an argument written with its own currency is
  compared by its ``amount:CUR:value`` key alone (currency on both sides: the currencies must agree);
- a value with fewer than :data:`MIN_DIGITS` digits from its first non-zero digit, zeros after the decimal
  point's last non-zero digit dropped (``50``, ``$20.00``, ``9.9``, ``0.5``, ``0.05``): short numbers repeat by
  chance (a count, a quantity, a small price), so they are not evidence of provenance.  The zeros of a whole
  number count, they are its magnitude: ``$10,000`` and ``10000`` link (an injected transfer limit is a value),
  ``$10`` and ``10`` do not.

The functions are pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from guard.evidence.values import Value

__all__ = ["AMOUNT_VALUE", "MIN_DIGITS", "AmountValues", "amount_value_key", "number_key"]

AMOUNT_VALUE = "amount-value:"
MIN_DIGITS = 3  # digits from the first non-zero one (fractional trailing zeros dropped) a value needs to link
_PLAIN = re.compile(r"(?:0|[1-9][0-9]{0,23})(?:\.[0-9]{1,24})?")  # ASCII digits only: "١٢٣" is not a JSON number


def _canonical(number: str) -> str | None:
    """``number`` (plain ASCII decimal) without trailing fractional zeros, or None when it has fewer than
    :data:`MIN_DIGITS` digits from its first non-zero digit (``1000`` has 4, ``1.50`` 2, ``0.125`` 3)."""
    whole, _, frac = number.partition(".")
    frac = frac.rstrip("0")
    if len((whole + frac).lstrip("0")) < MIN_DIGITS:
        return None
    return f"{whole}.{frac}" if frac else whole


def amount_value_key(key: str) -> str | None:
    """The currency-free key of the amount whose key is ``key`` (``amount:USD:1110.90`` → ``amount-value:1110.9``),
    or None for another kind of value or a value too short to link."""
    kind, _, rest = key.partition(":")
    if kind != "amount":
        return None
    value = rest.partition(":")[2]
    if _PLAIN.fullmatch(value) is None:  # a negative or malformed value: no currency-free key
        return None
    canonical = _canonical(value)
    return AMOUNT_VALUE + canonical if canonical is not None else None


def number_key(text: str) -> str | None:
    """The ``amount-value:`` key a call's argument ``text`` looks up when it is one plain decimal number
    (surrounding whitespace aside), else None: ``"1110.90"`` and ``"1110.9"`` give ``amount-value:1110.9``."""
    if not text or not (text[0].isdigit() or text[0].isspace()):  # the common case: a word, an address, a sentence
        return None
    stripped = text.strip()
    if _PLAIN.fullmatch(stripped) is None:
        return None
    canonical = _canonical(stripped)
    return AMOUNT_VALUE + canonical if canonical is not None else None


class AmountValues:
    """The currency-free keys of the amounts a session's records hold → their holders as a bit set.

    A holder that has an amount only in its zones (a signature, a footer: :mod:`guard.evidence.zoned`) holds it
    too: a call's plain number has no zones of its own, and a zone-only whole value is read by such a call.
    """

    def __init__(self) -> None:
        self.held: dict[str, int] = {}

    def add(self, node: int, values: Iterable[Value]) -> None:
        """Post the currency-free key of each amount of ``values`` (found in ``node``'s raw text)."""
        for value in values:
            key = amount_value_key(value.key) if value.kind == "amount" else None
            if key is not None:
                self.held[key] = self.held.get(key, 0) | 1 << node

    def bits(self, value: str) -> int:
        """The holders of an amount whose value ``value`` is, when it is one plain decimal number of enough
        digits (:func:`number_key`); none while no amount is held (most sessions: one dictionary test)."""
        key = number_key(value) if self.held else None
        return self.held.get(key, 0) if key is not None else 0
