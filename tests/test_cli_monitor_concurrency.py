"""The score monitor under concurrency (guard/cli/deployed.py): 32 concurrent sessions whose length depends on
their outcome, finishing out of start order, written to one audit log as the runtime writes it (a session's
first decided call when it starts, its ``session_end`` entry when it finishes).  Ordered by start and cut
before the first session not yet closed, the score monitor keeps its false alarm ≤ δ even when it is run
again and again while sessions are still running; ordered by finish time, or with the open sessions merely
skipped, it does not (the two negative controls)."""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from guard.calibration.monitor import monitor
from guard.cli.deployed import deployed_sessions, realised_losses, sampled_terms
from guard.errors import GuardError
from tests.monitor_support import max_alarms

CHECKSUM = "c" * 64
ARTIFACT = f"assistant#{CHECKSUM[:12]}"
WORKERS, CALIBRATION, SESSIONS, DELTA = 32, 200, 300, 0.05
CUTS = (0.2, 0.4, 0.6, 0.8, 1.0)  # the monitor run as a periodic job: at these shares of the log, and at its end
BENIGN, HARMFUL = (0.0, 0.08, 0.2, 0.2, 0.85), (0.85, 1.2, 1.2)  # stop_max values, with ties as the gate makes them
Entries = list[dict[str, Any]]


def _statistic(rng: np.random.Generator) -> tuple[float, bool]:
    harmful = bool(rng.random() < 0.3)
    return float(rng.choice(HARMFUL if harmful else BENIGN)), harmful


def _deployment(rng: np.random.Generator, harmful_longer: bool) -> Entries:
    """``SESSIONS`` i.i.d. sessions on 32 workers; a harmful one runs 5× longer (or 5× shorter): audit entries."""
    free = [(0.0, w) for w in range(WORKERS)]
    events: list[tuple[float, int, dict[str, Any]]] = []
    for k in range(SESSIONS):
        start, worker = heapq.heappop(free)
        value, harmful = _statistic(rng)
        end = start + (5.0 if harmful == harmful_longer else 1.0) * float(rng.exponential(1.0))
        sid = f"s{k}"
        events.append((start, 2 * k, {"session": sid, "artifact": ARTIFACT, "call_id": "c0", "score": value}))
        events.append(
            (end, 2 * k + 1, {"event": "session_end", "session": sid, "artifact": ARTIFACT, "stop_max": value})
        )
        heapq.heappush(free, (end, worker))
    return [entry for _, _, entry in sorted(events, key=lambda e: (e[0], e[1]))]


def _start_order(entries: Entries) -> list[float]:
    return list(deployed_sessions(entries, CHECKSUM, 1.0).statistics)


def _finish_order(entries: Entries) -> list[float]:
    """The planted bug of the first negative control: sessions in the order their ``session_end`` was written."""
    return [float(e["stop_max"]) for e in entries if e.get("event") == "session_end"]


def _skip_open(entries: Entries) -> list[float]:
    """The planted bug of the second: start order, but the sessions still open are skipped, not waited for."""
    first: dict[str, int] = {}
    closed: dict[str, float] = {}
    for line, entry in enumerate(entries):
        first.setdefault(entry["session"], line)
        if entry.get("event") == "session_end":
            closed[entry["session"]] = float(entry["stop_max"])
    return [closed[sid] for sid in sorted(closed, key=first.__getitem__)]


def _false_alarm_count(order: Callable[[Entries], list[float]], runs: int, harmful_longer: bool, seed: int) -> int:
    """Seeded runs under H0 (calibration and deployment from one distribution): how many alarm at any cut."""
    rng = np.random.default_rng(seed)
    alarms = 0
    for run in range(runs):
        calibration = [_statistic(rng)[0] for _ in range(CALIBRATION)]
        entries = _deployment(rng, harmful_longer)
        for cut in CUTS:
            stream = order(entries[: int(cut * len(entries))])
            if stream and monitor(calibration, stream, 1.0, delta=DELTA, seed=run).alarm:
                alarms += 1
                break
    return alarms


@pytest.mark.slow
@pytest.mark.parametrize("harmful_longer", [True, False])
def test_start_order_keeps_false_alarm_at_most_delta(harmful_longer: bool) -> None:
    """300 seeded deployments, the monitor run at five cuts of each: catches sessions ordered by anything the
    outcome decides (planted: sort key = the session_end line -> 0.44 / 0.19) or open sessions skipped instead
    of waited for (planted: the cut before the first open session removed -> 0.23 / 0.10); the bound is
    28 of 300 (exact binomial at level 0.001 for a rate of 0.05)."""
    runs = 300
    count = _false_alarm_count(_start_order, runs, harmful_longer, seed=1 + harmful_longer)
    assert count <= max_alarms(runs, DELTA), count / runs


