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

__all__ = ["GROUP_REFERENCE", "alternation", "alternation_for", "live", "matches_at", "screen", "screens"]

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
