"""The stages of one decision (docs/concepts.md), each a small function; :func:`run_pipeline` reads top down."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from guard.audit import KeyedSink
from guard.calls import CallState
from guard.decision import Certification, Decision, Reason, Verdict
from guard.errors import InputError
from guard.graph import NodeSet
from guard.jsonio import encode_float
from guard.limits import MAX_ARG_CHARS
from guard.policy import Policy, ToolKind, ToolSpec
from guard.provenance import risky_provenance
from guard.records import Trust, canonical_args, proposal, safe_repr
from guard.redaction import (
    MAX_ERROR_CHARS,
    Redactor,
    hash_value,
    is_text,
    name_masker,
    redact_args,
    redact_safecommit,
    redact_text,
    safe_text,
)
from guard.scorer import WeightedScorer
from guard.segments import Segments

if TYPE_CHECKING:
    from guard.protocols import Certifier
    from guard.protocols import SessionState as Session

_TRUST = {
    ToolKind.PRIVATE_SOURCE: Trust.TOOL_PRIVATE,
    ToolKind.PUBLIC_SOURCE: Trust.TOOL_PUBLIC,
    ToolKind.UNTRUSTED_SOURCE: Trust.TOOL_UNTRUSTED,
}


class PassThroughCertifier:
    """Used when a policy configures no SafeCommit: side-effectful proposals under λ̂ execute."""

    def certify(self, session: Session, node: int, spec: ToolSpec) -> Certification:
        """Always ``execute``."""
        return Certification(Verdict.EXECUTE, Reason.UNDER_THRESHOLD, "score under the threshold")


def default_certifier(policy: Policy) -> Certifier:
    """The certifier a policy configures."""
    if policy.safecommit is None:
        return PassThroughCertifier()
    from guard.safecommit.runtime import PolicyCertifier

    certifier: Certifier = PolicyCertifier(policy)
    return certifier


def result_trust(policy: Policy, tool: str) -> Trust:
    """Trust of a tool's results, from the policy (unknown tools count as untrusted)."""
    spec = policy.tool(tool)
    if spec is None:
        return Trust.TOOL_UNTRUSTED
    kinds = spec.source_kinds
    if {ToolKind.PRIVATE_SOURCE, ToolKind.UNTRUSTED_SOURCE} <= kinds:
        return Trust.TOOL_PRIVATE_UNTRUSTED  # docs/policy.md#kind: both at once
    return _TRUST.get(spec.source_kind, Trust.TOOL_PUBLIC)


# --------------------------------------------------------------------------- pipeline


class StageError(RuntimeError):
    """An exception inside a stage, re-raised with private values redacted from its message.

    ``kind`` is the original exception's class name; ``detail`` its message after
    :func:`redact_text`.  The original is kept as ``__cause__`` (never written anywhere).
    """

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail


def run_pipeline(session: Session, tool: Any, args: Any, call_id: Any) -> Decision:
    """normalize → extend → select → score → gate → certify; one short loop of stages.

    An exception in a stage is re-raised as :class:`StageError`, whose message has the proposal's
    argument values, private-source spans and canary matches redacted (the runtime puts that message
    into the decision and the audit entry).
    """
    try:
        return _run_stages(session, tool, args, call_id)
    except Exception as exc:
        raise StageError(type(exc).__name__, redact_text(str(exc)[:MAX_ERROR_CHARS], session, args)) from exc


_SIGNATURE = "a value of this call stands inside known attack wording (a signature): escalated by the signature rule"


