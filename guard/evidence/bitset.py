"""Sets of graph nodes as Python integers: bit ``i`` is set when node ``i`` is a member.

A prefix graph answers "which earlier records ..." with one such integer, so a union or an
intersection of two answers is one C-level operation however many records there are.  The helpers
convert between bit sets and node indices in the cheapest way for their size.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import Any

import numpy as np

_FEW = 24  # bit sets of at most this many members are converted in Python: numpy's overhead is larger


def members(bits: int) -> list[int]:
    """The positions of the set bits of ``bits``, ascending."""
    if not bits:
        return []
    if bits.bit_count() <= _FEW:  # a few members: peel off the lowest set bit (numpy costs more here)
        found_few = []
        while bits:
            low = bits & -bits
            found_few.append(low.bit_length() - 1)
            bits ^= low
        return found_few
    raw = np.frombuffer(bits.to_bytes((bits.bit_length() + 7) // 8, "little"), dtype=np.uint8)
    found: list[int] = np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist()
    return found


def to_bits(nodes: Iterable[int]) -> int:
    """The bit set of ``nodes`` (non-negative ints): bit ``i`` set for each ``i`` in ``nodes``."""
    if isinstance(nodes, set | frozenset | list | tuple | array) and len(nodes) <= _FEW:
        return few_bits(nodes)
    if isinstance(nodes, array) and nodes.typecode == "q":
        return index_bits(np.frombuffer(nodes, dtype=np.int64))
    return index_bits(np.fromiter(nodes, dtype=np.int64))


def few_bits(nodes: Iterable[int]) -> int:
    """The bit set of ``nodes`` built one OR at a time (a node may repeat); for a few nodes."""
    bits = 0
    for node in nodes:
        if node < 0:
            raise ValueError(f"negative node index {node}")
        bits |= 1 << node
    return bits


def index_bits(index: np.ndarray[Any, np.dtype[np.int64]]) -> int:
    """The bit set of the node indices in ``index``."""
    if index.size <= _FEW:
        return few_bits(index.tolist())
    flags = np.zeros(int(index.max()) + 1, dtype=np.bool_)
    flags[index] = True
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


class NodeSet(frozenset[int]):
    """A frozenset of node indices made from a bit set, which it keeps (``bits``) for set algebra.

    Only :meth:`of` makes one, so ``bits``, ``ordered`` (the members ascending) and the members agree;
    both are read-only, so a selector cannot hand the stage bits that differ from its members.
    """

    __slots__ = ("_bits", "_ordered")
    _bits: int
    _ordered: tuple[int, ...]

    def __new__(cls, *args: Any) -> NodeSet:
        raise TypeError("make a NodeSet with NodeSet.of(bits)")

    @classmethod
    def of(cls, bits: int) -> NodeSet:
        """The nodes of ``bits``."""
        ordered = members(bits)
        out = super().__new__(cls, ordered)
        object.__setattr__(out, "_bits", bits)
        object.__setattr__(out, "_ordered", tuple(ordered))
        return out

    @property
    def bits(self) -> int:
        """The members as a bit set."""
        return self._bits

    @property
    def ordered(self) -> tuple[int, ...]:
        """The members, ascending."""
        return self._ordered

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a NodeSet is read-only (cannot set {name!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (NodeSet.of, (self._bits,))


def bits_of(nodes: Iterable[int]) -> int:
    """The bit set of ``nodes``: free for a :class:`NodeSet`, one pass otherwise."""
    return nodes.bits if type(nodes) is NodeSet else to_bits(nodes)
