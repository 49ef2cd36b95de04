"""The I/O-free core of the LangChain adapter: one generator for sync and async, sessions fed from messages.

See :mod:`guard.adapters.langchain`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from guard.decision import Decision, ProbeCall, Verdict
from guard.errors import InputError
from guard.runtime import Session

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

SessionKey: TypeAlias = Callable[[Mapping[str, Any]], "str | None"]
"""Maps a ``RunnableConfig`` to a session key; ``None`` falls back to the run's first message id."""


def thread_session_key(config: Mapping[str, Any]) -> str | None:
    """The default session key: the LangGraph ``thread_id`` of the run, if any."""
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    return None if thread is None else str(thread)


def refusal_text(decision: Decision) -> str:
    """What the model is told when the guard does not run a call (with SafeCommit's certified replacement)."""
    text = (
        f"carbguard did not run `{decision.tool}` ({decision.verdict.value}: {decision.reason.value}). "
        f"{decision.message}"
    )
    replacement = (decision.safecommit or {}).get("replacement")
    if isinstance(replacement, Mapping) and replacement.get("tool"):
        args = json.dumps(replacement.get("args") or {}, sort_keys=True, default=str)
        text += f" Suggested instead: {replacement['tool']}({args})."
    return text


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
        return _text(out), "error" if out.status == "error" else "ok"
    update = getattr(out, "update", None)
    if isinstance(update, Mapping):
        for message in update.get("messages") or ():
            if isinstance(message, ToolMessage):
                return _tool_output(message)
    return str(out), "ok"


def _observe_result(session: Session, call_id: str, text: str, status: str, skipped: list[str]) -> None:
    """Record a result; a result the session cannot place (unknown or answered call id) is reported, not fed."""
    try:
        session.observe_result(call_id, text, status)
    except InputError as exc:
        skipped.append(str(exc))
        log.warning("carbguard: %s (not fed to the session)", exc)


def _settle(
    session: Session,
    decision: Decision,
    call: tuple[str, Any, str],
    probe_payload: Callable[[ProbeCall], Any | None],
    max_rounds: int,
    skipped: list[str],
) -> Generator[_Action, Any, Decision]:
    """Run the probes a ``probe`` verdict asks for, observe them, and decide again (bounded)."""
    for _ in range(max_rounds):
        if decision.verdict is not Verdict.PROBE:
            return decision
        ran = 0
        for probe in decision.probes:
            payload = probe_payload(probe)
            if payload is None:
                skipped.append(f"probe tool {probe.tool!r} is not among the agent's tools")
                continue
            gate = yield _Decide(probe.tool, dict(probe.args), probe.call_id)
            if not gate.allowed:
                continue
            text, status = _tool_output((yield _Execute(payload)))
            _observe_result(session, probe.call_id, text, status, skipped)
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
    text = refusal_text(decision)
    if decision.verdict is Verdict.PROBE:
        text = f"{text} The probes it asked for could not settle the decision."
    return ToolMessage(content=text, name=tool_call.get("name"), tool_call_id=tool_call.get("id") or "", status="error")


# --------------------------------------------------------------------------- sessions fed from messages


@dataclass
class _Tracker:
    """One session and what of the message history it has seen."""

    session: Session
    seen: set[str] = field(default_factory=set)
    decided: dict[str, Decision] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    alock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _message_key(message: BaseMessage, position: int) -> str:
    return f"id:{message.id}" if message.id else f"pos:{position}"


def _feed(tracker: _Tracker, messages: Sequence[Any]) -> Generator[_Action, Any, list[ToolMessage]]:
    """Feed unseen messages in order; return refusal ToolMessages for unparseable tool calls."""
    session, refusals = tracker.session, []
    for position, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            continue
        key = _message_key(message, position)
        if key in tracker.seen:
            continue
        tracker.seen.add(key)
        if isinstance(message, HumanMessage):
            session.observe_user(_text(message))
        elif isinstance(message, ToolMessage):
            status = "error" if message.status == "error" else "ok"
            _observe_result(session, message.tool_call_id, _text(message), status, tracker.skipped)
        elif isinstance(message, AIMessage):
            if not message.tool_calls and not message.invalid_tool_calls:
                session.observe_final(_text(message))
            for call in message.tool_calls:
                call_id = call.get("id") or ""
                if call_id not in tracker.decided:
                    tracker.decided[call_id] = yield _Decide(call["name"], call["args"], call_id)
            for bad in message.invalid_tool_calls:
                # LangChain could not parse these arguments: the raw text goes to the gate, which
                # refuses it (bad_arguments), so the refusal is audited like any other decision.
                call_id = bad.get("id") or ""
                decision = yield _Decide(bad.get("name") or "", bad.get("args"), call_id)
                tracker.decided.setdefault(call_id, decision)
                if call_id:
                    text = (
                        f"{refusal_text(decision)} Parser error: {bad.get('error') or 'arguments are not valid JSON'}"
                    )
                    refusals.append(
                        ToolMessage(content=text, name=bad.get("name"), tool_call_id=call_id, status="error")
                    )
    return refusals


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
