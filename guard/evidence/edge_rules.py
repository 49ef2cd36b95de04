"""Edge types and edge rules of the prefix graph (docs/evidence.md).

A *rule* ``(type, argument, sources)`` says that every node of the bit set ``sources`` has an edge
of ``type`` into one node, carrying ``argument`` (``""`` for none).  The graph keeps the rules of
each node; :func:`partition` turns them into the networkx edges (one attribute dict per group of
sources that the same rules fired for), which the graph builds only when its networkx view is read.
"""

from __future__ import annotations

from collections import deque
from functools import reduce
from itertools import repeat
from operator import or_, setitem
from typing import Any

import networkx as nx

from guard.evidence.bitset import members

E1, E2, E3, E4 = "E1", "E2", "E3", "E4"
PRIORITY = {E1: 0, E4: 1, E3: 2, E2: 3}

Rule = tuple[str, str, int]


def partition(rules: list[Rule], user_bits: int) -> list[tuple[set[int], dict[str, Any]]]:
    """Sources partitioned by the rules that fired for them, each block with its edge attributes.

    The edges of one block share one attribute dict (the graph's edge data is read-only); a source
    that is a user turn (in ``user_bits``) gets type E4.
    """
    if rules and rules[0][0] == E1:
        return [(set(members(rules[0][2])), {"etype": E1, "types": {E1}, "args": set()})]
    if not rules:
        return []
    blocks: list[tuple[int, frozenset[int]]] = [(reduce(or_, (b for _, _, b in rules)), frozenset())]
    for j, (_, _, members_j) in enumerate(rules):
        split: list[tuple[int, frozenset[int]]] = []
        for block, fired in blocks:
            inside = block & members_j
            if inside:
                split.append((inside, fired | {j}))
            if inside != block:
                split.append((block & ~inside, fired))
        blocks = split
    out: list[tuple[set[int], dict[str, Any]]] = []
    for block, fired in blocks:
        kinds = {rules[j][0] for j in fired}
        args = {rules[j][1] for j in fired} - {""}
        users = block & user_bits
        if users:
            out.append((set(members(users)), {"etype": E4, "types": {E4}, "args": args}))
        others = block & ~user_bits
        if others:
            etype = E3 if E3 in kinds else E2
            out.append((set(members(others)), {"etype": etype, "types": kinds, "args": set(args)}))
    return out


def write_blocks(graph: nx.DiGraph, target: int, blocks: list[tuple[set[int], dict[str, Any]]]) -> None:
    """Insert the edges of ``blocks`` into ``target`` (each block's edges share its attribute dict)."""
    succ, pred = graph._succ, graph._pred[target]
    for block, attrs in blocks:
        deque(map(setitem, map(succ.__getitem__, block), repeat(target), repeat(attrs)), maxlen=0)
        pred.update(dict.fromkeys(block, attrs))


__all__ = ["E1", "E2", "E3", "E4", "PRIORITY", "Rule", "partition", "write_blocks"]
