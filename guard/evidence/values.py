"""Structured values in text: recognised, validated, normalised, and matched as wholes.

E-mail addresses, URLs, IBANs, phone numbers, card numbers, amounts with a currency, dates and file
paths name one thing each.  Two of them that share a part (a domain, a host, a scheme, a top-level
domain, a directory) are different values in one namespace; a shared part says nothing about where
one of them came from.  The prefix graph therefore holds a structured value only as a whole
(:attr:`Value.key`) and its cores, and indexes exact spans (k-grams) only from the text outside
structured values — the *free* text (:func:`free_fragments`); a call's argument is read whole.  A URL's
origin (scheme, host, port) is structured; its path, query and fragment stay free text, split at
``/ ? & = # ;``, so a private value carried inside a URL still matches, while a shared host does not.

Validation is implemented here and in :mod:`guard.evidence.value_checks`, not taken from a library: the
decision path depends on five packages only (pydantic, networkx, numpy, structlog, pyyaml), and the checks
needed are short and exact — IBAN ISO 13616 mod-97, the Luhn check of card numbers, E.164's 8–15 digits
after ``+``.  A value ends where its grammar ends: a neighbouring word or a sentence's full stop is never
part of it, and a checksum that fails on a reading with the neighbour attached is tried again at the
grammar's exact extents (:func:`guard.evidence.value_checks.iban_end`).
A phone number without a leading ``+`` has no country, so it has no E.164 form and is not
recognised as a phone (its digits still match as free text).  No public-suffix list is needed:
whole values are compared whole, and a domain allow-list entry matches a host at a label boundary
(:func:`guard.policy.trusted_urls.host_in_domain`).  Every function is pure: the same text gives the same values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from urllib.parse import unquote

from guard.evidence.regex_screen import matches_at
from guard.evidence.value_checks import amount_number, iban_spans, iban_valid, luhn_valid, path_end

__all__ = [
    "Value",
    "find_values",
    "free_fragments",
    "free_ranges",
    "iban_valid",
    "luhn_valid",
    "url_parts",
]

_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}\b")
_LOCAL_BEFORE = re.compile(r"[A-Za-z0-9._%+-]{1,64}+\Z")  # searched up to an "@": where its local part starts
_AT_SIGN = re.compile("@")
_URL = re.compile(r"(?:(?:https?|ftp)://|www\.)[^\s'\"<>(){}\[\],]{1,2000}", re.IGNORECASE)
_URL_LOWER = re.compile(_URL.pattern)  # the same over a lowercased ASCII text: same spans, a faster scan
_CARD = re.compile(r"\d(?:[ -]?\d){12,18}(?!\d|-\d)")  # a dash joins digits only; the text before: checked after
_PHONE = re.compile(r"(?<![\w+])\+\d(?:[ ().-]{0,2}\d){7,14}(?!\d)")
_CURRENCY = r"(?:\$|€|£|¥|USD|EUR|GBP|CHF|JPY|CAD|AUD|CNY|INR|SEK|NOK|DKK|PLN)"  # literals only: a fast scan
_GROUP = "' \u00a0\u202f\u2009\u2019"  # digit-group separators besides "." and ",": apostrophes, (thin) spaces
_NUMBER = rf"\d{{1,3}}(?:[,.{_GROUP}]\d{{3}})*(?:[.,]\d{{1,2}})?|\d+(?:[.,]\d{{1,2}})?"
_NUMBER_AFTER = re.compile(rf"[ \u00a0\u202f]?(?:{_NUMBER})(?!\d|[.,]\d)")  # "$1110.905" is no amount of $1110
_NUMBER_BEFORE = re.compile(rf"(?:{_NUMBER})[ \u00a0\u202f]?$")
_HAS_CURRENCY = re.compile(_CURRENCY)
_NO_GROUPS = str.maketrans("", "", _GROUP)
# a month by its first three letters
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_ISO_AT = re.compile(r"\d{4}-\d{2}-\d{2}(?!\d)")
_NUM_BEFORE = re.compile(r"(?<![\d/.])\d{1,2}[/.]\d{1,2}[/.]$")
_WORD_BEFORE = re.compile(
    rf"(?:\b{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?,? |\b\d{{1,2}}(?:st|nd|rd|th)? {_MONTH},? )$", re.IGNORECASE
)
_UNIX_PATH = re.compile(r"(?<![\w/:.~-])(?:~|\.{1,2})?/(?:[\w.-]{1,128}/+){0,32}[\w.-]{1,128}")
_SLASH = re.compile("/")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\(?:[\w .-]{1,128}\\){0,32}[\w.-]{1,128}")
_EXTENSION = re.compile(r"\.(?:txt|pdf|docx?|xlsx?|csv|json|md|pptx?|png|jpe?g|zip|ya?ml|py|log)\b")
_EXTENSION_ONLY = re.compile(_EXTENSION.pattern[:-2])  # fullmatch: the extension of a file name, nothing more
_DIGIT = frozenset("0123456789")
_DIGIT_RUN = re.compile(r"\d\d*")  # \d+ (the recognisers' Unicode decimal digits); a class first: a faster search
_WORDISH = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_TRAILING = ".,;:!?'\")]}"
_URL_SEPARATORS = re.compile(r"[/?&=#;]")
_DEFAULT_PORTS = {"http": "80", "https": "443", "ftp": "21"}


@dataclass(frozen=True, slots=True)
class Value:
    """One structured value found in a text: where it is, what it is, and its normal form.

    ``free`` lists the ranges inside the value that stay free text (a URL's path, query and
    fragment components); every other character of ``[start, end)`` is matched only as part of
    the whole value ``key``.
    """

    kind: str
    start: int
    end: int
    key: str
    free: tuple[tuple[int, int], ...] = ()
    nested: bool = False  # inside a free part of a URL


def url_parts(url: str) -> tuple[str, str, str, str]:
    """``(scheme, host, port, rest)`` of a URL, scheme and host lower-cased, ``rest`` from the first
    ``/``, ``?`` or ``#`` after the host (``www.`` without a scheme counts as ``http``)."""
    scheme, sep, after = url.partition("://")
    if not sep:
        scheme, after = "http", url
    cut = min((i for i in (after.find("/"), after.find("?"), after.find("#")) if i >= 0), default=len(after))
    authority, rest = after[:cut], after[cut:]
    host, _, port = authority.rpartition("@")[2].partition(":")
    return scheme.lower(), host.lower().rstrip("."), port, rest


