"""False alarms and detection delay of the risk monitor, by seeded Monte Carlo (``carbguard monitor --delay-table``).

Each simulated stream is a sequence of closed sessions with independent Bernoulli realised losses
``L_t``.  At review rate ``p`` a session is picked with probability ``p``, independently of its loss
(as the keyed hash of :mod:`guard.review` makes it), and enters the test as ``X_t = (picked/p)·L_t``
(:func:`review_terms`); at ``p = 1`` that is ``L_t`` itself.  The test is the monitor's own
(:func:`guard.calibration.risk_monitor.log_wealth`, :func:`~guard.calibration.risk_monitor.first_crossing`).

- False alarms: the share of streams that alarm within the horizon while H0 holds — at the boundary
  (every ``E[L_t] = α``) and on a non-exchangeable stream whose mean drifts down from α and
  oscillates (:func:`drifting_null`, never above α).  Ville's inequality bounds both by δ.
- Detection delay: at mean risk ``k·α``, the alarm rate within the horizon and the median and 90th
  percentile of the alarm position, counted in closed sessions (reviewed or not; a stream without an
  alarm counts as an infinite delay).  Reviewed sessions until the alarm are about ``p`` times that.

Every cell draws from its own generator, seeded by ``(seed, cell)``, so a cell's numbers do not
depend on which other cells are computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from guard.calibration.risk_monitor import first_crossing, log_wealth

MULTIPLIERS = (1.5, 2.0, 3.0)
RATES = (1.0, 0.25)
#: Closed sessions per stream at review rate 1; at rate p the horizon is this over p.
HORIZON = 2000
CHUNK = 250


def drifting_null(alpha: float, horizon: int) -> np.ndarray:
    """A non-exchangeable H0 mean path: from α down to α/2, oscillating, never above α."""
    t = np.arange(horizon, dtype=np.float64)
    return alpha * (1.0 - 0.5 * t / horizon) * (0.75 + 0.25 * np.cos(t / 10.0))


def review_terms(losses: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """``(picked/p)·L`` with ``picked ~ Bernoulli(p)`` drawn independently of the losses (``L`` itself at p = 1)."""
    if rate >= 1.0:
        return losses
    return np.asarray(losses * (rng.random(losses.shape) < rate) / rate, dtype=np.float64)


def alarm_times(
    means: np.ndarray, alpha: float, delta: float, rate: float, streams: int, rng: np.random.Generator
) -> np.ndarray:
    """Per stream, the 1-based closed session of the first alarm (0: none within ``len(means)``)."""
    out = np.zeros(streams, dtype=np.int64)
    for start in range(0, streams, CHUNK):
        n = min(CHUNK, streams - start)
        losses = (rng.random((n, len(means))) < means).astype(np.float64)
        terms = review_terms(losses, rate, rng)
        out[start : start + n] = first_crossing(log_wealth(terms, alpha), delta)
    return out


@dataclass(frozen=True, slots=True)
class Cell:
    """One (mean path, review rate) cell of the table."""

    label: str
    mean_risk: float
    rate: float
    horizon: int
    alarm_rate: float
    median_delay: float
    p90_delay: float

    def to_json(self) -> dict[str, object]:
        """Plain JSON (an infinite delay as null)."""
        delays = {"median_delay": self.median_delay, "p90_delay": self.p90_delay}
        return {
            "stream": self.label,
            "mean_risk": self.mean_risk,
            "review_rate": self.rate,
            "horizon": self.horizon,
            "alarm_rate": self.alarm_rate,
            **{k: v if math.isfinite(v) else None for k, v in delays.items()},
        }


def _cell(
    label: str, means: np.ndarray, rate: float, alpha: float, delta: float, streams: int, seed: int, index: int
) -> Cell:
    at = alarm_times(means, alpha, delta, rate, streams, np.random.default_rng([seed, index]))
    delays = np.sort(np.where(at > 0, at, np.inf).astype(np.float64))
    return Cell(
        label,
        float(means.mean()),
        rate,
        len(means),
        float(np.mean(at > 0)),
        float(delays[math.ceil(0.5 * streams) - 1]),
        float(delays[math.ceil(0.9 * streams) - 1]),
    )


def delay_table(
    alpha: float = 0.1,
    delta: float = 0.05,
    *,
    multipliers: Sequence[float] = MULTIPLIERS,
    rates: Sequence[float] = RATES,
    streams: int = 2000,
    horizon: int = HORIZON,
    seed: int = 0,
) -> list[Cell]:
    """The H0 cells (boundary, drifting) and the delay cells (mean ``k·α``) at every review rate, in that order."""
    cells: list[Cell] = []
    for rate in rates:
        length = round(horizon / rate)
        paths = [("H0: mean = alpha", np.full(length, alpha)), ("H0: drifting <= alpha", drifting_null(alpha, length))]
        paths += [(f"mean = {k:g} alpha", np.full(length, k * alpha)) for k in multipliers]
        for label, means in paths:
            cells.append(_cell(label, means, rate, alpha, delta, streams, seed, len(cells)))
    return cells


def format_table(
    cells: Sequence[Cell], alpha: float, delta: float, streams: int, seed: int, horizon: int = HORIZON
) -> str:
    """The printed table: one row per cell."""
    head = [
        f"risk monitor: alpha {alpha:g}, delta {delta:g}, {streams} seeded streams per row (seed {seed}), "
        "Bernoulli losses; review rate p: terms (picked/p)*L;",
        f"horizon {horizon}/p closed sessions; delays in closed sessions (inf: no alarm within the horizon)",
        f"{'stream':<24}{'mean risk':>10}{'p':>6}{'alarm rate':>12}{'median delay':>14}{'90% delay':>11}",
    ]
    rows = [
        f"{c.label:<24}{c.mean_risk:>10.3f}{c.rate:>6g}{c.alarm_rate:>12.3f}{c.median_delay:>14g}{c.p90_delay:>11g}"
        for c in cells
    ]
    return "\n".join(head + rows)


__all__ = [
    "HORIZON",
    "MULTIPLIERS",
    "RATES",
    "Cell",
    "alarm_times",
    "delay_table",
    "drifting_null",
    "format_table",
    "review_terms",
]
