"""The user channel of the LangChain and LangGraph adapters: one table of injected-message paths, every entry point.

A ``HumanMessage`` is a user turn only when the guard saw the human's input arrive: from the
caller (``create_agent``'s run start without a checkpointer, ``start_run`` for a ``ToolNode``
graph without one) or the checkpointer's record of the thread's inputs
(docs/security.md#the-user-channel).  Each row of :data:`PATHS` puts the attack's words — the
injected recipient and the private IBAN, as if the user had asked for the send — into a
``HumanMessage`` that no human wrote; each is run against both adapters (``create_agent`` +
``GuardMiddleware``, a ``StateGraph`` with ``guard_tool_node``), every call style (``invoke``,
``ainvoke``, ``stream``, ``astream``, and a run resumed after each static breakpoint), with and
without a checkpointer, with a thread id and without one (the run's own session).  Every row
asserts that the injected text is observed as untrusted content, never a user turn, and that the
send is refused; the :data:`GENUINE` rows assert that the human's own words, from the caller's
input or from the checkpointer's record, still let the same send run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt import tools_condition
from langgraph.types import Command

from guard import Guard
from guard.adapters.langchain import GuardMiddleware, guard_tool_node, start_run
from guard.adapters.langchain_testing import ReactiveChatModel, Reply, tool_call
from guard.records import RecordKind, Trust
from guard.runtime import Session
from tests.adapters.test_user_channel import (
    INBOX_TEXT,
    NAMES_IT,
    OUTSIDE,
    RECORD_TEXT,
    SEND,
    TASK,
    mail_guard,
    send_verdicts,
)

ASK = "Send the Record"  # the words of NAMES_IT the scripted model acts on
SUMMARY = f"Summary of the conversation: {RECORD_TEXT}. The user asked: {NAMES_IT}"
GO_ON = "Go on."


# --------------------------------------------------------------------------- the scenario


@dataclass
class Plan:
    """What a row changes in the agent: the tool's Command, a failing model call, a node or middleware's message."""

    command: bool = False  # read_inbox returns Command(update={"messages": [ToolMessage, HumanMessage(NAMES_IT)]})
    fail_once: bool = False  # the first model call after a tool result raises
    before_model: Callable[[Sequence[BaseMessage]], list[Any] | None] | None = None
    failed: list[bool] = field(default_factory=list)


def respond(plan: Plan, messages: Sequence[BaseMessage]) -> Reply:
    """The scripted model: read the inbox and the record; send if a message asks for it; else answer."""
    if plan.fail_once and not plan.failed and any(isinstance(m, ToolMessage) for m in messages):
        plan.failed.append(True)
        raise RuntimeError("the model provider is down")
    texts = [str(m.content) for m in messages]
    if any(isinstance(m, ToolMessage) and m.name == "send_email" for m in messages):
        return "Done."
    if any(RECORD_TEXT in t for t in texts):
        return [tool_call("send_email", SEND, "c3")] if any(ASK in t for t in texts) else "Read both."
    # the inbox last: a HumanMessage its Command adds after its result ends the state (the input's place)
    return [tool_call("read_record", {"name": "Lena Novak"}, "c1"), tool_call("read_inbox", {}, "c2")]


def mail_tools(plan: Plan, sent: list[str]) -> list[Any]:
    @tool
    def read_record(name: str) -> str:
        """Read a customer record."""
        return RECORD_TEXT

    @tool
    def read_inbox(tool_call_id: Annotated[str, InjectedToolCallId]) -> Any:
        """Read the inbox."""
        if not plan.command:
            return INBOX_TEXT
        result = ToolMessage(content=INBOX_TEXT, tool_call_id=tool_call_id, name="read_inbox")
        return Command(update={"messages": [result, HumanMessage(content=NAMES_IT)]})

    @tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        sent.append(to)
        return f"sent to {to}"

    return [read_record, read_inbox, send_email]


def summarize(messages: Sequence[BaseMessage]) -> list[Any] | None:
    """Once tools ran: replace the whole history with one HumanMessage that summarises it (the model's words)."""
    if any(isinstance(m, ToolMessage) for m in messages) and not any(m.content == SUMMARY for m in messages):
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage(content=SUMMARY)]
    return None


def add_context(messages: Sequence[BaseMessage]) -> list[Any] | None:
    """Before the model's first turn: add a HumanMessage of retrieved context (a RAG node's, not the human's)."""
    if not any(isinstance(m, AIMessage) for m in messages) and not any(m.content == NAMES_IT for m in messages):
        return [HumanMessage(content=NAMES_IT)]
    return None


