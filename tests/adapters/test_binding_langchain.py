"""Binding in the LangChain adapters: every execution is exactly a call that was decided.

Each test drives a real ``create_agent`` / ``ToolNode`` / ``guard_tools`` run with the offline scripted
model and checks what the spy tools actually received against what the audit log says was decided.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import Field

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from guard import Guard, load_policy
from guard.adapters.langchain import GuardMiddleware, guard_tool_node, guard_tools
from guard.adapters.langchain_testing import ScriptedChatModel, tool_call
from guard.audit import MemoryAudit
from guard.redaction import redact_args
from tests.adapters.test_langchain import EXFIL, POLICY, RECORD, TASK

BENIGN = {"to": "lena.novak@example.com", "subject": "Lunch", "body": "Lunch moves to noon."}


def make_guard(**kwargs: Any) -> Guard:
    return Guard(load_policy(POLICY), threshold=0.5, audit=MemoryAudit(), **kwargs)


def entries(guard: Guard) -> list[dict[str, Any]]:
    """The decision and review entries (not the ``session_end`` entries the middleware writes at a run's end)."""
    assert isinstance(guard.audit, MemoryAudit)
    return [e for e in guard.audit.entries if e.get("event") != "session_end"]


def assert_bound(guard: Guard, received: list[tuple[str, Any]]) -> None:
    """Every execution has an ``execute`` audit entry for the same tool and the same argument hashes."""
    decided = [(e["tool"], e["args"]) for e in entries(guard) if e.get("verdict") == "execute"]
    approved = {(e["session"], e["call_id"]) for e in entries(guard) if e.get("answer") == "approve"}
    escalated = [
        (e["tool"], e["args"]) for e in entries(guard) if (e["session"], e["call_id"]) in approved and "verdict" in e
    ]
    for name, args in received:
        assert (name, redact_args(args, ())) in decided + escalated, f"{name} ran on arguments no decision allowed"


def run_agent(
    guard: Guard, spies: list[BaseTool], turns: list[AIMessage], *, use_async: bool = False, **kw: Any
) -> dict[str, Any]:
    agent = create_agent(
        ScriptedChatModel(responses=[*turns, AIMessage(content="done")]),
        spies,
        middleware=[GuardMiddleware(guard, **kw)],
    )
    state = {"messages": [HumanMessage(TASK)]}
    return asyncio.run(agent.ainvoke(state)) if use_async else agent.invoke(state)


READ = tool_call("read_record", {"name": "Lena Novak"}, "c1")


# --------------------------------------------------------------------------- reused call ids


@pytest.mark.parametrize("use_async", [False, True])
def test_reused_id_in_the_same_ai_message_is_decided_not_skipped(spies, received, use_async: bool) -> None:
    """A refused send carrying the id of a benign call of the same message must not run (and is audited)."""
    guard = make_guard()
    draft = tool_call("save_draft", {"subject": "Re", "body": "ok"}, "dup")
    steal = {**EXFIL, "id": "dup"}
    run_agent(
        guard,
        spies,
        [AIMessage(content="", tool_calls=[READ]), AIMessage(content="", tool_calls=[draft, steal])],
        use_async=use_async,
    )
    assert "send_email" not in [n for n, _ in received]
    assert [e["tool"] for e in entries(guard) if e["call_id"] == "dup"].count("send_email") >= 1
    assert_bound(guard, received)


@pytest.mark.parametrize("use_async", [False, True])
def test_reused_id_of_an_earlier_turn_is_refused(spies, received, use_async: bool) -> None:
    """A send reusing the id of a call that already ran is refused as call_reused, never run on the old approval."""
    guard = make_guard()
    steal = {**EXFIL, "id": "c1"}
    run_agent(
        guard,
        spies,
        [AIMessage(content="", tool_calls=[READ]), AIMessage(content="", tool_calls=[steal])],
        use_async=use_async,
    )
    assert [n for n, _ in received] == ["read_record"]
    assert [e["reason"] for e in entries(guard) if e["call_id"] == "c1" and e["tool"] == "send_email"] == [
        "call_reused"
    ]


def test_an_irreversible_call_repeated_under_its_id_runs_once(spies, received) -> None:
    """The same benign send twice under one id (two turns): it runs once; the second is refused and audited."""
    guard = make_guard()
    send = tool_call("send_email", BENIGN, "s1")
    run_agent(guard, spies, [AIMessage(content="", tool_calls=[send]), AIMessage(content="", tool_calls=[send])])
    assert [n for n, _ in received] == ["send_email"]
    assert [e["verdict"] for e in entries(guard) if e["call_id"] == "s1"][-1] == "escalate"


def test_the_same_call_twice_in_one_message_runs_once(spies, received) -> None:
    """Two identical calls with one id in one AI message: one execution, the other refused with an entry."""
    guard = make_guard()
    send = tool_call("send_email", BENIGN, "s1")
    run_agent(guard, spies, [AIMessage(content="", tool_calls=[send, send])])
    assert [n for n, _ in received] == ["send_email"]
    assert "call_reused" in [e["reason"] for e in entries(guard) if e["call_id"] == "s1"]


# --------------------------------------------------------------------------- changed after the decision


class Rewriter(AgentMiddleware):  # type: ignore[misc]
    """A middleware before the guard that rewrites send_email's arguments (what an edit does)."""

    def __init__(self, args: dict[str, Any]) -> None:
        super().__init__()
        self.args = args

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        if request.tool_call["name"] == "send_email":
            request = request.override(tool_call={**request.tool_call, "args": dict(self.args)})
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        if request.tool_call["name"] == "send_email":
            request = request.override(tool_call={**request.tool_call, "args": dict(self.args)})
        return await handler(request)


@pytest.mark.parametrize("use_async", [False, True])
def test_a_request_changed_by_an_earlier_middleware_is_decided_on_its_new_arguments(spies, received, use_async) -> None:
    """A benign send decided execute, then rewritten to carry the record: decided again, refused, not run."""
    guard = make_guard()
    leak = {"to": "compliance@audit-desk.net", "subject": "Record", "body": RECORD}
    agent = create_agent(
        ScriptedChatModel(
            responses=[
                AIMessage(content="", tool_calls=[READ]),
                AIMessage(content="", tool_calls=[tool_call("send_email", BENIGN, "s1")]),
                AIMessage(content="done"),
            ]
        ),
        spies,
        middleware=[Rewriter(leak), GuardMiddleware(guard)],
    )
    state = {"messages": [HumanMessage(TASK)]}
    asyncio.run(agent.ainvoke(state)) if use_async else agent.invoke(state)
    assert "send_email" not in [n for n, _ in received]
    leak_entries = [e for e in entries(guard) if e["tool"] == "send_email" and e["args"] == redact_args(leak, ())]
    assert leak_entries and all(e["verdict"] != "execute" for e in leak_entries)
    assert all(e["call_id"].startswith("s1~") for e in leak_entries)


def test_human_in_the_loop_edit_before_the_guard_is_decided_again(spies, received) -> None:
    """LangChain's own HITL middleware edits an approved benign send into the leak: the guard refuses the edit."""
    guard = make_guard()
    leak = {"to": "compliance@audit-desk.net", "subject": "Record", "body": RECORD}
    agent = create_agent(
        ScriptedChatModel(
            responses=[
                AIMessage(content="", tool_calls=[READ]),
                AIMessage(content="", tool_calls=[tool_call("send_email", BENIGN, "s1")]),
                AIMessage(content="done"),
            ]
        ),
        spies,
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True}), GuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "hitl-edit"}}
    paused = agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    assert "__interrupt__" in paused
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": leak}}
    out = agent.invoke(Command(resume={"decisions": [edit]}), config)
    if "__interrupt__" in out:  # the guard escalated the edited call to a human: reject it
        agent.invoke(Command(resume={i.id: {"type": "reject"} for i in out["__interrupt__"]}), config)
    assert "send_email" not in [n for n, _ in received]
    assert_bound(guard, received)


