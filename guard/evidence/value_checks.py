"""Checksums and exact extents of structured values: where a value's grammar ends.

A structured value ends where its grammar ends; a neighbouring word is never part of it.  The IBAN
pattern of :mod:`guard.evidence.values` reads groups of four characters with or without a space
between them, so a compact IBAN followed by a short word (``ES91...1332 today``, ``... from May``)
matches with the word attached, and that reading fails the mod-97 check.  A failed checksum must not
hide the IBAN the text holds without its neighbour, so :func:`iban_end` reads the match at the
grammar's exact extents: an IBAN of a country in the ISO 13616 registry has that country's length
(``DE`` 22, ``ES`` 24, ...), and is read at that length first; any other is read as its compact run
(when no space follows its check digits), then whole, then cut before each space inside the match,
longest first.  A shorter reading always ends at a group
boundary (a space), never inside a run of characters, and must pass the checksum: a truncation never
invents an IBAN of the wrong length for a registry country.  A path's segment may hold dots, so the
path pattern reads a sentence's full stop as part of the last one; :func:`path_end` leaves it out.  An
amount's number is read one way only (:func:`amount_number`).  Every function is pure.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["IBAN_LENGTHS", "amount_number", "iban_end", "iban_spans", "iban_valid", "luhn_valid", "path_end"]

IBAN_LENGTHS: dict[str, int] = {  # ISO 13616 registry: country → IBAN length
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25,
    "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18,
    "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33,
    "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip
_IBAN_LENGTH = (15, 34)
_IBAN = re.compile(r"\b[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,4})?\b")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")  # [A-Za-z]
_IBAN_DIGITS = str.maketrans({chr(ord("A") + i): str(10 + i) for i in range(26)})  # A = 10 ... Z = 35 (ISO 13616)


def luhn_valid(digits: str) -> bool:
    """The Luhn check of a string of digits (card numbers)."""
    if not digits.isdigit():
        return False
    doubled = (int(char) * (2 if i % 2 else 1) for i, char in enumerate(reversed(digits)))
    return sum(d - 9 if d > 9 else d for d in doubled) % 10 == 0


def iban_valid(iban: str) -> bool:
    """ISO 13616: country letters, two check digits, 11–30 alphanumerics, and mod-97 equal to 1."""
    compact = iban.replace(" ", "").upper()
    if not (_IBAN_LENGTH[0] <= len(compact) <= _IBAN_LENGTH[1]) or not compact.isalnum() or not compact.isascii():
        return False
    if not (compact[:2].isalpha() and compact[2:4].isdigit()):
        return False
    moved = compact[4:] + compact[:4]
    return int(moved.translate(_IBAN_DIGITS)) % 97 == 1


@lru_cache(maxsize=4096)
def iban_end(raw: str) -> int | None:
    """Where the IBAN read from ``raw`` (a match of the IBAN pattern, its neighbour possibly attached) ends,
    as an offset into ``raw``; ``None`` if no reading passes the checksum.

    Readings, in order: a registry country's own length (when shorter than ``raw``), or for another country
    a compact IBAN's run of characters; ``raw`` whole; and for a country outside the registry ``raw`` cut
    before each of its spaces, longest first.  A pure function of ``raw``, kept (the accounts of a session recur
    in its texts: one IBAN read again costs a lookup, not its checksums).
    """
    length = IBAN_LENGTHS.get(raw[:2].upper())
    cut = _after_alnums(raw, length) if length is not None else _compact_end(raw)
    if cut is not None and 0 < cut < len(raw) and iban_valid(raw[:cut]):
        return cut
    if iban_valid(raw):
        return len(raw)
    if length is not None:
        return None
    cut = raw.rfind(" ")
    while cut >= _IBAN_LENGTH[0]:
        if iban_valid(raw[:cut]):
            return cut
        cut = raw.rfind(" ", 0, cut)
    return None


def _compact_end(raw: str) -> int | None:
    """Where a compact IBAN (no space after its check digits) ends: at the end of its run of characters."""
    return raw.find(" ", 4) if raw[4:5] != " " else None


def _after_alnums(raw: str, count: int) -> int | None:
    """The offset right after the first ``count`` non-space characters of ``raw``, if a group ends there
    (the end of ``raw`` or a space follows).

    When the first ``count`` characters of ``raw`` hold no space (a compact IBAN), they are its first ``count``
    non-space characters, so the answer is read at ``count`` without the loop; and when ``raw`` is shorter than
    ``count`` and holds no space, it has fewer than ``count`` non-space characters: None, as the loop finds.
    """
    if count > 0 and " " not in raw[:count]:
        return count if count == len(raw) or (count < len(raw) and raw[count] == " ") else None
    seen = 0
    for at, char in enumerate(raw):
        if char != " ":
            seen += 1
            if seen == count:
                end = at + 1
                return end if end == len(raw) or raw[end] == " " else None
    return None


def path_end(text: str, lo: int, hi: int) -> int:
    """The end of the path matched at ``text[lo:hi]`` without the dots that end it (a sentence's full stop,
    an ellipsis), unless its last segment is dots alone (``..``)."""
    if text[hi - 1] != ".":
        return hi
    segment = max(lo, text.rfind("/", lo, hi) + 1, text.rfind("\\", lo, hi) + 1)
    kept = len(text[segment:hi].rstrip("."))
    return segment + kept if kept else hi


def iban_spans(text: str, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans of the valid IBANs of ``text``, whose maximal runs of digits are ``runs``: ``_IBAN`` is tried only
    where one can start (two ASCII letters, tested as members of a set, right before a run of two or more
    digits: the country code and the check digits), and each match is read at the grammar's exact extents
    (:func:`iban_end`), so a neighbour the pattern attached (``...1332 today``) neither hides the IBAN nor the
    next one; the next IBAN starts after the end of the last one (:mod:`guard.evidence.values` calls this)."""
    found: list[tuple[int, int]] = []
    after = 0
    for start, end in runs:
        at = start - 2
        if end - start < 2 or at < after:
            continue
        if text[at] not in _LETTERS or text[at + 1] not in _LETTERS:  # two ASCII letters: [A-Za-z]{2}
            continue
        m = _IBAN.match(text, at)
        cut = iban_end(m.group(0)) if m is not None else None
        if cut is not None:
            found.append((at, at + cut))
            after = at + cut
    return found


_DECIMAL_PART = re.compile(r"[.,]\d{1,2}\Z")


def amount_number(number: str) -> str | None:
    """``number`` (an amount's digits with ``.`` and ``,`` only) as a plain decimal, or None when its writing is
    inconsistent.  A separator followed by one or two digits at the end is the decimal separator; every other
    separator groups thousands, all of them one character, not the decimal one: ``1,110.90``, ``1.110,90`` and
    ``1110,9`` are readings of 1110.90, ``1,110`` and ``1.110`` of 1110 (no currency recognised has three minor
    digits), while ``1,110.905`` and ``1,110,90`` are no amount."""
    whole, frac = number, ""
    if _DECIMAL_PART.search(number) is not None:
        cut = max(number.rfind("."), number.rfind(","))
        whole, frac = number[:cut], number[cut + 1 :]
    groups = set(whole) & {".", ","}
    if len(groups) > 1 or (frac and groups == {number[len(whole)]}):
        return None
    whole = whole.replace(",", "").replace(".", "")
    return f"{whole}.{frac}" if frac else whole
