"""LangChain and LangGraph adapter: guard every tool call of an agent.

Three ways in, one core:

- :class:`GuardMiddleware` for ``langchain.agents.create_agent`` (``wrap_tool_call`` and
  ``awrap_tool_call``, plus ``after_model`` to decide a model turn's calls in order and to refuse the
  calls whose arguments LangChain could not parse);
- :func:`guard_tool_node` (or :class:`GuardToolWrapper` passed to LangGraph's
  ``ToolNode(wrap_tool_call=..., awrap_tool_call=...)``) for hand-built graphs;
- :func:`guard_tools` for executors that call ``tool.invoke(tool_call)`` themselves (langchain-core
  only).

The session of a run is fed from the message history: human turns → ``observe_user``, each AI turn's
tool calls → ``decide`` (in the order the model wrote them, before any of them runs),
``ToolMessage`` results → ``observe_result``, a final AI answer → ``observe_final``.  Because the
feed is a deterministic function of the messages, the sync and async paths give the same decisions
and a session dropped from memory can be rebuilt from the graph state.

Verdicts: ``execute`` runs the tool; ``probe`` runs the requested side-effect-free tools (found by
name among the agent's tools), observes their results and decides again, at most
``max_probe_rounds`` times; ``defer`` and ``abstain`` return a ``ToolMessage`` with
``status="error"`` and the reason; ``escalate`` raises a LangGraph ``interrupt`` when the graph has a
checkpointer (resume with ``Command(resume={"type": "approve"})`` or ``{"type": "reject",
"message": ...}``, the per-call answers of LangChain's ``HumanInTheLoopMiddleware``), else it is
refused like ``defer``.  Sync and async share one I/O-free generator (:func:`_settle`); the drivers
only call ``decide``/``adecide`` and the tool.

The module imports without LangChain; its entry points raise ImportError with the install hint
(``pip install 'carbguard[langchain]'``).  :func:`guard_tools` needs langchain-core only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, TypeAlias

from typing_extensions import TypedDict  # pydantic needs typing_extensions.TypedDict before Python 3.12

from guard.decision import Decision, ProbeCall, Verdict
from guard.errors import InputError
from guard.runtime import Guard, Session

_HINT = "pip install 'carbguard[langchain]'"

# The module imports without LangChain (so ``import guard.adapters.langchain`` works in a core-only
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


def _require(*packages: str) -> None:
    """Raise ImportError with the install hint when one of ``packages`` did not import."""
    for package in packages:
        if package in _MISSING:
            raise ImportError(f"this part of guard.adapters.langchain needs {package}: {_HINT}") from _MISSING[package]


__all__ = [
    "ApproveDecision",
    "GuardMiddleware",
    "GuardToolWrapper",
    "GuardedTool",
    "RejectDecision",
    "guard_tool_node",
    "guard_tools",
    "refusal_text",
    "thread_session_key",
]

log = logging.getLogger("guard.adapters.langchain")

SessionKey: TypeAlias = Callable[[Mapping[str, Any]], "str | None"]
"""Maps a ``RunnableConfig`` to a session key; ``None`` falls back to the run's first message id."""


class ApproveDecision(TypedDict):
    """Resume value that lets an escalated call run (same shape as LangChain's HITL)."""

    type: Literal["approve"]


class RejectDecision(TypedDict):
    """Resume value that refuses an escalated call, with an optional reason for the model."""

    type: Literal["reject"]
    message: NotRequired[str]


def _review_schema() -> Any:
    from pydantic import Discriminator

    return Annotated[ApproveDecision | RejectDecision, Discriminator("type")]


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