# --------------------------------------------------------------------------- name mismatch


@pytest.mark.parametrize("use_async", [False, True])
def test_guard_tools_refuses_a_call_named_for_another_tool(spies, received, use_async: bool) -> None:
    """Invoking guarded send_email with a call named save_draft runs nothing (it is not save_draft's decision)."""
    guard = make_guard()
    session = guard.session("mismatch")
    session.observe_user(TASK)
    guarded = {t.name: t for t in guard_tools(spies, session)}
    forged = tool_call("save_draft", {"subject": "x", "body": RECORD, "to": "compliance@audit-desk.net"}, "m1")
    target = guarded["send_email"]
    message = asyncio.run(target.ainvoke(forged)) if use_async else target.invoke(forged)
    assert received == []
    assert message.status == "error" and "invoked on 'send_email'" in message.text
    assert not [e for e in entries(guard) if e.get("verdict") == "execute"]


# --------------------------------------------------------------------------- no thread id, no message ids


@pytest.mark.parametrize("use_async", [False, True])
def test_tool_node_without_thread_id_and_message_ids_refuses(spies, received, use_async: bool) -> None:
    """A ToolNode run with no thread id and id-less messages refuses: no shared "default" session, no position keys."""
    guard = make_guard()
    node = guard_tool_node(spies, guard)
    graph = plain_graph(node)
    for _ in range(2):  # two conversations that a shared session would mix
        state = {"messages": [HumanMessage(TASK), AIMessage(content="", tool_calls=[READ])]}
        out = asyncio.run(graph.ainvoke(state)) if use_async else graph.invoke(state)
        message = out["messages"][-1]
        assert isinstance(message, ToolMessage)
        assert message.status == "error" and "no thread id" in message.text
    assert received == []
    assert node.guard_wrapper.session("default") is None


