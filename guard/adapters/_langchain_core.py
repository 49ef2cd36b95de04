"""The I/O-free core of the LangChain adapter: one generator for sync and async, sessions fed from messages.

See :mod:`guard.adapters.langchain`.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from guard.adapters._langchain_binding import edited_call_id
from guard.adapters._langchain_content import attachments, content_text, observe_result, render_block
from guard.adapters._refusal import refusal_text as refusal_text
from guard.decision import Decision, ProbeCall, Verdict
from guard.errors import BindingError, InputError
from guard.records import safe_repr
from guard.runtime import Session, decided_call

_HINT = "pip install 'carbguard[langchain]'"

# The adapter imports without LangChain (so ``import guard.adapters.langchain`` works in a core-only
# install); every entry point calls ``_require`` first and raises ImportError with the install hint.
_MISSING: dict[str, ImportError] = {}
try:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.tools import BaseTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    _MISSING["langchain-core"] = exc
    AIMessage = BaseMessage = HumanMessage = ToolMessage = BaseTool = object  # type: ignore[assignment,misc,unused-ignore]

try:
    from langchain.agents.middleware import AgentMiddleware as _MiddlewareBase
except ImportError as exc:  # pragma: no cover - guard_tools works with langchain-core alone
    _MISSING["langchain"] = exc
    _MiddlewareBase = object  # type: ignore[assignment,misc,unused-ignore]

_MODULES = {
    "langchain-core": ("langchain_core.messages", "langchain_core.tools"),
    "langchain": ("langchain.agents.middleware",),
}


def _require(*packages: str) -> None:
    """Raise ImportError with the install hint when one of ``packages`` did not import.

    The modules are looked up again at call time (a ``sys.modules`` hit once imported), so every
    module of the adapter answers the same however its modules were imported.
    """
    for package in packages:
        missing = _MISSING.get(package)
        if missing is None:
            try:
                for name in _MODULES[package]:
                    importlib.import_module(name)
            except ImportError as exc:
                missing = exc
        if missing is not None:
            raise ImportError(f"this part of guard.adapters.langchain needs {package}: {_HINT}") from missing


log = logging.getLogger("guard.adapters.langchain")


def check_agent_tools(policy: Any, tools: Sequence[Any]) -> list[str]:
    """At start: every agent tool against the policy (names, payload/identifier args); each problem logged.

    Tools the policy does not know are refused when called (the policy's ``on_unknown``); this makes the
    mismatch visible before the first call instead.
    """
    from guard.policy.tools import check_tools, from_langchain_tools

    readable = [
        t for t in tools if isinstance(getattr(t, "name", None), str) and isinstance(getattr(t, "args", None), Mapping)
    ]
    problems = check_tools(policy, from_langchain_tools(readable), policy_extra=False)
    for problem in problems:
        log.warning("policy %r vs agent tools: %s", policy.name, problem)
    return problems


SessionKey: TypeAlias = Callable[[Mapping[str, Any]], "str | None"]
"""Maps a ``RunnableConfig`` to a session key; ``None`` falls back to the run's first message id
(and when no message has an id either, the call is refused: there is no shared default session)."""


def thread_session_key(config: Mapping[str, Any]) -> str | None:
    """The default session key: the LangGraph ``thread_id`` of the run, if any."""
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    return None if thread is None else str(thread)


# --------------------------------------------------------------------------- the shared core


@dataclass(frozen=True, slots=True)
class _Decide:
    tool: Any
    args: Any
    call_id: Any


@dataclass(frozen=True, slots=True)
class _Execute:
    payload: Any


_Action: TypeAlias = _Decide | _Execute
_Flow: TypeAlias = Generator[_Action, Any, Any]


def _text(message: BaseMessage) -> str:
    return str(message.text)


def _tool_output(out: Any) -> tuple[str, str]:
    """Text and status of what a tool run returned (a ToolMessage, a Command, or a plain value)."""
    if isinstance(out, ToolMessage):
        return content_text(out), "error" if out.status == "error" else "ok"
    update = getattr(out, "update", None)
    if isinstance(update, Mapping):
        for message in update.get("messages") or ():
            if isinstance(message, ToolMessage):
                return _tool_output(message)
    return str(out), "ok"


def _authorize(session: Session, call_id: Any, tool: Any, args: Any) -> dict[str, Any] | None:
    """The authorized canonical arguments of exactly this call, or None (the call must not run)."""
    try:
        return session.authorize(call_id, tool, args)
    except BindingError as exc:
        log.warning("carbguard: %s", exc)
        return None


def _settle(
    session: Session,
    decision: Decision,
    call: tuple[Any, Any, Any],
    probe_payload: Callable[[ProbeCall, dict[str, Any]], Any | None],
    max_rounds: int,
    skipped: list[str],
) -> Generator[_Action, Any, Decision]:
    """Run the probes a ``probe`` verdict asks for, observe them, and decide again (bounded).

    Each probe goes decide → authorize → run with the authorized arguments → observe_result.  In
    shadow mode no probe runs (shadow changes nothing the agent or its tools see).
    """
    if session.guard.mode == "shadow":
        return decision
    for _ in range(max_rounds):
        if decision.verdict is not Verdict.PROBE:
            return decision
        ran = 0
        for probe in decision.probes:
            gate = yield _Decide(probe.tool, dict(probe.args), probe.call_id)
            if not gate.allowed:
                continue
            bound = _authorize(session, probe.call_id, probe.tool, dict(probe.args))
            payload = None if bound is None else probe_payload(probe, bound)
            if payload is None:
                skipped.append(f"probe tool {probe.tool!r} is not among the agent's tools")
                continue
            text, status = _tool_output((yield _Execute(payload)))
            observe_result(session, probe.call_id, text, status, skipped)
            ran += 1
        decision = yield _Decide(*call)
        if ran == 0:
            break
    return decision


def _drive_sync(flow: _Flow, session: Session, execute: Callable[[Any], Any]) -> Any:
    try:
        action = next(flow)
        while True:
            if isinstance(action, _Decide):
                value: Any = session.decide(action.tool, action.args, action.call_id)
            else:
                value = execute(action.payload)
            action = flow.send(value)
    except StopIteration as stop:
        return stop.value


async def _drive_async(flow: _Flow, session: Session, execute: Callable[[Any], Awaitable[Any]]) -> Any:
    try:
        action = next(flow)
        while True:
            if isinstance(action, _Decide):
                value: Any = await session.adecide(action.tool, action.args, action.call_id)
            else:
                value = await execute(action.payload)
            action = flow.send(value)
    except StopIteration as stop:
        return stop.value


def _not_executed(decision: Decision, tool_call: Mapping[str, Any]) -> ToolMessage:
    return ToolMessage(
        content=refusal_text(decision),
        name=_plain(tool_call.get("name")),
        tool_call_id=_plain(tool_call.get("id")),
        status="error",
    )


def _plain(value: Any) -> str:
    """A plain ``str`` for a message field (a hostile object becomes a placeholder, never raises)."""
    if type(value) is str:
        return value
    return "" if value is None else safe_repr(value)[:200]


# --------------------------------------------------------------------------- sessions fed from messages


@dataclass(frozen=True, slots=True)
class _Asked:
    """A tool call of the message history and the decision the feed made on it."""

    tool: Any
    args: Any
    decision: Decision


@dataclass(frozen=True, slots=True)
class _Reviewed:
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
class _Tracker:
    """One session and what of the message history it has seen."""

    session: Session
    seen: set[str] = field(default_factory=set)
    asked: dict[str, list[_Asked]] = field(default_factory=dict)
    alias: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    reviewed: dict[str, _Reviewed] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    alock: asyncio.Lock = field(default_factory=asyncio.Lock)

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


def _message_key(message: BaseMessage) -> str:
    if type(message.id) is not str or not message.id:
        raise UnboundCallError(
            "carbguard: a message has no id and the run has no thread id to key its session; "
            "refusing (use a checkpointer / thread_id, or the add_messages reducer)"
        )
    return f"id:{message.id}"


def _feed(tracker: _Tracker, messages: Sequence[Any]) -> Generator[_Action, Any, list[ToolMessage]]:
    """Feed unseen messages in order; decide every tool call of a new AI message (reused ids too).

    Returns refusal ToolMessages for unparseable tool calls.  Raises :class:`UnboundCallError` when a
    message has no id (position is never a key).
    """
    session, refusals = tracker.session, []
    for message in messages:
        if not isinstance(message, BaseMessage):
            continue
        key = _message_key(message)
        if key in tracker.seen:
            continue
        tracker.seen.add(key)
        if isinstance(message, HumanMessage):
            session.observe_user(_text(message))
            for block in attachments(message):  # the user's attachments speak for their author, not the user
                session.observe_content(render_block(block), "untrusted_source", "human:attachment")
        elif isinstance(message, ToolMessage):
            status = "error" if message.status == "error" else "ok"
            call_id = tracker.alias.get(message.tool_call_id, message.tool_call_id)
            observe_result(session, call_id, content_text(message), status, tracker.skipped, message.name)
        elif isinstance(message, AIMessage):
            if not message.tool_calls and not message.invalid_tool_calls:
                session.observe_final(_text(message))
            for call in message.tool_calls:
                call_id = call.get("id") or ""
                decision = yield _Decide(call["name"], call["args"], call_id)
                tracker.asked.setdefault(_plain(call_id), []).append(_Asked(call["name"], call["args"], decision))
            for bad in message.invalid_tool_calls:
                # LangChain could not parse these arguments: the raw text goes to the gate, which
                # refuses it (bad_arguments), so the refusal is audited like any other decision.
                call_id = bad.get("id") or ""
                decision = yield _Decide(bad.get("name") or "", bad.get("args"), call_id)
                tracker.asked.setdefault(_plain(call_id), []).append(_Asked(bad.get("name"), bad.get("args"), decision))
                if call_id and session.guard.mode != "shadow":
                    text = (
                        f"{refusal_text(decision)} Parser error: {bad.get('error') or 'arguments are not valid JSON'}"
                    )
                    refusals.append(
                        ToolMessage(content=text, name=bad.get("name"), tool_call_id=call_id, status="error")
                    )
    return refusals


def _bind(tracker: _Tracker, tool: Any, args: Any, call_id: Any) -> Generator[_Action, Any, tuple[Any, Decision]]:
    """The call id and decision for exactly the call about to run; decide it when there is none.

    The decision the feed made is used only when it was made on the same tool and canonical
    arguments.  A request changed after its decision (another middleware edited it) is decided
    again on its new content, under :func:`edited_call_id` (the original id keeps its proposal);
    a call id that already ran is decided again under its own id, which refuses it.
    """
    session = tracker.session
    found = tracker.bound(tool, args, call_id)
    if found is not None:
        return call_id, found
    if type(call_id) is not str or call_id not in session.proposals or call_id in session.executed:
        return call_id, (yield _Decide(tool, args, call_id))
    if call_id in session.answered:
        return call_id, (yield _Decide(tool, args, call_id))
    cid = edited_call_id(call_id, tool, args)
    tracker.alias[call_id] = cid
    latest = session.decisions.get(cid)
    if decided_call(latest, tool, args) and latest is not None:
        return cid, latest
    return cid, (yield _Decide(tool, args, cid))


def _state_messages(state: Any, key: str = "messages") -> Sequence[Any]:
    if isinstance(state, Mapping):
        found = state.get(key)
    elif isinstance(state, list | tuple):
        found = state
    else:
        found = getattr(state, key, None)
    return found if isinstance(found, list | tuple) else ()


def _current_config() -> Mapping[str, Any]:
    try:
        from langgraph.config import get_config

        return get_config()
    except (ImportError, RuntimeError):
        return {}


def _has_checkpointer(config: Mapping[str, Any]) -> bool:
    from langgraph.constants import CONFIG_KEY_CHECKPOINTER

    return (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER) is not None


def _no_execute(payload: Any) -> Any:
    raise AssertionError("the message feed never executes a tool")  # pragma: no cover


async def _no_execute_async(payload: Any) -> Any:
    raise AssertionError("the message feed never executes a tool")  # pragma: no cover


# Names the sibling modules take from here (the framework classes are re-exported so that the
# optional-import fallback lives in one place).
__all__ = ["AIMessage", "BaseMessage", "BaseTool", "HumanMessage", "ToolMessage", "_MiddlewareBase"]
