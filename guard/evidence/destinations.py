"""Exact matching where a match grants trust, and the destinations a call's arguments carry.

A value is read two ways, for two purposes (docs/evidence.md#trust-is-granted-on-an-exact-match).  To
*find* provenance the graph reads it loosely (:func:`guard.evidence.normalize.normalize_value`: NFKC,
invisible characters dropped, case folded, digit separators joined): a false equality there adds an
edge, that is evidence.  Where a match *grants* trust (a destination ``trust.internal`` or an allow-list
names, a value a user turn names) a false equality removes evidence, so the match is exact:
:func:`exact_key` trims surrounding ASCII whitespace and folds ASCII letters (``A``-``Z`` only), nothing
else.  NFKC never applies, a non-ASCII letter never folds (``ſ`` is not ``s``, the Kelvin sign is not
``K``, a full-width ``ｏ`` is not ``o``), an invisible character makes another value, and digits are not
joined (``10.00`` is not ``1000``).  A value that is exactly one structured value of ASCII text keeps the
structured value's key (:mod:`guard.evidence.values`): an e-mail address in lower case, a phone or card
number as its digits, an IBAN without its group spaces, an amount or date in one form, a path without
doubled or trailing slashes; these are the spellings the value's own rules read as one.

:func:`carried` lists the destinations an argument value carries when the policy did not declare the
argument as a destination (``identifier_args``): every URL (a link preview or an unfurl fetches it, so
data in it leaves), and in an argument the policy did not declare at all (a ``cc``, a ``reply_to``, a
nested ``forward`` field) also every e-mail address, phone number, IBAN and ``#channel`` or ``@handle``
token.  A ``payload_args`` value is content by declaration: an address or phone number in a message body
is data, not where the message goes.
"""

from __future__ import annotations

import re

from guard.evidence.value_index import values_of

__all__ = ["SPACE", "ascii_fold", "carried", "exact_key", "exact_pattern", "exact_text"]

#: The surrounding characters an exact match trims: ASCII whitespace only (a no-break or ideographic space
#: around a value makes another value).
SPACE = " \t\n\r\f\v"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_KEYED = frozenset({"email", "phone", "card", "iban", "amount", "date", "path"})  # keys: the value's own spellings
_ADDRESSES = frozenset({"email", "phone", "iban"})  # where an argument can send: a mailbox, a number, an account
# A channel or handle: ``#`` or ``@`` and a word (any script, so a look-alike is read whole), not inside a word.
_HANDLE = re.compile(r"(?<![\w#@])[#@]\w[\w.-]*")


def ascii_fold(text: str) -> str:
    """``text`` with ``A``-``Z`` lower-cased and every other character as it is (no Unicode case mapping)."""
    return text.translate(_ASCII_LOWER)


def exact_pattern(value: str) -> str:
    """A regular expression (source) that matches ``value`` with ASCII letters in either case and every other
    character as it is, also inside a pattern compiled with ``re.IGNORECASE`` (whose Unicode matching reads
    ``ſ`` as ``s`` and the Kelvin sign as ``k``)."""
    parts = (f"[{c.upper()}{c.lower()}]" if c.isascii() and c.isalpha() else re.escape(c) for c in value)
    return "(?-i:" + "".join(parts) + ")"


def exact_text(value: str) -> str:
    """``value`` without surrounding ASCII whitespace."""
    return value.strip(SPACE)


def exact_key(value: str) -> str:
    """The form in which a whole argument value may grant trust (module docstring): the key of the one
    structured value it is, when it is one and is ASCII, else ``raw:`` and its ASCII-folded text; a URL is
    ``url:`` and its text as written (the allow-lists compare URLs by :mod:`guard.policy.trusted_urls`)."""
    text = exact_text(value)
    if text.isascii():
        found = values_of(text)
        if len(found) == 1 and (found[0].start, found[0].end) == (0, len(text)):
            if found[0].kind in _KEYED:
                return found[0].key
            if found[0].kind == "url":
                return "url:" + text
    return "raw:" + ascii_fold(text)


def carried(value: str, *, declared_payload: bool) -> list[str]:
    """The destinations the argument ``value`` carries, as texts (module docstring): its URLs, and unless the
    argument is a declared payload (``declared_payload``) also its e-mail addresses, phone numbers, IBANs and
    ``#name``/``@name`` tokens outside them.  A URL inside another URL's path or query is part of it."""
    found = [v for v in values_of(value) if not v.nested]
    kinds = {"url"} if declared_payload else {"url"} | _ADDRESSES
    out = [value[v.start : v.end] for v in found if v.kind in kinds]
    if not declared_payload:
        bounds = [0, *(i for v in found for i in (v.start, v.end)), len(value)]
        for lo, hi in zip(bounds[::2], bounds[1::2], strict=True):  # the text between the values
            out += [m.group(0).rstrip(".-") for m in _HANDLE.finditer(value[lo:hi])]
    return out