@pytest.mark.slow
@pytest.mark.parametrize("order,harmful_longer", [(_finish_order, True), (_finish_order, False), (_skip_open, True)])
def test_negative_controls_inflate_the_false_alarm(
    order: Callable[[Entries], list[float]], harmful_longer: bool
) -> None:
    """Negative controls that must fail the false-alarm check: finish order, and open sessions skipped, alarm in
    far more than δ of the same deployments (if they passed, the concurrency check above would be blind)."""
    runs = 300
    count = _false_alarm_count(order, runs, harmful_longer, seed=1 + harmful_longer)
    assert count > max_alarms(runs, DELTA), count / runs


def test_stream_stops_before_the_first_open_session() -> None:
    """A starts, B starts and finishes, A is still running: the stream is empty and says B waits for A; once A
    closes it is A, B.  Catches open sessions skipped (planted: the stream would be B alone)."""
    decide = [{"session": s, "artifact": ARTIFACT, "call_id": "c0", "score": 0.1} for s in ("A", "B")]
    ends = [
        {"event": "session_end", "session": s, "artifact": ARTIFACT, "stop_max": v} for s, v in (("B", 0.2), ("A", 0.9))
    ]
    running = deployed_sessions([decide[0], decide[1], ends[0]], CHECKSUM, 1.0)
    assert running.sessions == () and running.waiting == 1 and running.blocked_by == "A"
    assert running.open_sessions == 1
    done = deployed_sessions([decide[0], decide[1], ends[0], ends[1]], CHECKSUM, 1.0)
    assert done.sessions == ("A", "B") and done.statistics == (0.9, 0.2) and done.blocked_by is None


def _label_file(path: Path, rows: list[tuple[str, bool]]) -> str:
    path.write_text(
        "".join(
            json.dumps(
                {
                    "episode": s,
                    "harms": [{"category": "privacy_flow"}] if h else [],
                    "mode": "override",
                    "by": "t",
                    "why": "t",
                }
            )
            + "\n"
            for s, h in rows
        )
    )
    return str(path)


def test_labels_of_waiting_sessions_are_kept_for_later(tmp_path: Path) -> None:
    """A is open, B closed behind it: B's label is neither refused nor read; once A closes, both enter in start
    order.  Under review sampling a waiting session's label is refused all the same if it was not picked.
    Catches labels of waiting sessions refused as unknown (planted: the waiting check removed -> GuardError)."""
    decide = [{"session": s, "artifact": ARTIFACT, "call_id": "c0", "score": 0.1} for s in ("A", "B")]
    end = {s: {"event": "session_end", "session": s, "artifact": ARTIFACT, "stop_max": 0.1} for s in ("A", "B")}
    labels = _label_file(tmp_path / "l.jsonl", [("B", True)])
    assert realised_losses(labels, deployed_sessions([*decide, end["B"]], CHECKSUM, 1.0)) == ([], [])
    both = _label_file(tmp_path / "both.jsonl", [("B", True), ("A", False)])
    assert realised_losses(both, deployed_sessions([*decide, end["B"], end["A"]], CHECKSUM, 1.0)) == (
        ["A", "B"],
        [0.0, 1.0],
    )
    sampled = {s: {**e, "review": {"picked": s == "A", "p": 0.5}} for s, e in end.items()}
    running = deployed_sessions([*decide, sampled["B"]], CHECKSUM, 1.0)
    assert running.waiting_ids == {"B"} and running.waiting_picked == frozenset()
    with pytest.raises(GuardError, match="not a closed session picked"):
        sampled_terms(labels, running)


def test_labels_of_other_artifacts_sessions_are_not_read(tmp_path: Path) -> None:
    """One audit log, two calibrations: a labelling sheet covers the sessions of both, and the monitor of one artifact
    reads only its own sessions' labels.  Catches those labels refused (planted: the other-artifact check removed
    -> GuardError) or counted in this artifact's stream."""
    old = {"session": "O", "artifact": "assistant#000000000000", "call_id": "c0", "score": 0.1}
    old_end = {"event": "session_end", "session": "O", "artifact": old["artifact"], "stop_max": 0.1}
    new = [
        {"session": "N", "artifact": ARTIFACT, "call_id": "c0", "score": 0.1},
        {"event": "session_end", "session": "N", "artifact": ARTIFACT, "stop_max": 0.1},
    ]
    deployed = deployed_sessions([old, old_end, *new], CHECKSUM, 1.0)
    assert deployed.sessions == ("N",) and deployed.other_ids == {"O"}
    labels = _label_file(tmp_path / "l.jsonl", [("O", True), ("N", False)])
    assert realised_losses(labels, deployed) == (["N"], [0.0])
    with pytest.raises(GuardError, match="not a closed session decided under"):
        realised_losses(_label_file(tmp_path / "x.jsonl", [("X", True)]), deployed)
