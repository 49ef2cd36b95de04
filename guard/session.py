"""Session: the state of one episode and the shells of its decisions (docs/concepts.md).

``Session.decide`` and ``Session.adecide`` share one I/O-free core (:meth:`Session._core`), which
runs normalize → extend graph → select → score → gate → certify and returns the decision with its
audit entry; the shells only write the entry (sync, or in a worker thread for async).  Any
exception inside fails closed: the verdict is ``escalate`` with reason ``internal_error``.  A session
sees its guard only through :class:`SessionGuard`, so this module never imports :mod:`guard.runtime`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from guard import stages
from guard.breaker import Breaker
from guard.calls import CallBook, CallState, decided_call
from guard.decision import Decision, Mode, Reason, with_latency
from guard.episode_json import SOURCE_TRUST, TRUST_SOURCE
from guard.errors import AuditError, BindingError, InputError
from guard.evidence.trust import session_internal
from guard.graph import PrefixGraph
from guard.policy.trust import InternalSpec
from guard.protocols import GuardConfig
from guard.recorder import EpisodeRecorder, RecordState, check_meta, end_session, write_episode
from guard.records import Record, content, final, result, safe_repr, user
from guard.redaction import Redactor, hash_value
from guard.review import ReviewSampler
from guard.safecommit.state import CertifierState
from guard.segments import SegmentBook, Segments


class SessionGuard(GuardConfig, Protocol):
    """What a session reads from the guard that owns it (:class:`guard.runtime.Guard` is the implementation)."""

    @property
    def mode(self) -> Mode: ...
    @property
    def breaker(self) -> Breaker: ...
    @property
    def recorder(self) -> EpisodeRecorder | None: ...
    @property
    def review(self) -> ReviewSampler | None: ...


class Session:
    """The state of one episode: its records and prefix graph.  Not shared between episodes."""

    def __init__(self, guard: SessionGuard, session_id: str, book: SegmentBook | None = None) -> None:
        self.guard = guard
        self.session_id = session_id
        self.graph = PrefixGraph(guard.policy)
        self._calls = CallBook()
        self._reviews: set[tuple[Any, ...]] = set()
        self._lock = threading.RLock()
        # guard.segments: what runs after close(), or under an id the guard's ``book`` has seen, is a new segment
        self.segments = Segments(session_id, book)
        self.certifier_state = CertifierState()  # each certifier's own state (guard.safecommit.state)
        self.recording = RecordState()  # the recorder's own state (guard.recorder)

    # ------------------------------------------------------------------ queries (read-only views)

    @property
    def decisions(self) -> Mapping[str, Decision]:
        """The latest decision per call id (a read-only view)."""
        return self._calls.decisions

    @property
    def proposals(self) -> Mapping[str, Record]:
        """The proposal record per call id that entered the graph (a read-only view)."""
        return self._calls.proposals

    @property
    def executed(self) -> frozenset[str]:
        """The call ids authorized to run (a copy)."""
        return self._calls.executed()

    @property
    def answered(self) -> frozenset[str]:
        """The call ids whose result was observed (a copy)."""
        return self._calls.answered()

    def decision(self, call_id: str) -> Decision | None:
        """The latest decision on ``call_id`` (None if it was never decided)."""
        with self._lock:
            return self._calls.decision(call_id)

    def call_state(self, call_id: str) -> CallState:
        """Where ``call_id`` is: never in the graph, proposed, ran (authorized) or answered (its result observed)."""
        with self._lock:
            return self._calls.state(call_id)

    def propose(self, call_id: str, record: Record) -> None:
        """The pipeline's hook (:func:`guard.stages.extend`): add ``record`` as the proposal node of ``call_id``."""
        with self._lock:
            self.graph.add(record)
            self._calls.propose(call_id, record)

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
            self.recording.meta.update(check_meta(meta))

    def vouch(
        self,
        *,
        recipients: Sequence[str] = (),
        domains: Sequence[str] = (),
        url_prefixes: Sequence[str] = (),
        identifiers: Sequence[str] = (),
    ) -> None:
        """Vouch for destinations of this session (docs/policy.md#vouched-destinations): from now on they count
        as ``trust.internal`` counts for the deployment, matched exactly.  Trusted application code calls it
        (the handler that authenticated the customer); it is not a tool, so the model cannot.  Each vouch is
        audited (``kind: vouch``) before it takes effect: when the write fails, nothing is vouched.  Raises
        :class:`~guard.errors.InputError` on a value the ``trust.internal`` keys would refuse."""
        fields = {
            "recipients": recipients,
            "domains": domains,
            "url_prefixes": url_prefixes,
            "identifiers": identifiers,
        }
        if any(isinstance(v, str) or not all(isinstance(x, str) for x in v) for v in fields.values()):
            raise InputError("vouch: recipients, domains, url_prefixes and identifiers are lists of strings")
        try:
            added = InternalSpec(**{k: tuple(v) for k, v in fields.items()})
        except ValidationError as exc:
            raise InputError(f"vouch: {exc.errors()[0]['msg']}") from None
        with self._lock:
            if self.guard.audit is not None:
                try:
                    self.guard.audit.write(stages.vouch_entry(self, added.model_dump()))
                except Exception as exc:
                    raise AuditError(f"session {self.session_id!r}: vouch could not be audited") from exc
            self.graph.vouched = session_internal(self.graph.vouched, added)

    def close(self) -> None:
        """End the running segment: record the episode if not yet recorded, write its ``session_end`` entry.

        Idempotent; never raises (a failed write is logged and kept in ``recording.error``).  A closed
        session that decides again (a thread that runs again) keeps its graph, so every earlier
        record still counts, but continues as a new *segment*: its audit entries carry the session
        id ``<id>#segment-<n>`` and ``segment: n``, and the next :meth:`close` writes that segment's
        own ``session_end`` entry, so the monitor and review see it as a unit of its own.
        """
        with self._lock:
            if self.segments.end():
                end_session(self)

    def __enter__(self) -> Session:  # ``with guard.session(id) as s:`` closes it on every way out
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    def observe_result(self, call_id: str, text: str, status: str = "ok") -> None:
        """Record the result of a proposal this session decided; raise InputError otherwise."""
        if not isinstance(call_id, str):
            raise InputError(f"session {self.session_id!r}: call id must be a string, got {type(call_id).__name__}")
        with self._lock:
            proposal = self._calls.proposals.get(call_id)
            if proposal is None:
                decided = self._calls.decision(call_id)
                raise InputError(
                    f"session {self.session_id!r}: result for unknown call id {call_id!r}"
                    if decided is None
                    else f"session {self.session_id!r}: result for call id {call_id!r}, which was refused "
                    f"({decided.reason.value}) before it entered the graph"
                )
            if self._calls.state(call_id) is CallState.ANSWERED:
                raise InputError(f"session {self.session_id!r}: call id {call_id!r} already has a result")
            trust = stages.result_trust(self.guard.policy, proposal.tool or "")
            record = result(self.next_index, call_id, _text(text, "tool result"), trust, proposal.tool or "", status)
            self.graph.add(record)
            self._calls.answer(call_id)

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
            self.segments.reopen(self.next_index)
            try:
                self.guard.breaker.poll(self.guard.audit)  # a trip file written since the last decision: switch now
                decision = stages.run_pipeline(self, tool, args, call_id)
                if not isinstance(decision, Decision):
                    raise TypeError(f"pipeline returned {type(decision).__name__}, expected Decision")
            except Exception as exc:  # noqa: BLE001 - fail closed on anything
                decision = stages.internal_error(tool, call_id, exc, self.guard.threshold)
                entry_error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            latency = (time.perf_counter_ns() - start) / 1000.0
            decision = with_latency(decision, latency)
        return self._entry(decision, tool, args, call_id, entry_error)

    def _entry(
        self, decision: Decision, tool: Any, args: Any, call_id: Any, error: str | None
    ) -> tuple[Decision, dict[str, Any]]:
        """The decision and its audit entry; an entry that cannot be built turns the decision into a refusal."""
        if self.guard.audit is None:
            return decision, {}
        try:
            return decision, stages.audit_entry(self, decision, args, error)
        except Exception as exc:  # noqa: BLE001 - fail closed on anything
            decision = stages.internal_error(tool, call_id, exc, self.guard.threshold)
            return decision, {
                **self.segments.fields(),
                "call_id": decision.call_id,
                "tool": decision.tool if self.guard.policy.tool(decision.tool) else hash_value(decision.tool),
                "verdict": decision.verdict.value,
                "reason": decision.reason.value,
                "error": f"audit entry could not be built: {type(exc).__name__}",
            }

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
        with self._lock:
            self.segments.reopen(self.next_index)
        kind, known = type(exc).__name__, self.decision(call_id)
        decision = stages.internal_error(tool, call_id, exc, self.guard.threshold)
        ran = self.call_state(call_id) in (CallState.RAN, CallState.ANSWERED)
        reused = isinstance(exc, BindingError) and known is not None and (ran or not decided_call(known, tool, args))
        decision = dataclasses.replace(
            decision, reason=Reason.CALL_REUSED if reused else decision.reason, message=f"not run: {kind}: {exc}"[:600]
        )
        decision = self._write(*self._entry(decision, tool, args, call_id, f"{kind}: {exc}"[:500]))
        if known is None:
            return self._remember(call_id, decision)
        with self._lock:  # audited in this segment, so the segment's session_end counts the call
            self.segments.ran(call_id, decided=False)
        return decision

    def _remember(self, call_id: Any, decision: Decision) -> Decision:
        """Keep the decision that was returned (after any audit failure), keyed by call id."""
        with self._lock:
            self.segments.ran(call_id)
            return self._calls.remember(call_id, decision)

    # ---------------------------------------------------------------- execute

    def authorize(self, call_id: str, tool: str, args: Any) -> dict[str, Any]:
        """Permit one execution of exactly the call that was decided; return the arguments to run it with.

        Allowed only for the (call id, tool, canonical arguments) whose latest decision is ``execute``
        (any decided verdict in shadow mode), and only once.  The returned dict is a fresh copy of the
        canonical arguments that were scored and audited: hand the tool this copy, never the caller's
        object.  Anything else raises :class:`~guard.errors.BindingError` and nothing is marked run.
        """
        with self._lock:
            where = f"session {self.session_id!r}, call id {safe_repr(call_id)[:80]}"
            return self._calls.bind(where, call_id, tool, args, self.guard.mode is Mode.SHADOW)

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
            raise InputError(f"review answer must be one of {', '.join(REVIEW_ANSWERS)}, got {safe_repr(answer)}")
        with self._lock:
            decision = self._calls.decision(call_id)
            if decision is None:
                raise BindingError(f"session {self.session_id!r}: no decision to review for this call id")
            key = (call_id, decision.proposal_index, answer, reviewer, message, tuple(sorted(link.items())))
            if key in self._reviews:  # the same answer again (a resumed graph re-runs its node): recorded once
                return
            segment = self.segments.decided_in(call_id)  # the segment whose decision is answered
            entry = stages.review_entry(self, decision, answer, reviewer, message, link, segment)
            if self.guard.audit is not None:
                try:
                    self.guard.audit.write(entry)
                except Exception as exc:
                    raise AuditError(
                        f"session {self.session_id!r}: review could not be audited: {type(exc).__name__}"
                    ) from exc
            self._reviews.add(key)
            if answer == "approve" and decision.args is not None:
                self._calls.approve(call_id)

    def redacted(self, text: str, decision: Decision) -> str:
        """``text`` with the private values of this session and ``decision``'s arguments redacted (for reviewers)."""
        return Redactor(self, decision.args or {}, decision.proposal_index).redact(text)


REVIEW_ANSWERS = ("approve", "reject", "edit", "respond")


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    return value


__all__ = ["REVIEW_ANSWERS", "Session", "SessionGuard"]
