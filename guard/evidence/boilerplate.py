"""Boilerplate by position and shape: the zones, identifiers and weak spans of docs/evidence.md#boilerplate.

Three rules keep shared text that says nothing about where a value came from out of the span edges
(``E2`` by ``min_span`` k-grams); each is a pure function of one text, and reads a bounded part of it:

- **Zones** (:func:`body_range`): the opening zone of a text (at most :data:`OPENING_LINES` greeting- or
  header-shaped lines at its start) and its closing zone (a sign-off line and the short signature lines after it,
  among its last :data:`CLOSING_LINES` lines; in a record, also a footer-shaped last paragraph or two).  A span
  that lies in a zone of either text makes no edge, except that a private- or untrusted-source record has no
  zones and a call's zones are read against it (position is no evidence there: docs/evidence.md#zones).  Only
  the first and last lines are read, so the cost is independent of the text's length.
- **Identifiers** (:func:`identifier_values`): a run of letters, digits and ``. _ + -`` of at least
  :data:`IDENT_MIN` characters holding a digit or an inner ``.`` is an identifier.  It is matched as a whole
  (key ``id:TOKEN``), and of its parts only its last :data:`IDENT_TAIL` characters are free text
  (:func:`with_tails`): a common prefix makes no edge (``ORD-2024-118823`` and ``ORD-2024-118991`` share
  nothing), its serial end still links (``X4821-99317`` sent as ``+482199317``).  A dotted name ending in a
  top-level-domain label (``intranet.example.com``) is a bare host: namespace, like a URL's host, it makes no
  edge at all.  A URL's first path segment, when another follows, is namespace too.
- **Weak spans** (:mod:`guard.evidence.weak_spans`): a shared run of letters alone with few content words — a
  city, a street, a product name, an amount in words — makes no edge on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TypeAlias

from guard.evidence.values import Value

Analysis: TypeAlias = "tuple[tuple[Value, ...], tuple[tuple[int, int], ...]]"

__all__ = [
    "CLOSING_LINES",
    "IDENT_MIN",
    "IDENT_TAIL",
    "OPENING_LINES",
    "STOPWORDS",
    "body_range",
    "identifier_values",
    "namespace_segments",
    "with_tails",
]

OPENING_LINES = 2  # greeting / header lines at the start of a text
CLOSING_LINES = 10  # non-blank lines at the end of a text searched for a sign-off
SIGNATURE_LINES = 8  # lines after the sign-off, each short (name, title, company, address, phones, e-mail)
LINE_CHARS = 80  # a zone line (greeting, header) is at most this long
SIGNATURE_CHARS = 60  # a signature line after a sign-off is at most this long
FOOTER_CHARS = 1200  # a footer paragraph is at most this long
FOOTER_PARAGRAPHS = 2
IDENT_MIN = 6
NUMBER_MIN = 4  # a run of digits (and separators) this long is an identifier: #48213 and #48377 share nothing
IDENT_TAIL = 8  # the last characters of a longer identifier stay free text: its serial end links, its prefix does not


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _phrases(text: str) -> tuple[str, ...]:
    return tuple(p.strip(" ") for p in text.split("|"))


GREETINGS = _words("hi hello hey dear greetings hiya howdy morning afternoon evening good to team all folks everyone")
HEADER_WORDS = _words(
    "confidential privileged internal external caution warning notice important private restricted proprietary "
    "attention disclaimer sensitive classified"
)
SIGNOFFS = _phrases(
    "best regards|kind regards|warm regards|warmest regards|with warm regards|with kind regards|with best regards|"
    "regards|best wishes|all the best|best|many thanks|thanks again|thanks so much|thank you|thanks|thx|cheers|"
    "sincerely|yours sincerely|yours truly|yours faithfully|yours|respectfully|cordially|take care|talk soon|"
    "speak soon|warmly|--|—"
)
FOOTER_STARTS = _phrases(
    "this e-mail|this email|this message|this communication|this transmission|this electronic|confidential|"
    "disclaimer|privileged|notice:|legal notice|important notice|important:|caution:|unsubscribe|to unsubscribe|"
    "you are receiving|you received this|you're receiving|©|(c)|copyright|registered office|registered in|"
    "sent from my|get outlook|please consider the environment|if you have received|if you received|"
    "the information contained|the information in this|the content of this|any views or opinions|do not reply|"
    "please do not reply"
)
#: Company-register wording that marks a footer anywhere in its first :data:`FOOTER_LEAD` characters ("Acme Ltd.
#: Registered in England and Wales, company number ..."), where the paragraph starts with the company's name.
FOOTER_INNER = _phrases(
    "registered in|registered office|company number|company no.|registration number|all rights reserved|"
    "vat number|vat reg|is a trading name|is authorised and regulated"
)
FOOTER_LEAD = 120
STOPWORDS = _words(
    "a an the of in on at to for from by with and or our your my their his her its is are was be been has have "
    "had will would can could should may this that these those we you i it as per via all any each every no not "
    "new next last first second third other same own more most less few many much very just only also now then "
    "here there today tomorrow yesterday day days week weeks month months year years morning afternoon evening "
    "night weekend monday tuesday wednesday thursday friday saturday sunday january february march april june "
    "july august september october november december one two three four five six seven eight nine ten eleven "
    "twelve twenty thirty forty fifty hundred thousand million billion dollars euros pounds percent please thanks "
    "thank hello hi dear regards best team office update updated status note"
)  # words that carry little information: function words, days, months, numbers in words, everyday mail words
TLDS = _words(
    "com org net edu gov mil int io co info biz app dev ai me us uk de fr nl eu ca au jp ch se no es it ly test "
    "example local internal corp lan cloud online site tech xyz"
)


def body_range(text: str, footer: bool = True) -> tuple[int, int]:
    """``[lo, hi)``: ``text`` without its opening and closing zones (``footer``: a record's trailing footer
    paragraphs count too; a call's argument keeps them, so a payload cannot hide in a footer it writes)."""
    lo = _opening_end(text)
    hi = _closing_start(text, lo, footer)
    return (lo, hi) if hi > lo else (lo, lo)


def _lines_from(text: str, pos: int) -> tuple[str, int]:
    end = text.find("\n", pos)
    end = len(text) if end < 0 else end
    return text[pos:end], end


def _opening_end(text: str) -> int:
    pos, taken, size = 0, 0, len(text)
    zone_end = 0
    while taken < OPENING_LINES and pos < size:
        line, end = _lines_from(text, pos)
        if not line.strip():
            pos = end + 1
            continue
        if end >= size or not _opening_line(line):  # the last line is never a zone: a text is more than its greeting
            break
        taken += 1
        pos = zone_end = end + 1
    return zone_end


def _opening_line(line: str) -> bool:
    stripped = line.strip()
    words = stripped.split()
    if len(stripped) > LINE_CHARS or not words:
        return False
    first = words[0].strip("[]()*:,!.-").lower()
    if first in GREETINGS and len(words) <= 6:
        return True
    letters = [c for c in stripped if c.isalpha()]
    shouted = len(letters) >= 4 and not any(c.islower() for c in letters)  # CONFIDENTIAL - INTERNAL USE ONLY
    return len(words) <= 12 and (first in HEADER_WORDS or shouted)


def _closing_start(text: str, lo: int, footer: bool) -> int:
    hi = len(text.rstrip())
    if footer:
        for _ in range(FOOTER_PARAGRAPHS):
            cut = text.rfind("\n\n", lo, hi)
            start = cut + 2 if cut >= 0 else lo
            paragraph = text[start:hi].strip()
            if start == lo or len(paragraph) > FOOTER_CHARS or not _footer(paragraph.lower()):
                break
            hi = len(text[:cut].rstrip())
    start, end, seen = hi, hi, 0
    while seen < CLOSING_LINES and end > lo:
        nl = text.rfind("\n", lo, end)
        line_start = nl + 1 if nl >= 0 else lo
        line = text[line_start:end].strip()  # stripping it changes neither test below
        if line:
            seen += 1
            if line_start > lo and _signoff_line(line):
                return line_start if seen - 1 <= SIGNATURE_LINES else hi
            if len(line) > SIGNATURE_CHARS or _wordy(line):
                return start
        if nl < 0:
            break
        end = nl
    return start


def _footer(paragraph: str) -> bool:
    """Whether a (lower-case) last paragraph reads as a footer: it starts with footer wording, or names the
    company register early on."""
    return paragraph.startswith(FOOTER_STARTS) or any(p in paragraph[:FOOTER_LEAD] for p in FOOTER_INNER)


def _wordy(line: str) -> bool:
    """Whether more than 8 of the words of ``line`` hold a letter (never with 8 words or fewer)."""
    words = line.split()
    return len(words) > 8 and sum(any(c.isalpha() for c in w) for w in words) > 8


def _signoff_line(line: str) -> bool:
    stripped = line.strip().lower().rstrip(",!.;:")
    if len(stripped) > 40 or not stripped.startswith(SIGNOFFS):  # the loop below finds which one
        return False
    for phrase in SIGNOFFS:
        if stripped.startswith(phrase):
            rest = stripped[len(phrase) :]
            return not rest or (rest[0] in ",-–—" and len(rest.split()) <= 4)
    return False


_RUN = re.compile(r"(?<![\w.+-])(?:\d{2,}(?: \d{2,})+(?![\w.+-])|[\w.+-]*[\d.][\w.+-]*)")
_KEY = re.compile(r"[\d.][\w.+-]*")  # a digit or dot and the rest of its run: where a match of _RUN can be
_WORD_MARKS = frozenset("_.+-")  # with the alphanumerics (re's \w but _), the characters of [\w.+-]
_TRIM = "._+-"


def identifier_values(text: str, ranges: Iterable[tuple[int, int]]) -> list[Value]:
    """The identifiers (kind ``ident``, key ``id:TOKEN``) and bare hosts (kind ``host``, key ``""``: no
    whole match) in the free ``ranges`` of ``text``."""
    found: list[Value] = []
    for lo, hi in ranges:
        for m in _runs(text, lo, hi):
            token = m.group(0)
            stripped = token.strip(_TRIM)
            size = len(stripped)
            if size < IDENT_MIN and (size < NUMBER_MIN or not _numeric(stripped)):  # IDENT_MIN > NUMBER_MIN
                continue
            kind = _kind(stripped)
            if kind:
                start = m.start() + (len(token) - len(token.lstrip(_TRIM)) if token[0] in _TRIM else 0)
                found.append(Value(kind, start, start + size, f"id:{stripped}" if kind == "ident" else ""))
    return found


def _runs(text: str, lo: int, hi: int) -> list[re.Match[str]]:
    """``list(_RUN.finditer(text, lo, hi))``, tried only at the start of each run of ``[\\w.+-]`` that holds a
    digit or a dot (found by :data:`_KEY`, a fast scan): every match of ``_RUN`` starts a run (its lookbehind) and
    has a digit or dot in its first run; a run that starts before ``lo`` has no match in ``[lo, hi)``; a run
    that fails leaves nothing before its end, and a match ends where a run does."""
    found: list[re.Match[str]] = []
    pos = lo
    for key in _KEY.finditer(text, lo, hi):
        at = key.start()
        if at < pos:  # inside the last match
            continue
        start = at
        while start > pos and ((c := text[start - 1]).isalnum() or c in _WORD_MARKS):
            start -= 1
        if start == pos and start > 0 and ((c := text[start - 1]).isalnum() or c in _WORD_MARKS):
            pos = key.end()  # the run began before lo
            continue
        m = _RUN.match(text, start, hi)
        if m is not None:
            found.append(m)
        pos = key.end() if m is None else m.end()
    return found


def _numeric(token: str) -> bool:
    """Digits with separators only (``48213``, ``2.4.1``, ``845 2291``)."""
    return token.translate(_SEPARATORS).isdigit()


_SEPARATORS = str.maketrans("", "", " .-_+")
_ASCII_DIGIT = re.compile("[0-9]")  # an ASCII character is a digit (str.isdigit) exactly when it is one of these


def _kind(token: str) -> str:
    dotted = "." in token
    if dotted:
        labels = token.split(".")
        if labels[-1].lower() in TLDS and all(x and x.replace("-", "").isalnum() for x in labels):
            return "host"
    if _ASCII_DIGIT.search(token) if token.isascii() else any(c.isdigit() for c in token):
        return "ident"
    if dotted:
        for i in range(1, len(token) - 1):
            if token[i] == "." and token[i - 1].isalnum() and token[i + 1].isalnum():
                return "ident"
    return ""


def namespace_segments(text: str, values: Iterable[Value]) -> list[tuple[int, int]]:
    """The first path segment of each URL of ``text`` (with its slash) when another segment follows it."""
    out: list[tuple[int, int]] = []
    for value in values:
        if value.kind != "url" or value.nested:
            continue
        scheme = text.find("://", value.start, value.end)
        at = value.start if scheme < 0 else scheme + 3
        slash = text.find("/", at, value.end)
        if slash < 0 or any(c in text[at:slash] for c in "?#"):
            continue
        cut = slash + 1
        while cut < value.end and text[cut] not in "/?#":
            cut += 1
        if cut < value.end and text[cut] == "/" and cut > slash + 1:
            out.append((slash, cut + 1))
    return out


def minus(ranges: Iterable[tuple[int, int]], holes: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """``ranges`` without ``holes`` (both ascending ``[lo, hi)``)."""
    cuts = sorted(holes)
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        cursor = lo
        for a, b in cuts:
            if b <= cursor or a >= hi:
                continue
            if a > cursor:
                out.append((cursor, a))
            cursor = max(cursor, b)
        if hi > cursor:
            out.append((cursor, hi))
    return tuple(out)


def within(ranges: Iterable[tuple[int, int]], lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    """``ranges`` cut to ``[lo, hi)``."""
    return tuple((max(a, lo), min(b, hi)) for a, b in ranges if min(b, hi) > max(a, lo))


def zone_holes(text: str, footer: bool = True) -> tuple[tuple[int, int], ...]:
    """The opening and closing zones of ``text`` as ranges (:func:`body_range`); none is empty."""
    return _cached_holes(text, footer) if len(text) <= _CACHED_CHARS else _holes(text, footer)


def _holes(text: str, footer: bool) -> tuple[tuple[int, int], ...]:
    lo, hi = body_range(text, footer)
    return tuple((a, b) for a, b in ((0, lo), (hi, len(text))) if b > a)


_cached_holes = lru_cache(maxsize=8192)(_holes)


def read_body(text: str, ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """``ranges`` of a call's argument without its zones (a call keeps a trailing footer: see :func:`body_range`)."""
    holes = zone_holes(text, False)
    return minus(ranges, holes) if holes else ranges


def mark(text: str, analysis: Analysis) -> Analysis:
    """``(values, free ranges)`` of ``text`` with its identifiers, bare hosts and URL first path segments added to
    the values and removed from the free ranges (:func:`identifier_values`, :func:`namespace_segments`)."""
    values, ranges = analysis
    found = [Value("segment", lo, hi, "") for lo, hi in namespace_segments(text, values)]
    if found:  # a first segment is namespace before anything inside it is an identifier
        ranges = minus(ranges, [(v.start, v.end) for v in found])
    found += identifier_values(text, ranges)
    if not found:
        return analysis
    return values + tuple(found), minus(ranges, sorted((v.start, v.end) for v in found))


def marked(text: str, cached: Callable[[str], Analysis], uncached: Callable[[str], Analysis]) -> Analysis:
    """:func:`mark` of ``text`` and its analysis (``cached`` for a text of at most 4,096 characters)."""
    return mark(text, cached(text) if len(text) <= _CACHED_CHARS else uncached(text))


@lru_cache(maxsize=8192)
def wrapped_identifiers(text: str) -> frozenset[str]:
    """The whole-identifier keys a call's argument can hold inside a structure of its own: each piece of ``text``
    between ``@ / : \\ ? # & = ;`` and white space, and each run of its parts between ``. _ + -`` (``x_TOKEN.txt``,
    ``ops+TOKEN@host``, ``TOKEN.evil.test``), of identifier shape."""
    keys: set[str] = set()
    for piece in _PIECES.split(text):
        cuts = [0] + [m.end() for m in _PART.finditer(piece)] if len(piece) >= NUMBER_MIN else []
        if len(cuts) > _MAX_PARTS:
            cuts = cuts[:1]
        ends = [m.start() for m in _PART.finditer(piece)] + [len(piece)] if cuts else []
        for a in cuts:
            for b in ends:
                part = piece[a:b].strip(_TRIM)
                if b > a and len(part) >= (NUMBER_MIN if _numeric(part) else IDENT_MIN) and _kind(part) == "ident":
                    keys.add(f"id:{part}")
    return frozenset(keys)


def wrapped_bits(wholes: dict[str, int], text: str, values: tuple[Value, ...]) -> int:
    """The holders (in ``wholes``) of a whole identifier in ``text``, also inside a structure the call built."""
    if not wholes or not values:
        return 0
    bits = 0
    for key in wrapped_identifiers(text) if len(text) <= _CACHED_CHARS else wrapped_identifiers.__wrapped__(text):
        bits |= wholes.get(key, 0)
    return bits


_PART = re.compile(r"[._+-]")
_MAX_PARTS = 8  # a piece cut into more parts is read whole and by its single parts' ends only
_PIECES = re.compile(r"[@/:\\?#&=;\s]+")
_CACHED_CHARS = 4096


def with_tails(ranges: tuple[tuple[int, int], ...], values: Iterable[Value]) -> tuple[tuple[int, int], ...]:
    """``ranges`` (ascending, disjoint) with the last :data:`IDENT_TAIL` characters of each longer identifier of
    ``values`` added: the part of an identifier that tells it from its neighbours in a series."""
    tails = [(v.end - IDENT_TAIL, v.end) for v in values if v.kind == "ident" and v.end - v.start > IDENT_TAIL]
    if not tails:
        return ranges
    out: list[tuple[int, int]] = []
    for lo, hi in sorted([*ranges, *tails]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)
