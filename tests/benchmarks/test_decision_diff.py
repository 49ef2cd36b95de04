"""The decision diff compares two dumps proposal by proposal and counts every changed field."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from benchmarks.decision_diff import diff


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return path


def _row(i: int, **changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "episode": "e",
        "model": "m",
        "suite": "s",
        "i": i,
        "tool": "send_email",
        "verdict": "execute",
        "reason": "under_threshold",
        "score": 0.2,
        "selected": [0],
        "features": ["a"],
    }
    row.update(changes)
    return row


def test_every_field_change_is_counted_once_per_proposal(tmp_path: Path) -> None:
    """Catches a diff that compares only scores (a verdict, selection or feature change read as 'no change'),
    that keys proposals by index alone, or that counts a proposal once per changed field in ``any``."""
    old = _write(tmp_path / "old.jsonl.gz", [_row(i) for i in range(5)])
    new_rows = [
        _row(0),
        _row(1, score=0.9, verdict="escalate", reason="risk_budget"),
        _row(2, selected=[0, 1]),
        _row(3, features=["a", "b"]),
        _row(4),
    ]
    new = _write(tmp_path / "new.jsonl.gz", new_rows)
    counts = diff(old, new, show=10)
    assert counts == {"any": 3, "score": 1, "verdict": 1, "reason": 1, "selected": 1, "features": 1}
    assert diff(old, old, show=10) == {}
