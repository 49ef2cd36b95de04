"""The circuit breaker: on a monitor's alarm a running guard switches to its fallback, audited.

:meth:`guard.runtime.Guard.trip` (thread-safe, idempotent) switches the guard to its fallback and
writes one audit entry ``{"event": "breaker", "kind": "breaker", "reason", "from", "to"}`` *before*
the switch is reported; if that write fails the guard trips anyway (fail closed) and the failure is
logged.  The fallback is one of:

- ``escalate`` (policy ``calibration.fallback: escalate``, the default; ``fallback=-inf``): every
  call of a sink or of a tool with a side effect (every call the ledger can charge; a tool the policy
  does not know counts as one) escalates, :meth:`Breaker.escalates`; reads keep the calibrated
  threshold, so the agent can still look things up while a human decides each action.  ``to`` is
  ``{"threshold": <unchanged>, "artifact": null, "escalate": "sinks and side effects"}``;
- a stricter artifact's threshold, which replaces the guard's (never a looser one).

A running process trips on an alarm without a restart through a *trip file*: ``carbguard monitor
... --trip FILE`` writes ``{"artifact": ID, "reason": ...}`` there on an alarm, and a guard built with
``trip_file=FILE`` checks the file's ``os.stat`` at each decision (one syscall; the file is read
only when its mtime or size changed) and trips when the file names its artifact id (or no artifact).
A trip file that exists but cannot be read or parsed trips the guard too (fail closed).  The guard
stays tripped for its lifetime; a guard started with the same artifact and the same trip file trips
again at its first decision, so only a new calibration (a different artifact id) lifts it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from pathlib import Path
from typing import Any

from guard.errors import GuardError
from guard.jsonio import encode_float, loads_strict
from guard.policy import Effect, ToolKind, ToolSpec
from guard.protocols import AuditSink

LOG = logging.getLogger("guard.breaker")


class Breaker:
    """The trip state of one guard: fallback threshold, trip file, and whether it has tripped."""

    def __init__(self, fallback: float, fallback_id: str | None, trip_file: str | Path | None) -> None:
        if math.isnan(fallback):
            raise ValueError("fallback threshold must be a number or -inf, not NaN")
        self.fallback = float(fallback)
        self.fallback_id = fallback_id
        self.trip_file = None if trip_file is None else Path(trip_file)
        self.tripped = False
        self.escalate_actions = False
        self.reason: str | None = None
        self._seen: tuple[int, int] | None = None
        self._lock = threading.Lock()

    def trip(self, guard: Any, reason: str) -> bool:
        """Switch ``guard`` to the fallback and audit it; False if it had already tripped."""
        with self._lock:
            if self.tripped:
                return False
            text = str(reason)[:500]
            actions = math.isinf(self.fallback) and self.fallback < 0
            after = guard.threshold if actions else min(self.fallback, guard.threshold)  # never looser
            to: dict[str, Any] = {"threshold": encode_float(after), "artifact": self.fallback_id}
            if actions:
                to["escalate"] = "sinks and side effects"
            entry: dict[str, Any] = {
                "event": "breaker",
                "kind": "breaker",
                "reason": text,
                "from": {"threshold": encode_float(guard.threshold), "artifact": guard.artifact_id},
                "to": to,
            }
            guard.threshold = after
            self.escalate_actions = actions
            self.tripped = True
            self.reason = text
            sink: AuditSink | None = guard.audit
            if sink is not None:
                try:
                    sink.write(entry)
                except Exception as exc:  # noqa: BLE001 - tripped anyway: the stricter side
                    LOG.error("breaker entry not written: %s", exc)
            return True

    def escalates(self, spec: ToolSpec | None) -> bool:
        """Whether the tripped ``escalate`` fallback escalates a call of this tool (a sink or a side effect;
        a tool the policy does not know counts as one)."""
        if not self.escalate_actions:
            return False
        return spec is None or spec.kind is ToolKind.SINK or spec.effect is not Effect.NONE

    def poll(self, guard: Any) -> None:
        """Trip ``guard`` if its trip file (changed since the last look) names its artifact; never raises."""
        path = self.trip_file
        if path is None or self.tripped:
            return
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.trip(guard, f"trip file {path} cannot be checked: {type(exc).__name__}")
            return
        seen = (st.st_mtime_ns, st.st_size)
        if seen == self._seen:
            return
        self._seen = seen
        try:
            data = loads_strict(path.read_text(encoding="utf-8"), str(path))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError, GuardError) as exc:
            self.trip(guard, f"trip file {path} unreadable: {type(exc).__name__}")
            return
        named = data.get("artifact")
        if named is None or named == guard.artifact_id:
            self.trip(guard, f"trip file {path}: {str(data.get('reason', 'alarm'))[:400]}")


def trip_text(artifact_id: str, reason: str) -> str:
    """The content of a trip file naming ``artifact_id`` (the CLI writes it with its atomic output helper)."""
    return json.dumps({"artifact": artifact_id, "reason": reason}) + "\n"


__all__ = ["Breaker", "trip_text"]
