"""Probe choice by expected certificate shrinkage (docs/safecommit.md, Probes).

μ is the world weight normalised over the *current* retained set W.  For the best-blocked
action a* (smallest uncertified mass; larger utility, then lower index, on ties) and a probe p
with outcome label ``y(ω)``::

    Δ(p) = Σ_y P(y) · [μ(U) − μ(U ∩ W^y)],   P(y) = μ(W^y),   W^y = {ω ∈ W : y(ω) = y}

i.e. the expected retained mass of U(a*) that the probe's outcome removes.  μ is *not*
renormalised after the outcome: with renormalisation the expectation is a martingale and Δ ≡ 0.
Only the removal of worlds blocking a* counts.  The value of p is Δ(p)/c(p); the best probe is
picked if Δ > 0 and its value ≥ η.  Outcomes are integer labels ``outcomes[..., P, K]``; all
array functions accept leading batch axes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from guard.errors import InputError
from guard.safecommit.types import ProbeSpec

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

_TINY = 1e-12


def _masses(retained: npt.ArrayLike, weights: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Retained weights ``w·1[W]`` and their total (1 where W is empty, to avoid 0/0)."""
    w = np.asarray(weights, dtype=np.float64) * np.asarray(retained, dtype=np.bool_)
    total = w.sum(axis=-1)
    return w, np.where(total > 0, total, 1.0)


def uncertified_mass(gamma: npt.ArrayLike, retained: npt.ArrayLike, weights: npt.ArrayLike) -> FloatArray:
    """``[..., A]``: μ(U(a)) for every action (0 where nothing is retained)."""
    w, total = _masses(retained, weights)
    unsafe = ~np.asarray(gamma, dtype=np.bool_)
    return np.asarray((w[..., :, None] * unsafe).sum(axis=-2) / total[..., None])


def best_blocked_action(
    gamma: npt.ArrayLike, retained: npt.ArrayLike, weights: npt.ArrayLike, utility: npt.ArrayLike
) -> IntArray:
    """``[...]``: the action with the smallest uncertified mass; ties → larger utility, index."""
    mass = uncertified_mass(gamma, retained, weights)
    u = np.broadcast_to(np.asarray(utility, dtype=np.float64), mass.shape)
    order = np.lexsort((-u, np.round(mass, 12)), axis=-1)
    return np.asarray(order[..., 0], dtype=np.intp)


def expected_shrinkage(
    gamma: npt.ArrayLike,
    retained: npt.ArrayLike,
    weights: npt.ArrayLike,
    outcomes: npt.ArrayLike,
    action: npt.ArrayLike,
) -> FloatArray:
    """``[..., P]``: Δ(p) for the uncertified region of ``action`` (one index per batch row)."""
    g = np.asarray(gamma, dtype=np.bool_)
    a = np.asarray(action, dtype=np.intp)
    labels = np.asarray(outcomes, dtype=np.intp)
    w, total = _masses(retained, weights)
    blocked = ~np.take_along_axis(g, a[..., None, None], axis=-1)[..., 0]
    u = w * blocked
    kept = np.zeros(np.broadcast_shapes(labels.shape, w[..., None, :].shape)[:-1])
    for y in np.unique(labels):
        hit = labels == y
        p_y = (w[..., None, :] * hit).sum(axis=-1)
        kept = kept + p_y * (u[..., None, :] * hit).sum(axis=-1)
    mu_u = u.sum(axis=-1) / total
    return np.asarray(mu_u[..., None] - kept / (total[..., None] ** 2))


def select_probe(shrinkage: npt.ArrayLike, costs: npt.ArrayLike, eta: float) -> IntArray:
    """``[...]``: the probe of largest Δ/c with Δ > 0 and Δ/c ≥ η (first on ties), else -1."""
    d = np.asarray(shrinkage, dtype=np.float64)
    value = d / np.asarray(costs, dtype=np.float64)
    eligible = (d > _TINY) & (value >= eta)
    if eligible.shape[-1] == 0:
        return np.full(eligible.shape[:-1], -1, dtype=np.intp)
    best = np.argmax(np.where(eligible, value, -np.inf), axis=-1)
    return np.asarray(np.where(eligible.any(axis=-1), best, -1), dtype=np.intp)


def filter_by_outcome(
    retained: npt.ArrayLike, outcomes: npt.ArrayLike, probe: npt.ArrayLike, observed: npt.ArrayLike
) -> BoolArray:
    """Drop the retained worlds whose label for ``probe`` differs from ``observed``."""
    r = np.asarray(retained, dtype=np.bool_)
    labels = np.broadcast_to(np.asarray(outcomes, dtype=np.intp), r.shape[:-1] + np.shape(outcomes)[-2:])
    p = np.asarray(probe, dtype=np.intp)
    row = np.take_along_axis(labels, p[..., None, None], axis=-2)[..., 0, :]
    return np.asarray(r & (row == np.asarray(observed, dtype=np.intp)[..., None]), dtype=np.bool_)


def outcome_matrix(probes: Sequence[ProbeSpec], world_names: Sequence[str]) -> IntArray:
    """``[P, K]`` integer labels: the index of each world's outcome in ``probe.labels``."""
    matrix = np.zeros((len(probes), len(world_names)), dtype=np.intp)
    for i, probe in enumerate(probes):
        labels = probe.labels
        for k, name in enumerate(world_names):
            if name not in probe.outcomes:
                raise InputError(
                    f"probe {probe.name!r} gives no outcome for world {name!r}; every probe must name every world"
                )
            matrix[i, k] = labels.index(probe.outcomes[name])
    return matrix


def parse_outcome(probe: ProbeSpec, raw: object) -> str | None:
    """The probe's label matching ``raw`` (bools read as yes/no; case and spaces ignored).

    Returns ``None`` when ``raw`` matches no label: the caller must then leave the world set
    unchanged (and still count the probe against the budget).
    """
    if isinstance(raw, bool):
        raw = "yes" if raw else "no"
    if not isinstance(raw, str):
        return None
    wanted = raw.strip().lower()
    for label in probe.labels:
        if label.strip().lower() == wanted:
            return label
    return None


__all__ = [
    "best_blocked_action",
    "expected_shrinkage",
    "filter_by_outcome",
    "outcome_matrix",
    "parse_outcome",
    "select_probe",
    "uncertified_mass",
]