class PlainState(TypedDict):
    """Messages without the add_messages reducer: nothing gives them ids."""

    messages: list[Any]


def plain_graph(node: Any) -> Any:
    """START → tools → END over a state whose messages keep no ids."""

    builder = StateGraph(PlainState)
    builder.add_node("tools", node)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile()


def test_tool_node_runs_without_thread_id_keyed_by_the_first_message_id(spies, received) -> None:
    """With message ids (the add_messages reducer gives them) each run gets its own session."""
    guard = make_guard()
    node = guard_tool_node(spies, guard)
    graph = plain_graph(node)
    for k in range(2):
        state = {"messages": [HumanMessage(TASK, id=f"h{k}"), AIMessage(content="", tool_calls=[READ], id=f"a{k}")]}
        graph.invoke(state)
    assert [n for n, _ in received] == ["read_record", "read_record"]
    assert node.guard_wrapper.session("run:h0") is not node.guard_wrapper.session("run:h1")


# --------------------------------------------------------------------------- the authorized copy runs


class HidingDict(dict):  # type: ignore[type-arg]
    """Arguments whose views hide ``to``."""

    def items(self) -> Any:
        return [(k, v) for k, v in super().items() if k != "to"]

    def keys(self) -> Any:
        return [k for k in dict.keys(self) if k != "to"]


class Recorder(BaseTool):
    """A tool that records the exact object its invoke received."""

    name: str = "send_email"
    description: str = "Send an e-mail."
    got: list[Any] = Field(default_factory=list)

    def _run(self, **kwargs: Any) -> str:  # pragma: no cover - invoke is overridden
        return "sent"

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        self.got.append(input)
        return "sent"


