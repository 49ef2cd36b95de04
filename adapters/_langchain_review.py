"""Human review of escalated calls with LangChain's HITL conventions (see :mod:`guard.adapters.langchain`).

``GuardMiddleware`` reviews a model turn at once, as LangChain's ``HumanInTheLoopMiddleware`` does in
its batched mode: after the model, **one** interrupt lists every escalated call of the turn,

    ``{"action_requests": [request, ...], "review_configs": [{"action_name", "allowed_decisions"}, ...]}``

where each request is a ``ToolApprovalRequest`` (``type: "tool_approval"``, ``tool_call_id``,
``name``, ``args``, ``description``) plus ``allowed_decisions`` and a ``guard`` block with what a
reviewer needs: verdict, reason, score, threshold, the features that fired and the source records
on the path (private text redacted).  It is answered with ``Command(resume={"decisions": [...]})``,
one decision per request in order, or ``{"decisions": {tool_call_id: decision, ...}}`` naming each
call; a single escalated call may also be answered with the bare decision.  Decisions: ``approve``,
``reject`` (optional ``message``), ``edit`` (``edited_action: {name, args}``) and ``respond``
(``message``), each with an optional ``reviewer``.  A missing, extra, unknown or malformed decision
is refused by the interrupt's ``response_schema`` (a ``pydantic.ValidationError`` naming the
problem; nothing runs and the same interrupt can be answered again).

:class:`GuardToolWrapper` alone (a hand-built graph's ``ToolNode``) asks per call: one interrupt
with the request as its value, for the first escalated call of a model turn only (the turn's calls
run side by side and LangGraph hands a node's answers to its interrupts in the order they are
raised, so a later escalated call of the turn is refused: ``_langchain_steps.escalated_before``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def action_request(session: Session, decision: Decision, call: Mapping[str, Any]) -> dict[str, Any]:
    """The reviewer's view of one escalated call (a ``ToolApprovalRequest`` plus the guard's context)."""
    return {
        "type": "tool_approval",
        "tool_call_id": call.get("id"),
        "name": call.get("name"),
        "args": call.get("args"),
        "description": f"carbguard escalated this call ({decision.reason.value}): {decision.message}",
        "allowed_decisions": list(ALLOWED),
        "guard": review_context(session, decision),
    }


def ask_human(session: Session, decision: Decision, call: Mapping[str, Any]) -> Mapping[str, Any]:
    """Raise the LangGraph interrupt for one escalated call and return the human's answer."""
    from langgraph.types import interrupt

    answer: Mapping[str, Any] = interrupt(action_request(session, decision, call), response_schema=review_schema())
    return answer if isinstance(answer, Mapping) else {"type": "reject", "message": "unreadable review answer"}


class ReviewAnswerError(ValueError):
    """A resume value that does not answer exactly the escalated calls of the interrupt."""


def check_decision(answer: Any, where: str) -> Mapping[str, Any]:
    """One decision, checked: a mapping whose ``type`` is known and whose fields that type needs are there."""
    if not isinstance(answer, Mapping):
        raise ReviewAnswerError(f"{where}: a decision must be a mapping with a 'type', got {type(answer).__name__}")
    kind = answer.get("type")
    if kind not in ALLOWED:
        raise ReviewAnswerError(f"{where}: unknown decision type {kind!r} (allowed: {', '.join(ALLOWED)})")
    for key in ("message", "reviewer"):
        if key in answer and answer[key] is not None and type(answer[key]) is not str:
            raise ReviewAnswerError(f"{where}: {key!r} must be a string")
    if kind == "respond" and type(answer.get("message")) is not str:
        raise ReviewAnswerError(f"{where}: a 'respond' decision needs a 'message' string (the tool's answer)")
    if kind == "edit":
        edited = answer.get("edited_action")
        if not isinstance(edited, Mapping) or not isinstance(edited.get("args"), Mapping):
            raise ReviewAnswerError(f"{where}: an 'edit' decision needs edited_action: {{name, args: {{...}}}}")
        if "name" in edited and (type(edited["name"]) is not str or not edited["name"]):
            raise ReviewAnswerError(f"{where}: edited_action.name must be a tool name")
    return answer


