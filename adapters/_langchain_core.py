"""The I/O-free core of the LangChain adapter: one generator for sync and async, sessions fed from messages.

See :mod:`guard.adapters.langchain`.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from guard.adapters._langchain_binding import edited_call_id
from guard.adapters._langchain_content import attachments, content_text, marker, render_block
from guard.adapters._lifecycle import check_tools
from guard.adapters._refusal import refusal_text as refusal_text
from guard.adapters.flow import Call, observe
from guard.decision import Decision, Mode
from guard.errors import InputError
from guard.records import safe_repr
from guard.runtime import CallState, Session, decided_call

HINT = "pip install 'carbguard[langchain]'"
T = TypeVar("T")

# The adapter imports without LangChain (so ``import guard.adapters.langchain`` works in a core-only
# install); every entry point calls ``require`` first and raises ImportError with the install hint.
MISSING: dict[str, ImportError] = {}
try:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.tools import BaseTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    MISSING["langchain-core"] = exc
    AIMessage = BaseMessage = HumanMessage = ToolMessage = BaseTool = object  # type: ignore[assignment,misc,unused-ignore]

try:
    from langchain.agents.middleware import AgentMiddleware as MiddlewareBase
except ImportError as exc:  # pragma: no cover - guard_tools works with langchain-core alone
    MISSING["langchain"] = exc
    MiddlewareBase = object  # type: ignore[assignment,misc,unused-ignore]

MODULES = {
    "langchain-core": ("langchain_core.messages", "langchain_core.tools"),
    "langchain": ("langchain.agents.middleware",),
}


def require(*packages: str) -> None:
    """Raise ImportError with the install hint when one of ``packages`` did not import.

    The modules are looked up again at call time (a ``sys.modules`` hit once imported), so every
    module of the adapter answers the same however its modules were imported.
    """
    for package in packages:
        missing = MISSING.get(package)
        if missing is None:
            try:
                for name in MODULES[package]:
                    importlib.import_module(name)
            except ImportError as exc:
                missing = exc
        if missing is not None:
            raise ImportError(f"this part of guard.adapters.langchain needs {package}: {HINT}") from missing


log = logging.getLogger("guard.adapters.langchain")


def check_agent_tools(policy: Any, tools: Sequence[Any]) -> list[str]:
    """At start: every agent tool against the policy (names, payload/identifier args); each problem logged."""
    from guard.policy.tools import from_langchain_tools

    readable = [
        t for t in tools if isinstance(getattr(t, "name", None), str) and isinstance(getattr(t, "args", None), Mapping)
    ]
    return check_tools(policy, from_langchain_tools(readable), log.warning)


SessionKey: TypeAlias = Callable[[Mapping[str, Any]], "str | None"]
"""Maps a ``RunnableConfig`` to a session key; ``None`` falls back to the run's first message id
(and when no message has an id either, the call is refused: there is no shared default session)."""


def thread_session_key(config: Mapping[str, Any]) -> str | None:
    """The default session key: the LangGraph ``thread_id`` of the run, if any."""
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    return None if thread is None else str(thread)


# --------------------------------------------------------------------------- the shared core


def text_of(message: BaseMessage) -> str:
    """The text blocks of a message (what ``observe_user`` / ``observe_final`` record)."""
    return str(message.text)


def tool_output(out: Any) -> tuple[str, str]:
    """Text and status of what a tool run returned (a ToolMessage, a Command, or a plain value)."""
    if isinstance(out, ToolMessage):
        return content_text(out), "error" if out.status == "error" else "ok"
    update = getattr(out, "update", None)
    if isinstance(update, Mapping):
        for message in update.get("messages") or ():
            if isinstance(message, ToolMessage):
                return tool_output(message)
    return str(out), "ok"


def not_executed(decision: Decision, tool_call: Mapping[str, Any]) -> ToolMessage:
    return ToolMessage(
        content=refusal_text(decision),
        name=plain(tool_call.get("name")),
        tool_call_id=plain(tool_call.get("id")),
        status="error",
    )


def plain(value: Any) -> str:
    """A plain ``str`` for a message field (a hostile object becomes a placeholder, never raises)."""
    if type(value) is str:
        return value
    return "" if value is None else safe_repr(value)[:200]


# --------------------------------------------------------------------------- sessions fed from messages


@dataclass(frozen=True, slots=True)
class Asked:
    """A tool call of the message history and the decision the feed made on it."""

    tool: Any
    args: Any
    decision: Decision


@dataclass(frozen=True, slots=True)
class Reviewed:
    """A human's settled answer to an escalated call of a turn (``GuardMiddleware``'s batched review).

    ``decision`` is the escalated decision that was reviewed (the answer applies only to it);
    ``message`` is what the model gets instead of a run, or None when ``call`` may run under ``cid``
    (the original call approved, or the reviewer's edit decided ``execute``).
    """

    decision: Decision
    cid: str
    call: Mapping[str, Any]
    message: Any


@dataclass
class Tracker:
    """One session and what of the message history it has seen.

    ``said`` holds the texts of the human messages the guard saw arrive as a run's input (the only
    ones fed as user turns), ``inserted`` those a tool's ``Command`` added, ``humans`` the content
    each fed ``HumanMessage`` had (a later change is fed as untrusted content): see
    :mod:`guard.adapters._langchain_user`.  ``kept``: (name, args, output) of the latest model turn's
    calls that ran, by (turn id, call id), for LangGraph's rerun of an interrupted ``ToolNode``.
    """

    session: Session
    seen: set[str] = field(default_factory=set)
    asked: dict[str, list[Asked]] = field(default_factory=dict)
    alias: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    reviewed: dict[str, Reviewed] = field(default_factory=dict)
    said: set[str] = field(default_factory=set)
    inserted: set[str] = field(default_factory=set)
    humans: dict[str, str] = field(default_factory=dict)
    kept: dict[tuple[str, str], tuple[Any, Any, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    alock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def report(self, problem: str) -> None:
        """Keep a problem of the feed (see ``GuardToolWrapper.skipped``) and log it."""
        self.skipped.append(problem)
        log.warning("%s", problem)

    @property
    def decided(self) -> dict[str, Decision]:
        """The latest decision per call id of the message history."""
        return {k: v[-1].decision for k, v in self.asked.items() if v}

    def bound(self, tool: Any, args: Any, call_id: Any) -> Decision | None:
        """The feed's decision on exactly this call (tool and canonical arguments), if it made one."""
        if type(call_id) is not str:
            return None
        for asked in reversed(self.asked.get(call_id, ())):
            if asked.decision.args is None and asked.tool == tool and type(tool) is str and asked.args == args:
                return asked.decision  # refused before entering the graph: deciding again refuses again
            if decided_call(asked.decision, tool, args):
                return asked.decision
        return None


