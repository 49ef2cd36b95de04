"""Every adapter ends its sessions with a ``session_end`` audit entry on every way out: normal, error, interrupt
(docs/audit.md; without the entry the monitor and review never see the session, docs/monitoring.md).  LangChain's
``GuardMiddleware`` and ``guard_tool_node``, the AgentDojo element; the custom loop (``with guard.session(...)``)
is in tests/core/test_session_segments.py and the MCP proxy in tests/adapters/test_mcp_session_end.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langgraph")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition

from guard import Guard, load_policy
from guard.adapters.langchain import GuardMiddleware, guard_tool_node
from guard.adapters.langchain_testing import ScriptedChatModel, tool_call
from guard.audit import MemoryAudit

ROOT = Path(__file__).resolve().parents[2]
MAIL = ROOT / "policies" / "examples" / "mail_agent.yaml"
RECORD = "Customer: Lena Novak, IBAN DE44500105175407324931"


ARGS: dict[str, dict[str, Any]] = {"read_inbox": {}, "lookup_contact": {"name": "Bob"}}


class BoomError(Exception):
    """What the failing model or tool raises."""


@tool
def read_record(name: str) -> str:
    """Read a customer record."""
    return RECORD


@tool
def read_inbox() -> str:
    """Read the inbox (fails, or is interrupted, in these tests)."""
    raise BoomError("inbox down")


@tool
def lookup_contact(name: str) -> str:
    """Look a contact up (interrupted in these tests)."""
    raise KeyboardInterrupt


class FailingModel(ScriptedChatModel):
    """Answers the first turn from the script, then raises."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if any(isinstance(m, AIMessage) for m in messages):
            raise BoomError("model down")
        return super()._generate(messages, stop, run_manager, **kw)


def _guard() -> Guard:
    return Guard(load_policy(MAIL), threshold=0.5, audit=MemoryAudit())


def _ends(guard: Guard) -> list[tuple[str, int]]:
    assert isinstance(guard.audit, MemoryAudit)
    return [(e["session"], e["proposals"]) for e in guard.audit.entries if e.get("event") == "session_end"]


def _turns(name: str, args: dict[str, Any]) -> list[BaseMessage]:
    return [AIMessage(content="", tool_calls=[tool_call(name, args, "c1")]), AIMessage(content="Done.")]


def _agent(guard: Guard, model: Any) -> Any:
    return create_agent(model, [read_record, read_inbox, lookup_contact], middleware=[GuardMiddleware(guard)])


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def test_middleware_normal_run_writes_session_end() -> None:
    """Control: a run that ends normally is closed by ``after_agent``."""
    guard = _guard()
    model = ScriptedChatModel(responses=_turns("read_record", {"name": "Lena Novak"}))
    _agent(guard, model).invoke({"messages": [("user", "Read Lena's record.")]}, _config("normal"))
    assert _ends(guard) == [("normal", 1)]


def test_middleware_model_error_writes_session_end() -> None:
    """The model raises after a decided call: ``after_agent`` never runs.  Catches the session left open (planted:
    ``GuardMiddleware.wrap_model_call`` does not close -> no session_end)."""
    guard = _guard()
    model = FailingModel(responses=_turns("read_record", {"name": "Lena Novak"}))
    with pytest.raises(BoomError):
        _agent(guard, model).invoke({"messages": [("user", "Read Lena's record.")]}, _config("model-error"))
    assert _ends(guard) == [("model-error", 1)]


@pytest.mark.parametrize(("name", "error"), [("read_inbox", BoomError), ("lookup_contact", KeyboardInterrupt)])
def test_middleware_tool_error_or_interrupt_writes_session_end(name: str, error: type[BaseException]) -> None:
    """A tool raises (an error the agent does not handle, or KeyboardInterrupt) mid-run.  Catches the session left
    open (planted: ``closed_on_error`` removed from ``GuardToolWrapper.wrap_tool_call`` -> no session_end)."""
    guard = _guard()
    model = ScriptedChatModel(responses=_turns(name, ARGS[name]))
    agent: Any = create_agent(model, [read_record, read_inbox, lookup_contact], middleware=[GuardMiddleware(guard)])
    with pytest.raises(error):
        agent.invoke({"messages": [("user", "Check my mail.")]}, _config(f"tool-{name}"))
    assert _ends(guard) == [(f"tool-{name}", 1)]


