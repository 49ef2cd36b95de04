"""Specificity of free-text evidence: how much a shared span says about where a value came from.

A span shared by a sink's argument and an earlier record is evidence of provenance in proportion to
its information content.  Two sources of rarity are used:

- **Background rarity** — ``−log2`` of the share of development records that hold the span's
  k-gram, from a table shipped with the package (``guard/data/background/kgrams.json``, built by
  ``carbguard data background`` on development episodes only).  A k-gram in the table is
  *boilerplate* (held by at least ``min_share`` of development records): it makes no edge.
- **Session rarity** — ``−log2`` of the share of the session's earlier records that hold it.  It
  grades evidence (:func:`information`) but never removes an edge: untrusted text can repeat any
  string, so letting a count over the session remove an edge would let an attacker lower a score
  by adding text.

The table's hash (:data:`BACKGROUND_FINGERPRINT`) is part of the pipeline fingerprint: a calibration
artifact records which table its edges were made with.
"""

from __future__ import annotations

import hashlib
import json
import math
from functools import cache
from pathlib import Path

__all__ = ["BACKGROUND_PATH", "FORMAT", "Background", "K", "background", "information"]

FORMAT = "carbguard-background/1"
K = 8
BACKGROUND_PATH = Path(__file__).parent.parent / "data" / "background" / "kgrams.json"


class Background:
    """The background table: boilerplate k-grams and their development-record counts."""

    def __init__(self, body: dict[str, object], fingerprint: str) -> None:
        grams = body.get("grams")
        records = body.get("records")
        if body.get("format") != FORMAT or body.get("k") != K or not isinstance(grams, dict):
            raise ValueError(f"background table: expected format {FORMAT!r} with k = {K} and a 'grams' mapping")
        if not isinstance(records, int) or records < 1:
            raise ValueError("background table: 'records' must be a positive integer")
        if not all(
            isinstance(g, str) and len(g) == K and isinstance(c, int) and 0 < c <= records for g, c in grams.items()
        ):
            raise ValueError(f"background table: every gram must be {K} characters with a count in 1..records")
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


@cache
def background() -> Background:
    """The shipped table (read once; a missing or malformed file raises, so the guard fails closed)."""
    raw = BACKGROUND_PATH.read_bytes()
    return Background(json.loads(raw), hashlib.sha256(raw).hexdigest())


def information(gram: str, holders: int, earlier: int, table: Background | None = None) -> float:
    """Bits of evidence a shared ``K``-gram carries: background rarity plus session rarity, where
    ``holders`` of the ``earlier`` records of the session hold it (``1 <= holders <= earlier``)."""
    if not 1 <= holders <= earlier:
        raise ValueError(f"holders must be in 1..earlier, got {holders} of {earlier}")
    table = table or background()
    return table.bits(gram) + math.log2(earlier / holders)