def batch_decisions(answer: Any, call_ids: Sequence[str]) -> list[Mapping[str, Any]]:
    """The decisions of a batched resume value, one per escalated call in order; anything else raises.

    ``{"decisions": [d, ...]}`` (by position, as LangChain's ``HITLResponse``), ``{"decisions":
    {tool_call_id: d, ...}}`` (by call), or a bare decision when exactly one call is pending.
    Missing, extra, duplicate or unknown entries raise :class:`ReviewAnswerError` naming them.
    """
    pending = ", ".join(call_ids)
    if not isinstance(answer, Mapping):
        raise ReviewAnswerError(f"carbguard review: the resume value must be a mapping, got {type(answer).__name__}")
    if "decisions" not in answer:
        if "type" in answer and len(call_ids) == 1:
            return [check_decision(answer, f"carbguard review of {call_ids[0]}")]
        raise ReviewAnswerError(
            f"carbguard review: {len(call_ids)} escalated calls ({pending}) are pending; resume with "
            '{"decisions": [one decision per call, in order]} or {"decisions": {tool_call_id: decision}}'
        )
    extra = sorted(str(k) for k in answer if k != "decisions")
    if extra:
        raise ReviewAnswerError(f"carbguard review: unknown keys {extra} in the resume value")
    decisions = answer["decisions"]
    if isinstance(decisions, Mapping):
        missing = [c for c in call_ids if c not in decisions]
        unknown = sorted(str(k) for k in decisions if k not in call_ids)
        if missing or unknown:
            raise ReviewAnswerError(
                f"carbguard review: decisions must name exactly the pending calls ({pending}); "
                f"missing {missing}, unknown {unknown}"
            )
        return [check_decision(decisions[c], f"carbguard review of {c}") for c in call_ids]
    if not isinstance(decisions, list | tuple):
        raise ReviewAnswerError("carbguard review: 'decisions' must be a list (in order) or a mapping by call id")
    if len(decisions) != len(call_ids):
        raise ReviewAnswerError(
            f"carbguard review: {len(decisions)} decisions for {len(call_ids)} escalated calls ({pending})"
        )
    return [check_decision(d, f"carbguard review of {c}") for d, c in zip(decisions, call_ids, strict=True)]


def batch_schema(call_ids: Sequence[str]) -> Any:
    """The batched interrupt's ``response_schema``: LangGraph runs :func:`batch_decisions` before saving an answer.

    A bad answer raises ``pydantic.ValidationError`` (with the reason) and is not saved, so the same
    interrupt can be answered again; nothing runs.
    """
    from pydantic import AfterValidator

    ids = tuple(call_ids)

    def check(value: Any) -> Any:
        batch_decisions(value, ids)
        return value

    return Annotated[Any, AfterValidator(check)]


def ask_human_batch(session: Session, pending: Sequence[tuple[Decision, Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    """Raise one LangGraph interrupt for every escalated call of a turn; one checked decision per call."""
    from langgraph.types import interrupt

    requests = [action_request(session, decision, call) for decision, call in pending]
    value = {
        "action_requests": requests,
        "review_configs": [{"action_name": r["name"], "allowed_decisions": list(ALLOWED)} for r in requests],
    }
    ids = [str(r["tool_call_id"]) for r in requests]
    return batch_decisions(interrupt(value, response_schema=batch_schema(ids)), ids)


def review_answer(answer: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """(kind, reviewer, message) of an answer; an unknown kind is a rejection."""
    kind = answer.get("type")
    kind = kind if kind in ALLOWED else "reject"
    configurable = config.get("configurable") or {}
    reviewer = answer.get("reviewer") or configurable.get("reviewer") or configurable.get("user_id") or "unknown"
    message = answer.get("message")
    return str(kind), str(reviewer), message if isinstance(message, str) else None
