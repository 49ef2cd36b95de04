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
from typing import Any, cast

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
    plan = _PLANS.get(id(patterns))
    if plan is None or plan[0] is not patterns:  # kept by identity: an entry holds its tuple, whose id is its own
        _PLANS.clear() if len(_PLANS) >= 256 else None  # (at most 256 tuples: a compiled pattern's hash is slow)
        plan = _PLANS[id(patterns)] = (patterns, _strings(patterns), screens(patterns))
    lowered = text.lower()
    present = {s for s in plan[1] if s in lowered}
    return tuple(i for i, strings in enumerate(plan[2]) if strings is None or not strings.isdisjoint(present))


_PLANS: dict[int, tuple[tuple[re.Pattern[str], ...], tuple[str, ...], tuple[Screen, ...]]] = {}


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
    if first is None or pattern.flags & re.VERBOSE:  # verbose: a comment could swallow the closing parenthesis
        return pattern
    source = re.sub(r"\A(?:\(\?[aiLmsux]+\))+", "", pattern.pattern)  # leading (?a) etc.: in pattern.flags
    try:
        return re.compile(f"(?={first})(?:{source})", pattern.flags)
    except re.error:  # a global flag group past the start: left as it is
        return pattern


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
            found.append(_followed("".join(run), name, av))
            run = []
        found += _inner(name, av)
    if run:
        found.append(frozenset({"".join(run)}))
    return found


def _required_body(name: str, av: object) -> list[tuple[object, object]] | None:
    """The items every match of a group or of a repeat taken at least once matches in full; None for any other item."""
    items = cast("tuple[Any, ...]", av)
    if name == "SUBPATTERN":
        return list(items[-1])
    if name == "ATOMIC_GROUP":
        return list(items)
    return list(items[2]) if name in _REPEATS and items[0] >= 1 else None


def _inner(name: str, av: object) -> list[frozenset[str]]:
    """The candidates one non-literal item contributes: groups and required repeats pass theirs on, and an
    alternation the union of its branches' best (when every branch has one); anything else none."""
    body = _required_body(name, av)
    if body is not None:
        return _candidates(body)
    if name == "BRANCH":
        union: set[str] = set()
        for branch in av[1]:  # type: ignore[index]
            best = _best(_candidates(list(branch)))
            if best is None:
                return []
            union |= best
        return [frozenset(union)]
    return []


_MAX_STRINGS = 64  # the most strings a set of exact strings or starts is grown to
_SHORT = 3  # a run of literals shorter than this is joined to what follows it (_followed)


def _followed(run: str, name: str, av: object) -> frozenset[str]:
    """The candidate of a run of literals followed by the item ``name``/``av``: the run joined to each string a
    match of the item starts with (:func:`_item_starts`), the strings that hold another one left out.  Every
    match of the sequence holds the run and, right after it, the item's match, which starts with one of those
    strings; a string that holds another member admits no text the other does not (``\\.(?:md|jpe?g)``: ``.md``,
    ``.jpg``, ``.jpeg``, not ``.``).  A run of :data:`_SHORT` characters or more is selective already: kept."""
    if len(run) >= _SHORT:
        return frozenset({run})
    starts = _item_starts(name, av)
    if not starts or len(starts) > _MAX_STRINGS:
        return frozenset({run})
    joined = {run + start for start in starts}
    return frozenset(s for s in joined if not any(t != s and t in s for t in joined))


def _item_starts(name: str, av: object) -> frozenset[str]:
    """Strings one of which every match of one item starts with: its exact strings (:func:`_exact_item`) when
    known, else those of a group, a required repeat or an alternation (every branch's); else only ``""``."""
    exact = _exact_item(name, av)
    if exact is not None:
        return exact
    body = _required_body(name, av)
    if body is not None:
        return _starts(body)
    if name == "BRANCH":
        union: set[str] = set()
        for branch in av[1]:  # type: ignore[index]
            union |= _starts(list(branch))
        return frozenset(union) if len(union) <= _MAX_STRINGS else frozenset({""})
    return frozenset({""})


def _starts(items: list[tuple[object, object]]) -> frozenset[str]:
    """Strings one of which every match of the sequence ``items`` starts with: the exact strings of its leading
    items joined in turn, then the starts of the first item whose strings are not known."""
    acc = frozenset({""})
    for op, av in items:
        name = str(op)
        exact = _exact_item(name, av)
        following = _product(acc, exact if exact is not None else _item_starts(name, av))
        if following is None:
            return acc
        if exact is None:
            return following
        acc = following
    return acc


def _exact(items: list[tuple[object, object]]) -> frozenset[str] | None:
    """Every string a match of the sequence ``items`` can consume (a finite superset of them), or None."""
    acc: frozenset[str] | None = frozenset({""})
    for op, av in items:
        exact = _exact_item(str(op), av)
        acc = _product(acc, exact) if exact is not None and acc is not None else None
    return acc


def _exact_item(name: str, av: object) -> frozenset[str] | None:
    """Every string a match of one item can consume, or None when that is not known or more than
    :data:`_MAX_STRINGS`: a literal, a class of literals, a zero-width assertion (``""``), a group, an
    alternation, or a repeat of at most two of them."""
    if name == "LITERAL":
        return frozenset({chr(av)})  # type: ignore[arg-type]
    if name in _ZERO_WIDTH:
        return frozenset({""})
    if name in ("SUBPATTERN", "ATOMIC_GROUP"):
        return _exact(_required_body(name, av) or [])
    if name == "IN":
        chars = [chr(code) for op, code in av if str(op) == "LITERAL"]  # type: ignore[attr-defined]
        return frozenset(chars) if len(chars) == len(av) <= _MAX_STRINGS else None  # type: ignore[arg-type]
    if name == "BRANCH":
        union: set[str] = set()
        for branch in av[1]:  # type: ignore[index]
            exact = _exact(list(branch))
            if exact is None:
                return None
            union |= exact
        return frozenset(union) if len(union) <= _MAX_STRINGS else None
    if name in _REPEATS and av[1] <= 2:  # type: ignore[index]
        low, high, body = cast("tuple[int, int, list[tuple[object, object]]]", av)
        one, found = _exact(list(body)), set[str]()
        power: frozenset[str] | None = frozenset({""})  # the strings of ``count`` repeats
        for count in range(high + 1):
            if one is None or power is None:
                return None
            found |= power if count >= low else set()
            power = _product(power, one)
        return frozenset(found) if len(found) <= _MAX_STRINGS else None
    return None


def _product(heads: frozenset[str], tails: frozenset[str]) -> frozenset[str] | None:
    """Each of ``heads`` joined to each of ``tails``, or None when that makes more than :data:`_MAX_STRINGS`."""
    if len(heads) * len(tails) > _MAX_STRINGS:
        return None
    return frozenset(head + tail for head in heads for tail in tails)
