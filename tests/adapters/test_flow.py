"""The one flow (guard/adapters/flow.py) through its entry points, sync and async: what runs, what never does.

Each test names the bug planted in ``adapters/flow.py`` that it caught (planted, run, reverted).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from guard import Guard, Mode, Reason, Verdict, load_policy
from guard.adapters.flow import Call, Outcome, Ran, Refused, Tools, agate, aguarded, guarded
from guard.audit import MemoryAudit
from guard.decision import Decision
from guard.runtime import Session
from tests.adapters.test_one_flow import EDITED, OUTSIDE, POLICY, ProbeThenCertify, ScriptedScorer, make_guard

Payload = tuple[str, dict[str, Any]]
BOTH = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])


def _tools(*, payload_error: bool = False) -> Tools[Payload, str]:
    def payload(call: Call, args: dict[str, Any]) -> Payload:
        if payload_error and call.tool == "send_email":
            raise KeyError("planted adapter fault")
        return call.tool, args

    return Tools(payload, lambda out: (out, "ok"), lambda problem: None)


def _session(guard: Guard, task: str = "Mail bob.") -> Session:
    session = guard.session("flow")
    session.observe_user(task)
    return session


def _call(
    session: Session,
    call: Call,
    tools: Tools[Payload, str],
    use_async: bool,
    *,
    fail: str | None = None,
    decision: Decision | None = None,
    cleared: bool = False,
) -> tuple[Outcome[str], list[Payload]]:
    """``call`` through ``guarded`` or ``aguarded``; the payloads that ran (``fail``: that tool raises)."""
    ran: list[Payload] = []

    def run(payload: Payload) -> str:
        if payload[0] == fail:
            raise OSError(f"planted {fail} fault")
        ran.append(payload)
        return f"{payload[0]} done"

    async def arun(payload: Payload) -> str:
        return run(payload)

    if use_async:
        flow = aguarded(session, call, tools, arun, decision=decision, cleared=cleared)
        return asyncio.run(flow), ran
    return guarded(session, call, tools, run, decision=decision, cleared=cleared), ran


def _result(session: Session, call_id: str) -> Any:
    (record,) = [r for r in session.graph.records.values() if r.call_id == call_id and r.kind.value == "result"]
    return record


@BOTH
def test_an_allowed_call_runs_once_and_is_observed(use_async: bool) -> None:
    """Planted: the driver answers a run action by running the payload twice (a retry) -> two runs."""
    session = _session(make_guard(), "Read my inbox.")
    outcome, ran = _call(session, Call("read_inbox", {}, "c1"), _tools(), use_async)
    assert isinstance(outcome, Ran) and outcome.output == "read_inbox done"
    assert outcome.decision is not None and outcome.decision.verdict is Verdict.EXECUTE
    assert ran == [("read_inbox", {})]
    assert _result(session, "c1").text == "read_inbox done"


@BOTH
def test_a_refused_call_never_runs(use_async: bool) -> None:
    """Planted: the run rule is ``decision.allowed or True`` (a refusal runs anyway)."""
    session = _session(make_guard())
    outcome, ran = _call(session, Call("send_email", dict(OUTSIDE), "c1"), _tools(), use_async)
    assert isinstance(outcome, Refused) and outcome.decision.verdict is Verdict.ESCALATE and ran == []
    assert outcome.gate is None  # the decision itself refused it


@BOTH
def test_shadow_runs_a_refused_call_and_records_the_refusal(use_async: bool) -> None:
    """Planted: the run rule without its shadow half (``decision.allowed`` only) -> shadow blocks the call."""
    audit = MemoryAudit()
    guard = Guard(
        load_policy(POLICY),
        threshold=0.5,
        audit=audit,
        scorer=ScriptedScorer(),
        certifier=ProbeThenCertify(),
        mode=Mode.SHADOW,
    )
    session = _session(guard)
    outcome, ran = _call(session, Call("send_email", dict(OUTSIDE), "c1"), _tools(), use_async)
    assert isinstance(outcome, Ran) and ran == [("send_email", OUTSIDE)]
    assert outcome.decision is not None and outcome.decision.verdict is Verdict.ESCALATE
    rows = [e for e in audit.entries if e.get("tool") == "send_email" and e.get("event") is None]
    assert [(e["verdict"], e["reason"]) for e in rows] == [("escalate", "risk_budget")]


@BOTH
def test_a_guard_error_while_deciding_never_runs_the_tool(use_async: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: ``_decided`` without its ``except`` (a decide error escapes instead of being an audited refusal)."""
    guard = make_guard()
    session = _session(guard)

    def broken(tool: str, args: Any, call_id: str) -> Decision:
        raise RuntimeError("planted guard fault")

    async def abroken(tool: str, args: Any, call_id: str) -> Decision:
        return broken(tool, args, call_id)

    monkeypatch.setattr(session, "decide", broken)
    monkeypatch.setattr(session, "adecide", abroken)
    outcome, ran = _call(session, Call("read_inbox", {}, "c1"), _tools(), use_async)
    assert isinstance(outcome, Refused) and outcome.decision.reason is Reason.INTERNAL_ERROR and ran == []
    assert isinstance(guard.audit, MemoryAudit) and "planted guard fault" in guard.audit.entries[-1]["error"]


