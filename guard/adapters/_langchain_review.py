"""Human review of escalated calls with LangChain's HITL conventions (see :mod:`guard.adapters.langchain`).

The interrupt value is a ``ToolApprovalRequest`` (``type: "tool_approval"``, ``tool_call_id``,
``name``, ``args``, ``description``) plus ``allowed_decisions`` and a ``guard`` block with what a
reviewer needs: verdict, reason, score, threshold, the features that fired and the source records
on the path (private text redacted).  Answers: ``approve``, ``reject`` (optional ``message``),
``edit`` (``edited_action: {name, args}``) and ``respond`` (``message``), each with an optional
``reviewer``; several escalations of one turn are answered together with
``Command(resume={interrupt_id: answer, ...})``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired

from typing_extensions import TypedDict  # pydantic needs typing_extensions.TypedDict before Python 3.12

from guard.decision import Decision
from guard.runtime import Session

ALLOWED = ["approve", "edit", "reject", "respond"]
MAX_SOURCE_CHARS = 300


class ApproveDecision(TypedDict):
    """Resume value that lets an escalated call run (same shape as LangChain's HITL)."""

    type: Literal["approve"]
    reviewer: NotRequired[str]


class RejectDecision(TypedDict):
    """Resume value that refuses an escalated call, with an optional reason for the model."""

    type: Literal["reject"]
    message: NotRequired[str]
    reviewer: NotRequired[str]


class EditedAction(TypedDict):
    """The reviewer's replacement call."""

    name: str
    args: dict[str, Any]


class EditDecision(TypedDict):
    """Resume value that replaces the call; the new call is decided again before it can run."""

    type: Literal["edit"]
    edited_action: EditedAction
    reviewer: NotRequired[str]


class RespondDecision(TypedDict):
    """Resume value that answers for the tool (it does not run); the model gets ``message``."""

    type: Literal["respond"]
    message: str
    reviewer: NotRequired[str]


def review_schema() -> Any:
    """The interrupt's ``response_schema`` (LangGraph checks every answer against it)."""
    from pydantic import Discriminator

    return Annotated[ApproveDecision | RejectDecision | EditDecision | RespondDecision, Discriminator("type")]


def review_context(session: Session, decision: Decision) -> dict[str, Any]:
    """What a reviewer needs: verdict, reason, score, threshold, fired features, redacted sources on the path."""
    graph, node = session.graph, decision.proposal_index

    def redact(text: str) -> str:
        return session.redacted(text, decision)

    sources = []
    if node in graph.records:
        edges = {source: etype for source, etype, _, _ in graph.edges_into(node)}
        for index in sorted(set(edges) | set(decision.selected)):
            record = graph.records[index]
            text = redact(record.text[:MAX_SOURCE_CHARS]) if record.text else ""
            sources.append(
                {
                    "index": index,
                    "kind": record.kind.value,
                    "tool": record.tool,
                    "trust": record.trust.value,
                    "private": graph.facts[index].private,
                    "edge": edges.get(index),
                    "text": "[redacted]" if graph.facts[index].private else text,
                }
            )
    return {
        "verdict": decision.verdict.value,
        "reason": decision.reason.value,
        "message": redact(decision.message),
        "score": decision.score,
        "threshold": decision.threshold,
        "features": sorted(name for name, value in decision.features.items() if value),
        "sources": sources,
        "session": session.session_id,
        "call_id": decision.call_id,
    }


def ask_human(session: Session, decision: Decision, call: Mapping[str, Any]) -> Mapping[str, Any]:
    """Raise the LangGraph interrupt for one escalated call and return the human's answer."""
    from langgraph.types import interrupt

    value = {
        "type": "tool_approval",
        "tool_call_id": call.get("id"),
        "name": call.get("name"),
        "args": call.get("args"),
        "description": f"carbguard escalated this call ({decision.reason.value}): {decision.message}",
        "allowed_decisions": list(ALLOWED),
        "guard": review_context(session, decision),
    }
    answer: Mapping[str, Any] = interrupt(value, response_schema=review_schema())
    return answer if isinstance(answer, Mapping) else {"type": "reject", "message": "unreadable review answer"}


def review_answer(answer: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """(kind, reviewer, message) of an answer; an unknown kind is a rejection."""
    kind = answer.get("type")
    kind = kind if kind in ALLOWED else "reject"
    configurable = config.get("configurable") or {}
    reviewer = answer.get("reviewer") or configurable.get("reviewer") or configurable.get("user_id") or "unknown"
    message = answer.get("message")
    return str(kind), str(reviewer), message if isinstance(message, str) else None
