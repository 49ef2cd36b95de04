"""The value index of the prefix graph (METHOD §4): value tokens and k-grams → the nodes that hold them.

:class:`ValueIndex` answers "which earlier records share an exact ``min_span`` span or a whole value
token with this value"; :class:`NormalizingValueIndex` also indexes and looks up normal forms
(``graph.normalize``).  A k-gram held by more than ``_DENSE`` nodes also keeps them as an integer
bit set, so a lookup costs one OR for it however many records hold it.
"""

from __future__ import annotations

import re
from array import array
from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from guard.normalize import normalize_value

_DENSE = 64  # a k-gram held by more nodes also keeps them as a bit set (one OR per lookup)


class ValueIndex:
    """Value tokens and k-grams of earlier records → the nodes that hold them.

    A k-gram's nodes are kept in an ``array`` (ascending, one entry per indexing), not a set: the
    index holds millions of them, and arrays are invisible to the garbage collector, whose full
    collections would otherwise walk them all in the middle of a decision.
    """

    def __init__(self, patterns: Iterable[str], min_span: int) -> None:
        self._token_re = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
        self.min_span = min_span
        self.tokens: dict[str, set[int]] = defaultdict(set)
        self.identifiers: dict[str, set[int]] = defaultdict(set)
        self.kgrams: dict[str, array[int]] = {}
        self._dense: dict[str, int] = {}

    def tokens_in(self, text: str) -> set[str]:
        """Value tokens found in ``text``."""
        if self._token_re is None or not text:
            return set()
        return {m.group(0) for m in self._token_re.finditer(text)}

    def add(self, node: int, text: str, identifiers: Iterable[str]) -> None:
        """Index ``text`` (k-grams, tokens) and extra identifiers under ``node``."""
        for token in self.tokens_in(text):
            self.tokens[token].add(node)
            self.identifiers[token].add(node)
        for ident in identifiers:
            self.identifiers[ident].add(node)
        k, kgrams = self.min_span, self.kgrams
        for gram in {text[i : i + k] for i in range(len(text) - k + 1)}:
            posting = kgrams.get(gram)
            if posting is None:
                kgrams[gram] = array("q", (node,))
                continue
            posting.append(node)
            if len(posting) > _DENSE:
                bits = self._dense.get(gram)
                self._dense[gram] = sum(1 << n for n in set(posting)) if bits is None else bits | 1 << node

    def span_sources(self, value: str) -> set[int]:
        """Nodes whose text shares an exact span of at least ``min_span`` chars with ``value``.

        Each distinct k-gram of ``value`` is looked up once; the work is bounded by the postings of
        those k-grams, at most the session's indexed characters (:data:`MAX_SESSION_CHARS`).
        """
        k, get, dense = self.min_span, self.kgrams.get, self._dense.get
        sparse: list[array[int]] = []
        bits = 0
        for gram in {value[i : i + k] for i in range(len(value) - k + 1)}:
            posting = get(gram)
            if posting is not None:
                if len(posting) > _DENSE:
                    bits |= dense(gram, 0)
                else:
                    sparse.append(posting)
        found: set[int] = set().union(*sparse)
        if bits:
            found.update(members(bits))
        return found

    def token_sources(self, value: str) -> set[int]:
        """Nodes that hold a whole value token found in ``value``."""
        found: set[int] = set()
        for token in self.tokens_in(value):
            found |= self.tokens.get(token, set())
        return found


class NormalizingValueIndex(ValueIndex):
    """A :class:`ValueIndex` that indexes and looks up raw *and* normalized text (``graph.normalize``)."""

    def add(self, node: int, text: str, identifiers: Iterable[str]) -> None:
        """Index ``text`` and its normal form (k-grams, value tokens, identifiers) under ``node``."""
        idents = list(identifiers)
        super().add(node, text, idents)
        norm = normalize_value(text)
        norm_idents = [normalize_value(i) for i in idents]
        if norm != text or norm_idents != idents:
            super().add(node, norm, norm_idents)

    def span_sources(self, value: str) -> set[int]:
        """Nodes sharing a ``min_span`` span with ``value`` or with its normal form."""
        found = super().span_sources(value)
        norm = normalize_value(value)
        return found | super().span_sources(norm) if norm != value else found

    def token_sources(self, value: str) -> set[int]:
        """Nodes holding a whole value token of ``value`` or of its normal form."""
        found = super().token_sources(value)
        norm = normalize_value(value)
        return found | super().token_sources(norm) if norm != value else found


def members(bits: int) -> list[int]:
    """The positions of the set bits of ``bits``, ascending."""
    if not bits:
        return []
    raw = np.frombuffer(bits.to_bytes((bits.bit_length() + 7) // 8, "little"), dtype=np.uint8)
    found: list[int] = np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist()
    return found