@BOTH
def test_an_error_before_authorize_returns_is_an_audited_refusal(use_async: bool) -> None:
    """Planted: ``_authorized`` returns the agent's arguments as the payload when building it raises."""
    guard = make_guard()
    session = _session(guard)
    outcome, ran = _call(session, Call("send_email", dict(EDITED), "c1"), _tools(payload_error=True), use_async)
    assert isinstance(outcome, Refused) and outcome.decision.reason is Reason.INTERNAL_ERROR
    assert outcome.gate is not None and outcome.gate.reason is Reason.CERTIFIED  # let through, then not bound
    assert [p[0] for p in ran] == ["read_record"]  # the probe ran; the call did not
    assert isinstance(guard.audit, MemoryAudit)
    last = guard.audit.entries[-1]
    assert (last["tool"], last["reason"]) == ("send_email", "internal_error") and "KeyError" in last["error"]


@BOTH
def test_probes_run_then_the_final_decision_is_taken(use_async: bool) -> None:
    """Planted: ``_settle`` returns the ``probe`` decision without deciding again -> the certified call is refused."""
    session = _session(make_guard())
    outcome, ran = _call(session, Call("send_email", dict(EDITED), "c1"), _tools(), use_async)
    assert ran == [("read_record", {"name": "bob"}), ("send_email", EDITED)]
    assert isinstance(outcome, Ran) and outcome.decision is not None
    assert outcome.decision.reason is Reason.CERTIFIED
    assert _result(session, "probe-1").text == "read_record done"  # observed before the final decision


@BOTH
def test_a_failing_probe_is_observed_as_an_error(use_async: bool) -> None:
    """Planted: ``_execute`` re-raises a probe's error too -> the call is refused as a guard error, not re-decided."""
    session = _session(make_guard())
    outcome, _ = _call(session, Call("send_email", dict(EDITED), "c1"), _tools(), use_async, fail="read_record")
    probe = _result(session, "probe-1")
    assert probe.status == "error" and "planted read_record fault" in probe.text
    assert outcome.decision is not None and outcome.decision.reason is not Reason.INTERNAL_ERROR  # decided again


@BOTH
def test_a_failing_tool_is_observed_and_re_raised(use_async: bool) -> None:
    """Planted: ``_execute`` returns ``Refused`` for the agent's own failing call -> the tool error is swallowed."""
    session = _session(make_guard(), "Read my inbox.")
    with pytest.raises(OSError, match="planted"):
        _call(session, Call("read_inbox", {}, "c1"), _tools(), use_async, fail="read_inbox")
    assert session.call_state("c1").value == "answered"


@BOTH
def test_a_cleared_call_goes_to_authorize_alone(use_async: bool) -> None:
    """Planted: ``cleared=True`` still applies the run rule -> an escalation a human approved never runs."""
    session = _session(make_guard())
    decision = session.decide("send_email", dict(OUTSIDE), "c1")
    assert decision.verdict is Verdict.ESCALATE
    outcome, ran = _call(session, Call("send_email", dict(OUTSIDE), "c1"), _tools(), use_async, cleared=True)
    assert isinstance(outcome, Refused) and ran == []  # not approved: authorize refuses it
    session.review("c1", "approve", reviewer="alice")
    outcome, ran = _call(
        session, Call("send_email", dict(OUTSIDE), "c1"), _tools(), use_async, decision=decision, cleared=True
    )
    assert isinstance(outcome, Ran) and ran == [("send_email", OUTSIDE)]


def test_the_gate_half_decides_probes_and_applies_the_rule() -> None:
    """Planted: ``agate`` returns the decision without the run rule -> a refused call is let through the gate."""
    session = _session(make_guard())
    ran: list[Payload] = []

    async def run(payload: Payload) -> str:
        ran.append(payload)
        return "done"

    refused = asyncio.run(agate(session, Call("send_email", dict(OUTSIDE), "c1"), _tools(), run))
    assert isinstance(refused, Refused) and refused.decision.verdict is Verdict.ESCALATE
    cleared = asyncio.run(agate(session, Call("send_email", dict(EDITED), "c2"), _tools(), run))
    assert isinstance(cleared, Decision) and cleared.reason is Reason.CERTIFIED
    assert ran == [("read_record", {"name": "bob"})]  # the probe ran; the call waits for its invoke