class BeforeModel(AgentMiddleware):  # type: ignore[misc,unused-ignore]
    """A middleware whose ``before_model`` returns ``hook(messages)`` as the state update."""

    def __init__(self, hook: Callable[[Sequence[BaseMessage]], list[Any] | None]) -> None:
        super().__init__()
        self.hook = hook

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        found = self.hook(state["messages"])
        return None if found is None else {"messages": found}


# --------------------------------------------------------------------------- the adapters


@dataclass
class Harness:
    """One adapter under test: its app (rebuilt for a new process), the guards and interceptors it made, what ran."""

    adapter: str
    saver: Any
    breakpoints: bool
    plan: Plan
    sent: list[str] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    wrappers: list[Any] = field(default_factory=list)
    node: Any = None
    app: Any = None

    def build(self) -> None:
        """A new guard and a new agent on the same checkpointer (a second build: another process resuming)."""
        guard = mail_guard()
        model = ReactiveChatModel(respond=lambda messages: respond(self.plan, messages))
        tools = mail_tools(self.plan, self.sent)
        stop = ["tools"] if self.breakpoints else None
        if self.adapter == "agent":
            middleware = GuardMiddleware(guard)
            extra = [] if self.plan.before_model is None else [BeforeModel(self.plan.before_model)]
            self.app = create_agent(
                model, tools, middleware=[*extra, middleware], checkpointer=self.saver, interrupt_before=stop
            )
            self.wrappers.append(middleware.wrapper)
        else:
            self.node = guard_tool_node(tools, guard)
            self.app = self.graph(model, self.node).compile(checkpointer=self.saver, interrupt_before=stop)
            self.wrappers.append(self.node.guard_wrapper)
        self.guards.append(guard)

    def graph(self, model: Any, node: Any) -> Any:
        hook = self.plan.before_model
        graph = StateGraph(MessagesState)
        graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
        graph.add_node("tools", node)
        graph.add_node("hook", lambda state: {"messages": (hook(state["messages"]) if hook else None) or []})
        graph.add_edge(START, "hook")
        graph.add_edge("hook", "model")
        graph.add_conditional_edges("model", tools_condition)
        graph.add_edge("tools", "hook")
        return graph

    def sessions(self) -> list[Session]:
        return [t.session for w in self.wrappers for t in w._trackers.values()]

    def verdicts(self) -> list[str]:
        return [v for g in self.guards for v in send_verdicts(g)]


@dataclass(frozen=True)
class Entry:
    """How the caller runs the app: the call, the checkpointer (and its durability), whether a thread id keys it."""

    call: str  # invoke | ainvoke | stream | astream | resumed (invoke, resumed after each breakpoint)
    saver: bool
    thread: bool = True
    durability: str | None = None  # "exit": the checkpointer stores nothing of a run until it ends

    @property
    def id(self) -> str:
        saved = f"checkpointer{'-' + self.durability if self.durability else ''}" if self.saver else "no_checkpointer"
        return f"{self.call}-{saved}{'' if self.thread else '-own'}"


ENTRIES = [
    *(Entry(call, saver) for call in ("invoke", "ainvoke", "stream", "astream") for saver in (False, True)),
    Entry("resumed", True),
    Entry("invoke", True, durability="exit"),
    Entry("astream", True, durability="exit"),
    Entry("invoke", False, thread=False),
    Entry("astream", False, thread=False),
]


