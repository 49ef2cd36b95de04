"""The steps and messages of the LangGraph interceptor (:mod:`guard.adapters._langchain_wrapper`): a guarded
call a tool-call generator asks for, the messages a human's answer or refusal becomes, and the requests an
authorized or edited call is run as."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from guard.adapters._langchain_core import ToolMessage, plain
from guard.adapters.flow import Call, Outcome
from guard.decision import Decision


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
