"""Prefix indexes behind the scorer's prefix-reading features (docs/evidence.md#the-other-evidence-features).

``injected_short_id`` and ``private_in_url`` read the whole prefix, not the selection.  Scanning the
prefix at each decision costs time in its length; these indexes take each record once (queued until
the first query, then when it is added: the cost of a record is in its own length), so a decision
costs lookups in the size of the proposal instead:

- :class:`InjectedTokens`: every whole-token string of at most :data:`SHORT_ID_MAX` characters that
  starts inside the injection window of an untrusted record, with the earliest record holding it;
- :class:`SubstringIndex`: ``GRAM``-grams of private and user texts, to find the records whose text
  contains a token of at least ``GRAM`` characters (candidates by grams, confirmed by ``in``).
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_right
from collections.abc import Iterable, Iterator

from guard.evidence.kgrams import Key, keys_at

SHORT_ID_MAX = 12
GRAM = 5
SCAN_CHARS = 16_384  # texts a SubstringIndex query reads directly before it indexes them


_STARTS = re.compile(r"(?<![A-Za-z0-9])\S")  # a token may begin here: no letter or digit just before
_ENDS = re.compile(r"\S(?![A-Za-z0-9])")  # and end after this character: no letter or digit just after


def merged_windows(n: int, starts: Iterable[int], window: int) -> list[tuple[int, int]]:
    """The positions ``p`` of a text of length ``n`` with ``0 <= p - s <= window`` for some start ``s``,
    as ascending, disjoint half-open ranges ``[lo, hi)`` (overlapping or touching windows merged)."""
    covered: list[tuple[int, int]] = []
    for lo, hi in sorted((max(0, s), min(n, s + window + 1)) for s in starts):
        if covered and lo <= covered[-1][1]:
            covered[-1] = (covered[-1][0], max(covered[-1][1], hi))
        elif lo < hi:
            covered.append((lo, hi))
    return covered


def token_spans(text: str, starts: Iterable[int], window: int, longest: int = SHORT_ID_MAX) -> set[str]:
    """Every ``text[p:e]`` of 1..``longest`` chars with ``0 <= p - s <= window`` for a start ``s``, that
    stands as a whole token (no ASCII letter or digit just before ``p`` or at ``e``) and neither begins
    nor ends with whitespace."""
    n = len(text)
    found: set[str] = set()
    for lo, hi in merged_windows(n, starts, window):
        ends = [m.end() for m in _ENDS.finditer(text, lo, min(n, hi + longest + 1))]
        for match in _STARTS.finditer(text, lo, hi):
            p = match.start()
            first = bisect_right(ends, p)
            for e in ends[first : bisect_right(ends, p + longest)]:
                found.add(text[p:e])
    return found


class UntilAsked:
    """Records are queued until the index is first asked, then indexed as they are added.

    A session whose proposals never ask pays nothing on observe; after the first query no decision
    pays for records added before it (a query that indexed every record queued since the previous
    query would make a decision's latency depend on how long ago that query was).
    """

    def __init__(self) -> None:
        self._queued: list[tuple[int, str, tuple[int, ...]]] = []
        self._asked = False

    def _take(self, node: int, text: str, starts: tuple[int, ...] = ()) -> None:
        if self._asked:
            self._index(node, text, starts)
        else:
            self._queued.append((node, text, starts))

    def _ask(self) -> None:
        if not self._asked:
            self._asked = True
            for queued in self._queued:
                self._index(*queued)
            self._queued.clear()

    def _index(self, node: int, text: str, starts: tuple[int, ...]) -> None:
        raise NotImplementedError


class InjectedTokens(UntilAsked):
    """Short whole-token strings inside injection windows of untrusted records → earliest holder."""

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = window
        self.earliest: dict[str, int] = {}

    def add(self, node: int, text: str, starts: tuple[int, ...]) -> None:
        """Take ``text``: its whole-token strings that start within ``window`` after one of ``starts``."""
        self._take(node, text, starts)

    def _index(self, node: int, text: str, starts: tuple[int, ...]) -> None:
        setdefault = self.earliest.setdefault
        for token in token_spans(text, starts, self.window):
            setdefault(token, node)

    def held_before(self, value: str, node: int) -> bool:
        """Whether a record older than ``node`` holds ``value`` as an injected whole token."""
        self._ask()
        first = self.earliest.get(value)
        return first is not None and first < node


class SubstringIndex(UntilAsked):
    """``GRAM``-grams of some records' texts → those records, to find which contain a given token
    (queued until first asked, as :class:`InjectedTokens`; most sessions never ask: only a proposal
    with a URL path or query does).

    While the texts hold at most :data:`SCAN_CHARS` characters in all, a query reads them directly
    (one C-level ``in`` per text costs less than indexing them), and nothing is indexed; the first
    query past that indexes the queue, and every later text is indexed when it is added.
    """

    def __init__(self) -> None:
        super().__init__()
        self.grams: dict[Key, bytes | bytearray] = {}  # k-gram key (guard.evidence.kgrams) → node indices ("q")
        self.texts: dict[int, str] = {}
        self.chars = 0

    def add(self, node: int, text: str) -> None:
        """Take ``text`` under ``node`` (nodes are added in ascending order)."""
        self.texts[node] = text
        self.chars += len(text)
        self._take(node, text)

    def _index(self, node: int, text: str, starts: tuple[int, ...]) -> None:
        """Post ``node`` under each distinct ``GRAM``-gram of ``text``: the grams new to the index share one
        ``bytes`` (one C-level update), a gram's second holder turns it into a ``bytearray`` that later
        holders extend.  Neither is tracked by the garbage collector (an ``array`` per gram was)."""
        grams = self.grams
        keys = keys_at(text, [(0, len(text) - GRAM + 1)], GRAM)
        raw = node.to_bytes(8, sys.byteorder)
        get = grams.get
        new: list[Key] = []
        for key in keys:  # one dict lookup per gram (as guard.evidence.postings.post_all)
            posting = get(key)
            if posting is None:
                new.append(key)
            elif posting.__class__ is bytes:
                grams[key] = bytearray(posting + raw)
            else:
                posting += raw
        grams.update(dict.fromkeys(new, raw))

    def holders(self, token: str) -> Iterator[int]:
        """Indexed nodes whose text contains ``token`` (``len(token) >= GRAM``), ascending."""
        if len(token) < GRAM:
            raise ValueError(f"token {token!r} is shorter than the index's {GRAM}-grams")
        if not self._asked and self.chars <= SCAN_CHARS:  # few texts: read them (ascending: insertion order)
            yield from (node for node, text in self.texts.items() if token in text)
            return
        self._ask()
        postings = []
        for key in keys_at(token, [(0, len(token) - GRAM + 1)], GRAM):
            posting = self.grams.get(key)
            if posting is None:
                return
            postings.append(posting)
        postings.sort(key=len)
        nodes = [memoryview(posting).cast("q") for posting in postings]
        candidates = set(nodes[0]).intersection(*nodes[1:])
        texts = self.texts
        yield from (node for node in sorted(candidates) if token in texts[node])