def _url_key(url: str) -> str:
    scheme, host, port, rest = url_parts(url)
    if port == _DEFAULT_PORTS.get(scheme):
        port = ""
    path, mark, tail = rest.partition("?") if "?" in rest else rest.partition("#")
    path = unquote(path).rstrip("/")
    return f"url:{scheme}://{host}{':' + port if port else ''}{path}{mark}{unquote(tail)}"


def _url_free(text: str, start: int, end: int) -> tuple[tuple[int, int], ...]:
    """The free components of the URL at ``text[start:end]`` as ranges of ``text``: its path segments,
    the values of its query (not their keys, which are structure) and its fragment."""
    rest = url_parts(text[start:end])[3]
    offset = end - len(rest)
    ranges: list[tuple[int, int]] = []
    lo, in_query = offset, False
    for match in _URL_SEPARATORS.finditer(text, offset, end):
        mark = match.group(0)
        if match.start() > lo and not (in_query and mark == "="):
            ranges.append((lo, match.start()))
        in_query = (in_query or mark == "?") and mark != "#"
        lo = match.end()
        if mark == "#":
            break
    if end > lo:
        ranges.append((lo, end))
    return tuple(ranges)


def _amount_key(raw: str) -> str | None:
    """``amount:CUR:value`` of an amount's text (currency and number), the value to the cent; None when its
    number is not one consistent writing (:func:`~guard.evidence.value_checks.amount_number`) or holds more digits than
    the decimal context."""
    currency = _HAS_CURRENCY.search(raw)
    if currency is None:
        return None
    code = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}.get(currency.group(0), currency.group(0).upper())
    number = amount_number(_HAS_CURRENCY.sub("", raw).strip().translate(_NO_GROUPS))
    if number is None:
        return None
    try:
        value = Decimal(number).quantize(Decimal("0.01"))
    except InvalidOperation:  # more digits than the decimal context holds: not an amount
        return None
    return f"amount:{code}:{value}"


