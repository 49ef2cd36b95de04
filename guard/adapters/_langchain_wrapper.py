"""The LangGraph tool-call interceptor and the ``create_agent`` middleware (see :mod:`guard.adapters.langchain`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired

from typing_extensions import TypedDict  # pydantic needs typing_extensions.TypedDict before Python 3.12

from guard.adapters._langchain_core import (
    _HINT,
    BaseMessage,
    SessionKey,
    ToolMessage,
    _current_config,
    _Decide,
    _drive_async,
    _drive_sync,
    _Execute,
    _feed,
    _Flow,
    _has_checkpointer,
    _MiddlewareBase,
    _no_execute,
    _no_execute_async,
    _not_executed,
    _require,
    _settle,
    _state_messages,
    _Tracker,
    thread_session_key,
)
from guard.decision import Decision, ProbeCall, Verdict
from guard.runtime import Guard, Session


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
