"""What the command groups share: the guarantee's scope line and JSON-or-table output."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

SCOPE = (
    "Guarantee: for exchangeable episodes and a frozen pipeline, the expected declared-ledger loss of a new "
    "episode is at most alpha (in expectation over calibration and the new episode). It covers the declared "
    "ledger only. Replay counts a probe as a stop; online, probes add records and replay equivalence needs "
    "traces collected with probes."
)


def emit(result: Any, as_json: bool, formatter: Callable[[Any], str]) -> int:
    """Print ``result`` as JSON or through ``formatter``; exit code 0."""
    print(json.dumps(result, indent=1) if as_json else formatter(result))
    return 0