def _dates(text: str, runs: list[tuple[int, int]]) -> list[Value]:
    """Dates: ``2024-03-05``, ``05/03/2024``, ``March 5, 2024``, ``5 Mar 2024`` (found from their year).

    ``runs`` are the spans of maximal runs of digits of ``text``; a year is the last four digits of
    one (where ``\\d{4}(?!\\d)`` matches), and only a run of exactly four digits can be one: in a longer run
    the character before its last four is a digit of the run (``\\d``, which ``str.isdigit`` holds too), so the
    caller passes the runs of four digits only.
    """
    found = []
    for run_start, end in runs:
        start = end - 4
        if start < run_start or (start and text[start - 1].isdigit()):
            continue
        year = text[start:end]
        iso = _ISO_AT.match(text, start)
        if iso is not None and (start == 0 or text[start - 1] != "-"):
            found.append(Value("date", start, iso.end(), f"date:{iso.group(0)}"))
            continue
        if end < len(text) and (text[end].isalnum() or text[end] == "_"):
            continue
        before = text[start - 1] if start else ""  # both forms below end right before the year (or its "\n")
        num = _NUM_BEFORE.search(text, max(0, start - 6), start) if before and before in "/.\n" else None
        if num is not None:
            a, b = re.split(r"[/.]", num.group(0))[:2]
            found.append(Value("date", num.start(), end, f"date:{year}-{int(a):02d}-{int(b):02d}?"))
            continue
        word = _WORD_BEFORE.search(text, max(0, start - 24), start) if before and before in " \n" else None
        if word is not None:
            found.append(Value("date", word.start(), end, _word_date_key(word.group(0), year)))
    return found


def _word_date_key(before: str, year: str) -> str:
    """The key of a date written with a month name: ``before`` is the text ahead of its year."""
    words = before.replace(",", " ").split()
    month_word = next(w for w in words if w[0].isalpha())
    month = next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(month_word.rstrip(".").lower()[:3]))
    day = int(re.sub(r"\D", "", next(w for w in words if w[0].isdigit())))
    return f"date:{year}-{month:02d}-{day:02d}"


def _candidates(text: str) -> list[Value]:
    """Every structured value a recogniser accepts, overlapping ones included."""
    found: list[Value] = []
    lowered = text.lower()
    urls = _URL_LOWER.finditer(lowered) if text.isascii() else _URL.finditer(text)
    for m in urls if "://" in text or "www." in lowered else ():
        end = m.end()
        while end > m.start() and text[end - 1] in _TRAILING:
            end -= 1
        found.append(Value("url", m.start(), end, _url_key(text[m.start() : end]), _url_free(text, m.start(), end)))
    if "@" in text:
        found += [Value("email", m.start(), m.end(), "email:" + m.group(0).casefold()) for m in _emails(text)]
    runs = [m.span() for m in _DIGIT_RUN.finditer(text)]
    if runs:  # every other recogniser needs digits: an IBAN two in a row, a card 13, a phone 8, a date 4 in a row
        found += _numeric(text, runs)
    return found + _paths(text)


def _emails(text: str) -> list[re.Match[str]]:
    """The matches of ``_EMAIL.finditer(text)``, tried only where the local part before an ``@`` starts.

    A match starting at ``s`` has 1 to 64 local-part characters from ``s`` to an ``@`` at ``a``, and none right
    before ``s`` (the lookbehind); so ``s`` is the leftmost position of ``[a - 64, a)`` from which local-part
    characters run up to ``a``, which ``_LOCAL_BEFORE`` finds (``\\Z`` holds at the search's end, the ``@``).
    Every match starts at such a position, so :func:`guard.evidence.regex_screen.matches_at` finds them all.
    """
    starts = []
    for sign in _AT_SIGN.finditer(text):
        at = sign.start()
        local = _LOCAL_BEFORE.search(text, max(0, at - 64), at)
        if local is not None:
            starts.append(local.start())
    return matches_at(_EMAIL, text, starts)