def _graph(guard: Guard, model: Any, **options: Any) -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    node = guard_tool_node([read_record, read_inbox, lookup_contact], guard, handle_tool_errors=False, **options)
    graph.add_node("tools", node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


@pytest.mark.parametrize(("name", "error"), [("read_inbox", BoomError), ("lookup_contact", KeyboardInterrupt)])
def test_tool_node_error_or_interrupt_writes_session_end(name: str, error: type[BaseException]) -> None:
    """``guard_tool_node``: a tool that raises (error, KeyboardInterrupt) ends the run and its session.  Catches the
    session left open (planted: ``closed_on_error`` removed from ``GuardToolWrapper.wrap_tool_call``)."""
    guard = _guard()
    graph = _graph(guard, ScriptedChatModel(responses=_turns(name, ARGS[name])))
    with pytest.raises(error):
        graph.invoke({"messages": [("user", "Check my mail.")]}, _config(f"node-{name}"))
    assert _ends(guard) == [(f"node-{name}", 1)]


def test_tool_node_session_dropped_from_memory_or_closed_writes_session_end() -> None:
    """A ``ToolNode`` does not see a run's end; a session dropped from memory (``max_sessions``) is closed then, and
    ``node.guard_wrapper.close()`` closes the live ones.  Catches a dropped session never closed (planted: the
    eviction in ``GuardToolWrapper._tracker`` does not close) or ``close`` a no-op."""
    guard = _guard()
    model = ScriptedChatModel(responses=_turns("read_record", {"name": "Lena Novak"}))
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    node = guard_tool_node([read_record], guard, max_sessions=1)
    graph.add_node("tools", node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    compiled: Any = graph.compile()
    for thread in ("first", "second"):
        compiled.invoke({"messages": [("user", "Read Lena's record.")]}, _config(thread))
    assert _ends(guard) == [("first", 1)]
    node.guard_wrapper.close()
    node.guard_wrapper.close("second")
    assert _ends(guard) == [("first", 1), ("second", 1)]


def test_agentdojo_element_ends_every_run() -> None:
    """The AgentDojo element: a run aborted by a refusal is closed at once; a run that goes on is closed when the
    next run starts or by ``element.close()`` (the element never sees a final answer).  Catches runs left open
    (planted: ``closed_on_error`` removed from ``GuardElement.query``, or ``close`` a no-op)."""
    pytest.importorskip("agentdojo")
    from agentdojo.agent_pipeline.errors import AbortAgentError
    from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime

    from guard.adapters.agentdojo import GuardElement
    from guard.corpora.agentdojo import load_suite_policy

    guard = Guard(load_suite_policy("banking"), threshold=0.5, audit=MemoryAudit())
    element = GuardElement(guard, "abort", session_id="run")

    def turn(task: str, call: str) -> list[Any]:
        return [
            {"role": "system", "content": [{"type": "text", "content": "sys"}]},
            {"role": "user", "content": [{"type": "text", "content": task}]},
            {"role": "assistant", "content": None, "tool_calls": [FunctionCall(function=call, args={}, id="x1")]},
        ]

    with pytest.raises(AbortAgentError):  # an unknown tool: refused, the agent aborted
        element.query("Pay my bill.", FunctionsRuntime([]), messages=turn("Pay my bill.", "wipe_account"))
    assert _ends(guard) == [("run", 1)]
    element.query("Balance?", FunctionsRuntime([]), messages=turn("Balance?", "get_balance"))
    element.query("IBAN?", FunctionsRuntime([]), messages=turn("IBAN?", "get_iban"))  # a new run: run#2 ends
    assert _ends(guard) == [("run", 1), ("run#2", 1)]
    element.close()
    element.close()
    assert _ends(guard) == [("run", 1), ("run#2", 1), ("run#3", 1)]
