"""Specificity of free-text evidence: how much a shared span says about where a value came from.

A span shared by a sink's argument and an earlier record is evidence of provenance in proportion to
its information content.  Two sources of rarity are used:

- **Background rarity** — ``−log2`` of the share of a background corpus's records that hold the span's
  k-gram, from a table the policy names (``graph.background``): ``true`` is the shipped cold-start table
  (``guard/data/background/kgrams.json``, built by ``carbguard data background`` from a corpus of everyday
  business boilerplate written for it, no benchmark's text), a path is a deployment's own table (built by
  ``carbguard data background --episodes``).  A k-gram in the table is *boilerplate*: it makes no edge.
- **Session rarity** — ``−log2`` of the share of the session's earlier records that hold it.  It
  grades evidence (:func:`information`) but never removes an edge: untrusted text can repeat any
  string, so letting a count over the session remove an edge would let an attacker lower a score
  by adding text.

The table's hash (:attr:`Background.fingerprint`) is part of the pipeline fingerprint: a calibration
artifact records which table its edges were made with.  The rules by position and shape (zones,
identifiers, weak spans) are in :mod:`guard.evidence.boilerplate`.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from guard.evidence.kgrams import Key, gram_key, window_keys
from guard.evidence.values import Value
from guard.policy import Policy
from guard.policy.background import FORMAT, K, check_table, read_table

__all__ = [
    "BACKGROUND_PATH",
    "FORMAT",
    "Background",
    "K",
    "background",
    "common_piece",
    "information",
    "table_for",
    "uncommon",
]

BACKGROUND_PATH = Path(__file__).parent.parent / "data" / "background" / "kgrams.json"


class Background:
    """The background table: boilerplate k-grams and their development-record counts."""

    def __init__(self, body: dict[str, object], fingerprint: str) -> None:
        check_table(body)
        grams = body["grams"]
        records = body["records"]
        assert isinstance(grams, dict) and isinstance(records, int)
        self.counts: dict[str, int] = grams
        self.records = records
        self.fingerprint = fingerprint
        self.grams = frozenset(grams)

    def boilerplate(self, k: int) -> frozenset[str]:
        """The boilerplate grams for spans of ``k`` characters: for ``k == K`` the table's grams;
        a longer span is boilerplate when each of its ``K``-grams is; below ``K`` none is known."""
        return self.grams if k == K else frozenset()

    def is_boilerplate(self, span: str) -> bool:
        """Whether every ``K``-gram of ``span`` (at least ``K`` characters) is boilerplate."""
        return len(span) >= K and all(span[i : i + K] in self.grams for i in range(len(span) - K + 1))

    def bits(self, gram: str) -> float:
        """Background information of a ``K``-gram in bits: ``−log2`` of its (add-one) record share."""
        return -math.log2((self.counts.get(gram, 0) + 1) / (self.records + 2))


def background(path: Path = BACKGROUND_PATH) -> Background:
    """The table in ``path`` (default: the shipped cold-start one), read once per file version; a missing or
    malformed file raises, so the guard fails closed."""
    body, fingerprint = read_table(path)
    table = _TABLES.get(fingerprint)
    if table is None:
        table = _TABLES[fingerprint] = Background(body, fingerprint)
    return table


_TABLES: dict[str, Background] = {}  # fingerprint → table (one object per table content: its grams are shared)


def table_for(policy: Policy) -> Background | None:
    """The table ``policy`` names: ``graph.background`` ``true`` (the shipped one), ``false`` (none) or a path
    relative to the policy file."""
    named = policy.graph.background
    if named is False:
        return None
    return background() if named is True else background(policy.resolve(named))


def information(gram: str, holders: int, earlier: int, table: Background | None = None) -> float:
    """Bits of evidence a shared ``K``-gram carries: background rarity plus session rarity, where
    ``holders`` of the ``earlier`` records of the session hold it (``1 <= holders <= earlier``)."""
    if not 1 <= holders <= earlier:
        raise ValueError(f"holders must be in 1..earlier, got {holders} of {earlier}")
    table = table or background()
    return table.bits(gram) + math.log2(earlier / holders)


def uncommon(
    text: str, values: tuple[Value, ...], tokens: frozenset[str], boilerplate: frozenset[Key], k: int
) -> tuple[tuple[Value, ...], frozenset[str]]:
    """``values`` and value ``tokens`` of ``text`` without those the table calls boilerplate: a value (with a key)
    or token of at least ``k`` characters each of whose k-gram keys is in ``boilerplate`` (a deployment's own
    signature phone or company number, common in its sessions: docs/evidence.md#the-background-table)."""

    if not values and not tokens:
        return values, tokens
    firsts = _first_grams(boilerplate, k)  # common_piece, its first k-gram screened as text: no key to compute
    common = [
        v
        for v in values
        if v.key
        and v.end - v.start >= k
        and text[v.start : v.start + k] in firsts
        and boilerplate.issuperset(window_keys(text[v.start : v.end], k))
    ]
    kept = tuple(v for v in values if v not in common) if common else values
    dropped = {t for t in tokens if len(t) >= k and t[:k] in firsts and boilerplate.issuperset(window_keys(t, k))}
    return kept, tokens - dropped if dropped else tokens


def common_piece(piece: str, boilerplate: frozenset[Key], k: int) -> bool:
    """Whether ``piece`` has a k-gram and each of its k-gram keys is in ``boilerplate``.  The first k-gram is
    looked up alone first: most pieces are not boilerplate and need no other key (nor the array of them)."""
    if len(piece) < k or gram_key(piece[:k], k) not in boilerplate:
        return False
    return boilerplate.issuperset(window_keys(piece, k))


@lru_cache(maxsize=8)
def _first_grams(boilerplate: frozenset[Key], k: int) -> frozenset[str]:
    """The k-grams of ``k`` characters whose keys (:func:`~guard.evidence.kgrams.gram_key`) are in ``boilerplate``, as
    text (one table serves every session: computed once): an ASCII k-gram's key is its bytes as an integer, any
    other's the gram.  An integer of no ASCII ``k`` bytes is no k-gram's key and is left out; a text that is no
    k-gram may stay: :func:`uncommon` only screens with these, every key is looked up after."""
    out: set[str] = set()
    for key in boilerplate:
        if isinstance(key, str):
            out.add(key)
            continue
        try:
            out.add(key.to_bytes(k, "little").decode("ascii"))
        except (OverflowError, UnicodeDecodeError):
            continue
    return frozenset(out)
