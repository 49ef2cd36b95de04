"""Cores of structured values: the part that names the thing, matched even in an altered copy.

A card number with its check digit dropped, an IBAN with wrong check digits or only its BBAN, a phone
number without its ``+``, the local part of an e-mail address, an address with one character added:
each is no longer the same whole value (:mod:`guard.evidence.values`), yet each can be repaired at the
receiving end.  So every recognised value of these kinds also gives *cores*, and a later text matches
a core when it holds a copy of it **within one edit** (one character substituted, inserted or
deleted), anywhere, in any grouping (docs/evidence.md#cores-altered-copies-of-a-structured-value).

========  ==========================================================  ==========  ====
kind      cores                                                       projection  min
========  ==========================================================  ==========  ====
card      its digits                                                  digits      10
IBAN      each digit run of the IBAN without its country (check       digits      10
          digits and BBAN), and of its BBAN alone
phone     its digits (no ``+``), and without 1 to 3 leading digits    digits      10
          (the country code)
e-mail    the local part, case-folded, unless it is letters only      text        8
          (``newsletter``, ``johnsmith`` cannot be told from a word)
========  ==========================================================  ==========  ====

A text is compared in two *projections*: ``digits`` drops one or two of ``space - . / ( ) +`` between
a digit and a digit or letter (so ``4929-3817 5520.1146``, ``+49 (30) 1234-5678`` and ``DE44 500A``
read as runs); ``text`` is the case-folded text, and a copy there must be one run of local-part
characters (``Lena Novak``, a name, is no copy of ``lena.novak``).  A core shorter than its minimum is
not kept: a short run within one edit of another says nothing.

Matching is exact, not statistical: by pigeonhole one of a core's two halves survives one edit
intact, so the first ``Q`` characters of each half are its *anchors*; a window of the text equal to
an anchor is checked with an O(length) edit-distance test around it.  The module's functions are pure;
:class:`CoreIndex` holds the cores of one session.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache

from guard.evidence.kgrams import Key, gram_key, keys_at
from guard.evidence.values import Value

__all__ = ["CORE_MIN", "DIGITS", "TEXT", "CoreIndex", "Q", "cores_of", "key_cores", "near", "one_edit", "project"]

DIGITS, TEXT = "digits", "text"
CORE_MIN = {DIGITS: 10, TEXT: 8}  # shortest core kept, per projection
Q = {DIGITS: 5, TEXT: 4}  # anchor length: at most half the shortest core
_JOIN = re.compile(r"(?<=\d)[ \-./()+]{1,2}(?=[0-9A-Za-z])|(?<=[A-Za-z])[ \-./()+]{1,2}(?=\d)")
_DIGITS = re.compile(r"\d+")
_COUNTRY_CODE = 3  # E.164 country codes have 1 to 3 digits
_LOCAL_RUN = re.compile(r"[a-z0-9._%+\-]+")  # a local part's characters, folded (as the recogniser reads them)
_LOCAL_TAIL = re.compile(r"[a-z0-9._%+\-]*\Z")  # searched up to a position: where the run before it starts
_LOCAL_COPY = re.compile(rf"[a-z0-9._%+\-]{{{CORE_MIN[TEXT] - 1}}}")
# one substring search per anchor costs about 1/32 of building a text's q-gram set, plus 1/6 per character
_SEARCHES, _CHARS_PER_SEARCH = 32, 6
_ENOUGH_DIGITS = re.compile(rf"(?:\D*\d){{{CORE_MIN[DIGITS] - 1}}}")


def project(projection: str, text: str) -> str:
    """``text`` in a projection: digit groups joined (``digits``) or case-folded (``text``)."""
    return _JOIN.sub("", text) if projection == DIGITS else text.casefold()


def cores_of(values: Iterable[Value]) -> Iterator[tuple[str, str]]:
    """``(projection, core)`` of every core of ``values`` (a core may repeat)."""
    for value in values:
        yield from key_cores(value.key)


@lru_cache(maxsize=8192)
def key_cores(key: str) -> tuple[tuple[str, str], ...]:
    """``(projection, core)`` of every core of the structured value whose key (normal form) is ``key``."""
    return tuple(_key_cores(key))


def _key_cores(key: str) -> Iterator[tuple[str, str]]:
    kind, _, body = key.partition(":")
    if kind == "card":
        yield from _long(DIGITS, (body,))
    elif kind == "iban":
        yield from _long(DIGITS, (*_DIGITS.findall(body[2:]), *_DIGITS.findall(body[4:])))
    elif kind == "phone":
        digits = body.lstrip("+")
        yield from _long(DIGITS, (digits[cut:] for cut in range(_COUNTRY_CODE + 1)))
    elif kind == "email":
        local = body.rpartition("@")[0]
        if not local.isalpha():
            yield from _long(TEXT, (local,))


def _long(projection: str, cores: Iterable[str]) -> Iterator[tuple[str, str]]:
    shortest = CORE_MIN[projection]
    return ((projection, core) for core in cores if len(core) >= shortest)


def anchors(core: str, q: int) -> tuple[tuple[str, int], ...]:
    """The anchors of ``core``: the first ``q`` characters of each half, with their offsets."""
    half = len(core) // 2
    return ((core[:q], 0), (core[half : half + q], half))


def one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are at most one edit apart (Levenshtein distance ≤ 1)."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    p, n = 0, min(la, lb)
    while p < n and a[p] == b[p]:
        p += 1
    if la == lb:
        return a[p + 1 :] == b[p + 1 :]
    return a[p + 1 :] == b[p:] if la > lb else a[p:] == b[p + 1 :]


def near(core: str, text: str, start: int) -> bool:
    """Whether a substring of ``text`` starting within one place of ``start`` is within one edit of ``core``."""
    size = len(core)
    for begin in (start, start + 1, start - 1):
        if begin < 0:
            continue
        for length in (size, size - 1, size + 1):
            piece = text[begin : begin + length]
            if len(piece) == length and one_edit(core, piece):
                return True
    return False


def near_local(core: str, text: str, start: int) -> bool:
    """:func:`near` for a local part: the copy must lie in one run of local-part characters, so that
    ``lena novak`` (a name, one edit from ``lena.novak``) is no copy of it."""
    size = len(core)
    lo, hi = _run(text, max(0, start - 1), start + size + 1)
    return hi - lo >= size - 1 and near(core, text[lo:hi], start - lo)


def _run(text: str, lo: int, hi: int) -> tuple[int, int]:
    """The run of local-part characters of ``text[lo:hi]`` that holds its middle, as ``(start, end)``."""
    middle = (lo + hi) // 2
    after = _LOCAL_RUN.match(text, middle, hi)
    if after is None:
        return middle, middle
    before = _LOCAL_TAIL.search(text, lo, middle)
    return (before.start() if before is not None else middle), after.end()


class _Projection:
    """The cores of one projection: core → holders (a bit set), anchor key → ``(core, offset)`` entries."""

    def __init__(self, projection: str) -> None:
        self.projection = projection
        self.q = Q[projection]
        self.shortest = CORE_MIN[projection] - 1  # the shortest copy: a core with one character deleted
        self.holders: dict[str, int] = {}
        self.anchors: dict[Key, list[tuple[str, int]]] = {}
        self._texts: dict[Key, str] = {}  # anchor key → the anchor

    def add(self, core: str, node: int) -> None:
        one = 1 << node
        known = self.holders.get(core)
        self.holders[core] = (known or 0) | one
        if known is not None:
            return
        q = self.q
        for anchor, offset in anchors(core, q):
            key = gram_key(anchor, q)
            self.anchors.setdefault(key, []).append((core, offset))
            self._texts[key] = anchor

    def bits(self, text: str) -> int:
        """The holders of every core a copy of which, within one edit, ``text`` holds."""
        if len(text) < self.shortest:
            return 0
        if self.projection == DIGITS:
            if _ENOUGH_DIGITS.match(text) is None:
                return 0
            seen, check = _JOIN.sub("", text), near
        else:
            seen, check = text.casefold(), near_local
            if _LOCAL_COPY.search(seen) is None:  # a copy is one run of at least shortest local-part characters
                return 0
        anchors, holders, q = self.anchors, self.holders, self.q
        bits = 0
        for key in self._hits(seen):
            for core, offset in anchors[key]:
                held = holders[core]
                if bits & held != held and _copied(core, offset, q, seen, check):
                    bits |= held
        return bits

    def _hits(self, seen: str) -> Iterable[Key]:
        """The anchor keys that occur in ``seen``: tested one by one (a C-level substring search each) while
        there are few, else by the set of ``seen``'s q-grams."""
        texts = self._texts
        if len(texts) <= _SEARCHES + len(seen) // _CHARS_PER_SEARCH:
            return [key for key, anchor in texts.items() if anchor in seen]
        q = self.q
        return keys_at(seen, ((0, len(seen) - q + 1),), q) & texts.keys() if len(seen) >= q else ()