def _numeric(text: str, runs: list[tuple[int, int]]) -> list[Value]:
    """IBANs, card and phone numbers, amounts and dates of a text whose maximal runs of digits are ``runs``."""
    found: list[Value] = []
    total = sum(end - start for start, end in runs)
    for lo, hi in iban_spans(text, runs):
        found.append(Value("iban", lo, hi, "iban:" + text[lo:hi].replace(" ", "").upper()))
    for m in _cards(text, runs) if total >= 13 else ():
        at = m.start()
        if at and (text[at - 1] in _DIGIT or (text[at - 1] == "-" and at > 1 and text[at - 2] in _DIGIT)):
            continue
        digits = re.sub(r"\D", "", m.group(0))
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            found.append(Value("card", m.start(), m.end(), "card:" + digits))
    for m in _PHONE.finditer(text) if "+" in text and total >= 8 else ():
        digits = re.sub(r"\D", "", m.group(0))
        if 8 <= len(digits) <= 15:
            found.append(Value("phone", m.start(), m.end(), "phone:+" + digits))
    for lo, hi in _amounts(text):
        key = _amount_key(text[lo:hi])
        if key is not None:
            found.append(Value("amount", lo, hi, key))
    return found + _dates(text, [(lo, hi) for lo, hi in runs if hi - lo == 4])


def _cards(text: str, runs: list[tuple[int, int]]) -> list[re.Match[str]]:
    """The matches of ``_CARD.finditer(text)`` that :func:`_numeric` may keep, searched only in chains of digit
    runs joined by one space or dash (a card number lies in one such chain) that hold 13 digits or more; each
    search sees one character past its chain, so the lookahead reads the real text.

    A chain that is one run of more than 19 ASCII digits (an IBAN's digits, a long reference) is not searched:
    a match there holds 13 to 19 digits and must end at the run's end (``(?!\\d)``; the character past the run
    starts no further digit inside the search), so the first starts 19 digits before the end, after a digit of
    the run, and ends at the run's end; :func:`_numeric` drops a match that follows a digit, so none is kept.
    """
    found: list[re.Match[str]] = []
    for lo, hi, digits in _chains(text, runs):
        if digits >= 13 and not (digits == hi - lo > 19 and text[lo:hi].isascii()):
            found += _CARD.finditer(text, lo, hi + 1)
    return found


