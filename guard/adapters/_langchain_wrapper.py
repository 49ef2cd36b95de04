"""The LangGraph tool-call interceptor and the ``create_agent`` middleware (see :mod:`guard.adapters.langchain`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from guard.adapters._langchain_binding import edited_call_id
from guard.adapters._langchain_core import (
    _HINT,
    BaseMessage,
    SessionKey,
    ToolMessage,
    UnboundCallError,
    _authorize,
    _bind,
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
    _plain,
    _require,
    _settle,
    _state_messages,
    _Tracker,
    check_agent_tools,
    log,
    thread_session_key,
)
from guard.adapters._langchain_review import ask_human, review_answer
from guard.adapters._shadow import guard_in_mode
from guard.decision import ProbeCall, Verdict
from guard.errors import AuditError, BindingError
from guard.runtime import Guard, Session, decided_call


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
        mode: ``"enforce"`` or ``"shadow"`` (default: the guard's own mode; another value uses a
            copy of the guard in that mode).  Shadow decides and audits every call exactly as
            enforcing would, but never blocks, never runs probes, never interrupts.
    """

    def __init__(
        self,
        guard: Guard,
        *,
        session_key: SessionKey = thread_session_key,
        max_probe_rounds: int = 2,
        max_sessions: int = 1024,
        messages_key: str = "messages",
        mode: str | None = None,
    ) -> None:
        _require("langchain-core")
        if max_probe_rounds < 0 or max_sessions < 1:
            raise ValueError("max_probe_rounds must be >= 0 and max_sessions >= 1")
        self.guard = guard_in_mode(guard, mode)
        self.session_key = session_key
        self.max_probe_rounds = max_probe_rounds
        self.max_sessions = max_sessions
        self.messages_key = messages_key
        self.max_reviews = 3
        self._trackers: OrderedDict[str, _Tracker] = OrderedDict()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ sessions

    def key_for(self, config: Mapping[str, Any], messages: Sequence[Any]) -> str:
        """The session key of a run: ``session_key(config)``, else ``run:<first message id>``.

        Raises :class:`UnboundCallError` when neither exists: runs are never pooled into a shared session.
        """
        key = self.session_key(config)
        if key is not None:
            return key
        first = next((m for m in messages if isinstance(m, BaseMessage)), None)
        if first is None or type(first.id) is not str or not first.id:
            raise UnboundCallError(
                "carbguard: no thread id and the first message has no id; refusing (no shared session)"
            )
        return f"run:{first.id}"

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
        """decide (or reuse the decision on exactly this call) → probes → authorize → run; or refuse / ask."""
        call = request.tool_call
        name, args, call_id = call.get("name"), call.get("args"), call.get("id") or ""
        cid, decision = yield from _bind(tracker, name, args, call_id)
        tools = {t.name: t for t in getattr(request.runtime, "tools", None) or ()}

        def probe_request(probe: ProbeCall, bound: dict[str, Any]) -> Any | None:
            tool = tools.get(probe.tool)
            if tool is None:
                return None
            probe_call = {"name": probe.tool, "args": bound, "id": probe.call_id, "type": "tool_call"}
            return request.override(tool_call=probe_call, tool=tool)

        session = tracker.session
        decision = yield from _settle(
            session, decision, (name, args, cid), probe_request, self.max_probe_rounds, tracker.skipped
        )
        if session.guard.mode == "shadow":
            bound = _authorize(session, cid, name, args)  # permits any decided call once; never blocks
            return (yield _Execute(request if bound is None else _with_args(request, call, bound)))
        if decision.allowed:
            bound = _authorize(session, cid, name, args)
            if bound is not None:
                return (yield _Execute(_with_args(request, call, bound)))
            decision = yield _Decide(name, args, cid)  # e.g. the same id twice in one turn: refused, audited
            return _not_executed(decision, call)
        if decision.verdict is Verdict.ESCALATE and _has_checkpointer(config):
            return (yield from self._review(tracker, request, cid, decision, config))
        return _not_executed(decision, call)

    def _review(self, tracker: _Tracker, request: Any, cid: str, decision: Any, config: Mapping[str, Any]) -> _Flow:
        """Ask a human (LangChain HITL answers); every answer is audited; an edit is decided again."""
        session, call = tracker.session, request.tool_call
        for _ in range(self.max_reviews):
            answer = ask_human(session, decision, call)
            kind, reviewer, message = review_answer(answer, config)
            edited = answer.get("edited_action") if kind == "edit" else None
            new_call = None
            if isinstance(edited, Mapping):
                new_call = {**call, "name": edited.get("name") or call.get("name"), "args": edited.get("args")}
            link = (
                {} if new_call is None else {"edited_call_id": edited_call_id(cid, new_call["name"], new_call["args"])}
            )
            try:
                session.review(cid, kind, reviewer=reviewer, message=message, **link)
            except (AuditError, BindingError) as exc:
                log.warning("carbguard: %s", exc)
                return _not_executed(decision, call)
            if kind == "approve":
                bound = _authorize(session, cid, call.get("name"), call.get("args"))
                return (
                    _not_executed(decision, call)
                    if bound is None
                    else (yield _Execute(_with_args(request, call, bound)))
                )
            if kind == "respond":
                return ToolMessage(
                    content=message or "",
                    name=_plain(call.get("name")),
                    tool_call_id=_plain(call.get("id")),
                    status="success",
                )
            if kind == "reject" or new_call is None:
                name = _plain(call.get("name"))
                text = f"User rejected the tool call for `{name}` (carbguard escalated it: {decision.message})"
                return ToolMessage(
                    content=f"{text} Reason: {message}" if message else text,
                    name=_plain(call.get("name")),
                    tool_call_id=_plain(call.get("id")),
                    status="error",
                )
            # edit: the reviewer's call is a new call, decided on its own arguments before it may run
            edited_request = _edited_request(request, new_call)
            if edited_request is None:
                return _not_executed(decision, new_call)
            request, call = edited_request, new_call
            cid = link["edited_call_id"]
            tracker.alias[_plain(call.get("id"))] = cid
            known = tracker.session.decisions.get(cid)
            decision = known if known is not None and decided_call(known, call["name"], call["args"]) else None
            if decision is None:
                decision = yield _Decide(call["name"], call["args"], cid)
            decision = yield from _settle(
                session, decision, (call["name"], call["args"], cid), lambda p, b: None, 0, tracker.skipped
            )
            if decision.allowed:
                bound = _authorize(session, cid, call["name"], call["args"])
                if bound is not None:
                    return (yield _Execute(_with_args(request, call, bound)))
                return _not_executed((yield _Decide(call["name"], call["args"], cid)), call)
            if decision.verdict is not Verdict.ESCALATE:
                return _not_executed(decision, call)
        return _not_executed(decision, call)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Sync interceptor (LangGraph ``ToolCallWrapper``)."""
        config = getattr(request.runtime, "config", None) or _current_config()
        try:
            tracker, _ = self.sync(config, _state_messages(request.state, self.messages_key))
        except UnboundCallError as exc:
            return self._unbound(request, handler, exc)
        return _drive_sync(self._flow(tracker, request, config), tracker.session, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async interceptor (LangGraph ``AsyncToolCallWrapper``)."""
        config = getattr(request.runtime, "config", None) or _current_config()
        try:
            tracker, _ = await self.async_sync(config, _state_messages(request.state, self.messages_key))
        except UnboundCallError as exc:
            out = self._unbound(request, handler, exc)
            return (await out) if not isinstance(out, ToolMessage) else out
        return await _drive_async(self._flow(tracker, request, config), tracker.session, handler)

    def _unbound(self, request: Any, handler: Callable[[Any], Any], exc: UnboundCallError) -> Any:
        """No session can be keyed: enforcing refuses the call; shadow lets it run undecided (and says so)."""
        log.warning("%s", exc)
        call = request.tool_call
        if self.guard.mode == "shadow":
            return handler(request)
        return ToolMessage(
            content=str(exc), name=_plain(call.get("name")), tool_call_id=_plain(call.get("id")), status="error"
        )


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
        mode: str | None = None,
    ) -> None:
        _require("langchain-core", "langchain")
        super().__init__()
        self.wrapper = GuardToolWrapper(
            guard, session_key=session_key, max_probe_rounds=max_probe_rounds, max_sessions=max_sessions, mode=mode
        )
        self.guard = self.wrapper.guard

    def session(self, key: str) -> Session | None:
        """The live session of ``key`` (a thread id, or ``run:<first message id>``)."""
        return self.wrapper.session(key)

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Decide the new turn's calls; refuse the ones LangChain could not parse."""
        try:
            _, refusals = self.wrapper.sync(_current_config(), _state_messages(state))
        except UnboundCallError as exc:  # wrap_tool_call refuses each call
            log.warning("%s", exc)
            return None
        return {"messages": refusals} if refusals else None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async twin of :meth:`after_model` (same feed, ``adecide``)."""
        try:
            _, refusals = await self.wrapper.async_sync(_current_config(), _state_messages(state))
        except UnboundCallError as exc:
            log.warning("%s", exc)
            return None
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


def _with_args(request: Any, call: Mapping[str, Any], bound: dict[str, Any]) -> Any:
    """The request with its tool call carrying the authorized canonical arguments (a fresh copy)."""
    return request.override(tool_call={**call, "args": bound})


def _edited_request(request: Any, call: Mapping[str, Any]) -> Any | None:
    """The request pointed at the reviewer's call; None when the agent has no tool of that name."""
    tools = {t.name: t for t in getattr(request.runtime, "tools", None) or ()}
    tool = tools.get(call.get("name"))
    if tool is None and call.get("name") == request.tool_call.get("name"):
        tool = request.tool
    return None if tool is None else request.override(tool_call=dict(call), tool=tool)
