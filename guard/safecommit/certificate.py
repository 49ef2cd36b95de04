"""Safety map, signatures, safety-equivalence compression and the action certificate (docs/safecommit.md).

Γ is a boolean matrix ``gamma[..., world, action]``: True where the action is safe in the world.
An action is certified iff it is safe in every retained world; an empty retained set certifies
nothing (the universal condition would hold vacuously — we fail closed instead).  Worlds with
the same row of Γ (the same signature) are merged with summed weights; the merge never changes
the certified set.  The array functions accept leading batch axes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guard.errors import InputError
from guard.safecommit.types import Action, Certificate, World

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

SafetyMap = Mapping[str, Collection[str]] | npt.NDArray[np.bool_]


def safety_matrix(worlds: Sequence[World], actions: Sequence[Action], safe: SafetyMap) -> BoolArray:
    """Γ as a ``worlds x actions`` boolean matrix from a mapping world -> safe action names.

    A matrix is checked for shape and returned as bool.  Every world must appear in a mapping
    and every action name it lists must be a candidate action.
    """
    if isinstance(safe, np.ndarray):
        gamma = np.asarray(safe, dtype=np.bool_)
        if gamma.shape != (len(worlds), len(actions)):
            raise InputError(
                f"safety matrix has shape {gamma.shape}, expected ({len(worlds)}, {len(actions)}) = (worlds, actions)"
            )
        return gamma
    index = {a.name: j for j, a in enumerate(actions)}
    gamma = np.zeros((len(worlds), len(actions)), dtype=np.bool_)
    for i, world in enumerate(worlds):
        if world.name not in safe:
            raise InputError(f"safety map has no entry for world {world.name!r}")
        for name in safe[world.name]:
            if name not in index:
                raise InputError(
                    f"safety map of world {world.name!r} names unknown action {name!r}; known: {sorted(index)}"
                )
            gamma[i, index[name]] = True
    return gamma


def signature(gamma_row: npt.ArrayLike) -> tuple[bool, ...]:
    """σ(ω) = ``(a ∈ Γ(ω) for a in A)`` as a hashable tuple."""
    return tuple(bool(x) for x in np.asarray(gamma_row, dtype=np.bool_))


@dataclass(frozen=True)
class Compressed:
    """Safety-equivalence classes: one Γ row per class, summed weights, member world indices."""

    gamma: BoolArray
    weights: FloatArray
    members: tuple[tuple[int, ...], ...]


def compress(gamma: npt.ArrayLike, weights: npt.ArrayLike) -> Compressed:
    """Merge worlds with equal signatures (first-appearance order), summing their weights."""
    g = np.asarray(gamma, dtype=np.bool_)
    w = np.asarray(weights, dtype=np.float64)
    groups: dict[tuple[bool, ...], list[int]] = {}
    for i in range(g.shape[0]):
        groups.setdefault(signature(g[i]), []).append(i)
    members = tuple(tuple(ix) for ix in groups.values())
    rows = np.array([list(sig) for sig in groups], dtype=np.bool_).reshape(len(groups), g.shape[1])
    sums = np.array([float(w[list(ix)].sum()) for ix in members], dtype=np.float64)
    return Compressed(gamma=rows, weights=sums, members=members)


def certified_actions(gamma: npt.ArrayLike, retained: npt.ArrayLike) -> BoolArray:
    """``[..., A]``: safe in every retained world, and at least one world is retained."""
    g = np.asarray(gamma, dtype=np.bool_)
    r = np.asarray(retained, dtype=np.bool_)
    every = np.all(g | ~r[..., :, None], axis=-2)
    some = np.asarray(r.any(axis=-1), dtype=np.bool_)
    return np.asarray(every & some[..., None], dtype=np.bool_)


def uncertified_region(gamma: npt.ArrayLike, retained: npt.ArrayLike) -> BoolArray:
    """``[..., K, A]``: ω ∈ U(a) iff ω is retained and a is unsafe in ω."""
    g = np.asarray(gamma, dtype=np.bool_)
    r = np.asarray(retained, dtype=np.bool_)
    return np.asarray(r[..., :, None] & ~g, dtype=np.bool_)


def choose_action(certified: npt.ArrayLike, utility: npt.ArrayLike) -> IntArray:
    """``[...]``: the certified action of largest utility (first on ties), -1 if none."""
    c = np.asarray(certified, dtype=np.bool_)
    if c.shape[-1] == 0:
        return np.full(c.shape[:-1], -1, dtype=np.intp)
    u = np.broadcast_to(np.asarray(utility, dtype=np.float64), c.shape)
    best = np.argmax(np.where(c, u, -np.inf), axis=-1)
    return np.asarray(np.where(c.any(axis=-1), best, -1), dtype=np.intp)


def certify(worlds: Sequence[World], actions: Sequence[Action], gamma: BoolArray, retained: BoolArray) -> Certificate:
    """The certificate over retained worlds, computed on their safety-equivalence classes."""
    keep = np.flatnonzero(retained)
    classes = compress(gamma[keep], np.ones(keep.size))
    certified = certified_actions(classes.gamma, np.ones(len(classes.members), dtype=np.bool_))
    utility = np.array([a.utility for a in actions], dtype=np.float64)
    pick = int(choose_action(certified, utility))
    region = uncertified_region(gamma, retained)
    blocking = {
        a.name: tuple(worlds[i].name for i in np.flatnonzero(region[:, j]).tolist())
        for j, a in enumerate(actions)
        if not certified[j]
    }
    return Certificate(
        certified=tuple(a.name for j, a in enumerate(actions) if certified[j]),
        chosen=actions[pick].name if pick >= 0 else None,
        blocking=blocking,
    )


__all__ = [
    "Compressed",
    "SafetyMap",
    "certified_actions",
    "certify",
    "choose_action",
    "compress",
    "safety_matrix",
    "signature",
    "uncertified_region",
]
