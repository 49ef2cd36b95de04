"""The risk monitor's false alarms and detection delay (guard/calibration/risk_delays.py, `carbguard monitor
--delay-table`): review sampling keeps the test valid at the H0 boundary and on dependent H0 streams, an
outcome-dependent review does not (negative control), delays grow with 1/p, and the table in
docs/monitoring.md is what the command prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from guard.calibration.risk_delays import alarm_times, delay_table, drifting_null, review_terms
from guard.calibration.risk_monitor import first_crossing, log_wealth
from guard.cli import main
from tests.monitor_support import max_alarms

ALPHA, DELTA, STREAMS = 0.1, 0.05, 2000
ROOT = Path(__file__).resolve().parents[2]


def test_review_terms_are_unbiased_and_independent_of_the_loss() -> None:
    """Catches a term that is not (picked/p)·L (planted: the 1/p weight dropped -> mean p·E[L]) or a pick drawn
    from the loss: over 10^6 seeded draws the mean of X is E[L] within 5 standard errors, and X is 0 or 1/p."""
    rng = np.random.default_rng(4)
    losses = (rng.random(1_000_000) < 0.2).astype(np.float64)
    terms = review_terms(losses, 0.25, rng)
    assert set(np.unique(terms)) == {0.0, 4.0}
    assert abs(terms.mean() - losses.mean()) < 5 * terms.std() / 1000
    assert np.array_equal(review_terms(losses, 1.0, rng), losses)


@pytest.mark.parametrize("rate", [1.0, 0.25])
def test_false_alarm_at_the_boundary_under_review_sampling(rate: float) -> None:
    """2,000 seeded streams exactly at H0 (every E[L_t] = α), reviewed at rate p: catches an invalid weighting
    (planted: picked/p replaced by picked/(0.8p), an understated p -> 0.62 at p = 0.25)."""
    at = alarm_times(np.full(round(2000 / rate), ALPHA), ALPHA, DELTA, rate, STREAMS, np.random.default_rng(11))
    assert np.count_nonzero(at) <= max_alarms(STREAMS, DELTA), np.mean(at > 0)


def test_false_alarm_on_dependent_h0_streams() -> None:
    """Two non-exchangeable H0 streams, reviewed at p = 0.25: the mean drifting below α, and a dependent stream
    whose conditional mean is α after a loss-free session and α/4 after a loss (so never above α).  Ville
    bounds both by δ.  Catches a bet that is not predictable (planted: μ̂_t for μ̂_{t-1} -> 0.20 of the
    drifting streams alarm) or a test that needs independence."""
    rng = np.random.default_rng(12)
    at = alarm_times(drifting_null(ALPHA, 8000), ALPHA, DELTA, 0.25, STREAMS, rng)
    assert np.count_nonzero(at) <= max_alarms(STREAMS, DELTA), np.mean(at > 0)
    losses = np.zeros((STREAMS, 2000))
    for t in range(1, losses.shape[1]):
        losses[:, t] = rng.random(STREAMS) < np.where(losses[:, t - 1] > 0, ALPHA / 4, ALPHA)
    at = first_crossing(log_wealth(review_terms(losses, 0.25, rng), ALPHA), DELTA)
    assert np.count_nonzero(at) <= max_alarms(STREAMS, DELTA), np.mean(at > 0)


def test_negative_control_outcome_dependent_review_fails() -> None:
    """Negative control that must fail the false-alarm check: the 1/p weighting needs the pick to be independent
    of the outcome.  Reviewers who pick harmed sessions at 0.4 and the others at 0.2 but weight by the nominal
    p = 0.25 turn an H0 stream (mean α) into terms of mean 1.6α, and the test alarms on most streams."""
    rng = np.random.default_rng(13)
    losses = (rng.random((STREAMS, 2000)) < ALPHA).astype(np.float64)
    picked = rng.random(losses.shape) < np.where(losses > 0, 0.4, 0.2)
    at = first_crossing(log_wealth(picked * losses / 0.25, ALPHA), DELTA)
    assert np.count_nonzero(at) > max_alarms(STREAMS, DELTA) and np.mean(at > 0) > 10 * DELTA, np.mean(at > 0)


def test_delay_grows_with_one_over_p() -> None:
    """At mean risk 2α (500 seeded streams): every stream alarms at both rates, and the median delay in closed
    sessions at p = 0.25 is 3 to 8 times the one at p = 1.  Catches the 1/p weight dropped (planted: terms
    picked·L have mean 0.05 < α -> no alarm at p = 0.25) or a simulation that reviews every session anyway."""
    cells = delay_table(ALPHA, DELTA, multipliers=(2.0,), streams=500)
    full, sampled = (next(c for c in cells if c.rate == r and c.label == "mean = 2 alpha") for r in (1.0, 0.25))
    assert full.alarm_rate == 1.0 and sampled.alarm_rate == 1.0
    assert 3.0 <= sampled.median_delay / full.median_delay <= 8.0, (full.median_delay, sampled.median_delay)


def test_delay_table_command(capsys: pytest.CaptureFixture[str]) -> None:
    """`carbguard monitor --delay-table --json`: the rows of the table, and misuse refused with exit 2.  Catches a
    table without its H0 rows, without both review rates, or --delay-table mixed with an audit log accepted."""
    assert main(["monitor", "--delay-table", "--streams", "50", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["stream"], r["review_rate"]) for r in rows] == [
        (label, rate)
        for rate in (1.0, 0.25)
        for label in (
            "H0: mean = alpha",
            "H0: drifting <= alpha",
            "mean = 1.5 alpha",
            "mean = 2 alpha",
            "mean = 3 alpha",
        )
    ]
    assert [r["horizon"] for r in rows] == [2000] * 5 + [8000] * 5
    for argv, message in (
        (["monitor", "a.jsonl", "--delay-table"], "takes no audit log"),
        (["monitor", "a.jsonl"], "--artifact"),
        (["monitor", "a.jsonl", "--artifact", "b", "--alpha", "0.2"], "--delay-table only"),
    ):
        assert main(argv) == 2
        assert message in capsys.readouterr().err


@pytest.mark.slow
def test_docs_table_is_what_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a table in docs/monitoring.md that `carbguard monitor --delay-table` does not print."""
    assert main(["monitor", "--delay-table"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    page = (ROOT / "docs" / "monitoring.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- delay-table -->\n```text\n(.*?)```", page, re.S)
    assert block is not None
    assert block.group(1).strip().splitlines() == printed
