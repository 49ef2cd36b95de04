"""The parts of an argument a sink builds around text: what is read as evidence, and what is namespace.

An argument is read whole (docs/evidence.md#the-sink-can-build-the-structure): a private token wrapped
as ``TOKEN@host``, ``TOKEN.txt``, ``/srv/TOKEN``, ``https://user:TOKEN@host/`` or
``https://TOKEN.host/`` still shares its spans with the free text it came from.  Only the *namespace*
of an address or URL — the last two labels of its domain or host (``company.com``, ``evil.test``) —
is left out, so that an address at a domain that earlier text names bare (``company.com``) makes no
edge; a label left of them (``TOKEN.evil.test``) is read.  Every function is pure.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable

from guard.evidence.regex_screen import alternation_for, gated
from guard.evidence.values import Value

__all__ = [
    "NAMESPACE_LABELS",
    "WRAPPERS",
    "free_tokens",
    "namespace_spans",
    "read_ranges",
    "read_ranges_of",
    "wrapped_tokens",
]

NAMESPACE_LABELS = 2  # a registrable domain and its suffix, without a public-suffix list
WRAPPERS = frozenset({"email", "url", "path"})  # what a sink can build around a token
_NAMESPACED = frozenset({"email", "url"})  # values with a domain or host
_OPAQUE = frozenset({"date", "amount", "phone", "card", "iban"})  # a token inside one is a part of a quantity
_SEPARATORS = re.compile(r"[@./:\\?#&=;]")  # what joins the parts of an address, URL or path


def read_ranges_of(text: str, values: Iterable[Value]) -> tuple[tuple[int, int], ...]:
    """The ranges of ``text`` (whose structured values are ``values``) read for spans: all of it but the
    namespace of its addresses and URLs."""
    found = tuple(values)
    if not any(v.kind in _NAMESPACED for v in found):
        return ((0, len(text)),)
    return read_ranges(len(text), namespace_spans(text, found))


def wrapped_tokens(sources: tuple[str, ...], text: str, values: Iterable[Value]) -> frozenset[str]:
    """The value tokens (the alternation of ``sources``) inside the addresses, URLs and paths of ``text``
    (what a sink can build around a token), but none inside a date, an amount, a phone, card or IBAN
    number nested in one of them: each is scanned with its separators made spaces, so its parts stand
    alone (``4821@evil.test`` → ``4821 evil test``), and a token must read the same in the original."""
    found_values = tuple(values)
    opaque = [(v.start, v.end) for v in found_values if v.kind in _OPAQUE]
    found: set[str] = set()
    for value in found_values:
        if value.kind not in WRAPPERS or value.nested:  # a nested one lies inside a URL, scanned whole
            continue
        spaced = _SEPARATORS.sub(" ", text[value.start : value.end])
        token_re = alternation_for(sources, spaced)
        for m in gated(token_re).finditer(spaced) if token_re is not None else ():
            lo, hi = value.start + m.start(), value.start + m.end()
            if text[lo:hi] == m.group(0) and not any(start < hi and lo < end for start, end in opaque):
                found.add(m.group(0))
    return frozenset(found)


def namespace_spans(text: str, values: Iterable[Value]) -> list[tuple[int, int]]:
    """The spans of ``text`` that are namespace: the last labels of each e-mail domain and URL host."""
    spans: list[tuple[int, int]] = []
    for value in values:
        if value.nested or value.kind not in ("email", "url"):
            continue
        lo, hi = _host(text, value)
        spans.append((_last_labels(text, lo, hi), hi))
    return spans


def _host(text: str, value: Value) -> tuple[int, int]:
    """The span of the domain of an e-mail address, or of the host (and port) of a URL."""
    if value.kind == "email":
        return text.rfind("@", value.start, value.end) + 1, value.end
    start = text.find("://", value.start, value.end)
    start = value.start if start < 0 else start + 3
    end = start
    while end < value.end and text[end] not in "/?#":
        end += 1
    at = text.rfind("@", start, end)
    return (at + 1 if at >= 0 else start), end


def _last_labels(text: str, lo: int, hi: int) -> int:
    """Where the last :data:`NAMESPACE_LABELS` labels of the host ``text[lo:hi]`` start."""
    cut = hi
    for _ in range(NAMESPACE_LABELS):
        dot = text.rfind(".", lo, cut)
        if dot < 0:
            return lo
        cut = dot
    return cut + 1


def read_ranges(size: int, holes: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """``[0, size)`` without ``holes``, as ascending ranges."""
    out: list[tuple[int, int]] = []
    cursor = 0
    for start, end in sorted(holes):
        if start > cursor:
            out.append((cursor, start))
        cursor = max(cursor, end)
    if size > cursor:
        out.append((cursor, size))
    return tuple(out)


def free_tokens(
    sources: tuple[str, ...], analysis: tuple[tuple[Value, ...], tuple[tuple[int, int], ...]], text: str
) -> frozenset[str]:
    """The value tokens the alternation of ``sources`` finds in ``text`` outside its structured values
    (``analysis``); the patterns that cannot match ``text`` are left out of the scan
    (:func:`guard.evidence.regex_screen.alternation_for`), and the scan skips the positions where no match can
    start (:func:`guard.evidence.regex_screen.gated`), which changes no match either."""
    pruned = alternation_for(sources, text)
    if pruned is None:
        return frozenset()
    token_re = gated(pruned)
    values, ranges = analysis
    if not values:
        return frozenset(m.group(0) for m in token_re.finditer(text))
    wholes = {(v.start, v.end) for v in values}
    starts = [lo for lo, _ in ranges]
    kept = set()
    for m in token_re.finditer(text):
        span = m.span()
        if span in wholes:
            kept.add(m.group(0))
            continue
        at = bisect_right(starts, span[0]) - 1  # the free range starting at or before the token
        if at >= 0 and span[1] <= ranges[at][1]:
            kept.add(m.group(0))
    return frozenset(kept)
