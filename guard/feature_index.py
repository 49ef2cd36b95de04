"""Prefix indexes behind the scorer's prefix-reading features (METHOD §6, issue 16's features).

``injected_short_id`` and ``private_in_url`` read the whole prefix, not the selection.  Scanning the
prefix at each decision costs time in its length; these indexes are filled once per record when it
is added to the graph, so a decision costs lookups in the size of the proposal instead:

- :class:`InjectedTokens`: every whole-token string of at most :data:`SHORT_ID_MAX` characters that
  starts inside the injection window of an untrusted record, with the earliest record holding it;
- :class:`SubstringIndex`: ``GRAM``-grams of private and user texts, to find the records whose text
  contains a token of at least ``GRAM`` characters (candidates by grams, confirmed by ``in``).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator

SHORT_ID_MAX = 12
GRAM = 5
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def token_spans(text: str, starts: Iterable[int], window: int, longest: int = SHORT_ID_MAX) -> set[str]:
    """Every ``text[p:e]`` of 1..``longest`` chars with ``0 <= p - s <= window`` for a start ``s``, that
    stands as a whole token (no ASCII letter or digit just before ``p`` or at ``e``) and neither begins
    nor ends with whitespace."""
    n = len(text)
    positions: set[int] = set()
    for start in starts:
        positions.update(range(max(0, start), min(n, start + window + 1)))
    found: set[str] = set()
    for p in positions:
        if text[p].isspace() or (p > 0 and text[p - 1] in _ALNUM):
            continue
        for e in range(p + 1, min(n, p + longest) + 1):
            if (e == n or text[e] not in _ALNUM) and not text[e - 1].isspace():
                found.add(text[p:e])
    return found


class InjectedTokens:
    """Short whole-token strings inside injection windows of untrusted records → earliest holder."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.earliest: dict[str, int] = {}

    def add(self, node: int, text: str, starts: tuple[int, ...]) -> None:
        """Index the whole-token strings of ``text`` that start within ``window`` after one of ``starts``."""
        setdefault = self.earliest.setdefault
        for token in token_spans(text, starts, self.window):
            setdefault(token, node)

    def held_before(self, value: str, node: int) -> bool:
        """Whether a record older than ``node`` holds ``value`` as an injected whole token."""
        first = self.earliest.get(value)
        return first is not None and first < node


class SubstringIndex:
    """``GRAM``-grams of some records' texts → those records, to find which contain a given token."""

    def __init__(self) -> None:
        self.grams: dict[str, array[int]] = {}
        self.texts: dict[int, str] = {}

    def add(self, node: int, text: str) -> None:
        """Index ``text`` under ``node`` (nodes are added in ascending order)."""
        self.texts[node] = text
        grams = self.grams
        for gram in {text[i : i + GRAM] for i in range(len(text) - GRAM + 1)}:
            posting = grams.get(gram)
            if posting is None:
                grams[gram] = array("q", (node,))
            else:
                posting.append(node)

    def holders(self, token: str) -> Iterator[int]:
        """Indexed nodes whose text contains ``token`` (``len(token) >= GRAM``), ascending."""
        if len(token) < GRAM:
            raise ValueError(f"token {token!r} is shorter than the index's {GRAM}-grams")
        postings = []
        for gram in {token[i : i + GRAM] for i in range(len(token) - GRAM + 1)}:
            posting = self.grams.get(gram)
            if posting is None:
                return
            postings.append(posting)
        postings.sort(key=len)
        candidates = set(postings[0]).intersection(*postings[1:])
        texts = self.texts
        yield from (node for node in sorted(candidates) if token in texts[node])
