"""The one flow (guard/adapters/flow.py): its exception policy, and sync and async drivers that agree."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from guard import Guard, Reason, Verdict
from guard.adapters.flow import Call, Ran, Refused, Tools, adrive, drive, guarded_call
from guard.audit import MemoryAudit
from tests.adapters.test_one_flow import EDITED, OUTSIDE, make_guard


def _tools(*, payload_error: bool = False) -> Tools:
    def payload(call: Call, args: dict[str, Any]) -> Any:
        if payload_error and call.tool == "send_email":
            raise KeyError("planted adapter fault")
        return call.tool, args

    return Tools(payload, lambda out: (str(out), "ok"), lambda problem: None)


def _run(guard: Guard, call: Call, tools: Tools, use_async: bool) -> tuple[Any, list[Any]]:
    session = guard.session("flow")
    session.observe_user("Mail bob.")
    ran: list[Any] = []

    def run(payload: Any) -> Any:
        ran.append(payload)
        return "ok"

    async def arun(payload: Any) -> Any:
        return run(payload)

    flow = guarded_call(session, call, tools)
    outcome = asyncio.run(adrive(flow, session, arun)) if use_async else drive(flow, session, run)
    return outcome, ran


@pytest.mark.parametrize("use_async", [False, True])
def test_probe_then_run_the_authorized_copy(use_async: bool) -> None:
    """Catches a driver that skips the probe or runs the call with the agent's object instead of the copy."""
    outcome, ran = _run(make_guard(), Call("send_email", dict(EDITED), "c1"), _tools(), use_async)
    assert isinstance(outcome, Ran)
    assert ran == [("read_record", {"name": "bob"}), ("send_email", EDITED)]


@pytest.mark.parametrize("use_async", [False, True])
def test_a_refusal_never_runs(use_async: bool) -> None:
    """Catches a flow that runs a call the gate refused."""
    outcome, ran = _run(make_guard(), Call("send_email", dict(OUTSIDE), "c1"), _tools(), use_async)
    assert isinstance(outcome, Refused) and outcome.decision.verdict is Verdict.ESCALATE and ran == []


@pytest.mark.parametrize("use_async", [False, True])
def test_an_error_before_authorize_returns_is_an_audited_refusal(use_async: bool) -> None:
    """Catches an adapter error before the call is bound that escapes, or lets the call run, or goes unaudited."""
    guard = make_guard()
    outcome, ran = _run(guard, Call("send_email", dict(EDITED), "c1"), _tools(payload_error=True), use_async)
    assert isinstance(outcome, Refused) and outcome.decision.reason is Reason.INTERNAL_ERROR
    assert [p[0] for p in ran] == ["read_record"]  # the probe ran; the call did not
    assert isinstance(guard.audit, MemoryAudit)
    last = guard.audit.entries[-1]
    assert (last["tool"], last["reason"]) == ("send_email", "internal_error") and "KeyError" in last["error"]


@pytest.mark.parametrize("use_async", [False, True])
def test_a_failing_probe_is_observed_as_an_error(use_async: bool) -> None:
    """Catches a probe whose tool raised escaping the flow, or being observed as a successful result."""
    guard = make_guard()
    session = guard.session("flow")
    session.observe_user("Mail bob.")
    ran: list[Any] = []

    def run(payload: Any) -> Any:
        if payload[0] == "read_record":
            raise OSError("planted probe fault")
        ran.append(payload)
        return "ok"

    async def arun(payload: Any) -> Any:
        return run(payload)

    flow = guarded_call(session, Call("send_email", dict(EDITED), "c1"), _tools())
    asyncio.run(adrive(flow, session, arun)) if use_async else drive(flow, session, run)
    (probe,) = [r for r in session.graph.records.values() if r.call_id == "probe-1" and r.kind.value == "result"]
    assert probe.status == "error" and "planted probe fault" in probe.text


@pytest.mark.parametrize("use_async", [False, True])
def test_a_failing_tool_is_observed_and_re_raised(use_async: bool) -> None:
    """Catches a flow that swallows the agent's tool error or leaves its call without a result."""
    guard = make_guard()
    session = guard.session("flow")
    session.observe_user("Read my inbox.")

    def run(payload: Any) -> Any:
        raise OSError("planted tool fault")

    async def arun(payload: Any) -> Any:
        run(payload)

    flow = guarded_call(session, Call("read_inbox", {}, "c1"), _tools())
    with pytest.raises(OSError, match="planted"):
        asyncio.run(adrive(flow, session, arun)) if use_async else drive(flow, session, run)
    assert session.call_state("c1").value == "answered"
