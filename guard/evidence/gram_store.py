"""The k-gram store of the value index: each text's k-gram keys → the nodes that hold them.

A text's keys come in two sets: ``free`` (k-grams of free text: they make edges) and ``near`` (k-grams that
overlap a structured value or a zone: for :meth:`GramStore.gram_bits` only).  A new text's sets first wait in
``pending``, a queue in node order, and are posted into the inverted postings (:mod:`guard.evidence.postings`)
from its head, a bounded number of keys per text added:

* while the store holds at most :data:`SMALL` texts nothing is posted (a short session pays no dict entry per
  k-gram, and a lookup is one C-level set operation per text);
* beyond, each text added posts its own keys and at most :data:`LEAST` more from the head of the queue: the
  sets the first texts kept are posted over the next texts, not all in one decision, and a text added to an
  empty queue is posted whole (moving its keys to later decisions would only shift its cost to them).

Every answer reads the postings *and* the waiting sets, so it is the same whatever is posted yet: the
postings of a node are exactly the keys not waiting, and the nodes of a key are posted in ascending order
(the head of the queue is the oldest text waiting), as :func:`~guard.evidence.postings.post_all` requires.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import chain

from guard.evidence.bitset import few_bits
from guard.evidence.kgrams import Key
from guard.evidence.postings import Posting, holders_of, post_all, posting_bits

__all__ = ["LEAST", "SMALL", "GramStore", "Waiting"]

SMALL = 16  # a session's first texts keep their k-gram sets (no posting per k-gram); beyond, inverted postings
LEAST = 512  # the keys of earlier texts a text added beyond SMALL posts besides its own
Waiting = tuple[int, set[Key], set[Key]]  # (node, free keys, near keys) not yet posted: a posted key leaves its set


class GramStore:
    """Free and near k-gram keys of a session's texts → their holders (see the module docstring)."""

    def __init__(self) -> None:
        self.free: dict[Key, Posting] = {}  # posted free keys
        self.near: dict[Key, Posting] = {}  # posted near keys
        self.pending: deque[Waiting] = deque()  # texts (or a text's rest) not yet posted, oldest first
        self._texts = 0

    def add(self, node: int, free: set[Key], near: set[Key]) -> None:
        """Keep the keys of ``node`` (newer than every node added before; the sets are the store's from now on)
        and post a bounded number of waiting keys."""
        self.pending.append((node, free, near))
        self._texts += 1
        if self._texts > SMALL:
            self.post(len(free) + len(near) + LEAST)

    def post(self, budget: int | None = None) -> None:
        """Post the waiting keys from the head of the queue: all of them (``None``), or about ``budget``."""
        pending = self.pending
        while pending and (budget is None or budget > 0):
            node, free, near = pending[0]
            size = len(free) + len(near)
            if budget is None or size <= budget:
                pending.popleft()
                post_all(self.free, free, node)
                post_all(self.near, near, node)
                budget = None if budget is None else budget - size
                continue
            part = {free.pop() for _ in range(min(budget, len(free)))}  # the head text in part: what is posted
            rest = {near.pop() for _ in range(min(budget - len(part), len(near)))}  # leaves its (own) sets
            post_all(self.free, part, node)
            post_all(self.near, rest, node)
            return

    def free_bits(self, grams: set[Key]) -> int:
        """The nodes whose free keys hold one of ``grams``, as a bit set."""
        pending = self.pending
        bits = few_bits(node for node, free, _ in pending if not grams.isdisjoint(free)) if pending else 0
        return bits | holders_of(self.free, grams) if self.free else bits

    def matched(self, grams: set[Key]) -> list[Waiting] | None:
        """The keys of ``grams`` some free text holds, as the k-gram sets that
        :func:`guard.evidence.weak_spans.strong_grams` unites (None: no text waits, read the free postings' keys)."""
        if not self.pending:
            return None
        return [(-1, grams & self.free.keys(), set()), *self.pending] if self.free else list(self.pending)

    def gram_bits(self, key: Key) -> int:
        """The nodes holding ``key`` as a free or near key, as a bit set."""
        pending = self.pending
        bits = few_bits(node for node, free, near in pending if key in free or key in near) if pending else 0
        if self.free or self.near:
            bits |= posting_bits(self.free.get(key)) | posting_bits(self.near.get(key))
        return bits

    def keys_bits(self, keys: Iterable[Key], among: int = -1) -> dict[Key, int]:
        """The holders of each of ``keys`` some node holds; of the waiting texts, only the nodes in ``among``."""
        wanted = set(keys)
        out: dict[Key, int] = {}
        if self.free or self.near:
            free, near = self.free.get, self.near.get
            for key in wanted:
                posting, other = free(key), near(key)
                if other is not None:
                    out[key] = posting_bits(posting) | posting_bits(other)
                elif type(posting) is int:  # one holder (most k-grams): no call
                    out[key] = 1 << posting
                elif posting is not None:
                    out[key] = posting_bits(posting)
        for node, free_keys, near_keys in self.pending:
            one = 1 << node
            if not one & among:
                continue
            for key in chain(wanted & free_keys, wanted & near_keys):
                out[key] = out.get(key, 0) | one
        return out
