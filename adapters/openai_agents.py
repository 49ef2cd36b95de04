"""OpenAI Agents SDK adapter: every function-tool call of an ``Agent`` decided, bound and observed.

::

    from guard.adapters.openai_agents import run_sync
    result = run_sync(guard, agent, task, session_id="run-42")   # one session per run

or, with a session of your own: ``Runner.run_sync(guard_agent(agent, session), task)`` (after
``observe_input(session, task)``; close the session when the run is over).

How a call goes (each function tool is a guarded copy; the caller's tools are not changed):

0. Shadow mode (``run(..., mode="shadow")`` or a session of a ``Guard(..., mode="shadow")``):
   every call is decided and audited as in enforcing mode; nothing is blocked and no probe runs.
1. A **tool input guardrail** (the first of the tool's guardrails) decides the call with
   ``session.decide``; a ``probe`` verdict runs its probe calls (decided, authorized, observed)
   and decides again.  A refusal is the SDK's ``reject_content``: the tool does not run and the
   model gets the reason as the tool's output.  ``output_info`` carries verdict, reason, score
   and threshold (``result.tool_input_guardrail_results``).
2. The tool's **invoke is wrapped**: it calls ``session.authorize`` and hands the tool the
   authorized canonical arguments, then observes the tool's output with ``observe_result``.
   Why both: the SDK runs the tool on the model's raw argument text after the guardrails, and a
   guardrail cannot replace that text, so a guardrail alone could not guarantee that the tool
   runs with exactly the decided arguments.  A call without an ``execute`` decision (another
   guardrail path, changed arguments, a second run of one call id) is refused in the wrapper.

What it cannot see is listed in the README ("OpenAI Agents SDK"): hosted tools (refused at
build time unless named in ``unguarded``), MCP servers attached to the agent (refused), handoff
objects (refused; Agent handoffs are guarded with the same session) and the inner tools of an agent
used as a tool.

History: :func:`run`, :func:`run_sync` and :func:`run_streamed` feed the fresh session every item
the model will be shown before its first turn — the items of an SDK ``session=`` memory, then the
input (a continued conversation, ``result.to_input_list() + [turn]``) — see :func:`observe_items`;
with your own session, :func:`observe_input` does it.  Only the ``role: user`` messages of the
caller's own input are user turns (:mod:`guard.adapters._openai_history`).  An earlier
``function_call`` is history, never a decided call: nothing in the input can make it run.  An item
the guard does not understand, or a server-stored conversation (``previous_response_id``,
``conversation_id``), refuses the run with :class:`~guard.errors.InputError` before any tool runs.

Every model turn, on every entry point: the guarded copies' agent hooks
(:mod:`guard.adapters._openai_turns`) see the model's whole input just before the model reads it —
after a handoff input filter, ``nest_handoff_history`` or a ``call_model_input_filter`` changed
it — and observe every item the session was not fed as untrusted content (a ``role: user`` one
is remembered, so a continued ``to_input_list()`` keeps it untrusted); the calls of the model's
output are recorded as proposals the session saw.  A guarded tool decides only such a call.

Approval interrupts: ``input`` may be a ``RunState`` (``result.to_state()`` or
``RunState.from_string(agent, ...)``, approved or rejected).  The fresh session is fed the state's
history, and the state is restored against this run's guarded copies, so every pending call is
decided with the history before it runs.  ``Runner.run(agent, result.to_state())`` in the same
process stays guarded too: the state holds the interrupted run's guarded copies, which decide in
that run's session (which saw the turn that proposed the call) as its next segment.  A pending
call whose turn the session never saw — a state from an earlier run that was not fed with
``observe_input(session, state)`` — is refused (``escalate``, ``internal_error``), as is every
call of a session that has seen nothing.

Lifecycle: the session :func:`run`, :func:`run_sync` and :func:`run_streamed` open ends
(``session_end``) on every way out of the run — final answer, approval interrupt, exception,
cancellation — and is ``result.carbguard_session`` (``exc.carbguard_session``).  A segment reopened
by a direct ``Runner.run`` ends when the caller closes it, at the latest when its guarded copies
are garbage collected.  See docs/integrations/openai-agents.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from guard.adapters._openai_history import (
    SERVER_STATE,
    memory_items,
    observe_items,
    observe_state,
    on_default_loop,
)
from guard.adapters._refusal import refusal_text as refusal_text
from guard.adapters._shadow import guard_in_mode
from guard.errors import GuardError, InputError
from guard.runtime import Guard, Session

try:
    from agents import Agent, FunctionTool, Runner, RunState
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "guard.adapters.openai_agents needs the OpenAI Agents SDK: pip install 'carbguard[openai-agents]'"
    ) from exc

from guard.adapters._openai_tools import MAX_PROBE_ROUNDS as MAX_PROBE_ROUNDS
from guard.adapters._openai_tools import guard_tools as guard_tools
from guard.adapters._openai_turns import TurnHooks

__all__ = ["guard_agent", "guard_tools", "observe_input", "refusal_text", "run", "run_streamed", "run_sync"]

log = logging.getLogger("guard.adapters.openai_agents")


def guard_agent(agent: Agent[Any], session: Session, *, unguarded: Iterable[str] = ()) -> Agent[Any]:
    """A copy of ``agent`` (and of the agents it hands off to) whose tools are guarded by ``session``."""
    return _guard_agent(agent, session, tuple(unguarded), {})


def _guard_agent(
    agent: Agent[Any], session: Session, unguarded: tuple[str, ...], memo: dict[int, Agent[Any]]
) -> Agent[Any]:
    if id(agent) in memo:
        return memo[id(agent)]
    if agent.mcp_servers:
        raise GuardError(
            f"agent {agent.name!r} has MCP servers, whose tools the SDK lists at run time where the guard cannot "
            "wrap them; put the server behind `carbguard mcp-proxy` or pass its tools as function tools"
        )
    tools = guard_tools(agent.tools, session, unguarded=unguarded)
    guarded = agent.clone(tools=tools, handoffs=[], hooks=TurnHooks(session, agent.hooks))
    memo[id(agent)] = guarded
    handoffs: list[Any] = []
    for target in agent.handoffs:
        if not isinstance(target, Agent):
            raise GuardError(
                f"agent {agent.name!r}: handoff {getattr(target, 'agent_name', target)!r} is a Handoff object whose "
                "agent the guard cannot reach; list the Agent itself in handoffs"
            )
        handoffs.append(_guard_agent(target, session, unguarded, memo))
    guarded.handoffs = handoffs
    return guarded


def observe_input(session: Session, items: str | Sequence[Any] | RunState[Any, Any], *, memory: bool = False) -> int:
    """Feed a run's input into your own session: a string, items (``result.to_input_list() + [turn]``) or a RunState.

    For ``Runner.run(guard_agent(agent, session), items)``: call it before the run — first with the
    items of any SDK ``session=`` memory and ``memory=True`` (a replay: untrusted content, never user
    turns), then with the input.  The ``role: user`` messages you pass are the user turns (pass only
    what the human wrote; a message an earlier guarded run's handoff filter wrote stays untrusted).
    To resume a ``RunState``, load it with the guarded agent
    (``RunState.from_string(guard_agent(agent, session), stored)``) and pass the state here
    (``memory=True`` when the run uses a ``session=`` memory): its history is fed and its pending
    calls become decidable — a pending call of a state this session was not fed is refused, since
    the state holds items (the earlier tool results) the session never observed.  What the model
    reads later that you did not pass here is observed as untrusted content before its turn.
    Returns the number of user turns; raises InputError on an item it does not understand (see
    :func:`observe_items`).
    """
    if isinstance(items, RunState):
        starting = items._starting_agent or items._current_agent
        graph = _agent_graph(starting) if isinstance(starting, Agent) else []
        names = frozenset(t.name for a in graph for t in a.tools if isinstance(t, FunctionTool))
        return observe_state(session, items, memory=memory, function_tools=names)
    return observe_items(session, items, "session= memory" if memory else "run input", user_channel=not memory)


def _open(guard: Guard, session_id: str, mode: str | None, kwargs: Mapping[str, Any]) -> Session:
    """The run's own session (checked before anything is opened)."""
    if not isinstance(session_id, str) or not session_id:
        raise InputError("a guarded run needs a session_id (one session per run; there is no shared default)")
    server = [k for k in SERVER_STATE if kwargs.get(k)]
    if server:
        raise InputError(
            f"carbguard: {', '.join(server)} continues a conversation stored by the server, which the guard "
            "cannot read; pass the earlier items as input (result.to_input_list()) or an SDK session= instead"
        )
    return guard_in_mode(guard, mode).session(session_id)


def _feed(
    session: Session,
    agent: Agent[Any],
    input: str | Sequence[Any] | RunState[Any, Any],
    unguarded: Iterable[str],
    kwargs: Mapping[str, Any],
    memory: Sequence[Any] | None,
) -> Agent[Any]:
    """Feed ``session`` everything the model will be shown before its next turn; the guarded agent."""
    if isinstance(input, RunState):
        names = frozenset(t.name for a in _agent_graph(agent) for t in a.tools if isinstance(t, FunctionTool))
        observe_state(session, input, memory=kwargs.get("session") is not None, function_tools=names)
    else:
        if memory is not None:
            observe_items(session, memory, "session= memory", user_channel=False)
        users = observe_items(session, input, "run input")
        if not users:
            raise InputError("the run's input has no user text for the guard to record")
    memo: dict[int, Agent[Any]] = {}
    guarded = _guard_agent(agent, session, tuple(unguarded), memo)
    # a segment that a direct Runner.run(agent, result.to_state()) reopens ends here at the latest
    for copy_ in memo.values():
        weakref.finalize(copy_, session.close)
    return guarded


def _agent_graph(agent: Agent[Any]) -> list[Agent[Any]]:
    """``agent`` and every Agent it can hand off to (each once)."""
    seen: dict[int, Agent[Any]] = {}
    todo = [agent]
    while todo:
        current = todo.pop()
        if id(current) not in seen:
            seen[id(current)] = current
            todo.extend(h for h in current.handoffs if isinstance(h, Agent))
    return list(seen.values())


async def _rebind(state: RunState[Any, Any], guarded: Agent[Any]) -> RunState[Any, Any]:
    """``state`` with its agents and pending tools resolved against the guarded copies (the SDK's own round trip).

    A ``RunState`` holds the agent objects it was made with (``RunState.from_string(agent, ...)`` with
    your own agent, or the guarded copies of an earlier run bound to that run's session); the
    resumed run must run this run's guarded copies, so the state is serialized and restored against
    ``guarded``, keeping its context object (and with it the approvals).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the context is not serialized: the live context object is passed back below
        data = state.to_json(context_serializer=lambda _context: {}, include_tracing_api_key=True)
    return await RunState.from_json(guarded, data, context_override=state._context)


def _finish(session: Session, result: Any) -> Any:
    """Observe the final answer and attach the session to the result.

    (A ``role: user`` item a handoff input filter wrote is remembered by the guarded copies' turn
    hooks on every entry point, see :mod:`guard.adapters._openai_turns`.)
    """
    if isinstance(result.final_output, str) and not getattr(result, "interruptions", None):
        session.observe_final(result.final_output)
    _attach(result, session)
    return result


def _attach(target: object, session: Session | None) -> None:
    """``target.carbguard_session = session`` where the object allows it (results, exceptions)."""
    if session is not None:
        with contextlib.suppress(AttributeError, TypeError):
            target.carbguard_session = session  # type: ignore[attr-defined]


async def run(
    guard: Guard,
    agent: Agent[Any],
    input: str | Sequence[Any] | RunState[Any, Any],
    *,
    session_id: str,
    unguarded: Iterable[str] = (),
    mode: str | None = None,
    **kwargs: Any,
) -> Any:
    """``Runner.run`` with a fresh session ``session_id`` that has seen the run's whole input; returns its result.

    ``input`` may be a ``RunState`` (an approval interrupt resumed: ``result.to_state()`` or
    ``RunState.from_string(agent, ...)``, approved or rejected): the session is fed the state's
    history and the state runs this run's guarded tools.  The session ends (``session_end``) when
    the run does — a final answer, an approval interrupt, any exception, a cancellation — and is
    ``result.carbguard_session`` (and ``exc.carbguard_session`` of an exception it raised).
    ``mode="shadow"`` decides and audits every call exactly as enforcing would, but blocks nothing
    and runs no probe (default: the guard's own mode).
    """
    session = _open(guard, session_id, mode, kwargs)
    try:
        memory = kwargs.get("session")
        items = None if memory is None or isinstance(input, RunState) else await memory_items(memory)
        guarded = _feed(session, agent, input, unguarded, kwargs, items)
        start = await _rebind(input, guarded) if isinstance(input, RunState) else input
        return _finish(session, await Runner.run(guarded, start, **kwargs))  # type: ignore[arg-type]
    except BaseException as exc:
        _attach(exc, session)
        raise
    finally:
        session.close()


def run_sync(
    guard: Guard,
    agent: Agent[Any],
    input: str | Sequence[Any] | RunState[Any, Any],
    *,
    session_id: str,
    unguarded: Iterable[str] = (),
    mode: str | None = None,
    **kwargs: Any,
) -> Any:
    """The sync twin of :func:`run` (``Runner.run_sync``)."""
    session = _open(guard, session_id, mode, kwargs)
    try:
        memory = kwargs.get("session")
        items = None if memory is None or isinstance(input, RunState) else on_default_loop(memory_items(memory))
        guarded = _feed(session, agent, input, unguarded, kwargs, items)
        start = on_default_loop(_rebind(input, guarded)) if isinstance(input, RunState) else input
        return _finish(session, Runner.run_sync(guarded, start, **kwargs))  # type: ignore[arg-type]
    except BaseException as exc:
        _attach(exc, session)
        raise
    finally:
        session.close()


def run_streamed(
    guard: Guard,
    agent: Agent[Any],
    input: str | Sequence[Any],
    *,
    session_id: str,
    unguarded: Iterable[str] = (),
    mode: str | None = None,
    **kwargs: Any,
) -> Any:
    """``Runner.run_streamed`` with a fresh session ``session_id``; returns the streaming result.

    Call it inside a running event loop and consume ``result.stream_events()``.  The session is
    ``result.carbguard_session`` and ends (``session_end``) when the run's task does: its last
    event, an exception, an approval interrupt or ``result.cancel()``.  An SDK ``session=`` memory
    or a ``RunState`` needs :func:`run` (their history is read before the run starts).
    """
    if kwargs.get("session") is not None or isinstance(input, RunState):
        raise InputError("carbguard: run_streamed takes no session= memory or RunState; use run (or run_sync)")
    session = _open(guard, session_id, mode, kwargs)
    try:
        guarded = _feed(session, agent, input, unguarded, kwargs, None)
        result = Runner.run_streamed(guarded, input, **kwargs)  # type: ignore[arg-type]
    except BaseException as exc:
        _attach(exc, session)
        session.close()
        raise
    _attach(result, session)
    task = result.run_loop_task
    if task is None:  # pragma: no cover - the SDK always starts the run's task
        session.close()
        return result

    def ended(done: asyncio.Task[Any]) -> None:
        try:
            finished = not done.cancelled() and done.exception() is None and not result.interruptions
            if finished and isinstance(result.final_output, str):
                session.observe_final(result.final_output)
        finally:
            session.close()

    task.add_done_callback(ended)
    return result
