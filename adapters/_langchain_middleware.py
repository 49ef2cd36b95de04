"""The ``create_agent`` middleware and the guarded ``ToolNode`` (see :mod:`guard.adapters.langchain`).

Both are thin shells over :class:`~guard.adapters._langchain_wrapper.GuardToolWrapper`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from guard.adapters._langchain_core import (
    HINT,
    MiddlewareBase,
    SessionKey,
    UnboundCallError,
    adecide_all,
    check_agent_tools,
    current_config,
    decide_all,
    has_checkpointer,
    log,
    require,
    state_messages,
    thread_session_key,
)
from guard.adapters._langchain_wrapper import GuardToolWrapper
from guard.adapters._lifecycle import closed_on_error
from guard.decision import Mode
from guard.runtime import Guard, Session


class GuardMiddleware(MiddlewareBase):  # type: ignore[misc,unused-ignore]
    """``AgentMiddleware`` for ``create_agent``: every tool call goes through the guard.

    ``before_agent`` takes the run's input as the caller passed it: only its human messages are
    user turns (docs/security.md#the-user-channel).  ``after_model`` decides the new turn's tool
    calls in the order the model wrote them, answers calls with unparseable arguments
    (``invalid_tool_calls``) with a refusal ``ToolMessage`` and, with a checkpointer, puts every
    escalated call of the turn to a human in one interrupt;
    ``wrap_tool_call``/``awrap_tool_call`` act on the decision and the human's answer.
    See :class:`GuardToolWrapper` for the options.
    """

    def __init__(
        self,
        guard: Guard,
        *,
        session_key: SessionKey = thread_session_key,
        max_probe_rounds: int = 2,
        max_sessions: int = 1024,
        mode: str | None = None,
        tools: Sequence[Any] | None = None,
    ) -> None:
        require("langchain-core", "langchain")
        super().__init__()
        self.wrapper = GuardToolWrapper(
            guard, session_key=session_key, max_probe_rounds=max_probe_rounds, max_sessions=max_sessions, mode=mode
        )
        self.guard = self.wrapper.guard
        if tools is not None:  # else: checked before the agent's first tool call runs
            self.wrapper.check_tools(tools)

    def session(self, key: str) -> Session | None:
        """The live session of ``key`` (a thread id, or ``run:<first message id>``)."""
        return self.wrapper.session(key)

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Start of a run: its messages as the caller passed them, before any middleware, model or tool.

        The human messages among them are the run's user turns; a ``HumanMessage`` that appears
        later (``SummarizationMiddleware``'s summary, a tool's ``Command``, another middleware's) is
        fed as untrusted content (docs/security.md#the-user-channel).
        """
        try:
            self.wrapper.sync(current_config(), state_messages(state), entry=True)
        except UnboundCallError as exc:  # wrap_tool_call refuses each call
            log.warning("%s", exc)
        return None

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async twin of :meth:`before_agent`."""
        try:
            await self.wrapper.async_sync(current_config(), state_messages(state), entry=True)
        except UnboundCallError as exc:
            log.warning("%s", exc)
        return None

    def _reviews(self, config: Mapping[str, Any]) -> bool:
        return self.guard.mode is not Mode.SHADOW and has_checkpointer(config)

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Decide the new turn's calls; refuse the ones LangChain could not parse; review the escalated ones.

        With a checkpointer, every escalated call of the turn is put to a human in one interrupt
        (see :mod:`guard.adapters._langchain_review`) before any tool of the turn runs.
        """
        config, messages = current_config(), state_messages(state)
        try:
            tracker, refusals = self.wrapper.sync(config, messages)
        except UnboundCallError as exc:  # wrap_tool_call refuses each call
            log.warning("%s", exc)
            return None
        if self._reviews(config):
            with tracker.lock, closed_on_error(tracker.session):  # the review interrupt pauses the run
                decide_all(self.wrapper.review_turn(tracker, messages, config), tracker.session)
        return {"messages": refusals} if refusals else None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async twin of :meth:`after_model` (same feed and review, ``adecide``)."""
        config, messages = current_config(), state_messages(state)
        try:
            tracker, refusals = await self.wrapper.async_sync(config, messages)
        except UnboundCallError as exc:
            log.warning("%s", exc)
            return None
        if self._reviews(config):
            async with tracker.alock:
                flow = self.wrapper.review_turn(tracker, messages, config)
                with closed_on_error(tracker.session):
                    await adecide_all(flow, tracker.session)
        return {"messages": refusals} if refusals else None

    def _current(self, state: Any) -> Session | None:
        """The live session of the current run, if any (nothing fed; for the error way out)."""
        try:
            return self.wrapper.session(self.wrapper.key_for(current_config(), state_messages(state)))
        except Exception:  # noqa: BLE001 - no session can be keyed: there is nothing to close
            return None

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """The model call; when it raises (an error, an interrupt), the run's session is closed first."""
        try:
            return handler(request)
        except BaseException:
            with closed_on_error(self._current(getattr(request, "state", None))):
                raise

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async twin of :meth:`wrap_model_call`."""
        try:
            return await handler(request)
        except BaseException:
            with closed_on_error(self._current(getattr(request, "state", None))):
                raise

    def _ended(self, state: Any) -> Session | None:
        """The session of the run that just ended (fed its last messages), if it has one."""
        config, messages = current_config(), state_messages(state)
        try:
            tracker, _ = self.wrapper.sync(config, messages)
        except UnboundCallError:
            return None
        return tracker.session

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """End of a run: close its session (its ``session_end`` audit entry, and its episode when recording).

        A thread that runs again continues the same session (its graph kept) as a new segment,
        ``<thread>#segment-<n>``, which this hook closes with its own ``session_end`` entry (docs/audit.md).
        A run that leaves through an error or an interrupt is closed where it leaves
        (:meth:`wrap_model_call`, :meth:`GuardToolWrapper.wrap_tool_call`, the review interrupt).
        """
        session = self._ended(state)
        if session is not None:
            session.close()
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async twin of :meth:`after_agent` (the writes off the event loop)."""
        try:
            tracker, _ = await self.wrapper.async_sync(current_config(), state_messages(state))
        except UnboundCallError:
            return None
        await asyncio.to_thread(tracker.session.close)
        return None

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
        raise ImportError(f"guard_tool_node needs langgraph: {HINT}") from exc
    own = {
        k: options.pop(k)
        for k in ("session_key", "max_probe_rounds", "max_sessions", "messages_key", "mode")
        if k in options
    }
    wrapper = GuardToolWrapper(guard, **own)
    check_agent_tools(guard.policy, tools)
    if "messages_key" in own:
        options["messages_key"] = own["messages_key"]
    node = ToolNode(tools, wrap_tool_call=wrapper.wrap_tool_call, awrap_tool_call=wrapper.awrap_tool_call, **options)
    node.guard_wrapper = wrapper  # type: ignore[attr-defined]
    return node


__all__ = ["GuardMiddleware", "guard_tool_node"]