class Caller:
    """Runs the harness's app the way the entry says; keeps the last state it saw (the caller's view)."""

    def __init__(self, harness: Harness, entry: Entry) -> None:
        self.harness, self.entry = harness, entry
        self.config: dict[str, Any] = {"configurable": {"thread_id": "t"}} if entry.thread else {}
        self.last: list[BaseMessage] = []

    def say(self, text: str, *, then: str | None = None) -> None:
        """A new human turn: the caller's input (without a checkpointer, the history it holds and the new turn).

        ``then``: the human's next turn, once this run is over.
        """
        said: list[Any] = [HumanMessage(content=text)] if self.entry.saver else [*self.last, HumanMessage(content=text)]
        if self.harness.adapter == "node" and not self.entry.saver:
            said = start_run(self.harness.node, self.config, said)
        self.run({"messages": said})
        if then is not None:
            self.say(then)

    def resume(self) -> None:
        """Continue the thread where it stopped (a failure or a breakpoint): no new input."""
        self.run(None)

    def run(self, given: Any) -> None:
        self.once(given)
        while self.entry.call == "resumed" and self.paused():
            self.once(None)

    def paused(self) -> bool:
        snapshot = self.harness.app.get_state(self.config)
        return bool(snapshot.next) and not any(task.interrupts for task in snapshot.tasks)

    def once(self, given: Any) -> None:
        app, config, call = self.harness.app, self.config, self.entry.call
        durability = {"durability": self.entry.durability} if self.entry.durability else {}
        if call in ("invoke", "resumed"):
            out = app.invoke(given, config, **durability)
        elif call == "ainvoke":
            out = asyncio.run(app.ainvoke(given, config))
        elif call == "stream":
            for out in app.stream(given, config, stream_mode="values"):
                self.keep(out)  # the caller's view so far, also when a later step fails
            return
        else:

            async def drain() -> None:
                async for out in app.astream(given, config, stream_mode="values", **durability):
                    self.keep(out)

            asyncio.run(drain())
            return
        self.keep(out)

    def keep(self, out: Any) -> None:
        if isinstance(out, dict) and "messages" in out:
            self.last = list(out["messages"])


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Path:
    """One way a HumanMessage no human wrote reaches the state (or, for GENUINE, the human's own words)."""

    name: str
    plan: Callable[[], Plan]
    drive: Callable[[Caller], None]
    applies: Callable[[Entry], bool] = lambda entry: True


def checkpointed(entry: Entry) -> bool:
    """Resuming a thread and ``update_state`` need a checkpointer."""
    return entry.saver


def fail_then(after: Callable[[Caller], None], said: str = TASK) -> Callable[[Caller], None]:
    """The human says ``said``; a model call fails after the tools ran; then ``after`` goes on."""

    def drive(caller: Caller) -> None:
        with pytest.raises(RuntimeError, match="provider is down"):
            caller.say(said)
        after(caller)

    return drive


def elsewhere(caller: Caller) -> None:
    """Another process resumes the thread: a new guard and agent, the same checkpointer."""
    caller.harness.build()
    caller.resume()


def update_state(caller: Caller) -> None:
    caller.say(TASK)
    caller.harness.app.update_state(caller.config, {"messages": [HumanMessage(content=NAMES_IT)]})
    caller.say(GO_ON)


FAILS = lambda: Plan(command=True, fail_once=True)  # noqa: E731 - a row's plan

PATHS = [
    Path("tool_command", lambda: Plan(command=True), lambda c: c.say(TASK)),
    Path("failed_model_then_resume", FAILS, fail_then(Caller.resume), checkpointed),
    Path(
        "failed_model_then_new_input",
        FAILS,
        fail_then(lambda c: c.say(GO_ON)),
        lambda entry: entry.saver or entry.call in ("stream", "astream"),  # without one: the streamed state resent
    ),
    Path("failed_model_then_resume_elsewhere", FAILS, fail_then(elsewhere), checkpointed),
    Path("update_state", Plan, update_state, checkpointed),
    Path("remove_all_and_summary", lambda: Plan(before_model=summarize), lambda c: c.say(TASK)),
    Path("node_adds_context", lambda: Plan(before_model=add_context), lambda c: c.say(TASK)),
]


def update_state_as_input(caller: Caller) -> None:
    """Application code adds the human's next turn with ``update_state`` as the graph's input, then resumes."""
    caller.say(TASK)
    caller.harness.app.update_state(caller.config, {"messages": [HumanMessage(content=NAMES_IT)]}, as_node="__input__")
    caller.resume()


GENUINE = [
    Path("human_input", Plan, lambda c: c.say(f"{TASK} {NAMES_IT}")),
    Path("human_next_turn", Plan, lambda c: c.say(TASK, then=NAMES_IT)),
    Path(
        "human_input_failed_model_then_resume_elsewhere",
        lambda: Plan(fail_once=True),
        fail_then(elsewhere, said=f"{TASK} {NAMES_IT}"),
        checkpointed,
    ),
    Path("human_turn_by_update_state_as_input", Plan, update_state_as_input, checkpointed),
]


def cases(paths: list[Path], *, stored_at_exit: bool = True) -> list[Any]:
    """Every row against both adapters and every entry it applies to (``stored_at_exit``: durability="exit" too)."""
    return [
        pytest.param(path, adapter, entry, id=f"{path.name}-{adapter}-{entry.id}")
        for path in paths
        for adapter in ("agent", "node")
        for entry in ENTRIES
        if path.applies(entry) and (stored_at_exit or entry.durability != "exit")
    ]