def _run_stages(session: Session, tool: Any, args: Any, call_id: Any) -> Decision:
    guard = session.guard
    refusal, canon = normalize(session, tool, args, call_id)
    if refusal is not None:
        return refusal
    node = extend(session, tool, canon, call_id)
    selected = select(session, node)
    score, features = score_proposal(session, node, selected)
    # read once: a trip by another thread mid-decision cannot mix two thresholds
    threshold, named = guard.breaker.threshold_in_force()
    base = Decision(
        verdict=Verdict.EXECUTE,
        reason=Reason.UNDER_THRESHOLD,
        message="score under the threshold",
        score=score,
        threshold=threshold,
        features=features,
        selected=selected.ordered if type(selected) is NodeSet else tuple(sorted(selected)),
        proposal_index=node,
        tool=tool,
        call_id=call_id,
        args=MappingProxyType(canon),
    )
    if score > threshold:
        return dataclasses.replace(
            base,
            verdict=Verdict.ESCALATE,
            reason=Reason.RISK_BUDGET,
            message=f"risk score {score:.3f} exceeds {named} {threshold:.3f}",
        )
    scorer = guard.scorer  # the signature rule: known attack wording escalates, outside the score
    if isinstance(scorer, WeightedScorer) and scorer.signature_hit(session.graph, node, features):
        return dataclasses.replace(base, verdict=Verdict.ESCALATE, reason=Reason.SIGNATURE, message=_SIGNATURE)
    # guard.breaker: after an alarm, a human decides actions (all of them, or the risky ones: the fallback)
    escalation = guard.breaker.escalation(guard.policy.tool(tool), lambda: risky_provenance(session, node, selected))
    if escalation is not None:
        return dataclasses.replace(base, verdict=Verdict.ESCALATE, reason=Reason.RISK_BUDGET, message=escalation)
    return certify(session, node, base)


def normalize(session: Session, tool: Any, args: Any, call_id: Any) -> tuple[Decision | None, dict[str, Any]]:
    """Refuse what the guard does not understand, and any call id that already ran: ``(refusal, {})``; for
    a well-formed call ``(None, canonical copy of the arguments)``.

    Tool names and call ids must be plain ``str`` (a subclass can compare equal to one name while
    printing as another); a call id that already executed or has a result is refused, so one approval
    never runs twice; a call id reused for a different tool or arguments is refused.
    """
    policy = session.guard.policy
    if type(call_id) is not str or not call_id or not is_text(call_id):
        message = "call id must be a non-empty plain string of valid Unicode"
        return _refusal(Verdict.ESCALATE, Reason.BAD_ARGUMENTS, message, tool, call_id), {}
    if type(tool) is not str or policy.tool(tool) is None:
        message = f"tool {redact_text(_clip(tool), session, args)} is not in policy {policy.name!r}"
        return _refusal(policy.on_unknown, Reason.UNKNOWN_TOOL, message, tool, call_id), {}
    problem, canon = _args_problem(args)
    if problem is not None:
        return _refusal(Verdict.ESCALATE, Reason.BAD_ARGUMENTS, problem, tool, call_id), {}
    if session.call_state(call_id) in (CallState.RAN, CallState.ANSWERED):
        message = f"call id {redact_text(_clip(call_id), session, args)} already ran; a decided call runs once"
        return _refusal(Verdict.ESCALATE, Reason.CALL_REUSED, message, tool, call_id), {}
    seen = session.proposals.get(call_id)
    if seen is not None and (seen.tool != tool or dict(seen.args) != canon):
        message = f"call id {redact_text(_clip(call_id), session, args)} reused for another call"
        return _refusal(Verdict.ESCALATE, Reason.CALL_REUSED, message, tool, call_id), {}
    return None, canon


def _clip(value: Any, limit: int = 200) -> str:
    text = safe_repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _args_problem(args: Any) -> tuple[str | None, dict[str, Any]]:
    """Why ``args`` cannot be decided (None: they can), and their canonical copy (``{}`` when they cannot):
    only what :func:`canonical_args` copies exactly is accepted.

    The checks run on the canonical copy (exact built-in types, read without calling any method the
    caller could override), the copy that is then scored, audited and handed to the tool.
    """
    if not isinstance(args, Mapping):
        return f"arguments must be a JSON object, got {type(args).__name__}", {}
    try:
        canon = canonical_args(args)
    except InputError as exc:
        return str(exc)[:400], {}
    text = json.dumps(canon, allow_nan=False, sort_keys=True, ensure_ascii=False)
    if not is_text(text):
        return "arguments hold invalid Unicode (a lone surrogate)", {}
    if len(text) > MAX_ARG_CHARS:
        return f"arguments are {len(text)} characters of JSON; the limit is {MAX_ARG_CHARS}", {}
    return None, canon


