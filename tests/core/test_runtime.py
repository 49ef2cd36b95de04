"""Guard and Session: the decision pipeline of docs/concepts.md, fail-closed behaviour, and isolation."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.audit import MemoryAudit
from guard.decision import Certification, Reason, Verdict
from guard.errors import InputError
from guard.graph import PrefixGraph
from guard.policy import Policy, ToolSpec, parse_policy
from guard.runtime import Guard, Session

ROOT = Path(__file__).resolve().parents[2]
LEAK = (
    "send_email",
    {"to": "records@outside-archive.net", "subject": "passport", "body": "Passport number X4821-99317"},
)
PUBLIC = (
    "send_email",
    {
        "to": "partners@newsletter.example",
        "subject": "Press release",
        "body": "Acme opens a new solar plant in Lyon, producing 40 MW from June.",
    },
)


# --------------------------------------------------------------------------- test doubles


class RaisingSelector:
    name = "raising"

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        raise RuntimeError("selector exploded")


class ListSelector:
    name = "list"

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> Any:
        return [0]


class FutureSelector:
    name = "future"

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        return frozenset({node})


class FutureNodeSetSelector:
    """A bit-set selection holding the proposal itself (checked on its bits, not member by member)."""

    name = "future-nodeset"

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        from guard.graph import NodeSet

        return NodeSet.of(graph.ancestor_bits(node) | 1 << node)


class FloatMemberSelector:
    """A plain set whose member equals a record index without being one (``0.0``, ``False``)."""

    name = "float-member"

    def __init__(self, member: Any) -> None:
        self.member = member

    def select(self, graph: PrefixGraph, node: int, episode_id: str) -> frozenset[int]:
        return frozenset({self.member})


class RaisingScorer:
    def score(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> tuple[float, Mapping[str, bool]]:
        raise KeyError("scorer exploded")


class StringScorer:
    def score(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> Any:
        return "low"


class NaNScorer:
    def score(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> tuple[float, Mapping[str, bool]]:
        return math.nan, {}


class BadFeaturesScorer:
    def score(self, graph: PrefixGraph, node: int, selected: frozenset[int]) -> Any:
        return 0.0, "not a mapping"


class BrokenSink:
    def write(self, entry: Mapping[str, Any]) -> None:
        raise OSError("disk full")


class DeferCertifier:
    def __init__(self) -> None:
        self.calls = 0

    def certify(self, session: Session, node: int, spec: ToolSpec) -> Certification:
        self.calls += 1
        return Certification(Verdict.DEFER, Reason.NOT_CERTIFIED, "wait for evidence")


class WrongCertifier:
    def certify(self, session: Session, node: int, spec: ToolSpec) -> Any:
        return "execute"


# --------------------------------------------------------------------------- the pipeline


def test_read_only_under_threshold_executes(session: Session) -> None:
    """A read-only proposal under the threshold executes with its score and selection."""
    decision = session.decide("read_document", {"path": "a.md"}, "c1")
    assert (decision.verdict, decision.reason, decision.allowed) == (Verdict.EXECUTE, Reason.UNDER_THRESHOLD, True)
    assert (decision.score, decision.threshold, decision.proposal_index) == (0.0, 0.5, 0)
    assert decision.latency_us > 0


def test_leak_is_escalated(guard: Guard, leak_session: Callable[[Guard], Session]) -> None:
    """The certificate → note → external e-mail proposal exceeds λ and is handed off."""
    decision = leak_session(guard).decide(*LEAK, "c4")
    assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.RISK_BUDGET)
    assert decision.score == pytest.approx(0.70)
    assert decision.selected == (2, 5)
    assert "exceeds the threshold set by hand 0.500" in decision.message


@pytest.mark.parametrize(
    ("artifact_id", "words"), [(None, "the threshold set by hand"), ("pooled-a0.10", "the calibrated threshold")]
)
def test_a_refusal_calls_a_threshold_calibrated_only_when_an_artifact_set_it(
    small_policy: Policy, leak_session: Callable[[Guard], Session], artifact_id: str | None, words: str
) -> None:
    """Catches a refusal that calls a threshold typed by hand (``Guard(policy, threshold=0.5)``, no artifact)
    "the calibrated threshold", or one that stops calling an artifact's threshold calibrated."""
    guard = Guard(small_policy, threshold=0.5, artifact_id=artifact_id)
    decision = leak_session(guard).decide(*LEAK, "c4")
    assert decision.reason is Reason.RISK_BUDGET and f"exceeds {words} 0.500" in decision.message


