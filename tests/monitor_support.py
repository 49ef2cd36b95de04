"""Shared by the monitors' statistical tests: the tolerance of a false-alarm rate estimated from seeded runs."""

from __future__ import annotations

import math


def max_alarms(n: int, rate: float, level: float = 1e-3) -> int:
    """The largest alarm count an exact one-sided binomial test at ``level`` accepts for a true rate ≤ ``rate``.

    The smallest ``k`` with ``P(Bin(n, rate) > k) ≤ level``, computed exactly: a valid monitor (false alarm
    ≤ ``rate``) exceeds it in at most ``level`` of seeds.
    """
    tail, k = 1.0, -1
    while tail > level:
        k += 1
        tail -= math.comb(n, k) * rate**k * (1 - rate) ** (n - k)
    return k