class GuardToolWrapper:
    """The tool-call interceptor: ``wrap_tool_call``/``awrap_tool_call`` for ``ToolNode`` and the middleware.

    Args:
        guard: the configured guard.
        session_key: maps the run's ``RunnableConfig`` to a session key (default: its
            ``thread_id``); when it returns ``None`` the id of the run's first message is used,
            so each run without a thread gets its own session.
        max_probe_rounds: how many times a ``probe`` verdict may be followed by probes and a new
            decision before the call is refused.
        max_sessions: sessions kept in memory (least recently used are dropped; a dropped
            session is rebuilt from the graph state when its thread comes back).
        messages_key: the state key holding the messages.
    """

    def __init__(
        self,
        guard: Guard,
        *,
        session_key: SessionKey = thread_session_key,
        max_probe_rounds: int = 2,
        max_sessions: int = 1024,
        messages_key: str = "messages",
    ) -> None:
        _require("langchain-core")
        if max_probe_rounds < 0 or max_sessions < 1:
            raise ValueError("max_probe_rounds must be >= 0 and max_sessions >= 1")
        self.guard = guard
        self.session_key = session_key
        self.max_probe_rounds = max_probe_rounds
        self.max_sessions = max_sessions
        self.messages_key = messages_key
        self._trackers: OrderedDict[str, _Tracker] = OrderedDict()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ sessions

    def key_for(self, config: Mapping[str, Any], messages: Sequence[Any]) -> str:
        """The session key of a run."""
        key = self.session_key(config)
        if key is not None:
            return key
        first = next((m for m in messages if isinstance(m, BaseMessage) and m.id), None)
        return f"run:{first.id}" if first is not None else "default"

    def session(self, key: str) -> Session | None:
        """The live session of ``key``, if it is in memory."""
        tracker = self._trackers.get(key)
        return tracker.session if tracker is not None else None

    def skipped(self, key: str) -> list[str]:
        """Messages of session ``key`` that could not be fed (e.g. a result for an unknown call id)."""
        tracker = self._trackers.get(key)
        return list(tracker.skipped) if tracker is not None else []

    def _tracker(self, key: str) -> _Tracker:
        with self._lock:
            tracker = self._trackers.get(key)
            if tracker is None:
                tracker = _Tracker(self.guard.session(key))
                self._trackers[key] = tracker
                while len(self._trackers) > self.max_sessions:
                    self._trackers.popitem(last=False)
            self._trackers.move_to_end(key)
            return tracker

    def sync(self, config: Mapping[str, Any], messages: Sequence[Any]) -> tuple[_Tracker, list[ToolMessage]]:
        """Feed the unseen messages of a run into its session (sync)."""
        tracker = self._tracker(self.key_for(config, messages))
        with tracker.lock:
            refusals = _drive_sync(_feed(tracker, messages), tracker.session, _no_execute)
        return tracker, refusals

    async def async_sync(
        self, config: Mapping[str, Any], messages: Sequence[Any]
    ) -> tuple[_Tracker, list[ToolMessage]]:
        """Feed the unseen messages of a run into its session (async)."""
        tracker = self._tracker(self.key_for(config, messages))
        async with tracker.alock:
            refusals = await _drive_async(_feed(tracker, messages), tracker.session, _no_execute_async)
        return tracker, refusals

    # ------------------------------------------------------------------ one tool call

    def _flow(self, tracker: _Tracker, request: Any, config: Mapping[str, Any]) -> _Flow:
        call = request.tool_call
        name, args, call_id = call.get("name"), call.get("args"), call.get("id") or ""
        decision = tracker.decided.get(call_id)
        if decision is None:  # not in the state's messages (e.g. a ToolNode invoked with bare calls)
            decision = yield _Decide(name, args, call_id)
        tools = {t.name: t for t in getattr(request.runtime, "tools", None) or ()}

        def probe_request(probe: ProbeCall) -> Any | None:
            tool = tools.get(probe.tool)
            if tool is None:
                return None
            probe_call = {"name": probe.tool, "args": dict(probe.args), "id": probe.call_id, "type": "tool_call"}
            return request.override(tool_call=probe_call, tool=tool)

        decision = yield from _settle(
            tracker.session, decision, (name, args, call_id), probe_request, self.max_probe_rounds, tracker.skipped
        )
        tracker.decided[call_id] = decision
        if decision.allowed:
            return (yield _Execute(request))
        if decision.verdict is Verdict.ESCALATE and _has_checkpointer(config):
            answer = self._ask_human(decision, call)
            if answer.get("type") == "approve":
                return (yield _Execute(request))
            reason = answer.get("message")
            text = f"User rejected the tool call for `{name}` (carbguard escalated it: {decision.message})"
            return ToolMessage(
                content=f"{text} Reason: {reason}" if reason else text, name=name, tool_call_id=call_id, status="error"
            )
        return _not_executed(decision, call)

    def _ask_human(self, decision: Decision, call: Mapping[str, Any]) -> Mapping[str, Any]:
        from langgraph.types import interrupt

        value = {
            "type": "tool_approval",
            "tool_call_id": call.get("id"),
            "name": call.get("name"),
            "args": call.get("args"),
            "description": f"carbguard escalated this call ({decision.reason.value}): {decision.message}",
            "guard": {
                "verdict": decision.verdict.value,
                "reason": decision.reason.value,
                "score": decision.score,
                "threshold": decision.threshold,
            },
        }
        answer: Mapping[str, Any] = interrupt(value, response_schema=_review_schema())
        return answer

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Sync interceptor (LangGraph ``ToolCallWrapper``)."""
        config = getattr(request.runtime, "config", None) or _current_config()
        tracker, _ = self.sync(config, _state_messages(request.state, self.messages_key))
        return _drive_sync(self._flow(tracker, request, config), tracker.session, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async interceptor (LangGraph ``AsyncToolCallWrapper``)."""
        config = getattr(request.runtime, "config", None) or _current_config()
        tracker, _ = await self.async_sync(config, _state_messages(request.state, self.messages_key))
        return await _drive_async(self._flow(tracker, request, config), tracker.session, handler)