def extend(session: Session, tool: str, args: Mapping[str, Any], call_id: str) -> int:
    """Add the proposal as a node (once per call id; a re-decision after probes reuses it)."""
    seen = session.proposals.get(call_id)
    if seen is not None:
        return seen.index
    record = proposal(session.next_index, tool, args, call_id)
    session.propose(call_id, record)
    return record.index


def select(session: Session, node: int) -> frozenset[int]:
    """The selector's evidence, checked: a subset of the earlier records."""
    selected = session.guard.selector.select(session.graph, node, session.session_id)
    if not isinstance(selected, frozenset | set) or not _earlier_records(session, node, selected):
        raise TypeError(f"selector returned {type(selected).__name__} that is not a subset of the prefix")
    return selected if type(selected) is NodeSet else frozenset(selected)


def _earlier_records(session: Session, node: int, selected: frozenset[int] | set[int]) -> bool:
    """Whether every member is a record index of the session below ``node``.

    Membership is checked against the graph's record indices, so a member that is not one (a string,
    a float, a future record) fails, and every member must be an ``int`` (``3.0`` and ``True`` equal an
    index but are not one).  A :class:`NodeSet` is checked on its bit set, with no loop per member.
    """
    graph = session.graph
    if type(selected) is NodeSet:
        return not selected.bits >> node and not selected.bits & ~graph.node_bits()
    if not all(type(member) is int for member in selected):
        return False
    return not selected or (graph.records.keys() >= selected and max(selected) < node)


def score_proposal(session: Session, node: int, selected: frozenset[int]) -> tuple[float, Mapping[str, bool]]:
    """The scorer's number, checked to be finite."""
    out = session.guard.scorer.score(session.graph, node, selected)
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], int | float)):
        raise TypeError(f"scorer returned {type(out).__name__}, expected (float, features)")
    score, features = out
    if not math.isfinite(score):
        raise ValueError(f"scorer returned a non-finite score {score!r}")
    return float(score), features


def certify(session: Session, node: int, base: Decision) -> Decision:
    """SafeCommit for side-effectful tools and for every sink whose arguments leave the system.

    A sink with ``payload_args`` is certified whatever its ``effect``: a "read" whose URL or query
    carries data (``get_webpage(url=...?d=<secret>)``) sends that data out, so it is a send.  Only
    calls with no side effect and no outbound payload execute on the score alone.
    """
    spec = session.guard.policy.tools[base.tool]
    if not spec.certified:
        return base
    cert = session.guard.certifier.certify(session, node, spec)
    if not isinstance(cert, Certification):
        raise TypeError(f"certifier returned {type(cert).__name__}, expected Certification")
    return dataclasses.replace(
        base, verdict=cert.verdict, reason=cert.reason, message=cert.message, probes=cert.probes, safecommit=cert.log
    )


# --------------------------------------------------------------------------- refusals and audit


def _refusal(verdict: Verdict, reason: Reason, message: str, tool: Any, call_id: Any) -> Decision:
    return Decision(
        verdict=verdict,
        reason=reason,
        message=message,
        score=None,
        threshold=None,
        tool=tool if type(tool) is str else safe_repr(tool)[:200],
        call_id=call_id if type(call_id) is str else safe_repr(call_id)[:200],
    )


def internal_error(tool: Any, call_id: Any, exc: BaseException, threshold: float | None) -> Decision:
    """The fail-closed decision for any error inside the pipeline."""
    kind, detail = (exc.kind, exc.detail) if isinstance(exc, StageError) else (type(exc).__name__, str(exc))
    message = f"internal error, failing closed: {kind}: {detail[:500]}"
    return dataclasses.replace(
        _refusal(Verdict.ESCALATE, Reason.INTERNAL_ERROR, message, tool, call_id), threshold=threshold
    )


