"""Postings of the value index: which nodes hold a k-gram, in the cheapest form for their number.

A k-gram's holders take one dict entry: the node index itself (one holder: most k-grams), a
``bytearray`` of node indices as 8-byte integers in the machine's byte order (up to :data:`DENSE`
entries, read without a loop in Python), or beyond that a one-element list holding their integer bit
set (one OR per lookup, updated in place).

A ``bytearray`` rather than an ``array``: the garbage collector does not track it (it holds no
objects), so the thousands of postings a long session makes neither trigger collections nor are
traversed by them; an ``array`` is tracked, and its collections showed in the slowest decisions.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Mapping
from typing import TypeAlias

import numpy as np

from guard.evidence.bitset import few_bits, index_bits
from guard.evidence.kgrams import Key

__all__ = ["DENSE", "Posting", "holders_of", "post_all", "posting_bits"]

Posting: TypeAlias = "int | bytearray | list[int]"

DENSE = 64  # a k-gram held by more nodes keeps them as a bit set (one OR per lookup)
_WIDTH = 8  # bytes per node index in a bytearray posting
_FULL = DENSE * _WIDTH
_FEW = 24 * _WIDTH  # a posting of at most 24 holders is OR-ed in Python (numpy costs more)
_DTYPE = np.dtype(np.int64)  # the machine's byte order, as memoryview.cast("q") and array("q") read it
_ORDER = sys.byteorder


def _post(postings: dict[Key, Posting], gram: Key, node: int) -> None:
    """Add ``node`` (the newest so far) to the posting of ``gram``, in the cheapest form for its size."""
    posting = postings.get(gram)
    if posting is None:
        postings[gram] = node
    elif isinstance(posting, int):
        postings[gram] = bytearray(posting.to_bytes(_WIDTH, _ORDER) + node.to_bytes(_WIDTH, _ORDER))
    elif isinstance(posting, list):
        posting[0] |= 1 << node
    elif len(posting) < _FULL:
        posting += node.to_bytes(_WIDTH, _ORDER)
    else:
        postings[gram] = [index_bits(np.frombuffer(posting, dtype=_DTYPE)) | 1 << node]


def post_all(postings: dict[Key, Posting], grams: set[Key], node: int) -> None:
    """:func:`_post` for every k-gram of ``grams``: one dict lookup per k-gram (a long session's dict outgrows
    the caches, so a second lookup costs a memory read), the ones new to ``postings`` in one C-level update."""
    get = postings.get
    new: list[Key] = []
    one = 1 << node
    raw = node.to_bytes(_WIDTH, _ORDER)
    for gram in grams:  # _post, inlined: this loop is most of the indexing cost of a record that repeats others
        posting = get(gram)
        if posting is None:
            new.append(gram)
        elif type(posting) is bytearray:
            if len(posting) < _FULL:
                posting += raw
            else:
                postings[gram] = [index_bits(np.frombuffer(posting, dtype=_DTYPE)) | one]
        elif type(posting) is list:
            posting[0] |= one
        elif type(posting) is int:
            postings[gram] = bytearray(posting.to_bytes(_WIDTH, _ORDER) + raw)
    postings.update(dict.fromkeys(new, node))


def posting_bits(posting: Posting | None) -> int:
    """The holders of a posting (None: no holder), as a bit set."""
    if posting is None:
        return 0
    if isinstance(posting, int):
        return 1 << posting
    if isinstance(posting, list):
        return posting[0]
    if len(posting) <= _FEW:
        return few_bits(memoryview(posting).cast("q"))
    return index_bits(np.frombuffer(posting, dtype=_DTYPE))


def holders_of(postings: Mapping[Key, Posting], grams: Iterable[Key]) -> int:
    """The nodes that hold one of ``grams`` (each posting read in its own form, the arrays joined once)."""
    get, joined, bits = postings.get, array("q"), 0
    for gram in grams:
        posting = get(gram)
        if posting is None:
            continue
        if isinstance(posting, int):
            joined.append(posting)
        elif isinstance(posting, list):
            bits |= posting[0]
        else:
            joined.frombytes(posting)
    return bits | index_bits(np.frombuffer(joined, dtype=np.int64)) if joined else bits
