"""Weak spans: shared text too common in kind to link on its own (docs/evidence.md#boilerplate-by-position-and-shape).

A *run* is a maximal stretch of a call's argument whose ``min_span`` k-grams earlier free text holds.  A run is
**weak** (:func:`weak`) when it is letters, white space and light punctuation only, with at most
:data:`WEAK_WORDS` content words (or at most :data:`NAME_WORDS` capitalised ones: a name or a title): a city, a
street, a product name, an amount in words.  One weak run makes no edge: a call that shares only a city with a
private record scores as the same call with a fresh value would.  Weak runs still add evidence together: a
record that holds two or more *distinct* weak runs of the argument that read as values inside a line
(:func:`in_line_value`: a patient's name and her diagnosis in a sentence) is linked (:func:`joint_bits`), because
the chance that unrelated text shares two of them is the product of two small chances; the shared skeleton of a
template (field labels, line openings, runs across lines) never counts.  A run that overlaps a structured value
or an identifier, or that makes up the whole argument (``hotel: Riverside View Hotel``), is never weak.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from guard.evidence.boilerplate import STOPWORDS
from guard.evidence.kgrams import Key, window_keys
from guard.evidence.values import Value

__all__ = [
    "NAME_WORDS",
    "WEAK_WORDS",
    "in_line_value",
    "joint_bits",
    "reuse_bits",
    "strong_grams",
    "strong_keys",
    "weak",
]

WEAK_WORDS = 3
NAME_WORDS = 5  # a proper name or title of capitalised words


def weak(text: str, lo: int, hi: int) -> bool:
    """Whether the shared span ``text[lo:hi]`` is weak: letters, white space and ``, . ' & - : ; ! ? ( ) /`` only,
    with at most :data:`WEAK_WORDS` whole content words, or at most :data:`NAME_WORDS` all capitalised (a word cut
    by the span's ends, a field label ending in ``:`` or a stop word does not count)."""
    lo, hi = _whole_words(text, lo, hi)
    span = text[lo:hi]
    if any(not (c.isalpha() or c.isspace() or c in _WEAK_MARKS) for c in span):
        return False
    words = re.split(r"[^\w'’:]+", span)
    content = [w for w in words if len(w) >= 2 and not w.endswith(":") and w.lower() not in STOPWORDS]
    if len(content) <= WEAK_WORDS:
        return True
    return len(content) <= NAME_WORDS and all(w[0].isupper() and not w[1:].isupper() for w in content)  # a name


_WEAK_MARKS = frozenset(",.'’&-:;!?()/#")
_SPACE = re.compile(r"\s")


def strong_grams(
    text: str,
    ranges: tuple[tuple[int, int], ...],
    k: int,
    grams: set[Key],
    small: list[tuple[int, set[Key], set[Key]]] | None,
    postings: Mapping[Key, object],
    values: tuple[Value, ...],
) -> tuple[set[Key], list[set[Key]]]:
    """The keys of ``grams`` (of ``text`` in ``ranges``) that earlier free text holds (in the value index's ``small``
    k-gram sets, or else its ``postings``) but those that lie only in weak runs, and the weak runs' keys
    (:func:`strong_keys`); a span that overlaps a structured value or identifier of ``values`` (``TOKEN@host``) is
    never weak."""
    if small is not None:
        matched: set[Key] = set().union(*(grams & free for _, free, _ in small))
    else:
        matched = grams & postings.keys()
    return strong_keys(text, ranges, k, matched, tuple((v.start, v.end) for v in values)) if matched else (matched, [])


def strong_keys(
    text: str, ranges: tuple[tuple[int, int], ...], k: int, matched: set[Key], built: tuple[tuple[int, int], ...] = ()
) -> tuple[set[Key], list[set[Key]]]:
    """The keys of ``matched`` (k-gram keys of ``text`` that earlier free text holds) that lie in a run of
    matched k-grams that is not :func:`weak` (a run is a maximal stretch of consecutive matched positions), and
    the keys of each weak run.  A run that is the whole of ``text`` is never weak: the argument is that name (a
    hotel to book, a user to add), a value the call takes whole, not a place mentioned in a sentence."""
    weak_keys: set[Key] = set()
    strong: set[Key] = set()
    runs: list[set[Key]] = []
    head, tail = len(text) - len(text.lstrip()), len(text.rstrip())  # a run from head to tail is the whole text
    for lo, hi in ranges:
        keys = window_keys(text[lo:hi], k)
        hit = [key in matched for key in keys]
        i, n = 0, len(keys)
        while i < n:
            if not hit[i]:
                i += 1
                continue
            j = i
            while j + 1 < n and hit[j + 1]:
                j += 1
            start, end = lo + i, lo + j + k
            inside = any(a < end and start < b for a, b in built)  # a structure the sink built around it
            if inside or (start <= head and end >= tail) or not weak(text, start, end):
                strong.update(keys[i : j + 1])
            else:
                weak_keys.update(keys[i : j + 1])
                if in_line_value(text, start, end):
                    runs.append(set(keys[i : j + 1]))
            i = j + 1
    return matched - (weak_keys - strong), [run - strong for run in runs if not run <= strong]


def _whole_words(text: str, lo: int, hi: int) -> tuple[int, int]:
    """``[lo, hi)`` without a word or number cut by its start or end."""
    if lo > 0 and text[lo - 1].isalnum() and text[lo].isalnum():
        space = _SPACE.search(text, lo, hi)
        lo = space.start() if space else hi
    if hi < len(text) and text[hi].isalnum() and text[hi - 1].isalnum():
        cut = max(text.rfind(" ", lo, hi), text.rfind("\n", lo, hi))
        hi = cut if cut >= 0 else lo
    return lo, hi


def in_line_value(text: str, lo: int, hi: int) -> bool:
    """Whether the weak run ``text[lo:hi]`` reads as a value inside a line (a name, a place, a diagnosis in a
    sentence, in a title or after a field label), not as a template's skeleton: it lies within one line, does not
    cover that whole line, and what follows its last field label (``Word: ``, ``#``) holds a whole content word.  Runs
    across lines, whole shared lines (``Please do not reply to this notification.``) and labels alone
    (``Ticket #``, ``Bill to:``) are the shape of a shared template."""
    span = text[lo:hi]
    inner = span.strip(_EDGES)
    if not inner or "\n" in inner:
        return False
    line_lo, line_hi = text.rfind("\n", 0, lo) + 1, text.find("\n", hi)
    line = text[line_lo : len(text) if line_hi < 0 else line_hi].strip(_EDGES)
    if inner == line:
        return False
    cut = max(span.rfind(": "), span.rfind("#"))
    start, end = _whole_words(text, lo + cut + 1 if cut >= 0 else lo, hi)
    rest = text[start:end]
    return any(len(w) >= 2 and w.lower() not in STOPWORDS for w in re.split(r"[^\w'’]+", rest))


_EDGES = " \t\n.,;:!?"


def joint_bits(runs: list[set[Key]], bits_of: Callable[[set[Key]], int]) -> int:
    """The nodes that hold two or more distinct weak runs (``bits_of``: a key set's holders as a bit set); runs
    that share a k-gram (the same city twice) count once."""
    groups: list[set[Key]] = []
    for run in runs:
        for group in groups:
            if not group.isdisjoint(run):
                group |= run
                break
        else:
            groups.append(set(run))
    seen = twice = 0
    for group in groups if len(groups) > 1 else ():
        bits = bits_of(group)
        twice |= seen & bits
        seen |= bits
    return twice


class _Index(Protocol):
    runs: list[set[Key]] | None
    exact_runs: list[set[Key]] | None
    exact: int

    def span_bits(self, value: str) -> int: ...
    def token_bits(self, value: str) -> int: ...
    def free_bits(self, grams: set[Key]) -> int: ...


def reuse_bits(index: _Index, args: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Per argument name of a call, the nodes that share a span or a value token with it (the ``E2`` sources of
    :class:`guard.evidence.value_index.ValueIndex`), and the nodes that hold two distinct weak runs of the call's
    arguments, in any of them (:func:`joint_bits`: a name in a note's title, a diagnosis in its body).  For the
    exact holders (``index.exact``: private- and untrusted-source records) the weak runs the call's own zones hold
    count too (``index.exact_runs``): no position rule discounts their text."""
    reuse: dict[str, int] = {}
    weak_runs: dict[str, list[set[Key]]] = {}
    zone_runs: dict[str, list[set[Key]]] = {}
    for name, value in args:
        index.runs, index.exact_runs = [], []
        try:
            found = index.span_bits(value) | index.token_bits(value)
        finally:
            runs, index.runs = index.runs, None
            exact_runs, index.exact_runs = index.exact_runs, None
        if found:
            reuse[name] = reuse.get(name, 0) | found
        if runs:
            weak_runs.setdefault(name, []).extend(runs)
        if exact_runs:
            zone_runs.setdefault(name, []).extend(exact_runs)
    if weak_runs:  # no weak run: no node holds two
        _join(reuse, weak_runs, index.free_bits, -1)
    if zone_runs:
        _join(
            reuse,
            {n: weak_runs.get(n, []) + zone_runs.get(n, []) for n in {*weak_runs, *zone_runs}},
            index.free_bits,
            index.exact,
        )
    return reuse


def _join(
    reuse: dict[str, int], weak_runs: dict[str, list[set[Key]]], free_bits: Callable[[set[Key]], int], among: int
) -> None:
    """Add to ``reuse`` the holders in ``among`` of two distinct weak runs of ``weak_runs`` (:func:`joint_bits`)."""
    every = [run for runs in weak_runs.values() for run in runs]
    joint = joint_bits(every, free_bits) & among if len(every) > 1 else 0
    for name, runs in weak_runs.items() if joint else ():
        held = joint & free_bits(set().union(*runs))
        if held:
            reuse[name] = reuse.get(name, 0) | held
