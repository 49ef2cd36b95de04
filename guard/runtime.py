"""Guard and Session: the decision pipeline of METHOD §1.

``Session.decide`` and ``Session.adecide`` share one I/O-free core (:meth:`Session._core`), which
runs normalize → extend graph → select → score → gate → certify and returns the decision with its
audit entry; the shells only write the entry (sync, or in a worker thread for async).  Any
exception inside fails closed: the verdict is ``escalate`` with reason ``internal_error``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import threading
import time
import traceback
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from guard import stages
from guard.audit import AuditLog
from guard.breaker import Breaker
from guard.decision import Decision, Reason
from guard.episode_json import SOURCE_TRUST, TRUST_SOURCE
from guard.errors import AuditError, BindingError, InputError, PolicyError
from guard.graph import PrefixGraph
from guard.policy import Policy, load_policy
from guard.protocols import AuditSink, Certifier, Scorer, Selector
from guard.recorder import EpisodeRecorder, check_meta, end_session, write_episode
from guard.records import Record, canonical_args, content, final, result, safe_repr, user
from guard.redaction import Redactor, hash_value
from guard.review import ReviewSampler, review_key
from guard.scorer import WeightedScorer
from guard.selectors import make_selector

MODES = ("enforce", "shadow")


class CallState(StrEnum):
    """Where one call id of a session is (:meth:`Session.call_state`)."""

    UNKNOWN = "unknown"  # never entered the graph (not decided, or refused before it)
    PROPOSED = "proposed"  # decided, in the graph, not run
    RAN = "ran"  # authorized once; no result observed yet
    ANSWERED = "answered"  # its result was observed


class Guard:
    """A configured guard: one policy, one threshold, one audit sink, many sessions.

    ``mode="enforce"`` (the default) lets a call run only after ``execute``; ``mode="shadow"``
    decides and audits every call exactly as enforcing mode would, but :meth:`Session.authorize`
    lets every decided call run (for recording a deployment's own calibration episodes).
    ``record=PATH`` (either mode) appends each session's replayable episode — raw tool results
    included — to a ``0600`` episodes file at its final answer or :meth:`Session.close`
    (:mod:`guard.recorder`); recording never changes a decision and never raises into the agent.
    """

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
        mode: str = "enforce",
        record: EpisodeRecorder | str | Path | None = None,
        fallback: float = -math.inf,
        fallback_id: str | None = None,
        trip_file: str | Path | None = None,
    ) -> None:
        if threshold is None:
            raise PolicyError(
                f"policy {policy.name!r}: no threshold given and no calibration artifact loaded; "
                "pass threshold=... explicitly or use Guard.from_policy with a policy that names an artifact"
            )
        if math.isnan(threshold):
            raise PolicyError("threshold must be a number or ±inf, not NaN")
        if mode not in MODES:
            raise PolicyError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.policy = policy
        self.threshold = float(threshold)
        self.artifact_id = artifact_id
        self.audit: AuditSink | None = AuditLog(audit) if isinstance(audit, str | Path) else audit
        self.selector = selector or make_selector(policy.selector)
        self.scorer = scorer or WeightedScorer(policy)
        self.certifier = certifier or stages.default_certifier(policy)
        self.recorder = EpisodeRecorder(record) if isinstance(record, str | Path) else record
        self.review = None if policy.review is None else ReviewSampler(
            review_key(policy.review, policy.resolve), policy.review.rate
        )  # guard.review: keyed pick of sessions for labelling
        self.breaker = Breaker(fallback, fallback_id, trip_file)  # guard.breaker: the switch on an alarm

    def trip(self, reason: str) -> bool:
        """Switch to the fallback threshold now (thread-safe; audited once); False if already tripped."""
        return self.breaker.trip(self, reason)

    @classmethod
    def from_policy(
        cls,
        path: str | Path,
        *,
        audit: AuditSink | str | Path | None = None,
        mode: str = "enforce",
        record: EpisodeRecorder | str | Path | None = None,
        trip_file: str | Path | None = None,
    ) -> Guard:
        """Load a policy and the calibration artifact it names (its threshold and id), and its breaker fallback."""
        from guard.artifact import apply_fitted_weights, load_artifact

        policy = load_policy(path)
        if policy.calibration.artifact is None:
            raise PolicyError(f"{path}: calibration.artifact is not set; use Guard(policy, threshold=...) instead")
        path_ = policy.resolve(policy.calibration.artifact)
        policy = apply_fitted_weights(load_artifact(path_).body, policy, path_)  # fitted weights are frozen pipeline
        artifact = load_artifact(path_, policy)
        if audit is None and policy.audit.path is not None:
            audit = policy.resolve(policy.audit.path)
        fallback, fallback_id = -math.inf, None
        if policy.calibration.fallback != "escalate":
            strict = load_artifact(policy.resolve(policy.calibration.fallback), policy)
            if strict.threshold > artifact.threshold:
                raise PolicyError(f"{path}: calibration.fallback's threshold is looser than the artifact's")
            fallback, fallback_id = strict.threshold, strict.artifact_id
        return cls(
            policy,
            threshold=artifact.threshold,
            audit=audit,
            artifact_id=artifact.artifact_id,
            mode=mode,
            record=record,
            fallback=fallback,
            fallback_id=fallback_id,
            trip_file=trip_file,
        )

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
        self.answered: set[str] = set()
        self.executed: set[str] = set()
        self.approved: set[str] = set()
        self.reviews: set[tuple[Any, ...]] = set()
        self._lock = threading.RLock()
        self.certifier_state: dict[str, Any] = {}
        self.recorded = False
        self.recorded_records = 0
        self.record_error: str | None = None
        self.closed = False
        self.meta: dict[str, Any] = {}

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
            write_episode(self, "final")

    def annotate(self, **meta: Any) -> None:
        """Metadata for the recorded episode (``model``, ``task``, ``attack``, ``utility``, ``tags``).

        Never read by the gate; set it before the final answer (when the episode is written).
        """
        with self._lock:
            self.meta.update(check_meta(meta))

    def close(self) -> None:
        """End the session: record its episode if not yet recorded, write its ``session_end`` audit entry.

        Idempotent; never raises (a failed write is logged and kept in :attr:`record_error`).
        """
        with self._lock:
            if not self.closed:
                self.closed = True
                end_session(self)

    def observe_result(self, call_id: str, text: str, status: str = "ok") -> None:
        """Record the result of a proposal this session decided; raise InputError otherwise."""
        if not isinstance(call_id, str):
            raise InputError(f"session {self.session_id!r}: call id must be a string, got {type(call_id).__name__}")
        with self._lock:
            proposal = self.proposals.get(call_id)
            if proposal is None:
                raise InputError(f"session {self.session_id!r}: result for unknown call id {call_id!r}")
            if call_id in self.answered:
                raise InputError(f"session {self.session_id!r}: call id {call_id!r} already has a result")
            trust = stages.result_trust(self.guard.policy, proposal.tool or "")
            record = result(self.next_index, call_id, _text(text, "tool result"), trust, proposal.tool or "", status)
            self.graph.add(record)
            self.answered.add(call_id)

    def observe_content(self, text: str, source: str, origin: str) -> None:
        """Record content the model is shown that no call decided by this session returned.

        Every channel that reaches the model goes through the guard: an MCP resource or prompt, a
        tool output carried in from an earlier conversation, an attachment.  ``source`` is the kind
        the policy gives that channel (``private_source``, ``public_source`` or ``untrusted_source``;
        an undeclared channel is ``untrusted_source``, never trusted); ``origin`` names it for the
        audit and the recorded episode.  Raises :class:`~guard.errors.InputError` on anything else;
        an adapter that cannot observe content must not hand it to the model.
        """
        trust = SOURCE_TRUST.get(source) if type(source) is str else None
        if trust is None:
            raise InputError(
                f"session {self.session_id!r}: content source must be one of {', '.join(SOURCE_TRUST)}, "
                f"got {safe_repr(source)[:80]}"
            )
        with self._lock:
            self.graph.add(content(self.next_index, _text(text, "content"), trust, origin))

    def tool_source(self, tool: str) -> str:
        """The source kind this session's policy gives ``tool``'s results (``untrusted_source`` if unknown).

        For observing a tool output as content (:meth:`observe_content`), e.g. one carried in from
        an earlier turn of a conversation.
        """
        return TRUST_SOURCE[stages.result_trust(self.guard.policy, tool if type(tool) is str else "")]

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
                self.guard.breaker.poll(self.guard)  # a trip file written since the last decision: switch now
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

    def refuse(self, tool: Any, args: Any, call_id: Any, exc: BaseException) -> Decision:
        """Refuse a call after an error outside the pipeline (an adapter's, or ``authorize``'s), audited.

        The refusal is an ``escalate``/``internal_error`` decision naming the error; it becomes the
        call id's latest decision only when the call id had none (a refused attempt does not change
        the decision a call id already has).  Never raises.
        """
        kind = type(exc).__name__
        decision = stages.internal_error(tool, call_id, exc, self.guard.threshold)
        reused = isinstance(exc, BindingError) and self.call_state(call_id) in (CallState.RAN, CallState.ANSWERED)
        reused = reused or (isinstance(exc, BindingError) and not decided_call(self.decision(call_id), tool, args))
        reason = Reason.CALL_REUSED if reused and self.decision(call_id) is not None else decision.reason
        decision = dataclasses.replace(decision, reason=reason, message=f"not run: {kind}: {exc}"[:600])
        entry: dict[str, Any] = {}
        if self.guard.audit is not None:
            try:
                entry = stages.audit_entry(self, decision, args, f"{kind}: {exc}"[:500])
            except Exception as error:  # noqa: BLE001 - the refusal stands; the entry says what failed
                entry = {"session": self.session_id, "verdict": decision.verdict.value, "reason": decision.reason.value}
                entry["error"] = f"audit entry could not be built: {type(error).__name__}"
        decision = self._write(decision, entry)
        return decision if self.decision(call_id) is not None else self._remember(call_id, decision)

    def decision(self, call_id: str) -> Decision | None:
        """The latest decision on ``call_id`` (None if it was never decided)."""
        with self._lock:
            return self.decisions.get(call_id) if type(call_id) is str else None

    def call_state(self, call_id: str) -> CallState:
        """Where ``call_id`` is: never in the graph, proposed, ran (authorized) or answered (its result observed)."""
        with self._lock:
            if call_id in self.answered:
                return CallState.ANSWERED
            if call_id in self.executed:
                return CallState.RAN
            return CallState.PROPOSED if call_id in self.proposals else CallState.UNKNOWN

    def _remember(self, call_id: Any, decision: Decision) -> Decision:
        """Keep the decision that was returned (after any audit failure), keyed by call id."""
        with self._lock:
            self.decisions[call_id if type(call_id) is str else safe_repr(call_id)] = decision
        return decision

    # ---------------------------------------------------------------- execute

    def authorize(self, call_id: str, tool: str, args: Any) -> dict[str, Any]:
        """Permit one execution of exactly the call that was decided; return the arguments to run it with.

        Allowed only for the (call id, tool, canonical arguments) whose latest decision is ``execute``
        (any decided verdict in shadow mode), and only once.  The returned dict is a fresh copy of the
        canonical arguments that were scored and audited: hand the tool this copy, never the caller's
        object.  Anything else raises :class:`~guard.errors.BindingError` and nothing is marked run.
        """
        with self._lock:
            decision = self.decisions.get(call_id) if type(call_id) is str else None
            where = f"session {self.session_id!r}, call id {safe_repr(call_id)[:80]}"
            if decision is None or decision.args is None:
                raise BindingError(f"{where}: no decision for this call; decide it first")
            if type(tool) is not str or tool != decision.tool:
                raise BindingError(f"{where}: decided for tool {decision.tool!r}, asked to run another tool")
            if call_id in self.executed or call_id in self.answered:
                raise BindingError(f"{where}: already ran; a decided call runs once")
            if not decided_call(decision, tool, args):
                raise BindingError(f"{where}: arguments differ from the ones decided; decide the new call")
            if not decision.allowed and self.guard.mode != "shadow" and call_id not in self.approved:
                raise BindingError(f"{where}: verdict is {decision.verdict.value}, not execute")
            self.executed.add(call_id)
            copy: dict[str, Any] = json.loads(json.dumps(dict(decision.args)))
            return copy

    # ---------------------------------------------------------------- human review

    def review(self, call_id: str, answer: str, *, reviewer: str, message: str | None = None, **link: str) -> None:
        """Record a human's answer to a decided call as its own audit entry, linked to the decision.

        ``answer`` is ``approve``, ``reject``, ``edit`` or ``respond``; ``approve`` lets
        :meth:`authorize` run exactly the decided call once although its verdict was not
        ``execute``.  ``link`` adds string fields (e.g. ``edited_call_id``).  The entry is written
        before the approval takes effect: when the write fails, :class:`~guard.errors.AuditError`
        is raised and nothing is approved.
        """
        if answer not in REVIEW_ANSWERS:
            raise InputError(
                f"review answer must be one of {', '.join(REVIEW_ANSWERS)}, got {safe_repr(answer)}"
            )
        with self._lock:
            decision = self.decisions.get(call_id) if type(call_id) is str else None
            if decision is None:
                raise BindingError(f"session {self.session_id!r}: no decision to review for this call id")
            key = (call_id, decision.proposal_index, answer, reviewer, message, tuple(sorted(link.items())))
            if key in self.reviews:  # the same answer again (a resumed graph re-runs its node): recorded once
                return
            entry = stages.review_entry(self, decision, answer, reviewer, message, link)
            if self.guard.audit is not None:
                try:
                    self.guard.audit.write(entry)
                except Exception as exc:
                    raise AuditError(
                        f"session {self.session_id!r}: review could not be audited: {type(exc).__name__}"
                    ) from exc
            self.reviews.add(key)
            if answer == "approve" and decision.args is not None:
                self.approved.add(call_id)

    def redacted(self, text: str, decision: Decision) -> str:
        """``text`` with the private values of this session and ``decision``'s arguments redacted (for reviewers)."""
        return Redactor(self, decision.args or {}, decision.proposal_index).redact(text)


REVIEW_ANSWERS = ("approve", "reject", "edit", "respond")


def decided_call(decision: Decision | None, tool: Any, args: Any) -> bool:
    """Whether ``decision`` was made on exactly this call: the same plain-str tool and canonical arguments.

    :meth:`Session.authorize` uses it; adapters use it to tell an unchanged request (reuse the decision)
    from a changed one (decide it again).
    """
    if decision is None or decision.args is None or type(tool) is not str or tool != decision.tool:
        return False
    if not isinstance(args, Mapping):
        return False
    try:
        return canonical_args(args) == dict(decision.args)
    except (TypeError, ValueError, RecursionError):
        return False


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    return value


__all__ = ["CallState", "Guard", "Session", "decided_call"]