def _chains(text: str, runs: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """``(start, end, digits)`` of each maximal chain of ``runs`` whose neighbours are one space or dash apart."""
    chains: list[tuple[int, int, int]] = []
    lo, hi, digits = runs[0][0], runs[0][1], runs[0][1] - runs[0][0]
    for start, end in runs[1:]:
        if start == hi + 1 and text[hi] in " -":
            hi, digits = end, digits + end - start
            continue
        chains.append((lo, hi, digits))
        lo, hi, digits = start, end, end - start
    chains.append((lo, hi, digits))
    return chains


def _amounts(text: str) -> list[tuple[int, int]]:
    """Spans of amounts: a currency mention with a number right after or right before it."""
    spans = []
    for cur in _HAS_CURRENCY.finditer(text):
        after = _NUMBER_AFTER.match(text, cur.end())
        if after is not None and (cur.start() == 0 or text[cur.start() - 1] not in _WORDISH):
            spans.append((cur.start(), after.end()))
            continue
        before = _NUMBER_BEFORE.search(text, max(0, cur.start() - 40), cur.start())
        tail_ok = cur.end() == len(text) or not text[cur.end()].isalpha()
        if before is not None and tail_ok and (before.start() == 0 or text[before.start() - 1] not in _WORDISH):
            spans.append((before.start(), cur.end()))
    return spans


def _paths(text: str) -> list[Value]:
    """File paths: Unix and Windows paths, and file names with a common document extension."""
    slashes = [m.start() for m in _SLASH.finditer(text)]  # a Unix path starts at, or 1 or 2 before, a slash
    unix = matches_at(_UNIX_PATH, text, (q - d for q in slashes for d in (2, 1, 0)))
    spans = [(m.start(), path_end(text, *m.span())) for m in unix]
    if ":\\" in text:
        spans += [(m.start(), path_end(text, *m.span())) for m in _WINDOWS_PATH.finditer(text)]
    for m in _EXTENSION.finditer(text):
        start = m.start()
        while start > 0 and m.start() - start < 128 and text[start - 1] in _NAME_CHARS:
            start -= 1
        while start < m.start() and text[start] == ".":
            start += 1
        if start < m.start() and (start == 0 or text[start - 1] not in "/\\"):
            spans.append((start, m.end()))
    found = []
    for lo, hi in spans:
        path = re.sub(r"/{2,}", "/", text[lo:hi]).rstrip("/\\") or text[lo:hi]
        found.append(Value("path", lo, hi, "path:" + path))
    return found


def find_values(text: str) -> list[Value]:
    """The structured values of ``text`` in order of position.

    Of overlapping candidates the longer wins (a URL holding an e-mail address in its query is one
    URL), then the earlier one.  A value inside a URL's free part (an e-mail address in its query)
    is listed too (``nested``), after the URL that holds it: that part is free text with values of
    its own.
    """
    chosen: list[Value] = []
    for value in sorted(_candidates(text), key=lambda v: (v.start, v.start - v.end)):
        if chosen and value.start < chosen[-1].end:  # overlaps the last kept value: the longer one stays
            if value.end - value.start > chosen[-1].end - chosen[-1].start:
                chosen[-1] = value
            continue
        chosen.append(value)
    inner = [v for url in chosen if url.kind == "url" for lo, hi in url.free for v in _in_component(text, lo, hi)]
    return sorted(chosen + inner, key=lambda v: (v.start, -v.end)) if inner else chosen


def _in_component(text: str, lo: int, hi: int) -> list[Value]:
    """The values inside one free URL component; a percent-encoded one (``a%40b.com``) is decoded
    first and then stands for the whole component."""
    part = text[lo:hi]
    decoded = unquote(part)
    if decoded != part:
        return [Value(v.kind, lo, hi, v.key, nested=True) for v in _component_values(decoded)]
    return [_shift(v, lo) for v in _component_values(part)]


def _component_values(part: str) -> list[Value]:
    """The values of a URL component; one that is a file name (``ID.csv``) also gives the values of its
    name without the extension (``ID``), which the file name around them would hide."""
    found = [v for v in find_values(part) if v.kind != "url"]
    dot = part.rfind(".")
    if dot <= 0 or _EXTENSION_ONLY.fullmatch(part, dot) is None:
        return found
    keys = {v.key for v in found}
    return found + [v for v in find_values(part[:dot]) if v.kind != "url" and v.key not in keys]


def _shift(value: Value, offset: int) -> Value:
    return Value(value.kind, value.start + offset, value.end + offset, value.key, nested=True)


def free_ranges(text: str, values: list[Value] | None = None) -> list[tuple[int, int]]:
    """The free text of ``text`` as ranges ``[lo, hi)``: the pieces outside every structured value,
    and the free parts (path, query and fragment components) of its URLs outside the values inside
    them.  Pieces of different origin are kept apart, so no k-gram spans a value's boundary."""
    if values is None:
        values = find_values(text)
    nested = [v for v in values if v.nested]
    pieces: list[tuple[int, int]] = []
    cursor = 0
    for value in values:
        if value.nested:
            continue
        pieces.append((cursor, value.start))
        for lo, hi in value.free:
            pieces += _minus(lo, hi, [v for v in nested if lo <= v.start < hi])
        cursor = value.end
    pieces.append((cursor, len(text)))
    return [(lo, hi) for lo, hi in pieces if hi > lo]


def free_fragments(text: str, values: list[Value] | None = None) -> list[str]:
    """The free text of ``text`` (:func:`free_ranges`) as strings."""
    return [text[lo:hi] for lo, hi in free_ranges(text, values)]


def _minus(lo: int, hi: int, holes: list[Value]) -> list[tuple[int, int]]:
    """``[lo, hi)`` without the ranges of ``holes`` (ascending, inside it)."""
    out, cursor = [], lo
    for hole in holes:
        out.append((cursor, hole.start))
        cursor = max(cursor, hole.end)
    out.append((cursor, hi))
    return out
