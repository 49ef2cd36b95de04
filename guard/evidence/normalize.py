"""Cheap, sound normalizations of values for the prefix graph's exact-match edges (opt-in).

The graph's E2/E3 edges (docs/evidence.md) match exact spans and whole value tokens, so an agent that
re-writes a private value before sending it — upper case, extra whitespace, URL-encoding, digit
groups — walks around them.  :func:`normalize_value` maps such surface variants of a value to one
form; a graph that indexes both the raw and the normalized text of every record (and looks up both
forms of every argument value) recovers those edges.  See :mod:`guard.studies.evasion` for the measured
effect and for what still escapes.

Every step is *sound* in the sense that it only forgets distinctions that do not change which
value is meant: letter case, the layout of whitespace, invisible format characters, percent-escapes
(``%40`` is ``@``), Unicode compatibility forms (full-width ``Ａ`` is ``A``), and separators inside
a run of digits (``4111 1111``, ``4111-1111`` and ``41111111`` are one card number).  Nothing is
decoded that could be ordinary text (no base64 or hex guessing), so the extra edges it makes come
from values that really are equal up to these variants.

The steps, in order:

1. percent-decoding, repeated (at most three times) while it changes the text, so double encoding
   is undone; ``+`` counts as a space (form encoding);
2. Unicode NFKC (compatibility forms: full-width letters, ligatures, non-breaking spaces);
3. removal of invisible format characters (zero-width space/joiners, word joiner, BOM, soft hyphen);
4. case folding (``str.casefold``: also ``ß`` → ``ss``);
5. every run of whitespace becomes one space; leading and trailing whitespace is dropped;
6. removal of separators between digits (a space, ``-``, ``.``, ``,``, ``_``, ``/``, ``'``, thin
   spaces) — exactly one separator character between two digits, so ``1, 2, 3`` (a list) stays apart.

The function is pure and idempotent, ``normalize_value(normalize_value(t)) == normalize_value(t)``, for
every text with fewer than about two dozen nested percent-encodings.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from urllib.parse import unquote

__all__ = ["normalize_value"]

_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")
_DIGIT_SEPARATOR = re.compile(r"(?<=\d)[ \t.,_/'\-\u2009\u202f](?=\d)")
_WHITESPACE = re.compile(r"\s+")
_MAX_DECODE_ROUNDS = 3
_MAX_PASSES = 8


def _percent_decode(text: str) -> str:
    out = text.replace("+", " ")
    for _ in range(_MAX_DECODE_ROUNDS):
        if not _PERCENT.search(out):
            break
        decoded = unquote(out, errors="replace")
        if decoded == out:
            break
        out = decoded.replace("+", " ")
    return out


def normalize_value(text: str) -> str:
    """The normal form of ``text``: decoded, NFKC, visible, case-folded, spaces collapsed, digit runs joined."""
    return _cached(text) if len(text) <= _CACHED_CHARS else _normalize(text)


def _normalize(text: str) -> str:
    out = _once(text)
    if out.isascii() and "%" not in out and "+" not in out:
        # another pass would change nothing: no escape to decode, NFKC and case folding keep a folded
        # ASCII text, whitespace is collapsed, and joining digits leaves no separator between two digits
        return out
    # Decoding or NFKC can expose a new escape or a digit next to a separator (``%2541``, ``１-２``);
    # a few more passes make the function idempotent on such inputs too.
    for _ in range(_MAX_PASSES):
        again = _once(out)
        if again == out:
            break
        out = again
    return out


_CACHED_CHARS = 4096  # texts up to this long keep their normal form (argument values are read several times)
_cached = lru_cache(maxsize=8192)(_normalize)


def _once(text: str) -> str:
    out = _percent_decode(text)
    out = unicodedata.normalize("NFKC", out)
    out = _INVISIBLE.sub("", out)
    out = _WHITESPACE.sub(" ", out.casefold()).strip()
    return _DIGIT_SEPARATOR.sub("", out)
