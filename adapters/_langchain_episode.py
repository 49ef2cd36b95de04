"""The start and the end of a run of a hand-built LangGraph graph: its input declared; its final answer fed, its
episode's metadata set, its session closed (see :mod:`guard.adapters.langchain`).

A guarded ``ToolNode`` runs only when the model calls tools, so it never sees the run's final
answer nor its end; :class:`~guard.adapters.langchain.GuardMiddleware` sees both and closes its
own sessions (episode metadata for it: ``Session.annotate`` from inside the run, or
``EpisodeRecorder(path, annotate=...)``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from guard.adapters._langchain_core import AIMessage, log
from guard.adapters._langchain_middleware import GuardMiddleware
from guard.adapters._langchain_wrapper import GuardToolWrapper
from guard.runtime import Session


def tool_node_wrapper(node: Any) -> GuardToolWrapper:
    """The :class:`GuardToolWrapper` of a :func:`~guard.adapters.langchain.guard_tool_node` (or ``node`` itself).

    Raises TypeError for anything else (a ``GuardMiddleware`` closes its own sessions).
    """
    if isinstance(node, GuardToolWrapper):
        return node
    wrapper = getattr(node, "guard_wrapper", None)
    if isinstance(wrapper, GuardToolWrapper):
        return wrapper
    if isinstance(node, GuardMiddleware):
        raise TypeError(
            "GuardMiddleware closes its own sessions (after_agent); episode metadata: EpisodeRecorder(annotate=...)"
        )
    raise TypeError(f"not a guard_tool_node or GuardToolWrapper: {type(node).__name__}")


def _final(messages: Sequence[Any]) -> bool:
    """Whether the last message is a final answer (an AI message without tool calls)."""
    last = messages[-1] if messages else None
    return isinstance(last, AIMessage) and not last.tool_calls and not last.invalid_tool_calls


def _annotate(session: Session, meta: Mapping[str, Any]) -> None:
    if meta and session.recording.recorded:
        log.warning(
            "carbguard: session %r: episode already written; metadata %s not recorded", session.session_id, sorted(meta)
        )
    session.annotate(**meta)


def start_run(node: Any, config: Mapping[str, Any], messages: Sequence[Any]) -> list[Any]:
    """Declare the human's input of a run of a graph with a guarded ``ToolNode``: its new human turns are user turns.

    A ``ToolNode`` never sees its graph's input arrive; without a checkpointer (whose record of the
    thread's inputs it reads) no ``HumanMessage`` in the state is a user turn unless declared here
    (docs/security.md#the-user-channel).  ``node``: the :func:`~guard.adapters.langchain.guard_tool_node`
    (or its ``GuardToolWrapper``); ``config``: the run's config; ``messages``: the input's messages
    (anything ``convert_to_messages`` reads), history passed back in first: only the human messages
    after its last message of another kind are declared, so pass the human's own words last.
    Returns them as messages with ids (a run without a thread id is keyed by the first), to pass as
    the input: ``app.invoke({"messages": start_run(node, config, msgs)}, config)``.
    """
    return tool_node_wrapper(node).declare_input(config, messages)


def end_run(node: Any, config: Mapping[str, Any], messages: Sequence[Any], **meta: Any) -> Session:
    """End a run of a graph with a guarded ``ToolNode``: set its episode's metadata, feed its final answer, close it.

    ``node``: the :func:`~guard.adapters.langchain.guard_tool_node` (or its ``GuardToolWrapper``);
    ``config``: the run's config (its ``thread_id`` keys the session); ``messages``: the run's final
    messages (``out["messages"]``).  ``meta`` goes to ``Session.annotate`` (``model``, ``task``,
    ``attack``, ``utility``, ``tags``; InputError on anything else) before the final answer is fed, so
    a recording guard writes the episode with it; then the session is closed (its ``session_end``
    audit entry).  Returns the session.  A run that called no tool gets its session here.  A thread
    that runs again continues the session as a new segment (docs/audit.md): its episode was written
    by the first run, so metadata given then is not recorded (logged as a warning).
    """
    wrapper = tool_node_wrapper(node)
    head = messages[:-1] if _final(messages) else messages
    tracker, _ = wrapper.sync(config, head)  # everything but the final answer, which writes the episode
    _annotate(tracker.session, meta)
    wrapper.sync(config, messages)
    tracker.session.close()
    return tracker.session


async def aend_run(node: Any, config: Mapping[str, Any], messages: Sequence[Any], **meta: Any) -> Session:
    """Async twin of :func:`end_run` (the writes off the event loop)."""
    wrapper = tool_node_wrapper(node)
    head = messages[:-1] if _final(messages) else messages
    tracker, _ = await wrapper.async_sync(config, head)
    _annotate(tracker.session, meta)
    await wrapper.async_sync(config, messages)
    await asyncio.to_thread(tracker.session.close)
    return tracker.session


__all__ = ["aend_run", "end_run", "start_run", "tool_node_wrapper"]
