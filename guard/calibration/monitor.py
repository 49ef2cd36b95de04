"""Monitoring exchangeability after deployment: conformal p-values and test martingales.

Pure functions over arrays; the CLI (:mod:`guard.cli.monitor`) reads the audit log and the artifact.

The statistic of an episode is :func:`guard.recorder.stop_max`: its maximum score up to the gate's
first stop at λ̂ (for a calibration episode: its replay at λ̂).  For the ``t``-th deployed episode
the smoothed conformal p-value is taken against the calibration statistics **and every earlier
deployed statistic** (Vovk's sequential construction)::

    p_t = (#{z in pool : z > z_t} + U_t · (#{z in pool : z = z_t} + 1)) / (|pool| + 1),   U_t ~ U(0, 1)

If the calibration episodes and the deployed ones are exchangeable, ``p_1, p_2, …`` are independent
and uniform on (0, 1) — ties included, thanks to ``U_t`` — so every betting martingale below is a
test martingale with ``M_0 = 1``, and by Ville's inequality ``P(sup_t M_t ≥ 1/δ) ≤ δ``: an alarm
(``M_t`` reaches ``1/δ``) is a false alarm with probability at most δ.  A small p-value means an
episode riskier than the calibration set; the martingales bet on small p-values (``jumper`` also
on large ones, i.e. on any departure).  p-values against the calibration set alone would not be
independent (they share the set), and Ville's bound would not apply to their product.

- ``jumper``: Vovk's simple-jumper martingale, betting functions ``1 + ε(p − ½)``, ε ∈ {−1, 0, 1},
  switching with rate ``J`` — it recovers quickly when a shift starts after a long exchangeable run.
- ``power``: the mixture over ε ∈ {0.01, …, 0.99} of power martingales ``Π ε p^{ε−1}``; more power
  against a shift present from the start, slower to recover after a long exchangeable run.

An alarm says exchangeability is no longer plausible, so the calibrated guarantee may not hold;
no alarm is not evidence that it holds.  This is a drift detector on scores: it is blind to harm
that scores low (a deployment whose scores look like calibration's but whose executed calls do more
harm never alarms here).  The label-fed :mod:`guard.calibration.risk_monitor` tests the realised
loss itself.  ``carbguard monitor`` takes the sessions in start order up to the first one not yet closed
(:func:`guard.cli.deployed.deployed_sessions`; one still open past the bound enters at its place and is
reported instead, exit code 5), so a session's length or outcome never decides its place, and derives
``seed`` from the artifact (:func:`guard.cli.monitor.tie_seed`), so a log cannot
be re-tested with other seeds until one alarms.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from guard.errors import CalibrationError
from guard.jsonio import decode_float, decode_float_or_null, encode_float, encode_float_or_null
from guard.recorder import stop_max

Floats = Sequence[float] | np.ndarray
MARTINGALES = ("jumper", "power")
JUMP_RATE = 0.01
POWER_EPSILONS = np.linspace(0.01, 0.99, 99)


def calibration_statistics(offsets: np.ndarray, scores: np.ndarray, threshold: float) -> list[float]:
    """:func:`stop_max` of every calibration episode (``offsets[i]:offsets[i+1]`` are episode ``i``'s scores)."""
    return [stop_max(scores[offsets[i] : offsets[i + 1]].tolist(), threshold) for i in range(len(offsets) - 1)]


def artifact_monitor_field(offsets: np.ndarray, scores: np.ndarray, threshold: float) -> dict[str, object]:
    """The artifact's ``monitor`` field: the calibration statistics, sorted (no episode ids, no raw values).

    ±inf as ``"inf"`` / ``"-inf"`` (:func:`guard.jsonio.encode_float`, read back by
    :func:`read_artifact_statistics`); :func:`stop_max` is never NaN, so a NaN here is refused, not written.
    """
    values = sorted(calibration_statistics(offsets, scores, threshold))
    return {"statistic": "stop_max", "values": [encode_float(v) for v in values]}


def read_artifact_statistics(body: dict[str, object], where: str) -> list[float]:
    """The calibration statistics stored in an artifact body; CalibrationError if absent or malformed."""
    field = body.get("monitor")
    if not isinstance(field, dict) or field.get("statistic") != "stop_max" or not isinstance(field.get("values"), list):
        raise CalibrationError(
            f"{where}: the artifact stores no calibration statistics for monitoring (made before `carbguard monitor` "
            "existed); recalibrate with `carbguard calibrate` to add them"
        )
    values = field["values"]
    return [decode_float(value, f"{where}: monitor.values[{k}]", CalibrationError) for k, value in enumerate(values)]


def conformal_pvalues(calibration: Floats, stream: Floats, seed: int = 0) -> np.ndarray:
    """Smoothed sequential conformal p-values of ``stream`` (larger statistic = stranger); see the module."""
    draws = np.random.default_rng(seed).uniform(0.0, 1.0, len(stream)).tolist()  # U_1, U_2, … in one call
    pool = sorted(float(z) for z in calibration)
    out = np.empty(len(stream), dtype=np.float64)
    for t, value in enumerate(stream):
        z = float(value)
        if math.isnan(z):
            raise CalibrationError(f"deployed statistic {t} is NaN")
        below_or_equal = bisect.bisect_right(pool, z)
        equal = below_or_equal - bisect.bisect_left(pool, z)
        greater = len(pool) - below_or_equal
        out[t] = (greater + draws[t] * (equal + 1)) / (len(pool) + 1)
        bisect.insort(pool, z)
    return out


def jumper_path(pvalues: np.ndarray, jump: float = JUMP_RATE) -> np.ndarray:
    """``M_1..M_T`` of the simple-jumper martingale (Vovk, Nouretdinov, Gammerman 2003 / Vovk 2021).

    The weights of ε = −1, 0, 1 as three floats: the float operations, in the order of the array form
    ``w = ((1 − J)·w + (J/3)·M) · (1 + ε(p − ½))``, ``M = w.sum()``, so the same path bit for bit, faster.
    """
    low = mid = high = 1.0 / 3.0
    keep, share = 1.0 - jump, jump / 3.0
    total = 1.0
    path = []
    for p in np.asarray(pvalues, dtype=np.float64).tolist():
        spread, moved = p - 0.5, share * total
        low = (keep * low + moved) * (1.0 + -1.0 * spread)
        mid = (keep * mid + moved) * (1.0 + 0.0 * spread)
        high = (keep * high + moved) * (1.0 + 1.0 * spread)
        total = low + mid + high
        path.append(total)
    return np.array(path, dtype=np.float64)


def power_path(pvalues: np.ndarray, epsilons: np.ndarray = POWER_EPSILONS) -> np.ndarray:
    """``M_1..M_T`` of the uniform mixture of power martingales over ``epsilons`` (computed in logs)."""
    if len(pvalues) == 0:
        return np.zeros(0, dtype=np.float64)
    logs = np.log(epsilons)[None, :] + (epsilons[None, :] - 1.0) * np.log(np.asarray(pvalues))[:, None]
    cumulative = np.cumsum(logs, axis=0)
    peak = cumulative.max(axis=1, keepdims=True)
    return np.asarray(np.exp(peak[:, 0]) * np.exp(cumulative - peak).mean(axis=1), dtype=np.float64)


def martingale_path(pvalues: np.ndarray, kind: str = "jumper") -> np.ndarray:
    """The path of the named martingale."""
    if kind == "jumper":
        return jumper_path(pvalues)
    if kind == "power":
        return power_path(pvalues)
    raise CalibrationError(f"unknown martingale {kind!r}; use {' or '.join(MARTINGALES)}")


def first_alarm(path: np.ndarray, delta: float) -> int | None:
    """The 1-based index of the first ``M_t ≥ 1/δ``, or None."""
    hits = np.flatnonzero(path >= 1.0 / delta)
    return int(hits[0]) + 1 if len(hits) else None


def check_delta(delta: float) -> None:
    """CalibrationError unless 0 < δ < 1."""
    if not 0.0 < delta < 1.0 or math.isnan(delta):
        raise CalibrationError(f"delta must lie in (0, 1), got {delta}")


#: The float fields of :class:`Summary`, in their JSON order after ``n``.
SUMMARY_FLOATS = ("intervention_rate", "median", "p90", "mean_finite")


@dataclass(frozen=True, slots=True)
class Summary:
    """Distribution summary of one set of episode statistics."""

    n: int
    intervention_rate: float
    median: float
    p90: float
    mean_finite: float

    def to_json(self) -> dict[str, float | int | str | None]:
        """Plain JSON: ``n``, then every other field as a number, ``"inf"`` / ``"-inf"``, or ``null`` when undefined.

        ``null`` (NaN in memory) means there is nothing to summarise: every field of an empty set, or
        ``mean_finite`` when no statistic is finite.  :meth:`from_json` reads it back with the strict codec
        of :mod:`guard.jsonio`.
        """
        fields = {k: encode_float_or_null(getattr(self, k)) for k in SUMMARY_FLOATS}
        return {"n": self.n, **fields}

    @classmethod
    def from_json(cls, data: object, where: str) -> Summary:
        """The summary :meth:`to_json` wrote; CalibrationError naming ``where`` and the field if malformed."""
        if not isinstance(data, dict):
            raise CalibrationError(f"{where}: a summary must be an object, got {type(data).__name__}")
        n = data.get("n")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise CalibrationError(f"{where}: n must be a non-negative integer, got {n!r}")
        fields = {k: decode_float_or_null(data.get(k), f"{where}: {k}", CalibrationError) for k in SUMMARY_FLOATS}
        return cls(n=n, **fields)


def summarize(stats: Floats, threshold: float) -> Summary:
    """Size, gate intervention rate (statistic > λ̂), order-statistic median and 90th percentile."""
    values = np.sort(np.asarray(stats, dtype=np.float64))
    n = len(values)
    if n == 0:
        return Summary(0, math.nan, math.nan, math.nan, math.nan)
    finite = values[np.isfinite(values)]
    return Summary(
        n=n,
        intervention_rate=float(np.mean(values > threshold)),
        median=float(values[(n - 1) // 2]),
        p90=float(values[min(n - 1, math.ceil(0.9 * n) - 1)]),
        mean_finite=float(finite.mean()) if len(finite) else math.nan,
    )


@dataclass(frozen=True, slots=True)
class MonitorResult:
    """Everything ``carbguard monitor`` reports."""

    calibration: Summary
    deployed: Summary
    martingale: str
    delta: float
    pvalues: np.ndarray
    path: np.ndarray
    alarm_at: int | None

    @property
    def alarm(self) -> bool:
        """Whether the martingale reached 1/δ."""
        return self.alarm_at is not None

    def to_json(self) -> dict[str, object]:
        """Plain JSON of the result: the martingale's values as numbers, or ``"inf"`` once they overflow a float."""
        return {
            "calibration": self.calibration.to_json(),
            "deployed": self.deployed.to_json(),
            "martingale": self.martingale,
            "delta": self.delta,
            "alarm_level": 1.0 / self.delta,
            "alarm": self.alarm,
            "alarm_at_episode": self.alarm_at,
            "final_value": encode_float(float(self.path[-1])) if len(self.path) else 1.0,
            "max_value": encode_float(float(self.path.max())) if len(self.path) else 1.0,
            "path": [encode_float(round(float(v), 6)) for v in self.path],
        }


def monitor(
    calibration: Floats,
    deployed: Floats,
    threshold: float,
    *,
    delta: float = 0.05,
    martingale: str = "jumper",
    seed: int = 0,
) -> MonitorResult:
    """Compare deployed statistics with the calibration ones and run the test martingale."""
    check_delta(delta)
    if len(calibration) == 0:
        raise CalibrationError("no calibration statistics to compare with")
    pvalues = conformal_pvalues(calibration, deployed, seed)
    path = martingale_path(pvalues, martingale)
    return MonitorResult(
        calibration=summarize(calibration, threshold),
        deployed=summarize(deployed, threshold),
        martingale=martingale,
        delta=delta,
        pvalues=pvalues,
        path=path,
        alarm_at=first_alarm(path, delta),
    )


__all__ = [
    "MARTINGALES",
    "SUMMARY_FLOATS",
    "MonitorResult",
    "Summary",
    "artifact_monitor_field",
    "calibration_statistics",
    "conformal_pvalues",
    "first_alarm",
    "jumper_path",
    "martingale_path",
    "monitor",
    "power_path",
    "read_artifact_statistics",
    "summarize",
]
