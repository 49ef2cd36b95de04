"""The steps and messages of the LangGraph interceptor (:mod:`guard.adapters._langchain_wrapper`): a guarded
call a tool-call generator asks for, the messages a human's answer or refusal becomes, and the requests an
authorized or edited call is run as."""

from __future__ import annotations

import itertools
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from guard.adapters._langchain_core import AIMessage, ToolMessage, Tracker, not_executed, plain
from guard.adapters.flow import Call, Outcome
from guard.decision import Decision, Verdict


@dataclass(frozen=True, slots=True)
class Step:
    """A guarded call a tool-call generator asks for: ``call`` run as ``request``; answered with its outcome.

    ``decision``: the decision already taken on exactly this call; ``cleared``: a human approved it
    (see :func:`guard.adapters.flow.guarded`).
    """

    call: Call
    request: Any
    decision: Decision | None = None
    cleared: bool = False


Steps: TypeAlias = Generator[Step, Outcome[Any], Any]


def respond_message(call: Mapping[str, Any], message: str | None) -> ToolMessage:
    """The human's answer in place of the tool's (the tool does not run)."""
    return ToolMessage(
        content=message or "", name=plain(call.get("name")), tool_call_id=plain(call.get("id")), status="success"
    )


def reject_message(call: Mapping[str, Any], decision: Decision, message: str | None) -> ToolMessage:
    """The refusal the model gets when a human rejected an escalated call."""
    name = plain(call.get("name"))
    text = f"User rejected the tool call for `{name}` (carbguard escalated it: {decision.message})"
    return ToolMessage(
        content=f"{text} Reason: {message}" if message else text,
        name=name,
        tool_call_id=plain(call.get("id")),
        status="error",
    )


def escalated_before(tracker: Tracker, messages: Sequence[Any], call_id: Any) -> bool:
    """Whether a call before ``call_id`` in its model turn (the latest AI message holding it) escalated, unreviewed.

    A ``ToolNode`` runs a turn's calls side by side and LangGraph hands a node's answers to its
    interrupts in the order they are raised: only the turn's first escalated call may ask a human.
    """

    def waiting(call: Mapping[str, Any]) -> bool:
        decision = tracker.bound(call.get("name"), call.get("args"), call.get("id"))
        escalated = decision is not None and decision.verdict is Verdict.ESCALATE
        return escalated and plain(call.get("id")) not in tracker.reviewed

    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c.get("id") == call_id for c in message.tool_calls):
            return any(waiting(c) for c in itertools.takewhile(lambda c: c.get("id") != call_id, message.tool_calls))
    return False


def pending_turn(messages: Sequence[Any], call_id: Any) -> str | None:
    """The id of the model turn (latest AI message) that holds ``call_id`` once and no ToolMessage answers yet."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage) and any(c.get("id") == call_id for c in message.tool_calls):
            once = sum(c.get("id") == call_id for c in message.tool_calls) == 1
            later = messages[index + 1 :]
            answered = any(isinstance(m, ToolMessage) and m.tool_call_id == call_id for m in later)
            return message.id if once and not answered and type(message.id) is str else None
    return None


def keep(tracker: Tracker, turn: str | None, call: Mapping[str, Any], output: Any) -> Any:
    """Keep what a call of ``turn`` returned (only the latest turn's calls are kept); returns ``output``."""
    if turn is not None:
        with tracker.lock:
            for key in [k for k in tracker.kept if k[0] != turn]:
                del tracker.kept[key]
            tracker.kept[(turn, plain(call.get("id")))] = (call.get("name"), call.get("args"), output)
    return output


def kept_output(tracker: Tracker, turn: str | None, call: Mapping[str, Any]) -> Any | None:
    """What exactly this call of ``turn`` returned when it ran before LangGraph ran its ``ToolNode`` again."""
    kept = tracker.kept.get((turn, plain(call.get("id")))) if turn is not None else None
    if kept is None or kept[0] != call.get("name") or kept[1] != call.get("args"):
        return None
    return kept[2]


def wait_your_turn(call: Mapping[str, Any], decision: Decision) -> ToolMessage:
    """The refusal of an escalated call that follows another escalated call of its model turn (ToolNode review)."""
    refused = not_executed(decision, call)
    note = "Another call of the same model turn is waiting for a human: ask for this one again in a later turn."
    return refused.model_copy(update={"content": f"{str(refused.content).rstrip('.')}. {note}"})


def with_args(request: Any, call: Mapping[str, Any], bound: dict[str, Any]) -> Any:
    """The request with its tool call carrying the authorized canonical arguments (a fresh copy)."""
    return request.override(tool_call={**call, "args": bound})


def request_for_edit(request: Any, call: Mapping[str, Any]) -> Any | None:
    """The request pointed at the reviewer's call; None when the agent has no tool of that name."""
    tools = {t.name: t for t in getattr(request.runtime, "tools", None) or ()}
    tool = tools.get(call.get("name"))
    if tool is None and call.get("name") == request.tool_call.get("name"):
        tool = request.tool
    return None if tool is None else request.override(tool_call=dict(call), tool=tool)