class UnboundCallError(InputError):
    """No session or message key can be had (no thread id and no message ids): nothing may run."""


def message_key(message: BaseMessage) -> str:
    if type(message.id) is not str or not message.id:
        raise UnboundCallError(
            "carbguard: a message has no id and the run has no thread id to key its session; "
            "refusing (use a checkpointer / thread_id, or the add_messages reducer)"
        )
    return f"id:{message.id}"


def feed(tracker: Tracker, messages: Sequence[Any]) -> Deciding[list[ToolMessage]]:
    """Feed unseen messages in order; decide every tool call of a new AI message (reused ids too).

    Returns refusal ToolMessages for unparseable tool calls.  Raises :class:`UnboundCallError` when a
    message has no id (position is never a key).
    """
    session, refusals = tracker.session, []
    for message in messages:
        if not isinstance(message, BaseMessage):
            continue
        key = message_key(message)
        if key in tracker.seen:
            if isinstance(message, HumanMessage) and tracker.humans.get(key, content_text(message)) != content_text(
                message
            ):  # rewritten in place (e.g. by a middleware): the new text is not what the human wrote
                tracker.humans[key] = content_text(message)
                observe_human(tracker, message, "rewritten")
            continue
        tracker.seen.add(key)
        if isinstance(message, HumanMessage):
            tracker.humans[key] = content_text(message)
            observe_human(tracker, message, None)
        elif isinstance(message, ToolMessage):
            status = "error" if message.status == "error" else "ok"
            call_id = tracker.alias.get(message.tool_call_id, message.tool_call_id)
            observe(session, call_id, content_text(message), status, tracker.report, message.name)
        elif isinstance(message, AIMessage):
            if not message.tool_calls and not message.invalid_tool_calls:
                session.observe_final(text_of(message))
            for call in message.tool_calls:
                call_id = call.get("id") or ""
                decision = yield Call(call["name"], call["args"], call_id)
                tracker.asked.setdefault(plain(call_id), []).append(Asked(call["name"], call["args"], decision))
            for bad in message.invalid_tool_calls:
                # LangChain could not parse these arguments: the raw text goes to the gate, which
                # refuses it (bad_arguments), so the refusal is audited like any other decision.
                call_id = bad.get("id") or ""
                decision = yield Call(bad.get("name") or "", bad.get("args"), call_id)
                tracker.asked.setdefault(plain(call_id), []).append(Asked(bad.get("name"), bad.get("args"), decision))
                if call_id and session.guard.mode is not Mode.SHADOW:
                    text = (
                        f"{refusal_text(decision)} Parser error: {bad.get('error') or 'arguments are not valid JSON'}"
                    )
                    refusals.append(
                        ToolMessage(content=text, name=bad.get("name"), tool_call_id=call_id, status="error")
                    )
        else:  # a SystemMessage, ChatMessage or FunctionMessage in the state: the model reads it, no human wrote it
            body = content_text(message)
            if body:
                session.observe_content(body, "untrusted_source", f"{message.type}_message")
    return refusals


