"""Guard: one policy, one threshold (owned by its breaker), one audit sink, many sessions.

The per-episode state and the decision shells live in :mod:`guard.session`; this module builds
guards (from a policy, or as a view of another guard) and re-exports :class:`Session`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar

from guard import stages
from guard.audit import AuditLog
from guard.breaker import Breaker, GateState
from guard.calls import CallState, decided_call
from guard.decision import Mode
from guard.deployment import policy_fallback
from guard.errors import PolicyError
from guard.policy import Policy
from guard.protocols import AuditSink, Certifier, Scorer, Selector
from guard.recorder import EpisodeRecorder
from guard.review import ReviewSampler, review_key
from guard.scorer import WeightedScorer
from guard.segments import SegmentBook, check_session_id
from guard.selectors import make_selector
from guard.session import Session


class Guard:
    """A configured guard: one policy, one threshold, one audit sink, many sessions.

    ``mode="enforce"`` (the default) lets a call run only after ``execute``; ``mode="shadow"``
    decides and audits every call exactly as enforcing mode would, but :meth:`Session.authorize`
    lets every decided call run (for recording a deployment's own calibration episodes).
    ``record=PATH`` (either mode) appends each session's replayable episode — raw tool results
    included — to a ``0600`` episodes file at its final answer or :meth:`Session.close`
    (:mod:`guard.recorder`); recording never changes a decision and never raises into the agent.
    The :attr:`breaker` owns the gate state (docs/monitoring.md#the-circuit-breaker): :attr:`threshold`,
    :attr:`tripped`, :attr:`trip_state` (and :attr:`artifact_id`, :attr:`mode`) are read-only.
    ``fallback`` is what a trip switches to: ``-inf`` or ``"escalate"`` (every sink and side effect
    escalates), ``"escalate_risky"`` (only risky calls escalate) or a stricter artifact's threshold;
    None (the default) applies the policy's ``calibration.fallback`` (a stricter artifact's path is
    loaded and checked against the policy; one looser than ``threshold`` is a PolicyError).
    """

    #: What every :meth:`view` of a guard shares on purpose; a view owns nothing else but its mode.
    SHARED: ClassVar[tuple[str, ...]] = (
        "policy",
        "audit",
        "selector",
        "scorer",
        "certifier",
        "recorder",
        "review",
        "breaker",
        "segment_book",
    )

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
        mode: Mode | str = Mode.ENFORCE,
        record: EpisodeRecorder | str | Path | None = None,
        fallback: float | str | None = None,
        fallback_id: str | None = None,
        trip_file: str | Path | None = None,
    ) -> None:
        if threshold is None:
            raise PolicyError(
                f"policy {policy.name!r}: no threshold given and no calibration artifact loaded; "
                "pass threshold=... explicitly or use Guard.from_policy with a policy that names an artifact"
            )
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise PolicyError(f"threshold must be a number or ±inf, got {type(threshold).__name__} {threshold!r}")
        if math.isnan(threshold):
            raise PolicyError("threshold must be a number or ±inf, not NaN")
        self._mode = Mode.parse(mode)
        self.policy = policy
        self.audit: AuditSink | None = AuditLog(audit) if isinstance(audit, str | Path) else audit
        self.selector = selector or make_selector(policy.selector)
        self.scorer = scorer or WeightedScorer(policy)
        self.certifier = certifier or stages.default_certifier(policy)
        self.recorder = EpisodeRecorder(record) if isinstance(record, str | Path) else record
        self.review = (
            None
            if policy.review is None
            else ReviewSampler(review_key(policy.review, policy.resolve), policy.review.rate)
        )  # guard.review: keyed pick of sessions for labelling
        if fallback is None:  # the policy's calibration.fallback (docs/monitoring.md#the-circuit-breaker)
            if fallback_id is not None:
                raise PolicyError("fallback_id names the artifact of a fallback threshold: pass fallback=... too")
            where = f"policy {policy.name!r}: calibration.fallback's"
            fallback, fallback_id = policy_fallback(policy, float(threshold), where, "guard's")
        # guard.breaker: owns the threshold and the switch on an alarm, shared by every view of this guard
        self.breaker = Breaker(float(threshold), artifact_id, fallback, fallback_id, trip_file)
        # guard.segments: the segment numbers given out per session id, so a reused id starts the next segment
        self.segment_book = SegmentBook()

    def view(self, mode: Mode | str) -> Guard:
        """A new guard in ``mode`` (``"enforce"``/``"shadow"``; a typo is a PolicyError) sharing :attr:`SHARED`.

        Shared on purpose: the breaker (one threshold, one trip seen by every view, audited once), audit
        sink, policy, selector, scorer, certifier, recorder and review sampler, so decisions and audit
        entries are the same; only :meth:`Session.authorize` differs.  The view owns only its mode.
        """
        wanted = Mode.parse(mode)
        twin = object.__new__(type(self))
        for name in self.SHARED:
            setattr(twin, name, getattr(self, name))
        twin._mode = wanted
        return twin

    @property
    def mode(self) -> Mode:
        """``enforce`` or ``shadow`` (read-only; :meth:`view` gives the guard in another mode)."""
        return self._mode

    @property
    def threshold(self) -> float:
        """The effective threshold: the calibrated one, or a stricter fallback's after a trip (read-only)."""
        return self.breaker.state.threshold

    @property
    def artifact_id(self) -> str | None:
        """The calibration artifact's id (None when the threshold was given by hand); read-only."""
        return self.breaker.state.artifact_id

    @property
    def tripped(self) -> bool:
        """Whether the circuit breaker has tripped (read-only)."""
        return self.breaker.state.tripped

    @property
    def trip_state(self) -> GateState:
        """The breaker's state: threshold, fallback and fallback id, whether, when and why it tripped."""
        return self.breaker.state

    def trip(self, reason: str) -> bool:
        """Switch to the fallback threshold now (thread-safe; audited once); False if already tripped."""
        return self.breaker.trip(reason, self.audit)

    @classmethod
    def from_policy(
        cls,
        path: str | Path,
        *,
        audit: AuditSink | str | Path | None = None,
        mode: Mode | str = Mode.ENFORCE,
        record: EpisodeRecorder | str | Path | None = None,
        trip_file: str | Path | None = None,
    ) -> Guard:
        """Load a policy and the calibration artifact it names (its threshold and id), and its breaker fallback."""
        from guard.deployment import load_deployment

        found = load_deployment(path)
        return cls(
            found.policy,
            threshold=found.threshold,
            audit=found.audit if audit is None else audit,
            artifact_id=found.artifact_id,
            mode=mode,
            record=record,
            fallback=found.fallback,
            fallback_id=found.fallback_id,
            trip_file=trip_file,
        )

    def session(self, session_id: str) -> Session:
        """A new session (one agent run) with its own prefix graph.

        An id this guard (or a view of it) opened before starts the next segment: its audit entries carry
        ``<id>#segment-<n>``, a unit of its own for the monitor (docs/audit.md#one-unit-per-segment).  An id
        that is not a non-empty string, or holds a reserved marker (``#segment-``, ``#run-``), is an InputError.
        """
        return Session(self, check_session_id(session_id), self.segment_book)


__all__ = ["CallState", "Guard", "Session", "decided_call"]
