"""The latency benchmark's own arithmetic (not timings: those are measured, never asserted)."""

from __future__ import annotations

import pytest

from benchmarks.latency import Timing, median_timing, percentile


def test_median_timing_takes_each_decisions_median_over_the_passes() -> None:
    """Per decision, the median of the passes: one slow pass moves nothing (catches a mean, a max, or the
    first pass only), and the decisions stay in order with their indices."""
    passes = [
        Timing(samples=[(1, 10.0), (3, 50.0)], decide_only=[(1, 8.0), (3, 40.0)], selected=[(1, 0), (3, 2)]),
        Timing(samples=[(1, 900.0), (3, 52.0)], decide_only=[(1, 800.0), (3, 41.0)], selected=[(1, 0), (3, 2)]),
        Timing(samples=[(1, 12.0), (3, 48.0)], decide_only=[(1, 9.0), (3, 39.0)], selected=[(1, 0), (3, 2)]),
    ]
    merged = median_timing(passes)
    assert merged.samples == [(1, 12.0), (3, 50.0)]
    assert merged.decide_only == [(1, 9.0), (3, 40.0)]
    assert merged.selected == [(1, 0), (3, 2)]
    assert median_timing(passes[:1]) is passes[0]


def test_median_timing_refuses_passes_over_different_decisions() -> None:
    """Passes that timed different decisions are not merged (catches pairing decision 1 with decision 2)."""
    a = Timing(samples=[(1, 1.0)], decide_only=[(1, 1.0)], selected=[(1, 0)])
    b = Timing(samples=[(2, 1.0)], decide_only=[(2, 1.0)], selected=[(2, 0)])
    with pytest.raises(ValueError, match="different decisions"):
        median_timing([a, b])


def test_percentile_is_the_nearest_rank() -> None:
    """p99 of 246 values is the 3rd-largest, p50 of 4 the 2nd (catches interpolation or an off-by-one rank)."""
    values = [float(v) for v in range(1, 247)]
    assert percentile(values, 0.99) == 244.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0
