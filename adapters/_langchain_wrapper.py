"""The LangGraph tool-call interceptor and the ``create_agent`` middleware (see :mod:`guard.adapters.langchain`)."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from guard.adapters._langchain_binding import edited_call_id
from guard.adapters._langchain_core import (
    AIMessage,
    BaseMessage,
    Deciding,
    Reviewed,
    SessionKey,
    ToolMessage,
    Tracker,
    UnboundCallError,
    adecide_all,
    bind_call,
    check_agent_tools,
    current_config,
    decide_all,
    feed,
    has_checkpointer,
    log,
    not_executed,
    plain,
    require,
    state_messages,
    thread_session_key,
    tool_output,
)
from guard.adapters._langchain_review import ask_human, ask_human_batch, review_answer
from guard.adapters._langchain_sessions import SessionPool
from guard.adapters._langchain_steps import (
    Step,
    Steps,
    escalated_before,
    keep,
    kept_output,
    pending_turn,
    reject_message,
    request_for_edit,
    respond_message,
    wait_your_turn,
    with_args,
)
from guard.adapters._langchain_user import aread_inputs, declare_input, learn, note_output, read_inputs
from guard.adapters._lifecycle import closed_on_error
from guard.adapters._shadow import guard_in_mode
from guard.adapters.flow import Call, Ran, Tools, aguarded, guarded
from guard.decision import Decision, Mode, Verdict
from guard.errors import AuditError, BindingError
from guard.runtime import Guard, decided_call


class GuardToolWrapper(SessionPool):
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
        require("langchain-core")
        if max_probe_rounds < 0 or max_sessions < 1:
            raise ValueError("max_probe_rounds must be >= 0 and max_sessions >= 1")
        self.guard = guard_in_mode(guard, mode)
        self.session_key = session_key
        self.max_probe_rounds = max_probe_rounds
        self.max_sessions = max_sessions
        self.messages_key = messages_key
        self.max_reviews = 3
        self._trackers: OrderedDict[str, Tracker] = OrderedDict()
        self._lock = threading.Lock()
        self._checked: set[frozenset[str]] = set()

    def check_tools(self, tools: Sequence[Any]) -> list[str]:
        """The agent's tools against the policy, each problem logged as a warning; once per set of tool names."""
        names = frozenset(str(getattr(t, "name", "")) for t in tools)
        with self._lock:
            if names in self._checked:
                return []
            self._checked.add(names)
        return check_agent_tools(self.guard.policy, tools)

    def sync(
        self, config: Mapping[str, Any], messages: Sequence[Any], *, entry: bool = False
    ) -> tuple[Tracker, list[ToolMessage]]:
        """Feed the unseen messages of a run into its session (sync).

        ``entry``: ``messages`` are the state at the start of a run (its caller's input); only the
        human messages the caller passed are fed as user turns (docs/security.md#the-user-channel).
        """
        tracker = self._tracker(self.key_for(config, messages))
        with tracker.lock:
            if learn(tracker, config, messages, entry):
                read_inputs(tracker, config, self.messages_key, messages if entry else None)
            refusals = decide_all(feed(tracker, messages), tracker.session)
        return tracker, refusals

    async def async_sync(
        self, config: Mapping[str, Any], messages: Sequence[Any], *, entry: bool = False
    ) -> tuple[Tracker, list[ToolMessage]]:
        """Feed the unseen messages of a run into its session (async; ``entry`` as :meth:`sync`)."""
        tracker = self._tracker(self.key_for(config, messages))
        async with tracker.alock:
            if learn(tracker, config, messages, entry):
                await aread_inputs(tracker, config, self.messages_key, messages if entry else None)
            refusals = await adecide_all(feed(tracker, messages), tracker.session)
        return tracker, refusals

    def declare_input(self, config: Mapping[str, Any], messages: Sequence[Any]) -> list[BaseMessage]:
        """The caller's input of a run: its new human turns are user turns (see ``start_run``).

        ``messages``: anything ``convert_to_messages`` reads.  Returns them as messages, each one
        without an id given one (so a run without a thread id is keyed by its first message).
        """
        from langchain_core.messages import convert_to_messages

        given = [m if m.id else m.model_copy(update={"id": str(uuid.uuid4())}) for m in convert_to_messages(messages)]
        tracker = self._tracker(self.key_for(config, given))
        with tracker.lock:
            declare_input(tracker, given)
        return given

    # ------------------------------------------------------------------ one tool call

    def _tools(self, tracker: Tracker, request: Any, main: Call) -> Tools[Any, Any]:
        """The flow's view of this request: ``main`` runs as the request, a probe as a request for its tool."""
        tools = {t.name: t for t in getattr(request.runtime, "tools", None) or ()}
        call = request.tool_call

        def payload(target: Call, bound: dict[str, Any]) -> Any:
            if target == main:
                return with_args(request, call, bound)
            tool = tools.get(target.tool)
            if tool is None:
                return None
            probe_call = {"name": target.tool, "args": bound, "id": target.call_id, "type": "tool_call"}
            return request.override(tool_call=probe_call, tool=tool)

        def result(output: Any) -> tuple[str, str]:
            return tool_output(output)

        return Tools(payload, result, tracker.report, self.max_probe_rounds, observe_calls=False)

    def _flow(self, tracker: Tracker, request: Any, config: Mapping[str, Any]) -> Steps:
        """The guarded call (reusing the decision on exactly this call), then a refusal or a human's review."""
        call = request.tool_call
        name, args, call_id = call.get("name"), call.get("args"), call.get("id") or ""
        turn = pending_turn(state_messages(request.state, self.messages_key), call_id)
        kept = kept_output(tracker, turn, call)
        if kept is not None:  # it ran before this ToolNode was interrupted; LangGraph runs the node again
            return kept
        cid, decision = bind_call(tracker, name, args, call_id)
        outcome = yield Step(Call(name, args, cid), request, decision)
        if isinstance(outcome, Ran):
            return keep(tracker, turn, call, outcome.output)
        decision = outcome.decision
        if tracker.session.decision(cid) is not decision:  # refused while binding (e.g. ran already): no review
            return not_executed(decision, call)
        reviewed = tracker.reviewed.get(plain(call_id))
        if reviewed is not None and reviewed.decision is decision:
            return (yield from self._reviewed(tracker, request, reviewed))
        if decision.verdict is Verdict.ESCALATE and has_checkpointer(config):
            if escalated_before(tracker, state_messages(request.state, self.messages_key), call_id):
                return wait_your_turn(call, decision)  # one interrupt per turn: answers go by raise order
            return (yield from self._review(tracker, request, cid, decision, config))
        return not_executed(decision, call)

    def _run(self, request: Any, main: Call, decision: Decision) -> Steps:
        """authorize → run exactly ``main`` (an approved or edited call); the refusal message otherwise."""
        outcome = yield Step(main, request, decision, cleared=True)
        if isinstance(outcome, Ran):
            return outcome.output
        return not_executed(outcome.decision, request.tool_call)

    def _reviewed(self, tracker: Tracker, request: Any, reviewed: Reviewed) -> Steps:
        """Act on the turn review's answer: its message, or run the approved / edited call once."""
        if reviewed.message is not None:
            return reviewed.message
        call = dict(reviewed.call)
        if call is not request.tool_call and call != request.tool_call:
            edited = request_for_edit(request, call)
            if edited is None:
                return not_executed(reviewed.decision, call)
            request = edited
            tracker.alias[plain(call.get("id"))] = reviewed.cid
        main = Call(call.get("name"), call.get("args"), reviewed.cid)
        return (yield from self._run(request, main, reviewed.decision))

    def review_turn(self, tracker: Tracker, messages: Sequence[Any], config: Mapping[str, Any]) -> Deciding[None]:
        """Review every escalated call of the latest model turn with one interrupt (``GuardMiddleware``).

        Each answer is audited (``Session.review``) and settled into ``tracker.reviewed``, which
        ``wrap_tool_call`` acts on: approve → the decided call runs once; reject / respond → the
        model gets the message; edit → the reviewer's call is decided again (no probes), runs if it
        is ``execute``, is asked about again (a new interrupt of the same node) if it escalates
        again, and is refused otherwise.  The pending list depends only on the turn and the answers,
        so a resumed node asks the same questions in the same order.
        """
        session = tracker.session
        last = next((m for m in reversed(messages) if isinstance(m, BaseMessage)), None)
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return None
        pending: list[tuple[Decision, str, dict[str, Any]]] = []
        for asked in last.tool_calls:
            decision = tracker.bound(asked["name"], asked["args"], asked.get("id"))
            if decision is not None and decision.verdict is Verdict.ESCALATE and type(asked.get("id")) is str:
                pending.append((decision, str(asked["id"]), dict(asked)))
        for _ in range(self.max_reviews):
            if not pending:
                return None
            answers = ask_human_batch(session, [(decision, call) for decision, _, call in pending])
            again: list[tuple[Decision, str, dict[str, Any]]] = []
            for (decision, cid, call), answer in zip(pending, answers, strict=True):
                settled = yield from self._settle_answer(tracker, decision, cid, call, answer, config)
                if isinstance(settled, Reviewed):
                    tracker.reviewed[plain(call.get("id"))] = settled
                else:
                    again.append(settled)
            pending = again
        for decision, _, call in pending:
            tracker.reviewed[plain(call.get("id"))] = Reviewed(decision, "", call, not_executed(decision, call))
        return None

    def _settle_answer(
        self,
        tracker: Tracker,
        decision: Decision,
        cid: str,
        call: dict[str, Any],
        answer: Mapping[str, Any],
        config: Mapping[str, Any],
    ) -> Deciding[Reviewed | tuple[Decision, str, dict[str, Any]]]:
        """One reviewed call: its settled outcome, or (decision, call id, call) to ask about again."""
        session = tracker.session
        original = tracker.bound(call["name"], call["args"], call.get("id"))
        first = original if original is not None else decision
        kind, reviewer, message = review_answer(answer, config)
        edited = answer.get("edited_action") if kind == "edit" else None
        new_call = None
        if isinstance(edited, Mapping):
            new_call = {**call, "name": edited.get("name") or call.get("name"), "args": edited.get("args")}
        link = {} if new_call is None else {"edited_call_id": edited_call_id(cid, new_call["name"], new_call["args"])}
        try:
            session.review(cid, kind, reviewer=reviewer, message=message, **link)
        except (AuditError, BindingError) as exc:
            log.warning("carbguard: %s", exc)
            return Reviewed(first, cid, call, not_executed(decision, call))
        if kind == "approve":
            return Reviewed(first, cid, call, None)
        if kind == "respond":
            return Reviewed(first, cid, call, respond_message(call, message))
        if kind == "reject" or new_call is None:
            return Reviewed(first, cid, call, reject_message(call, decision, message))
        new_cid = link["edited_call_id"]
        known = session.decision(new_cid)
        again = known if known is not None and decided_call(known, new_call["name"], new_call["args"]) else None
        if again is None:
            again = yield Call(new_call["name"], new_call["args"], new_cid)
        if again.allowed:
            return Reviewed(first, new_cid, new_call, None)
        if again.verdict is Verdict.ESCALATE:
            return again, new_cid, new_call
        return Reviewed(first, new_cid, new_call, not_executed(again, new_call))

    def _review(self, tracker: Tracker, request: Any, cid: str, decision: Any, config: Mapping[str, Any]) -> Steps:
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
                return not_executed(decision, call)
            if kind == "approve":
                return (yield from self._run(request, Call(call.get("name"), call.get("args"), cid), decision))
            if kind == "respond":
                return respond_message(call, message)
            if kind == "reject" or new_call is None:
                return reject_message(call, decision, message)
            # edit: the reviewer's call is a new call, decided (and probed) on its own arguments before it may run
            edited_request = request_for_edit(request, new_call)
            if edited_request is None:
                return not_executed(decision, new_call)
            request, call = edited_request, new_call
            cid = link["edited_call_id"]
            tracker.alias[plain(call.get("id"))] = cid
            main = Call(call["name"], call["args"], cid)
            known = session.decision(cid)
            known = known if known is not None and decided_call(known, call["name"], call["args"]) else None
            outcome = yield Step(main, request, known)
            if isinstance(outcome, Ran):
                return outcome.output
            decision = outcome.decision
            if decision.verdict is not Verdict.ESCALATE:
                return not_executed(decision, call)
        return not_executed(decision, call)

    def _start(self, request: Any) -> Mapping[str, Any]:
        """Before the first call of an agent runs: its tools against the policy (warnings); the run's config."""
        tools = list(getattr(request.runtime, "tools", None) or ()) or [request.tool]
        self.check_tools([t for t in tools if t is not None])
        return getattr(request.runtime, "config", None) or current_config()

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Sync interceptor (LangGraph ``ToolCallWrapper``)."""
        config = self._start(request)
        try:
            tracker, _ = self.sync(config, state_messages(request.state, self.messages_key))
        except UnboundCallError as exc:
            return self._unbound(request, handler, exc)
        with closed_on_error(tracker.session):  # a tool error or an interrupt: the session_end is written
            out = self._drive(tracker, self._flow(tracker, request, config), handler)
        note_output(tracker, out)
        return out

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async interceptor (LangGraph ``AsyncToolCallWrapper``)."""
        config = self._start(request)
        try:
            tracker, _ = await self.async_sync(config, state_messages(request.state, self.messages_key))
        except UnboundCallError as exc:
            out = self._unbound(request, handler, exc)
            return (await out) if not isinstance(out, ToolMessage) else out
        with closed_on_error(tracker.session):
            out = await self._adrive(tracker, self._flow(tracker, request, config), handler)
        note_output(tracker, out)
        return out

    def _drive(self, tracker: Tracker, flow: Steps, handler: Callable[[Any], Any]) -> Any:
        """Run a tool-call generator to its end, each call it asks for through :func:`guarded` (``handler`` runs)."""
        try:
            step = next(flow)
            while True:
                tools = self._tools(tracker, step.request, step.call)
                outcome = guarded(
                    tracker.session, step.call, tools, handler, decision=step.decision, cleared=step.cleared
                )
                step = flow.send(outcome)
        except StopIteration as stop:
            return stop.value

    async def _adrive(self, tracker: Tracker, flow: Steps, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """The async twin of :meth:`_drive` (:func:`aguarded`)."""
        try:
            step = next(flow)
            while True:
                tools = self._tools(tracker, step.request, step.call)
                outcome = await aguarded(
                    tracker.session, step.call, tools, handler, decision=step.decision, cleared=step.cleared
                )
                step = flow.send(outcome)
        except StopIteration as stop:
            return stop.value

    def _unbound(self, request: Any, handler: Callable[[Any], Any], exc: UnboundCallError) -> Any:
        """No session can be keyed: enforcing refuses the call; shadow lets it run undecided (and says so)."""
        log.warning("%s", exc)
        call = request.tool_call
        if self.guard.mode is Mode.SHADOW:
            return handler(request)
        return ToolMessage(
            content=str(exc), name=plain(call.get("name")), tool_call_id=plain(call.get("id")), status="error"
        )
