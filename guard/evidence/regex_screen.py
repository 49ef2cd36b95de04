"""Literal screens: which regular expressions cannot match a text, told by substring tests.

A pattern's *screen* is a set of lowercase ASCII strings such that every match of the pattern, in
any text, contains one of them, compared without case.  An ASCII text whose lowercase form holds
none of them has no match of the pattern, so the pattern need not be run over it: one ``in`` test
per string replaces a regex scan over the whole text.

The screen is read off the parsed pattern and errs only one way: where a construct is not
understood (a class, a lookaround, a back-reference, an optional part), it contributes no string,
so a pattern is dropped only when a string every match must contain is absent.  A pattern with no
such string gets no screen (``None``) and is always run.

Why lowercasing is exact here: for an ASCII text character ``c`` and an ASCII pattern literal
``l``, Python's ``re`` matches ``c`` against ``l`` without case exactly when ``c.lower() ==
l.lower()`` (its extra case equivalences, such as the long s or the Kelvin sign, all involve a
non-ASCII character), and with case only when ``c == l``.  So strings with a non-ASCII character
are left out of screens, and texts with one are not screened (:func:`live` returns ``None``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from re import _parser as _sre_parse  # type: ignore[attr-defined]  # re's own parser (3.11+)

__all__ = [
    "GROUP_REFERENCE",
    "alternation",
    "alternation_for",
    "first_class",
    "gated",
    "live",
    "matches_at",
    "screen",
    "screens",
]

Screen = frozenset[str] | None

#: a group reference, whose meaning changes when its pattern stands in an alternation with others
GROUP_REFERENCE = re.compile(r"\\[1-9]|\(\?P[<=]|\(\?\(")

SCREENED = 64  # texts shorter than this are not screened
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def screen(pattern: re.Pattern[str]) -> Screen:
    """Lowercase ASCII strings one of which every match of ``pattern`` contains, or None (no screen)."""
    if not isinstance(pattern.pattern, str):
        return None
    try:
        parsed = _sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - an unparsable pattern gets no screen: it is always run
        return None
    return _best(_candidates(list(parsed)))


@lru_cache(maxsize=64)
def screens(patterns: tuple[re.Pattern[str], ...]) -> tuple[Screen, ...]:
    """:func:`screen` of each of ``patterns``."""
    return tuple(screen(p) for p in patterns)


@lru_cache(maxsize=64)
def _strings(patterns: tuple[re.Pattern[str], ...]) -> tuple[str, ...]:
    """Every string of the screens of ``patterns``, once (several screens may share one)."""
    return tuple(sorted({s for strings in screens(patterns) if strings for s in strings}))


def live(patterns: tuple[re.Pattern[str], ...], text: str) -> tuple[int, ...] | None:
    """Indices of the ``patterns`` that may match ``text``, or None (try all) when ``text`` is not ASCII or
    shorter than :data:`SCREENED` characters (running the patterns over it costs less than the screen).

    A pattern left out has no match in ``text``; one kept may still have none.
    """
    if len(text) < SCREENED or not text.isascii():
        return None
    lowered = text.lower()
    present = {s for s in _strings(patterns) if s in lowered}
    return tuple(i for i, strings in enumerate(screens(patterns)) if strings is None or not strings.isdisjoint(present))


@lru_cache(maxsize=256)
def alternation(sources: tuple[str, ...]) -> re.Pattern[str]:
    """The regex that matches where one of ``sources`` does, the first of them winning at a position."""
    return re.compile("|".join(f"(?:{source})" for source in sources))


@lru_cache(maxsize=64)
def _branches(sources: tuple[str, ...]) -> tuple[re.Pattern[str], ...] | None:
    if any(GROUP_REFERENCE.search(source) for source in sources):
        return None  # dropping a branch would renumber the groups its neighbours refer to
    return tuple(re.compile(source) for source in sources)


def alternation_for(sources: tuple[str, ...], text: str) -> re.Pattern[str] | None:
    """:func:`alternation` of those ``sources`` that may match ``text`` (None: none can).

    It finds in ``text`` exactly what the alternation of all of them finds: a branch dropped here
    matches nowhere in ``text``, so at no position is it the first branch that matches.
    """
    branches = _branches(sources)
    kept = live(branches, text) if branches is not None else None
    if kept is None:
        return alternation(sources)
    return alternation(tuple(sources[i] for i in kept)) if kept else None


@lru_cache(maxsize=256)
def gated(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """``pattern`` behind a lookahead for the characters its matches can start with (:func:`first_class`): the
    same matches (spans, groups) found by ``finditer``, ``search`` and ``match``, but a position whose character
    cannot start one is left after one class test instead of a try of every branch; ``pattern`` itself when it
    may match the empty string or its first characters are not known.

    Exact: a match of ``pattern`` is not empty, so it starts with a character it consumes, which lies in the
    class; at any other position (the text's end included) neither pattern matches.
    """
    first = first_class(pattern)
    if first is None:
        return pattern
    return re.compile(f"(?={first})(?:{pattern.pattern})", pattern.flags)


def first_class(pattern: re.Pattern[str]) -> str | None:
    """A character class (regex source) holding the first character of every match of ``pattern``, or None:
    ``pattern`` may match the empty string, is compared without case, or starts with an item not read here
    (any character, a negated class or literal, a group reference)."""
    if not isinstance(pattern.pattern, str) or pattern.flags & re.IGNORECASE:
        return None
    try:
        parsed = _sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - an unparsable pattern gets no gate
        return None
    if parsed.state.flags & re.IGNORECASE:
        return None
    first = _first(list(parsed))
    if first is None or first[1] or not first[0]:
        return None
    return "[" + "".join(sorted(first[0])) + "]"


_ZERO_WIDTH = {"AT", "ASSERT", "ASSERT_NOT"}
_CATEGORIES = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
}


def _first(items: list[tuple[object, object]]) -> tuple[set[str], bool] | None:
    """``(class items, nullable)`` of a parsed sequence: the class items (regex source) that hold the first
    character a match of ``items`` consumes, and whether a match may consume none; None if not known."""
    found: set[str] = set()
    for op, av in items:
        name = str(op)
        if name in _ZERO_WIDTH:
            continue
        if name == "LITERAL":
            found.add(_char(av))  # type: ignore[arg-type]
            return found, False
        if name == "IN":
            members = _members(av)  # type: ignore[arg-type]
            if members is None:
                return None
            return found | members, False
        if name == "SUBPATTERN":
            if av[1] & re.IGNORECASE:  # type: ignore[index]
                return None
            inner = _first(list(av[-1]))  # type: ignore[index]
        elif name == "ATOMIC_GROUP":
            inner = _first(list(av))  # type: ignore[call-overload]
        elif name in _REPEATS:
            inner = _first(list(av[2]))  # type: ignore[index]
            if inner is not None and av[0] == 0:  # type: ignore[index]
                inner = inner[0], True
        elif name == "BRANCH":
            inner = set(), False
            for branch in av[1]:  # type: ignore[index]
                one = _first(list(branch))
                if one is None:
                    return None
                inner = inner[0] | one[0], inner[1] or one[1]
        else:
            return None
        if inner is None:
            return None
        found |= inner[0]
        if not inner[1]:
            return found, False
    return found, True


def _char(code: int) -> str:
    return f"\\U{code:08x}"


def _members(items: list[tuple[object, object]]) -> set[str] | None:
    """The class items (regex source) of a parsed character class, or None for a negated one."""
    out: set[str] = set()
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            out.add(_char(av))  # type: ignore[arg-type]
        elif name == "RANGE":
            out.add(f"{_char(av[0])}-{_char(av[1])}")  # type: ignore[index]
        elif name == "CATEGORY" and str(av) in _CATEGORIES:
            out.add(_CATEGORIES[str(av)])
        else:
            return None
    return out


def matches_at(pattern: re.Pattern[str], text: str, starts: Iterable[int]) -> list[re.Match[str]]:
    """``list(pattern.finditer(text))`` for a pattern whose every match starts at one of ``starts`` and is
    not empty: it is tried only there, in ascending order, and from the end of the previous match on
    (``match`` at a position still reads the text before it, for a lookbehind or ``\\b``)."""
    found: list[re.Match[str]] = []
    after = 0
    for start in sorted(set(starts)):
        if start >= after:
            m = pattern.match(text, start)
            if m is not None:
                found.append(m)
                after = max(m.end(), start + 1)
    return found


def _best(candidates: list[frozenset[str]]) -> Screen:
    """The most selective candidate: the one whose shortest string is longest, then the fewest strings."""
    usable = [c for c in candidates if c and all(s and s.isascii() for s in c)]
    if not usable:
        return None
    chosen = max(usable, key=lambda c: (min(map(len, c)), -len(c)))
    return frozenset(s.lower() for s in chosen)


def _candidates(items: list[tuple[object, object]]) -> list[frozenset[str]]:
    """Sets of strings, each such that every match of the sequence ``items`` contains one of its members."""
    found: list[frozenset[str]] = []
    run: list[str] = []
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            run.append(chr(av))  # type: ignore[arg-type]
            continue
        if run:
            found.append(frozenset({"".join(run)}))
            run = []
        found += _inner(name, av)
    if run:
        found.append(frozenset({"".join(run)}))
    return found


def _inner(name: str, av: object) -> list[frozenset[str]]:
    """The candidates one non-literal item contributes: groups and required repeats pass theirs on, and an
    alternation the union of its branches' best (when every branch has one); anything else none."""
    if name == "SUBPATTERN":
        return _candidates(list(av[-1]))  # type: ignore[index]
    if name == "ATOMIC_GROUP":
        return _candidates(list(av))  # type: ignore[call-overload]
    if name in _REPEATS and av[0] >= 1:  # type: ignore[index]
        return _candidates(list(av[2]))  # type: ignore[index]
    if name == "BRANCH":
        union: set[str] = set()
        for branch in av[1]:  # type: ignore[index]
            best = _best(_candidates(list(branch)))
            if best is None:
                return []
            union |= best
        return [frozenset(union)]
    return []
