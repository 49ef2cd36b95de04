"""Postings of the value index: which nodes hold a k-gram, in the cheapest form for their number.

A k-gram's holders take one dict entry: the node index itself (one holder: most k-grams), an ``array``
of node indices (up to :data:`DENSE` entries, read by numpy without a loop in Python), or beyond that a
one-element list holding their integer bit set (one OR per lookup, updated in place).
"""

from __future__ import annotations

from array import array
from typing import TypeAlias

import numpy as np

from guard.evidence.bitset import index_bits, to_bits
from guard.evidence.kgrams import Key

__all__ = ["DENSE", "Posting", "post_all", "posting_bits"]

Posting: TypeAlias = "int | array[int] | list[int]"

DENSE = 64  # a k-gram held by more nodes keeps them as a bit set (one OR per lookup)


def _post(postings: dict[Key, Posting], gram: Key, node: int) -> None:
    """Add ``node`` (the newest so far) to the posting of ``gram``, in the cheapest form for its size."""
    posting = postings.get(gram)
    if posting is None:
        postings[gram] = node
    elif isinstance(posting, int):
        postings[gram] = array("q", (posting, node))
    elif isinstance(posting, list):
        posting[0] |= 1 << node
    elif len(posting) < DENSE:
        posting.append(node)
    else:
        postings[gram] = [index_bits(np.frombuffer(posting, dtype=np.int64)) | 1 << node]


def post_all(postings: dict[Key, Posting], grams: set[Key], node: int) -> None:
    """:func:`_post` for every k-gram of ``grams``: the ones new to ``postings`` in one C-level update
    (most k-grams of a record are new to its session), the others one by one."""
    old = grams & postings.keys()
    postings.update(dict.fromkeys(grams - old if old else grams, node))
    one = 1 << node
    for gram in old:  # _post, inlined: this loop is most of the indexing cost of a record that repeats others
        posting = postings[gram]
        if isinstance(posting, int):
            postings[gram] = array("q", (posting, node))
        elif isinstance(posting, list):
            posting[0] |= one
        elif len(posting) < DENSE:
            posting.append(node)
        else:
            postings[gram] = [index_bits(np.frombuffer(posting, dtype=np.int64)) | one]


def posting_bits(posting: Posting | None) -> int:
    if posting is None:
        return 0
    if isinstance(posting, int):
        return 1 << posting
    if isinstance(posting, list):
        return posting[0]
    return to_bits(posting)
