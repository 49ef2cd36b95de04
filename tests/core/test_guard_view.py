"""Views of a guard (``Guard.view``) and its read-only gate state (docs/monitoring.md#the-circuit-breaker).

One object, the breaker, owns the effective threshold and the trip; every view of a guard shares it on
purpose, so a trip seen through any view switches them all, audited once.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from guard.adapters._shadow import guard_in_mode
from guard.audit import MemoryAudit
from guard.breaker import GateState, trip_text
from guard.decision import Mode, Verdict
from guard.errors import PolicyError
from guard.policy import Policy
from guard.runtime import Guard

READ = ("read_document", {"path": "a.md"})  # scores 0.0 on a fresh session
SEND = ("send_email", {"to": "bob@example.com", "subject": "s", "body": "hello"})  # scores 0.08


def _breakers(audit: MemoryAudit) -> list[dict[str, object]]:
    return [e for e in audit.entries if e.get("kind") == "breaker"]


@pytest.mark.parametrize("fallback", [0.05, -math.inf], ids=["stricter-artifact", "escalate"])
def test_a_shadow_view_polling_first_trips_the_enforcing_guard(
    small_policy: Policy, tmp_path: Path, fallback: float
) -> None:
    """The trip file is first seen by a shadow view's decision; the enforcing guard is tripped too: both
    report the fallback threshold, the enforcing guard escalates the send, one breaker entry is audited.

    Catches the breaker writing the fallback threshold onto whichever guard polled (planted: the old
    ``guard.threshold = after`` in ``Breaker.trip`` with views made by ``copy.copy`` -> the enforcing guard
    keeps 0.5 and executes the send at 0.08) and a view with its own breaker (planted: ``view`` building a
    fresh ``Breaker`` -> the enforcing guard never trips)."""
    audit, trip = MemoryAudit(), tmp_path / "trip.json"
    guard = Guard(small_policy, threshold=0.5, audit=audit, artifact_id="art#abc", fallback=fallback, trip_file=trip)
    shadow = guard_in_mode(guard, "shadow")
    assert shadow is not guard and shadow.mode is Mode.SHADOW and guard.mode is Mode.ENFORCE
    enforcing = guard.session("enforce")
    assert enforcing.decide(*SEND, "c0").verdict is Verdict.EXECUTE
    trip.write_text(trip_text("art#abc", "risk alarm"), encoding="utf-8")
    shadow.session("shadow").decide(*READ, "s1")  # the shadow view polls first
    expected = 0.5 if math.isinf(fallback) else fallback
    assert guard.tripped and shadow.tripped
    assert guard.threshold == shadow.threshold == expected
    assert guard.trip_state is shadow.trip_state
    after = enforcing.decide(*SEND, "c1")
    assert after.verdict is Verdict.ESCALATE
    assert enforcing.decide(*READ, "c2").verdict is Verdict.EXECUTE  # a read scores 0.0: under both fallbacks
    assert len(_breakers(audit)) == 1
    assert guard.trip("again") is False and shadow.trip("again") is False
    assert len(_breakers(audit)) == 1


def test_threshold_and_gate_state_cannot_be_assigned(small_policy: Policy) -> None:
    """``guard.threshold = x`` (and the other gate state, and the mode) raises AttributeError and changes
    nothing.

    Catches the threshold kept as a plain attribute (planted: ``self.threshold = float(threshold)`` back in
    ``Guard.__init__`` -> the assignment succeeds and the gate compares with the new value)."""
    guard = Guard(small_policy, threshold=0.5, artifact_id="art#abc")
    for name, value in (
        ("threshold", 0.9),
        ("artifact_id", "other#1"),
        ("mode", Mode.SHADOW),
        ("tripped", True),
        ("trip_state", None),
    ):
        with pytest.raises(AttributeError):
            setattr(guard, name, value)
    assert guard.threshold == 0.5 and guard.artifact_id == "art#abc" and guard.mode is Mode.ENFORCE
    assert not guard.tripped
    with pytest.raises(AttributeError):
        guard.trip_state.threshold = 0.9  # type: ignore[misc]  # the snapshot is frozen
    assert guard.threshold == 0.5


def test_views_share_the_breaker_and_nothing_else_mutable(small_policy: Policy) -> None:
    """A view holds exactly ``Guard.SHARED`` (the same objects) plus its own mode; reassigning a part of the
    view leaves the guard alone; a mode typo is a PolicyError.

    Catches mutable state shared or dropped by accident (planted: a new attribute ``self._cache = {}`` in
    ``Guard.__init__`` -> the guard holds a part the view neither shares on purpose nor owns) and a view
    that owns a part it should share (planted: ``view`` giving the twin a fresh ``MemoryAudit``)."""
    guard = Guard(small_policy, threshold=0.5, audit=MemoryAudit(), artifact_id="art#abc")
    view = guard.view("shadow")
    assert type(view) is Guard and view is not guard
    assert set(vars(guard)) == set(vars(view)) == set(Guard.SHARED) | {"_mode"}
    for name in Guard.SHARED:
        assert getattr(view, name) is getattr(guard, name), name
    assert view.breaker is guard.breaker and view.mode is Mode.SHADOW and guard.mode is Mode.ENFORCE
    assert view.view(Mode.ENFORCE).mode is Mode.ENFORCE
    view.audit = None
    assert guard.audit is not None
    with pytest.raises(PolicyError, match="mode must be one of"):
        guard.view("shadw")
    assert guard_in_mode(guard, None) is guard and guard_in_mode(guard, "enforce") is guard


def test_trip_state_says_when_why_and_which_fallback(small_policy: Policy) -> None:
    """``Guard.trip_state`` before and after a trip: the calibrated and effective threshold, the fallback
    and its id, when and why.

    Catches a trip that does not record its time or reason (planted: ``when=time.time()`` dropped from
    ``Breaker.trip`` -> ``when`` stays None)."""
    guard = Guard(small_policy, threshold=0.5, artifact_id="art#abc", fallback=0.2, fallback_id="strict#1")
    assert guard.trip_state == GateState(
        threshold=0.5, calibrated=0.5, artifact_id="art#abc", fallback=0.2, fallback_id="strict#1"
    )
    start = time.time()
    assert guard.trip("risk alarm")
    state = guard.trip_state
    assert state.tripped and guard.tripped and state.reason == "risk alarm" and state.fallback_id == "strict#1"
    assert state.when is not None and start <= state.when <= time.time()
    assert (state.threshold, state.calibrated, guard.threshold) == (0.2, 0.5, 0.2)
    assert not state.escalate_actions


FALLBACKS: list[float | str] = [0.05, "escalate", "escalate_risky"]


@pytest.mark.parametrize("fallback", FALLBACKS, ids=[str(f) for f in FALLBACKS])
@pytest.mark.parametrize("tripper", range(4), ids=["guard", "shadow-view", "view-of-a-view", "enforce-view"])
def test_views_and_sessions_built_before_a_trip_decide_under_the_fallback(
    small_policy: Policy, fallback: float | str, tripper: int
) -> None:
    """The guard and views of it (shadow, a view of a view, an enforcing view), each with a session opened and
    used before the trip; whichever of them trips, every one of them then decides under the fallback: the send
    escalates, each decision carries the post-trip threshold, and every view reports the same gate state.

    Catches a view or a session that keeps the pre-trip gate (planted: ``view`` giving the twin
    ``copy.copy(self.breaker)`` -> the other views keep the calibrated threshold and execute the send; or a
    session caching ``guard.threshold`` when it opens -> its decisions keep the pre-trip threshold)."""
    guard = Guard(small_policy, threshold=0.5, artifact_id="art#abc", fallback=fallback)
    shadow = guard.view("shadow")
    views = [guard, shadow, shadow.view("enforce"), guard.view("enforce")]
    sessions = [view.session(f"s{i}") for i, view in enumerate(views)]
    for i, session in enumerate(sessions):
        assert session.decide(*SEND, f"pre{i}").verdict is Verdict.EXECUTE
    assert views[tripper].trip("risk alarm")
    expected = fallback if isinstance(fallback, float) else 0.5
    for i, (view, session) in enumerate(zip(views, sessions, strict=True)):
        assert view.tripped and view.trip_state is guard.trip_state and view.threshold == expected, i
        decision = session.decide(*SEND, f"post{i}")
        assert decision.verdict is Verdict.ESCALATE, (i, decision.message)
        assert decision.threshold == expected, i