def observe_human(tracker: Tracker, message: BaseMessage, why: str | None) -> None:
    """Feed one ``HumanMessage``: a user turn only when the caller passed its text in a run's input.

    See docs/security.md#the-user-channel.  A message with a framework marker (``lc_source``), one
    whose text no input of the run carried (a summary, a tool's ``Command``, a middleware's or
    node's message) or one rewritten after it was fed (``why``) is untrusted content.
    """
    session, text = tracker.session, text_of(message)
    mark = marker(message)
    if why is None and mark is None and text in tracker.said:
        session.observe_user(text)
        for block in attachments(message):  # the user's attachments speak for their author, not the user
            session.observe_content(render_block(block), "untrusted_source", "human:attachment")
        return
    body = content_text(message)
    if body:
        origin = why or mark or "not_in_the_input"
        session.observe_content(body, "untrusted_source", f"human_message:{origin}")


def bind_call(tracker: Tracker, tool: Any, args: Any, call_id: Any) -> tuple[Any, Decision | None]:
    """The call id and decision for exactly the call about to run (None: the flow decides it under that id).

    The decision the feed made is used only when it was made on the same tool and canonical
    arguments.  A request changed after its decision (another middleware edited it) is decided
    again on its new content, under :func:`edited_call_id` (the original id keeps its proposal);
    a call id that already ran is decided again under its own id, which refuses it.
    """
    session = tracker.session
    found = tracker.bound(tool, args, call_id)
    if found is not None:
        return call_id, found
    if type(call_id) is not str or session.call_state(call_id) is not CallState.PROPOSED:
        return call_id, None  # new, ran or answered: decided under its own id
    cid = edited_call_id(call_id, tool, args)
    tracker.alias[call_id] = cid
    latest = session.decision(cid)
    if decided_call(latest, tool, args) and latest is not None:
        return cid, latest
    return cid, None


def state_messages(state: Any, key: str = "messages") -> Sequence[Any]:
    if isinstance(state, Mapping):
        found = state.get(key)
    elif isinstance(state, list | tuple):
        found = state
    else:
        found = getattr(state, key, None)
    return found if isinstance(found, list | tuple) else ()


def current_config() -> Mapping[str, Any]:
    try:
        from langgraph.config import get_config

        return get_config()
    except (ImportError, RuntimeError):
        return {}


def has_checkpointer(config: Mapping[str, Any]) -> bool:
    from langgraph.constants import CONFIG_KEY_CHECKPOINTER

    return (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER) is not None


Deciding: TypeAlias = Generator[Call, Decision, T]
"""A decide-only generator (the feed, the turn review): it yields calls to decide and is sent their decisions."""


def decide_all(flow: Deciding[T], session: Session) -> T:
    """Run ``flow`` to its end, answering every call with ``session.decide`` (which never raises)."""
    try:
        call = next(flow)
        while True:
            call = flow.send(session.decide(call.tool, call.args, call.call_id))
    except StopIteration as stop:
        result: T = stop.value
        return result


async def adecide_all(flow: Deciding[T], session: Session) -> T:
    """The async twin of :func:`decide_all` (``session.adecide``)."""
    try:
        call = next(flow)
        while True:
            call = flow.send(await session.adecide(call.tool, call.args, call.call_id))
    except StopIteration as stop:
        result: T = stop.value
        return result


# The framework classes are re-exported so that the optional-import fallback lives in one place.
__all__ = [
    "HINT",
    "MISSING",
    "AIMessage",
    "Asked",
    "BaseMessage",
    "BaseTool",
    "Deciding",
    "HumanMessage",
    "MiddlewareBase",
    "Reviewed",
    "SessionKey",
    "ToolMessage",
    "Tracker",
    "UnboundCallError",
    "adecide_all",
    "bind_call",
    "check_agent_tools",
    "current_config",
    "decide_all",
    "feed",
    "has_checkpointer",
    "message_key",
    "not_executed",
    "observe_human",
    "plain",
    "refusal_text",
    "require",
    "state_messages",
    "text_of",
    "thread_session_key",
    "tool_output",
]
