"""The user channel of the LangChain adapter: which ``HumanMessage`` is the human's own turn.

Only what a human wrote may enter the user channel (``Session.observe_user``), since a user turn
can make a call trusted (:mod:`guard.evidence.trust`); see docs/security.md#the-user-channel.  A
``HumanMessage`` in the graph state is not proof of that: ``SummarizationMiddleware`` replaces old
turns with a ``HumanMessage`` the model wrote from tool results, a tool's ``Command(update=...)``,
any node or middleware (``RemoveMessage(REMOVE_ALL_MESSAGES)`` and a summary, say) or application
code's ``graph.update_state(...)`` can add one, and a middleware can rewrite one in place.

The rule is provenance, not the message class nor its place in the state: a ``HumanMessage`` is a
user turn only when its text is the text of a human message the guard saw **arrive as a run's
input**, and it carries no framework marker (``lc_source`` in ``additional_kwargs`` or
``response_metadata``, which LangChain's own middlewares set).  Everything else is observed as
untrusted content.  The guard sees an input arrive

- with a checkpointer: only in the checkpointer's record of the thread's inputs (read when a
  ``HumanMessage`` of unknown provenance appears, at a run's start too; see
  :mod:`guard.adapters._langchain_inputs`, which also finds a run's own input before it is saved).
  The state never vouches: a run's start sees the thread's history first, which holds whatever a
  tool, a failed run or ``update_state`` (``source: "update"``) left there.  A checkpointer that
  cannot be read, and a ``ToolNode`` in a run with ``durability="exit"`` (its input is stored only
  at its end), vouch for nothing: fail closed;
- without a checkpointer, in ``create_agent`` (``GuardMiddleware.before_agent``): the state at a
  run's start is the caller's input; its human messages after the last message of another kind,
  less those the session saw a tool's ``Command`` add (history passed back in is not vouched for);
- without a checkpointer, in a ``ToolNode`` graph: only what the caller declares with
  :func:`declare_input` (``start_run``); the node sees no run start and nothing is stored, so
  every other ``HumanMessage`` is untrusted content.

A ``HumanMessage`` already fed whose content later changes (a middleware rewrote it in place) is
observed again, as untrusted content: the new text is not what the human wrote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from guard.adapters._langchain_content import marker
from guard.adapters._langchain_core import BaseMessage, HumanMessage, Tracker, has_checkpointer, text_of
from guard.adapters._langchain_inputs import aread, read, root_step, source


def _unseen(tracker: Tracker, messages: Sequence[Any]) -> list[Any]:
    """The messages of ``messages`` the session has not been fed (messages without an id are left to the feed)."""
    out = []
    for message in messages:
        if not isinstance(message, BaseMessage) or type(message.id) is not str or not message.id:
            continue
        if f"id:{message.id}" not in tracker.seen:
            out.append(message)
    return out


def _texts(messages: Iterable[Any], inserted: set[str] | frozenset[str] = frozenset()) -> set[str]:
    return {
        text_of(m) for m in messages if isinstance(m, HumanMessage) and marker(m) is None and text_of(m) not in inserted
    }


def _trailing(messages: Sequence[Any]) -> list[Any]:
    """The human messages after the last message of another kind (a run's input is appended last)."""
    out = []
    for message in reversed(messages):
        if not isinstance(message, HumanMessage):
            break
        out.append(message)
    return out[::-1]


def _unknown(tracker: Tracker, messages: Iterable[Any]) -> bool:
    """Whether a human message among ``messages`` has a text no input the guard saw carried."""
    return any(isinstance(m, HumanMessage) and marker(m) is None and text_of(m) not in tracker.said for m in messages)


def learn(tracker: Tracker, config: Mapping[str, Any], messages: Sequence[Any], entry: bool) -> bool:
    """Learn the caller's texts that ``messages`` show; whether the checkpointer's record must be read.

    ``entry``: ``messages`` are the state at the start of a ``create_agent`` run (``before_agent``).
    With a checkpointer the state vouches for nothing (it holds the thread's history, and whatever
    a tool, a failed run or ``update_state`` left in it): the record of inputs is read whenever a
    human message of unknown provenance is new.  Without one, only a run's start is the caller's
    input; a ``ToolNode`` learns nothing from the state (see :func:`declare_input`).
    """
    new = _unseen(tracker, messages)
    if has_checkpointer(config):
        return _unknown(tracker, new)
    if entry:
        tracker.said |= _texts(_trailing(new), tracker.inserted)
    return False


def declare_input(tracker: Tracker, messages: Sequence[Any]) -> None:
    """The caller declares ``messages`` to be a run's input: its new human turns are user turns.

    Those are the human messages after the last message of another kind, less those the session
    saw a tool's ``Command`` add: history the caller passes back in is not vouched for (as at a
    ``create_agent`` run's start).
    """
    tracker.said |= _texts(_trailing(messages), tracker.inserted)


def _vouch(tracker: Tracker, own: Sequence[Any], inputs: Sequence[Any]) -> None:
    """Add what the checkpointer vouches for: the run's own new human turns, every human text of the thread's inputs."""
    tracker.said |= _texts(_trailing(own), tracker.inserted) | _texts(inputs)


def read_inputs(tracker: Tracker, config: Mapping[str, Any], key: str, start: Sequence[Any] | None = None) -> None:
    """Add the human texts the checkpointer shows arrived as input to ``tracker.said``.

    ``start``: the state at a ``create_agent`` run's start, whose own input the checkpointer may
    not have saved yet (see :mod:`guard.adapters._langchain_inputs`).  A checkpointer that cannot
    be read adds nothing (fail closed: the messages are then untrusted content).
    """
    found = source(config)
    if found is not None:
        _vouch(tracker, *read(*found, key, None if start is None else (start, root_step(config))))


async def aread_inputs(
    tracker: Tracker, config: Mapping[str, Any], key: str, start: Sequence[Any] | None = None
) -> None:
    """Async twin of :func:`read_inputs`."""
    found = source(config)
    if found is not None:
        _vouch(tracker, *(await aread(*found, key, None if start is None else (start, root_step(config)))))


def note_output(tracker: Tracker, output: Any) -> None:
    """Remember the human messages a tool's ``Command(update=...)`` adds: they are never the caller's input."""
    update = getattr(output, "update", None)
    if not isinstance(update, Mapping):
        return
    found = update.get("messages") or ()
    for message in found if isinstance(found, list | tuple) else (found,):
        if isinstance(message, HumanMessage):
            tracker.inserted.add(text_of(message))


__all__ = ["aread_inputs", "declare_input", "learn", "note_output", "read_inputs"]
