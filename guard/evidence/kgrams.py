"""k-gram keys: the form in which the value index stores a text's k-grams.

An ASCII k-gram of at most eight characters is stored as the integer of its bytes (little-endian),
any other k-gram as itself.  Two k-grams of one length ``k`` have the same key exactly when they are
equal (the bytes of an ASCII string determine it, and an integer never equals a string), so an
index that stores keys answers every lookup as one that stores the k-grams would.

What the integers buy is speed: the keys of an ASCII text are read by numpy as overlapping
eight-byte words, one C-level pass instead of one Python slice per position, and an integer hashes
for free, where each new slice is hashed character by character.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

import numpy as np

__all__ = ["Key", "gram_key", "gram_keys", "keys_at", "split_keys", "window_keys"]

Key: TypeAlias = "int | str"

WIDEST = 8  # k-grams up to this many characters fit one unsigned 64-bit word
_PAD = bytes(WIDEST)


def gram_key(gram: str, k: int) -> Key:
    """The key of ``gram`` in an index of k-grams: its bytes as an integer when it is ASCII and ``k``
    (at most :data:`WIDEST`) characters long; otherwise the string itself, which no other k-gram's key
    equals (a string of another length than ``k`` is the key of no k-gram at all)."""
    if len(gram) == k <= WIDEST and gram.isascii():
        return int.from_bytes(gram.encode("ascii"), "little")
    return gram


def gram_keys(text: str, ranges: Sequence[tuple[int, int]], k: int) -> set[Key]:
    """The keys of the k-grams of ``text`` that lie inside one of ``ranges`` (``[lo, hi)``)."""
    return keys_at(text, [(lo, hi - k + 1) for lo, hi in ranges if hi - lo >= k], k)


def keys_at(text: str, starts: Iterable[tuple[int, int]], k: int) -> set[Key]:
    """The keys of the k-grams of ``text`` starting at a position in one of ``starts`` (``[lo, hi)``,
    each inside ``[0, len(text) - k + 1)``)."""
    spans = [(lo, hi) for lo, hi in starts if hi > lo]
    if not spans:
        return set()
    if k > WIDEST or not text.isascii():
        return {gram_key(text[i : i + k], k) for lo, hi in spans for i in range(lo, hi)}
    words = _words(text, len(text), k)
    if len(spans) == 1:
        lo, hi = spans[0]
        return set(words[lo:hi].tolist())
    return set(np.concatenate([words[lo:hi] for lo, hi in spans]).tolist())


def split_keys(
    text: str, ranges: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]], k: int
) -> tuple[set[Key], set[Key]]:
    """``(free, near)``: the keys of the k-grams of ``text`` inside one of ``ranges`` (:func:`gram_keys`), and
    those of the k-grams overlapping one of ``spans`` (``[lo, hi)``, inside the text) that are not in ``free``.

    The same sets as ``gram_keys(text, ranges, k)`` and ``keys_at(text, starts, k) - free`` (``starts`` the
    positions ``[max(0, lo - k + 1), min(hi, len(text) - k + 1))`` of each span), read from one array of
    words instead of two; and a position whose k-gram lies in ``ranges`` is not read for ``near`` at all: its
    key is in ``free``, which ``near`` leaves out anyway.  The words are read as signed integers: an ASCII
    byte is below 0x80, so the top bit of a word is clear and its signed value is its unsigned one.
    """
    last = len(text) - k + 1
    free_starts = [(lo, hi - k + 1) for lo, hi in ranges if hi - lo >= k]
    near_starts = [(max(0, lo - k + 1), min(hi, last)) for lo, hi in spans]
    if k > WIDEST or last <= 0 or not text.isascii():
        free = keys_at(text, free_starts, k)
        return free, (keys_at(text, near_starts, k) - free if spans else set())
    words = _words(text, len(text), k).view("<i8")
    if not spans:
        return _keys_of(words, free_starts), set()
    read = np.zeros(len(text), dtype=np.bool_)  # the positions read for near: overlapping a span, not free
    for lo, hi in near_starts:
        read[lo:hi] = True
    for lo, hi in free_starts:
        read[lo:hi] = False
    free = _keys_of(words, free_starts)
    near: set[Key] = set(words[read].tolist())
    near -= free
    return free, near


def _keys_of(words: np.ndarray[Any, np.dtype[np.int64]], starts: list[tuple[int, int]]) -> set[Key]:
    """The members of ``words`` at the positions of ``starts`` (``[lo, hi)``), as a set of integers."""
    spans = [(lo, hi) for lo, hi in starts if hi > lo]
    if len(spans) == 1:
        lo, hi = spans[0]
        return set(words[lo:hi].tolist())
    return set(np.concatenate([words[lo:hi] for lo, hi in spans]).tolist()) if spans else set()


def window_keys(text: str, k: int) -> list[Key]:
    """The keys of ``text[i : i + k]`` for every ``i`` from 0 to ``len(text) - k``, in order."""
    last = len(text) - k + 1
    if last <= 0:
        return []
    if k > WIDEST or not text.isascii():
        return [gram_key(text[i : i + k], k) for i in range(last)]
    keys: list[Key] = _words(text, last, k).tolist()
    return keys


def _words(text: str, count: int, k: int) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """The keys of the first ``count`` k-grams of the ASCII ``text``, as overlapping little-endian words
    (the text is padded, so a word near its end reads zero bytes, which the mask clears for ``k < 8``)."""
    words = np.ndarray((count,), dtype="<u8", buffer=text.encode("ascii") + _PAD, strides=(1,))
    return words & np.uint64((1 << (8 * k)) - 1) if k < WIDEST else words
