"""The checkpointer's record of a thread's inputs: the human texts that arrived as a run's input.

See :mod:`guard.adapters._langchain_user`.  LangGraph stores a root graph's input twice: as the
``__start__`` channel of its ``source: "input"`` checkpoint (the input as the caller gave it, or as
``update_state(..., as_node="__input__")`` did), and as the writes of the ``__start__`` task on that
checkpoint.  Node updates are ``source: "loop"`` and ``update_state`` is ``source: "update"``:
neither is read.

With the default ``durability="async"`` both are saved in the background, so a node that reads at
a run's start may find neither yet.  Then the run's input is the part of the state that follows the
checkpointer's latest checkpoint (the state the run loaded, nothing of this run saved yet) — read
only by the root graph's first node after the input (its step says no other node ran since) and
only when the state is exactly that checkpoint's messages followed by human messages only
(:func:`started`); a state the guard cannot match vouches for nothing.  A checkpointer that cannot be read vouches for
nothing (fail closed).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from guard.adapters._langchain_core import BaseMessage, HumanMessage

log = logging.getLogger("guard.adapters.langchain")

START = "__start__"
NULL_TASK = "00000000-0000-0000-0000-000000000000"  # LangGraph's task id of writes no task made


def source(config: Mapping[str, Any]) -> tuple[Any, dict[str, Any]] | None:
    """The run's checkpointer and the query for its thread's root graph, if it has both."""
    from langgraph.constants import CONFIG_KEY_CHECKPOINTER

    configurable = config.get("configurable") or {}
    saver, thread = configurable.get(CONFIG_KEY_CHECKPOINTER), configurable.get("thread_id")
    if saver is None or thread is None:
        return None
    return saver, {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _messages(value: Any) -> list[BaseMessage]:
    """A stored messages value as messages (none when it cannot be read: it vouches for nothing)."""
    from langchain_core.messages import convert_to_messages

    try:
        return list(convert_to_messages(value if isinstance(value, list | tuple) else [value]))
    except (TypeError, ValueError, NotImplementedError) as exc:
        log.warning("carbguard: a stored input of the thread could not be read (%s); not a user turn", exc)
        return []


def recorded(found: Iterable[Any], key: str) -> list[BaseMessage]:
    """The messages of the root graph's inputs among ``source: "input"`` checkpoint tuples."""
    out: list[BaseMessage] = []
    for checkpoint in found:
        values = (getattr(checkpoint, "checkpoint", None) or {}).get("channel_values") or {}
        given = values.get(START)
        if isinstance(given, Mapping) and key in given:
            out += _messages(given[key])
        for task, channel, value in getattr(checkpoint, "pending_writes", None) or ():
            if channel == key and task != NULL_TASK:  # the __start__ task's, the only task after an input
                out += _messages(value)
    return out


def _history(latest: Any, key: str) -> list[Any] | None:
    """The messages of the latest checkpoint, its writes no task made included; None when they cannot be read."""
    if latest is None:  # a new thread: the run loaded nothing
        return []
    values = (getattr(latest, "checkpoint", None) or {}).get("channel_values") or {}
    stored = values.get(key)
    if not isinstance(stored, list):  # not stored as a list (e.g. a delta channel): cannot be matched
        return None
    history = list(stored)
    for task, channel, value in getattr(latest, "pending_writes", None) or ():
        if channel == key and task == NULL_TASK:
            history += _messages(value)
    return history


def root_step(config: Mapping[str, Any]) -> int | None:
    """The step of the running node when it is a node of the root graph (None in a subgraph, or unknown)."""
    step = (config.get("metadata") or {}).get("langgraph_step")
    namespace = (config.get("configurable") or {}).get("checkpoint_ns")
    return step if type(step) is int and type(namespace) is str and "|" not in namespace else None


def started(latest: Any, messages: Sequence[Any], key: str, step: int | None) -> list[Any]:
    """The human messages a run's start added to the checkpointer's latest state ``latest`` (a tuple or None).

    Only when the node runs right after the run's input was applied (``step``: the root graph's
    step after the loaded checkpoint's input and ``__start__`` steps; so no node ran since) and
    ``messages`` (the state then) are exactly that state's messages, by id and in order, followed by
    human messages only; else none (a run that started from another checkpoint, an input that is
    more than the human's turn, a node before this one: left to the record).
    """
    history = _history(latest, key)
    before = -2 if latest is None else (getattr(latest, "metadata", None) or {}).get("step")
    if history is None or type(before) is not int or step != before + 3:
        return []
    ids = [getattr(m, "id", None) for m in history]
    if None in ids or len(messages) < len(ids) or [getattr(m, "id", None) for m in messages[: len(ids)]] != ids:
        return []
    rest = list(messages[len(ids) :])
    return rest if all(isinstance(m, HumanMessage) for m in rest) else []


Start = tuple[Sequence[Any], "int | None"]
"""The state at a run's start and the node's :func:`root_step`."""


def read(saver: Any, query: dict[str, Any], key: str, start: Start | None) -> tuple[list[Any], list[BaseMessage]]:
    """The run's own input when ``start`` is given (see :func:`started`); the thread's inputs."""
    try:
        latest = saver.get_tuple(query) if start is not None else None  # first: before this run saves anything
        found = list(saver.list(query, filter={"source": "input"}))
    except Exception as exc:  # noqa: BLE001 - an unreadable checkpointer vouches for nothing
        log.warning("carbguard: the thread's inputs could not be read (%s: %s)", type(exc).__name__, exc)
        return [], []
    return (started(latest, start[0], key, start[1]) if start is not None else []), recorded(found, key)


async def aread(
    saver: Any, query: dict[str, Any], key: str, start: Start | None
) -> tuple[list[Any], list[BaseMessage]]:
    """Async twin of :func:`read`."""
    try:
        latest = await saver.aget_tuple(query) if start is not None else None
        found = [t async for t in saver.alist(query, filter={"source": "input"})]
    except Exception as exc:  # noqa: BLE001 - an unreadable checkpointer vouches for nothing
        log.warning("carbguard: the thread's inputs could not be read (%s: %s)", type(exc).__name__, exc)
        return [], []
    return (started(latest, start[0], key, start[1]) if start is not None else []), recorded(found, key)


__all__ = ["Start", "aread", "read", "recorded", "root_step", "source", "started"]