def audit_entry(session: Session, decision: Decision, args: Any, error: str | None) -> dict[str, Any]:
    """The audit entry of docs/audit.md: argument values hashed (keyed with the sink's key), every string redacted."""
    guard = session.guard
    raw_names = guard.policy.audit.raw_args
    key = guard.audit.value_key if isinstance(guard.audit, KeyedSink) else None  # another sink may have no key
    key = key if isinstance(key, bytes) else None
    known_tool = isinstance(decision.tool, str) and guard.policy.tool(decision.tool) is not None
    if decision.args is not None:  # decided: audit exactly the canonical copy that was scored
        args = decision.args
    redactor = Redactor(session, args, decision.proposal_index).redact
    tool, mask = (decision.tool, None) if known_tool else name_masker(decision.tool, key)

    def redact(text: str) -> str:
        return safe_text(redactor(mask(text) if mask is not None else text))

    return {
        "ts": time.time(),
        **_session_fields(session),  # chosen by the integrator; links decisions and reviews
        "mode": guard.mode,
        "proposal_index": decision.proposal_index,
        "call_id": redact(decision.call_id),
        "tool": safe_text(tool),
        "args": redact_args(args, raw_names, key),
        "verdict": decision.verdict.value,
        "reason": decision.reason.value,
        "message": redact(decision.message),
        "score": decision.score,
        "threshold": None if decision.threshold is None else encode_float(decision.threshold),
        "artifact": guard.artifact_id,
        "selected": list(decision.selected),
        "edges_in": _edges_in(session, decision.proposal_index),
        "features": dict(decision.features),
        "safecommit": redact_safecommit(decision.safecommit, raw_names, key, redact),
        "probes": [redact(p.name or p.tool) for p in decision.probes],
        "latency_us": round(decision.latency_us, 1),
        "error": redact(error) if error is not None else None,
    }


def _session_fields(session: Session, segment: int | None = None) -> dict[str, Any]:
    """``session`` (and, from a session's second segment on, ``segment``) of an audit entry (docs/audit.md).

    ``segment``: the segment the entry belongs to (default: the running one; guard.segments).
    """
    segments: Segments | None = getattr(session, "segments", None)
    fields = segments.fields(segment) if segments is not None else {"session": session.session_id}
    fields["session"] = safe_text(fields["session"])
    return fields


def review_entry(
    session: Session,
    decision: Decision,
    answer: str,
    reviewer: Any,
    message: Any,
    link: Mapping[str, Any],
    segment: int | None = None,
) -> dict[str, Any]:
    """The audit entry of a human's answer (``kind: review``), linked to the decision it answers.

    ``segment``: the session segment that decision was made in (its ``session`` id; default: the running one).
    """
    redact = Redactor(session, decision.args or {}, decision.proposal_index).redact
    known_tool = session.guard.policy.tool(decision.tool) is not None

    def text(value: Any) -> str | None:
        return safe_text(redact(value)) if isinstance(value, str) else None

    return {
        "ts": time.time(),
        "kind": "review",
        **_session_fields(session, segment),
        "proposal_index": decision.proposal_index,
        "call_id": text(decision.call_id),
        "tool": safe_text(decision.tool) if known_tool else text(decision.tool),
        "decision": {"verdict": decision.verdict.value, "reason": decision.reason.value, "score": decision.score},
        "answer": answer,
        "reviewer": text(reviewer) or "unknown",
        "message": text(message),
        **{str(k): text(v) for k, v in link.items()},
    }


def vouch_entry(session: Session, added: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    """The audit entry of a vouch (``kind: vouch``, docs/policy.md#vouched-destinations): the destinations
    application code vouched for in this session (hashed, as argument values are: a reviewer compares them
    with a call's hashed arguments), and the record index from which they count."""
    guard = session.guard
    key = guard.audit.value_key if isinstance(guard.audit, KeyedSink) else None
    return {
        "ts": time.time(),
        "event": "vouch",
        "kind": "vouch",
        **_session_fields(session),
        "from_index": len(session.graph.records),
        "vouched": {k: [hash_value(v, key) for v in values] for k, values in added.items() if values},
    }


def _edges_in(session: Session, node: int) -> list[list[Any]]:
    """``[source index, edge type]`` of every edge into the proposal (for reports)."""
    if node < 0 or node not in session.graph.records:
        return []
    blocks = session.graph.edge_blocks(node)  # from the edge rules: no networkx view on the decision path
    return sorted([source, etype] for sources, etype, _ in blocks for source in sources)
