"""Guard and Session: the decision pipeline of METHOD §1.

``Session.decide`` and ``Session.adecide`` share one I/O-free core (:meth:`Session._core`), which
runs normalize → extend graph → select → score → gate → certify and returns the decision with its
audit entry; the shells only write the entry (sync, or in a worker thread for async).  Any
exception inside fails closed: the verdict is ``escalate`` with reason ``internal_error``.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from guard import stages
from guard.audit import AuditLog
from guard.decision import Decision
from guard.errors import InputError, PolicyError
from guard.graph import PrefixGraph
from guard.policy import Policy, load_policy
from guard.protocols import AuditSink, Certifier, Scorer, Selector
from guard.records import Record, final, result, user
from guard.redaction import hash_value
from guard.scorer import WeightedScorer
from guard.selectors import make_selector


class Guard:
    """A configured guard: one policy, one threshold, one audit sink, many sessions."""

    def __init__(
        self,
        policy: Policy,
        *,
        threshold: float | None = None,
        audit: AuditSink | str | Path | None = None,
        artifact_id: str | None = None,
        selector: Selector | None = None,
        scorer: Scorer | None = None,
        certifier: Certifier | None = None,
    ) -> None:
        if threshold is None:
            raise PolicyError(
                f"policy {policy.name!r}: no threshold given and no calibration artifact loaded; "
                "pass threshold=... explicitly or use Guard.from_policy with a policy that names an artifact"
            )
        if math.isnan(threshold):
            raise PolicyError("threshold must be a number or ±inf, not NaN")
        self.policy = policy
        self.threshold = float(threshold)
        self.artifact_id = artifact_id
        self.audit: AuditSink | None = AuditLog(audit) if isinstance(audit, str | Path) else audit
        self.selector = selector or make_selector(policy.selector)
        self.scorer = scorer or WeightedScorer(policy)
        self.certifier = certifier or stages.default_certifier(policy)

    @classmethod
    def from_policy(cls, path: str | Path, *, audit: AuditSink | str | Path | None = None) -> Guard:
        """Load a policy and the calibration artifact it names (its threshold and id)."""
        from guard.artifact import apply_fitted_weights, load_artifact

        policy = load_policy(path)
        if policy.calibration.artifact is None:
            raise PolicyError(f"{path}: calibration.artifact is not set; use Guard(policy, threshold=...) instead")
        path_ = policy.resolve(policy.calibration.artifact)
        policy = apply_fitted_weights(load_artifact(path_).body, policy, path_)  # fitted weights are frozen pipeline
        artifact = load_artifact(path_, policy)
        if audit is None and policy.audit.path is not None:
            audit = policy.resolve(policy.audit.path)
        return cls(policy, threshold=artifact.threshold, audit=audit, artifact_id=artifact.artifact_id)

    def session(self, session_id: str) -> Session:
        """A new session (one agent run) with its own prefix graph."""
        return Session(self, session_id)


class Session:
    """The state of one episode: its records and prefix graph.  Not shared between episodes."""

    def __init__(self, guard: Guard, session_id: str) -> None:
        self.guard = guard
        self.session_id = session_id
        self.graph = PrefixGraph(guard.policy)
        self.decisions: dict[str, Decision] = {}
        self.proposals: dict[str, Record] = {}
        self._answered: set[str] = set()
        self._lock = threading.RLock()
        self.certifier_state: dict[str, Any] = {}

    # ------------------------------------------------------------------ observe

    @property
    def next_index(self) -> int:
        """Index the next record will get."""
        return len(self.graph.records)

    def observe_user(self, text: str) -> None:
        """Record a user turn."""
        with self._lock:
            self.graph.add(user(self.next_index, _text(text, "user turn")))

    def observe_final(self, text: str) -> None:
        """Record the agent's final answer."""
        with self._lock:
            self.graph.add(final(self.next_index, _text(text, "final answer")))

    def observe_result(self, call_id: str, text: str, status: str = "ok") -> None:
        """Record the result of a proposal this session decided; raise InputError otherwise."""
        if not isinstance(call_id, str):
            raise InputError(f"session {self.session_id!r}: call id must be a string, got {type(call_id).__name__}")
        with self._lock:
            proposal = self.proposals.get(call_id)
            if proposal is None:
                raise InputError(f"session {self.session_id!r}: result for unknown call id {call_id!r}")
            if call_id in self._answered:
                raise InputError(f"session {self.session_id!r}: call id {call_id!r} already has a result")
            trust = stages.result_trust(self.guard.policy, proposal.tool or "")
            record = result(self.next_index, call_id, _text(text, "tool result"), trust, proposal.tool or "", status)
            self.graph.add(record)
            self._answered.add(call_id)

    # ------------------------------------------------------------------- decide

    def decide(self, tool: str, args: Any, call_id: str) -> Decision:
        """Decide on one proposal; never raises, never executes on error."""
        decision, entry = self._core(tool, args, call_id)
        return self._remember(call_id, self._write(decision, entry))

    async def adecide(self, tool: str, args: Any, call_id: str) -> Decision:
        """The async twin of :meth:`decide`: the same core, the audit write off the event loop."""
        decision, entry = self._core(tool, args, call_id)
        if self.guard.audit is not None:
            decision = await asyncio.to_thread(self._write, decision, entry)
        return self._remember(call_id, decision)

    def _core(self, tool: str, args: Any, call_id: str) -> tuple[Decision, dict[str, Any]]:
        start = time.perf_counter_ns()
        entry_error: str | None = None
        with self._lock:
            try:
                decision = stages.run_pipeline(self, tool, args, call_id)
                if not isinstance(decision, Decision):
                    raise TypeError(f"pipeline returned {type(decision).__name__}, expected Decision")
            except Exception as exc:  # noqa: BLE001 - fail closed on anything
                decision = stages.internal_error(tool, call_id, exc, self.guard.threshold)
                entry_error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            latency = (time.perf_counter_ns() - start) / 1000.0
            decision = stages.with_latency(decision, latency)
        if self.guard.audit is None:
            return decision, {}
        try:
            entry = stages.audit_entry(self, decision, args, entry_error)
        except Exception as exc:  # noqa: BLE001 - fail closed on anything
            decision = stages.internal_error(tool, call_id, exc, self.guard.threshold)
            entry = {
                "session": self.session_id,
                "call_id": decision.call_id,
                "tool": decision.tool if self.guard.policy.tool(decision.tool) else hash_value(decision.tool),
                "verdict": decision.verdict.value,
                "reason": decision.reason.value,
                "error": f"audit entry could not be built: {type(exc).__name__}",
            }
        return decision, entry

    def _write(self, decision: Decision, entry: dict[str, Any]) -> Decision:
        sink = self.guard.audit
        if sink is None:
            return decision
        try:
            sink.write(entry)
        except Exception as exc:  # noqa: BLE001 - an unwritten audit entry means no execution
            return stages.internal_error(decision.tool, decision.call_id, exc, self.guard.threshold)
        return decision

    def _remember(self, call_id: Any, decision: Decision) -> Decision:
        """Keep the decision that was returned (after any audit failure), keyed by call id."""
        with self._lock:
            self.decisions[call_id if isinstance(call_id, str) else repr(call_id)] = decision
        return decision


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    return value


__all__ = ["Guard", "Session"]