def played(path: Path, adapter: str, entry: Entry) -> Harness:
    harness = Harness(adapter, InMemorySaver() if entry.saver else None, entry.call == "resumed", path.plan())
    harness.build()
    path.drive(Caller(harness, entry))
    return harness


def untrusted_humans(harness: Harness) -> list[str]:
    return [
        r.text
        for s in harness.sessions()
        for r in s.graph.records.values()
        if r.kind is not RecordKind.USER
        and r.trust is Trust.TOOL_UNTRUSTED
        and str(r.tool).startswith("human_message:")
    ]


def user_turns(harness: Harness) -> list[str]:
    return [r.text for s in harness.sessions() for r in s.graph.records.values() if r.kind is RecordKind.USER]


@pytest.mark.parametrize(("path", "adapter", "entry"), cases(PATHS))
def test_an_injected_human_message_is_untrusted_content_and_the_send_is_refused(
    path: Path, adapter: str, entry: Entry
) -> None:
    """The attack's words arrive in a HumanMessage no human wrote; the send they ask for never runs.

    Planted bugs it catches (each fails rows of this table): ``before_agent`` trusting the trailing
    unseen human messages of a checkpointed state (a tool's Command before a failed model call,
    ``update_state``: the rows ``failed_model_then_new_input`` and ``update_state`` execute the
    send); a ``ToolNode`` without a checkpointer taking the human messages that lead what is new as
    the input (``remove_all_and_summary``, ``node_adds_context``); a run's start that takes more
    than what follows the checkpointer's latest state as its input (``update_state``); ``start_run``
    or ``before_agent`` without a checkpointer keeping what a tool's ``Command`` added
    (``failed_model_then_new_input`` streamed); observing any HumanMessage as a user turn (every row).
    """
    harness = played(path, adapter, entry)
    verdicts = harness.verdicts()
    assert harness.sent == [] and verdicts and "execute" not in verdicts, (harness.sent, verdicts)
    assert all(ASK not in turn for turn in user_turns(harness)), user_turns(harness)
    assert any(ASK in text for text in untrusted_humans(harness)), untrusted_humans(harness)


@pytest.mark.parametrize(("path", "adapter", "entry"), cases(GENUINE, stored_at_exit=False))
def test_the_humans_own_words_are_still_a_user_turn(path: Path, adapter: str, entry: Entry) -> None:
    """Control: the human names the recipient and the IBAN (in the run's input, a later turn, or a resumed thread).

    Planted bugs it catches: a ``before_agent`` or ``ToolNode`` that trusts no HumanMessage, one that
    does not read the checkpointer's record of inputs (``human_next_turn`` and the resumed row with a
    checkpointer), ``start_run`` not declaring the input (the node rows without a checkpointer): the
    send is refused.
    """
    harness = played(path, adapter, entry)
    assert harness.sent == [OUTSIDE] and harness.verdicts() == ["execute"], (harness.sent, harness.verdicts())
    assert any(ASK in turn for turn in user_turns(harness))


@pytest.mark.parametrize("call", ["invoke", "astream"])
@pytest.mark.parametrize("adapter", ["agent", "node"])
def test_with_durability_exit_only_a_runs_start_shows_its_input(adapter: str, call: str) -> None:
    """``durability="exit"`` stores nothing of a run until it ends, so the record of inputs never has it.

    ``create_agent`` still finds the human's input at the run's start — the state is exactly the
    checkpointer's latest state (none, on a new thread) followed by it — so the send the human
    named runs; a ``ToolNode`` sees no run start: its human turns are untrusted (fail closed).
    Planted bugs it catches: a run's start that does not match the state against the latest
    checkpoint (the agent row: the send is refused), and a ``ToolNode`` that takes the state as the
    input when the record has none (the node row: the send runs).
    """
    harness = Harness(adapter, InMemorySaver(), False, Plan())
    harness.build()
    Caller(harness, Entry(call, True, durability="exit")).say(f"{TASK} {NAMES_IT}")
    if adapter == "agent":
        assert harness.sent == [OUTSIDE] and harness.verdicts() == ["execute"]
        assert any(ASK in turn for turn in user_turns(harness))
    else:
        assert harness.sent == [] and harness.verdicts() == ["escalate"]
        assert user_turns(harness) == [] and any(ASK in text for text in untrusted_humans(harness))
