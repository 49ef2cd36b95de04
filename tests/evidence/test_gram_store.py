"""The k-gram store answers as plain sets per key, whatever it has posted yet (guard.evidence.gram_store)."""

from __future__ import annotations

import random

from guard.evidence.gram_store import LEAST, SMALL, GramStore
from guard.evidence.kgrams import Key
from guard.evidence.postings import Posting, post_all, posting_bits


def _bits(holders: set[int]) -> int:
    return sum(1 << node for node in holders)


def test_every_answer_is_the_reference_through_partial_posting() -> None:
    """Texts of very different sizes (a few far above the posting budget, so a text is posted in parts over
    several later texts) give, at every step, the holders a plain set per key gives: free-key lookups, single
    keys (free or near), keys restricted to some nodes, and the matched free keys; catches the rest of a
    partly posted text being lost or posted twice, a near key answered as free, or a waiting text skipped."""
    rng = random.Random(3)
    store = GramStore()
    free_ref: dict[Key, set[int]] = {}
    near_ref: dict[Key, set[int]] = {}
    universe: list[Key] = [*range(4000), *(f"g{i}" for i in range(200))]
    sizes: dict[int, int] = {}
    saw_partial = False
    for node in range(SMALL + 60):
        size = rng.choice([5, 40, 300, 3 * LEAST + 7])
        free = set(rng.sample(universe, size))
        near = set(rng.sample(universe, size // 4)) - free
        for key in free:
            free_ref.setdefault(key, set()).add(node)
        for key in near:
            near_ref.setdefault(key, set()).add(node)
        store.add(node, set(free), set(near))
        sizes[node] = len(free) + len(near)
        if store.pending:
            head, head_free, head_near = store.pending[0]
            saw_partial |= len(head_free) + len(head_near) < sizes[head]
        if node < SMALL:
            assert not store.free and not store.near  # a short session posts nothing
        assert len(store.pending) <= 8 or node < SMALL + 20  # the queue drains faster than it fills
        for _ in range(5):
            grams = set(rng.sample(universe, 30))
            want = _bits({n for g in grams for n in free_ref.get(g, ())})
            assert store.free_bits(grams) == want, node
            key = rng.choice(universe)
            assert store.gram_bits(key) == _bits(free_ref.get(key, set()) | near_ref.get(key, set())), (node, key)
            among = rng.getrandbits(node + 1)
            got = store.keys_bits(grams, among)
            for g in grams:
                held = _bits(free_ref.get(g, set()) | near_ref.get(g, set()))
                assert got.get(g, 0) & among == held & among, (node, g)
                assert got.get(g, 0) & ~held == 0, (node, g)
            matched = store.matched(grams)
            united = (
                set().union(*(grams & f for _, f, _ in matched)) if matched is not None else grams & store.free.keys()
            )
            assert united == {g for g in grams if g in free_ref}, node
    assert saw_partial
    store.post()
    assert not store.pending
    assert {k: posting_bits(p) for k, p in store.free.items()} == {k: _bits(v) for k, v in free_ref.items()}
    assert {k: posting_bits(p) for k, p in store.near.items()} == {k: _bits(v) for k, v in near_ref.items()}


def test_the_first_texts_are_posted_over_later_texts() -> None:
    """The keys the first SMALL texts kept are posted a bounded number per later text: right after the switch
    part of them waits (a text in part), a few texts later none does, and the postings equal posting every text
    whole; a text added to an empty queue is posted whole (catches posting everything at once, or nothing)."""
    store = GramStore()
    whole: dict[Key, Posting] = {}
    size = LEAST // 2
    for node in range(SMALL + 1):
        keys = set(range(node * size, (node + 1) * size))
        store.add(node, set(keys), {-node - 1})
        post_all(whole, keys, node)
    assert store.free and store.pending
    waiting = sum(len(f) + len(n) for _, f, n in store.pending)
    assert 0 < waiting < (SMALL + 1) * (size + 1) - LEAST
    node = SMALL + 1
    while store.pending:
        store.add(node, {10**6 + node}, set())
        post_all(whole, {10**6 + node}, node)
        node += 1
        assert node < 3 * SMALL
    big = set(range(2 * 10**6, 2 * 10**6 + 10 * LEAST))
    store.add(node, set(big), set())
    post_all(whole, big, node)
    assert not store.pending  # posted whole
    assert {k: posting_bits(p) for k, p in store.free.items()} == {k: posting_bits(p) for k, p in whole.items()}
    assert store.gram_bits(-1) == 1 and store.gram_bits(-SMALL - 1) == 1 << SMALL
