"""The ceiling's 0/1 program, solved to optimality with HiGHS (``scipy.optimize.milp``, extra ``[ceiling]``).

Variables, in order: ``x_v`` (refuse vector ``v``, binary), ``y_h`` (harm set ``h`` hit, in [0, 1]),
``z_s`` (success set ``s`` kept, in [0, 1]).  With ``x`` integral the optimum puts ``y`` and ``z`` on
their bounds, so only ``x`` needs integrality.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from guard.errors import CalibrationError


def solve_milp(
    n_vectors: int,
    harm: Mapping[frozenset[int], int],
    success: Mapping[frozenset[int], int],
    need: int,
    pairs: Sequence[tuple[int, int]],
) -> int:
    """Max ``Σ count_s·z_s`` with ``Σ count_h·y_h >= need``, ``y_h <= Σ_{v in h} x_v``, ``z_s <= 1 - x_v``
    (``v in s``) and ``x_v <= x_w`` for ``(v, w)`` in ``pairs``; raises when ``need`` cannot be met."""
    if need > sum(harm.values()):
        raise CalibrationError(f"the ceiling program is infeasible: {need} harmful episodes must be stopped")
    if not success:
        return 0
    try:
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_array
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise CalibrationError("the ceiling needs scipy: pip install 'carbguard[ceiling]'") from exc
    hs, ss = list(harm), list(success)
    nx, nh, ns = n_vectors, len(hs), len(ss)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lower: list[float] = []
    upper: list[float] = []

    def row(entries: Sequence[tuple[int, float]], lo: float, hi: float) -> None:
        r = len(lower)
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        lower.append(lo)
        upper.append(hi)

    for k, members in enumerate(hs):
        row([(nx + k, 1.0), *((v, -1.0) for v in members)], -np.inf, 0.0)
    for k, members in enumerate(ss):
        for v in members:
            row([(nx + nh + k, 1.0), (v, 1.0)], -np.inf, 1.0)
    for v, w in pairs:
        row([(v, 1.0), (w, -1.0)], -np.inf, 0.0)
    if need > 0:
        row([(nx + k, float(harm[h])) for k, h in enumerate(hs)], float(need), np.inf)
    size = nx + nh + ns
    cost = np.zeros(size)
    cost[nx + nh :] = [-float(success[s]) for s in ss]
    integrality = np.zeros(size)
    integrality[:nx] = 1
    constraints = []
    if lower:
        matrix = coo_array((vals, (rows, cols)), shape=(len(lower), size)).tocsr()
        constraints.append(LinearConstraint(matrix, np.array(lower), np.array(upper)))
    result = milp(
        cost,
        constraints=constraints,
        integrality=integrality,
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0.0, "presolve": True},
    )
    if result.status != 0 or result.x is None:
        raise CalibrationError(f"the ceiling program was not solved to optimality: {result.message}")
    return round(-float(result.fun))