def test_public_email_executes(guard: Guard, leak_session: Callable[[Guard], Session]) -> None:
    """An e-mail carrying only the public document executes under G-CARB."""
    s = leak_session(guard)
    s.decide(*LEAK, "c4")
    decision = s.decide(*PUBLIC, "c5")
    assert decision.verdict is Verdict.EXECUTE
    assert decision.selected == (0, 3, 4)


def test_infinite_threshold_executes_everything(small_policy: Policy, leak_session: Callable[[Guard], Session]) -> None:
    """At λ = +∞ (no guard) even the leak executes."""
    assert leak_session(Guard(small_policy, threshold=math.inf)).decide(*LEAK, "c4").allowed


def test_minus_infinite_threshold_stops_everything(small_policy: Policy) -> None:
    """At λ = −∞ (stop-all) every scored proposal is refused."""
    decision = Guard(small_policy, threshold=-math.inf).session("s").decide("read_document", {"path": "a"}, "c")
    assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.RISK_BUDGET)


def test_unknown_tool_gets_on_unknown_verdict(session: Session) -> None:
    """A tool the policy does not know is refused with the default on_unknown (escalate)."""
    decision = session.decide("format_disk", {}, "c1")
    assert (decision.verdict, decision.reason, decision.score) == (Verdict.ESCALATE, Reason.UNKNOWN_TOOL, None)
    assert len(session.graph) == 0


def test_on_unknown_defer(policy_data: dict[str, Any]) -> None:
    """A policy's ``on_unknown: defer`` is the verdict for unknown tools."""
    policy_data["on_unknown"] = "defer"
    decision = Guard(parse_policy(policy_data), threshold=0.5).session("s").decide("format_disk", {}, "c")
    assert decision.verdict is Verdict.DEFER


def test_non_object_args_refused(session: Session) -> None:
    """Arguments that are not a JSON object are refused as bad arguments."""
    decision = session.decide("read_document", ["a.md"], "c1")
    assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.BAD_ARGUMENTS)
    assert "JSON object, got list" in decision.message


def test_mixed_key_types_refused(session: Session) -> None:
    """Nested mappings with mixed key types are bad arguments, not an internal error."""
    decision = session.decide("read_document", {"path": {1: "a", "b": 2}}, "c1")
    assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.BAD_ARGUMENTS)


def test_call_id_reused_for_another_call(session: Session) -> None:
    """A call id reused for a different call is refused."""
    session.decide("read_document", {"path": "a.md"}, "c1")
    decision = session.decide("read_document", {"path": "b.md"}, "c1")
    assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.CALL_REUSED)
    assert "reused" in decision.message


def test_same_call_redecided_reuses_node(session: Session) -> None:
    """Deciding the same call again (after probes) reuses its node and gets the same answer."""
    first = session.decide("read_document", {"path": "a.md"}, "c1")
    second = session.decide("read_document", {"path": "a.md"}, "c1")
    assert len(session.graph) == 1
    assert (second.proposal_index, second.verdict, second.score) == (first.proposal_index, first.verdict, first.score)


def test_certifier_runs_only_for_side_effects(small_policy: Policy) -> None:
    """Read-only tools skip SafeCommit; a side-effectful tool under λ gets the certifier's verdict."""
    certifier = DeferCertifier()
    s = Guard(small_policy, threshold=0.5, certifier=certifier).session("s")
    assert s.decide("read_document", {"path": "a.md"}, "c1").verdict is Verdict.EXECUTE
    assert certifier.calls == 0
    decision = s.decide("create_note", {"body": "hello"}, "c2")
    assert (decision.verdict, decision.reason, certifier.calls) == (Verdict.DEFER, Reason.NOT_CERTIFIED, 1)


def test_observe_result_for_unknown_call_id(session: Session) -> None:
    """A result for a call id the session never saw is an InputError."""
    with pytest.raises(InputError, match="unknown call id"):
        session.observe_result("ghost", "text")


