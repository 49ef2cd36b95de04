"""Structured values in text: recognised, validated, normalised, and matched as wholes.

E-mail addresses, URLs, IBANs, phone numbers, card numbers, amounts with a currency, dates and file
paths name one thing each.  Two of them that share a part (a domain, a host, a scheme, a top-level
domain, a directory) are different values in one namespace; a shared part says nothing about where
one of them came from.  The prefix graph therefore matches a structured value only as a whole
(:attr:`Value.key`, its normal form) and takes exact spans (k-grams) only from the text outside
structured values — the *free* text (:func:`free_fragments`).  A URL's origin (scheme, host, port)
is structured; its path, query and fragment stay free text, split at ``/ ? & = # ;``, so a private
value carried inside a URL's path or query still matches, while a shared host or a shared
separator does not.

Validation is implemented here, not taken from a library: the decision path depends on five
packages only (pydantic, networkx, numpy, structlog, pyyaml), and the checks needed are short and
exact — IBAN ISO 13616 mod-97, the Luhn check of card numbers, E.164's 8–15 digits after ``+``.
A phone number without a leading ``+`` has no country, so it has no E.164 form and is not
recognised as a phone (its digits still match as free text).  No public-suffix list is needed:
whole values are compared whole, and a domain allow-list entry matches a host at a label boundary
(:func:`host_in_domain`).

Every function is pure: the same text gives the same values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from urllib.parse import unquote

__all__ = [
    "Value",
    "find_values",
    "free_fragments",
    "free_ranges",
    "host_in_domain",
    "iban_valid",
    "luhn_valid",
    "url_parts",
]

_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}\b")
_URL = re.compile(r"(?:(?:https?|ftp)://|www\.)[^\s'\"<>(){}\[\],]{1,2000}", re.IGNORECASE)
_IBAN = re.compile(r"\b[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,4})?\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_PHONE = re.compile(r"(?<![\w+])\+\d(?:[ ().-]{0,2}\d){7,14}(?!\d)")
_CURRENCY = r"(?:USD|EUR|GBP|CHF|JPY|CAD|AUD|CNY|INR|SEK|NOK|DKK|PLN|[$€£¥])"
_NUMBER = r"\d{1,3}(?:[,.' ]\d{3})*(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?"
_AMOUNT = re.compile(
    rf"(?<![\w.,]){_CURRENCY} ?(?:{_NUMBER})(?![\d])|(?<![\w.,])(?:{_NUMBER}) ?{_CURRENCY}(?![A-Za-z])"
)
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_DATE = re.compile(
    rf"(?<![\d-])(?P<iso>\d{{4}}-\d{{2}}-\d{{2}})(?![\d])"
    rf"|(?<![\d/.])(?P<num>\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{4}})(?![\d])"
    rf"|\b(?P<mdy>{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}})\b"
    rf"|\b(?P<dmy>\d{{1,2}}(?:st|nd|rd|th)? {_MONTH},? \d{{4}})\b",
    re.IGNORECASE,
)
_PATH = re.compile(
    r"(?<![\w/:.~-])(?:~|\.{1,2})?/(?:[\w.-]{1,128}/+){0,32}[\w.-]{1,128}"
    r"|\b[A-Za-z]:\\(?:[\w .-]{1,128}\\){0,32}[\w.-]{1,128}"
    r"|(?<![\w./-])[\w-][\w.-]{0,127}\.(?:txt|pdf|docx?|xlsx?|csv|json|md|pptx?|png|jpe?g|zip|ya?ml|py|log)\b"
)
_TRAILING = ".,;:!?'\")]}"
_URL_SEPARATORS = re.compile(r"[/?&=#;]")
_DEFAULT_PORTS = {"http": "80", "https": "443", "ftp": "21"}
_IBAN_LENGTH = (15, 34)


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


def luhn_valid(digits: str) -> bool:
    """The Luhn check of a string of digits (card numbers)."""
    if not digits.isdigit():
        return False
    total = 0
    for i, char in enumerate(reversed(digits)):
        d = int(char) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """ISO 13616: country letters, two check digits, 11–30 alphanumerics, and mod-97 equal to 1."""
    compact = iban.replace(" ", "").upper()
    if not (_IBAN_LENGTH[0] <= len(compact) <= _IBAN_LENGTH[1]) or not compact.isalnum() or not compact.isascii():
        return False
    if not (compact[:2].isalpha() and compact[2:4].isdigit()):
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


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


def host_in_domain(host: str, domain: str) -> bool:
    """Whether ``host`` is ``domain`` or a subdomain of it (label boundary, case-insensitive)."""
    host, domain = host.lower().rstrip("."), domain.lower().strip(".")
    return host == domain or host.endswith("." + domain)


def _amount_key(raw: str) -> str | None:
    currency = re.search(_CURRENCY, raw)
    if currency is None:
        return None
    code = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}.get(currency.group(0), currency.group(0).upper())
    number = re.sub(_CURRENCY, "", raw).strip().replace("'", "").replace(" ", "")
    if re.search(r"[.,]\d{1,2}$", number):  # decimal part: its separator is the last one
        whole, frac = number[: -3 if number[-3] in ".," else -2], number[-2:].lstrip(".,")
    else:
        whole, frac = number, "0"
    try:
        value = Decimal(whole.replace(",", "").replace(".", "") + "." + frac)
    except InvalidOperation:
        return None
    return f"amount:{code}:{value.quantize(Decimal('0.01'))}"


def _date_key(match: re.Match[str]) -> str | None:
    if match.group("iso"):
        return f"date:{match.group('iso')}"
    if match.group("num"):
        a, b, year = re.split(r"[/.]", match.group("num"))
        return f"date:{year}-{int(a):02d}-{int(b):02d}?"  # day/month order unknown: kept as written
    words = (match.group("mdy") or match.group("dmy")).replace(",", " ").split()
    month_word = next(w for w in words if w[0].isalpha())
    month = next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(month_word.rstrip(".").lower()[:3]))
    day = int(re.sub(r"\D", "", next(w for w in words if w[0].isdigit() and len(re.sub(r"\D", "", w)) <= 2)))
    year = next(w for w in words if len(w) == 4 and w.isdigit())
    return f"date:{year}-{month:02d}-{day:02d}"


def _candidates(text: str) -> list[Value]:
    """Every structured value a recogniser accepts, overlapping ones included."""
    found: list[Value] = []
    for m in _URL.finditer(text):
        end = m.end()
        while end > m.start() and text[end - 1] in _TRAILING:
            end -= 1
        found.append(Value("url", m.start(), end, _url_key(text[m.start() : end]), _url_free(text, m.start(), end)))
    found += [Value("email", m.start(), m.end(), "email:" + m.group(0).casefold()) for m in _EMAIL.finditer(text)]
    for m in _IBAN.finditer(text):
        if iban_valid(m.group(0)):
            found.append(Value("iban", m.start(), m.end(), "iban:" + m.group(0).replace(" ", "").upper()))
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            found.append(Value("card", m.start(), m.end(), "card:" + digits))
    for m in _PHONE.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if 8 <= len(digits) <= 15:
            found.append(Value("phone", m.start(), m.end(), "phone:+" + digits))
    for m in _AMOUNT.finditer(text):
        key = _amount_key(m.group(0))
        if key is not None:
            found.append(Value("amount", m.start(), m.end(), key))
    for m in _DATE.finditer(text):
        key = _date_key(m)
        if key is not None:
            found.append(Value("date", m.start(), m.end(), key))
    for m in _PATH.finditer(text):
        path = re.sub(r"/{2,}", "/", m.group(0)).rstrip("/\\") or m.group(0)
        found.append(Value("path", m.start(), m.end(), "path:" + path))
    return found


def find_values(text: str) -> list[Value]:
    """The structured values of ``text`` in order of position.

    Of overlapping candidates the longer wins (a URL holding an e-mail address in its query is one
    URL), then the earlier one.  A value inside a URL's free part (an e-mail address in its query)
    is listed too, after the URL that holds it: that part is free text with values of its own.
    """
    chosen: list[Value] = []
    for value in sorted(_candidates(text), key=lambda v: (v.start - v.end, v.start)):
        if not any(value.start < other.end and other.start < value.end for other in chosen):
            chosen.append(value)
    inner = [v for url in chosen if url.kind == "url" for lo, hi in url.free for v in _in_component(text, lo, hi)]
    return sorted(chosen + inner, key=lambda v: (v.start, -v.end))


def _in_component(text: str, lo: int, hi: int) -> list[Value]:
    """The values inside one free URL component; a percent-encoded one (``a%40b.com``) is decoded
    first and then stands for the whole component."""
    part = text[lo:hi]
    decoded = unquote(part)
    if decoded != part:
        return [Value(v.kind, lo, hi, v.key) for v in find_values(decoded) if v.kind != "url"]
    return [_shift(v, lo) for v in find_values(part) if v.kind != "url"]


def _shift(value: Value, offset: int) -> Value:
    free = tuple((a + offset, b + offset) for a, b in value.free)
    return Value(value.kind, value.start + offset, value.end + offset, value.key, free)


def free_ranges(text: str, values: list[Value] | None = None) -> list[tuple[int, int]]:
    """The free text of ``text`` as ranges ``[lo, hi)``: the pieces outside every structured value,
    and the free parts (path, query and fragment components) of its URLs outside the values inside
    them.  Pieces of different origin are kept apart, so no k-gram spans a value's boundary."""
    if values is None:
        values = find_values(text)
    outer = [v for v in values if not any(o is not v and o.start <= v.start and v.end <= o.end for o in values)]
    pieces: list[tuple[int, int]] = []
    cursor = 0
    for value in outer:
        pieces.append((cursor, value.start))
        for lo, hi in value.free:
            pieces += _minus(lo, hi, [v for v in values if v not in outer and lo <= v.start < hi])
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
