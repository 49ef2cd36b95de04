"""Monitoring (guard/calibration/monitor.py): exact p-value oracles, seeded Monte Carlo false-alarm and
detection-delay checks of the test martingales, a negative control that must fail the false-alarm check, and
its JSON (summaries, artifact field, paths) read back by the project's strict reader."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.calibration.monitor import (
    SUMMARY_FLOATS,
    Summary,
    artifact_monitor_field,
    calibration_statistics,
    conformal_pvalues,
    first_alarm,
    jumper_path,
    martingale_path,
    monitor,
    power_path,
    read_artifact_statistics,
    summarize,
)
from guard.calibration.risk_monitor import risk_monitor
from guard.errors import CalibrationError
from guard.jsonio import decode_float, loads_strict

# Discrete scores with heavy ties, like the weighted binary scorer's (inf: refused before scoring).
VALUES = np.array([0.0, 0.1, 0.25, 0.35, 0.52, 0.62, 0.8, math.inf])
NULL = np.array([0.40, 0.20, 0.12, 0.10, 0.08, 0.05, 0.04, 0.01])
SHIFTED = np.array([0.10, 0.05, 0.05, 0.10, 0.20, 0.20, 0.25, 0.05])
DELTA = 0.05
STREAMS = 400
N_CAL, LENGTH = 200, 300


def _draw(rng: np.random.Generator, probs: np.ndarray, size: int) -> np.ndarray:
    return np.asarray(VALUES[rng.choice(len(VALUES), size=size, p=probs)], dtype=np.float64)


def _tolerance(rate: float, n: int) -> float:
    return 3.0 * math.sqrt(rate * (1.0 - rate) / n)


def _alarm_rate(kind: str, pvalue_fn: object = conformal_pvalues, seed: int = 7) -> float:
    rng = np.random.default_rng(seed)
    alarms = 0
    for r in range(STREAMS):
        cal, stream = _draw(rng, NULL, N_CAL), _draw(rng, NULL, LENGTH)
        p = pvalue_fn(cal, stream, r)  # type: ignore[operator]
        alarms += first_alarm(martingale_path(p, kind), DELTA) is not None
    return alarms / STREAMS


def test_pvalue_exact_oracle() -> None:
    """Catches an off-by-one in the counts, ties not smoothed, or the pool not growing with the stream."""
    u = np.random.default_rng(0).uniform(0.0, 1.0, size=2)
    p = conformal_pvalues([1.0, 2.0, 2.0, 3.0], [2.0, 2.0], seed=0)
    assert p[0] == pytest.approx((1 + u[0] * 3) / 5)
    assert p[1] == pytest.approx((1 + u[1] * 4) / 6)  # the first deployed 2.0 joined the pool


def test_pvalues_uniform_under_exchangeability() -> None:
    """Catches p-values that are not uniform with ties (e.g. unsmoothed), by their mean and lower tail."""
    rng = np.random.default_rng(3)
    p = np.concatenate([conformal_pvalues(_draw(rng, NULL, 100), _draw(rng, NULL, 100), r) for r in range(100)])
    n = len(p)
    assert abs(p.mean() - 0.5) < 3 * math.sqrt(1 / 12 / n)
    assert abs(np.mean(p <= 0.1) - 0.1) < _tolerance(0.1, n)


@pytest.mark.parametrize("kind", ["jumper", "power"])
def test_false_alarm_rate_at_most_delta(kind: str) -> None:
    """Catches a martingale that is not a test martingale: ≥ 95% of exchangeable streams must not alarm."""
    rate = _alarm_rate(kind)
    assert rate <= DELTA + _tolerance(DELTA, STREAMS), rate


def _unsmoothed_against_calibration(cal: np.ndarray, stream: np.ndarray, seed: int) -> np.ndarray:
    """The planted bug: p-values against the fixed calibration set, ties counted as not stranger."""
    cal = np.sort(cal)
    greater = len(cal) - np.searchsorted(cal, stream, side="right")
    return np.asarray(np.maximum(greater, 0.5) / (len(cal) + 1), dtype=np.float64)


def test_negative_control_invalid_pvalues_fail_the_check() -> None:
    """Negative control: anti-conservative p-values (no tie smoothing, fixed pool) must fail the false-alarm check."""
    rate = _alarm_rate("jumper", _unsmoothed_against_calibration)
    assert rate > DELTA + _tolerance(DELTA, STREAMS), rate


@pytest.mark.parametrize("kind,bound", [("jumper", 80), ("power", 80)])
def test_alarm_soon_after_a_planted_shift(kind: str, bound: int) -> None:
    """Catches a monitor without power: after 100 exchangeable episodes a shift must alarm within `bound` episodes."""
    rng = np.random.default_rng(11)
    delays: list[float] = []
    early = 0
    for r in range(100):
        cal = _draw(rng, NULL, N_CAL)
        stream = np.concatenate([_draw(rng, NULL, 100), _draw(rng, SHIFTED, 200)])
        at = first_alarm(martingale_path(conformal_pvalues(cal, stream, r), kind), DELTA)
        if at is not None and at <= 100:
            early += 1
            continue
        delays.append(math.inf if at is None else at - 100)
    assert early <= 100 * (DELTA + _tolerance(DELTA, 100))
    assert np.mean(np.array(delays) <= bound) >= 0.9, sorted(delays)[-10:]


def test_jumper_and_power_oracles() -> None:
    """Catches wrong betting updates: hand-computed values of both martingales on two p-values."""
    p = np.array([0.1, 0.2])
    # simple jumper, J = 0.01: weights 1/3 each; step 1: mix (no-op), bets 1.4, 1, 0.6 → total 1
    w = np.array([1, 1, 1]) / 3 * np.array([1.4, 1.0, 0.6])
    w = 0.99 * w + 0.01 / 3 * w.sum()
    expected2 = float((w * np.array([1.3, 1.0, 0.7])).sum())
    assert jumper_path(p) == pytest.approx([1.0, expected2])
    eps = np.linspace(0.01, 0.99, 99)
    assert power_path(p)[1] == pytest.approx(float(np.mean(eps**2 * (0.1 * 0.2) ** (eps - 1))))


def test_monitor_summary_and_errors() -> None:
    """Catches a wrong intervention rate or quantile, and bad δ or an empty calibration set accepted."""
    s = summarize([0.0, 0.1, 0.6, 0.9, math.inf], 0.5)
    assert s.n == 5 and s.intervention_rate == pytest.approx(0.6) and s.median == 0.6 and s.p90 == math.inf
    result = monitor([0.0, 0.2], [0.9, 0.9], 0.5, delta=0.1)
    assert result.deployed.intervention_rate == 1.0 and len(result.path) == 2
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(CalibrationError, match="delta"):
            monitor([0.0], [0.0], 0.5, delta=bad)
    with pytest.raises(CalibrationError, match="no calibration"):
        monitor([], [0.0], 0.5)


# --------------------------------------------------------------------------- JSON: writer and strict reader agree

#: Every float, NaN and ±inf included (what a summary field can hold in memory).
ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _strict_round_trip(value: object) -> object:
    """``value`` written as ``carbguard monitor --json`` writes it (strict JSON) and read back with loads_strict."""
    return loads_strict(json.dumps(value, indent=1, allow_nan=False), "monitor output", CalibrationError)


@given(n=st.integers(0, 10**6), values=st.tuples(ANY_FLOAT, ANY_FLOAT, ANY_FLOAT, ANY_FLOAT))
def test_summary_json_round_trips_through_the_strict_reader(n: int, values: tuple[float, ...]) -> None:
    """Catches a summary writer whose output the project's strict reader refuses: the old writer put NaN (a rate
    of no episodes, the mean of no finite statistic) as the text ``"nan"``, which ``decode_float`` refuses.  NaN
    is now ``null``, ±inf ``"inf"`` / ``"-inf"``, and every field reads back as written."""
    summary = Summary(n, *values)
    data = _strict_round_trip(summary.to_json())
    assert isinstance(data, dict) and list(data) == ["n", *SUMMARY_FLOATS]
    back = Summary.from_json(data, "deployed")
    assert back.n == n
    for key in SUMMARY_FLOATS:
        assert _same(getattr(back, key), getattr(summary, key)), key
        assert (data[key] is None) == math.isnan(getattr(summary, key)), key


def test_the_old_nan_text_is_refused_and_null_is_undefined() -> None:
    """The reader's side: ``"nan"`` (the old writer's form), a bare NaN token and a bool are refused with the
    field named; ``null`` is the one form of an undefined field, and a summary of nothing writes only nulls."""
    good = Summary(3, 0.0, -math.inf, -math.inf, math.nan).to_json()
    assert good["mean_finite"] is None and good["median"] == "-inf"
    with pytest.raises(CalibrationError, match="deployed: mean_finite must be a finite number"):
        Summary.from_json({**good, "mean_finite": "nan"}, "deployed")
    with pytest.raises(CalibrationError, match="mean_finite"):
        loads_strict('{"mean_finite": NaN}', "monitor output", CalibrationError)
    with pytest.raises(CalibrationError, match="p90"):
        Summary.from_json({**good, "p90": True}, "deployed")
    with pytest.raises(CalibrationError, match="n must be"):
        Summary.from_json({**good, "n": -1}, "deployed")
    assert summarize([], 0.5).to_json() == {"n": 0, **dict.fromkeys(SUMMARY_FLOATS)}
    assert summarize([math.inf, -math.inf], 0.5).to_json()["mean_finite"] is None


@given(
    scores=st.lists(ANY_FLOAT, max_size=30),
    cuts=st.lists(st.integers(0, 30), max_size=6),
    threshold=st.floats(allow_nan=False, allow_infinity=True),
)
def test_artifact_monitor_field_round_trips(scores: list[float], cuts: list[int], threshold: float) -> None:
    """Catches calibration statistics the artifact writes but ``read_artifact_statistics`` refuses (scores with
    NaN or ±inf included: an episode without proposals is -inf, a refused call +inf)."""
    bounds = sorted({0, len(scores), *(min(c, len(scores)) for c in cuts)})
    offsets, values = np.array(bounds), np.array(scores, dtype=np.float64)
    field = _strict_round_trip(artifact_monitor_field(offsets, values, threshold))
    assert isinstance(field, dict)
    assert read_artifact_statistics({"monitor": field}, "a") == sorted(
        calibration_statistics(offsets, values, threshold)
    )


def test_an_overflowing_martingale_is_written_as_inf() -> None:
    """Catches a martingale path or wealth that overflows a float (thousands of shifted episodes) and is printed
    as a bare ``Infinity`` token, which the strict reader refuses: it is ``"inf"``, as elsewhere."""
    with np.errstate(over="ignore"):  # each deployed statistic beats all before it: p-values near 0
        result = monitor([0.0] * 20, list(np.arange(1.0, 2001.0)), 0.5)
        risk = risk_monitor(np.ones(1200), 0.1, 0.05).to_json()
    assert math.isinf(float(result.path[-1])) and math.isfinite(float(result.path[0]))
    data = _strict_round_trip(result.to_json())
    assert isinstance(data, dict) and data["final_value"] == "inf" and data["max_value"] == "inf"
    assert [decode_float(v, "path", CalibrationError) for v in data["path"]] == [
        round(float(v), 6) for v in result.path
    ]
    data = _strict_round_trip(risk)
    assert isinstance(data, dict) and data["final_wealth"] == "inf" and "inf" in data["wealth"]