def test_observe_result_twice(session: Session) -> None:
    """A second result for the same call id is an InputError."""
    session.decide("read_document", {"path": "a.md"}, "c1")
    session.observe_result("c1", "text")
    with pytest.raises(InputError, match="already has a result"):
        session.observe_result("c1", "again")


def test_observe_non_string_text(session: Session) -> None:
    """Non-string user turns and results are InputErrors."""
    with pytest.raises(InputError, match="user turn must be a string"):
        session.observe_user(42)  # type: ignore[arg-type]


def test_result_trust_follows_policy(session: Session) -> None:
    """A result gets the trust of its tool's source kind."""
    session.decide("read_certificate", {"name": "passport"}, "c1")
    session.observe_result("c1", "secret")
    session.observe_final("done")
    assert session.graph.facts[1].private
    assert len(session.graph) == 3


def test_sessions_are_isolated(guard: Guard) -> None:
    """Two sessions of one guard have separate graphs and call ids."""
    a, b = guard.session("a"), guard.session("b")
    a.decide("read_document", {"path": "a.md"}, "c1")
    assert len(b.graph) == 0
    assert b.decide("read_document", {"path": "b.md"}, "c1").verdict is Verdict.EXECUTE


def test_async_and_sync_agree(small_policy: Policy, leak_session: Callable[[Guard], Session]) -> None:
    """``adecide`` and ``decide`` return the same decisions and write the same audit entries."""
    sync_audit, async_audit = MemoryAudit(), MemoryAudit()
    sync_s = leak_session(Guard(small_policy, threshold=0.5, audit=sync_audit))
    async_s = leak_session(Guard(small_policy, threshold=0.5, audit=async_audit))

    async def run() -> list[Any]:
        return [await async_s.adecide(*LEAK, "c4"), await async_s.adecide(*PUBLIC, "c5")]

    got = asyncio.run(run())
    want = [sync_s.decide(*LEAK, "c4"), sync_s.decide(*PUBLIC, "c5")]
    assert [(d.verdict, d.score, d.selected) for d in got] == [(d.verdict, d.score, d.selected) for d in want]
    assert [e["verdict"] for e in async_audit.entries] == [e["verdict"] for e in sync_audit.entries]


# --------------------------------------------------------------------------- failing closed


@pytest.mark.parametrize(
    ("component", "error"),
    [
        ({"selector": RaisingSelector()}, "RuntimeError"),
        ({"selector": ListSelector()}, "TypeError"),
        ({"selector": FutureSelector()}, "TypeError"),
        ({"selector": FutureNodeSetSelector()}, "TypeError"),
        ({"selector": FloatMemberSelector(0.0)}, "not a subset of the prefix"),
        ({"selector": FloatMemberSelector(False)}, "not a subset of the prefix"),
        ({"scorer": RaisingScorer()}, "KeyError"),
        ({"scorer": StringScorer()}, "TypeError"),
        ({"scorer": NaNScorer()}, "ValueError"),
        ({"scorer": BadFeaturesScorer()}, "ValueError"),
        ({"certifier": WrongCertifier()}, "TypeError"),
    ],
)
def test_broken_component_fails_closed(small_policy: Policy, component: dict[str, Any], error: str) -> None:
    """A selector, scorer or certifier that raises or returns the wrong type → escalate, internal_error, audited
    (a selection member ``0.0`` or ``False`` equals record 0's index but is not one: it is refused, not read)."""
    audit = MemoryAudit()
    s = Guard(small_policy, threshold=math.inf, audit=audit, **component).session("s")
    s.observe_user("hello")
    decision = s.decide("create_note", {"body": "hello"}, "c1")
    assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.INTERNAL_ERROR)
    assert len(audit.entries) == 1
    assert audit.entries[0]["verdict"] == "escalate"
    assert error in audit.entries[0]["error"]


def test_raising_audit_sink_blocks_execution(small_policy: Policy) -> None:
    """If the audit entry cannot be written the tool does not run, and the session records the refusal."""
    s = Guard(small_policy, threshold=0.5, audit=BrokenSink()).session("s")
    decision = s.decide("read_document", {"path": "a.md"}, "c1")
    assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.INTERNAL_ERROR)
    assert "disk full" in decision.message
    assert s.decisions["c1"] == decision