def _copied(core: str, offset: int, q: int, seen: str, check: Callable[[str, str, int], bool]) -> bool:
    """Whether ``seen`` holds a copy of ``core`` within one edit around an occurrence of its anchor at ``offset``."""
    anchor = core[offset : offset + q]
    at = seen.find(anchor)
    while at >= 0:
        if check(core, seen, at - offset):
            return True
        at = seen.find(anchor, at + 1)
    return False


class CoreIndex:
    """Cores of the structured values of earlier records → the records that hold them."""

    def __init__(self) -> None:
        self._projections = {name: _Projection(name) for name in (DIGITS, TEXT)}
        self._live: tuple[_Projection, ...] = ()  # the projections that hold a core

    def add(self, node: int, values: Iterable[Value]) -> None:
        """Index the cores of ``values`` (found in the text of ``node``)."""
        projections = self._projections
        added = False
        for projection, core in cores_of(values):
            projections[projection].add(core, node)
            added = True
        if added:
            self._live = tuple(p for p in projections.values() if p.holders)

    def bits(self, text: str) -> int:
        """The nodes holding a core of which ``text`` holds a copy within one edit, as a bit set."""
        live = self._live
        if len(live) == 1:
            return live[0].bits(text)
        return live[0].bits(text) | live[1].bits(text) if live else 0

    def __bool__(self) -> bool:
        """Whether any core is held."""
        return bool(self._live)