def _no_execute(payload: Any) -> Any:
    raise AssertionError("the message feed never executes a tool")  # pragma: no cover


async def _no_execute_async(payload: Any) -> Any:
    raise AssertionError("the message feed never executes a tool")  # pragma: no cover


# --------------------------------------------------------------------------- create_agent middleware


class GuardMiddleware(_MiddlewareBase):  # type: ignore[misc,unused-ignore]
    """``AgentMiddleware`` for ``create_agent``: every tool call goes through the guard.

    ``after_model`` decides the new turn's tool calls in the order the model wrote them and answers
    calls with unparseable arguments (``invalid_tool_calls``) with a refusal ``ToolMessage``;
    ``wrap_tool_call``/``awrap_tool_call`` act on the decision.  Use a checkpointer to let
    ``escalate`` pause for a human.  See :class:`GuardToolWrapper` for the options.
    """

    def __init__(
        self,
        guard: Guard,
        *,
        session_key: SessionKey = thread_session_key,
        max_probe_rounds: int = 2,
        max_sessions: int = 1024,
    ) -> None:
        _require("langchain-core", "langchain")
        super().__init__()
        self.wrapper = GuardToolWrapper(
            guard, session_key=session_key, max_probe_rounds=max_probe_rounds, max_sessions=max_sessions
        )
        self.guard = guard

    def session(self, key: str) -> Session | None:
        """The live session of ``key`` (a thread id, or ``run:<first message id>``)."""
        return self.wrapper.session(key)

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Decide the new turn's calls; refuse the ones LangChain could not parse."""
        _, refusals = self.wrapper.sync(_current_config(), _state_messages(state))
        return {"messages": refusals} if refusals else None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async twin of :meth:`after_model` (same feed, ``adecide``)."""
        _, refusals = await self.wrapper.async_sync(_current_config(), _state_messages(state))
        return {"messages": refusals} if refusals else None

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Act on the decision for this call (run, probe, refuse, or interrupt)."""
        return self.wrapper.wrap_tool_call(request, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async twin of :meth:`wrap_tool_call`."""
        return await self.wrapper.awrap_tool_call(request, handler)


def guard_tool_node(tools: Sequence[Any], guard: Guard, **options: Any) -> Any:
    """A LangGraph ``ToolNode`` whose calls go through ``guard`` (options as :class:`GuardToolWrapper`).

    Keyword options that :class:`GuardToolWrapper` does not take are passed to ``ToolNode``.  The
    wrapper is available as ``node.guard_wrapper``.
    """
    try:
        from langgraph.prebuilt import ToolNode
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(f"guard_tool_node needs langgraph: {_HINT}") from exc
    own = {
        k: options.pop(k) for k in ("session_key", "max_probe_rounds", "max_sessions", "messages_key") if k in options
    }
    wrapper = GuardToolWrapper(guard, **own)
    if "messages_key" in own:
        options["messages_key"] = own["messages_key"]
    node = ToolNode(tools, wrap_tool_call=wrapper.wrap_tool_call, awrap_tool_call=wrapper.awrap_tool_call, **options)
    node.guard_wrapper = wrapper  # type: ignore[attr-defined]
    return node


# --------------------------------------------------------------------------- langchain-core only


class GuardedTool(BaseTool):
    """A ``BaseTool`` that asks the guard before running the tool it wraps.

    Invoke it with a tool call (``{"name", "args", "id", "type": "tool_call"}``) to get a
    ``ToolMessage``: the tool's, or a refusal with ``status="error"``.  Invoked with bare arguments
    it gets a fresh call id and returns the tool's output, or raises :class:`~guard.errors.GuardError`
    subclass ``InputError`` with the refusal.  There is no human in this loop: ``escalate`` is
    refused.  The executor records user turns itself with ``session.observe_user``.
    """

    inner: BaseTool
    session: Any
    siblings: dict[str, BaseTool]
    max_probe_rounds: int = 2

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is overridden
        raise NotImplementedError("GuardedTool is run through invoke/ainvoke")

    def _call(self, input: Any) -> tuple[dict[str, Any], bool]:
        if isinstance(input, Mapping) and input.get("type") == "tool_call":
            return dict(input), True
        args = dict(input) if isinstance(input, Mapping) else {"input": input}
        return {"name": self.inner.name, "args": args, "id": f"guard-{uuid.uuid4().hex}", "type": "tool_call"}, False

    def _flow(self, call: dict[str, Any], config: Any) -> _Flow:
        skipped: list[str] = []
        name, args, call_id = call["name"], call.get("args"), call.get("id") or ""
        decision = yield _Decide(name, args, call_id)

        def probe_payload(probe: ProbeCall) -> Any | None:
            tool = self.siblings.get(probe.tool)
            if tool is None:
                return None
            return tool, {"name": probe.tool, "args": dict(probe.args), "id": probe.call_id, "type": "tool_call"}

        session: Session = self.session
        decision = yield from _settle(
            session, decision, (name, args, call_id), probe_payload, self.max_probe_rounds, skipped
        )
        if not decision.allowed:
            return decision, None
        out = yield _Execute((self.inner, call))
        text, status = _tool_output(out)
        _observe_result(session, call_id, text, status, skipped)
        return decision, out

    def _finish(self, call: dict[str, Any], as_call: bool, outcome: tuple[Decision, Any]) -> Any:
        decision, out = outcome
        if decision.allowed:
            return out
        if as_call:
            return _not_executed(decision, call)
        raise InputError(refusal_text(decision))

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Decide, then run the wrapped tool or refuse."""
        call, as_call = self._call(input)

        def execute(payload: tuple[BaseTool, dict[str, Any]]) -> Any:
            tool, tool_call = payload
            return tool.invoke(tool_call if as_call or tool is not self.inner else input, config, **kwargs)

        return self._finish(call, as_call, _drive_sync(self._flow(call, config), self.session, execute))

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Async twin of :meth:`invoke`."""
        call, as_call = self._call(input)

        async def execute(payload: tuple[BaseTool, dict[str, Any]]) -> Any:
            tool, tool_call = payload
            return await tool.ainvoke(tool_call if as_call or tool is not self.inner else input, config, **kwargs)

        return self._finish(call, as_call, await _drive_async(self._flow(call, config), self.session, execute))


def guard_tools(tools: Sequence[BaseTool], session: Session, *, max_probe_rounds: int = 2) -> list[GuardedTool]:
    """Wrap ``tools`` so that each ``invoke(tool_call)`` is decided by ``session`` first.

    Probe tools are looked up by name among ``tools``.  Results of executed calls are observed
    into the session; refusals come back as ``ToolMessage(status="error")``.
    """
    _require("langchain-core")
    by_name = {t.name: t for t in tools}
    if len(by_name) != len(tools):
        raise ValueError("guard_tools: tool names must be unique")
    return [
        GuardedTool(
            name=t.name,
            description=t.description,
            args_schema=t.args_schema,
            inner=t,
            session=session,
            siblings=by_name,
            max_probe_rounds=max_probe_rounds,
        )
        for t in tools
    ]