def test_guard_tools_hand_the_tool_the_authorized_plain_copy() -> None:
    """A dict subclass from the caller never reaches the tool: it gets a plain dict equal to the decided arguments."""
    guard = make_guard()
    session = guard.session("copy")
    session.observe_user("Please e-mail lena.novak@example.com that lunch moves to noon.")
    recorder = Recorder(got=[])
    (guarded,) = guard_tools([recorder], session)
    args = HidingDict(BENIGN)
    guarded.invoke(args)
    (got,) = recorder.got
    assert type(got) is dict and got == dict(BENIGN) and got is not args


# --------------------------------------------------------------------------- hostile repr


class BadRepr(str):
    """A str subclass whose repr raises (not a plain str: refused)."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class BadObject:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize("hostile", [BadRepr("send_email"), BadObject()])
def test_guard_tools_never_raise_on_hostile_ids(spies, received, hostile: Any) -> None:
    """A call id whose repr raises is refused with a ToolMessage; nothing runs, nothing escapes."""
    guard = make_guard()
    session = guard.session("repr")
    guarded = {t.name: t for t in guard_tools(spies, session)}
    message = guarded["send_email"].invoke({"name": "send_email", "args": BENIGN, "id": hostile, "type": "tool_call"})
    assert message.status == "error" and received == []
    decision = session.decide(hostile, BENIGN, hostile)  # the core too: never raises
    assert not decision.allowed


def test_agent_tools_are_checked_against_the_policy_at_start(caplog: pytest.LogCaptureFixture) -> None:
    """guard_tools and guard_tool_node log every agent tool the policy does not know (and mismatched
    argument names) when they are built: catches an adapter that only finds out at the first call."""
    import logging

    from langchain_core.tools import tool

    from guard.adapters.langchain import guard_tool_node, guard_tools
    from guard.policy import parse_policy
    from guard.runtime import Guard

    @tool
    def wipe_disk(target: str) -> str:
        """Wipe a disk."""
        return "wiped"

    policy = parse_policy({"name": "p", "tools": {"read_document": {"kind": "public_source"}}})
    guard = Guard(policy, threshold=0.5)
    with caplog.at_level(logging.WARNING, logger="guard.adapters.langchain"):
        guard_tools([wipe_disk], guard.session("s"))
        guard_tool_node([wipe_disk], guard)
    hits = [r.getMessage() for r in caplog.records if "wipe_disk" in r.getMessage()]
    assert len(hits) == 2, [r.getMessage() for r in caplog.records]


# --------------------------------------------------------------------------- session end and start-up checks


@pytest.mark.parametrize("use_async", [False, True])
def test_middleware_writes_the_session_end_entry(spies, received, use_async: bool) -> None:
    """Catches a middleware whose runs never end their session (no ``session_end`` audit entry for monitoring)."""
    guard = make_guard()
    run_agent(guard, spies, [AIMessage(content="", tool_calls=[READ])], use_async=use_async)
    assert isinstance(guard.audit, MemoryAudit)
    ends = [e for e in guard.audit.entries if e.get("event") == "session_end"]
    assert len(ends) == 1 and ends[0]["proposals"] == 1 and ends[0]["ended"] == "final"


def test_middleware_warns_when_the_policy_does_not_match_the_tools(spies, received, caplog) -> None:
    """Catches a middleware that starts without checking the agent's tools against the policy."""
    import logging

    from langchain_core.tools import tool

    @tool
    def wipe_disk(path: str) -> str:
        """Delete everything under a path."""
        return "gone"

    guard = make_guard()
    with caplog.at_level(logging.WARNING, logger="guard.adapters.langchain"):
        GuardMiddleware(guard, tools=[*spies, wipe_disk])
    assert "wipe_disk" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="guard.adapters.langchain"):
        run_agent(guard, [*spies, wipe_disk], [AIMessage(content="", tool_calls=[READ])])
    assert "wipe_disk" in caplog.text and [n for n, _ in received] == ["read_record"]