def test_raising_audit_sink_blocks_async(small_policy: Policy) -> None:
    """The async path also refuses when the audit sink raises."""
    s = Guard(small_policy, threshold=0.5, audit=BrokenSink()).session("s")
    decision = asyncio.run(s.adecide("read_document", {"path": "a.md"}, "c1"))
    assert decision.verdict is Verdict.ESCALATE


def test_unwritable_audit_path_blocks_execution(small_policy: Policy, tmp_path: Path) -> None:
    """An audit file that cannot be opened refuses the proposal."""
    folder = tmp_path / "log"
    guard = Guard(small_policy, threshold=0.5, audit=folder / "a.jsonl")
    (folder / "a.jsonl").mkdir()
    assert guard.session("s").decide("read_document", {"path": "a.md"}, "c1").verdict is Verdict.ESCALATE


# --------------------------------------------------------------------------- malformed input


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


_surrogate = st.integers(min_value=0xD800, max_value=0xDFFF).map(chr)
_weird_text = st.one_of(st.text(max_size=30), st.builds(lambda a, s: a + s, st.text(max_size=5), _surrogate))
_non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
_non_str_id = st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=5), st.just(""), st.just(["c"]))
_huge = st.integers(min_value=200_001, max_value=230_000).map(lambda n: "a" * n)

_email, _read, _c = st.just("send_email"), st.just("read_document"), st.just("c")

MALFORMED = st.one_of(
    # tools the policy does not know, or that are not strings at all
    st.tuples(_weird_text.filter(lambda t: t not in {"read_document", "send_email"}), st.just({"path": "a"}), _c),
    st.tuples(st.one_of(st.integers(), st.none(), st.lists(st.text())), st.just({}), _c),
    st.tuples(_huge, st.just({}), _c),
    # arguments that are not a JSON object, too large, too deep, not Unicode, not finite
    st.tuples(_email, st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers())), _c),
    st.tuples(_email, _huge.map(lambda h: {"body": h}), _c),
    st.tuples(_email, st.integers(min_value=33, max_value=3000).map(lambda d: {"body": _nested(d)}), _c),
    st.tuples(_email, st.builds(lambda a, s: {"body": [{"x": a + s}]}, st.text(max_size=5), _surrogate), _c),
    st.tuples(_email, _non_finite.map(lambda v: {"body": "x", "amount": {"v": [v]}}), _c),
    # call ids that are not non-empty valid strings, or reuse "dup" for another call
    st.tuples(_read, st.just({"path": "a"}), _non_str_id),
    st.tuples(_read, st.just({"path": "a"}), _surrogate.map(lambda s: "c" + s)),
    st.tuples(_read, st.just({"path": "b"}), st.just("dup")),
    st.tuples(_email, st.just({"to": "a@b.io"}), st.just("dup")),
)


@settings(max_examples=300)
@given(proposal=MALFORMED)
def test_decide_never_raises_or_executes_on_malformed_input(
    small_policy: Policy, proposal: tuple[Any, Any, Any]
) -> None:
    """Malformed proposals are refused as such (never executed, never raised), audited, and leave the graph alone."""
    audit = MemoryAudit()
    s = Guard(small_policy, threshold=math.inf, audit=audit).session("s")
    assert s.decide("read_document", {"path": "a"}, "dup").allowed
    decision = s.decide(*proposal)
    assert decision.verdict is not Verdict.EXECUTE
    assert decision.reason in (Reason.UNKNOWN_TOOL, Reason.BAD_ARGUMENTS, Reason.CALL_REUSED)
    assert len(s.graph) == 1
    assert len(audit.entries) == 2
    assert audit.entries[1]["error"] is None


@pytest.mark.parametrize("threshold", ["0.5", True, None, [0.5], float("nan")])
def test_a_threshold_that_is_not_a_number_is_a_clear_policy_error(small_policy: Policy, threshold: Any) -> None:
    """Catches ``Guard(policy, threshold="0.5")`` raising a bare TypeError from ``math.isnan`` (or a bool read
    as 1.0): every non-number is a PolicyError that names what was given."""
    from guard.errors import PolicyError

    with pytest.raises(PolicyError, match="threshold"):
        Guard(small_policy, threshold=threshold)
